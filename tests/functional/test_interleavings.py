"""Deterministic interleavings, one per hazard of DESIGN section 3.

Each test pauses one scheduler at an injection point while another runs,
then checks the invariant.  The schedulers are threads with their own
database engines (so their own connections and transactions); the pause is
exact, not a hope that a race window opens.
"""

import threading
import time
import uuid

import sqlalchemy as sa

from grant_scheduler import api
from grant_scheduler import injection
from grant_scheduler.bench import naive
from grant_scheduler.db import api as db_api
from grant_scheduler.db import models
from tests import base

ONE_SLOT = api.Resources(1, 1024, 10)
WAIT = 60


class Pause:
    """Blocks the thread that reaches it until ``resume``."""

    def __init__(self, when=None):
        self.when = when or (lambda **info: True)
        self.reached = threading.Event()
        self._resume = threading.Event()

    def __call__(self, **info):
        if self.reached.is_set() or not self.when(**info):
            return
        self.reached.set()
        if not self._resume.wait(WAIT):
            raise AssertionError("paused scheduler was never resumed")

    def wait_reached(self, testcase):
        testcase.assertTrue(self.reached.wait(WAIT), "pause never reached")

    def resume(self):
        self._resume.set()


class Run(threading.Thread):
    """Run ``fn`` in a thread; keep its result or exception."""

    def __init__(self, fn, *args, **kwargs):
        super().__init__(daemon=True)
        self._call = (fn, args, kwargs)
        self.result = None
        self.error = None

    def run(self):
        fn, args, kwargs = self._call
        try:
            self.result = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: B036 - reported to the test
            self.error = exc

    def outcome(self, testcase):
        self.join(WAIT)
        testcase.assertFalse(self.is_alive(), "scheduler thread hung")
        return self.result, self.error


class InterleavingTestCase(base.DatabaseTestCase):
    def setUp(self):
        super().setUp()
        self.settings = api.Settings(host_subset_size=1, grant_ttl=600)

    def gs(self, hooks=None, settings=None, store_class=None, name=None):
        """A GrantScheduler with its own engine, as another process has."""
        database = db_api.Database(self.db_fixture.url)
        self.addCleanup(database.dispose)
        store = store_class(database) if store_class else None
        return api.GrantScheduler(
            database,
            settings=settings or self.settings,
            hooks=hooks,
            name=name,
            store=store,
        )

    def add_hosts(self, count, capacity=ONE_SLOT):
        admin = self.gs()
        for number in range(count):
            admin.report_host(
                "host%d" % number, "node%d" % number, api.Capacity(capacity)
            )
        return admin

    def schedule(self, gs, amount=ONE_SLOT, count=1):
        return gs.schedule(
            amount.vcpus,
            amount.memory_mb,
            amount.disk_gb,
            instance_uuids=[str(uuid.uuid4()) for _ in range(count)],
        )

    def grant_states(self):
        with self.db.reader() as conn:
            return {
                row.id: row.state
                for row in conn.execute(sa.select(models.grants))
            }


@base.with_scenarios(base.SERVERS)
class CommitOrder(InterleavingTestCase):
    """H1: A stamps first and commits last."""

    def _race(self, store_class):
        admin = self.add_hosts(1)
        pause = Pause()
        first = self.gs(
            hooks=injection.Hooks().on("grant_inserted", pause),
            store_class=store_class,
            name="A",
        )
        second = self.gs(store_class=store_class, name="B")
        run_a = Run(self.schedule, first)
        run_a.start()
        pause.wait_reached(self)
        run_b = Run(self.schedule, second)
        run_b.start()
        # B has read the view and is writing its grant while A's grant is
        # inserted (and stamped) but not committed.
        run_b.join(1.0)
        b_finished_while_a_paused = not run_b.is_alive()
        pause.resume()
        outcomes = [run_a.outcome(self), run_b.outcome(self)]
        return admin, outcomes, b_finished_while_a_paused

    def test_tickets_serialise_grant_and_commit(self):
        admin, outcomes, b_early = self._race(None)
        # B queued behind A's ticket (the host row lock) instead of racing.
        self.assertFalse(b_early)
        placed = [result for result, error in outcomes if error is None]
        failed = [error for result, error in outcomes if error is not None]
        self.assertEqual(1, len(placed))
        self.assertEqual(1, len(failed))
        self.assertIsInstance(failed[0], api.NoValidHost)
        self.assertEqual([], admin.check())

    def test_earliest_timestamp_wins_overcommits(self):
        admin, outcomes, b_early = self._race(naive.NaiveStore)
        # The naive rule takes no lock: B ran to the end while A was paused.
        self.assertTrue(b_early)
        self.assertEqual([None, None], [error for _, error in outcomes])
        violations = admin.check()
        self.assertEqual(["I1"], sorted({v.invariant for v in violations}))


@base.with_scenarios(base.ALL_BACKENDS)
class FreshSnapshot(InterleavingTestCase):
    """H2: verification must see what committed after the view was read."""

    def test_verification_sees_grants_committed_after_the_view(self):
        admin = self.add_hosts(1)
        pause = Pause()
        first = self.gs(hooks=injection.Hooks().on("view_loaded", pause))
        run_a = Run(self.schedule, first)
        run_a.start()
        pause.wait_reached(self)
        [selection] = self.schedule(self.gs())
        pause.resume()
        result, error = run_a.outcome(self)
        self.assertIsInstance(error, api.NoValidHost)
        self.assertEqual(1, first.counters.conflicts)
        self.assertEqual([], admin.check())
        states = self.grant_states()
        self.assertEqual({selection.grant_id: models.GRANT_WON}, states)


@base.with_scenarios([("mysql", {"backend": "mysql"})])
class RepeatableReadHazard(InterleavingTestCase):
    """Why H2 matters: InnoDB's default isolation really does hide it."""

    def test_repeatable_read_would_hide_the_competitor(self):
        # Inside one REPEATABLE READ transaction a second read does not see
        # a grant committed after the first read: a verification that
        # reused such a transaction would miss its competitor.
        self.add_hosts(1)
        engine = self.db.get_engine()
        with engine.connect() as stale:
            stale.begin()
            before = stale.execute(sa.select(models.grants)).all()
            self.schedule(self.gs())
            after = stale.execute(sa.select(models.grants)).all()
        self.assertEqual(before, after)
        self.assertEqual(1, len(self.grant_states()))


@base.with_scenarios(base.ALL_BACKENDS)
class OutOfOrderArrival(InterleavingTestCase):
    """H3: a newer grant consumed first must not make the reaper drop an
    older one whose build is still in flight."""

    def test_unconsumed_grant_below_the_mark_survives_the_reaper(self):
        admin = self.add_hosts(1, capacity=api.Resources(2, 2048, 20))
        gs = self.gs()
        [older] = self.schedule(gs)
        [newer] = self.schedule(gs)
        self.assertLess(older.ticket, newer.ticket)
        self.assertEqual(older.host, newer.host)

        outcome = gs.claim(newer.instance_uuid, newer.host, newer.node)
        self.assertEqual("grant", outcome.how)
        [report] = admin.hosts()
        self.assertEqual(newer.ticket, report.last_grant_ticket)

        counts = admin.reap()
        self.assertEqual(1, counts["superseded"])
        self.assertEqual(
            {older.grant_id: models.GRANT_WON}, self.grant_states()
        )
        # The older build arrives: its grant is still there to consume.
        outcome = gs.claim(older.instance_uuid, older.host, older.node)
        self.assertEqual("grant", outcome.how)
        [report] = admin.hosts()
        self.assertEqual(newer.ticket, report.last_grant_ticket)
        self.assertEqual(api.Resources(2, 2048, 20), report.state.used)
        self.assertEqual([], admin.check())
        admin.reap()
        self.assertEqual([], admin.check(quiescent=True))


@base.with_scenarios(base.ALL_BACKENDS)
class CrashedScheduler(InterleavingTestCase):
    """H5: a scheduler that dies after its grant holds capacity until the
    grant expires; a compute that arrives for it then re-checks."""

    def test_expired_grant_is_reaped_and_late_claim_rechecks(self):
        ttl = 2
        settings = api.Settings(host_subset_size=1, grant_ttl=ttl)
        admin = self.add_hosts(1)
        crash = Pause()
        dead = self.gs(
            hooks=injection.Hooks().on("grant_committed", crash),
            settings=settings,
        )
        dead_uuid = str(uuid.uuid4())
        run_dead = Run(
            dead.schedule,
            1,
            1024,
            10,
            instance_uuids=[dead_uuid],
        )
        run_dead.start()
        crash.wait_reached(self)

        survivor = self.gs(settings=settings)
        # The dead scheduler's undecided grant is decided (won: it fits) and
        # holds the only slot: NoValidHost is the right answer.
        self.assertRaises(api.NoValidHost, self.schedule, survivor)
        self.assertEqual(1, survivor.counters.settles)
        self.assertEqual(
            [models.GRANT_WON], list(self.grant_states().values())
        )

        time.sleep(ttl + 0.5)
        self.assertEqual(1, survivor.reap()["expired"])
        [selection] = self.schedule(survivor)
        survivor.claim(selection.instance_uuid, selection.host, selection.node)

        # A build for the dead scheduler's grant arrives late: no grant, and
        # no room on re-check.
        with self.assertRaises(api.ClaimRejected) as caught:
            survivor.claim(dead_uuid, "host0", "node0", ONE_SLOT)
        self.assertIn("does not fit", str(caught.exception))

        crash.resume()
        _, error = run_dead.outcome(self)
        self.assertIsInstance(error, api.NoValidHost)
        self.assertEqual([], admin.check())

    def test_claim_for_an_expired_grant_with_room_is_accepted(self):
        settings = api.Settings(host_subset_size=1, grant_ttl=1)
        self.add_hosts(1)
        gs = self.gs(settings=settings)
        [selection] = self.schedule(gs)
        time.sleep(1.5)
        outcome = gs.claim(
            selection.instance_uuid, selection.host, selection.node, ONE_SLOT
        )
        self.assertEqual("recheck", outcome.how)
        self.assertEqual(
            {selection.grant_id: models.GRANT_CONSUMED}, self.grant_states()
        )
        self.assertEqual([], gs.check())


@base.with_scenarios(base.ALL_BACKENDS)
class CascadingLosers(InterleavingTestCase):
    """H6: a loser that has not withdrawn yet must not count."""

    def test_undecided_loser_does_not_push_out_a_later_grant(self):
        limit = api.Resources(8, 3000, 100)
        admin = self.add_hosts(1, capacity=limit)
        big = api.Resources(1, 2000, 10)
        small = api.Resources(1, 1000, 10)
        # The loser reads its view while the host is empty...
        loser_view = Pause()
        undecided = Pause()
        loser = self.gs(
            hooks=injection.Hooks()
            .on("view_loaded", loser_view)
            .on("grant_committed", undecided)
        )
        run_loser = Run(self.schedule, loser, amount=big)
        run_loser.start()
        loser_view.wait_reached(self)
        # ... a first big grant wins ...
        self.schedule(self.gs(), amount=big)
        # ... the late scheduler reads its view (room for a small one) ...
        late_view = Pause()
        late = self.gs(hooks=injection.Hooks().on("view_loaded", late_view))
        run_late = Run(self.schedule, late, amount=small)
        run_late.start()
        late_view.wait_reached(self)
        # ... and the loser commits a big grant that cannot fit, undecided.
        loser_view.resume()
        undecided.wait_reached(self)
        self.assertIn(models.GRANT_PENDING, self.grant_states().values())

        late_view.resume()
        [selection], error = run_late.outcome(self)
        self.assertIsNone(error)
        self.assertEqual(0, late.counters.conflicts)
        states = self.grant_states()
        self.assertEqual(models.GRANT_WON, states[selection.grant_id])
        # The late verifier decided the undecided grant and recorded it.
        self.assertEqual(1, list(states.values()).count(models.GRANT_LOST))

        undecided.resume()
        _, error = run_loser.outcome(self)
        self.assertIsInstance(error, api.NoValidHost)
        self.assertNotIn(models.GRANT_LOST, self.grant_states().values())
        self.assertEqual([], admin.check())


@base.with_scenarios(base.ALL_BACKENDS)
class AllOrNothing(InterleavingTestCase):
    """H11: a multi-instance request that cannot place every instance
    withdraws every grant it wrote."""

    def test_partial_request_withdraws_its_grants(self):
        admin = self.add_hosts(2)
        pause = Pause(when=lambda **info: info.get("won"))
        greedy = self.gs(hooks=injection.Hooks().on("grant_verified", pause))
        run_greedy = Run(self.schedule, greedy, count=2)
        run_greedy.start()
        pause.wait_reached(self)
        [other] = self.schedule(self.gs())
        pause.resume()
        _, error = run_greedy.outcome(self)
        self.assertIsInstance(error, api.NoValidHost)
        self.assertEqual(
            {other.grant_id: models.GRANT_WON}, self.grant_states()
        )
        # The withdrawn slot is free again.
        [again] = self.schedule(self.gs())
        self.assertNotEqual(other.host, again.host)
        self.assertEqual([], admin.check())

    def test_request_larger_than_the_cloud_writes_nothing(self):
        admin = self.add_hosts(2)
        self.assertRaises(api.NoValidHost, self.schedule, self.gs(), count=3)
        self.assertEqual({}, self.grant_states())
        self.assertEqual([], admin.check(quiescent=True))
