"""Initial schema: gs_hosts, gs_grants and gs_claims.

Revision ID: 0001_initial_schema
Revises:
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from alembic import op

revision = "0001_initial_schema"
down_revision = None
branch_labels = None
depends_on = None

BigIntegerId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
PreciseDateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")
TABLE_ARGS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def _resource_columns(*names):
    return [sa.Column(name, sa.Integer, nullable=False) for name in names]


def upgrade():
    op.create_table(
        "gs_hosts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("node_uuid", sa.String(36), nullable=True),
        *_resource_columns(
            "vcpus",
            "memory_mb",
            "disk_gb",
            "reserved_vcpus",
            "reserved_memory_mb",
            "reserved_disk_gb",
        ),
        sa.Column("cpu_allocation_ratio", sa.Float, nullable=False),
        sa.Column("ram_allocation_ratio", sa.Float, nullable=False),
        sa.Column("disk_allocation_ratio", sa.Float, nullable=False),
        *_resource_columns("vcpus_used", "memory_mb_used", "disk_gb_used"),
        sa.Column("ticket", sa.BigInteger, nullable=False),
        sa.Column("last_grant_ticket", sa.BigInteger, nullable=False),
        sa.Column("last_grant_at", PreciseDateTime, nullable=True),
        sa.Column("generation", sa.BigInteger, nullable=False),
        sa.Column("created_at", PreciseDateTime, nullable=False),
        sa.Column("updated_at", PreciseDateTime, nullable=True),
        sa.UniqueConstraint("host", "node", name="uniq_gs_hosts0host0node"),
        **TABLE_ARGS,
    )
    op.create_table(
        "gs_grants",
        sa.Column("id", BigIntegerId, primary_key=True, autoincrement=True),
        sa.Column("host_id", sa.Integer, nullable=False),
        sa.Column("ticket", sa.BigInteger, nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=True),
        sa.Column("request_id", sa.String(255), nullable=True),
        sa.Column("scheduler", sa.String(255), nullable=False),
        *_resource_columns("vcpus", "memory_mb", "disk_gb"),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", PreciseDateTime, nullable=False),
        sa.Column("consumed_at", PreciseDateTime, nullable=True),
        sa.UniqueConstraint(
            "host_id", "ticket", name="uniq_gs_grants0host_id0ticket"
        ),
        sa.CheckConstraint(
            "state IN ('pending', 'won', 'lost', 'consumed')",
            name="ck_gs_grants_state",
        ),
        **TABLE_ARGS,
    )
    op.create_index(
        "ix_gs_grants_host_id_state", "gs_grants", ["host_id", "state"]
    )
    op.create_index(
        "ix_gs_grants_instance_uuid", "gs_grants", ["instance_uuid"]
    )
    op.create_index("ix_gs_grants_request_id", "gs_grants", ["request_id"])
    op.create_index(
        "ix_gs_grants_state_created_at", "gs_grants", ["state", "created_at"]
    )
    op.create_table(
        "gs_claims",
        sa.Column("id", BigIntegerId, primary_key=True, autoincrement=True),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("host_id", sa.Integer, nullable=False),
        *_resource_columns("vcpus", "memory_mb", "disk_gb"),
        sa.Column("grant_ticket", sa.BigInteger, nullable=True),
        sa.Column("created_at", PreciseDateTime, nullable=False),
        sa.UniqueConstraint(
            "instance_uuid",
            "host_id",
            name="uniq_gs_claims0instance_uuid0host_id",
        ),
        **TABLE_ARGS,
    )
    op.create_index("ix_gs_claims_host_id", "gs_claims", ["host_id"])
