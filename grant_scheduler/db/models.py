"""The tables of grant_scheduler.

Every table is prefixed ``gs_`` so the schema can live inside an existing
Nova database without clashing, and every index and constraint is named so
that migrations can refer to it on every backend.

``gs_hosts``
    One row per compute node: capacity, reserved amounts, allocation ratios
    and usage, plus the per-host ordering state of the protocol: ``ticket``,
    the last ordering ticket issued for a grant or claim on this host, and
    ``last_grant_ticket``/``last_grant_at``, the mark moved forward when the
    compute host consumes a grant.
``gs_grants``
    One row per promise "scheduler S granted resources R on host H to
    instance I".  ``ticket`` orders grants on a host consistently with commit
    order (DESIGN H1); ``created_at`` is set by the database, for people and
    for expiry only; ``state`` records the verdict.
``gs_claims``
    One row per instance whose resources are counted in a host's usage: what
    makes claim and release idempotent (DESIGN H12) and what the invariant
    checker compares usage with (I4).
"""

import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy.dialects import mysql

# NOTE: BIGINT autoincrement does not work on SQLite, which only assigns
# rowids to INTEGER PRIMARY KEY columns.
BigIntegerId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# NOTE: MySQL's DATETIME drops fractional seconds unless asked for them.
PreciseDateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")

TABLE_ARGS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}

GRANT_PENDING = "pending"
GRANT_WON = "won"
GRANT_LOST = "lost"
GRANT_CONSUMED = "consumed"
GRANT_STATES = (GRANT_PENDING, GRANT_WON, GRANT_LOST, GRANT_CONSUMED)


class Base(orm.DeclarativeBase):
    metadata = sa.MetaData()


class Host(Base):
    __tablename__ = "gs_hosts"
    __table_args__ = (
        sa.UniqueConstraint("host", "node", name="uniq_gs_hosts0host0node"),
        sa.Index("ix_gs_hosts_updated_at", "updated_at"),
        TABLE_ARGS,
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    host = sa.Column(sa.String(255), nullable=False)
    node = sa.Column(sa.String(255), nullable=False)
    node_uuid = sa.Column(sa.String(36), nullable=True)

    vcpus = sa.Column(sa.Integer, nullable=False, default=0)
    memory_mb = sa.Column(sa.Integer, nullable=False, default=0)
    disk_gb = sa.Column(sa.Integer, nullable=False, default=0)
    reserved_vcpus = sa.Column(sa.Integer, nullable=False, default=0)
    reserved_memory_mb = sa.Column(sa.Integer, nullable=False, default=0)
    reserved_disk_gb = sa.Column(sa.Integer, nullable=False, default=0)
    cpu_allocation_ratio = sa.Column(sa.Float, nullable=False, default=1.0)
    ram_allocation_ratio = sa.Column(sa.Float, nullable=False, default=1.0)
    disk_allocation_ratio = sa.Column(sa.Float, nullable=False, default=1.0)
    vcpus_used = sa.Column(sa.Integer, nullable=False, default=0)
    memory_mb_used = sa.Column(sa.Integer, nullable=False, default=0)
    disk_gb_used = sa.Column(sa.Integer, nullable=False, default=0)

    ticket = sa.Column(sa.BigInteger, nullable=False, default=0)
    last_grant_ticket = sa.Column(sa.BigInteger, nullable=False, default=0)
    last_grant_at = sa.Column(PreciseDateTime, nullable=True)
    generation = sa.Column(sa.BigInteger, nullable=False, default=0)

    created_at = sa.Column(PreciseDateTime, nullable=False)
    updated_at = sa.Column(PreciseDateTime, nullable=True)


class Grant(Base):
    __tablename__ = "gs_grants"
    __table_args__ = (
        sa.UniqueConstraint(
            "host_id", "ticket", name="uniq_gs_grants0host_id0ticket"
        ),
        sa.Index("ix_gs_grants_host_id_state", "host_id", "state"),
        sa.Index("ix_gs_grants_instance_uuid", "instance_uuid"),
        sa.Index("ix_gs_grants_request_id", "request_id"),
        sa.Index("ix_gs_grants_state_created_at", "state", "created_at"),
        sa.CheckConstraint(
            "state IN ('pending', 'won', 'lost', 'consumed')",
            name="ck_gs_grants_state",
        ),
        TABLE_ARGS,
    )

    # NOTE: host_id has no foreign key on purpose: a host row may be deleted
    # while grants for it remain, and the reaper removes those orphans
    # instead of the delete having to lock and cascade over grant rows.
    id = sa.Column(BigIntegerId, primary_key=True, autoincrement=True)
    host_id = sa.Column(sa.Integer, nullable=False)
    ticket = sa.Column(sa.BigInteger, nullable=False)
    instance_uuid = sa.Column(sa.String(36), nullable=True)
    request_id = sa.Column(sa.String(255), nullable=True)
    scheduler = sa.Column(sa.String(255), nullable=False)
    vcpus = sa.Column(sa.Integer, nullable=False)
    memory_mb = sa.Column(sa.Integer, nullable=False)
    disk_gb = sa.Column(sa.Integer, nullable=False)
    state = sa.Column(sa.String(16), nullable=False)
    created_at = sa.Column(PreciseDateTime, nullable=False)
    consumed_at = sa.Column(PreciseDateTime, nullable=True)


class Claim(Base):
    __tablename__ = "gs_claims"
    __table_args__ = (
        sa.UniqueConstraint(
            "instance_uuid",
            "host_id",
            name="uniq_gs_claims0instance_uuid0host_id",
        ),
        sa.Index("ix_gs_claims_host_id", "host_id"),
        TABLE_ARGS,
    )

    id = sa.Column(BigIntegerId, primary_key=True, autoincrement=True)
    instance_uuid = sa.Column(sa.String(36), nullable=False)
    host_id = sa.Column(sa.Integer, nullable=False)
    vcpus = sa.Column(sa.Integer, nullable=False)
    memory_mb = sa.Column(sa.Integer, nullable=False)
    disk_gb = sa.Column(sa.Integer, nullable=False)
    grant_ticket = sa.Column(sa.BigInteger, nullable=True)
    created_at = sa.Column(PreciseDateTime, nullable=False)


hosts = Host.__table__
grants = Grant.__table__
claims = Claim.__table__
