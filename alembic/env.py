"""Alembic environment of a checkout: runs the packaged revisions."""

from alembic import context
from grant_scheduler.db import migration

migration.run_environment(context)
