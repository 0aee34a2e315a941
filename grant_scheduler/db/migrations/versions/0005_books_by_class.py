"""Books by resource class, as placement keeps them.

* ``gs_inventories`` holds each node's books, one row per resource class:
  the inventory (``total``, ``reserved``, ``allocation_ratio``,
  ``min_unit``, ``max_unit``, ``step_size``), its ``capacity`` and the
  class's ``used``, ``external`` and ``granted``.  Each node's three
  standard amounts move there as ``VCPU``, ``MEMORY_MB`` and ``DISK_GB``
  rows with the meaning they had: ``max_unit`` is the total (one instance
  no larger than the node), ``min_unit`` and ``step_size`` are 1, and
  ``capacity``, usage and live grants are the row's ``limit_*``,
  ``*_used``, ``external_*`` and ``granted_*``.
* ``gs_grants`` and ``gs_claims`` carry their amounts as ``resources``,
  the canonical text of each class's amount (``{"VCPU":1,...}``, classes
  of amount zero left out), in place of three columns.
* The amount columns leave ``gs_hosts``, ``gs_grants`` and ``gs_claims``.
  SQLite copies the tables to drop them: ``gs_hosts`` keeps
  AUTOINCREMENT and its counter (a deleted node's id is never given
  again), ``gs_grants`` its state check.

Live grants and claims keep their amounts, so a grant written before the
upgrade is consumed by a claim after it, and every node's live grants and
usage still equal their rows' sums.

Revision ID: 0005_books_by_class
Revises: 0004_grant_states_written
Create Date: 2027-01-25
"""

import json

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from alembic import op
from grant_scheduler.db import sa_compat

revision = "0005_books_by_class"
down_revision = "0004_grant_states_written"
branch_labels = None
depends_on = None

CLASSES = (
    ("VCPU", "vcpus", "cpu_allocation_ratio"),
    ("MEMORY_MB", "memory_mb", "ram_allocation_ratio"),
    ("DISK_GB", "disk_gb", "disk_allocation_ratio"),
)
NAMES = [name for _, name, _ in CLASSES]
RATIOS = [ratio for _, _, ratio in CLASSES]

HOST_AMOUNTS = [
    prefix + name + suffix
    for prefix, suffix in (
        ("", ""),
        ("reserved_", ""),
        ("limit_", ""),
        ("", "_used"),
        ("external_", ""),
        ("granted_", ""),
    )
    for name in NAMES
]

Name = sa.String(255).with_variant(
    mysql.VARCHAR(255, charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
)
Amount = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
AmountsText = sa.Text().with_variant(
    mysql.TEXT(charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
)
CHECK = "ck_gs_grants_state"
BATCH = 1000


def _create_inventories():
    op.create_table(
        "gs_inventories",
        sa.Column(
            "host_id", sa.Integer, primary_key=True, autoincrement=False
        ),
        sa.Column("resource_class", Name, primary_key=True),
        sa.Column("total", Amount, nullable=False),
        sa.Column("reserved", Amount, nullable=False),
        sa.Column("allocation_ratio", sa.Float, nullable=False),
        sa.Column("min_unit", Amount, nullable=False),
        sa.Column("max_unit", Amount, nullable=False),
        sa.Column("step_size", Amount, nullable=False),
        sa.Column("capacity", Amount, nullable=False),
        sa.Column("used", Amount, nullable=False),
        sa.Column("external", Amount, nullable=False),
        sa.Column("granted", Amount, nullable=False),
        mysql_engine="InnoDB",
        mysql_charset="utf8mb4",
    )


def _copy_books(bind):
    """Each node's three amounts into three inventory rows, by the
    database itself (one ``INSERT ... SELECT`` per class)."""
    hosts = sa.table(
        "gs_hosts", *(sa.column(n) for n in ["id"] + HOST_AMOUNTS + RATIOS)
    )
    inventories = sa.table(
        "gs_inventories",
        *(
            sa.column(n)
            for n in (
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
            )
        ),
    )
    for resource_class, name, ratio in CLASSES:
        # NOTE: every column labelled: SQLAlchemy 1.3 leaves a column or
        # literal that appears twice out of the SELECT.
        rows = sa_compat.select(
            hosts.c.id.label("host_id"),
            sa.literal(resource_class, Name).label("resource_class"),
            hosts.c[name].label("total"),
            hosts.c["reserved_" + name].label("reserved"),
            hosts.c[ratio].label("allocation_ratio"),
            sa.literal(1, Amount).label("min_unit"),
            hosts.c[name].label("max_unit"),
            sa.literal(1, Amount).label("step_size"),
            hosts.c["limit_" + name].label("capacity"),
            hosts.c[name + "_used"].label("used"),
            hosts.c["external_" + name].label("external"),
            hosts.c["granted_" + name].label("granted"),
        )
        bind.execute(
            inventories.insert().from_select(
                [column.name for column in inventories.c], rows
            )
        )


def _encode(values):
    amounts = {
        resource_class: int(value)
        for (resource_class, _, _), value in zip(CLASSES, values)
        if value
    }
    return json.dumps(amounts, separators=(",", ":"))


def _copy_amounts(bind, name):
    """A grant's or claim's three columns into ``resources``, in batches
    of ``BATCH`` rows by id."""
    table = sa.table(
        name, sa.column("id"), sa.column("resources"), *map(sa.column, NAMES)
    )
    update = (
        table.update()
        .where(table.c.id == sa.bindparam("row_id"))
        .values(resources=sa.bindparam("encoded"))
    )
    last = None
    while True:
        query = sa_compat.select(table.c.id, *(table.c[n] for n in NAMES))
        if last is not None:
            query = query.where(table.c.id > last)
        found = bind.execute(
            query.order_by(table.c.id).limit(BATCH)
        ).fetchall()
        if not found:
            return
        bind.execute(
            update,
            [{"row_id": row[0], "encoded": _encode(row[1:])} for row in found],
        )
        last = found[-1][0]


def _sqlite_counter(bind):
    """The highest id SQLite ever gave a ``gs_hosts`` row (None when it
    gave none)."""
    return bind.execute(
        sa.text("SELECT seq FROM sqlite_sequence WHERE name = 'gs_hosts'")
    ).scalar()


def _restore_sqlite_counter(bind, counter):
    """Give the copied ``gs_hosts`` the counter the old table had.

    The copy starts its AUTOINCREMENT counter at the highest id it holds:
    the ids of the nodes deleted last would be given again, to new nodes
    that would inherit whatever of theirs a crash left behind.
    """
    if counter is None:
        return
    bind.execute(
        sa.text("DELETE FROM sqlite_sequence WHERE name = 'gs_hosts'")
    )
    bind.execute(
        sa.text(
            "INSERT INTO sqlite_sequence (name, seq) VALUES ('gs_hosts', :seq)"
        ).bindparams(seq=counter)
    )


def _drop_amounts():
    # NOTE: SQLite copies each table; gs_hosts keeps AUTOINCREMENT and its
    # counter, and gs_grants its state check, which alembic before 1.7
    # would leave out of the copy.
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    counter = _sqlite_counter(bind) if sqlite else None
    with op.batch_alter_table(
        "gs_hosts", table_kwargs={"sqlite_autoincrement": True}
    ) as batch:
        for name in HOST_AMOUNTS + RATIOS:
            batch.drop_column(name)
    _restore_sqlite_counter(bind, counter)
    for name in ("gs_grants", "gs_claims"):
        with op.batch_alter_table(name) as batch:
            batch.alter_column(
                "resources", existing_type=AmountsText, nullable=False
            )
            for column in NAMES:
                batch.drop_column(column)
            if sqlite and name == "gs_grants":
                batch.create_check_constraint(
                    CHECK, "state IN ('won', 'consumed')"
                )


def upgrade():
    bind = op.get_bind()
    _create_inventories()
    _copy_books(bind)
    for name in ("gs_grants", "gs_claims"):
        op.add_column(name, sa.Column("resources", AmountsText, nullable=True))
        _copy_amounts(bind, name)
    _drop_amounts()
