"""Index gs_hosts.updated_at, for schedulers that read only what changed.

Every write that changes a host row's capacity or usage stamps
``updated_at``; a scheduler's view then refreshes from the rows stamped
since its last read instead of reading every host.  Rows written before
this revision may have no stamp yet: they get their creation time.

Revision ID: 0002_hosts_updated_at_index
Revises: 0001_initial_schema
Create Date: 2026-12-02
"""

import sqlalchemy as sa

from alembic import op

revision = "0002_hosts_updated_at_index"
down_revision = "0001_initial_schema"
branch_labels = None
depends_on = None


def upgrade():
    hosts = sa.table(
        "gs_hosts", sa.column("updated_at"), sa.column("created_at")
    )
    op.execute(
        hosts.update()
        .where(hosts.c.updated_at.is_(None))
        .values(updated_at=hosts.c.created_at)
    )
    op.create_index("ix_gs_hosts_updated_at", "gs_hosts", ["updated_at"])
