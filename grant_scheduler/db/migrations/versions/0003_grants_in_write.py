"""Grants decided in their own write; wider amounts; names compared exactly.

* ``gs_hosts`` gains ``limit_*`` (``(total - reserved) x ratio``),
  ``granted_*`` (the sum of the node's live grants) and ``external_*``
  (usage no claim accounts for), so one conditional ``UPDATE`` of the row
  decides a grant; ``generation`` goes (nothing reads it).
* ``gs_grants`` gains ``expires_at``; undecided grants become won (they
  were counted as live already) and lost ones go.  The state check keeps
  admitting the two retired states: replacing a CHECK constraint means a
  table copy on SQLite, which older alembic releases make without it.
* Every amount becomes a 64-bit integer; host and node names compare
  byte for byte on MySQL (``utf8mb4_bin``, as on PostgreSQL and SQLite);
  node ids on SQLite are never reused (``AUTOINCREMENT``), so a new node
  can never inherit a deleted node's grants or claims.

Revision ID: 0003_grants_in_write
Revises: 0002_hosts_updated_at_index
Create Date: 2026-12-02
"""

import datetime
import math

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from alembic import op
from grant_scheduler.db import sa_compat

revision = "0003_grants_in_write"
down_revision = "0002_hosts_updated_at_index"
branch_labels = None
depends_on = None

DIMENSIONS = ("vcpus", "memory_mb", "disk_gb")
RATIOS = {
    "vcpus": "cpu_allocation_ratio",
    "memory_mb": "ram_allocation_ratio",
    "disk_gb": "disk_allocation_ratio",
}
# The TTL grants had by default when this revision was written.
DEFAULT_TTL = datetime.timedelta(seconds=600)

Name = sa.String(255).with_variant(
    mysql.VARCHAR(255, charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
)
PreciseDateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")


def _names(prefix="", suffix=""):
    return [prefix + name + suffix for name in DIMENSIONS]


NEW_HOST_COLUMNS = _names("limit_") + _names("external_") + _names("granted_")
HOST_AMOUNTS = _names() + _names("reserved_") + _names(suffix="_used")


# NOTE: SQLite's integers are 64-bit whatever the declared type.
Amount = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _widen(batch, names):
    for name in names:
        batch.alter_column(
            name,
            type_=Amount,
            existing_type=sa.Integer(),
            existing_nullable=False,
        )


def _hosts():
    with op.batch_alter_table(
        "gs_hosts", table_kwargs={"sqlite_autoincrement": True}
    ) as batch:
        for name in NEW_HOST_COLUMNS:
            batch.add_column(
                sa.Column(name, Amount, nullable=False, server_default="0")
            )
        _widen(batch, HOST_AMOUNTS)
        batch.drop_column("generation")
        for name in ("host", "node"):
            batch.alter_column(
                name,
                type_=Name,
                existing_type=sa.String(255),
                existing_nullable=False,
            )
    # NOTE: on SQLite this copies the table once more: it must keep
    # AUTOINCREMENT too.
    with op.batch_alter_table(
        "gs_hosts", table_kwargs={"sqlite_autoincrement": True}
    ) as batch:
        for name in NEW_HOST_COLUMNS:
            batch.alter_column(
                name,
                server_default=None,
                existing_type=Amount,
                existing_nullable=False,
            )


def _grants_and_claims():
    op.drop_index("ix_gs_grants_state_created_at", table_name="gs_grants")
    op.add_column(
        "gs_grants", sa.Column("expires_at", PreciseDateTime, nullable=True)
    )
    if op.get_bind().dialect.name == "sqlite":
        return  # nothing to widen, and no CHECK to lose in a table copy
    for table in ("gs_grants", "gs_claims"):
        with op.batch_alter_table(table) as batch:
            _widen(batch, _names())


def _limit(row, name):
    usable = row["%s" % name] - row["reserved_%s" % name]
    return max(0, math.floor(usable * row[RATIOS[name]] + 1e-9))


def _backfill_states():
    """Lost grants go; undecided ones were counted as live: now won."""
    grants = sa.table("gs_grants", sa.column("state"))
    op.execute(grants.delete().where(grants.c.state == "lost"))
    op.execute(
        grants.update().where(grants.c.state == "pending").values(state="won")
    )


def _backfill(bind):
    hosts = sa.table(
        "gs_hosts",
        *(
            sa.column(name)
            for name in ["id"]
            + HOST_AMOUNTS
            + NEW_HOST_COLUMNS
            + list(RATIOS.values())
        ),
    )
    grants = sa.table(
        "gs_grants",
        sa.column("created_at", PreciseDateTime),
        sa.column("expires_at", PreciseDateTime),
        *(sa.column(name) for name in ["id", "host_id", "state"] + _names()),
    )
    claims = sa.table(
        "gs_claims", *(sa.column(n) for n in ["host_id"] + _names())
    )
    for row in bind.execute(
        sa_compat.select(grants.c.id, grants.c.created_at)
    ).fetchall():
        bind.execute(
            grants.update()
            .where(grants.c.id == row[0])
            .values(expires_at=row[1] + DEFAULT_TTL)
        )

    def sums(table, condition=None):
        columns = [table.c.host_id] + [
            sa.func.sum(table.c[name]).label(name) for name in DIMENSIONS
        ]
        query = sa_compat.select(*columns)
        if condition is not None:
            query = query.where(condition)
        result = bind.execute(query.group_by(table.c.host_id)).fetchall()
        return {r[0]: [int(r[i + 1] or 0) for i in range(3)] for r in result}

    live = sums(grants, grants.c.state == "won")
    claimed = sums(claims)
    all_columns = list(hosts.c)
    query = sa_compat.select(*all_columns)
    for result_row in bind.execute(query).fetchall():
        row = dict(zip([c.name for c in all_columns], result_row))
        values = {}
        for index, name in enumerate(DIMENSIONS):
            values["limit_" + name] = _limit(row, name)
            values["granted_" + name] = live.get(row["id"], [0, 0, 0])[index]
            values["external_" + name] = max(
                0,
                row[name + "_used"] - claimed.get(row["id"], [0, 0, 0])[index],
            )
        bind.execute(
            hosts.update().where(hosts.c.id == row["id"]).values(**values)
        )


def upgrade():
    _backfill_states()
    _hosts()
    _grants_and_claims()
    _backfill(op.get_bind())
    op.create_index(
        "ix_gs_grants_state_expires_at", "gs_grants", ["state", "expires_at"]
    )
