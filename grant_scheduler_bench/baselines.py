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
a ``won`` grant of the product's table, counted in its node's row, which
the product's compute side consumes and the checker reads.

``PlacementModelStore`` is placement's answer, idealised: read usage, check
capacity in the client, and write the allocation guarded by the node's
generation (here its ticket, bumped by every write) in one transaction.

The product's tables appear here only as the columns these baselines read
and write (``HOSTS``, ``GRANTS``, ``CLAIMS``); a test holds them to the
product's schema.
"""

import random
import time

import sqlalchemy as sa
from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from sqlalchemy.dialects import mysql

from grant_scheduler import api
from grant_scheduler_bench import sqla

DIMENSIONS = ("vcpus", "memory_mb", "disk_gb")


def _names(prefix="", suffix=""):
    return [prefix + name + suffix for name in DIMENSIONS]


# -- the product's tables, as far as the baselines touch them -------------

HOSTS = sa.table(
    "gs_hosts",
    *(
        sa.column(name)
        for name in ["id", "host", "node", "node_uuid"]
        + _names()
        + _names("reserved_")
        + [
            "cpu_allocation_ratio",
            "ram_allocation_ratio",
            "disk_allocation_ratio",
        ]
        + _names("limit_")
        + _names(suffix="_used")
        + _names("external_")
        + _names("granted_")
        + ["ticket", "last_grant_ticket", "created_at", "updated_at"]
    ),
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
        ]
        + _names()
    ),
)
CLAIMS = sa.table(
    "gs_claims",
    *(
        sa.column(name)
        for name in ["instance_uuid", "host_id", "created_at"] + _names()
    ),
)
# The state of a live grant in the product's table.
WON = "won"

# -- the benchmark's own table ---------------------------------------------

# NOTE: as the product's: SQLite assigns rowids to INTEGER PRIMARY KEY
# only, and MySQL's DATETIME drops fractional seconds unless asked.
_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_Stamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")

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
    *(sa.Column(name, sa.BigInteger, nullable=False) for name in _names()),
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


def _values(resources, prefix="", suffix=""):
    return {
        prefix + name + suffix: getattr(resources, name) for name in DIMENSIONS
    }


def _moved(table, resources, prefix="", suffix="", sign=1):
    return {
        prefix + name + suffix: table.c[prefix + name + suffix]
        + sign * getattr(resources, name)
        for name in DIMENSIONS
    }


def _amount(row, prefix="", suffix=""):
    # NOTE: MySQL returns SUM() of integers as DECIMAL; NULL for no rows.
    return api.Resources(
        *(int(getattr(row, prefix + n + suffix) or 0) for n in DIMENSIONS)
    )


def host_state(row):
    """An ``api.HostState`` from a ``gs_hosts`` row."""
    return api.HostState(
        host_id=row.id,
        host=row.host,
        node=row.node,
        node_uuid=row.node_uuid,
        capacity=api.Capacity(
            total=_amount(row),
            reserved=_amount(row, prefix="reserved_"),
            cpu_allocation_ratio=row.cpu_allocation_ratio,
            ram_allocation_ratio=row.ram_allocation_ratio,
            disk_allocation_ratio=row.disk_allocation_ratio,
        ),
        used=_amount(row, suffix="_used"),
        granted=_amount(row, prefix="granted_"),
        limit=_amount(row, prefix="limit_"),
    )


def _sums(table, condition):
    return sqla.select(
        *(sa.func.sum(table.c[name]).label(name) for name in DIMENSIONS)
    ).where(condition)


def _host_row(conn, host_id):
    return conn.execute(
        sqla.select(HOSTS).where(HOSTS.c.id == host_id)
    ).first()


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
                    **_values(ask.resources),
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
            row = _host_row(conn, host_id)
            state = None if row is None else host_state(row)
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
            unverified = conn.execute(
                _sums(
                    NAIVE_GRANTS,
                    sa.and_(
                        NAIVE_GRANTS.c.host_id == host_id,
                        NAIVE_GRANTS.c.id != naive_id,
                        NAIVE_GRANTS.c.created_at < stamp,
                    ),
                )
            ).first()
            won = conn.execute(
                _sums(
                    GRANTS,
                    sa.and_(
                        GRANTS.c.host_id == host_id,
                        GRANTS.c.state == WON,
                        GRANTS.c.created_at < stamp,
                    ),
                )
            ).first()
            others = _amount(unverified) + _amount(won)
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
            ] + list(DIMENSIONS)
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
            # Counted in the row the checker reads: an overcommit shows as
            # I1.
            conn.execute(
                HOSTS.update()
                .where(HOSTS.c.id == host_id)
                .values(**_moved(HOSTS, amount, prefix="granted_"))
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
                (host_state(row), row.ticket)
                for row in conn.execute(sqla.select(HOSTS))
            ]

    @_retried
    def allocate(self, host_id, generation, amount, instance_uuid):
        """Move ``amount`` into the node's usage, with a claim row, if its
        generation is still ``generation``; False (nothing written) if
        another write moved it on."""
        db = self.database
        with db.writer() as conn:
            moved = conn.execute(
                HOSTS.update()
                .where(
                    sa.and_(
                        HOSTS.c.id == host_id, HOSTS.c.ticket == generation
                    )
                )
                .values(
                    ticket=HOSTS.c.ticket + 1,
                    updated_at=db.now(),
                    **_moved(HOSTS, amount, suffix="_used"),
                )
            )
            if moved.rowcount != 1:
                return False
            conn.execute(
                CLAIMS.insert().values(
                    instance_uuid=instance_uuid,
                    host_id=host_id,
                    created_at=db.now(),
                    **_values(amount),
                )
            )
        return True


# -- the benchmark's set-up ------------------------------------------------


def reset(database, names, capacity):
    """Empty the tables and add one node per name, in one transaction (a
    benchmark of 10,000 nodes would otherwise spend minutes reporting):
    each row is what ``GrantScheduler.report_host`` writes for a new node
    of ``capacity`` (an ``api.Capacity``) with nothing used."""
    create_tables(database)
    nothing = api.Resources()
    with database.writer() as conn:
        for table in (NAIVE_GRANTS, GRANTS, CLAIMS, HOSTS):
            conn.execute(table.delete())
        if names:
            conn.execute(
                HOSTS.insert().values(
                    created_at=database.now(), updated_at=database.now()
                ),
                [
                    dict(
                        host=name,
                        node=name,
                        **_values(capacity.total),
                        **_values(capacity.reserved, prefix="reserved_"),
                        **_values(capacity.limit(), prefix="limit_"),
                        cpu_allocation_ratio=capacity.cpu_allocation_ratio,
                        ram_allocation_ratio=capacity.ram_allocation_ratio,
                        disk_allocation_ratio=capacity.disk_allocation_ratio,
                        **_values(nothing, suffix="_used"),
                        **_values(nothing, prefix="external_"),
                        **_values(nothing, prefix="granted_"),
                        ticket=0,
                        last_grant_ticket=0,
                    )
                    for name in names
                ],
            )


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
