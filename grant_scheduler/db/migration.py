"""Schema migrations: upgrade, current revision and the schema check.

The alembic scripts ship inside the package (``migrations/``) so that
``grant-scheduler-manage db sync`` works from a wheel; the top-level
``alembic/`` environment of a checkout runs the very same scripts.

Migrations are serialised by a lock in the database server (``GET_LOCK`` on
MySQL, a session advisory lock on PostgreSQL, a file lock beside the file
on SQLite), taken by ``upgrade`` and by a plain ``alembic`` command alike;
the revision is read again once the lock is held, so a deploy pipeline that
runs several ``db sync`` at once ends with one of them migrating and the
others finding the work done.
"""

import contextlib
import functools
import hashlib
import os
import time

import sqlalchemy as sa
from alembic.runtime import migration as alembic_migration
from oslo_db import exception as db_exc
from oslo_log import log as logging

from alembic import command as alembic_command
from alembic import config as alembic_config
from alembic import script as alembic_script
from alembic import util as alembic_util
from grant_scheduler import exception
from grant_scheduler import urls
from grant_scheduler.db import api as db_api

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None

LOG = logging.getLogger(__name__)

MIGRATIONS_DIR = os.path.join(os.path.dirname(__file__), "migrations")
VERSIONS_DIR = os.path.join(MIGRATIONS_DIR, "versions")

URL_ENV = "GRANT_SCHEDULER_DATABASE_URL"
CONFIG_FILE_ENV = "GRANT_SCHEDULER_CONFIG_FILE"

# Seconds a migration waits for another one to finish before giving up.
LOCK_TIMEOUT = 600
# NOTE: a fixed key in the "gs" range: PostgreSQL advisory locks are per
# database, so one key serves every grant_scheduler database.
_POSTGRESQL_LOCK_KEY = 0x67735F6D6967
_LOCK_POLL_SECONDS = 0.1
TABLE_PREFIX = "gs_"


def _translated(fn):
    """Raise the project's exception for a database error (as the API
    edge does): these functions are an edge too, for the CLI and alembic."""

    @functools.wraps(fn)
    def call(database, *args, **kwargs):
        try:
            return fn(database, *args, **kwargs)
        except Exception as exc:
            translated = db_api.translate(database, exc)
            if translated is None:
                raise
            raise translated from exc

    return call


def _script():
    return alembic_script.ScriptDirectory(
        MIGRATIONS_DIR, version_locations=[VERSIONS_DIR]
    )


def _config(database):
    config = alembic_config.Config()
    config.set_main_option("script_location", MIGRATIONS_DIR)
    config.attributes["database"] = database
    return config


def _safe_url(database):
    return urls.mask(database.safe_url)


def head_revision():
    """The newest revision this code knows."""
    return _script().get_current_head()


def revisions_oldest_first():
    return [rev.revision for rev in reversed(list(_script().walk_revisions()))]


def known_revisions():
    return set(revisions_oldest_first())


def resolve_revision(revision):
    """The revision ``db sync`` was asked for, as a full revision id.

    Takes ``head`` (also ``heads`` and no value), a revision id of this
    code, or an unambiguous start of one (``0001``).  Relative revisions
    (``-1``, ``head-1``, ``base``) are refused: migrations are upgrade-only.

    :raises InvalidRevision: naming the revisions there are.
    """
    if revision in (None, "", "head", "heads"):
        return "head"
    known = revisions_oldest_first()
    if revision in known:
        return revision
    matches = [rev for rev in known if rev.startswith(revision)]
    if len(matches) == 1:
        return matches[0]
    raise exception.InvalidRevision(revision=revision, known=", ".join(known))


@_translated
def current_revision(database):
    """The revision the database is at, or None when never migrated."""
    with database.connect() as conn:
        context = alembic_migration.MigrationContext.configure(conn)
        return context.get_current_revision()


def _own_tables(database):
    with database.connect() as conn:
        names = sa.inspect(conn).get_table_names()
    return sorted(name for name in names if name.startswith(TABLE_PREFIX))


def _check_upgradable(database, current):
    """Refuse a database this code cannot upgrade from ``current``."""
    if current is not None and current not in known_revisions():
        raise exception.SchemaNewerThanCode(
            url=_safe_url(database), current=current, head=head_revision()
        )
    if current is None:
        tables = _own_tables(database)
        if tables:
            raise exception.SchemaInterrupted(
                url=_safe_url(database), tables=", ".join(tables)
            )


def _reached(database, target):
    """True when the database is at ``target`` or past it."""
    current = current_revision(database)
    if current is None or current not in known_revisions():
        return False
    if target == "head":
        return current == head_revision()
    ancestors = {
        rev.revision for rev in _script().iterate_revisions(current, "base")
    }
    return target in ancestors


# -- the migration lock -----------------------------------------------------


@contextlib.contextmanager
def _sqlite_lock(database, timeout):
    path = database.url.database
    if not path or path == ":memory:" or fcntl is None:
        yield True
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise exception.DatabaseConfigError(
            url=_safe_url(database),
            reason="the directory %s of the SQLite file does not exist"
            % directory,
        )
    lock_path = os.path.abspath(path) + ".migration-lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise exception.DatabaseConfigError(
            url=_safe_url(database),
            reason="cannot create the migration lock file %s (%s)"
            % (lock_path, exc.strerror or exc),
        )
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise exception.MigrationLocked(
                        url=_safe_url(database), seconds=timeout
                    )
                time.sleep(_LOCK_POLL_SECONDS)
        yield True
    finally:
        os.close(fd)  # releases the lock


def _mysql_lock_name(database):
    name = "grant_scheduler.migrate.%s" % (database.url.database or "")
    if len(name) > 64:  # NOTE: MySQL's limit on lock names
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()
        name = "grant_scheduler.migrate.%s" % digest[:32]
    return name


def _server_lock_acquired(database, conn, timeout):
    """Take the server's lock on ``conn``; False when the server lacks it."""
    try:
        if database.dialect_name == "mysql":
            got = conn.execute(
                sa.text("SELECT GET_LOCK(:name, :timeout)"),
                {"name": _mysql_lock_name(database), "timeout": timeout},
            ).scalar()
            if got == 1:
                return True
            if got == 0:
                raise exception.MigrationLocked(
                    url=_safe_url(database), seconds=timeout
                )
            return False
        deadline = time.monotonic() + timeout
        while True:
            got = conn.execute(
                sa.text("SELECT pg_try_advisory_lock(:key)"),
                {"key": _POSTGRESQL_LOCK_KEY},
            ).scalar()
            if got:
                return True
            if time.monotonic() >= deadline:
                raise exception.MigrationLocked(
                    url=_safe_url(database), seconds=timeout
                )
            time.sleep(_LOCK_POLL_SECONDS)
    except (db_exc.DBError, sa.exc.DBAPIError) as exc:
        # NOTE: Galera before MariaDB 10.11.5 refuses GET_LOCK ("doesn't
        # yet support 'GET_LOCK in cluster'"), and a Galera node's lock is
        # its own anyway: go on unlocked, and take a failure of a migration
        # that another process finished as success (see upgrade).
        LOG.warning(
            "No migration lock on %s (%s); concurrent migrations are not "
            "serialised.",
            _safe_url(database),
            type(getattr(exc, "inner_exception", None) or exc).__name__,
        )
        return False


def _server_lock_release(database, conn):
    if database.dialect_name == "mysql":
        conn.execute(
            sa.text("SELECT RELEASE_LOCK(:name)"),
            {"name": _mysql_lock_name(database)},
        )
    else:
        conn.execute(
            sa.text("SELECT pg_advisory_unlock(:key)"),
            {"key": _POSTGRESQL_LOCK_KEY},
        )


@contextlib.contextmanager
def migration_lock(database, timeout=None):
    """Hold the database's migration lock; yield whether it is held.

    Yields False where the server offers no such lock (a Galera node of
    an older MariaDB); the lock goes when the block ends or the process
    dies.

    :raises MigrationLocked: another migration held it for ``timeout``
        seconds (default ``LOCK_TIMEOUT``).
    """
    timeout = LOCK_TIMEOUT if timeout is None else timeout
    dialect = database.dialect_name
    if dialect == "sqlite":
        with _sqlite_lock(database, timeout) as held:
            yield held
        return
    if dialect not in ("mysql", "postgresql"):
        yield False
        return
    with database.connect() as conn:
        # NOTE: a session lock, on a connection of its own that runs no
        # transaction, so it holds no metadata lock the migration's DDL
        # would wait for.
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        held = _server_lock_acquired(database, conn, timeout)
        try:
            yield held
        finally:
            if held:
                with contextlib.suppress(Exception):
                    _server_lock_release(database, conn)


# -- upgrade and check ------------------------------------------------------


@_translated
def upgrade(database, revision="head"):
    """Upgrade the database to ``revision`` (default: the newest).

    Safe to run from several processes at once: they take turns under the
    migration lock, and one that finds the work done does nothing.

    :raises InvalidRevision: ``revision`` is not one of this code's.
    :raises SchemaNewerThanCode: the database is at a revision this code
        does not know (a newer release migrated it); nothing is changed.
    :raises SchemaInterrupted: grant_scheduler tables exist but no
        revision is recorded (an interrupted first migration).
    """
    target = resolve_revision(revision)
    with migration_lock(database) as held:
        _check_upgradable(database, current_revision(database))
        try:
            alembic_command.upgrade(_config(database), target)
        except Exception:
            if not held and _reached(database, target):
                return  # another process, unserialised, got there first
            raise


@_translated
def check_schema(database):
    """Raise unless the database is at exactly this code's head revision.

    :raises SchemaNotMigrated: never migrated, or at an older revision.
    :raises SchemaNewerThanCode: at a revision this code does not know.
    :raises SchemaInterrupted: tables without a recorded revision.
    """
    current = current_revision(database)
    head = head_revision()
    if current == head:
        return
    _check_upgradable(database, current)
    raise exception.SchemaNotMigrated(
        url=_safe_url(database),
        current=current or "none (no tables)",
        head=head,
    )


# -- plain alembic ------------------------------------------------------------


def database_for_alembic_cli():
    """The database a plain ``alembic`` command should migrate.

    ``GRANT_SCHEDULER_DATABASE_URL`` wins; else the config file named by
    ``GRANT_SCHEDULER_CONFIG_FILE`` is read for
    ``[grant_scheduler_database] connection``, which it must set.
    """
    from grant_scheduler.conf import database as db_conf

    url = os.environ.get(URL_ENV)
    if url:
        db_conf.check_url(url)
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
        gs_conf.parse(
            conf,
            [],
            project="grant_scheduler",
            default_config_files=[config_file],
        )
        gs_conf.check_values(conf)
        db_conf.require_connection(conf)
        return db_api.Database.from_conf(conf)
    raise exception.DatabaseConfigError(
        url="(none)",
        reason="neither %s nor %s is set in the environment"
        % (URL_ENV, CONFIG_FILE_ENV),
    )


def error_line(exc):
    """One line for an error a person can act on (no traceback)."""
    if isinstance(exc, db_exc.DBError):
        inner = exc.inner_exception or exc
        text = str(getattr(inner, "orig", None) or inner)
        return "database error: %s" % (text.strip().splitlines() or ["?"])[0]
    return str(exc)


def _alembic_command_name(context):
    options = getattr(context.config, "cmd_opts", None)
    command = getattr(options, "cmd", None)
    if isinstance(command, tuple):
        command = command[0]
    return getattr(command, "__name__", None)


def _run_online(context, database):
    from grant_scheduler.db import models

    with database.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=models.metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()


def _run_offline(context, database):
    from grant_scheduler.db import models

    context.configure(
        url=database.url,
        target_metadata=models.metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run_from_alembic_cli(context, database):
    if context.is_offline_mode():
        _run_offline(context, database)
        return
    with migration_lock(database) as held:
        if _alembic_command_name(context) != "upgrade":
            _run_online(context, database)
            return
        _check_upgradable(database, current_revision(database))
        target = context.get_revision_argument()
        if not isinstance(target, str):
            target = "head"
        try:
            _run_online(context, database)
        except Exception:
            if not held and _reached(database, target):
                return
            raise


def run_environment(context):
    """The body of both alembic ``env.py`` files."""
    database = context.config.attributes.get("database")
    if database is not None:
        # NOTE: from upgrade(), which holds the migration lock, or another
        # caller that passed its own Database.
        if context.is_offline_mode():
            _run_offline(context, database)
        else:
            _run_online(context, database)
        return
    try:
        database = database_for_alembic_cli()
        _run_from_alembic_cli(context, database)
    except Exception as exc:
        translated = exc
        if database is not None:
            translated = db_api.translate(database, exc) or exc
        if not isinstance(
            translated, (exception.GrantSchedulerError, db_exc.DBError)
        ):
            raise
        # NOTE: alembic prints a CommandError as one "FAILED:" line and
        # exits 1; anything else would be a traceback.
        raise alembic_util.CommandError(error_line(translated)) from None
