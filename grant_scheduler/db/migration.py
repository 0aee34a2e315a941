"""Schema migrations: upgrade, current revision and the schema check.

The alembic scripts ship inside the package (``migrations/``) so that
``grant-scheduler-manage db sync`` works from a wheel; the top-level
``alembic/`` environment of a checkout runs the very same scripts.
"""

import os

from alembic.runtime import migration as alembic_migration

from alembic import command as alembic_command
from alembic import config as alembic_config
from alembic import script as alembic_script
from grant_scheduler import exception

MIGRATIONS_DIR = os.path.join(os.path.dirname(__file__), "migrations")
VERSIONS_DIR = os.path.join(MIGRATIONS_DIR, "versions")

URL_ENV = "GRANT_SCHEDULER_DATABASE_URL"
CONFIG_FILE_ENV = "GRANT_SCHEDULER_CONFIG_FILE"


def _config(database):
    config = alembic_config.Config()
    config.set_main_option("script_location", MIGRATIONS_DIR)
    config.attributes["database"] = database
    return config


def head_revision():
    """The newest revision this code knows."""
    script = alembic_script.ScriptDirectory(
        MIGRATIONS_DIR, version_locations=[VERSIONS_DIR]
    )
    return script.get_current_head()


def known_revisions():
    script = alembic_script.ScriptDirectory(
        MIGRATIONS_DIR, version_locations=[VERSIONS_DIR]
    )
    return {rev.revision for rev in script.walk_revisions()}


def current_revision(database):
    """The revision the database is at, or None when never migrated."""
    with database.connect() as conn:
        context = alembic_migration.MigrationContext.configure(conn)
        return context.get_current_revision()


def upgrade(database, revision="head"):
    """Upgrade the database to ``revision`` (default: the newest).

    :raises SchemaNewerThanCode: the database is at a revision this code
        does not know (a newer release migrated it); nothing is changed.
    """
    current = current_revision(database)
    if current is not None and current not in known_revisions():
        raise exception.SchemaNewerThanCode(
            url=database.safe_url, current=current, head=head_revision()
        )
    alembic_command.upgrade(_config(database), revision)


def check_schema(database):
    """Raise unless the database is at exactly this code's head revision.

    :raises SchemaNotMigrated: never migrated, or at an older revision.
    :raises SchemaNewerThanCode: at a revision this code does not know.
    """
    current = current_revision(database)
    head = head_revision()
    if current == head:
        return
    if current is not None and current not in known_revisions():
        raise exception.SchemaNewerThanCode(
            url=database.safe_url, current=current, head=head
        )
    raise exception.SchemaNotMigrated(
        url=database.safe_url,
        current=current or "none (no tables)",
        head=head,
    )


def database_for_alembic_cli():
    """The database a plain ``alembic`` command should migrate.

    ``GRANT_SCHEDULER_DATABASE_URL`` wins; else the config file named by
    ``GRANT_SCHEDULER_CONFIG_FILE`` is read for
    ``[grant_scheduler_database] connection``.
    """
    from grant_scheduler.db import api as db_api

    url = os.environ.get(URL_ENV)
    if url:
        return db_api.Database(url)
    config_file = os.environ.get(CONFIG_FILE_ENV)
    if config_file:
        from oslo_config import cfg

        from grant_scheduler import conf as gs_conf

        if not os.path.isfile(config_file):
            raise exception.DatabaseConfigError(
                url="(none)",
                reason="%s names %s, which is not a file"
                % (CONFIG_FILE_ENV, config_file),
            )
        conf = cfg.ConfigOpts()
        gs_conf.register_opts(conf)
        conf([], project="grant_scheduler", default_config_files=[config_file])
        return db_api.Database.from_conf(conf)
    raise exception.DatabaseConfigError(
        url="(none)",
        reason="neither %s nor %s is set in the environment"
        % (URL_ENV, CONFIG_FILE_ENV),
    )


def run_environment(context):
    """The body of both alembic ``env.py`` files."""
    from grant_scheduler.db import models

    database = context.config.attributes.get("database")
    if database is None:
        database = database_for_alembic_cli()
    if context.is_offline_mode():
        context.configure(
            url=database.url,
            target_metadata=models.Base.metadata,
            literal_binds=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    with database.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=models.Base.metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()
