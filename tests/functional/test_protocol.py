"""The protocol's API on every backend: claims, releases, reaper, checker,
and the defects each of these tests reproduced first."""

import threading
import uuid

import sqlalchemy as sa

from grant_scheduler import api
from grant_scheduler import decision
from grant_scheduler import injection
from grant_scheduler import storage
from grant_scheduler.db import api as db_api
from grant_scheduler.db import models
from grant_scheduler.db import sa_compat
from grant_scheduler.db import store as gs_store
from tests import base

SLOT = api.Resources(1, 1024, 10)
TWO_SLOTS = api.Resources(2, 2048, 20)


def new_uuid():
    return str(uuid.uuid4())


@base.with_scenarios(base.ALL_BACKENDS)
class Protocol(base.DatabaseTestCase):
    def setUp(self):
        super().setUp()
        self.gs = api.GrantScheduler(self.db)

    def add_host(self, name="host0", capacity=TWO_SLOTS, used=None):
        return self.gs.report_host(
            name, name + "-node", api.Capacity(capacity), used=used
        )

    def schedule(self, **kwargs):
        kwargs.setdefault("instance_uuids", [new_uuid()])
        return self.gs.schedule(
            SLOT.vcpus, SLOT.memory_mb, SLOT.disk_gb, **kwargs
        )

    def count(self, table):
        with self.db.reader() as conn:
            return conn.execute(
                sa_compat.select(sa.func.count()).select_from(table)
            ).scalar()

    def report(self, name="host0"):
        [report] = [r for r in self.gs.hosts() if r.state.host == name]
        return report

    # -- claims ------------------------------------------------------------

    def test_claim_and_release_are_idempotent(self):
        self.add_host()
        [sel] = self.schedule()
        first = self.gs.claim(sel.instance_uuid, sel.host, sel.node)
        again = self.gs.claim(sel.instance_uuid, sel.host, sel.node)
        self.assertEqual(("grant", "existing"), (first.how, again.how))
        self.assertEqual(SLOT, self.report().state.used)
        self.assertEqual(api.Resources(), self.report().state.granted)
        self.assertTrue(self.gs.release(sel.instance_uuid, sel.host, sel.node))
        self.assertFalse(
            self.gs.release(sel.instance_uuid, sel.host, sel.node)
        )
        self.assertEqual(api.Resources(), self.report().state.used)
        self.assertEqual(0, self.count(models.claims))
        self.gs.reap()
        self.assertEqual([], self.gs.check(quiescent=True))

    def test_live_grants_are_those_that_hold_room(self):
        # A consumed grant stays a row until the reaper deletes it; the
        # follower of every scheduler process asks for the live ones.
        self.add_host("host0")
        self.add_host("host1")
        [claimed] = self.schedule(force_hosts=["host0"])
        [held] = self.schedule(force_hosts=["host0"])
        [elsewhere] = self.schedule(force_hosts=["host1"])
        self.gs.claim(claimed.instance_uuid, claimed.host, claimed.node)
        every = self.gs.grants()
        self.assertEqual(
            {"consumed", "won"}, {g.state for g in every}, "both kinds"
        )
        self.assertEqual(
            [g for g in every if g.state == decision.GRANT_WON],
            self.gs.grants(live=True),
        )
        self.assertEqual(
            [held.instance_uuid],
            [g.instance_uuid for g in self.gs.grants("host0", live=True)],
        )
        self.assertEqual(
            {held.instance_uuid, elsewhere.instance_uuid},
            {g.instance_uuid for g in self.gs.grants(live=True)},
        )

    def test_repeated_claim_on_a_full_host_finds_the_first(self):
        self.add_host(capacity=SLOT)
        [sel] = self.schedule()
        self.gs.claim(sel.instance_uuid, sel.host, sel.node, SLOT)
        again = self.gs.claim(sel.instance_uuid, sel.host, sel.node, SLOT)
        self.assertEqual("existing", again.how)

    def test_claim_on_unknown_host(self):
        self.assertRaises(
            api.UnknownHost, self.gs.claim, new_uuid(), "nohost", "n", SLOT
        )

    def test_claim_without_grant_rechecks_capacity(self):
        self.add_host(capacity=SLOT)
        first = self.gs.claim(new_uuid(), "host0", "host0-node", SLOT)
        self.assertEqual("recheck", first.how)
        with self.assertRaises(api.ClaimRejected):
            self.gs.claim(new_uuid(), "host0", "host0-node", SLOT)
        # The rejected claim wrote nothing.
        self.assertEqual(1, self.count(models.claims))
        self.assertEqual(SLOT, self.report().state.used)

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

    def test_expired_grant_not_yet_reaped_is_consumed_exactly(self):
        # H5: the grant expired, but until the reaper deletes it its amount
        # is still in the host's live-grant sum, so consuming it is exact.
        self.add_host()
        [sel] = self.schedule()
        self.db.clock_offset = api.Settings().grant_ttl + 1
        outcome = self.gs.claim(sel.instance_uuid, sel.host, sel.node, SLOT)
        self.assertEqual("grant", outcome.how)
        self.gs.reap()
        self.assertEqual([], self.gs.check(quiescent=True))

    def test_reaped_grant_is_claimed_by_recheck_or_rejected(self):
        self.add_host(capacity=SLOT)
        [sel] = self.schedule()
        self.db.clock_offset = api.Settings().grant_ttl + 1
        self.assertEqual(1, self.gs.reap()["expired"])
        self.assertEqual(api.Resources(), self.report().state.granted)
        # Another instance takes the slot by recheck; the late build of the
        # reaped grant then no longer fits and is rejected (H5).
        self.gs.claim(new_uuid(), "host0", "host0-node", SLOT)
        with self.assertRaises(api.ClaimRejected):
            self.gs.claim(sel.instance_uuid, sel.host, sel.node, SLOT)
        self.assertEqual([], self.gs.check())

    def test_mark_moves_forward_out_of_order(self):
        self.add_host()
        first, second = (
            self.schedule(force_hosts=["host0"])[0] for _ in range(2)
        )
        grants = {g.ticket: g for g in self.gs.grants()}
        for selection in (second, first):  # builds arrive out of order
            self.gs.claim(selection.instance_uuid, "host0", "host0-node", SLOT)
            report = self.report()
            self.assertEqual(second.ticket, report.last_grant_ticket)
            self.assertEqual(
                grants[second.ticket].created_at, report.last_grant_at
            )
        self.gs.reap()
        self.assertEqual([], self.gs.check(quiescent=True))

    def test_claim_of_another_size_replaces_its_grant(self):
        self.add_host(capacity=TWO_SLOTS)
        [sel] = self.schedule()
        outcome = self.gs.claim(
            sel.instance_uuid, sel.host, sel.node, api.Resources(2, 2048, 20)
        )
        self.assertEqual("recheck", outcome.how)
        self.assertEqual(api.Resources(), self.report().state.granted)
        self.assertEqual([], self.gs.check())

    def test_grant_without_uuid_is_found_within_its_request_only(self):
        # Issue: a claim without its own grant took another request's
        # uuid-less grant of the same size (a reschedule to an alternate).
        self.add_host(capacity=api.Resources(3, 3072, 30))
        first, second = self.gs.schedule(
            SLOT.vcpus,
            SLOT.memory_mb,
            SLOT.disk_gb,
            num_instances=2,
            request_id="req-a",
        )
        self.assertIsNone(first.instance_uuid)
        outcome = self.gs.claim(
            new_uuid(), first.host, first.node, SLOT, request_id="req-b"
        )
        self.assertEqual("recheck", outcome.how)
        outcome = self.gs.claim(
            new_uuid(), first.host, first.node, SLOT, request_id="req-a"
        )
        self.assertEqual(
            ("grant", first.ticket), (outcome.how, outcome.grant_ticket)
        )
        with self.assertRaises(api.ClaimRejected):
            # Full: one recheck and one grant consumed, one grant live.
            self.gs.claim(new_uuid(), first.host, first.node, SLOT)
        self.assertEqual([], self.gs.check())

    # -- scheduling --------------------------------------------------------

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
        with self.assertRaises(api.NoValidHost) as caught:
            self.schedule(force_hosts=["nosuchhost"])
        self.assertIn("nosuchhost", str(caught.exception))

    def test_grant_committed_but_not_answered_is_withdrawn(self):
        # Issue: a failure after the grant committed (the database went
        # away, the process is stopping) left the grant holding a one-slot
        # host for grant_ttl; the caller's retry got NoValidHost.
        self.add_host(capacity=SLOT)
        hooks = injection.Hooks()

        def fail(**info):
            raise RuntimeError("the answer never leaves")

        hooks.on("grant_committed", fail)
        failing = api.GrantScheduler(self.db, hooks=hooks)
        self.assertRaises(RuntimeError, failing.schedule, 1, 1024, 10)
        self.assertEqual(0, self.count(models.grants))
        self.assertEqual(api.Resources(), self.report().state.granted)
        [sel] = self.schedule()
        self.assertEqual("host0", sel.host)

    def test_lost_acknowledgement_does_not_grant_twice(self):
        # A retried grant transaction whose first commit landed finds that
        # grant instead of writing a second one.
        host_id = self.add_host()
        store = gs_store.Store(self.db)
        tries = []
        ask = storage.Ask(SLOT, "s", new_uuid(), "r", 600)
        first = store.grant([host_id], ask, tries)
        again = store.grant([host_id], ask, tries)
        self.assertEqual(first.grant_id, again.grant_id)
        self.assertEqual(1, self.count(models.grants))
        self.assertEqual(SLOT, self.report().state.granted)

    # -- hosts -------------------------------------------------------------

    def test_report_changes_capacity_not_usage(self):
        self.add_host()
        [sel] = self.schedule()
        self.gs.claim(sel.instance_uuid, sel.host, sel.node)
        self.add_host(capacity=api.Resources(4, 4096, 40))
        self.assertEqual(SLOT, self.report().state.used)
        self.assertEqual(api.Resources(4, 4096, 40), self.report().state.limit)
        self.assertEqual([], self.gs.check())

    def test_resync_replaces_claims_and_release_cannot_go_negative(self):
        # Issue: report_host(used=...) then release made usage negative and
        # two 1-vCPU instances were placed on a 1-vCPU host.
        self.add_host(capacity=SLOT)
        [sel] = self.schedule()
        self.gs.claim(sel.instance_uuid, sel.host, sel.node, SLOT)
        self.add_host(capacity=SLOT, used=api.Resources(0, 0, 0))
        self.assertFalse(
            self.gs.release(sel.instance_uuid, sel.host, sel.node)
        )
        self.assertEqual(api.Resources(), self.report().state.used)
        self.assertEqual([], self.gs.check())
        self.schedule()
        self.assertRaises(api.NoValidHost, self.schedule)
        self.assertEqual([], self.gs.check())

    def test_resync_usage_no_claim_accounts_for_is_kept_apart(self):
        self.add_host(capacity=TWO_SLOTS, used=SLOT)
        [sel] = self.schedule()
        self.gs.claim(sel.instance_uuid, sel.host, sel.node, SLOT)
        self.assertEqual(TWO_SLOTS, self.report().state.used)
        self.assertEqual(SLOT, self.report().external)
        self.assertEqual([], self.gs.check())
        self.assertTrue(self.gs.release(sel.instance_uuid, sel.host, sel.node))
        self.assertEqual(SLOT, self.report().state.used)

    def test_registration_never_touches_a_known_host(self):
        # The Nova driver's path: insert-only, so a second sight of the
        # node with Nova's usage cannot undo claims or go negative.
        capacity = api.Capacity(SLOT)
        self.assertIsNotNone(
            self.gs.register_host("h", "n", capacity, used=api.Resources())
        )
        self.gs.claim(new_uuid(), "h", "n", SLOT)
        self.assertIsNone(
            self.gs.register_host("h", "n", capacity, used=api.Resources())
        )
        self.assertEqual(SLOT, self.report("h").state.used)
        self.assertRaises(api.NoValidHost, self.schedule)
        self.assertEqual([], self.gs.check())

    def test_checker_reports_overcommit_and_negative_usage(self):
        self.add_host()
        for _ in range(2):
            [sel] = self.schedule()
            self.gs.claim(sel.instance_uuid, sel.host, sel.node)
        self.assertEqual([], self.gs.check())
        self.add_host(capacity=SLOT)
        violations = self.gs.check()
        self.assertEqual({"I1"}, {v.invariant for v in violations})
        self.assertEqual(3, len(violations))
        with self.db.writer() as conn:
            conn.execute(
                models.inventories.update()
                .where(models.inventories.c.resource_class == "VCPU")
                .values(used=-1)
            )
        details = [v.detail for v in self.gs.check() if v.invariant == "I1"]
        self.assertIn("VCPU used is -1", details)

    def test_deleted_host_takes_its_grants_and_claims(self):
        # Issue: on SQLite a new host reused a deleted host's id and
        # inherited its won grants and claims.
        self.add_host("host0")
        [sel] = self.schedule()
        self.gs.claim(sel.instance_uuid, sel.host, sel.node)
        self.schedule()
        old_id = self.report().state.host_id
        self.assertTrue(self.gs.delete_host("host0", "host0-node"))
        self.assertEqual(0, self.count(models.grants))
        self.assertEqual(0, self.count(models.claims))
        self.assertNotEqual(old_id, self.add_host("host9"))
        self.assertEqual(api.Resources(), self.report("host9").state.used)
        self.schedule()
        self.schedule()
        self.assertEqual([], self.gs.check(quiescent=False))

    def test_reaper_and_checker_find_orphans(self):
        host_id = self.add_host("host0")
        with self.db.writer() as conn:
            for table, extra in (
                (
                    models.grants,
                    {
                        "ticket": 99,
                        "scheduler": "dead",
                        "state": decision.GRANT_WON,
                        "expires_at": self.db.now(600),
                    },
                ),
                (models.claims, {"instance_uuid": new_uuid()}),
            ):
                conn.execute(
                    table.insert().values(
                        host_id=host_id + 1000,
                        resources=models.encode(api.Resources(1, 1, 1)),
                        created_at=self.db.now(),
                        **extra,
                    )
                )
        quiescent = self.gs.check(quiescent=True)
        self.assertEqual(2, len(quiescent))
        self.assertIn("claim of instance", str(quiescent[-1]))
        counts = self.gs.reap()
        self.assertEqual(1, counts["orphaned"])
        self.assertEqual(1, counts["orphaned_claims"])
        self.assertEqual(
            0, self.count(models.grants) + self.count(models.claims)
        )
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
        for sel in selections[:30]:
            self.gs.claim(sel.instance_uuid, sel.host, sel.node)
        self.db.clock_offset = api.Settings().grant_ttl + 1
        results = []
        reapers = []
        for _ in range(3):
            database = db_api.Database(self.db_fixture.url)
            database.clock_offset = self.db.clock_offset
            self.addCleanup(database.dispose)
            reapers.append(api.GrantScheduler(database))
        threads = [
            threading.Thread(target=lambda r=r: results.append(r.reap()))
            for r in reapers
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        self.assertEqual(30, sum(r["superseded"] for r in results))
        self.assertEqual(10, sum(r["expired"] for r in results))
        self.assertEqual(0, self.count(models.grants))
        self.assertEqual([], self.gs.check(quiescent=True))

    def test_rescheduled_instance_gives_back_its_earlier_grant(self):
        self.add_host("host0")
        instance = new_uuid()
        [first] = self.schedule(instance_uuids=[instance])
        self.assertEqual(1, self.gs.withdraw_instance(instance))
        self.assertEqual(api.Resources(), self.report().state.granted)
        self.assertEqual(0, self.gs.withdraw_instance(instance))
        self.assertEqual([], self.gs.check(quiescent=True))

    def test_a_ticket_left_by_a_rolled_back_try_is_not_taken_for_ours(self):
        # A try that rolled back (a certification conflict, a lost
        # connection) leaves its ticket to the next grant on the host: the
        # retry must neither answer with that grant nor withdraw it.
        host_id = self.add_host()
        store = gs_store.Store(self.db)
        theirs = store.grant(
            [host_id], storage.Ask(SLOT, "other", new_uuid(), "req-o", 600), []
        )
        mine = storage.Ask(SLOT, "me", new_uuid(), "req-m", 600)
        tries = [(host_id, theirs.ticket)]
        outcome = store.grant([host_id], mine, tries)
        self.assertTrue(outcome.won)
        self.assertNotEqual(theirs.grant_id, outcome.grant_id)
        self.assertFalse(store.withdraw(host_id, theirs.ticket, mine))
        self.assertEqual(2, self.count(models.grants))
        self.assertEqual(TWO_SLOTS, self.report().state.granted)
        self.assertTrue(store.withdraw(host_id, outcome.ticket, mine))
        self.assertEqual(SLOT, self.report().state.granted)


@base.with_scenarios(base.ALL_BACKENDS)
class MaxUnit(base.DatabaseTestCase):
    """A single instance never exceeds a node's physical amount (its
    ``total``, as placement's ``max_unit``), whatever the allocation
    ratio lets the node hold in all."""

    OVERCOMMITTED = api.Capacity(
        api.Resources(2, 65536, 1000), cpu_allocation_ratio=16.0
    )

    def setUp(self):
        super().setUp()
        self.gs = api.GrantScheduler(self.db)
        for name in ("small0", "small1"):
            self.gs.report_host(name, name, self.OVERCOMMITTED)

    def test_an_instance_larger_than_every_node_gets_no_valid_host(self):
        with self.assertRaises(api.NoValidHost) as caught:
            self.gs.schedule(3, 1024, 10)
        self.assertFalse(caught.exception.contention)
        self.assertEqual([], self.gs.grants())
        # Two vCPUs fit, up to the overcommitted limit.
        for _ in range(16):
            self.gs.schedule(2, 1024, 10)
        self.assertEqual([], self.gs.check())

    def test_it_goes_to_the_node_whose_total_holds_it(self):
        big = api.Capacity(
            api.Resources(4, 65536, 1000), cpu_allocation_ratio=16.0
        )
        self.gs.report_host("big", "big", big)
        for _ in range(5):
            [selection] = self.gs.schedule(3, 1024, 10)
            self.assertEqual("big", selection.host)
        self.assertEqual({"big"}, {g.host for g in self.gs.grants()})
        self.assertEqual([], self.gs.check())

    def test_the_grant_write_refuses_it(self):
        # A view that offers a node anyway (stale, or a subclass's ranking)
        # still gets no grant there: the database's condition refuses it.
        store = gs_store.Store(self.db)
        [small] = [
            r.state for r in self.gs.hosts() if r.state.host == "small0"
        ]
        ask = storage.Ask(api.Resources(3, 1024, 10), "s", new_uuid(), "r", 60)
        taken = store.grant([small.host_id], ask, [])
        self.assertFalse(taken.won)
        self.assertEqual([], self.gs.grants())

    def test_a_claim_without_grant_is_rejected(self):
        with self.assertRaises(api.ClaimRejected):
            self.gs.claim(
                new_uuid(), "small0", "small0", api.Resources(3, 1024, 10)
            )
        self.assertEqual(api.Resources(), self.gs.hosts()[0].state.used)
        self.gs.claim(
            new_uuid(), "small0", "small0", api.Resources(2, 1024, 10)
        )
