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
from grant_scheduler.resources import Inventory
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

# Resource classes beside the standard three.
PCPU = "PCPU"
GOLD = "CUSTOM_BAREMETAL_GOLD"
SILVER = "CUSTOM_BAREMETAL_SILVER"
GPU = "CUSTOM_GPU"
FPGA = "CUSTOM_FPGA"


def of(name, amount=1):
    """``amount`` of one class."""
    return R(**{name: amount})


# An Ironic node: one machine of one custom class, and nothing else.
GOLD_NODE = Capacity.of({GOLD: Inventory(1)})

# Dedicated CPUs beside shared ones: VCPU 32 (max_unit 8), PCPU 4,
# MEMORY_MB (8192 - 512) x 1.5 = 11520 (max_unit 8192), DISK_GB 90.
PINNED = Capacity.of(
    {
        "VCPU": Inventory(8, allocation_ratio=4.0),
        PCPU: Inventory(4),
        "MEMORY_MB": Inventory(8192, reserved=512, allocation_ratio=1.5),
        "DISK_GB": Inventory(100, reserved=10),
    }
)
PINNED_GPU = Capacity.of(dict(PINNED.inventories, **{GPU: Inventory(2)}))

# Placement's units: at most 4 vCPU, RAM by 512 MB, disk 10 to 50 GB by
# 10, one GPU at a time.
UNITS = Capacity.of(
    {
        "VCPU": Inventory(16, max_unit=4),
        "MEMORY_MB": Inventory(16384, min_unit=512, step_size=512),
        "DISK_GB": Inventory(200, min_unit=10, max_unit=50, step_size=10),
        GPU: Inventory(2, max_unit=1),
    }
)

PLAIN = Capacity(R(4, 4096, 40))
ONE_GPU = Capacity.of(dict(PLAIN.inventories, **{GPU: Inventory(1)}))
TWO_GPUS = Capacity.of(dict(PLAIN.inventories, **{GPU: Inventory(2)}))


def pinned(pcpus, vcpus=0, memory_mb=1024, disk_gb=10, **classes):
    return R(vcpus, memory_mb, disk_gb, PCPU=pcpus, **classes)


def with_gpu(resources=SLOT, gpus=1):
    return resources + of(GPU, gpus)


# A node id no node has: the rows of a node whose delete a crash cut short.
GONE = 999999


def ask(resources=SLOT, uuid=None, request="req-1", scheduler="sched-1"):
    return storage.Ask(resources, scheduler, uuid, request, TTL)


def build(uuid, node="cmp1", resources=None, request=None):
    return storage.Build(uuid, node, node, resources, request)


def asking(run, uuid, amount, node="cmp1"):
    """A claim that trusts its grant and gives ``amount`` only when asked
    (a Nova compute's), recording how often it was asked."""
    asked = []

    def resources_of():
        asked.append(uuid)
        return amount

    run.call(
        "claim", storage.Build(uuid, node, node, resources_of=resources_of)
    )
    run.note("asked", len(asked))


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
    # An instance two schedulers granted: only the named one's goes.
    run.call("grant", [a], ask(uuid=U[5], scheduler="sched-2"), [])
    run.call("grant", [b], ask(uuid=U[5]), [])
    run.call("withdraw_instance", U[5], "sched-2")
    run.call("withdraw_instance", U[5], "sched-2")
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
    run.call("claimed_on", [U[2], U[1], U[3]])
    run.call("claimed_on", [])
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
    # Its amount asked only without a grant of its own, once.
    c = report(run, "cmp3", TWO_SLOTS + TWO_SLOTS)
    run.call("grant", [c], ask(uuid=U[10]), [])
    asking(run, U[10], TWO_SLOTS, "cmp3")
    asking(run, U[11], SLOT, "cmp3")
    asking(run, U[12], TWO_SLOTS + TWO_SLOTS, "cmp3")
    asking(run, U[11], TWO_SLOTS, "cmp3")
    # The amount the claiming process granted, given: its grant matched by
    # it; a grant of another amount claimed at its own amount.
    d = report(run, "cmp4", TWO_SLOTS + TWO_SLOTS)
    run.call("grant", [d], ask(uuid=U[13]), [])
    run.call("claim", storage.Build(U[13], "cmp4", "cmp4", granted=SLOT))
    run.call("grant", [d], ask(uuid=U[14]), [])
    run.call("claim", storage.Build(U[14], "cmp4", "cmp4", granted=TWO_SLOTS))
    run.call("claimed_on", [U[n] for n in range(1, 15)])
    run.call("claim_rows")
    run.call("claim_rows", host="cmp2")
    run.call("host_reports")
    run.call("grant_rows")
    run.call("grant_rows", live=True)
    run.call("grant_rows", host="cmp3", live=True)
    run.check()
    # Release, then release again.
    run.call("release", U[1], "cmp1", "cmp1")
    run.call("release", U[1], "cmp1", "cmp1")
    run.call("release", U[1], "cmp2", "cmp2")
    run.call("release", U[1], "nowhere", "nowhere")
    # A resync replaces the claims: their release changes nothing.
    report(run, "cmp2", used=R(1, 1024, 10))
    run.call("release", U[7], "cmp2", "cmp2")
    run.call("claimed_on", [U[n] for n in range(1, 13)])
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


# -- books by resource class ------------------------------------------------


def over_the_limit_elsewhere(run):
    """A node over its limit in one class takes no grant of that class
    and may take others, as placement decides (the request's classes
    alone are compared)."""
    node = report(run, "cmp1", TWO_SLOTS)
    # What runs is counted: over in DISK_GB only.
    run.call("correct_claims", "cmp1", "cmp1", {U[1]: R(1, 1024, 30)}, [])
    run.call("grant", [node], ask(R(1, 512, 1), U[2]), [])
    run.call("grant", [node], ask(R(1, 512), U[2]), [])
    run.call("claim", build(U[3], resources=R(0, 512, 1)))
    run.call("claim", build(U[3], resources=R(0, 512)))
    run.call("host_state", node)
    run.check()


def custom_classes(run):
    gold1 = report(run, "ironic1", GOLD_NODE)
    gold2 = report(run, "ironic2", GOLD_NODE)
    vm = report(run, "cmp3", TWO_SLOTS)
    silver = report(run, "ironic4", Capacity.of({SILVER: Inventory(1)}))
    # Granted once, then refused: the node is one machine.
    run.call("grant", [gold1], ask(of(GOLD), U[1]), [])
    run.call("grant", [gold1], ask(of(GOLD), U[2]), [])
    # Nodes that lack the class are passed over, as a full one is.
    run.call("grant", [vm, silver, gold1, gold2], ask(of(GOLD), U[2]), [])
    run.call("grant", [vm, silver, gold1, gold2], ask(of(GOLD), U[3]), [])
    # Never two units of one machine, nor a class beside it the node lacks.
    gold5 = report(run, "ironic5", GOLD_NODE)
    run.call("grant", [gold5], ask(of(GOLD, 2), U[3]), [])
    run.call("grant", [gold5, vm], ask(of(GOLD) + SLOT, U[3]), [])
    # A virtual machine's request falls over from the Ironic node, and
    # another custom class's to its own node.
    run.call("grant", [gold5, vm], ask(SLOT, U[3]), [])
    run.call("grant", [gold5, vm, silver], ask(of(SILVER), U[4]), [])
    run.call("host_state", gold5)
    run.call("granted_by_node")
    # Claims: by the grant, and re-checked where it is full or not offered.
    run.call("claim", build(U[1], "ironic1"))
    run.call("claim", build(U[2], "ironic2", of(GOLD)))
    run.call("claim", build(U[5], "ironic1", of(GOLD)))
    run.call("claim", build(U[5], "cmp3", of(GOLD)))
    run.call("claim", build(U[5], "ironic5", of(GOLD)))
    run.call("claim", build(U[4], "ironic4", of(SILVER)))
    run.call("claim_rows")
    run.call("grant_rows")
    run.call("host_reports")
    run.check()
    # Released, the machines take the next ones; a withdrawn grant frees
    # one.
    run.call("release", U[1], "ironic1", "ironic1")
    run.call("release", U[5], "ironic5", "ironic5")
    run.call("grant", [gold1, gold2, gold5], ask(of(GOLD), U[6]), [])
    withdrawn = run.call("grant", [gold1, gold2, gold5], ask(of(GOLD)), [])
    run.call("grant", [gold1, gold2, gold5], ask(of(GOLD), U[7]), [])
    run.call("withdraw", withdrawn.host_id, withdrawn.ticket, ask(of(GOLD)))
    run.call("grant", [gold1, gold2, gold5], ask(of(GOLD), U[7]), [])
    run.call("read_hosts")
    run.call("host_reports")
    run.check()


def pcpu_beside_vcpu(run):
    shared = report(run, "cmp1", R(8, 8192, 100))
    node = report(run, "cmp2", PINNED)
    # Dedicated CPUs only the pinned node offers: the grants fall over to
    # it, until its four are taken.
    run.call("grant", [shared, node], ask(pinned(2), U[1]), [])
    run.call("grant", [shared, node], ask(pinned(2), U[2]), [])
    run.call("grant", [shared, node], ask(pinned(1), U[3]), [])
    # Shared CPUs are a class of their own there, overcommitted (32) but
    # never more than the node's 8 to one instance.
    run.call("grant", [node, shared], ask(R(8, 1024, 10), U[3]), [])
    run.call("grant", [node], ask(R(9, 1024, 10), U[4]), [])
    # RAM: within the limit (11520) but beyond max_unit (8192); then
    # exactly to the limit.
    run.call("grant", [node], ask(R(1, 8193, 10), U[4]), [])
    run.call("grant", [node], ask(R(1, 8192, 10), U[4]), [])
    run.call("grant", [node], ask(R(1, 512, 10), U[5]), [])
    run.call("grant", [node], ask(R(1, 256, 10), U[5]), [])
    run.call("host_state", node)
    # Claims: by the grant; a re-check that fits only with the grant held
    # given back (PCPU is full); without a grant where PCPU is full; a
    # grant of VCPU claimed as PCPU, refused whole; then smaller.
    run.call("claim", build(U[1], "cmp2"))
    run.call("claim", build(U[2], "cmp2", pinned(2, vcpus=1)))
    run.call("claim", build(U[6], "cmp2", pinned(1)))
    run.call("claim", build(U[3], "cmp2", pinned(1, vcpus=1)))
    run.call("host_state", node)
    run.call("claim", build(U[3], "cmp2", R(4, 1024, 10)))
    run.call("withdraw_instance", U[4])
    run.call("claim", build(U[5], "cmp2", R(1, 256, 10)))
    run.call("release", U[1], "cmp2", "cmp2")
    run.call("grant", [shared, node], ask(pinned(2), U[7]), [])
    run.call("host_state", node)
    run.call("claim_rows")
    run.call("grant_rows")
    run.call("host_reports")
    run.check()


def units(run):
    node = report(run, "cmp1", UNITS)
    loose = report(run, "cmp2", Capacity(R(16, 16384, 200)))
    # Each refused by one class's units, the others admitted.
    for refused in (
        R(5, 1024, 10),  # VCPU above max_unit
        R(1, 256, 10),  # MEMORY_MB below min_unit
        R(1, 700, 10),  # MEMORY_MB not a step
        R(1, 1024, 5),  # DISK_GB below min_unit
        R(1, 1024, 15),  # DISK_GB not a step
        R(1, 1024, 60),  # DISK_GB above max_unit
        with_gpu(R(1, 1024, 10), 2),  # a GPU above max_unit
    ):
        run.call("grant", [node], ask(refused, U[1]), [])
    # ... and taken by a node of looser units.
    run.call("grant", [node, loose], ask(R(1, 700, 15), U[1]), [])
    run.call("grant", [node, loose], ask(R(5, 256, 60), U[2]), [])
    # Exactly on the units; a GPU only the strict node has.
    run.call("grant", [loose, node], ask(with_gpu(R(4, 1536, 50)), U[3]), [])
    run.call("grant", [loose, node], ask(with_gpu(R(1, 512, 10)), U[4]), [])
    run.call("grant", [loose, node], ask(with_gpu(R(1, 512, 10)), U[5]), [])
    run.call("grant", [node], ask(of(GPU), U[5]), [])
    run.call("host_state", node)
    # A re-check applies the units to the claim's amount.
    run.call("claim", build(U[6], "cmp1", R(1, 700, 10)))
    run.call("claim", build(U[6], "cmp1", R(1, 1024, 10)))
    run.call("claim", build(U[3], "cmp1", with_gpu(R(8, 1536, 50))))
    run.call("claim", build(U[3], "cmp1", with_gpu(R(4, 1536, 50), 2)))
    run.call("claim", build(U[3], "cmp1", with_gpu(R(2, 1536, 50))))
    run.call("claim", build(U[4], "cmp1"))
    run.call("claim", build(U[1], "cmp2", R(1, 700, 15)))
    run.call("claim_rows")
    run.call("grant_rows")
    run.call("host_reports")
    run.check()


def all_or_nothing(run):
    a = report(run, "cmp1", ONE_GPU)
    b = report(run, "cmp2", TWO_GPUS)
    run.call("grant", [a], ask(with_gpu(), U[1]), [])
    # The GPU is taken: a request of every class there is refused whole,
    # none of its other classes moved, its ticket given back ...
    run.call("grant", [a], ask(with_gpu(), U[2]), [])
    run.call("host_state", a)
    # ... and falls over whole to the next node.
    run.call("grant", [a, b], ask(with_gpu(), U[2]), [])
    # The other classes still fit there, to the limit of three at once.
    run.call("grant", [a, b], ask(R(3, 3072, 30), U[3]), [])
    run.call("grant", [a], ask(R(1), U[4]), [])
    run.call("grant", [a], ask(R(0, 1024), U[4]), [])
    run.call("grant", [a, b], ask(R(1, 0, 0), U[4]), [])
    # A re-check of a grant refused in one class moves nothing either:
    # the grant stays live, and is then claimed as it is.
    run.call("claim", build(U[1], "cmp1", with_gpu(R(2, 1024, 10))))
    run.call("host_state", a)
    run.call("grant_rows", host="cmp1")
    run.call("claim", build(U[1], "cmp1"))
    # A withdrawal and a release give back every class.
    run.call("withdraw_instance", U[3])
    run.call("host_state", a)
    run.call("release", U[1], "cmp1", "cmp1")
    run.call("host_state", a)
    run.call("grant", [a], ask(with_gpu(R(4, 4096, 40)), U[5]), [])
    run.call("granted_by_node")
    run.call("host_reports")
    run.check()


def books_by_class(run):
    a = report(run, "cmp1", PINNED_GPU)
    b = report(run, "cmp2", PINNED_GPU)
    run.call("grant", [a], ask(pinned(2, **{GPU: 1}), U[1]), [])
    run.call("grant", [a], ask(with_gpu(R(2, 2048, 20)), U[2]), [])
    run.call("grant", [a], ask(pinned(1), U[3]), [])
    run.call("grant", [b], ask(pinned(1), U[3], request="req-2"), [])
    run.call("grant", [a], ask(pinned(1), None, request="req-9"), [])
    run.call("host_state", a)
    # Claimed by the grant; re-checked without its GPU (given back); a
    # grant without an instance uuid by its request.
    run.call("claim", build(U[1]))
    run.call("claim", build(U[2], resources=R(2, 2048, 20)))
    run.call("claim", build(U[9], resources=pinned(1), request="req-9"))
    run.call("host_state", a)
    # A correction: resized into two GPUs; new at another amount than its
    # grant (consumed, its duplicate withdrawn); released; new in a class
    # the node lacks, counted in a row of no capacity.
    run.call(
        "correct_claims",
        "cmp1",
        "cmp1",
        {
            U[1]: pinned(1, **{GPU: 2}),
            U[3]: pinned(1, vcpus=2),
            U[5]: R(1, 512, 10, **{FPGA: 1}),
        },
        [U[2]],
    )
    run.call("host_state", a)
    run.call("host_state", b)
    run.call("host_reports")
    run.check()
    run.call("grant", [a, b], ask(R(1, 512, 10, **{FPGA: 1}), U[6]), [])
    run.call("correct_claims", "cmp1", "cmp1", {}, [U[5]])
    run.call("host_state", a)
    run.call("grant", [a, b], ask(R(1, 512, 10, **{FPGA: 1}), U[6]), [])
    # Grants of several classes expire, each class given back.
    run.call("grant", [a], ask(pinned(1), U[7]), [])
    run.call("grant", [a], ask(R(1, 512, 10), U[8]), [])
    run.advance(TTL + 60)
    run.call("host_state", a)
    run.call("reap", storage.EXPIRED, 1)
    run.call("host_state", a)
    run.call("reap", storage.EXPIRED, 100)
    run.call("reap", storage.SUPERSEDED, 100)
    run.call("host_state", a)
    # A report keeps usage by class, and drops the empty row.
    report(run, "cmp1", PINNED_GPU)
    run.call("host_state", a)
    run.call("claim_rows")
    run.call("grant_rows")
    for uuid in (U[1], U[3], U[9], U[9]):
        run.call("release", uuid, "cmp1", "cmp1")
    run.call("host_reports")
    run.check(quiescent=True)


def dropped_class(run):
    a = report(run, "cmp1", TWO_GPUS)
    run.call("grant", [a], ask(with_gpu(), U[1]), [])
    run.call("claim", build(U[1]))
    run.call("grant", [a], ask(with_gpu(), U[2]), [])
    run.call("grant", [a], ask(SLOT, U[3]), [])
    # The GPUs gone from the node: what is counted in them stays, with no
    # capacity, and nothing more of them fits.
    report(run, "cmp1", PLAIN)
    run.call("host_state", a)
    run.call("host_reports")
    run.check()
    run.call("grant", [a], ask(of(GPU), U[4]), [])
    run.call("claim", build(U[4], resources=with_gpu()))
    # The live grant of a GPU is still claimed exactly.
    run.call("claim", build(U[2]))
    report(run, "cmp1", PLAIN)
    run.call("host_state", a)
    # A resync: the hypervisor still counts a GPU in use, then none.
    report(run, "cmp1", PLAIN, used=with_gpu())
    run.call("host_state", a)
    run.call("host_reports")
    report(run, "cmp1", PLAIN, used=SLOT)
    run.call("host_state", a)
    run.call("grant", [a], ask(SLOT, U[5]), [])
    run.call("grant", [a], ask(of(GPU), U[5]), [])
    # Offered again; then dropped while only a live grant holds it, which
    # is withdrawn: the row stays empty until the next report.
    report(run, "cmp1", TWO_GPUS)
    run.call("grant", [a], ask(with_gpu(R(1), 2), U[6]), [])
    report(run, "cmp1", PLAIN)
    run.call("host_state", a)
    run.call("withdraw_instance", U[6])
    run.call("host_state", a)
    report(run, "cmp1", PLAIN)
    run.call("host_state", a)
    # Dropped while a grant holds it, which expires.
    report(run, "cmp1", TWO_GPUS)
    run.call("grant", [a], ask(of(GPU), U[7]), [])
    report(run, "cmp1", PLAIN)
    run.advance(TTL + 60)
    run.call("reap", storage.EXPIRED, 100)
    run.call("host_state", a)
    # A new node's usage in a class its capacity lacks.
    b = run.call("register_host", "cmp2", "cmp2", PLAIN, used=SLOT + of(FPGA))
    run.call("host_state", b)
    report(run, "cmp3", PLAIN, used=of(FPGA))
    run.call("read_hosts")
    run.call("host_reports")
    run.call("grant_rows")
    run.check()


SCENARIOS = {
    "registration": registration,
    "reads_since": reads_since,
    "grants_and_fall_over": grants_and_fall_over,
    "lost_acknowledgement": lost_acknowledgement,
    "withdrawal": withdrawal,
    "claims": claims,
    "correction": correction,
    "reaping": reaping,
    "custom_classes": custom_classes,
    "pcpu_beside_vcpu": pcpu_beside_vcpu,
    "units": units,
    "all_or_nothing": all_or_nothing,
    "books_by_class": books_by_class,
    "dropped_class": dropped_class,
    "over_the_limit_elsewhere": over_the_limit_elsewhere,
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

    @staticmethod
    def granted_to(run):
        """The node each grant of a run went to (None: refused)."""
        return [
            s[1][1] if s[1][0] else None for s in run.steps if s[0] == "grant"
        ]

    @staticmethod
    def hows(run):
        """How each claim of a run went (``raised`` when rejected)."""
        return [
            s[1] if s[1] == "raised" else s[1][2]
            for s in run.steps
            if s[0] == "claim"
        ]

    def test_custom_classes(self):
        sql, _ = self.run_both("custom_classes")
        self.assertEqual(
            ["N1", None, "N2", None, None, None, "N3", "N4"]
            + ["N1", "N5", None, "N5"],
            self.granted_to(sql),
        )
        self.assertEqual(
            ["grant", "grant", "raised", "raised", "recheck", "grant"],
            self.hows(sql),
        )

    def test_pcpu_beside_vcpu(self):
        sql, _ = self.run_both("pcpu_beside_vcpu")
        self.assertEqual(
            ["N2", "N2", None, "N2", None, None, "N2", None, "N2", "N2"],
            self.granted_to(sql),
        )
        self.assertEqual(
            ["grant", "recheck", "raised", "raised", "recheck", "grant"],
            self.hows(sql),
        )

    def test_units(self):
        sql, _ = self.run_both("units")
        self.assertEqual(
            [None] * 7 + ["N2", "N2", "N1", "N1", None, None],
            self.granted_to(sql),
        )
        self.assertEqual(
            ["raised", "recheck", "raised", "raised", "recheck", "grant"]
            + ["grant"],
            self.hows(sql),
        )

    def test_all_or_nothing(self):
        sql, _ = self.run_both("all_or_nothing")
        self.assertEqual(
            ["N1", None, "N2", "N1", None, None, "N2", "N1"],
            self.granted_to(sql),
        )
        # The refused grant and the refused re-check moved no class.
        states = [s[1] for s in sql.steps if s[0] == "host_state"]
        self.assertEqual(SLOT + of(GPU), dict(states[0])["granted"])
        self.assertEqual(
            SLOT + of(GPU) + R(3, 3072, 30), dict(states[1])["granted"]
        )

    def test_books_by_class(self):
        sql, _ = self.run_both("books_by_class")
        self.assertEqual([], sql.check(quiescent=True))

    def test_dropped_class(self):
        sql, _ = self.run_both("dropped_class")
        dropped = dict([s[1] for s in sql.steps if s[0] == "host_state"][0])
        self.assertEqual(
            Inventory(total=0, max_unit=0),
            dropped["capacity"].inventories[GPU],
        )
        self.assertEqual(SLOT + of(GPU), dropped["used"])

    def test_over_the_limit_elsewhere(self):
        sql, _ = self.run_both("over_the_limit_elsewhere")
        self.assertEqual([None, "N1"], self.granted_to(sql))
        self.assertEqual(["raised", "recheck"], self.hows(sql))
        [state] = [dict(s[1]) for s in sql.steps if s[0] == "host_state"]
        self.assertEqual(R(1, 1536, 30), state["used"])
        self.assertEqual(R(1, 512), state["granted"])
