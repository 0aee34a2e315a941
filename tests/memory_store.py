"""``MemoryStore``: the whole ``storage.Store`` in memory, for tests.

It does what the SQL store (``grant_scheduler.db.store.Store``) does, method
by method, on plain dictionaries, with the node's books by resource class:
the same fit rule (``HostState.fits``: every class of ``R`` offered and
within its inventory's units, ``min_unit``, ``max_unit`` and
``step_size``, and ``used + granted + R <= limit`` class by class), a
grant of every class or none, tickets, fall-over across candidates (the
first candidate that fits; the database's choice of a row no other grant
holds is not modelled), withdrawal, claims by grant, by re-check (the
same rule, the grant held given back first) and repeated, release,
correction, the reaper by each reason, and the inspection reads.  As the
SQL store's inventory rows, a node's books keep a class its capacity does
not offer (``NO_CAPACITY``) while anything is counted in it: a report
that drops a class still used, externally used or granted, or usage or
grants moved into a class the books lack (a correction counting what
runs there).  Each method is one transaction: what it raises undoes what
it wrote.  ``tests/unit/test_store_conformance.py`` and
``tests/functional/test_store_conformance.py`` run the same scenarios
against both stores and compare the results, so the two cannot drift.

Time is a clock of its own: every write stamps its rows one microsecond
after the previous write, and ``clock_offset`` moves it forward as
``Database.clock_offset`` moves the database server's clock.

For the protocol's unit tests it also records what the scheduler asked
(``offered``, ``reads``, ``known``, ``withdrawn``) and lets a test change
nodes behind a scheduler's back: ``take`` (another scheduler's grant),
``states[host_id] = ...``, ``before_grant`` (called with each candidate
before the grant looks at it) and ``fail_after_write`` (raised after a
grant committed: a commit whose answer is lost).
"""

import collections.abc
import contextlib
import dataclasses
import datetime

from grant_scheduler import decision
from grant_scheduler import exception
from grant_scheduler import storage
from grant_scheduler.resources import NOTHING
from grant_scheduler.resources import Capacity
from grant_scheduler.resources import HostState
from grant_scheduler.resources import Inventory

EPOCH = datetime.datetime(2026, 1, 1)
"""The clock's start: the nodes a store is built with are stamped one
second apart after it, in their order."""

_TICK = datetime.timedelta(microseconds=1)

NO_CAPACITY = Inventory(total=0, max_unit=0)
"""The inventory of a class the node's books hold but its capacity does
not offer (the SQL store's row of no capacity): nothing of it fits."""


def _kept(capacity, *amounts):
    """``capacity`` with ``NO_CAPACITY`` for each class of ``amounts`` it
    does not offer (what ``hosts.report`` and ``rows.move`` write)."""
    missing = {
        name
        for amount in amounts
        for name in amount
        if name not in capacity.inventories
    }
    if not missing:
        return capacity
    inventories = dict(capacity.inventories)
    inventories.update((name, NO_CAPACITY) for name in missing)
    return Capacity.of(inventories)


# How many times a claim that found itself made already, and then found
# that claim gone, starts again (as the SQL store).
REPEATED_CLAIM_TRIES = 3


@dataclasses.dataclass(frozen=True)
class Node:
    """A ``gs_hosts`` row."""

    state: HostState
    external: object = NOTHING
    ticket: int = 0
    last_grant_ticket: int = 0
    last_grant_at: datetime.datetime = None
    updated_at: datetime.datetime = None


@dataclasses.dataclass(frozen=True)
class Grant:
    """A ``gs_grants`` row."""

    id: int
    host_id: int
    ticket: int
    instance_uuid: str
    request_id: str
    scheduler: str
    resources: object
    state: str
    created_at: datetime.datetime
    expires_at: datetime.datetime
    consumed_at: datetime.datetime = None


@dataclasses.dataclass(frozen=True)
class Claim:
    """A ``gs_claims`` row."""

    id: int
    instance_uuid: str
    host_id: int
    resources: object
    grant_ticket: int
    created_at: datetime.datetime


class _Duplicate(Exception):
    """The claim row exists (the SQL store's ``DBDuplicateEntry``)."""


class _AlreadyClaimed(Exception):
    """A rejected claim is a repeat (the SQL store's ``AlreadyClaimed``)."""


class _States(collections.abc.MutableMapping):
    """``{host id: HostState}``: the nodes as a test sees and changes
    them; setting one stamps its row as any write does."""

    def __init__(self, store):
        self._store = store

    def __getitem__(self, host_id):
        return self._store._nodes[host_id].state

    def __setitem__(self, host_id, state):
        self._store._write(host_id, state=state)

    def __delitem__(self, host_id):
        del self._store._nodes[host_id]

    def __iter__(self):
        return iter(self._store._nodes)

    def __len__(self):
        return len(self._store._nodes)


class MemoryStore(storage.Store):
    """``storage.Store`` on dictionaries, with the SQL store's behaviour."""

    def __init__(self, states=()):
        """:param states: ``HostState``s to start with (their ``used`` is
        usage no claim accounts for; their ``granted`` has no grant rows
        behind it)."""
        self._nodes = {}
        self.grants = {}  # grant id -> Grant
        self.claims = {}  # claim id -> Claim
        self._time = EPOCH
        self.clock_offset = 0.0
        """Seconds added to this store's clock (``Database.clock_offset``)."""
        for n, state in enumerate(states):
            self._nodes[state.host_id] = Node(
                state=dataclasses.replace(state),
                external=state.used,
                updated_at=EPOCH + datetime.timedelta(seconds=n + 1),
            )
        self._time = EPOCH + datetime.timedelta(seconds=len(self._nodes))
        self._next_host_id = max(self._nodes, default=0) + 1
        self._next_grant_id = 1
        self._next_claim_id = 1
        # What tests look at and change.
        self.states = _States(self)
        self.withdrawn = []  # (host id, ticket) of each withdraw call
        self.reads = []  # ``since`` of each read_hosts call
        self.known = []  # ``known`` of each read_hosts call, copied
        self.offered = []  # the host ids of each grant call
        self.before_grant = None
        self.fail_after_write = None

    # -- what tests use -------------------------------------------------------

    def take(self, host_id, amount):
        """Another scheduler's grant of ``amount`` on the node (its row's
        ``granted`` only: no grant row is written)."""
        state = self._nodes[host_id].state
        self.states[host_id] = dataclasses.replace(
            state, granted=state.granted + amount
        )

    # -- the clock and the rows -----------------------------------------------

    def now(self):
        """This store's clock (the database server's, for the SQL one)."""
        return self._time + datetime.timedelta(seconds=self.clock_offset)

    def _tick(self):
        self._time += _TICK
        return self.now()

    def _write(self, host_id, **changes):
        """Change a node's row and stamp it."""
        node = self._nodes[host_id]
        self._nodes[host_id] = dataclasses.replace(
            node, updated_at=self._tick(), **changes
        )

    def _move(self, host_id, used=NOTHING, granted=NOTHING, **changes):
        """Add ``used`` and ``granted`` to a node's books (when the node
        exists); a class they lack is added with no capacity."""
        node = self._nodes.get(host_id)
        if node is None:
            return False
        state = dataclasses.replace(
            node.state,
            capacity=_kept(node.state.capacity, used, granted),
            used=node.state.used + used,
            granted=node.state.granted + granted,
        )
        self._write(host_id, state=state, **changes)
        return True

    @contextlib.contextmanager
    def _transaction(self):
        """Undo every row change when the block raises."""
        tables = (self._nodes, self.grants, self.claims)
        saved = [dict(table) for table in tables]
        try:
            yield
        except BaseException:
            for table, rows in zip(tables, saved):
                table.clear()
                table.update(rows)
            raise

    def _named(self, host, node):
        for host_id, row in self._nodes.items():
            if (row.state.host, row.state.node) == (host, node):
                return host_id
        return None

    def _insert(self, host, node, capacity, used, node_uuid):
        used = used or NOTHING
        capacity = _kept(capacity, used)
        host_id = self._next_host_id
        self._next_host_id += 1
        self._nodes[host_id] = Node(
            state=HostState(
                host_id=host_id,
                host=host,
                node=node,
                capacity=capacity,
                used=used,
                granted=NOTHING,
                node_uuid=node_uuid,
                limit=capacity.limit(),
            ),
            external=used,
            updated_at=self._tick(),
        )
        return host_id

    # -- storage.Store: nodes -------------------------------------------------

    def report_host(self, host, node, capacity, used=None, node_uuid=None):
        with self._transaction():
            host_id = self._named(host, node)
            if host_id is None:
                return self._insert(host, node, capacity, used, node_uuid)
            row = self._nodes[host_id]
            used_now = row.state.used if used is None else used
            external = row.external if used is None else used
            # A class no longer offered stays, with no capacity, while
            # anything is counted in it; live grants always stay.
            capacity = _kept(capacity, used_now, row.state.granted, external)
            state = dataclasses.replace(
                row.state,
                capacity=capacity,
                limit=capacity.limit(),
                node_uuid=row.state.node_uuid
                if node_uuid is None
                else node_uuid,
                used=used_now,
            )
            self._write(host_id, state=state, external=external)
            if used is not None:
                for claim in self._claims_on(host_id):
                    del self.claims[claim.id]
            return host_id

    def register_host(self, host, node, capacity, used=None, node_uuid=None):
        with self._transaction():
            if self._named(host, node) is not None:
                return None
            return self._insert(host, node, capacity, used, node_uuid)

    def delete_host(self, host, node):
        with self._transaction():
            host_id = self._named(host, node)
            if host_id is None:
                return False
            del self._nodes[host_id]
            for grant in list(self.grants.values()):
                if grant.host_id == host_id:
                    del self.grants[grant.id]
            for claim in self._claims_on(host_id):
                del self.claims[claim.id]
            return True

    def read_hosts(self, since=None, known=None):
        self.reads.append(since)
        # NOTE: a copy: the cache goes on updating the stamps it passed.
        self.known.append(
            known and storage.Known(dict(known.stamps), known.newest)
        )
        found = []
        for host_id, row in self._nodes.items():
            stamp = row.updated_at
            if since is not None and stamp < since:
                continue
            if (
                since is not None
                and known is not None
                and known.newest is not None
                and stamp <= known.newest
                and known.stamps.get(host_id) == stamp
            ):
                continue
            found.append((dataclasses.replace(row.state), stamp))
        return found

    def host_state(self, host_id):
        row = self._nodes.get(host_id)
        return None if row is None else dataclasses.replace(row.state)

    def granted_by_node(self):
        return {
            (row.state.host, row.state.node): row.state.granted
            for row in self._nodes.values()
            if row.state.granted != NOTHING
        }

    # -- storage.Store: grants ------------------------------------------------

    @staticmethod
    def _written_for(grant, ask):
        return (grant.scheduler, grant.request_id, grant.instance_uuid) == (
            ask.scheduler,
            ask.request_id,
            ask.instance_uuid,
        )

    def _live(self, grant):
        return grant.state == decision.GRANT_WON

    def _grant_at(self, host_id, ticket):
        for grant in self.grants.values():
            if (grant.host_id, grant.ticket) == (host_id, ticket):
                return grant
        return None

    def grant(self, host_ids, ask, taken, before_commit=None):
        host_ids = list(host_ids)
        self.offered.append(host_ids)
        with self._transaction():
            for host_id, ticket in taken:
                earlier = self._grant_at(host_id, ticket)
                if (
                    host_id in host_ids
                    and earlier is not None
                    and self._live(earlier)
                    and self._written_for(earlier, ask)
                ):
                    return storage.Taken(
                        True,
                        host_id=host_id,
                        grant_id=earlier.id,
                        ticket=ticket,
                    )
            for host_id in host_ids:
                if self.before_grant is not None:
                    self.before_grant(host_id)
                row = self._nodes.get(host_id)
                if row is not None and row.state.fits(ask.resources):
                    break
            else:
                return storage.Taken(
                    False, states={h: self.host_state(h) for h in host_ids}
                )
            ticket = row.ticket + 1
            self._move(host_id, granted=ask.resources, ticket=ticket)
            created_at = self.now()
            grant = Grant(
                id=self._next_grant_id,
                host_id=host_id,
                ticket=ticket,
                instance_uuid=ask.instance_uuid,
                request_id=ask.request_id,
                scheduler=ask.scheduler,
                resources=ask.resources,
                state=decision.GRANT_WON,
                created_at=created_at,
                expires_at=created_at + datetime.timedelta(seconds=ask.ttl),
            )
            self._next_grant_id += 1
            self.grants[grant.id] = grant
            taken.append((host_id, ticket))
            if before_commit is not None:
                before_commit(grant_id=grant.id, ticket=ticket)
        if self.fail_after_write is not None:
            raise self.fail_after_write
        return storage.Taken(
            True, host_id=host_id, grant_id=grant.id, ticket=ticket
        )

    def withdraw(self, host_id, ticket, ask):
        self.withdrawn.append((host_id, ticket))
        with self._transaction():
            grant = self._grant_at(host_id, ticket)
            if (
                grant is None
                or not self._live(grant)
                or not self._written_for(grant, ask)
                or not self._move(host_id, granted=NOTHING - ask.resources)
            ):
                return False
            del self.grants[grant.id]
            return True

    def withdraw_instance(self, instance_uuid, scheduler=None):
        with self._transaction():
            return self._withdraw_live(instance_uuid, scheduler)

    def _withdraw_live(self, instance_uuid, scheduler=None):
        found = sorted(
            (
                g
                for g in self.grants.values()
                if g.instance_uuid == instance_uuid
                and self._live(g)
                and scheduler in (None, g.scheduler)
            ),
            key=lambda g: (g.host_id, g.ticket),
        )
        withdrawn = 0
        for grant in found:
            if self._move(grant.host_id, granted=NOTHING - grant.resources):
                del self.grants[grant.id]
                withdrawn += 1
        return withdrawn

    # -- storage.Store: claims ------------------------------------------------

    def _claims_on(self, host_id):
        return [c for c in self.claims.values() if c.host_id == host_id]

    def _claim_of(self, instance_uuid, host, node):
        host_id = self._named(host, node)
        for claim in self.claims.values():
            if (claim.instance_uuid, claim.host_id) == (
                instance_uuid,
                host_id,
            ):
                return claim
        return None

    def _existing(self, instance_uuid, host, node):
        claim = self._claim_of(instance_uuid, host, node)
        if claim is None:
            return None
        return storage.ClaimOutcome(
            claim.resources,
            claim.grant_ticket,
            storage.CLAIM_EXISTING,
            host_id=claim.host_id,
        )

    def _oldest_live(self, host_id, match):
        found = [
            g
            for g in self.grants.values()
            if g.host_id == host_id and self._live(g) and match(g)
        ]
        return min(found, key=lambda g: g.ticket, default=None)

    def _consume(self, grant):
        self.grants[grant.id] = dataclasses.replace(
            grant, state=decision.GRANT_CONSUMED, consumed_at=self.now()
        )

    @staticmethod
    def _mark(row, grant):
        """The last-grant mark moved forward to ``grant``, never back."""
        return {
            "last_grant_ticket": max(row.last_grant_ticket, grant.ticket),
            "last_grant_at": grant.created_at
            if row.last_grant_ticket <= grant.ticket
            else row.last_grant_at,
        }

    def _insert_claim(self, host_id, instance_uuid, amount, ticket):
        for claim in self._claims_on(host_id):
            if claim.instance_uuid == instance_uuid:
                raise _Duplicate()
        claim = Claim(
            id=self._next_claim_id,
            instance_uuid=instance_uuid,
            host_id=host_id,
            resources=amount,
            grant_ticket=ticket,
            created_at=self.now(),
        )
        self._next_claim_id += 1
        self.claims[claim.id] = claim

    def _reject(self, build, reason):
        if self._existing(build.instance_uuid, build.host, build.node):
            raise _AlreadyClaimed()
        raise exception.ClaimRejected(
            instance_uuid=build.instance_uuid,
            host=build.host,
            node=build.node,
            reason=reason,
        )

    def claim(self, build, before_commit=None):
        amount_of = storage.asked_once(build.resources_of)
        for _ in range(REPEATED_CLAIM_TRIES):
            try:
                return self._claim_once(build, amount_of, before_commit)
            except (_Duplicate, _AlreadyClaimed):
                outcome = self._existing(
                    build.instance_uuid, build.host, build.node
                )
                if outcome is not None:
                    return outcome
        raise exception.ClaimRejected(
            instance_uuid=build.instance_uuid,
            host=build.host,
            node=build.node,
            reason="its claim there kept appearing and disappearing",
        )

    def _claim_once(self, build, amount_of, before_commit):
        uuid, resources = build.instance_uuid, build.resources
        with self._transaction():
            host_id = self._named(build.host, build.node)
            if host_id is None:
                raise exception.UnknownHost(host=build.host, node=build.node)
            grant = self._oldest_live(
                host_id, lambda g: g.instance_uuid == uuid
            )
            if (
                grant is None
                and build.request_id is not None
                and resources is not None
            ):
                grant = self._oldest_live(
                    host_id,
                    lambda g: (
                        g.instance_uuid is None
                        and g.request_id == build.request_id
                        and g.resources == resources
                    ),
                )
            if grant is None and resources is None and amount_of is not None:
                # As the database store: asked in the claim's transaction
                # once no grant is found, and not for a repeated claim
                # (it answers with the first claim).
                if self._existing(uuid, build.host, build.node) is not None:
                    raise _AlreadyClaimed()
                resources = amount_of()
            held = NOTHING if grant is None else grant.resources
            amount = resources if resources is not None else held
            if grant is None and resources is None:
                self._reject(
                    build,
                    "there is no grant for it and no resources were given "
                    "to re-check capacity with",
                )
            by_grant = grant is not None and amount == held
            row = self._nodes[host_id]
            # The re-check is a grant's rule with the grant held given
            # back first: units on ``amount``, the limit on used +
            # granted - held + amount.
            given_back = dataclasses.replace(
                row.state, granted=row.state.granted - held
            )
            if not by_grant and not given_back.fits(amount):
                self._reject(
                    build,
                    "it has no live grant of its size and %s does not fit"
                    % amount,
                )
            self._move(
                host_id,
                used=amount,
                granted=NOTHING - held,
                **({} if grant is None else self._mark(row, grant)),
            )
            if grant is not None:
                self._consume(grant)
            self._withdraw_live(uuid)
            ticket = None if grant is None else grant.ticket
            self._insert_claim(host_id, uuid, amount, ticket)
            if before_commit is not None:
                before_commit()
            how = (
                storage.CLAIM_BY_GRANT
                if by_grant
                else storage.CLAIM_BY_RECHECK
            )
            return storage.ClaimOutcome(amount, ticket, how, host_id=host_id)

    def release(self, instance_uuid, host, node):
        with self._transaction():
            claim = self._claim_of(instance_uuid, host, node)
            if claim is None:
                return False
            self._move(claim.host_id, used=NOTHING - claim.resources)
            del self.claims[claim.id]
            return True

    def claim_rows(self, host=None):
        found = []
        for claim in self.claims.values():
            row = self._nodes.get(claim.host_id)
            if row is None or host not in (None, row.state.host):
                continue
            found.append(
                storage.ClaimRow(
                    instance_uuid=claim.instance_uuid,
                    host=row.state.host,
                    node=row.state.node,
                    resources=claim.resources,
                    grant_ticket=claim.grant_ticket,
                    created_at=claim.created_at,
                )
            )
        return sorted(found, key=lambda c: (c.host, c.node, c.instance_uuid))

    def claimed_on(self, instance_uuids):
        wanted = set(instance_uuids)
        found = {}
        for claim in self.claims.values():
            row = self._nodes.get(claim.host_id)
            if row is not None and claim.instance_uuid in wanted:
                found.setdefault(claim.instance_uuid, []).append(
                    (row.state.host, row.state.node)
                )
        return {uuid: sorted(nodes) for uuid, nodes in found.items()}

    def correct_claims(self, host, node, amounts, releases):
        amounts, releases = dict(amounts), list(releases)
        with self._transaction():
            host_id = self._named(host, node)
            if host_id is None:
                raise exception.UnknownHost(host=host, node=node)
            self._write(host_id)
            claimed = {c.instance_uuid: c for c in self._claims_on(host_id)}
            new = sorted(set(amounts) - set(claimed))
            resized = sorted(
                uuid
                for uuid in set(amounts) & set(claimed)
                if claimed[uuid].resources != amounts[uuid]
            )
            released = sorted(set(releases) & set(claimed) - set(amounts))
            grant_of = {}
            for uuid in new + resized:
                grant = self._oldest_live(
                    host_id, lambda g, u=uuid: g.instance_uuid == u
                )
                if grant is not None:
                    grant_of[uuid] = grant
            used = granted = NOTHING
            mark = None
            for grant in grant_of.values():
                granted += grant.resources
                if mark is None or grant.ticket > mark.ticket:
                    mark = grant
            for uuid in new:
                used += amounts[uuid]
                grant = grant_of.get(uuid)
                ticket = None if grant is None else grant.ticket
                self._insert_claim(host_id, uuid, amounts[uuid], ticket)
            for uuid in resized:
                used += amounts[uuid] - claimed[uuid].resources
                self.claims[claimed[uuid].id] = dataclasses.replace(
                    claimed[uuid], resources=amounts[uuid]
                )
            for uuid in released:
                used -= claimed[uuid].resources
                del self.claims[claimed[uuid].id]
            for grant in grant_of.values():
                self._consume(grant)
            if new or resized or released:
                row = self._nodes[host_id]
                self._move(
                    host_id,
                    used=used,
                    granted=NOTHING - granted,
                    **({} if mark is None else self._mark(row, mark)),
                )
            for uuid in new + resized:
                self._withdraw_live(uuid)
            return storage.Correction(
                claimed=tuple(new),
                resized=tuple(resized),
                released=tuple(released),
            )

    # -- storage.Store: the reaper and inspection -----------------------------

    def reap(self, reason, limit):
        with self._transaction():
            if reason == storage.SUPERSEDED:
                return self._delete(
                    self.grants,
                    lambda g: g.state == decision.GRANT_CONSUMED,
                    limit,
                )
            if reason == storage.EXPIRED:
                return self._expire(limit)
            if reason == storage.ORPHANED:
                return self._delete(
                    self.grants, lambda g: g.host_id not in self._nodes, limit
                )
            if reason == storage.ORPHANED_CLAIMS:
                return self._delete(
                    self.claims, lambda c: c.host_id not in self._nodes, limit
                )
            raise KeyError(reason)

    @staticmethod
    def _delete(table, condition, limit):
        ids = sorted(i for i, row in table.items() if condition(row))[:limit]
        for row_id in ids:
            del table[row_id]
        return len(ids), len(ids)

    def _expire(self, limit):
        now = self.now()
        found = sorted(
            (
                g
                for g in self.grants.values()
                if self._live(g) and g.expires_at < now
            ),
            key=lambda g: (g.host_id, g.id),
        )[:limit]
        by_host = {}
        for grant in found:
            by_host.setdefault(grant.host_id, []).append(grant)
        for host_id in sorted(by_host):
            amount = NOTHING
            for grant in by_host[host_id]:
                amount += grant.resources
                del self.grants[grant.id]
            self._move(host_id, granted=NOTHING - amount)
        return len(found), len(found)

    def host_reports(self):
        reports = []
        for host_id, row in self._nodes.items():
            claimed = live = NOTHING
            for claim in self._claims_on(host_id):
                claimed += claim.resources
            for grant in self.grants.values():
                if grant.host_id == host_id and self._live(grant):
                    live += grant.resources
            reports.append(
                storage.HostReport(
                    state=dataclasses.replace(row.state),
                    claimed=claimed,
                    external=row.external,
                    live_grants=live,
                    last_grant_ticket=row.last_grant_ticket,
                    last_grant_at=row.last_grant_at,
                )
            )
        return sorted(reports, key=lambda r: (r.state.host, r.state.node))

    def orphan_claims(self):
        return [
            (c.instance_uuid, c.host_id)
            for c in self.claims.values()
            if c.host_id not in self._nodes
        ]

    def grant_rows(self, host=None, live=False):
        found = []
        for grant in sorted(
            self.grants.values(), key=lambda g: (g.host_id, g.ticket)
        ):
            row = self._nodes.get(grant.host_id)
            name = None if row is None else row.state.host
            if host is not None and name != host:
                continue
            if live and grant.state != decision.GRANT_WON:
                continue
            found.append(
                storage.GrantRow(
                    id=grant.id,
                    host=name,
                    node=None if row is None else row.state.node,
                    ticket=grant.ticket,
                    state=grant.state,
                    resources=grant.resources,
                    instance_uuid=grant.instance_uuid,
                    request_id=grant.request_id,
                    scheduler=grant.scheduler,
                    created_at=grant.created_at,
                    expires_at=grant.expires_at,
                )
            )
        return found
