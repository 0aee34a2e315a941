"""Alembic environment of the migrations shipped inside the package."""

from alembic import context
from grant_scheduler.db import migration

migration.run_environment(context)
