"""The protocol's API on every backend: claims, releases, reaper, checker."""

import threading
import time
import uuid

import sqlalchemy as sa

from grant_scheduler import api
from grant_scheduler.db import api as db_api
from grant_scheduler.db import models
from tests import base

SLOT = api.Resources(1, 1024, 10)
TWO_SLOTS = api.Resources(2, 2048, 20)


def new_uuid():
    return str(uuid.uuid4())


@base.with_scenarios(base.ALL_BACKENDS)
class Protocol(base.DatabaseTestCase):
    def setUp(self):
        super().setUp()
        self.gs = api.GrantScheduler(
            self.db, settings=api.Settings(host_subset_size=1)
        )

    def add_host(self, name="host0", capacity=TWO_SLOTS):
        return self.gs.report_host(
            name, name + "-node", api.Capacity(capacity)
        )

    def schedule(self, **kwargs):
        kwargs.setdefault("instance_uuids", [new_uuid()])
        return self.gs.schedule(
            SLOT.vcpus, SLOT.memory_mb, SLOT.disk_gb, **kwargs
        )

    def count(self, table):
        with self.db.reader() as conn:
            return conn.execute(
                sa.select(sa.func.count()).select_from(table)
            ).scalar()

    def test_claim_and_release_are_idempotent(self):
        self.add_host()
        [sel] = self.schedule()
        first = self.gs.claim(sel.instance_uuid, sel.host, sel.node)
        again = self.gs.claim(sel.instance_uuid, sel.host, sel.node)
        self.assertEqual(("grant", "existing"), (first.how, again.how))
        [report] = self.gs.hosts()
        self.assertEqual(SLOT, report.state.used)
        self.assertTrue(self.gs.release(sel.instance_uuid, sel.host, sel.node))
        self.assertFalse(
            self.gs.release(sel.instance_uuid, sel.host, sel.node)
        )
        [report] = self.gs.hosts()
        self.assertEqual(api.Resources(), report.state.used)
        self.assertEqual(0, self.count(models.claims))
        self.gs.reap()
        self.assertEqual([], self.gs.check(quiescent=True))

    def test_claim_on_unknown_host(self):
        self.assertRaises(
            api.UnknownHost,
            self.gs.claim,
            new_uuid(),
            "nohost",
            "nonode",
            SLOT,
        )

    def test_claim_without_grant_rechecks_capacity(self):
        self.add_host(capacity=SLOT)
        first = self.gs.claim(new_uuid(), "host0", "host0-node", SLOT)
        self.assertEqual("recheck", first.how)
        with self.assertRaises(api.ClaimRejected):
            self.gs.claim(new_uuid(), "host0", "host0-node", SLOT)
        # The rejected claim wrote nothing.
        self.assertEqual(1, self.count(models.claims))
        [report] = self.gs.hosts()
        self.assertEqual(SLOT, report.state.used)

    def test_expired_grant_claimed_by_recheck_is_reaped(self):
        gs = api.GrantScheduler(self.db, settings=api.Settings(grant_ttl=1))
        self.add_host()
        [selection] = self.schedule()
        time.sleep(1.2)
        outcome = gs.claim(
            selection.instance_uuid, "host0", "host0-node", SLOT
        )
        self.assertEqual("recheck", outcome.how)
        [report] = gs.hosts()
        self.assertEqual(selection.ticket, report.last_grant_ticket)
        gs.reap()
        self.assertEqual([], gs.check(quiescent=True))

    def test_mark_moves_forward_out_of_order(self):
        self.add_host()
        first, second = (self.schedule()[0] for _ in range(2))
        grants = {g.ticket: g for g in self.gs.grants()}
        for selection in (second, first):  # builds arrive out of order
            self.gs.claim(selection.instance_uuid, "host0", "host0-node", SLOT)
            [report] = self.gs.hosts()
            self.assertEqual(second.ticket, report.last_grant_ticket)
            self.assertEqual(
                grants[second.ticket].created_at, report.last_grant_at
            )
        self.gs.reap()
        self.assertEqual([], self.gs.check(quiescent=True))

    def test_recheck_counts_other_live_grants(self):
        self.add_host(capacity=SLOT)
        self.schedule()
        with self.assertRaises(api.ClaimRejected):
            self.gs.claim(new_uuid(), "host0", "host0-node", SLOT)
        self.assertEqual([], self.gs.check())

    def test_claim_without_grant_or_resources_is_rejected(self):
        self.add_host()
        self.assertRaises(
            api.ClaimRejected, self.gs.claim, new_uuid(), "host0", "host0-node"
        )

    def test_grant_without_uuid_is_found_by_the_seeds_rule(self):
        self.add_host()
        first, second = self.gs.schedule(
            SLOT.vcpus, SLOT.memory_mb, SLOT.disk_gb, num_instances=2
        )
        self.assertIsNone(first.instance_uuid)
        outcome = self.gs.claim(new_uuid(), first.host, first.node, SLOT)
        self.assertEqual("grant", outcome.how)
        self.assertEqual(first.ticket, outcome.grant_ticket)
        outcome = self.gs.claim(new_uuid(), second.host, second.node, SLOT)
        self.assertEqual(second.ticket, outcome.grant_ticket)
        self.assertEqual([], self.gs.check())

    def test_alternates_are_other_hosts_with_room(self):
        for number in range(3):
            self.add_host("host%d" % number)
        [sel] = self.schedule(num_alternates=2)
        alternates = {a.host for a in sel.alternates}
        self.assertEqual(2, len(alternates))
        self.assertNotIn(sel.host, alternates)

    def test_force_and_ignore_hosts(self):
        for number in range(3):
            self.add_host("host%d" % number)
        [sel] = self.schedule(force_hosts=["host2"])
        self.assertEqual("host2", sel.host)
        [sel] = self.schedule(ignore_hosts=["host0", "host2"])
        self.assertEqual("host1", sel.host)
        self.assertRaises(
            api.NoValidHost, self.schedule, force_hosts=["nosuchhost"]
        )

    def test_report_changes_capacity_not_usage(self):
        self.add_host()
        [sel] = self.schedule()
        self.gs.claim(sel.instance_uuid, sel.host, sel.node)
        self.add_host(capacity=api.Resources(4, 4096, 40))
        [report] = self.gs.hosts()
        self.assertEqual(SLOT, report.state.used)
        self.assertEqual(api.Resources(4, 4096, 40), report.state.limit)
        self.gs.report_host(
            "host0",
            "host0-node",
            api.Capacity(api.Resources(4, 4096, 40)),
            used=api.Resources(),
        )
        [report] = self.gs.hosts()
        self.assertEqual(api.Resources(), report.state.used)
        # Usage no longer matches the claimed instance: I4 says so.
        self.assertEqual(
            ["I4"], sorted({v.invariant for v in self.gs.check()})
        )

    def test_checker_reports_overcommit(self):
        self.add_host()
        for _ in range(2):
            [sel] = self.schedule()
            self.gs.claim(sel.instance_uuid, sel.host, sel.node)
        self.assertEqual([], self.gs.check())
        self.add_host(capacity=SLOT)
        violations = self.gs.check()
        self.assertEqual({"I1"}, {v.invariant for v in violations})
        self.assertEqual(3, len(violations))

    def test_reaper_removes_orphans_and_withdrawn(self):
        self.add_host("host0")
        self.add_host("host1")
        [sel] = self.schedule(force_hosts=["host1"])
        self.assertTrue(self.gs.delete_host("host1", "host1-node"))
        with self.db.writer() as conn:
            conn.execute(
                models.grants.insert().values(
                    host_id=1,
                    ticket=99,
                    scheduler="dead",
                    vcpus=1,
                    memory_mb=1,
                    disk_gb=1,
                    state=models.GRANT_LOST,
                    created_at=sa.func.now(),
                )
            )
        counts = self.gs.reap()
        self.assertEqual(1, counts["orphaned"])
        self.assertEqual(1, counts["withdrawn"])
        self.assertEqual(0, self.count(models.grants))
        # Idempotent: a second run finds nothing.
        self.assertEqual(0, sum(self.gs.reap().values()))

    def test_concurrent_reapers_delete_each_grant_once(self):
        self.add_host(capacity=api.Resources(64, 65536, 640))
        selections = self.gs.schedule(
            SLOT.vcpus,
            SLOT.memory_mb,
            SLOT.disk_gb,
            instance_uuids=[new_uuid() for _ in range(40)],
        )
        for sel in selections:
            self.gs.claim(sel.instance_uuid, sel.host, sel.node)
        settings = api.Settings(reap_batch_size=3)
        results = []
        reapers = []
        for _ in range(3):
            database = db_api.Database(self.db_fixture.url)
            self.addCleanup(database.dispose)
            reapers.append(api.GrantScheduler(database, settings=settings))
        threads = [
            threading.Thread(target=lambda r=r: results.append(r.reap()))
            for r in reapers
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        self.assertEqual(40, sum(r["superseded"] for r in results))
        self.assertEqual(0, self.count(models.grants))
