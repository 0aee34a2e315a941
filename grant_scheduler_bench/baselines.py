"""The benchmark's baselines behind the public object: never the product's
code path.

Each is a ``grant_scheduler.api.SQLStore`` that overrides public interface
methods only (``grant``), or adds the benchmark's own
(``read_with_generation``, ``allocate``), and runs its own SQL in its own
transactions (``Database.writer()``/``reader()``, retried here on deadlock
or a lost connection), so that every strategy is driven, counted and
checked the same way (``factory.grant_scheduler(url, store_cls=...)``).

``NaiveStore`` (UNSAFE) takes the seed's steps literally: a grant stamped
with the database's clock, committed, then verified in a second
transaction that counts every live grant stamped earlier.  Nothing ties the
stamp to commit order: A stamps first and commits last; B commits, reads
back, cannot see A and wins; A commits, reads back, sees B's later stamp,
ignores it and wins too (H1).  A grant not yet verified is a row of the
benchmark's own table (``gs_bench_naive_grants``); a verified one becomes
a ``won`` grant of the product's table, counted in its node's books (the
node's inventory rows), which the product's compute side consumes and the
checker reads.

``PlacementModelStore`` is placement's answer, idealised: read usage, check
capacity in the client, and write the allocation guarded by the node's
generation (here its ticket, bumped by every write) in one transaction.

The product's tables appear here only as the columns these baselines read
and write (``HOSTS``, ``INVENTORIES``, ``GRANTS``, ``CLAIMS``); a test
holds them to the product's schema.  As the product does, a node's books
are its ``gs_inventories`` rows, one per resource class, written only
under the lock of its ``gs_hosts`` row (taken first); a grant's or claim's
amount is ``resources``, the canonical text of ``encode``.
"""

import json
import random
import time

import sqlalchemy as sa
from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from sqlalchemy.dialects import mysql

from grant_scheduler import api
from grant_scheduler_bench import sqla

# -- the product's tables, as far as the baselines touch them -------------

HOSTS = sa.table(
    "gs_hosts",
    *(
        sa.column(name)
        for name in [
            "id",
            "host",
            "node",
            "node_uuid",
            "ticket",
            "last_grant_ticket",
            "created_at",
            "updated_at",
        ]
    ),
)
INVENTORY_COLUMNS = [
    "host_id",
    "resource_class",
    "total",
    "reserved",
    "allocation_ratio",
    "min_unit",
    "max_unit",
    "step_size",
    "capacity",
    "used",
    "external",
    "granted",
]
INVENTORIES = sa.table(
    "gs_inventories", *(sa.column(name) for name in INVENTORY_COLUMNS)
)
GRANTS = sa.table(
    "gs_grants",
    *(
        sa.column(name)
        for name in [
            "id",
            "host_id",
            "ticket",
            "instance_uuid",
            "request_id",
            "scheduler",
            "state",
            "created_at",
            "expires_at",
            "resources",
        ]
    ),
)
CLAIMS = sa.table(
    "gs_claims",
    *(
        sa.column(name)
        for name in ["instance_uuid", "host_id", "created_at", "resources"]
    ),
)
# The state of a live grant in the product's table.
WON = "won"


def encode(resources):
    """An amount as the product's ``resources`` column holds it: JSON of
    class -> amount, classes in ``Resources``' order, no spaces.  Canonical:
    the product finds "the grant of exactly these resources" (a claim's)
    by equality of this text."""
    return json.dumps(resources.as_dict(), separators=(",", ":"))


def decode(text):
    """The ``api.Resources`` of ``encode``'s text."""
    return api.Resources.of(json.loads(text or "{}"))


# -- the benchmark's own table ---------------------------------------------

# NOTE: as the product's: SQLite assigns rowids to INTEGER PRIMARY KEY
# only, MySQL's DATETIME drops fractional seconds unless asked, and an
# amount's text compares byte for byte.
_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_Stamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")
_Amounts = sa.Text().with_variant(
    mysql.TEXT(charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
)

METADATA = sa.MetaData()

NAIVE_GRANTS = sa.Table(
    "gs_bench_naive_grants",
    METADATA,
    sa.Column("id", _Id, primary_key=True, autoincrement=True),
    sa.Column("host_id", sa.Integer, nullable=False),
    sa.Column("ticket", sa.BigInteger, nullable=False),
    sa.Column("instance_uuid", sa.String(36), nullable=True),
    sa.Column("request_id", sa.String(255), nullable=True),
    sa.Column("scheduler", sa.String(255), nullable=False),
    sa.Column("resources", _Amounts, nullable=False),
    sa.Column("created_at", _Stamp, nullable=False),
    sa.Column("expires_at", _Stamp, nullable=False),
    sa.Index("ix_gs_bench_naive_grants_host_id", "host_id"),
    mysql_engine="InnoDB",
    mysql_charset="utf8mb4",
)
"""Naive grants written and not yet verified: what the seed's ``pending``
was, kept out of the product's table, whose states are the product's."""

# -- helpers ---------------------------------------------------------------

_retried = oslo_db_api.wrap_db_retry(
    max_retries=20,
    retry_on_deadlock=True,
    retry_on_disconnect=True,
    jitter=True,
)


def _by_class(resources):
    """``CASE resource_class WHEN ... THEN amount ... ELSE 0 END``."""
    return sqla.case(
        *(
            (INVENTORIES.c.resource_class == name, value)
            for name, value in resources.items()
        ),
        else_=0,
    )


def _move(conn, host_id, column, amount):
    """Add ``amount`` to the node's ``column`` (``used`` or ``granted``),
    class by class, in one ``UPDATE`` of its inventory rows.

    Only under the node's row lock, taken by an earlier statement of the
    caller's transaction.  :returns: whether every class of ``amount`` had
    its row (else the node's books are not the ones the decision read).
    """
    if not amount:
        return True
    moved = conn.execute(
        INVENTORIES.update()
        .where(
            sa.and_(
                INVENTORIES.c.host_id == host_id,
                INVENTORIES.c.resource_class.in_(amount.classes()),
            )
        )
        .values(**{column: INVENTORIES.c[column] + _by_class(amount)})
    )
    return moved.rowcount == len(amount)


def _lock(conn, host_id):
    """Wait for the node's row lock, changing nothing (SQLite's writers
    hold the database's lock already, and SQLAlchemy writes no
    ``FOR UPDATE`` there)."""
    conn.execute(
        sqla.select(HOSTS.c.id).where(HOSTS.c.id == host_id).with_for_update()
    ).scalar()


def _total(conn, table, condition):
    """The sum of the amounts (``resources``) of ``table``'s rows meeting
    ``condition``."""
    total = api.NOTHING
    for (text,) in conn.execute(
        sqla.select(table.c.resources).where(condition)
    ):
        total += decode(text)
    return total


def _with_books(condition=None):
    """Node rows meeting ``condition``, each joined with its inventory
    rows (one result row per class, inventory columns labelled ``inv_``),
    in id order: one statement, one snapshot."""
    query = sqla.select(
        HOSTS.c.id,
        HOSTS.c.host,
        HOSTS.c.node,
        HOSTS.c.node_uuid,
        HOSTS.c.ticket,
        *(
            INVENTORIES.c[name].label("inv_" + name)
            for name in INVENTORY_COLUMNS[1:]
        ),
    ).select_from(
        HOSTS.outerjoin(INVENTORIES, INVENTORIES.c.host_id == HOSTS.c.id)
    )
    if condition is not None:
        query = query.where(condition)
    return query.order_by(HOSTS.c.id)


def _nodes(conn, condition=None):
    """``[(gs_hosts row, its inventory rows)]`` of ``_with_books``."""
    found = []
    for row in conn.execute(_with_books(condition)):
        if not found or found[-1][0].id != row.id:
            found.append((row, []))
        if row.inv_resource_class is not None:
            found[-1][1].append(row)
    return found


def host_state(row, inventory_rows):
    """An ``api.HostState`` from a ``gs_hosts`` row and its inventory rows
    (as ``_with_books`` reads them)."""
    inventories, limit, used, granted = {}, {}, {}, {}
    for inventory in inventory_rows:
        name = inventory.inv_resource_class
        inventories[name] = api.Inventory(
            total=int(inventory.inv_total),
            reserved=int(inventory.inv_reserved),
            allocation_ratio=inventory.inv_allocation_ratio,
            min_unit=int(inventory.inv_min_unit),
            max_unit=int(inventory.inv_max_unit),
            step_size=int(inventory.inv_step_size),
        )
        limit[name] = int(inventory.inv_capacity)
        used[name] = int(inventory.inv_used)
        granted[name] = int(inventory.inv_granted)
    return api.HostState(
        host_id=row.id,
        host=row.host,
        node=row.node,
        node_uuid=row.node_uuid,
        capacity=api.Capacity.of(inventories),
        used=api.Resources.of(used),
        granted=api.Resources.of(granted),
        limit=api.Resources.of(limit),
    )


def _host_state(conn, host_id):
    """The node's ``api.HostState``, or None when its row is gone."""
    found = _nodes(conn, HOSTS.c.id == host_id)
    return host_state(*found[0]) if found else None


def create_tables(database):
    """Create the benchmark's own tables unless they exist (a concurrent
    creation by another process is fine)."""
    try:
        with database.writer() as conn:
            METADATA.create_all(conn, checkfirst=True)
    except (db_exc.DBError, sa.exc.DBAPIError):
        with database.reader() as conn:
            if NAIVE_GRANTS.name not in sa.inspect(conn).get_table_names():
                raise


# -- the unsafe baseline ---------------------------------------------------


class NaiveStore(api.SQLStore):
    """A ``Store`` whose grant follows the seed literally.  UNSAFE."""

    def __init__(self, database):
        super().__init__(database)
        self.database = database
        self._tables_ready = False

    def grant(self, host_ids, ask, taken, before_commit=None):
        """The seed's rule on the first candidate only."""
        if not self._tables_ready:
            create_tables(self.database)
            self._tables_ready = True
        host_id = list(host_ids)[0]
        naive_id = self._insert_unverified(host_id, ask, before_commit)
        return self._verify_by_timestamp(host_id, naive_id, ask)

    @_retried
    def _insert_unverified(self, host_id, ask, before_commit):
        db = self.database
        # NOTE: no ticket is taken, so no node row lock orders the inserts;
        # the product's column still needs a unique value, which decides
        # nothing here.  It is positive, far above any issued ticket:
        # MySQL's LAST_INSERT_ID(expr), through which the compute side
        # reads a consumed grant's ticket, is unsigned and turns a negative
        # one into an out-of-range value.
        ticket = (1 << 62) + random.getrandbits(61)
        with db.writer() as conn:
            naive_id = conn.execute(
                NAIVE_GRANTS.insert().values(
                    host_id=host_id,
                    ticket=ticket,
                    instance_uuid=ask.instance_uuid,
                    request_id=ask.request_id,
                    scheduler=ask.scheduler,
                    created_at=db.now(),
                    expires_at=db.now(ask.ttl),
                    resources=encode(ask.resources),
                )
            ).inserted_primary_key[0]
            if before_commit is not None:
                before_commit(grant_id=naive_id, ticket=ticket)
        return naive_id

    @_retried
    def _verify_by_timestamp(self, host_id, naive_id, ask):
        amount = ask.resources
        mine = NAIVE_GRANTS.c.id == naive_id
        with self.database.writer() as conn:
            state = _host_state(conn, host_id)
            ticket = conn.execute(
                sqla.select(NAIVE_GRANTS.c.ticket).where(mine)
            ).scalar()
            if state is None or ticket is None:
                conn.execute(NAIVE_GRANTS.delete().where(mine))
                return api.Taken(False, states={host_id: state})
            # Every live grant stamped earlier: unverified ones here, won
            # ones in the product's table.  NOTE: the stamp is compared in
            # SQL, as stored, never through a Python datetime.
            stamp = sqla.scalar_subquery(
                sqla.select(NAIVE_GRANTS.c.created_at).where(mine)
            )
            unverified = _total(
                conn,
                NAIVE_GRANTS,
                sa.and_(
                    NAIVE_GRANTS.c.host_id == host_id,
                    NAIVE_GRANTS.c.id != naive_id,
                    NAIVE_GRANTS.c.created_at < stamp,
                ),
            )
            won = _total(
                conn,
                GRANTS,
                sa.and_(
                    GRANTS.c.host_id == host_id,
                    GRANTS.c.state == WON,
                    GRANTS.c.created_at < stamp,
                ),
            )
            others = unverified + won
            if not (state.used + others + amount).fits_within(state.limit):
                conn.execute(NAIVE_GRANTS.delete().where(mine))
                return api.Taken(False, states={host_id: state})
            # NOTE: copied in SQL, so the product's row keeps the very
            # stamp the rule compared.
            copied = [
                "host_id",
                "ticket",
                "instance_uuid",
                "request_id",
                "scheduler",
                "created_at",
                "expires_at",
                "resources",
            ]
            conn.execute(
                GRANTS.insert().from_select(
                    copied + ["state"],
                    sqla.select(
                        *(NAIVE_GRANTS.c[name] for name in copied),
                        sa.literal(WON),
                    ).where(mine),
                )
            )
            grant_id = conn.execute(
                sqla.select(GRANTS.c.id).where(
                    sa.and_(
                        GRANTS.c.host_id == host_id,
                        GRANTS.c.ticket == ticket,
                    )
                )
            ).scalar()
            # Counted in the books the checker reads: an overcommit shows
            # as I1.  Under the node's row lock, as every write of the
            # books; the rule never stamped the row, and does not now.
            _lock(conn, host_id)
            if not _move(conn, host_id, "granted", amount):
                # NOTE: the node's inventories changed since the rule read
                # them: decide again on the books as they are now.
                raise db_exc.RetryRequest(
                    LookupError("node %s lost an inventory" % host_id)
                )
            conn.execute(NAIVE_GRANTS.delete().where(mine))
        return api.Taken(
            True, host_id=host_id, grant_id=grant_id, ticket=ticket
        )


# -- the placement model ---------------------------------------------------


class PlacementModelStore(api.SQLStore):
    """Placement's generation compare-and-swap, idealised."""

    def __init__(self, database):
        super().__init__(database)
        self.database = database

    @_retried
    def read_with_generation(self):
        """``[(HostState, generation)]`` of every node, in one read."""
        with self.database.reader() as conn:
            return [
                (host_state(row, inventories), row.ticket)
                for row, inventories in _nodes(conn)
            ]

    @_retried
    def allocate(self, host_id, generation, amount, instance_uuid):
        """Move ``amount`` into the node's usage, with a claim row, if its
        generation is still ``generation``; False (nothing written) if
        another write moved it on."""
        db = self.database
        try:
            with db.writer() as conn:
                # The compare-and-swap, which also takes the node's row
                # lock the books are written under.
                moved = conn.execute(
                    HOSTS.update()
                    .where(
                        sa.and_(
                            HOSTS.c.id == host_id,
                            HOSTS.c.ticket == generation,
                        )
                    )
                    .values(ticket=HOSTS.c.ticket + 1, updated_at=db.now())
                )
                if moved.rowcount != 1:
                    return False
                if not _move(conn, host_id, "used", amount):
                    # NOTE: the node's inventories are not the ones read
                    # with the generation (placement moves a provider's
                    # generation with its inventories): a conflict.
                    raise _InventoriesMoved()
                conn.execute(
                    CLAIMS.insert().values(
                        instance_uuid=instance_uuid,
                        host_id=host_id,
                        created_at=db.now(),
                        resources=encode(amount),
                    )
                )
        except _InventoriesMoved:
            return False
        return True


class _InventoriesMoved(Exception):
    """Rolls an allocation back: the node's books changed under it."""


# -- the benchmark's set-up ------------------------------------------------


def reset(database, names, capacity):
    """Empty the tables and add one node per name, in one transaction (a
    benchmark of 10,000 nodes would otherwise spend minutes reporting):
    each row is what ``GrantScheduler.report_host`` writes for a new node
    of ``capacity`` (an ``api.Capacity``) with nothing used: a
    ``gs_hosts`` row, and an inventory row per class of ``capacity``."""
    _drop_outdated(database)
    create_tables(database)
    with database.writer() as conn:
        for table in (NAIVE_GRANTS, GRANTS, CLAIMS, INVENTORIES, HOSTS):
            conn.execute(table.delete())
        if names:
            conn.execute(
                HOSTS.insert().values(
                    created_at=database.now(), updated_at=database.now()
                ),
                [
                    dict(host=name, node=name, ticket=0, last_grant_ticket=0)
                    for name in names
                ],
            )
            # Every node of the table is new and alike: one
            # INSERT ... SELECT per class writes them all.
            for inventory in _inventory_rows(capacity):
                conn.execute(
                    INVENTORIES.insert().from_select(
                        ["host_id"] + list(inventory),
                        sqla.select(
                            HOSTS.c.id,
                            *(
                                sa.literal(value, _INVENTORY_TYPES[name])
                                for name, value in inventory.items()
                            ),
                        ),
                    )
                )


_INVENTORY_TYPES = dict(
    {name: sa.BigInteger() for name in INVENTORY_COLUMNS},
    resource_class=sa.String(255),
    allocation_ratio=sa.Float(),
)


def _inventory_rows(capacity):
    """The inventory rows ``report_host`` writes for a new node of
    ``capacity`` with nothing used, but their ``host_id``."""
    limit = capacity.limit()
    return [
        {
            "resource_class": name,
            "total": inventory.total,
            "reserved": inventory.reserved,
            "allocation_ratio": float(inventory.allocation_ratio),
            "min_unit": inventory.min_unit,
            "max_unit": inventory.max_unit,
            "step_size": inventory.step_size,
            "capacity": limit[name],
            "used": 0,
            "external": 0,
            "granted": 0,
        }
        for name, inventory in capacity.inventories.items()
    ]


def _drop_outdated(database):
    """Drop a ``gs_bench_naive_grants`` of an earlier shape (its amounts
    in columns of their own, as the product's were): it holds only grants
    not yet verified, which a reset deletes anyway."""
    with database.writer() as conn:
        inspector = sa.inspect(conn)
        if NAIVE_GRANTS.name not in inspector.get_table_names():
            return
        found = {c["name"] for c in inspector.get_columns(NAIVE_GRANTS.name)}
        if found != {c.name for c in NAIVE_GRANTS.c}:
            NAIVE_GRANTS.drop(conn)


def commit_ceiling(database, seconds):
    """Single-row commits per second on ``database``, one after another."""
    with database.writer() as conn:
        sqla.execute_text(
            conn, "CREATE TABLE IF NOT EXISTS gs_bench_ceiling (id INTEGER)"
        )
    commits = 0
    started = time.perf_counter()
    deadline = started + seconds
    try:
        while time.perf_counter() < deadline:
            with database.writer() as conn:
                sqla.execute_text(
                    conn, "INSERT INTO gs_bench_ceiling VALUES (1)"
                )
            commits += 1
        return commits / (time.perf_counter() - started)
    finally:
        with database.writer() as conn:
            sqla.execute_text(conn, "DROP TABLE gs_bench_ceiling")
