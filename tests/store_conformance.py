"""The same scripted scenarios against the SQL store and the memory store.

Each scenario is a function of a ``Run``: it calls ``storage.Store``
methods through ``run.call`` (which records each result, or the exception
it raised, in a normalised form: node ids by order of appearance, grant ids
checked against the grant rows and then left out, timestamps reduced to
what the protocol promises about them) and passes the raw results of its
own store on to the next steps.  ``Conformance`` runs every scenario once
on ``self.make_sql_store()`` and once on a ``MemoryStore`` and fails on the
first step where what the two did differs; the unit tests run it on SQLite,
the functional tests on MySQL and PostgreSQL.
"""

import dataclasses
import datetime
import re

from grant_scheduler import checker
from grant_scheduler import decision
from grant_scheduler import exception
from grant_scheduler import storage
from grant_scheduler.db import models
from grant_scheduler.db import rows
from grant_scheduler.resources import Capacity
from grant_scheduler.resources import HostState
from grant_scheduler.resources import Resources as R
from tests import memory_store

SLOT = R(1, 1024, 10)
TWO_SLOTS = R(2, 2048, 20)
TTL = 600

# Instance uuids, the same in both runs.
U = ["00000000-0000-4000-8000-%012d" % n for n in range(1, 30)]

# NOTE: ratios a 32-bit float holds exactly (MySQL's FLOAT column).
OVERCOMMIT = Capacity(
    R(4, 4096, 40),
    reserved=R(0, 0, 0),
    **{
        "cpu_allocation_ratio": 2.0,
        "ram_allocation_ratio": 1.5,
        "disk_allocation_ratio": 1.0,
    },
)

# A node id no node has: the rows of a node whose delete a crash cut short.
GONE = 999999


def ask(resources=SLOT, uuid=None, request="req-1", scheduler="sched-1"):
    return storage.Ask(resources, scheduler, uuid, request, TTL)


def build(uuid, node="cmp1", resources=None, request=None):
    return storage.Build(uuid, node, node, resources, request)


class Run:
    """One store and what its scenario saw, normalised."""

    def __init__(self, store, advance):
        self.store = store
        self.advance = advance
        """``advance(seconds)``: move the store's clock forward."""
        self.steps = []
        self._labels = {}

    # -- calling -------------------------------------------------------------

    def call(self, method, *args, **kwargs):
        """``store.method(*args, **kwargs)``, recorded; its raw result, or
        None when it raised one of the project's errors."""
        try:
            result = getattr(self.store, method)(*args, **kwargs)
        except exception.GrantSchedulerError as exc:
            self.steps.append((method, "raised", self.error(exc)))
            return None
        self.steps.append((method, self.normal(method, result)))
        return result

    def note(self, what, value):
        self.steps.append((what, value))

    def check(self, quiescent=False):
        """The checker over the store's own reads: [] when I1 and I4
        hold."""
        found = checker.check(
            self.store.host_reports(),
            self.store.grant_rows(),
            self.store.orphan_claims(),
            quiescent=quiescent,
        )
        # NOTE: grant ids are the database's own; the rest is compared.
        self.note(
            "check",
            sorted(re.sub(r"grant \d+", "grant", str(v)) for v in found),
        )
        return found

    # -- normalising ----------------------------------------------------------

    def label(self, host_id):
        """Node ids by order of first appearance: ``N1``, ``N2``..."""
        if host_id is None:
            return None
        if host_id not in self._labels:
            self._labels[host_id] = "N%d" % (len(self._labels) + 1)
        return self._labels[host_id]

    @staticmethod
    def error(exc):
        return (type(exc).__name__, sorted(exc.kwargs.items()))

    def state(self, state):
        if state is None:
            return None
        self.assert_type(state, HostState)
        fields = dataclasses.asdict(state)
        fields["host_id"] = self.label(state.host_id)
        return sorted(fields.items())

    @staticmethod
    def assert_type(value, cls):
        if not isinstance(value, cls):
            raise AssertionError("%r is not a %s" % (value, cls.__name__))

    def normal(self, method, result):
        return getattr(self, "_" + method, self._plain)(result)

    @staticmethod
    def _plain(result):
        return result

    def _report_host(self, host_id):
        return self.label(host_id)

    _register_host = _report_host

    def _host_state(self, state):
        return self.state(state)

    def _read_hosts(self, found):
        for _state, stamp in found:
            self.assert_type(stamp, datetime.datetime)
        return sorted(
            (self.state(state) for state, _ in found), key=lambda s: str(s)
        )

    def _granted_by_node(self, granted):
        return sorted(granted.items())

    def _grant(self, taken):
        self.assert_type(taken, storage.Taken)
        if not taken.won:
            states = {
                self.label(host_id): self.state(state)
                for host_id, state in taken.states.items()
            }
            return (False, sorted(states.items(), key=str))
        # The grant id is the id of the grant row with this node and ticket.
        [row] = [g for g in self.store.grant_rows() if g.id == taken.grant_id]
        same = (row.ticket, (row.host, row.node)) == (
            taken.ticket,
            self.names(taken.host_id),
        )
        return (True, self.label(taken.host_id), taken.ticket, same)

    def names(self, host_id):
        state = self.store.host_state(host_id)
        return None if state is None else (state.host, state.node)

    def _claim(self, outcome):
        self.assert_type(outcome, storage.ClaimOutcome)
        return (
            outcome.resources,
            outcome.grant_ticket,
            outcome.how,
            self.label(outcome.host_id),
        )

    def _claim_rows(self, found):
        return [
            (c.instance_uuid, c.host, c.node, c.resources, c.grant_ticket)
            for c in found
            if self.assert_type(c.created_at, datetime.datetime) is None
        ]

    def _host_reports(self, reports):
        return [
            (
                self.state(r.state),
                r.claimed,
                r.external,
                r.live_grants,
                r.last_grant_ticket,
                r.last_grant_at is None,
            )
            for r in reports
        ]

    def _orphan_claims(self, found):
        return sorted((uuid, self.label(h)) for uuid, h in found)

    def _grant_rows(self, found):
        return [
            (
                g.host,
                g.node,
                g.ticket,
                g.state,
                g.resources,
                g.instance_uuid,
                g.request_id,
                g.scheduler,
                round((g.expires_at - g.created_at).total_seconds()),
            )
            for g in found
        ]


def sql_orphans(db):
    """Write a live grant, a consumed grant and two claims of a node that
    is gone, as a crash in the middle of a delete would leave them."""

    def plant(conn):
        for ticket, state in ((1, decision.GRANT_WON), (2, "consumed")):
            conn.execute(
                models.grants.insert().values(
                    host_id=GONE,
                    ticket=ticket,
                    instance_uuid=U[20 + ticket],
                    request_id="req-gone",
                    scheduler="sched-gone",
                    state=state,
                    created_at=db.now(),
                    expires_at=db.now(TTL),
                    resources=rows.encode(SLOT),
                )
            )
        for n in (24, 25):
            conn.execute(
                models.claims.insert().values(
                    instance_uuid=U[n],
                    host_id=GONE,
                    grant_ticket=None,
                    created_at=db.now(),
                    resources=rows.encode(SLOT),
                )
            )

    with db.writer() as conn:
        plant(conn)


def memory_orphans(store):
    """``sql_orphans`` for a ``MemoryStore``."""
    for ticket, state in ((1, decision.GRANT_WON), (2, "consumed")):
        grant = memory_store.Grant(
            id=store._next_grant_id,
            host_id=GONE,
            ticket=ticket,
            instance_uuid=U[20 + ticket],
            request_id="req-gone",
            scheduler="sched-gone",
            resources=SLOT,
            state=state,
            created_at=store.now(),
            expires_at=store.now() + datetime.timedelta(seconds=TTL),
        )
        store._next_grant_id += 1
        store.grants[grant.id] = grant
    for n in (24, 25):
        claim = memory_store.Claim(
            id=store._next_claim_id,
            instance_uuid=U[n],
            host_id=GONE,
            resources=SLOT,
            grant_ticket=None,
            created_at=store.now(),
        )
        store._next_claim_id += 1
        store.claims[claim.id] = claim


# -- the scenarios -----------------------------------------------------------


def report(run, name, capacity=TWO_SLOTS, **kwargs):
    if isinstance(capacity, R):
        capacity = Capacity(capacity)
    return run.call("report_host", name, name, capacity, **kwargs)


def registration(run):
    first = report(run, "cmp1")
    report(run, "cmp1", TWO_SLOTS + SLOT, node_uuid=U[0])
    report(run, "cmp1", TWO_SLOTS, used=SLOT)
    run.call("register_host", "cmp1", "cmp1", Capacity(SLOT))
    second = run.call(
        "register_host", "cmp2", "cmp2", OVERCOMMIT, used=R(1, 512, 5)
    )
    run.call("register_host", "cmp3", "cmp3", Capacity(SLOT), node_uuid=U[1])
    run.call("host_state", first)
    run.call("host_state", second)
    run.call("read_hosts")
    run.call("host_reports")
    run.call("granted_by_node")
    run.call("delete_host", "cmp1", "cmp1")
    run.call("delete_host", "cmp1", "cmp1")
    run.call("host_state", first)
    report(run, "cmp1")
    run.call("read_hosts")
    run.call("host_reports")
    run.check()


def reads_since(run):
    a = report(run, "cmp1")
    report(run, "cmp2")
    report(run, "cmp3")
    found = run.call("read_hosts")
    stamps = {state.host_id: stamp for state, stamp in found}
    newest = max(stamps.values())
    known = storage.Known(stamps, newest)
    # Nothing changed: a read since the newest stamp (less an overlap),
    # given what the reader holds, returns nothing.
    overlap = datetime.timedelta(seconds=1)
    run.call("read_hosts", since=newest - overlap, known=known)
    run.call("read_hosts", since=newest - overlap)
    run.advance(2)
    run.call("grant", [a], ask(uuid=U[1]), [])
    run.call("read_hosts", since=newest - overlap, known=known)
    run.call("read_hosts", since=newest + overlap)
    # A stamp the reader holds wrongly (a late commit): read whole.
    late = storage.Known(dict(stamps, **{}), newest)
    late.stamps[max(stamps)] = newest - overlap * 5
    run.call("read_hosts", since=newest - overlap, known=late)


def grants_and_fall_over(run):
    small = report(run, "cmp1", SLOT)
    big = report(run, "cmp2", TWO_SLOTS)
    over = report(run, "cmp3", OVERCOMMIT)
    run.call("grant", [small, big], ask(uuid=U[1]), [])
    # The small node is full now: the grant falls over to the big one.
    run.call("grant", [small, big], ask(uuid=U[2]), [])
    run.call("grant", [small, big, over], ask(TWO_SLOTS, U[3]), [])
    # Nothing fits: every candidate as the grant found it.
    run.call("grant", [small, big], ask(uuid=U[4]), [])
    # Within the overcommitted limit (8 vCPU) but beyond the node's total
    # (4 vCPU): one instance never exceeds a node's physical amount.
    run.call("grant", [over], ask(R(5, 1, 1), U[5]), [])
    run.call("grant", [over], ask(R(4, 1024, 1), U[6]), [])
    run.call("grant", [over], ask(R(4, 1024, 1), U[7]), [])
    # Exactly to the limit in one dimension (RAM: 6144).
    run.call("grant", [over], ask(R(0, 2048, 1), U[8]), [])
    run.call("grant", [over], ask(R(0, 1, 0), U[9]), [])
    run.call("grant", [GONE, over], ask(R(0, 1, 0), U[9]), [])
    run.call("granted_by_node")
    run.call("grant_rows")
    run.call("grant_rows", host="cmp3")
    run.call("host_reports")
    run.check()


def lost_acknowledgement(run):
    node = report(run, "cmp1")
    taken = []
    run.call("grant", [node], ask(uuid=U[1]), taken)
    # A retry of the same call finds the grant its first try committed.
    run.call("grant", [node], ask(uuid=U[1]), taken)
    run.note("taken", len(taken))
    # Another ask with the same list writes a grant of its own.
    run.call("grant", [node], ask(uuid=U[2]), taken)
    run.call("grant_rows")
    run.check()


def withdrawal(run):
    a = report(run, "cmp1")
    b = report(run, "cmp2")
    first = run.call("grant", [a], ask(uuid=U[1]), [])
    # Another scheduler's, request's or instance's ticket is not ours.
    run.call("withdraw", a, first.ticket, ask(uuid=U[1], scheduler="other"))
    run.call("withdraw", a, first.ticket, ask(uuid=U[1], request="req-2"))
    run.call("withdraw", a, first.ticket, ask(uuid=U[2]))
    run.call("withdraw", a, first.ticket, ask(uuid=U[1]))
    run.call("withdraw", a, first.ticket, ask(uuid=U[1]))
    run.call("withdraw", b, 77, ask(uuid=U[1]))
    nameless = run.call("grant", [a], ask(), [])
    run.call("withdraw", a, nameless.ticket, ask(uuid=U[1]))
    run.call("withdraw", a, nameless.ticket, ask())
    # An instance scheduled twice, on two nodes.
    run.call("grant", [a], ask(uuid=U[3]), [])
    run.call("grant", [b], ask(uuid=U[3], request="req-2"), [])
    run.call("grant", [b], ask(uuid=U[4]), [])
    run.call("withdraw_instance", U[3])
    run.call("withdraw_instance", U[3])
    run.call("grant_rows")
    run.call("host_reports")
    run.check()


def claims(run):
    a = report(run, "cmp1", TWO_SLOTS + TWO_SLOTS)
    b = report(run, "cmp2")
    run.call("claim", build(U[1], "nowhere", SLOT))
    # By its grant, without and with resources.
    run.call("grant", [a], ask(uuid=U[1]), [])
    run.call("claim", build(U[1]))
    run.call("grant", [a], ask(uuid=U[2]), [])
    run.call("claim", build(U[2], resources=SLOT))
    # Repeated: the first claim, nothing changes.
    run.call("claim", build(U[2], resources=SLOT))
    run.call("claim", build(U[2], resources=TWO_SLOTS))
    run.call("claim", build(U[2]))
    # Without a grant: re-checked, and rejected when it does not fit.
    run.call("claim", build(U[3], resources=SLOT))
    run.call("claim", build(U[4], resources=TWO_SLOTS))
    run.call("claim", build(U[5]))
    # A grant of another size is replaced by a re-check.
    run.call("grant", [b], ask(TWO_SLOTS, U[6]), [])
    run.call("claim", build(U[6], "cmp2", SLOT))
    # Scheduled twice: one grant consumed, the other withdrawn.
    run.call("grant", [b], ask(uuid=U[7]), [])
    run.call("grant", [a], ask(uuid=U[7], request="req-2"), [])
    run.call("claim", build(U[7], "cmp2", SLOT))
    # A grant written without an instance uuid: only its own request.
    run.call("grant", [a], ask(uuid=None, request="req-9"), [])
    run.call("claim", build(U[8], resources=SLOT, request="req-8"))
    run.call("claim", build(U[9], resources=SLOT, request="req-9"))
    run.call("claim_rows")
    run.call("claim_rows", host="cmp2")
    run.call("host_reports")
    run.call("grant_rows")
    run.check()
    # Release, then release again.
    run.call("release", U[1], "cmp1", "cmp1")
    run.call("release", U[1], "cmp1", "cmp1")
    run.call("release", U[1], "cmp2", "cmp2")
    run.call("release", U[1], "nowhere", "nowhere")
    # A resync replaces the claims: their release changes nothing.
    report(run, "cmp2", used=R(1, 1024, 10))
    run.call("release", U[7], "cmp2", "cmp2")
    run.call("claim_rows")
    run.call("host_reports")
    run.check()


def correction(run):
    a = report(run, "cmp1", SLOT)
    b = report(run, "cmp2")
    run.call("correct_claims", "nowhere", "nowhere", {U[1]: SLOT}, [])
    run.call("grant", [a], ask(uuid=U[1]), [])
    run.call("grant", [b], ask(uuid=U[1], request="req-2"), [])
    run.call("claim", build(U[2], "cmp2", SLOT))
    # New (its grant consumed, its other grant withdrawn), new without a
    # grant and over the limit, resized, released, released unknown.
    run.call(
        "correct_claims",
        "cmp1",
        "cmp1",
        {U[1]: SLOT, U[3]: TWO_SLOTS},
        [U[4]],
    )
    run.call("correct_claims", "cmp2", "cmp2", {U[2]: TWO_SLOTS}, [U[5]])
    run.call("correct_claims", "cmp1", "cmp1", {}, [U[3], U[1]])
    run.call("correct_claims", "cmp1", "cmp1", {U[1]: SLOT}, [U[1]])
    run.call("claim_rows")
    run.call("host_reports")
    run.call("grant_rows")
    run.check()


def reaping(run, plant_orphans):
    a = report(run, "cmp1", TWO_SLOTS + TWO_SLOTS + TWO_SLOTS)
    for n in (1, 2, 3):
        run.call("grant", [a], ask(uuid=U[n]), [])
    run.call("claim", build(U[1], resources=SLOT))
    run.call("claim", build(U[2], resources=SLOT))
    # Consumed grants, in batches of at most ``limit``.
    run.call("reap", storage.SUPERSEDED, 1)
    run.call("reap", storage.SUPERSEDED, 1)
    for reason in storage.REAP_REASONS:
        run.call("reap", reason, 100)
    # A live grant outlives no TTL, and only its TTL.
    run.advance(TTL - 30)
    run.call("reap", storage.EXPIRED, 100)
    run.call("grant", [a], ask(uuid=U[4]), [])
    run.call("grant", [a], ask(uuid=U[5]), [])
    run.advance(60)
    run.call("reap", storage.EXPIRED, 100)
    run.call("host_reports")
    run.advance(TTL)
    run.call("reap", storage.EXPIRED, 1)
    run.call("host_reports")
    run.call("reap", storage.EXPIRED, 100)
    run.call("reap", storage.EXPIRED, 100)
    run.call("host_reports")
    run.call("grant_rows")
    # An expired grant not reaped yet is still consumed exactly.
    run.call("grant", [a], ask(uuid=U[6]), [])
    run.advance(TTL + 60)
    run.call("claim", build(U[6], resources=SLOT))
    run.call("reap", storage.EXPIRED, 100)
    # The rows of a node that is gone.
    plant_orphans()
    run.call("orphan_claims")
    run.check(quiescent=True)
    run.call("reap", storage.ORPHANED, 1)
    run.call("reap", storage.ORPHANED, 100)
    run.call("reap", storage.ORPHANED_CLAIMS, 1)
    run.call("orphan_claims")
    run.call("reap", storage.ORPHANED_CLAIMS, 100)
    run.call("orphan_claims")
    # Deleting a node takes its grants and claims along.
    run.call("grant", [a], ask(uuid=U[7]), [])
    run.call("delete_host", "cmp1", "cmp1")
    run.call("grant_rows")
    run.call("claim_rows")
    run.call("orphan_claims")
    for reason in storage.REAP_REASONS:
        run.call("reap", reason, 100)
    run.call("host_reports")
    run.check(quiescent=True)


SCENARIOS = {
    "registration": registration,
    "reads_since": reads_since,
    "grants_and_fall_over": grants_and_fall_over,
    "lost_acknowledgement": lost_acknowledgement,
    "withdrawal": withdrawal,
    "claims": claims,
    "correction": correction,
    "reaping": reaping,
}


class Conformance:
    """Mixin: every scenario on ``make_sql_store()`` and on a
    ``MemoryStore``, step by step the same."""

    def make_sql_store(self):
        raise NotImplementedError

    def sql_run(self):
        store = self.make_sql_store()

        def advance(seconds):
            store.db.clock_offset += seconds

        run = Run(store, advance)
        run.plant_orphans = lambda: sql_orphans(store.db)
        return run

    @staticmethod
    def memory_run(cls=memory_store.MemoryStore):
        store = cls()

        def advance(seconds):
            store.clock_offset += seconds

        run = Run(store, advance)
        run.plant_orphans = lambda: memory_orphans(store)
        return run

    def assert_same(self, scenario, sql, memory):
        """Fail at the first step where the runs differ."""
        for n, (theirs, ours) in enumerate(zip(sql.steps, memory.steps)):
            self.assertEqual(
                theirs,
                ours,
                "%s: step %d differs (SQL store first, memory store "
                "second)" % (scenario, n + 1),
            )
        self.assertEqual(len(sql.steps), len(memory.steps), scenario)

    def run_both(self, name, memory_cls=memory_store.MemoryStore):
        scenario = SCENARIOS[name]
        runs = [self.sql_run(), self.memory_run(memory_cls)]
        for run in runs:
            if scenario is reaping:
                scenario(run, run.plant_orphans)
            else:
                scenario(run)
        self.assert_same(name, *runs)
        return runs

    def test_registration(self):
        self.run_both("registration")

    def test_reads_since(self):
        sql, _ = self.run_both("reads_since")
        # The read after the grant returned the one node it changed.
        since_known = [s for s in sql.steps if s[0] == "read_hosts"]
        self.assertEqual([], since_known[1][1])
        self.assertEqual(1, len(since_known[3][1]))

    def test_grants_and_fall_over(self):
        self.run_both("grants_and_fall_over")

    def test_lost_acknowledgement(self):
        self.run_both("lost_acknowledgement")

    def test_withdrawal(self):
        self.run_both("withdrawal")

    def test_claims(self):
        sql, _ = self.run_both("claims")
        hows = [
            s[1][2] for s in sql.steps if s[0] == "claim" and s[1] != "raised"
        ]
        self.assertEqual({"grant", "recheck", "existing"}, set(hows))
        errors = {s[2][0] for s in sql.steps if s[1:2] == ("raised",)}
        self.assertEqual({"UnknownHost", "ClaimRejected"}, errors)

    def test_correction(self):
        self.run_both("correction")

    def test_reaping(self):
        sql, _ = self.run_both("reaping")
        reaped = [s for s in sql.steps if s[0] == "reap"]
        self.assertEqual([(1, 1), (1, 1), (0, 0)], [s[1] for s in reaped[:3]])
        self.assertEqual(
            [(0, 0), (1, 1), (1, 1), (1, 1), (0, 0)],
            [s[1] for s in reaped[6:11]],
        )
        self.assertEqual([], sql.check(quiescent=True))
