"""The SQL of the grants protocol, one transaction per method.

The protocol modules (``scheduler``, ``compute``, ``reaper``) decide; this
module (hosts, views, grants and their verification), ``claims`` (the
compute side, mixed in) and ``rows`` (shared row helpers) read and write.
Every transaction is retried in a fresh one on deadlock, disconnect or a
lost conditional update (``RetryRequest``), and takes its locks in one
order: a grant row before its host row, and the host row (through its
``ticket``) before reading what is to be decided.
"""

import dataclasses
import datetime

import sqlalchemy as sa
from oslo_db import exception as db_exc

from grant_scheduler import decision
from grant_scheduler.db import api as db_api
from grant_scheduler.db import claims
from grant_scheduler.db import models
from grant_scheduler.db import rows
from grant_scheduler.resources import Resources

H = models.hosts
G = models.grants
C = models.claims


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
            **rows.usage_values(used or Resources()),
            **values,
        )
    )
    return result.inserted_primary_key[0]


def _live_grants(conn):
    """``({host id: granted}, {host id: pending})`` over live grants."""
    granted = {}
    pending = {}
    for row in conn.execute(
        rows.sums_by_host(G, G.c.state.in_(rows.LIVE), by=(G.c.state,))
    ):
        amount = rows.resources_of(row)
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


class Store(claims.Claims):
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
            rows.take_ticket(conn, host_id)
            values.update(rows.usage_values(used))
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
            state = rows.host_state(row, granted.get(row.id, Resources()))
            state.pending = pending.get(row.id, Resources())
            states.append(state)
        return states

    @db_api.transactional("reader")
    def live_grants_by_node(self, conn):
        """``{(host, node): granted}`` for the hosts with live grants, in
        one statement (for ``GrantsFilter``)."""
        sums = rows.sums_by_host(G, G.c.state.in_(rows.LIVE)).subquery()
        query = sa.select(H.c.host, H.c.node, sums).join(
            sums, sums.c.host_id == H.c.id
        )
        return {
            (row.host, row.node): rows.resources_of(row)
            for row in conn.execute(query)
        }

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
        hosts = [rows.host_state(row) for row in conn.execute(query)]
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
        return rows.take_ticket(conn, host_id)

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


def _decide(conn, host_id, max_ticket, mine_id):
    """Replay a host's live grants up to ``max_ticket``; record verdicts.

    ``mine_id`` is the caller's own grant: deleted (withdrawn) rather than
    marked when it lost.  Returns ``(mine won, host state)``.
    """
    row, grants = rows.host_with_live_grants(
        conn, host_id, max_ticket=max_ticket
    )
    if row is None:
        if mine_id is not None:
            conn.execute(G.delete().where(G.c.id == mine_id))
        return False, None
    state = rows.host_state(row)
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
            raise rows.retry_request()
    if mine is None:
        return False, state
    return outcome.verdicts.get(mine_id, mine.state == models.GRANT_WON), state
