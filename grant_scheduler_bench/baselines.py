"""SQL of the benchmark's baselines: never the product's code path.

``NaiveStore`` (UNSAFE) takes the seed's steps literally: a grant row
stamped with the database's clock, committed, then verified in a second
transaction that counts every live grant stamped earlier.  Nothing ties the
stamp to commit order: A stamps first and commits last; B commits, reads
back, cannot see A and wins; A commits, reads back, sees B's later stamp,
ignores it and wins too (H1).

``PlacementModelStore`` is placement's answer, idealised: read usage, check
capacity in the client, and write the allocation guarded by the node's
generation (here its ticket, bumped by every write) in one transaction.

Both are reached only through ``grant_scheduler.bench.factory``.
"""

import random
import time

import sqlalchemy as sa

from grant_scheduler import storage
from grant_scheduler.db import grants
from grant_scheduler.db import hosts
from grant_scheduler.db import models
from grant_scheduler.db import rows
from grant_scheduler.db import sa_compat
from grant_scheduler.db import store as gs_store
from grant_scheduler.resources import NOTHING

HOSTS = models.hosts
GRANTS = models.grants
CLAIMS = models.claims

# NOTE: a state the schema still admits (migration 0003) and the product
# never writes: the naive grant's "written, not yet verified".
_UNVERIFIED = "pending"


def _insert_unverified(conn, db, host_id, ask, before_commit):
    # NOTE: no ticket is taken, so no node row lock orders the inserts; the
    # column still needs a unique value, which decides nothing here.  It is
    # positive, far above any issued ticket: MySQL's LAST_INSERT_ID(expr),
    # through which the compute side reads a consumed grant's ticket, is
    # unsigned and turns a negative one into an out-of-range value.
    ticket = (1 << 62) + random.getrandbits(61)
    grant_id = grants.insert(conn, db, host_id, ticket, ask, _UNVERIFIED)
    if before_commit is not None:
        before_commit(grant_id=grant_id, ticket=ticket)
    return grant_id, ticket


def _verify_by_timestamp(conn, host_id, grant_id, amount):
    state = hosts.one(conn, host_id)
    mine = conn.execute(
        sa_compat.select(GRANTS.c.created_at).where(GRANTS.c.id == grant_id)
    ).first()
    if state is None or mine is None:
        conn.execute(GRANTS.delete().where(GRANTS.c.id == grant_id))
        return False, state
    earlier = conn.execute(
        rows.sums_by_host(
            GRANTS,
            sa.and_(
                GRANTS.c.host_id == host_id,
                GRANTS.c.id != grant_id,
                GRANTS.c.state.in_((_UNVERIFIED, "won")),
                GRANTS.c.created_at < mine.created_at,
            ),
        )
    ).first()
    others = NOTHING if earlier is None else rows.amount(earlier)
    if (state.used + others + amount).fits_within(state.limit):
        conn.execute(
            GRANTS.update().where(GRANTS.c.id == grant_id).values(state="won")
        )
        # Counted in the row the checker reads: an overcommit shows as I1.
        conn.execute(
            HOSTS.update()
            .where(HOSTS.c.id == host_id)
            .values(**rows.moved(HOSTS, amount, prefix="granted_"))
        )
        return True, state
    conn.execute(GRANTS.delete().where(GRANTS.c.id == grant_id))
    return False, state


class NaiveStore(gs_store.Store):
    """A ``Store`` whose grant follows the seed literally.  UNSAFE."""

    def __init__(self, db):
        super().__init__(db)
        self._insert = db.transactional(_with_db(db, _insert_unverified))
        self._verify = db.transactional(_verify_by_timestamp)

    def grant(self, host_ids, ask, taken, before_commit=None):
        """The seed's rule on the first candidate only."""
        host_id = host_ids[0]
        grant_id, ticket = self._insert(host_id, ask, before_commit)
        won, state = self._verify(host_id, grant_id, ask.resources)
        if won:
            return storage.Taken(
                True, host_id=host_id, grant_id=grant_id, ticket=ticket
            )
        return storage.Taken(False, states={host_id: state})


def _read_with_generation(conn):
    return [
        (rows.host_state(row), row.ticket)
        for row in conn.execute(sa_compat.select(HOSTS))
    ]


def _allocate(conn, db, host_id, generation, amount, instance_uuid):
    result = conn.execute(
        HOSTS.update()
        .where(sa.and_(HOSTS.c.id == host_id, HOSTS.c.ticket == generation))
        .values(
            ticket=HOSTS.c.ticket + 1,
            updated_at=db.now(),
            **rows.moved(HOSTS, amount, suffix="_used"),
        )
    )
    if result.rowcount != 1:
        return False
    conn.execute(
        CLAIMS.insert().values(
            instance_uuid=instance_uuid,
            host_id=host_id,
            created_at=db.now(),
            **rows.values(amount),
        )
    )
    return True


class PlacementModelStore(gs_store.Store):
    """Placement's generation compare-and-swap, idealised."""

    def __init__(self, db):
        super().__init__(db)
        self.read_with_generation = db.transactional(
            _read_with_generation, writer=False
        )
        self.allocate = db.transactional(_with_db(db, _allocate))


def _with_db(db, fn):
    def call(conn, *args):
        return fn(conn, db, *args)

    return call


def reset(database, names, capacity):
    """Empty the tables and add one node per name, in one transaction (a
    benchmark of 10,000 nodes would otherwise spend minutes reporting)."""
    with database.writer() as conn:
        for table in (GRANTS, CLAIMS, HOSTS):
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
                        **hosts.capacity_values(capacity),
                        **rows.values(NOTHING, suffix="_used"),
                        **rows.values(NOTHING, prefix="external_"),
                        **rows.values(NOTHING, prefix="granted_"),
                    )
                    for name in names
                ],
            )


def commit_ceiling(database, seconds):
    """Single-row commits per second on ``database``, one after another."""
    with database.writer() as conn:
        sa_compat.execute_text(
            conn, "CREATE TABLE IF NOT EXISTS gs_bench_ceiling (id INTEGER)"
        )
    commits = 0
    started = time.perf_counter()
    deadline = started + seconds
    try:
        while time.perf_counter() < deadline:
            with database.writer() as conn:
                sa_compat.execute_text(
                    conn, "INSERT INTO gs_bench_ceiling VALUES (1)"
                )
            commits += 1
        return commits / (time.perf_counter() - started)
    finally:
        with database.writer() as conn:
            sa_compat.execute_text(conn, "DROP TABLE gs_bench_ceiling")
