"""All SQL of the grants protocol, one transaction per method.

The protocol modules (``scheduler``, ``compute``, ``reaper``) decide; this
module reads and writes.  Every writer is retried in a fresh transaction on
deadlock, disconnect or a lost conditional update (``RetryRequest``), and
takes its locks in one order: a grant row before its host row, and the
host row (through its ``ticket``) before reading what is to be decided.
"""

import dataclasses
import datetime

import sqlalchemy as sa
from oslo_db import exception as db_exc

from grant_scheduler import decision
from grant_scheduler import exception
from grant_scheduler.db import api as db_api
from grant_scheduler.db import models
from grant_scheduler.resources import NOTHING
from grant_scheduler.resources import Capacity
from grant_scheduler.resources import HostState
from grant_scheduler.resources import Resources

H = models.hosts
G = models.grants
C = models.claims

LIVE = (models.GRANT_PENDING, models.GRANT_WON)


def sums_by_host(table, *where, by=()):
    """SELECT host_id [, by...], SUM(vcpus), SUM(memory_mb), SUM(disk_gb)
    FROM a grants or claims table, grouped by host."""
    return (
        sa.select(
            table.c.host_id,
            *by,
            sa.func.sum(table.c.vcpus).label("vcpus"),
            sa.func.sum(table.c.memory_mb).label("memory_mb"),
            sa.func.sum(table.c.disk_gb).label("disk_gb"),
        )
        .where(*where)
        .group_by(table.c.host_id, *by)
    )


def _usage_values(used):
    return {
        "vcpus_used": used.vcpus,
        "memory_mb_used": used.memory_mb,
        "disk_gb_used": used.disk_gb,
    }


class LostUpdate(Exception):
    """A conditional update found the row changed: start again."""


def _retry_request():
    return db_exc.RetryRequest(LostUpdate())


def resources_of(row, prefix="", suffix=""):
    # NOTE: MySQL returns SUM() of integers as DECIMAL; amounts are ints
    # everywhere else (Nova's weighers, for one, mix them with floats).
    return Resources(
        *(
            int(row._mapping[prefix + name + suffix])
            for name in ("vcpus", "memory_mb", "disk_gb")
        )
    )


def host_state(row, granted=NOTHING):
    capacity = Capacity(
        total=resources_of(row),
        reserved=resources_of(row, prefix="reserved_"),
        cpu_allocation_ratio=row.cpu_allocation_ratio,
        ram_allocation_ratio=row.ram_allocation_ratio,
        disk_allocation_ratio=row.disk_allocation_ratio,
    )
    return HostState(
        host_id=row.id,
        host=row.host,
        node=row.node,
        node_uuid=row.node_uuid,
        capacity=capacity,
        used=resources_of(row, suffix="_used"),
        granted=granted,
        generation=row.generation,
    )


def _add_usage(amount, sign=1):
    return {
        "vcpus_used": H.c.vcpus_used + sign * amount.vcpus,
        "memory_mb_used": H.c.memory_mb_used + sign * amount.memory_mb,
        "disk_gb_used": H.c.disk_gb_used + sign * amount.disk_gb,
        "generation": H.c.generation + 1,
        "updated_at": db_api.utcnow(),
    }


def _take_ticket(conn, host_id):
    """Issue the host's next ticket; hold its row lock until commit.

    The lock is what makes ticket order commit order (DESIGN H1): a
    transaction that holds ticket N commits before any other can be issued
    N + 1.  Returns None when the host row is gone.
    """
    result = conn.execute(
        H.update().where(H.c.id == host_id).values(ticket=H.c.ticket + 1)
    )
    if result.rowcount != 1:
        return None
    return conn.execute(
        sa.select(H.c.ticket).where(H.c.id == host_id)
    ).scalar()


def _host_with_live_grants(conn, host_id, max_ticket=None, exclude_id=None):
    """A host row and its live grants, read in one statement.

    One statement is one snapshot on every backend.  Two statements are
    not under PostgreSQL's READ COMMITTED: a claim committing between them
    would move a grant into usage after the host row was read and out of
    the live grants before they were, and the grant would count nowhere
    (DESIGN H4).

    :returns: ``(host row, [LiveGrant, ...])``, or ``(None, [])``.
    """
    on = [G.c.host_id == H.c.id, G.c.state.in_(LIVE)]
    if max_ticket is not None:
        on.append(G.c.ticket <= max_ticket)
    if exclude_id is not None:
        on.append(G.c.id != exclude_id)
    query = (
        sa.select(
            H,
            G.c.id.label("grant_id"),
            G.c.ticket.label("grant_ticket"),
            G.c.vcpus.label("grant_vcpus"),
            G.c.memory_mb.label("grant_memory_mb"),
            G.c.disk_gb.label("grant_disk_gb"),
            G.c.state.label("grant_state"),
        )
        .outerjoin(G, sa.and_(*on))
        .where(H.c.id == host_id)
        .order_by(G.c.ticket)
    )
    rows = conn.execute(query).all()
    if not rows:
        return None, []
    grants = [
        decision.LiveGrant(
            id=row.grant_id,
            ticket=row.grant_ticket,
            resources=resources_of(row, prefix="grant_"),
            state=row.grant_state,
        )
        for row in rows
        if row.grant_id is not None
    ]
    return rows[0], grants


def _capacity_values(capacity, node_uuid):
    values = {
        "vcpus": capacity.total.vcpus,
        "memory_mb": capacity.total.memory_mb,
        "disk_gb": capacity.total.disk_gb,
        "reserved_vcpus": capacity.reserved.vcpus,
        "reserved_memory_mb": capacity.reserved.memory_mb,
        "reserved_disk_gb": capacity.reserved.disk_gb,
        "cpu_allocation_ratio": capacity.cpu_allocation_ratio,
        "ram_allocation_ratio": capacity.ram_allocation_ratio,
        "disk_allocation_ratio": capacity.disk_allocation_ratio,
    }
    if node_uuid is not None:
        values["node_uuid"] = node_uuid
    return values


def _host_id(conn, host, node):
    return conn.execute(
        sa.select(H.c.id).where(H.c.host == host, H.c.node == node)
    ).scalar()


def _insert_host(conn, host, node, values, used):
    result = conn.execute(
        H.insert().values(
            host=host,
            node=node,
            created_at=db_api.utcnow(),
            updated_at=db_api.utcnow(),
            **_usage_values(used or Resources()),
            **values,
        )
    )
    return result.inserted_primary_key[0]


def _live_grants(conn):
    """``({host id: granted}, {host id: pending})`` over live grants."""
    granted = {}
    pending = {}
    for row in conn.execute(
        sums_by_host(G, G.c.state.in_(LIVE), by=(G.c.state,))
    ):
        amount = resources_of(row)
        granted[row.host_id] = granted.get(row.host_id, Resources()) + amount
        if row.state == models.GRANT_PENDING:
            pending[row.host_id] = amount
    return granted, pending


@dataclasses.dataclass(frozen=True)
class ViewChanges:
    read_at: datetime.datetime
    hosts: list
    granted: dict
    pending: dict


class Store:
    """The protocol's reads and writes against one ``Database``."""

    def __init__(self, db):
        self.db = db

    # -- hosts -----------------------------------------------------------

    @db_api.transactional("writer")
    def report_host(
        self, conn, host, node, capacity, used=None, node_uuid=None
    ):
        """Create or update a host row; return its id.

        Capacity changes never touch usage, which claims and releases own.
        ``used`` overwrites usage (a resync from the hypervisor's truth); it
        takes a ticket so it is ordered against grants on the host.
        """
        values = _capacity_values(capacity, node_uuid)
        host_id = _host_id(conn, host, node)
        if host_id is None:
            return _insert_host(conn, host, node, values, used)
        if used is not None:
            _take_ticket(conn, host_id)
            values.update(_usage_values(used))
        conn.execute(
            H.update()
            .where(H.c.id == host_id)
            .values(
                generation=H.c.generation + 1,
                updated_at=db_api.utcnow(),
                **values,
            )
        )
        return host_id

    @db_api.transactional("writer")
    def register_host(
        self, conn, host, node, capacity, used=None, node_uuid=None
    ):
        """Create a host row unless it exists; its id, or None if it did.

        For a first sight of a host whose usage another system knows (Nova's
        compute node record): unlike ``report_host`` it never overwrites the
        usage of a row that claims already maintain.
        """
        if _host_id(conn, host, node) is not None:
            return None
        values = _capacity_values(capacity, node_uuid)
        try:
            with conn.begin_nested():
                return _insert_host(conn, host, node, values, used)
        except db_exc.DBDuplicateEntry:
            return None

    @db_api.transactional("writer")
    def delete_host(self, conn, host, node):
        """Delete a host row; its grants are left for the reaper."""
        result = conn.execute(
            H.delete().where(H.c.host == host, H.c.node == node)
        )
        return result.rowcount == 1

    @db_api.transactional("reader")
    def load_view(self, conn):
        """Every host with its live grants subtracted: the baseline view.

        ``granted`` counts won and undecided grants alike (a conservative
        view); ``pending`` says how much of it is still undecided.
        """
        granted, pending = _live_grants(conn)
        states = []
        for row in conn.execute(sa.select(H)):
            state = host_state(row, granted.get(row.id, Resources()))
            state.pending = pending.get(row.id, Resources())
            states.append(state)
        return states

    @db_api.transactional("reader")
    def read_changes(self, conn, since=None):
        """Host rows stamped at or after ``since`` (every row when None),
        without grants, and the live grants on every host, apart.

        :returns: ``ViewChanges``; its ``read_at`` is the database's time
            when the read began, the ``since`` of the next call.
        """
        read_at = conn.execute(sa.select(db_api.utcnow())).scalar()
        # NOTE: grants before hosts, as in load_view: a claim committing in
        # between is then counted twice (briefly conservative), never not
        # at all.
        granted, pending = _live_grants(conn)
        query = sa.select(H)
        if since is not None:
            query = query.where(H.c.updated_at >= since)
        hosts = [host_state(row) for row in conn.execute(query)]
        return ViewChanges(read_at, hosts, granted, pending)

    # -- scheduler side --------------------------------------------------

    @db_api.transactional("writer")
    def insert_grant(
        self,
        conn,
        host_id,
        resources,
        scheduler,
        instance_uuid,
        request_id,
        before_commit=None,
    ):
        """Write a pending grant with the host's next ticket.

        :returns: ``(grant id, ticket)``, or None when the host is gone.
        """
        ticket = self._ticket_for(conn, host_id)
        if ticket is None:
            return None
        result = conn.execute(
            G.insert().values(
                host_id=host_id,
                ticket=ticket,
                instance_uuid=instance_uuid,
                request_id=request_id,
                scheduler=scheduler,
                vcpus=resources.vcpus,
                memory_mb=resources.memory_mb,
                disk_gb=resources.disk_gb,
                state=models.GRANT_PENDING,
                created_at=db_api.utcnow(),
            )
        )
        grant_id = result.inserted_primary_key[0]
        if before_commit is not None:
            before_commit(grant_id=grant_id, ticket=ticket)
        return grant_id, ticket

    def _ticket_for(self, conn, host_id):
        """The ordering ticket of a new grant (see ``_take_ticket``)."""
        return _take_ticket(conn, host_id)

    @db_api.transactional("writer")
    def verify_grant(self, conn, grant_id, host_id, ticket):
        """Decide a committed grant; withdraw it when it lost.

        Runs in its own transaction, begun after the grant's commit, so it
        sees every grant with a lower ticket (DESIGN H1, H2).  Undecided
        grants below this one are decided on the way and their verdicts
        recorded, each conditional on the row still being pending.

        :returns: ``(won, host_state)``; ``host_state.granted`` holds the
            winners at or below this ticket, for the caller's view, and
            ``host_state`` is None when the host row is gone.
        """
        return _decide(conn, host_id, ticket, grant_id)

    @db_api.transactional("writer")
    def settle_host(self, conn, host_id):
        """Decide every undecided grant on a host, as a verifier would.

        Used before a NoValidHost that only undecided grants stand in the
        way of, and harmless at any time: verdicts are recorded once.
        """
        return _decide(conn, host_id, None, None)[1]

    @db_api.transactional("writer")
    def withdraw(self, conn, grant_ids):
        """Delete grants this scheduler wrote (lost, or all-or-nothing)."""
        if not grant_ids:
            return 0
        return conn.execute(G.delete().where(G.c.id.in_(grant_ids))).rowcount

    # -- compute side ----------------------------------------------------

    def claim(
        self, instance_uuid, host, node, resources, ttl, before_commit=None
    ):
        """Count an instance in its host's usage, consuming its grant.

        Idempotent per (instance, host): a second claim returns the first.
        ``before_commit()``, if given, runs once a grant's consumption is
        written and not yet committed (an injection point for tests).

        :returns: a ``ClaimOutcome``.
        :raises UnknownHost: no row for ``host``/``node``.
        :raises ClaimRejected: no live grant and the instance does not fit
            (DESIGN H5).
        """
        outcome = self._claim_by_grant(
            instance_uuid, host, node, resources, ttl, before_commit
        )
        if outcome is None:
            outcome = self._claim_by_recheck(
                instance_uuid, host, node, resources
            )
        return outcome

    @db_api.transactional("writer")
    def _claim_by_grant(
        self, conn, instance_uuid, host, node, resources, ttl, before_commit
    ):
        """The common case: consume a live grant.  None when there is none.

        No host lock is needed: the grant already holds the capacity, and
        moving it into usage is one transaction (DESIGN H4).
        """
        row = conn.execute(
            sa.select(H.c.id).where(H.c.host == host, H.c.node == node)
        ).first()
        if row is None:
            raise exception.UnknownHost(host=host, node=node)
        found = _existing_or_grant(conn, row.id, instance_uuid, resources)
        if isinstance(found, ClaimOutcome):
            return found
        grant = found
        if grant is None:
            return None
        now = conn.execute(sa.select(db_api.utcnow())).scalar()
        expired = grant.created_at < now - datetime.timedelta(seconds=ttl)
        amount = resources_of(grant)
        if expired or (resources is not None and resources != amount):
            return None
        _consume(conn, grant)
        conn.execute(
            H.update()
            .where(H.c.id == row.id)
            .values(**_advance_mark(grant), **_add_usage(amount))
        )
        _insert_claim(conn, instance_uuid, row.id, amount, grant.ticket)
        if before_commit is not None:
            before_commit()
        return ClaimOutcome(amount, grant.ticket, "grant")

    @db_api.transactional("writer")
    def _claim_by_recheck(self, conn, instance_uuid, host, node, resources):
        """No live grant: lock the host, re-check capacity, then claim.

        The lock is the transaction's first statement so that, on InnoDB,
        the snapshot every later read uses starts after it is granted.
        """
        locked = conn.execute(
            H.update()
            .where(H.c.host == host, H.c.node == node)
            .values(ticket=H.c.ticket + 1)
        )
        if locked.rowcount != 1:
            raise exception.UnknownHost(host=host, node=node)
        host_id = conn.execute(
            sa.select(H.c.id).where(H.c.host == host, H.c.node == node)
        ).scalar()
        found = _existing_or_grant(conn, host_id, instance_uuid, resources)
        if isinstance(found, ClaimOutcome):
            return found
        grant = found
        if resources is None:
            if grant is None:
                raise exception.ClaimRejected(
                    instance_uuid=instance_uuid,
                    host=host,
                    node=node,
                    reason="there is no grant for it and no resources were "
                    "given to re-check capacity with",
                )
            resources = resources_of(grant)
        exclude = grant.id if grant is not None else None
        row, others = _host_with_live_grants(conn, host_id, exclude_id=exclude)
        state = host_state(row)
        for other in others:
            state.granted = state.granted + other.resources
        if not state.fits(resources):
            short = (state.used + state.granted + resources).exceeded(
                state.limit
            )
            raise exception.ClaimRejected(
                instance_uuid=instance_uuid,
                host=host,
                node=node,
                reason="it has no live grant and %s does not fit (short in %s)"
                % (resources, ", ".join(short)),
            )
        mark = {}
        if grant is not None:
            _consume(conn, grant)
            mark = _advance_mark(grant)
        conn.execute(
            H.update()
            .where(H.c.id == host_id)
            .values(**mark, **_add_usage(resources))
        )
        ticket = grant.ticket if grant is not None else None
        _insert_claim(conn, instance_uuid, host_id, resources, ticket)
        return ClaimOutcome(resources, ticket, "recheck")

    @db_api.transactional("writer")
    def release(self, conn, instance_uuid, host, node):
        """Remove an instance from its host's usage; False if not claimed."""
        row = conn.execute(
            sa.select(C)
            .join(H, H.c.id == C.c.host_id)
            .where(
                C.c.instance_uuid == instance_uuid,
                H.c.host == host,
                H.c.node == node,
            )
        ).first()
        if row is None:
            return False
        if conn.execute(C.delete().where(C.c.id == row.id)).rowcount != 1:
            raise _retry_request()
        conn.execute(
            H.update()
            .where(H.c.id == row.host_id)
            .values(**_add_usage(resources_of(row), sign=-1))
        )
        return True


@dataclasses.dataclass(frozen=True)
class ClaimOutcome:
    """What a claim did: ``how`` is grant, recheck or existing."""

    resources: Resources
    grant_ticket: int
    how: str


def _decide(conn, host_id, max_ticket, mine_id):
    """Replay a host's live grants up to ``max_ticket``; record verdicts.

    ``mine_id`` is the caller's own grant: deleted (withdrawn) rather than
    marked when it lost.  Returns ``(mine won, host state)``.
    """
    row, grants = _host_with_live_grants(conn, host_id, max_ticket=max_ticket)
    if row is None:
        if mine_id is not None:
            conn.execute(G.delete().where(G.c.id == mine_id))
        return False, None
    state = host_state(row)
    outcome = decision.replay(state.used, state.limit, grants)
    state.granted = outcome.committed - state.used
    mine = next((g for g in grants if g.id == mine_id), None)
    if mine_id is not None and mine is None:
        # Decided lost by another verifier (or reaped): withdraw.
        conn.execute(G.delete().where(G.c.id == mine_id))
        return False, state
    for grant in grants:
        if grant.id not in outcome.verdicts:
            continue
        won = outcome.verdicts[grant.id]
        pending = sa.and_(
            G.c.id == grant.id, G.c.state == models.GRANT_PENDING
        )
        if grant.id == mine_id and not won:
            statement = G.delete().where(pending)
        else:
            verdict = models.GRANT_WON if won else models.GRANT_LOST
            statement = G.update().where(pending).values(state=verdict)
        if conn.execute(statement).rowcount != 1:
            raise _retry_request()
    if mine is None:
        return False, state
    return outcome.verdicts.get(mine_id, mine.state == models.GRANT_WON), state


def _existing_or_grant(conn, host_id, instance_uuid, resources):
    """The instance's claim on this host as a ``ClaimOutcome`` if it has
    one (a repeated claim), else its grant row (or None)."""
    existing = conn.execute(
        sa.select(C).where(
            C.c.instance_uuid == instance_uuid, C.c.host_id == host_id
        )
    ).first()
    if existing is not None:
        return ClaimOutcome(
            resources_of(existing), existing.grant_ticket, "existing"
        )
    return _find_grant(conn, host_id, instance_uuid, resources)


def _insert_claim(conn, instance_uuid, host_id, amount, ticket):
    conn.execute(
        C.insert().values(
            instance_uuid=instance_uuid,
            host_id=host_id,
            vcpus=amount.vcpus,
            memory_mb=amount.memory_mb,
            disk_gb=amount.disk_gb,
            grant_ticket=ticket,
            created_at=db_api.utcnow(),
        )
    )


def _find_grant(conn, host_id, instance_uuid, resources):
    """The instance's won grant on this host, else the seed's fallback.

    The fallback, for grants written without an instance uuid, is the oldest
    won grant on the host for exactly these resources.
    """
    won = sa.and_(G.c.host_id == host_id, G.c.state == models.GRANT_WON)
    grant = conn.execute(
        sa.select(G)
        .where(won, G.c.instance_uuid == instance_uuid)
        .order_by(G.c.ticket)
        .limit(1)
    ).first()
    if grant is not None or resources is None:
        return grant
    return conn.execute(
        sa.select(G)
        .where(
            won,
            G.c.instance_uuid.is_(None),
            G.c.vcpus == resources.vcpus,
            G.c.memory_mb == resources.memory_mb,
            G.c.disk_gb == resources.disk_gb,
        )
        .order_by(G.c.ticket)
        .limit(1)
    ).first()


def _consume(conn, grant):
    result = conn.execute(
        G.update()
        .where(G.c.id == grant.id, G.c.state == models.GRANT_WON)
        .values(state=models.GRANT_CONSUMED, consumed_at=db_api.utcnow())
    )
    if result.rowcount != 1:
        raise _retry_request()


def _advance_mark(grant):
    """Move the host's last-grant mark forward to ``grant``, never back.

    NOTE: MySQL evaluates SET assignments left to right, so the second one
    may see ``last_grant_ticket`` already moved to ``grant.ticket``;
    PostgreSQL and SQLite see the old value.  ``<=`` gives the same result
    either way (at equality the mark is this very grant).
    """
    return {
        "last_grant_ticket": sa.case(
            (H.c.last_grant_ticket < grant.ticket, grant.ticket),
            else_=H.c.last_grant_ticket,
        ),
        "last_grant_at": sa.case(
            (H.c.last_grant_ticket <= grant.ticket, grant.created_at),
            else_=H.c.last_grant_at,
        ),
    }
