"""Reading rows into the protocol's types, and the SQL of the books.

Shared by ``hosts``, ``grants`` and ``claims``: the one conversion from
rows to ``Resources`` and ``HostState``; ``fits``, the capacity rule of
``HostState.fits`` written as SQL so that the database applies it, class
by class, in the very ``UPDATE`` that takes a grant or a claim; and
``move``, the one statement that moves a node's usage and live grants.
"""

import sqlalchemy as sa
from oslo_db import exception as db_exc

from grant_scheduler.db import models
from grant_scheduler.db import sa_compat
from grant_scheduler.resources import NOTHING
from grant_scheduler.resources import Capacity
from grant_scheduler.resources import HostState
from grant_scheduler.resources import Inventory
from grant_scheduler.resources import Resources

HOSTS = models.hosts
INVENTORIES = models.inventories

encode = models.encode


def amount(row, column="resources"):
    """The ``Resources`` a grant or claim row holds in ``column``."""
    return models.decode(sa_compat.mapping(row)[column])


INVENTORY_COLUMNS = [
    INVENTORIES.c.host_id,
    INVENTORIES.c.resource_class,
    INVENTORIES.c.total,
    INVENTORIES.c.reserved,
    INVENTORIES.c.allocation_ratio,
    INVENTORIES.c.min_unit,
    INVENTORIES.c.max_unit,
    INVENTORIES.c.step_size,
    INVENTORIES.c.capacity,
    INVENTORIES.c.used,
    INVENTORIES.c.external,
    INVENTORIES.c.granted,
]


class Books:
    """A node's inventory rows gathered: its capacity, limit, usage,
    usage no claim accounts for, and live grants, by class."""

    def __init__(self, inventory_rows=()):
        inventories, limit, used, external, granted = {}, {}, {}, {}, {}
        for row in inventory_rows:
            name = row.resource_class
            inventories[name] = Inventory(
                total=int(row.total),
                reserved=int(row.reserved),
                allocation_ratio=row.allocation_ratio,
                min_unit=int(row.min_unit),
                max_unit=int(row.max_unit),
                step_size=int(row.step_size),
            )
            limit[name] = int(row.capacity)
            used[name] = int(row.used)
            external[name] = int(row.external)
            granted[name] = int(row.granted)
        self.capacity = Capacity.of(inventories)
        self.limit = Resources.of(limit)
        self.used = Resources.of(used)
        self.external = Resources.of(external)
        self.granted = Resources.of(granted)


def books_by_host(conn, condition=None):
    """``{host id: Books}`` of the inventory rows meeting ``condition``."""
    query = sa_compat.select(*INVENTORY_COLUMNS)
    if condition is not None:
        query = query.where(condition)
    gathered = {}
    for row in conn.execute(query):
        gathered.setdefault(row.host_id, []).append(row)
    return {host_id: Books(found) for host_id, found in gathered.items()}


def host_state(row, books):
    """A ``HostState`` from a ``gs_hosts`` row and the node's ``Books``."""
    books = books or Books()
    return HostState(
        host_id=row.id,
        host=row.host,
        node=row.node,
        node_uuid=row.node_uuid,
        capacity=books.capacity,
        used=books.used,
        granted=books.granted,
        limit=books.limit,
    )


HOST_STATE_COLUMNS = [HOSTS.c.host, HOSTS.c.node, HOSTS.c.node_uuid]
"""What ``host_state`` reads of a ``gs_hosts`` row, beside its id."""


NO_CAPACITY = Inventory(total=0, max_unit=0)
"""The inventory of a class a node holds but no longer offers (or never
reported): what is counted there stays, and nothing more fits."""


def inventory_rows(
    host_id, capacity, used=NOTHING, external=None, granted=NOTHING
):
    """The ``gs_inventories`` rows of a capacity, with the usage, usage no
    claim accounts for (``used`` when None) and live grants of each class;
    a class held but not offered gets a row of ``NO_CAPACITY``."""
    external = used if external is None else external
    inventories = dict(capacity.inventories)
    for name in set(used) | set(external) | set(granted):
        inventories.setdefault(name, NO_CAPACITY)
    capacity = Capacity.of(inventories)
    limit = capacity.limit()
    return [
        {
            "host_id": host_id,
            "resource_class": name,
            "total": inventory.total,
            "reserved": inventory.reserved,
            "allocation_ratio": inventory.allocation_ratio,
            "min_unit": inventory.min_unit,
            "max_unit": inventory.max_unit,
            "step_size": inventory.step_size,
            "capacity": limit[name],
            "used": used[name],
            "external": external[name],
            "granted": granted[name],
        }
        for name, inventory in capacity.inventories.items()
    ]


def _by_class(resources):
    """``CASE resource_class WHEN ... THEN amount ... ELSE 0 END``."""
    return sa_compat.case(
        *(
            (INVENTORIES.c.resource_class == name, value)
            for name, value in resources.items()
        ),
        else_=0,
    )


def _moves(**amounts):
    """``{column: column + CASE ...}`` for each of ``used``, ``granted``
    and ``external`` given a non-zero amount."""
    return {
        column: INVENTORIES.c[column] + _by_class(amount)
        for column, amount in amounts.items()
        if amount
    }


def _rows_of(host_id, classes):
    """The node's inventory rows of ``classes``."""
    return sa.and_(
        INVENTORIES.c.host_id == host_id,
        INVENTORIES.c.resource_class.in_(sorted(classes)),
    )


def _class_fits(name, value, minus):
    """One class of ``HostState.fits`` on an inventory row."""
    return sa.and_(
        INVENTORIES.c.resource_class == name,
        INVENTORIES.c.used + INVENTORIES.c.granted + (value - minus[name])
        <= INVENTORIES.c.capacity,
        INVENTORIES.c.min_unit <= value,
        INVENTORIES.c.max_unit >= value,
        # NOTE: the % operator, not MOD(), which SQLite lacks before 3.35.
        sa.literal(value) % INVENTORIES.c.step_size == 0,
    )


def fits(resources):
    """SQL for ``HostState.fits`` on the ``gs_hosts`` row being selected:
    every class of ``resources`` offered, within its units, and used +
    granted + resources within the class's capacity.  For choosing nodes
    to try; ``take`` decides.

    A count of the node's inventory rows that admit their class
    (``_admitting``): equal to the number of classes asked for when every
    one does.
    """
    if not resources:
        return sa.true()
    admitting = _admitting(HOSTS.c.id, resources, NOTHING)
    return sa_compat.scalar_subquery(admitting) == len(resources)


def _admitting(host_id, resources, minus):
    """``SELECT count(*)`` of the node's inventory rows that admit their
    class of ``resources`` (``HostState.fits``, less ``minus``)."""
    return (
        sa_compat.select(sa.func.count().label("admitting"))
        .select_from(INVENTORIES)
        .where(
            sa.and_(
                INVENTORIES.c.host_id == host_id,
                sa.or_(
                    *(
                        _class_fits(name, value, minus)
                        for name, value in resources.items()
                    )
                ),
            )
        )
    )


def take(
    conn, db, host_id, resources, minus=NOTHING, used=NOTHING, granted=NOTHING
):
    """Move the node's ``used`` and ``granted`` if ``resources`` fits
    there (``HostState.fits``, with ``minus`` given back first), in one
    conditional ``UPDATE`` of its inventory rows: every row or none.

    Only under the node's lock, taken by an earlier statement of the
    caller's transaction: the condition is then read from what the last
    holder of the lock committed (each statement reads what committed
    before it began, on every backend), and no other transaction writes
    these rows meanwhile.

    :returns: True when it fitted and moved, False when nothing moved.
    """
    classes = set(used) | set(granted)
    if not resources:
        move(conn, host_id, used=used, granted=granted)
        return True
    admitting = _admitting(host_id, resources, minus)
    if db.dialect_name == "mysql":
        # NOTE: MySQL refuses a subquery on the table being updated unless
        # it is materialised as a derived table first (an aggregate is
        # never merged into the outer statement).
        derived = admitting.alias("admitting")
        admitting = sa_compat.select(derived.c.admitting)
    moved = conn.execute(
        INVENTORIES.update()
        .where(
            sa.and_(
                _rows_of(host_id, classes),
                sa_compat.scalar_subquery(admitting) == len(resources),
            )
        )
        .values(**_moves(used=used, granted=granted))
    )
    if moved.rowcount == 0:
        return False
    if moved.rowcount != len(classes):
        # NOTE: a class moved that the node's books lack (a claim's held
        # grant of a class since removed): counted all the same.
        _add_missing(conn, host_id, classes, used, granted, NOTHING)
    return True


def move(conn, host_id, used=NOTHING, granted=NOTHING, external=NOTHING):
    """Add ``used``, ``granted`` and ``external`` (each may be negative)
    to the node's inventory rows, in one statement.

    Only under the node's lock (its ``gs_hosts`` row, locked first by the
    caller's transaction).
    """
    classes = set(used) | set(granted) | set(external)
    if not classes:
        return
    moved = conn.execute(
        INVENTORIES.update()
        .where(_rows_of(host_id, classes))
        .values(**_moves(used=used, granted=granted, external=external))
    )
    if moved.rowcount != len(classes):
        _add_missing(conn, host_id, classes, used, granted, external)


def _add_missing(conn, host_id, classes, used, granted, external):
    """Rows of no capacity for classes the node's books do not have yet
    (what runs there is counted, whatever its inventory says), holding
    the amounts a move could not add to a row."""
    present = {
        row[0]
        for row in conn.execute(
            sa_compat.select(INVENTORIES.c.resource_class).where(
                INVENTORIES.c.host_id == host_id
            )
        )
    }
    missing = classes - present
    if missing:

        def only_missing(amount):
            return amount.map(lambda n, v: v if n in missing else 0)

        conn.execute(
            INVENTORIES.insert().values(
                inventory_rows(
                    host_id,
                    Capacity.of({name: NO_CAPACITY for name in missing}),
                    used=only_missing(used),
                    external=only_missing(external),
                    granted=only_missing(granted),
                )
            )
        )


class LostUpdate(Exception):
    """A conditional update found the row changed: start again."""


def retry_request():
    return db_exc.RetryRequest(LostUpdate())
