"""The tables of grant_scheduler, as SQLAlchemy Core tables.

Every table is prefixed ``gs_`` so the schema can live inside an existing
Nova database without clashing, and every index and constraint is named so
that migrations can refer to it on every backend.  Core tables, not ORM
classes: nothing here needs an ORM, and Core reads the same on
SQLAlchemy 1.3 and 2.x.

``gs_hosts``
    One row per compute node: its names, ``ticket``, which counts the
    grants issued on the node (their order), and
    ``last_grant_ticket``/``last_grant_at``, the mark moved forward when the
    compute host consumes a grant.  The row is the node's lock: every
    transaction that changes the node's books locks it first, and a grant
    is taken by one conditional ``UPDATE`` of it whose condition reads the
    node's inventories under that lock.
``gs_inventories``
    The node's books, one row per resource class, as placement keeps an
    inventory (``total``, ``reserved``, ``allocation_ratio``,
    ``min_unit``, ``max_unit``, ``step_size``), with ``capacity``
    (``(total - reserved) x ratio``, written with the inventory), usage
    (``used``: the claimed instances plus the usage no claim accounts for,
    ``external``) and ``granted``, the sum of the node's live grants of
    the class.
``gs_grants``
    One row per promise "scheduler S granted resources R on host H to
    instance I" (``resources``: the amount of each class, see
    ``encode``): ``won`` while live, ``consumed`` once the compute host
    counted it in usage (then only the reaper looks at it).
    ``created_at``/``expires_at`` come from the database's clock.
``gs_claims``
    One row per instance whose resources (``resources``, as a grant's) are
    counted in a host's usage: what
    makes claim and release idempotent (H12) and what the invariant
    checker compares usage with (I4).
"""

import json

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from grant_scheduler.resources import Resources

# NOTE: BIGINT autoincrement does not work on SQLite, which only assigns
# rowids to INTEGER PRIMARY KEY columns.
BigIntegerId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# NOTE: MySQL's DATETIME drops fractional seconds unless asked for them.
PreciseDateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")

# NOTE: host and node names compare byte for byte on every backend; MySQL's
# default collations would fold case ('cmp1' = 'CMP1').  Leading and
# trailing spaces are refused by validation, so PAD SPACE does not matter.
Name = sa.String(255).with_variant(
    mysql.VARCHAR(255, charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
)

# NOTE: SQLite's integers are 64-bit whatever the declared type.
Amount = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

TABLE_ARGS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


# NOTE: a grant's or claim's amounts, one canonical string per amount
# (``encode``), so that "the grant of exactly these resources" is one
# equality on every backend.  Placement's class names are at most 255
# characters; a Nova request names a handful of classes.
AmountsText = sa.Text().with_variant(
    mysql.TEXT(charset="utf8mb4", collation="utf8mb4_bin"), "mysql"
)


def encode(resources):
    """The canonical text of an amount: JSON, classes in ``Resources``'
    order, no spaces (``{"VCPU":1,"MEMORY_MB":512}``)."""
    return json.dumps(resources.as_dict(), separators=(",", ":"))


def decode(text):
    """The ``Resources`` of ``encode``'s text."""
    return Resources.of(json.loads(text or "{}"))


metadata = sa.MetaData()

hosts = sa.Table(
    "gs_hosts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("host", Name, nullable=False),
    sa.Column("node", Name, nullable=False),
    sa.Column("node_uuid", sa.String(36), nullable=True),
    sa.Column("ticket", sa.BigInteger, nullable=False, default=0),
    sa.Column("last_grant_ticket", sa.BigInteger, nullable=False, default=0),
    sa.Column("last_grant_at", PreciseDateTime, nullable=True),
    sa.Column("created_at", PreciseDateTime, nullable=False),
    sa.Column("updated_at", PreciseDateTime, nullable=True),
    sa.UniqueConstraint("host", "node", name="uniq_gs_hosts0host0node"),
    sa.Index("ix_gs_hosts_updated_at", "updated_at"),
    # NOTE: a deleted node's id is never given to a new node on SQLite
    # either (MySQL and PostgreSQL never reuse one).
    sqlite_autoincrement=True,
    **TABLE_ARGS,
)

inventories = sa.Table(
    "gs_inventories",
    metadata,
    # NOTE: no foreign key, as for grants and claims: a node's inventories
    # go with its row in the same transaction (``hosts.delete``).
    sa.Column("host_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("resource_class", Name, primary_key=True),
    sa.Column("total", Amount, nullable=False),
    sa.Column("reserved", Amount, nullable=False, default=0),
    sa.Column("allocation_ratio", sa.Float, nullable=False, default=1.0),
    sa.Column("min_unit", Amount, nullable=False, default=1),
    sa.Column("max_unit", Amount, nullable=False),
    sa.Column("step_size", Amount, nullable=False, default=1),
    sa.Column("capacity", Amount, nullable=False),
    sa.Column("used", Amount, nullable=False, default=0),
    sa.Column("external", Amount, nullable=False, default=0),
    sa.Column("granted", Amount, nullable=False, default=0),
    **TABLE_ARGS,
)

grants = sa.Table(
    "gs_grants",
    metadata,
    # NOTE: host_id has no foreign key: deleting a host deletes its grants
    # and claims in the same transaction (``hosts.delete``), and the reaper
    # removes any orphan a crash could leave, without the delete having to
    # cascade through a constraint on every backend.
    sa.Column("id", BigIntegerId, primary_key=True, autoincrement=True),
    sa.Column("host_id", sa.Integer, nullable=False),
    sa.Column("ticket", sa.BigInteger, nullable=False),
    sa.Column("instance_uuid", sa.String(36), nullable=True),
    sa.Column("request_id", sa.String(255), nullable=True),
    sa.Column("scheduler", sa.String(255), nullable=False),
    sa.Column("resources", AmountsText, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("created_at", PreciseDateTime, nullable=False),
    # NOTE: nullable only because SQLite cannot add a NOT NULL column
    # without a default; every grant is written with it.
    sa.Column("expires_at", PreciseDateTime, nullable=True),
    sa.Column("consumed_at", PreciseDateTime, nullable=True),
    sa.UniqueConstraint(
        "host_id", "ticket", name="uniq_gs_grants0host_id0ticket"
    ),
    sa.Index("ix_gs_grants_host_id_state", "host_id", "state"),
    sa.Index("ix_gs_grants_instance_uuid", "instance_uuid"),
    sa.Index("ix_gs_grants_request_id", "request_id"),
    sa.Index("ix_gs_grants_state_expires_at", "state", "expires_at"),
    # NOTE: the states the product writes (decision.GRANT_WON and
    # GRANT_CONSUMED); revision 0004 narrowed it to them.
    sa.CheckConstraint(
        "state IN ('won', 'consumed')",
        name="ck_gs_grants_state",
    ),
    **TABLE_ARGS,
)

claims = sa.Table(
    "gs_claims",
    metadata,
    sa.Column("id", BigIntegerId, primary_key=True, autoincrement=True),
    sa.Column("instance_uuid", sa.String(36), nullable=False),
    sa.Column("host_id", sa.Integer, nullable=False),
    sa.Column("resources", AmountsText, nullable=False),
    sa.Column("grant_ticket", sa.BigInteger, nullable=True),
    sa.Column("created_at", PreciseDateTime, nullable=False),
    sa.UniqueConstraint(
        "instance_uuid",
        "host_id",
        name="uniq_gs_claims0instance_uuid0host_id",
    ),
    sa.Index("ix_gs_claims_host_id", "host_id"),
    **TABLE_ARGS,
)
