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
from grant_scheduler.resources import NOTHING
from grant_scheduler.resources import Resources

HOSTS = models.hosts
INVENTORIES = models.inventories
GRANTS = models.grants
CLAIMS = models.claims


def host_id(conn, host, node):
    return conn.execute(
        sa_compat.select(HOSTS.c.id).where(
            sa.and_(HOSTS.c.host == host, HOSTS.c.node == node)
        )
    ).scalar()


def _write_books(conn, host_id, capacity, used, keep=None):
    """Write the node's inventory rows for ``capacity``.

    ``used`` (usage no claim accounts for) replaces the usage when given;
    otherwise the usage of ``keep`` (the node's ``rows.Books`` as they
    were) stays.  Live grants always stay.  A class the capacity no longer
    offers keeps a row of no capacity while usage or live grants hold it,
    so nothing counted is lost and nothing more fits.
    """
    keep = keep or rows.Books()
    if used is None:
        used, external = keep.used, keep.external
    else:
        external = used
    written = rows.inventory_rows(
        host_id, capacity, used, external, keep.granted
    )
    conn.execute(INVENTORIES.delete().where(INVENTORIES.c.host_id == host_id))
    if written:
        conn.execute(INVENTORIES.insert().values(written))


def _insert(conn, db, host, node, capacity, used, node_uuid):
    result = conn.execute(
        HOSTS.insert().values(
            host=host,
            node=node,
            node_uuid=node_uuid,
            created_at=db.now(),
            updated_at=db.now(),
        )
    )
    found = result.inserted_primary_key[0]
    _write_books(conn, found, capacity, used or NOTHING)
    return found


@db_api.writer
def report(db, conn, host, node, capacity, used=None, node_uuid=None):
    """Create or update a node; with ``used``, resynchronise its usage.

    ``used`` is the hypervisor's truth about the node: it replaces the
    node's claims (they are deleted, so a later release of one of them
    changes nothing) and becomes usage that no claim accounts for.  Usage
    therefore never goes below zero and always equals the claims plus
    ``external`` (I4).  Live grants are kept: they are promises still
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
    values = {"updated_at": db.now()}
    if node_uuid is not None:
        values["node_uuid"] = node_uuid
    locked = conn.execute(
        HOSTS.update().where(HOSTS.c.id == found).values(**values)
    )
    if locked.rowcount != 1:
        raise rows.retry_request()
    books = rows.books_by_host(conn, INVENTORIES.c.host_id == found)
    _write_books(conn, found, capacity, used, keep=books.get(found))
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
    """Delete a node with its books, grants and claims; False if there
    was none.

    In one transaction, the node's row first (its lock keeps grants and
    claims from arriving meanwhile), so nothing is left for a new node to
    inherit and nothing is counted nowhere.
    """
    found = host_id(conn, host, node)
    if found is None:
        return False
    if conn.execute(HOSTS.delete().where(HOSTS.c.id == found)).rowcount != 1:
        return False
    for table in (INVENTORIES, GRANTS, CLAIMS):
        conn.execute(table.delete().where(table.c.host_id == found))
    return True


def _with_books(condition=None, fresh=None, extra=()):
    """Node rows meeting ``condition``, each joined with its inventory
    rows (one result row per class): one statement, one snapshot.

    With ``fresh``, only the rows meeting it carry their host columns and
    books; the others come as their id and stamp alone.
    """
    on = INVENTORIES.c.host_id == HOSTS.c.id
    host_columns = list(rows.HOST_STATE_COLUMNS)
    if fresh is not None:
        on = sa.and_(on, fresh)
        host_columns = [
            sa_compat.case((fresh, column), else_=sa.null()).label(column.name)
            for column in host_columns
        ]
    query = sa_compat.select(
        HOSTS.c.id,
        HOSTS.c.updated_at,
        *host_columns,
        *(
            column.label("inv_" + column.name)
            for column in rows.INVENTORY_COLUMNS[1:]
        ),
        *extra,
    ).select_from(HOSTS.outerjoin(INVENTORIES, on))
    if condition is not None:
        query = query.where(condition)
    return query.order_by(HOSTS.c.id)


class _InventoryRow:
    """An inventory row's columns out of a joined row."""

    def __init__(self, row):
        self._row = sa_compat.mapping(row)

    def __getattr__(self, name):
        return self._row["inv_" + name]


def _gathered(result):
    """``[(host row, rows.Books)]`` of a ``_with_books`` result, in order."""
    found = []
    for row in result:
        if not found or found[-1][0].id != row.id:
            found.append((row, []))
        if row.inv_resource_class is not None:
            found[-1][1].append(_InventoryRow(row))
    return [(row, rows.Books(inventory)) for row, inventory in found]


@db_api.reader
def read(db, conn, since=None, known=None):
    """Node rows stamped at or after ``since`` (every row when None),
    leaving out those ``known`` (a ``storage.Known``) holds as stamped.

    With ``known``, one statement returns whole nodes only for those
    stamped after the newest known stamp, and the stamps alone of the
    others: on a busy small cloud nearly every row changed within the
    overlap, and reading them all again would be most of a request's work.
    A row whose stamp differs from the known one (a write that committed
    late) is read whole by a second statement.
    """
    stamp = HOSTS.c.updated_at
    if since is None:
        return _whole(conn)
    if known is None or known.newest is None:
        return _whole(conn, stamp >= since)
    fresh = stamp > known.newest
    result = conn.execute(_with_books(stamp >= since, fresh=fresh))
    found, late = [], []
    for row, books in _gathered(result):
        if row.updated_at > known.newest:
            found.append((rows.host_state(row, books), row.updated_at))
        elif known.stamps.get(row.id) != row.updated_at:
            late.append(row.id)
    if late:
        found.extend(_whole(conn, HOSTS.c.id.in_(late)))
    return found


def _whole(conn, condition=None):
    """``[(HostState, stamp)]`` of the nodes meeting ``condition`` (all)."""
    return [
        (rows.host_state(row, books), row.updated_at)
        for row, books in _gathered(conn.execute(_with_books(condition)))
    ]


@db_api.reader
def state(db, conn, host_id):
    """One node's ``HostState``, or None when its row is gone."""
    return one(conn, host_id)


def one(conn, host_id):
    """One node's ``HostState``, or None when its row is gone (inside the
    caller's transaction)."""
    found = _whole(conn, HOSTS.c.id == host_id)
    return found[0][0] if found else None


@db_api.reader
def granted_by_node(db, conn):
    """``{(host, node): granted}`` for the nodes holding live grants."""
    query = (
        sa_compat.select(
            HOSTS.c.host,
            HOSTS.c.node,
            INVENTORIES.c.resource_class,
            INVENTORIES.c.granted,
        )
        .select_from(
            HOSTS.join(INVENTORIES, INVENTORIES.c.host_id == HOSTS.c.id)
        )
        .where(INVENTORIES.c.granted != 0)
    )
    granted = {}
    for row in conn.execute(query):
        granted.setdefault((row.host, row.node), {})[row.resource_class] = int(
            row.granted
        )
    return {key: Resources.of(amounts) for key, amounts in granted.items()}


# -- inspection ------------------------------------------------------------


def _reports_query():
    """Every node with its books, every live grant's and every claim's
    amount, as one ``UNION ALL``: one statement, one snapshot."""
    nodes = _with_books(
        extra=[
            HOSTS.c.last_grant_ticket,
            HOSTS.c.last_grant_at,
            sa.null().label("kind"),
            sa.null().label("resources"),
        ]
    ).order_by(None)
    columns = getattr(nodes, "selected_columns", None)
    if columns is None:
        columns = nodes.c
    shape = [column.key for column in columns][1:-2]

    def amounts(table, kind, condition=None):
        query = sa_compat.select(
            table.c.host_id.label("id"),
            *(sa.null().label(name) for name in shape),
            sa.literal(kind).label("kind"),
            table.c.resources.label("resources"),
        )
        return query if condition is None else query.where(condition)

    return sa.union_all(
        nodes,
        amounts(GRANTS, "grant", GRANTS.c.state == decision.GRANT_WON),
        amounts(CLAIMS, "claim"),
    )


@db_api.reader
def reports(db, conn):
    """Every node with its books, claims and live grants, in one
    statement: one snapshot on every backend, so each node's usage, grants
    and claims agree with each other even under load."""
    sums, node_rows = {}, []
    for row in conn.execute(_reports_query()):
        if row.kind is None:
            node_rows.append(row)
            continue
        key = (row.id, row.kind)
        sums[key] = sums.get(key, NOTHING) + models.decode(row.resources)
    node_rows.sort(key=lambda row: row.id)
    found = [
        storage.HostReport(
            state=rows.host_state(row, books),
            claimed=sums.get((row.id, "claim"), NOTHING),
            external=books.external,
            live_grants=sums.get((row.id, "grant"), NOTHING),
            last_grant_ticket=row.last_grant_ticket,
            last_grant_at=row.last_grant_at,
        )
        for row, books in _gathered(node_rows)
    ]
    return sorted(
        found, key=lambda report: (report.state.host, report.state.node)
    )


@db_api.reader
def orphan_claims(db, conn):
    """``(instance uuid, host id)`` of claims whose node row is gone."""
    query = sa_compat.select(CLAIMS.c.instance_uuid, CLAIMS.c.host_id).where(
        ~sa.exists().where(HOSTS.c.id == CLAIMS.c.host_id)
    )
    return [tuple(row) for row in conn.execute(query)]
