"""SQL of ``gs_hosts``: report, register, delete and read nodes.

A function decorated ``@db_api.writer`` or ``@db_api.reader`` is one
transaction of its own, retried: it is defined as ``fn(db, conn, ...)`` and
called as ``fn(db, ...)`` (``store.Store`` does).  The others are plain
``(conn, ...)`` helpers that run inside their caller's transaction; ``db``
gives them the server's clock and dialect.
"""

import sqlalchemy as sa
from oslo_db import exception as db_exc

from grant_scheduler import decision
from grant_scheduler import storage
from grant_scheduler.db import api as db_api
from grant_scheduler.db import models
from grant_scheduler.db import rows
from grant_scheduler.db import sa_compat
from grant_scheduler.resources import DIMENSIONS
from grant_scheduler.resources import NOTHING

HOSTS = models.hosts
GRANTS = models.grants
CLAIMS = models.claims


def capacity_values(capacity, node_uuid=None):
    values = {
        **rows.values(capacity.total),
        **rows.values(capacity.reserved, prefix="reserved_"),
        **rows.values(capacity.limit(), prefix="limit_"),
        "cpu_allocation_ratio": capacity.cpu_allocation_ratio,
        "ram_allocation_ratio": capacity.ram_allocation_ratio,
        "disk_allocation_ratio": capacity.disk_allocation_ratio,
    }
    if node_uuid is not None:
        values["node_uuid"] = node_uuid
    return values


def host_id(conn, host, node):
    return conn.execute(
        sa_compat.select(HOSTS.c.id).where(
            sa.and_(HOSTS.c.host == host, HOSTS.c.node == node)
        )
    ).scalar()


def _insert(conn, db, host, node, capacity, used, node_uuid):
    used = used or NOTHING
    result = conn.execute(
        HOSTS.insert().values(
            host=host,
            node=node,
            created_at=db.now(),
            updated_at=db.now(),
            **capacity_values(capacity, node_uuid),
            **rows.values(used, suffix="_used"),
            **rows.values(used, prefix="external_"),
            **rows.values(NOTHING, prefix="granted_"),
        )
    )
    return result.inserted_primary_key[0]


@db_api.writer
def report(db, conn, host, node, capacity, used=None, node_uuid=None):
    """Create or update a node; with ``used``, resynchronise its usage.

    ``used`` is the hypervisor's truth about the node: it replaces the
    node's claims (they are deleted, so a later release of one of them
    changes nothing) and becomes usage that no claim accounts for.  Usage
    therefore never goes below zero and always equals the claims plus
    ``external_*`` (I4).  Live grants are kept: they are promises still
    to be built.

    The first report of a node may race others (a compute service and its
    restart, or reports right after a ``delete``): the insert runs in a
    savepoint, and the one that finds the row written meanwhile updates it
    instead, so every report returns the one row's id.
    """
    found = host_id(conn, host, node)
    if found is None:
        try:
            with conn.begin_nested():
                return _insert(conn, db, host, node, capacity, used, node_uuid)
        except db_exc.DBDuplicateEntry:
            found = host_id(conn, host, node)
            if found is None:
                # NOTE: the row that was in the way is gone again (deleted
                # meanwhile): a fresh transaction inserts it.
                raise rows.retry_request()
    values = capacity_values(capacity, node_uuid)
    if used is not None:
        values.update(rows.values(used, suffix="_used"))
        values.update(rows.values(used, prefix="external_"))
    conn.execute(
        HOSTS.update()
        .where(HOSTS.c.id == found)
        .values(updated_at=db.now(), **values)
    )
    if used is not None:
        conn.execute(CLAIMS.delete().where(CLAIMS.c.host_id == found))
    return found


@db_api.writer
def register(db, conn, host, node, capacity, used=None, node_uuid=None):
    """Create a node unless it exists: its id, or None if it existed.

    For the first sight of a node whose usage another system knows (Nova's
    compute node record): it never touches a row that claims maintain.
    """
    if host_id(conn, host, node) is not None:
        return None
    try:
        with conn.begin_nested():
            return _insert(conn, db, host, node, capacity, used, node_uuid)
    except db_exc.DBDuplicateEntry:
        return None


@db_api.writer
def delete(db, conn, host, node):
    """Delete a node with its grants and claims; False if there was none.

    In one transaction, the node's row first (its lock keeps grants and
    claims from arriving meanwhile), so nothing is left for a new node to
    inherit and nothing is counted nowhere.
    """
    found = host_id(conn, host, node)
    if found is None:
        return False
    if conn.execute(HOSTS.delete().where(HOSTS.c.id == found)).rowcount != 1:
        return False
    conn.execute(GRANTS.delete().where(GRANTS.c.host_id == found))
    conn.execute(CLAIMS.delete().where(CLAIMS.c.host_id == found))
    return True


@db_api.reader
def read(db, conn, since=None, known=None):
    """Node rows stamped at or after ``since`` (every row when None),
    leaving out those ``known`` (a ``storage.Known``) holds as stamped.

    With ``known``, one statement returns whole rows only for those stamped
    after the newest known stamp, and the stamps alone of the others: on a
    busy small cloud nearly every row changed within the overlap, and
    reading them all again would be most of a request's work.  A row whose
    stamp differs from the known one (a write that committed late) is read
    whole by a second statement.
    """
    stamp = HOSTS.c.updated_at
    if since is None:
        return _whole(conn)
    if known is None or known.newest is None:
        return _whole(conn, stamp >= since)
    fresh = stamp > known.newest
    query = sa_compat.select(
        HOSTS.c.id,
        stamp,
        *(
            sa_compat.case((fresh, column), else_=sa.null()).label(column.name)
            for column in rows.HOST_STATE_COLUMNS
        ),
    ).where(stamp >= since)
    found, late = [], []
    for row in conn.execute(query):
        if row.updated_at > known.newest:
            found.append((rows.host_state(row), row.updated_at))
        elif known.stamps.get(row.id) != row.updated_at:
            late.append(row.id)
    if late:
        found.extend(_whole(conn, HOSTS.c.id.in_(late)))
    return found


def _whole(conn, condition=None):
    """``[(HostState, stamp)]`` of the rows meeting ``condition`` (all)."""
    query = sa_compat.select(HOSTS)
    if condition is not None:
        query = query.where(condition)
    return [
        (rows.host_state(row), row.updated_at) for row in conn.execute(query)
    ]


@db_api.reader
def state(db, conn, host_id):
    """One node's ``HostState``, or None when its row is gone."""
    return one(conn, host_id)


def one(conn, host_id):
    """One node's ``HostState``, or None when its row is gone (inside the
    caller's transaction)."""
    row = conn.execute(
        sa_compat.select(HOSTS).where(HOSTS.c.id == host_id)
    ).first()
    return None if row is None else rows.host_state(row)


@db_api.reader
def granted_by_node(db, conn):
    """``{(host, node): granted}`` for the nodes holding live grants."""
    granted = rows.columns(HOSTS, prefix="granted_")
    query = sa_compat.select(HOSTS.c.host, HOSTS.c.node, *granted).where(
        sa.or_(*(column != 0 for column in granted))
    )
    return {
        (row.host, row.node): rows.amount(row, prefix="granted_")
        for row in conn.execute(query)
    }


# -- inspection ------------------------------------------------------------


def _prefixed(subquery, prefix):
    return [subquery.c[name].label(prefix + name) for name in DIMENSIONS]


@db_api.reader
def reports(db, conn):
    """Every node with its claims and live grants, in one statement.

    One statement is one snapshot on every backend, so each node's usage,
    grants and claims agree with each other even under load.
    """
    live = rows.sums_by_host(
        GRANTS, GRANTS.c.state == decision.GRANT_WON
    ).alias("live")
    claimed = rows.sums_by_host(CLAIMS).alias("claimed")
    query = (
        sa_compat.select(
            HOSTS, *_prefixed(live, "live_"), *_prefixed(claimed, "claimed_")
        )
        .select_from(
            HOSTS.outerjoin(live, live.c.host_id == HOSTS.c.id).outerjoin(
                claimed, claimed.c.host_id == HOSTS.c.id
            )
        )
        .order_by(HOSTS.c.host, HOSTS.c.node)
    )
    return [
        storage.HostReport(
            state=rows.host_state(row),
            claimed=rows.amount(row, prefix="claimed_"),
            external=rows.amount(row, prefix="external_"),
            live_grants=rows.amount(row, prefix="live_"),
            last_grant_ticket=row.last_grant_ticket,
            last_grant_at=row.last_grant_at,
        )
        for row in conn.execute(query)
    ]


@db_api.reader
def orphan_claims(db, conn):
    """``(instance uuid, host id)`` of claims whose node row is gone."""
    query = sa_compat.select(CLAIMS.c.instance_uuid, CLAIMS.c.host_id).where(
        ~sa.exists().where(HOSTS.c.id == CLAIMS.c.host_id)
    )
    return [tuple(row) for row in conn.execute(query)]
