"""A grant's state is one the product writes: won or consumed.

The check on ``gs_grants.state`` admitted two states no code of the
product writes: ``lost`` (gone since revision 0003) and ``pending``, which
only the benchmark's unsafe baseline still wrote, for grants it had not
yet counted in their node's ``granted_*``.  Rows in either state hold
nothing (a lost grant was never live; an unverified one was never counted
in its node's row), so they go, and the check admits ``won`` and
``consumed`` only.

On SQLite the table is copied (it cannot alter a constraint) with the
check named here: alembic before 1.7 leaves a reflected CHECK out of the
copy, later releases replace the one of the same name.

Revision ID: 0004_grant_states_written
Revises: 0003_grants_in_write
Create Date: 2027-01-18
"""

import sqlalchemy as sa

from alembic import op

revision = "0004_grant_states_written"
down_revision = "0003_grants_in_write"
branch_labels = None
depends_on = None

CHECK = "ck_gs_grants_state"
WRITTEN = ("won", "consumed")


def upgrade():
    grants = sa.table("gs_grants", sa.column("state"))
    op.execute(grants.delete().where(~grants.c.state.in_(WRITTEN)))
    condition = "state IN (%s)" % ", ".join("'%s'" % s for s in WRITTEN)
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table("gs_grants", recreate="always") as batch:
            batch.create_check_constraint(CHECK, condition)
        return
    op.drop_constraint(CHECK, "gs_grants", type_="check")
    op.create_check_constraint(CHECK, "gs_grants", condition)
