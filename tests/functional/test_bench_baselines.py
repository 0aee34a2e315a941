"""The benchmark's baselines and sides, through the public API only.

The baselines write the product's tables only as the product does (its
columns, its grant states), the set-up writes the rows ``report_host``
writes, and the compute side claims as Nova's compute does.
"""

import random
import uuid

import sqlalchemy as sa

from grant_scheduler import api
from grant_scheduler.db import models
from grant_scheduler_bench import baselines
from grant_scheduler_bench import factory
from grant_scheduler_bench import strategies
from tests import base

ONE = api.Resources(1, 1024, 10)
CAPACITY = api.Capacity(
    api.Resources(16, 32768, 500),
    reserved=api.Resources(1, 2048, 0),
    cpu_allocation_ratio=4.0,
    ram_allocation_ratio=1.5,
)


class ProductTables(base.TestCase):
    def test_every_column_the_baselines_touch_is_the_products(self):
        for mine, theirs in (
            (baselines.HOSTS, models.hosts),
            (baselines.INVENTORIES, models.inventories),
            (baselines.GRANTS, models.grants),
            (baselines.CLAIMS, models.claims),
        ):
            with self.subTest(table=theirs.name):
                self.assertEqual(theirs.name, mine.name)
                self.assertLessEqual(
                    {c.name for c in mine.c}, {c.name for c in theirs.c}
                )

    def test_amounts_are_written_as_the_product_writes_them(self):
        # The product finds a claim's grant by equality of this text.
        for amount in (
            ONE,
            api.Resources(2, 0, 40),
            api.Resources(4, 8192, CUSTOM_BAREMETAL_GOLD=1, PCPU=2),
            api.NOTHING,
        ):
            with self.subTest(amount=amount):
                text = baselines.encode(amount)
                self.assertEqual(models.encode(amount), text)
                self.assertEqual(amount, baselines.decode(text))

    def test_the_naive_grant_ends_in_a_state_the_product_writes(self):
        self.assertIn("'%s'" % baselines.WON, _check_text())
        self.assertNotIn("pending", _check_text())


def _check_text():
    [check] = [
        c
        for c in models.grants.constraints
        if isinstance(c, sa.CheckConstraint)
    ]
    return str(check.sqltext)


class Spread(base.TestCase):
    """``api.Spread``: a seeded ranking chooses the same again."""

    def states(self):
        return [
            api.HostState(n, "h%d" % n, "h%d" % n, CAPACITY, api.NOTHING)
            for n in range(10)
        ]

    def choices(self, seed):
        view = api.View(self.states(), api.Spread(random.Random(seed)))
        request = api.Request.build(1, 1024, 10)
        return [view.candidates(request, 3)[0].host for _ in range(20)]

    def test_the_same_seed_chooses_the_same(self):
        self.assertEqual(self.choices(7), self.choices(7))
        self.assertGreater(len(set(self.choices(7))), 1)
        self.assertNotEqual(self.choices(7), self.choices(8))


@base.with_scenarios(base.ALL_BACKENDS)
class Baselines(base.DatabaseTestCase):
    def gs(self, store_cls=None, hooks=None):
        gs = factory.grant_scheduler(
            self.db_fixture.url, hooks=hooks, store_cls=store_cls
        )
        self.addCleanup(gs.database.dispose)
        return gs

    def grant_states(self):
        with self.db.reader() as conn:
            return sorted(
                row[0]
                for row in conn.execute(sa.text("SELECT state FROM gs_grants"))
            )

    def unverified(self):
        with self.db.reader() as conn:
            return conn.execute(
                sa.text("SELECT COUNT(*) FROM gs_bench_naive_grants")
            ).scalar()

    def test_reset_writes_the_rows_report_host_writes(self):
        baselines.reset(self.db, ["bench-1", "bench-2"], CAPACITY)
        admin = api.GrantScheduler(self.db)
        admin.report_host("reported", "reported", CAPACITY)
        reports = {r.state.host: r for r in admin.hosts()}
        self.assertEqual({"bench-1", "bench-2", "reported"}, set(reports))

        def comparable(report):
            state = report.state
            return (
                state.capacity,
                state.limit,
                state.used,
                state.granted,
                report.claimed,
                report.external,
            )

        self.assertEqual(
            comparable(reports["reported"]), comparable(reports["bench-1"])
        )
        self.assertEqual([], admin.check(quiescent=True))
        # Every strategy then places on them.
        [selection] = self.gs().schedule(1, 1024, 10)
        self.assertIn(selection.host, ("bench-1", "bench-2", "reported"))

    def test_naive_grants_are_won_grants_the_compute_side_consumes(self):
        baselines.reset(
            self.db, ["only"], api.Capacity(api.Resources(2, 2048, 20))
        )
        naive = self.gs(baselines.NaiveStore)
        compute = strategies.ClaimingCompute(self.gs())
        for _ in range(2):
            [selection] = naive.schedule(
                1, 1024, 10, instance_uuids=[str(uuid.uuid4())]
            )
            self.assertEqual(
                ["won"], [s for s in self.grant_states() if s == "won"]
            )
            self.assertEqual(0, self.unverified())
            self.assertTrue(
                compute.claim(selection.instance_uuid, "only", "only", ONE)
            )
            [claim] = [
                c
                for c in compute.gs.claims()
                if c.instance_uuid == selection.instance_uuid
            ]
            # Claimed by its grant, as Nova's compute side claims.
            self.assertEqual(selection.ticket, claim.grant_ticket)
        self.assertEqual(["consumed", "consumed"], self.grant_states())
        # Full: the naive rule refuses, and leaves nothing behind.
        self.assertRaises(api.NoValidHost, naive.schedule, 1, 1024, 10)
        self.assertEqual(0, self.unverified())
        self.assertEqual([], api.GrantScheduler(self.db).check())

    def test_placement_model_allocates_on_its_generation_only(self):
        baselines.reset(
            self.db, ["only"], api.Capacity(api.Resources(2, 2048, 20))
        )
        store = self.gs(baselines.PlacementModelStore).store
        [(state, generation)] = store.read_with_generation()
        self.assertEqual(("only", api.NOTHING), (state.host, state.used))
        first, second = str(uuid.uuid4()), str(uuid.uuid4())
        self.assertTrue(store.allocate(state.host_id, generation, ONE, first))
        # A stale generation writes nothing.
        self.assertFalse(
            store.allocate(state.host_id, generation, ONE, second)
        )
        [(state, moved)] = store.read_with_generation()
        self.assertEqual(generation + 1, moved)
        self.assertEqual(ONE, state.used)
        admin = api.GrantScheduler(self.db)
        self.assertEqual([first], [c.instance_uuid for c in admin.claims()])
        self.assertEqual([], admin.check())


@base.with_scenarios(base.SERVERS)
class NaiveOvercommits(base.DatabaseTestCase):
    """H1 with the seed's rule, in one thread: A stamps first, and B, run
    whole while A's grant is uncommitted, wins on a node with room for one;
    A then wins too."""

    def test_earliest_stamp_wins_overcommits(self):
        baselines.reset(self.db, ["only"], api.Capacity(ONE))
        url = self.db_fixture.url
        second = factory.grant_scheduler(url, store_cls=baselines.NaiveStore)
        won_by_b = []

        def b_runs_whole(**info):
            if not won_by_b:
                won_by_b.extend(second.schedule(1, 1024, 10))

        first = factory.grant_scheduler(
            url,
            hooks=api.Hooks().on("grant_inserted", b_runs_whole),
            store_cls=baselines.NaiveStore,
        )
        for gs in (first, second):
            self.addCleanup(gs.database.dispose)
        [won_by_a] = first.schedule(1, 1024, 10)
        self.assertEqual(["only"], [s.host for s in won_by_b])
        self.assertEqual("only", won_by_a.host)
        violations = api.GrantScheduler(self.db).check()
        self.assertEqual(["I1"], sorted({v.invariant for v in violations}))


@base.with_scenarios(base.ALL_BACKENDS)
class ComputeSide(base.DatabaseTestCase):
    """The benchmark's compute side claims as Nova's compute side does
    (``GrantScheduler.claim_instance``): by the grant when the instance
    holds one there, else by re-checking the node with its amount."""

    def setUp(self):
        super().setUp()
        baselines.reset(self.db, ["only"], api.Capacity(ONE))
        self.compute = strategies.ClaimingCompute(
            factory.grant_scheduler(self.db_fixture.url)
        )
        self.addCleanup(self.compute.gs.database.dispose)

    def test_a_grant_is_consumed_without_the_amount(self):
        [selection] = api.GrantScheduler(self.db).schedule(
            1, 1024, 10, instance_uuids=[str(uuid.uuid4())]
        )
        asked = []

        def amount():
            asked.append(True)
            return ONE

        outcome = self.compute.gs.claim_instance(
            selection.instance_uuid, "only", "only", amount
        )
        self.assertEqual("grant", outcome.how)
        self.assertEqual([], asked)

    def test_without_a_grant_it_rechecks_and_rejects_what_does_not_fit(self):
        self.assertTrue(
            self.compute.claim(str(uuid.uuid4()), "only", "only", ONE)
        )
        [claim] = self.compute.gs.claims()
        self.assertIsNone(claim.grant_ticket)
        self.assertFalse(
            self.compute.claim(str(uuid.uuid4()), "only", "only", ONE)
        )
        self.assertEqual([], api.GrantScheduler(self.db).check())
