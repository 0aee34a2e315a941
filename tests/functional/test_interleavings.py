"""Deterministic interleavings, one per hazard of DESIGN section 3.

Each test pauses one scheduler at an injection point while another runs,
then checks the invariant.  The schedulers are threads with their own
database engines (so their own connections and transactions); the pause is
exact, not a hope that a race window opens, and where a test needs the
other scheduler to be *waiting for a lock* it asks the server so.
"""

import dataclasses
import threading
import time
import uuid

from grant_scheduler import api
from grant_scheduler import decision
from grant_scheduler import injection
from grant_scheduler import storage
from grant_scheduler.db import claims
from grant_scheduler.db import hosts
from grant_scheduler.db import models
from grant_scheduler.db import sa_compat
from grant_scheduler_bench import baselines
from grant_scheduler_bench import factory
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


def lock_waiters(database):
    """How many sessions wait for a row lock on the server right now."""
    queries = {
        "mysql": "SELECT COUNT(*) FROM information_schema.innodb_trx "
        "WHERE trx_state = 'LOCK WAIT'",
        "postgresql": "SELECT COUNT(*) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock'",
    }
    with database.connect() as conn:
        return sa_compat.execute_text(
            conn, queries[database.dialect_name]
        ).scalar()


def wait_for(testcase, condition, what):
    deadline = time.monotonic() + WAIT
    while not condition():
        testcase.assertLess(time.monotonic(), deadline, what)
        # NOTE: InnoDB serves innodb_trx from a cache it refreshes only
        # when it has not been read for 0.1 s: poll slower than that.
        time.sleep(0.2)


class InterleavingTestCase(base.DatabaseTestCase):
    def gs(self, hooks=None, store_cls=None, name=None):
        """A GrantScheduler with its own engine, as another process has."""
        gs = factory.grant_scheduler(
            self.db_fixture.url, hooks=hooks, store_cls=store_cls
        )
        self.addCleanup(gs.database.dispose)
        return gs

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
                for row in conn.execute(sa_compat.select(models.grants))
            }


@base.with_scenarios(base.SERVERS)
class CommitOrder(InterleavingTestCase):
    """H1: A writes its grant first and commits last."""

    def test_the_grant_write_orders_grants_by_commit(self):
        admin = self.add_hosts(1)
        pause = Pause()
        first = self.gs(hooks=injection.Hooks().on("grant_inserted", pause))
        run_a = Run(self.schedule, first)
        run_a.start()
        pause.wait_reached(self)
        run_b = Run(self.schedule, self.gs())
        run_b.start()
        # B's grant write waits for the node's row, which A's uncommitted
        # grant holds: the server says so, so B cannot decide from a row
        # A is about to change.
        wait_for(self, lambda: lock_waiters(self.db) >= 1, "B never waited")
        self.assertTrue(run_b.is_alive())
        pause.resume()
        outcomes = [run_a.outcome(self), run_b.outcome(self)]
        self.assertIsNone(outcomes[0][1])
        self.assertIsInstance(outcomes[1][1], api.NoValidHost)
        self.assertEqual([], admin.check())

    def test_earliest_timestamp_wins_overcommits(self):
        # The seed's literal rule (benchmark-only): B, stamped later,
        # commits first and wins; A then wins too.
        admin = self.add_hosts(1)
        pause = Pause()
        first = self.gs(
            hooks=injection.Hooks().on("grant_inserted", pause),
            store_cls=baselines.NaiveStore,
        )
        run_a = Run(self.schedule, first)
        run_a.start()
        pause.wait_reached(self)
        second = self.gs(store_cls=baselines.NaiveStore)
        [placed_b] = self.schedule(second)  # finishes while A is paused
        pause.resume()
        result, error = run_a.outcome(self)
        self.assertIsNone(error)
        self.assertEqual(placed_b.host, result[0].host)
        violations = admin.check()
        self.assertEqual(["I1"], sorted({v.invariant for v in violations}))


@base.with_scenarios(base.ALL_BACKENDS)
class NaiveBaselineClaims(InterleavingTestCase):
    def test_a_compute_consumes_naive_grants_on_a_node_it_knows(self):
        # The second claim on a node takes the path by its own grant, whose
        # ticket comes back through LAST_INSERT_ID on MySQL: the naive
        # baseline's tickets must survive it (a negative one came back as
        # an unsigned 64-bit number and failed the mark's UPDATE).
        admin = self.add_hosts(1, capacity=api.Resources(2, 2048, 20))
        naive = self.gs(store_cls=baselines.NaiveStore)
        compute = self.gs()
        for _ in range(2):
            [selection] = self.schedule(naive)
            outcome = compute.claim(
                selection.instance_uuid,
                selection.host,
                selection.node,
                ONE_SLOT,
            )
            self.assertEqual(selection.ticket, outcome.grant_ticket)
        [report] = admin.hosts()
        self.assertEqual(api.Resources(2, 2048, 20), report.claimed)
        self.assertEqual([], admin.check())


@base.with_scenarios(base.ALL_BACKENDS)
class FreshRow(InterleavingTestCase):
    """H2: the grant is decided on what committed after the view was read,
    never on the view."""

    def test_grant_sees_what_committed_after_the_view(self):
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
        self.assertTrue(error.contention)
        self.assertEqual(1, first.counters.conflicts)
        self.assertEqual([], admin.check())
        self.assertEqual(
            {selection.grant_id: decision.GRANT_WON}, self.grant_states()
        )


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
            {older.grant_id: decision.GRANT_WON}, self.grant_states()
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
        admin = self.add_hosts(1)
        crash = Pause()
        dead = self.gs(hooks=injection.Hooks().on("grant_committed", crash))
        dead_uuid = str(uuid.uuid4())
        run_dead = Run(dead.schedule, 1, 1024, 10, instance_uuids=[dead_uuid])
        run_dead.start()
        crash.wait_reached(self)

        survivor = self.gs()
        # The dead scheduler's grant holds the only slot.
        with self.assertRaises(api.NoValidHost) as caught:
            self.schedule(survivor)
        self.assertFalse(caught.exception.contention)

        # One TTL later (on the database's clock) the reaper frees it.
        survivor.database.clock_offset = api.Settings().grant_ttl + 1
        self.assertEqual(1, survivor.reap()["expired"])
        [selection] = self.schedule(survivor)
        survivor.claim(selection.instance_uuid, selection.host, selection.node)

        # A build for the dead scheduler's grant arrives late: no grant, and
        # no room on re-check.
        with self.assertRaises(api.ClaimRejected) as caught:
            survivor.claim(dead_uuid, "host0", "node0", ONE_SLOT)
        self.assertIn("does not fit", str(caught.exception))

        crash.resume()
        run_dead.outcome(self)
        self.assertEqual([], admin.check())


@base.with_scenarios(base.ALL_BACKENDS)
class CascadingLosers(InterleavingTestCase):
    """H6: a grant that does not fit never counts against later ones: it is
    never written."""

    def test_loser_in_flight_does_not_push_out_a_later_grant(self):
        limit = api.Resources(8, 3000, 100)
        admin = self.add_hosts(1, capacity=limit)
        big = api.Resources(1, 2000, 10)
        small = api.Resources(1, 1000, 10)
        # The loser reads its view while the host is empty...
        loser_view = Pause()
        lost = Pause(when=lambda **info: not info["won"])
        loser = self.gs(
            hooks=injection.Hooks()
            .on("view_loaded", loser_view)
            .on("grant_verified", lost)
        )
        run_loser = Run(self.schedule, loser, amount=big)
        run_loser.start()
        loser_view.wait_reached(self)
        # ... a first big grant wins ...
        self.schedule(self.gs(), amount=big)
        # ... and the loser's big grant is found not to fit, and stops there
        # before it falls over.
        loser_view.resume()
        lost.wait_reached(self)
        self.assertEqual(1, len(self.grant_states()))
        # A small grant still fits and wins at once.
        late = self.gs()
        [selection] = self.schedule(late, amount=small)
        self.assertEqual(0, late.counters.conflicts)
        lost.resume()
        _, error = run_loser.outcome(self)
        self.assertIsInstance(error, api.NoValidHost)
        self.assertEqual(2, len(self.grant_states()))
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
            {other.grant_id: decision.GRANT_WON}, self.grant_states()
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


def claim_one_slot(compute, selection):
    """``compute``'s claim of one slot for ``selection``, started in a
    thread of its own (``Run``)."""
    run = Run(
        compute.claim_instance,
        selection.instance_uuid,
        selection.host,
        selection.node,
        lambda: ONE_SLOT,
    )
    run.start()
    return run


class DuplicateGrantsTestCase(InterleavingTestCase):
    """A claim consumes exactly one grant of its instance; the instance's
    other live grants (a reschedule, a retried request) go with it."""

    def compute_knowing_the_node(self, admin, compute=None):
        # A compute that has claimed on the node knows its id: its next
        # claim takes the path by its own grant.
        compute = compute or self.gs()
        [filler] = self.gs().schedule(
            1,
            1024,
            10,
            instance_uuids=[str(uuid.uuid4())],
            force_hosts=["host0"],
        )
        compute.claim(filler.instance_uuid, filler.host, filler.node, ONE_SLOT)
        return compute

    def assertExactAfterClaim(self, admin, instance, room):
        self.assertEqual(
            {api.Resources()}, {r.state.granted for r in admin.hosts()}
        )
        self.assertEqual(
            [decision.GRANT_CONSUMED],
            [g.state for g in admin.grants() if g.instance_uuid == instance],
        )
        self.assertEqual([], admin.check())
        admin.reap()
        self.assertEqual([], admin.check(quiescent=True))
        # Every slot the duplicates held is free again.
        self.schedule(self.gs(), count=room)
        self.assertRaises(api.NoValidHost, self.schedule, self.gs())


@base.with_scenarios(base.ALL_BACKENDS)
class DuplicateGrants(DuplicateGrantsTestCase):
    def test_scheduled_twice_then_claimed_consumes_one_grant(self):
        admin = self.add_hosts(1, capacity=api.Resources(4, 4096, 40))
        compute = self.compute_knowing_the_node(admin)
        gs = self.gs()
        instance = str(uuid.uuid4())
        for _ in range(2):
            gs.schedule(1, 1024, 10, instance_uuids=[instance])
        outcome = compute.claim(instance, "host0", "node0", ONE_SLOT)
        self.assertEqual("grant", outcome.how)
        self.assertExactAfterClaim(admin, instance, room=2)


@base.with_scenarios(base.SERVERS)
class RacingDuplicateGrants(DuplicateGrantsTestCase):
    """Two grants of one instance written at once, on two nodes (SQLite
    has one writer: there they cannot overlap)."""

    def test_racing_schedules_of_one_instance_then_claim(self):
        admin = self.add_hosts(2, capacity=api.Resources(4, 4096, 40))
        compute = self.compute_knowing_the_node(admin)
        instance = str(uuid.uuid4())
        pause = Pause()
        first = self.gs(hooks=injection.Hooks().on("grant_inserted", pause))
        run_a = Run(
            first.schedule,
            1,
            1024,
            10,
            instance_uuids=[instance],
            force_hosts=["host0"],
        )
        run_a.start()
        pause.wait_reached(self)
        # B cannot see A's grant, which is not committed yet: both land.
        self.gs().schedule(
            1, 1024, 10, instance_uuids=[instance], force_hosts=["host1"]
        )
        pause.resume()
        _, error = run_a.outcome(self)
        self.assertIsNone(error)
        self.assertEqual(
            2,
            len([g for g in admin.grants() if g.instance_uuid == instance]),
        )
        outcome = compute.claim(instance, "host0", "node0", ONE_SLOT)
        self.assertEqual("grant", outcome.how)
        self.assertExactAfterClaim(admin, instance, room=6)


# No transaction retried: a deadlock reaches the caller.
NO_RETRIES = {
    "max_retries": 0,
    "retry_interval": 0,
    "inc_retry_interval": False,
    "max_retry_interval": 0,
}
FOUR_SLOTS = api.Resources(4, 4096, 40)


@base.with_scenarios(base.SERVERS)
class ClaimBesideTheNodesWriters(DuplicateGrantsTestCase):
    """A claim by its grant overlapping another writer of its node: each
    waits for the node's row lock, neither deadlocks (these engines do not
    retry, so a deadlock would be an error), and the books come out exact.
    On PostgreSQL the claim is one statement whose snapshot is older than
    the lock it waits for."""

    def gs_once(self, hooks=None):
        database = api.Database(self.db_fixture.url, retry_policy=NO_RETRIES)
        self.addCleanup(database.dispose)
        return api.GrantScheduler(
            database, hooks=hooks, store=api.SQLStore(database)
        )

    def assertBooks(self, admin, used, granted):
        [report] = admin.hosts()
        self.assertEqual(
            (used, granted), (report.state.used, report.state.granted)
        )
        self.assertEqual([], admin.check())

    def test_a_claim_waits_for_a_grant_on_its_node(self):
        admin = self.add_hosts(1, capacity=FOUR_SLOTS)
        compute = self.compute_knowing_the_node(admin, self.gs_once())
        [mine] = self.schedule(self.gs())
        pause = Pause()
        granting = self.gs_once(
            hooks=injection.Hooks().on("grant_inserted", pause)
        )
        run_grant = Run(self.schedule, granting)
        run_grant.start()
        pause.wait_reached(self)
        run_claim = Run(
            compute.claim, mine.instance_uuid, mine.host, mine.node, ONE_SLOT
        )
        run_claim.start()
        wait_for(
            self, lambda: lock_waiters(self.db) >= 1, "the claim never waited"
        )
        self.assertTrue(run_claim.is_alive())
        pause.resume()
        self.assertIsNone(run_grant.outcome(self)[1])
        outcome, error = run_claim.outcome(self)
        self.assertIsNone(error)
        self.assertEqual("grant", outcome.how)
        self.assertBooks(admin, ONE_SLOT + ONE_SLOT, ONE_SLOT)

    def test_a_grant_waits_for_a_claim_on_its_node(self):
        admin = self.add_hosts(1, capacity=FOUR_SLOTS)
        [mine] = self.schedule(self.gs())
        pause = Pause(
            lambda instance_uuid: instance_uuid == mine.instance_uuid
        )
        compute = self.compute_knowing_the_node(
            admin,
            self.gs_once(hooks=injection.Hooks().on("claim_written", pause)),
        )
        run_claim = claim_one_slot(compute, mine)
        pause.wait_reached(self)
        run_grant = Run(self.schedule, self.gs_once())
        run_grant.start()
        wait_for(
            self, lambda: lock_waiters(self.db) >= 1, "the grant never waited"
        )
        self.assertTrue(run_grant.is_alive())
        pause.resume()
        outcome, error = run_claim.outcome(self)
        self.assertIsNone(error)
        self.assertEqual("grant", outcome.how)
        self.assertIsNone(run_grant.outcome(self)[1])
        self.assertBooks(admin, ONE_SLOT + ONE_SLOT, ONE_SLOT)

    def test_a_claim_while_its_node_books_are_written_again(self):
        # A report deletes the node's inventory rows and writes them again
        # under the node's lock: the claim waiting for that lock must move
        # the rows that are there once it has it.
        admin = self.add_hosts(1, capacity=FOUR_SLOTS)
        compute = self.compute_knowing_the_node(admin, self.gs_once())
        [mine] = self.schedule(self.gs())
        with self.db.writer() as conn:
            hosts.report.__wrapped__(
                self.db, conn, "host0", "node0", api.Capacity(FOUR_SLOTS)
            )
            run_claim = claim_one_slot(compute, mine)
            wait_for(
                self,
                lambda: lock_waiters(self.db) >= 1,
                "the claim never waited",
            )
            self.assertTrue(run_claim.is_alive())
        outcome, error = run_claim.outcome(self)
        self.assertIsNone(error)
        self.assertEqual(("grant", ONE_SLOT), (outcome.how, outcome.resources))
        self.assertBooks(admin, ONE_SLOT + ONE_SLOT, api.Resources())


@base.with_scenarios([("postgresql", {"backend": "postgresql"})])
class ClaimInOneStatement(DuplicateGrantsTestCase):
    """PostgreSQL's claim by its grant in one statement writes nothing
    where the claim is not the common one: the statements that follow
    account for everything."""

    def node_id(self):
        with self.db.reader() as conn:
            return hosts.host_id(conn, "host0", "node0")

    def tables(self):
        with self.db.reader() as conn:
            return [
                sorted(
                    tuple(row) for row in conn.execute(sa_compat.select(table))
                )
                for table in (
                    models.hosts,
                    models.inventories,
                    models.grants,
                    models.claims,
                )
            ]

    def claim_in_one(self, instance_uuid, resources=None):
        build = storage.Build(
            instance_uuid, "host0", "node0", resources=resources
        )
        with self.db.writer() as conn:
            return claims._claim_in_one(conn, self.db, self.node_id(), build)

    def test_another_live_grant_writes_nothing(self):
        self.add_hosts(2, capacity=FOUR_SLOTS)
        instance = str(uuid.uuid4())
        gs = self.gs()
        for host in ("host0", "host1"):
            gs.schedule(
                1, 1024, 10, instance_uuids=[instance], force_hosts=[host]
            )
        before = self.tables()
        self.assertIsNone(self.claim_in_one(instance))
        self.assertIsNone(self.claim_in_one(instance, ONE_SLOT))
        self.assertEqual(before, self.tables())

    def test_a_class_the_books_lack_writes_nothing(self):
        self.add_hosts(1, capacity=FOUR_SLOTS)
        [mine] = self.schedule(self.gs())
        with self.db.writer() as conn:
            conn.execute(
                models.inventories.delete().where(
                    models.inventories.c.resource_class == "DISK_GB"
                )
            )
        before = self.tables()
        self.assertIsNone(self.claim_in_one(mine.instance_uuid))
        self.assertEqual(before, self.tables())

    def test_no_grant_of_its_own_writes_nothing(self):
        self.add_hosts(1, capacity=FOUR_SLOTS)
        [mine] = self.schedule(self.gs())
        before = self.tables()
        self.assertIs(claims.NO_GRANT, self.claim_in_one(str(uuid.uuid4())))
        self.assertIs(
            claims.NO_GRANT,
            self.claim_in_one(mine.instance_uuid, ONE_SLOT + ONE_SLOT),
        )
        self.assertEqual(before, self.tables())

    def test_the_common_claim_is_one_statement(self):
        self.add_hosts(1, capacity=FOUR_SLOTS)
        [mine] = self.schedule(self.gs())
        self.assertEqual(
            (mine.ticket, ONE_SLOT), self.claim_in_one(mine.instance_uuid)
        )
        admin = self.gs()
        [report] = admin.hosts()
        self.assertEqual(
            (ONE_SLOT, api.Resources(), mine.ticket),
            (
                report.state.used,
                report.state.granted,
                report.last_grant_ticket,
            ),
        )
        self.assertEqual([], admin.check())


@base.with_scenarios(base.ALL_BACKENDS)
class RequestLargerThanTheRoom(InterleavingTestCase):
    """A request the view's free amounts cannot hold is answered at once,
    from a fresh read, and writes nothing."""

    def host_tickets(self):
        with self.db.reader() as conn:
            return sorted(
                tuple(row)
                for row in conn.execute(
                    sa_compat.select(models.hosts.c.id, models.hosts.c.ticket)
                )
            )

    def test_a_million_instances_on_two_hosts(self):
        admin = self.add_hosts(2)
        before = self.host_tickets()
        gs = self.gs()
        with self.assertRaises(api.NoValidHost) as caught:
            gs.schedule(1, 1024, 10, num_instances=10**6)
        self.assertFalse(caught.exception.contention)
        self.assertEqual(0, gs.counters.attempts)
        self.assertEqual(before, self.host_tickets())
        self.assertEqual([], admin.check(quiescent=True))

    def test_a_stale_view_is_read_again_before_the_answer(self):
        admin = self.add_hosts(2)
        gs = self.gs()
        gs.view()  # cached: both hosts empty
        [other] = self.schedule(self.gs())
        with self.assertRaises(api.NoValidHost):
            self.schedule(gs, count=2)
        self.assertEqual(0, gs.counters.attempts)
        self.assertEqual(
            {other.grant_id: decision.GRANT_WON}, self.grant_states()
        )
        self.assertEqual([], admin.check())


# The hazards again where the scarce class is not vCPU: an Ironic node's
# one unit of a custom class; PCPU on a node with memory to spare; disk
# alone full while vCPU and memory have room.
SHAPES = {
    "ironic": (
        api.Capacity.of({"CUSTOM_BAREMETAL_GOLD": api.Inventory(1)}),
        api.Resources(CUSTOM_BAREMETAL_GOLD=1),
    ),
    "pcpu": (
        api.Capacity.of(
            {
                "VCPU": api.Inventory(8),
                "MEMORY_MB": api.Inventory(8192),
                "PCPU": api.Inventory(1),
            }
        ),
        api.Resources(0, 512, 0, PCPU=1),
    ),
    "disk": (
        api.Capacity(api.Resources(8, 8192, 10)),
        api.Resources(1, 512, 10),
    ),
}


def times(amount, count):
    """``count`` instances of ``amount``, class by class."""
    return amount.map(lambda name, value: value * count)


def holding(capacity, slots):
    """The shape's capacity with every inventory ``slots`` times as large:
    a node that holds ``slots`` of the shape's amount."""
    return api.Capacity.of(
        {
            name: dataclasses.replace(
                inventory,
                total=inventory.total * slots,
                max_unit=inventory.max_unit * slots,
            )
            for name, inventory in capacity.inventories.items()
        }
    )


class ClassesTestCase(InterleavingTestCase):
    def shape(self, name, nodes=1, slots=1):
        """``nodes`` nodes of the shape's capacity, each holding ``slots``
        of its amount, the only ones (the nodes of the shape before are
        deleted); their admin and the amount."""
        capacity, amount = SHAPES[name]
        admin = self.gs()
        for report in admin.hosts():
            admin.delete_host(report.state.host, report.state.node)
        for number in range(nodes):
            suffix = name if nodes == 1 else "%s%d" % (name, number)
            admin.report_host(
                "host-" + suffix, "node-" + suffix, holding(capacity, slots)
            )
        return admin, amount

    def schedule_amount(self, gs, amount):
        return gs.schedule(
            resources=amount, instance_uuids=[str(uuid.uuid4())]
        )

    def assertOneGrantOfEach(self, admin, amount):
        [report] = admin.hosts()
        self.assertEqual(amount, report.state.granted)
        self.assertEqual(amount, report.live_grants)
        self.assertEqual([], admin.check())

    def assertGrantedOnEachNode(self, admin, amount):
        """Every node's live grants are ``amount``, in its books and in its
        grant rows alike."""
        for report in admin.hosts():
            self.assertEqual(amount, report.state.granted)
            self.assertEqual(amount, report.live_grants)
        self.assertEqual([], admin.check())


@base.with_scenarios(base.SERVERS)
class ClassesCommitOrder(ClassesTestCase):
    """H1 for every class: B's write waits for A's lock on the node, then
    decides on what A committed, class by class."""

    def test_the_last_unit_of_any_class_is_granted_once(self):
        for name in sorted(SHAPES):
            with self.subTest(shape=name):
                admin, amount = self.shape(name)
                pause = Pause()
                first = self.gs(
                    hooks=injection.Hooks().on("grant_inserted", pause)
                )
                run_a = Run(self.schedule_amount, first, amount)
                run_a.start()
                pause.wait_reached(self)
                run_b = Run(self.schedule_amount, self.gs(), amount)
                run_b.start()
                wait_for(
                    self, lambda: lock_waiters(self.db) >= 1, "B never waited"
                )
                self.assertTrue(run_b.is_alive())
                pause.resume()
                self.assertIsNone(run_a.outcome(self)[1])
                self.assertIsInstance(run_b.outcome(self)[1], api.NoValidHost)
                self.assertOneGrantOfEach(admin, amount)


@base.with_scenarios(base.ALL_BACKENDS)
class ClassesFreshRow(ClassesTestCase):
    """H2 for every class: a grant decided on what committed after the
    view, never on the view."""

    def test_a_stale_view_of_any_class_loses(self):
        for name in sorted(SHAPES):
            with self.subTest(shape=name):
                admin, amount = self.shape(name)
                pause = Pause()
                first = self.gs(
                    hooks=injection.Hooks().on("view_loaded", pause)
                )
                run_a = Run(self.schedule_amount, first, amount)
                run_a.start()
                pause.wait_reached(self)
                [placed] = self.schedule_amount(self.gs(), amount)
                pause.resume()
                _, error = run_a.outcome(self)
                self.assertIsInstance(error, api.NoValidHost)
                self.assertTrue(error.contention)
                self.assertEqual(
                    {placed.grant_id: decision.GRANT_WON}, self.grant_states()
                )
                self.assertOneGrantOfEach(admin, amount)


@base.with_scenarios(base.ALL_BACKENDS)
class ClassesOutOfOrderArrival(ClassesTestCase):
    """H3 for every class: the newer grant consumed first, the reaper
    leaves the older one, whose claim then moves every class of it."""

    def test_an_older_grant_of_any_class_survives_the_reaper(self):
        for name in sorted(SHAPES):
            with self.subTest(shape=name):
                admin, amount = self.shape(name, slots=2)
                gs = self.gs()
                [older] = self.schedule_amount(gs, amount)
                [newer] = self.schedule_amount(gs, amount)
                self.assertLess(older.ticket, newer.ticket)

                outcome = gs.claim(newer.instance_uuid, newer.host, newer.node)
                self.assertEqual(
                    ("grant", amount), (outcome.how, outcome.resources)
                )
                self.assertEqual(1, admin.reap()["superseded"])
                self.assertEqual(
                    {older.grant_id: decision.GRANT_WON}, self.grant_states()
                )
                [report] = admin.hosts()
                self.assertEqual(newer.ticket, report.last_grant_ticket)
                self.assertEqual(amount, report.state.used)
                self.assertGrantedOnEachNode(admin, amount)

                # The older build arrives: its grant is still there.
                outcome = gs.claim(older.instance_uuid, older.host, older.node)
                self.assertEqual("grant", outcome.how)
                [report] = admin.hosts()
                self.assertEqual(newer.ticket, report.last_grant_ticket)
                self.assertEqual(times(amount, 2), report.state.used)
                self.assertEqual(times(amount, 2), report.claimed)
                self.assertGrantedOnEachNode(admin, api.Resources())
                admin.reap()
                self.assertEqual([], admin.check(quiescent=True))


@base.with_scenarios(base.ALL_BACKENDS)
class ClassesCrashedScheduler(ClassesTestCase):
    """H5 for every class: a dead scheduler's grant holds its classes until
    it expires; a claim that arrives for it then re-checks every class."""

    def test_an_expired_grant_of_any_class_is_reaped_and_rechecked(self):
        for name in sorted(SHAPES):
            with self.subTest(shape=name):
                admin, amount = self.shape(name)
                crash = Pause()
                dead = self.gs(
                    hooks=injection.Hooks().on("grant_committed", crash)
                )
                dead_uuid = str(uuid.uuid4())
                run_dead = Run(
                    dead.schedule, resources=amount, instance_uuids=[dead_uuid]
                )
                run_dead.start()
                crash.wait_reached(self)

                survivor = self.gs()
                with self.assertRaises(api.NoValidHost) as caught:
                    self.schedule_amount(survivor, amount)
                self.assertFalse(caught.exception.contention)

                # One TTL later the reaper gives back every class of it.
                survivor.database.clock_offset = api.Settings().grant_ttl + 1
                self.assertEqual(1, survivor.reap()["expired"])
                self.assertGrantedOnEachNode(admin, api.Resources())
                [selection] = self.schedule_amount(survivor, amount)
                survivor.claim(
                    selection.instance_uuid, selection.host, selection.node
                )

                # The dead scheduler's build arrives late: no grant, and its
                # scarce class has no room on re-check.
                with self.assertRaises(api.ClaimRejected) as caught:
                    survivor.claim(
                        dead_uuid, selection.host, selection.node, amount
                    )
                self.assertIn("does not fit", str(caught.exception))

                crash.resume()
                run_dead.outcome(self)
                [report] = admin.hosts()
                self.assertEqual(amount, report.state.used)
                self.assertEqual(amount, report.claimed)
                self.assertGrantedOnEachNode(admin, api.Resources())


@base.with_scenarios(base.ALL_BACKENDS)
class ClassesCascadingLosers(ClassesTestCase):
    """H6 for every class: a grant that does not fit is never written, so
    it takes no room of any class from a later grant."""

    def test_a_loser_of_any_class_leaves_its_room_to_a_later_grant(self):
        for name in sorted(SHAPES):
            with self.subTest(shape=name):
                admin, small = self.shape(name, slots=3)
                big = times(small, 2)
                # The loser reads its view while the node is empty...
                loser_view = Pause()
                lost = Pause(when=lambda **info: not info["won"])
                loser = self.gs(
                    hooks=injection.Hooks()
                    .on("view_loaded", loser_view)
                    .on("grant_verified", lost)
                )
                run_loser = Run(self.schedule_amount, loser, big)
                run_loser.start()
                loser_view.wait_reached(self)
                # ... a first big grant wins ...
                [first] = self.schedule_amount(self.gs(), big)
                # ... and the loser's is found not to fit, and stops there.
                loser_view.resume()
                lost.wait_reached(self)
                self.assertEqual(
                    {first.grant_id: decision.GRANT_WON}, self.grant_states()
                )
                self.assertGrantedOnEachNode(admin, big)
                # The last third still fits and is granted at once.
                late = self.gs()
                [selection] = self.schedule_amount(late, small)
                self.assertEqual(0, late.counters.conflicts)
                lost.resume()
                _, error = run_loser.outcome(self)
                self.assertIsInstance(error, api.NoValidHost)
                self.assertEqual(
                    {
                        first.grant_id: decision.GRANT_WON,
                        selection.grant_id: decision.GRANT_WON,
                    },
                    self.grant_states(),
                )
                self.assertGrantedOnEachNode(admin, times(small, 3))


@base.with_scenarios(base.ALL_BACKENDS)
class ClassesAllOrNothing(ClassesTestCase):
    """H11 for every class: a request whose instances do not all fit gives
    back every class of every grant it wrote."""

    def schedule_many(self, gs, amount, count):
        return gs.schedule(
            resources=amount,
            instance_uuids=[str(uuid.uuid4()) for _ in range(count)],
        )

    def test_a_partial_request_of_any_class_withdraws_its_grants(self):
        for name in sorted(SHAPES):
            with self.subTest(shape=name):
                admin, amount = self.shape(name, nodes=2)
                # More instances than the nodes hold: nothing is written.
                self.assertRaises(
                    api.NoValidHost, self.schedule_many, self.gs(), amount, 3
                )
                self.assertEqual({}, self.grant_states())

                pause = Pause(when=lambda **info: info.get("won"))
                greedy = self.gs(
                    hooks=injection.Hooks().on("grant_verified", pause)
                )
                run_greedy = Run(self.schedule_many, greedy, amount, 2)
                run_greedy.start()
                pause.wait_reached(self)
                [other] = self.schedule_amount(self.gs(), amount)
                pause.resume()
                _, error = run_greedy.outcome(self)
                self.assertIsInstance(error, api.NoValidHost)
                self.assertEqual(
                    {other.grant_id: decision.GRANT_WON}, self.grant_states()
                )
                self.assertEqual(
                    {(other.host, other.node): amount},
                    admin.granted_by_node(),
                )
                # Every class of the withdrawn grant is free again.
                [again] = self.schedule_amount(self.gs(), amount)
                self.assertNotEqual(other.host, again.host)
                self.assertGrantedOnEachNode(admin, amount)
