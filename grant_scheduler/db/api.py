"""The single entry point to grant_scheduler's database.

A ``Database`` owns a *private* oslo.db enginefacade: never the global one,
which inside Nova is bound to Nova's own ``[database]`` (DESIGN H10).  The
engine starts lazily, on the first transaction, so a driver built before
nova-scheduler forks its workers opens no connection in the parent (H9).

Every transaction is short and explicit: ``with db.writer() as conn`` or
``with db.reader() as conn`` yields a SQLAlchemy Core connection inside one
transaction that commits when the block ends.  Functions that write are
wrapped in ``retry``, above the transaction, so that a deadlock, a Galera
certification failure or a dropped connection is retried in a fresh
transaction (H8).
"""

import contextlib
import contextvars
import functools

import sqlalchemy as sa
from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import enginefacade
from oslo_log import log as logging
from sqlalchemy.ext import compiler as sa_compiler

from grant_scheduler import exception
from grant_scheduler.conf import database as db_conf

LOG = logging.getLogger(__name__)

# NOTE: SQLite needs a longer wait for its single writer lock than pysqlite's
# default of five seconds once several scheduler processes share one file.
SQLITE_BUSY_TIMEOUT_MS = 60000

_SQLITE_WRITER = contextvars.ContextVar("gs_sqlite_writer", default=False)


@enginefacade.transaction_context_provider
class _Context:
    """A throw-away context: each transaction gets its own."""


class utcnow(sa.sql.functions.FunctionElement):
    """The database server's current UTC time, with sub-second precision.

    Used for the grant's ``created_at`` and for expiry, never to decide
    which grant wins (DESIGN H1, H8).
    """

    type = sa.DateTime()
    inherit_cache = True


@sa_compiler.compiles(utcnow)
def _utcnow_default(element, compiler, **kw):
    return "CURRENT_TIMESTAMP"


@sa_compiler.compiles(utcnow, "mysql")
def _utcnow_mysql(element, compiler, **kw):
    return "UTC_TIMESTAMP(6)"


@sa_compiler.compiles(utcnow, "postgresql")
def _utcnow_postgresql(element, compiler, **kw):
    return "(CLOCK_TIMESTAMP() AT TIME ZONE 'UTC')"


@sa_compiler.compiles(utcnow, "sqlite")
def _utcnow_sqlite(element, compiler, **kw):
    # NOTE: SQLite's clock has millisecond precision; pad to the six digits
    # SQLAlchemy's SQLite DATETIME expects so comparisons stay textual.
    return "(STRFTIME('%Y-%m-%d %H:%M:%f', 'now') || '000')"


def _is_transient(exc):
    """Errors worth a fresh transaction besides deadlocks and disconnects."""
    if isinstance(exc, exception.DatabaseUnavailable):
        # Lost after this process had connected (a killed connection, a
        # server restart, a Galera node leaving): worth retrying.  A
        # database unreachable from the start fails at once instead.
        return exc.transient
    if isinstance(exc, db_exc.DBConsistencyError):
        # MariaDB with innodb_snapshot_isolation: "Record has changed since
        # last read", the same conflict a deadlock reports.
        return True
    if isinstance(exc, db_exc.DBError) and exc.inner_exception is not None:
        exc = exc.inner_exception
    return "database is locked" in str(exc)


def retry(fn):
    """Retry ``fn`` in a fresh transaction on deadlock or disconnect.

    Put it above the function that opens the transaction, never inside one.
    """
    return oslo_db_api.wrap_db_retry(
        max_retries=30,
        retry_interval=0.005,
        inc_retry_interval=True,
        max_retry_interval=0.5,
        retry_on_deadlock=True,
        retry_on_disconnect=True,
        exception_checker=_is_transient,
        jitter=True,
    )(fn)


def _prepare_sqlite(engine):
    """Give SQLite the transaction behaviour the protocol relies on.

    Writer transactions begin IMMEDIATE, taking the write lock before their
    first read, so a read-then-write transaction cannot interleave with
    another writer; readers begin DEFERRED and, in WAL mode, do not block
    writers.
    """

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection, connection_record):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = %d" % SQLITE_BUSY_TIMEOUT_MS)
        if engine.url.database not in (None, "", ":memory:"):
            cursor.execute("PRAGMA journal_mode = WAL")
        cursor.close()

    # NOTE: replaces oslo.db's own "begin" listener, which always emits a
    # deferred BEGIN; the marker it keeps in conn.info is kept the same so
    # its commit and rollback listeners still clear it.
    for listener in list(engine.dispatch.begin):
        if getattr(listener, "__name__", "") == "_sqlite_emit_begin":
            sa.event.remove(engine, "begin", listener)

    @sa.event.listens_for(engine, "begin")
    def _begin(conn):
        if "in_transaction" not in conn.info:
            immediate = _SQLITE_WRITER.get()
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
            conn.info["in_transaction"] = True


def _on_engine_create(engine):
    if engine.dialect.name == "sqlite":
        _prepare_sqlite(engine)


class Database:
    """grant_scheduler's database: a private enginefacade and its engine."""

    def __init__(self, connection, **engine_options):
        """Describe a database; nothing connects until the first use.

        :param connection: a SQLAlchemy URL.
        :param engine_options: any further oslo.db enginefacade option
            (``max_pool_size``, ``mysql_wsrep_sync_wait``, ...).
        :raises DatabaseConfigError: when the URL is missing or malformed.
        """
        if not connection:
            raise exception.DatabaseConfigError(
                url="(none)", reason="no database URL is configured"
            )
        try:
            self.url = sa.engine.make_url(connection)
        except sa.exc.ArgumentError as exc:
            raise exception.DatabaseConfigError(
                url=exception.mask_url(connection), reason=str(exc)
            )
        self.safe_url = self.url.render_as_string(hide_password=True)
        self._facade = enginefacade.transaction_context()
        self._facade.configure(
            connection=connection,
            **{**db_conf.CONNECT_RETRIES, **engine_options},
        )
        self._facade.append_on_engine_create(_on_engine_create)
        self._facade.append_on_engine_create(self._watch_connects)
        self.connected_once = False
        self._schema_unchecked = False

    def require_current_schema(self):
        """Check the schema revision before the first transaction.

        The first ``reader()`` or ``writer()`` then raises
        ``SchemaNotMigrated`` or ``SchemaNewerThanCode`` instead of failing
        later on a missing table or column.
        """
        self._schema_unchecked = True

    def _check_schema_once(self):
        if self._schema_unchecked:
            from grant_scheduler.db import migration  # noqa: PLC0415 - cycle

            migration.check_schema(self)
            self._schema_unchecked = False

    def _watch_connects(self, engine):
        # NOTE: oslo.db has already tested a connection when it hands over a
        # server engine; SQLite's first connection comes later.
        if engine.dialect.name != "sqlite":
            self.connected_once = True
            return

        def connected(dbapi_connection, record):
            self.connected_once = True

        sa.event.listen(engine, "connect", connected, once=True)

    @classmethod
    def from_conf(cls, conf):
        """Build from ``[grant_scheduler_database]`` of ``conf``."""
        group = conf.grant_scheduler_database
        options = {opt: group[opt] for opt in group if opt != "connection"}
        options = {k: v for k, v in options.items() if v is not None}
        return cls(group.connection, **options)

    @property
    def dialect_name(self):
        return self.url.get_backend_name()

    def _unavailable(self, exc):
        unavailable = exception.DatabaseUnavailable(
            url=self.safe_url, reason=_reason(exc)
        )
        unavailable.transient = self.connected_once
        return unavailable

    @contextlib.contextmanager
    def _translate_errors(self):
        try:
            yield
        except exception.GrantSchedulerError:
            raise  # already translated (a nested call)
        except db_exc.DBConnectionError as exc:
            raise self._unavailable(exc) from exc
        except sa.exc.OperationalError as exc:
            # NOTE: a failure to open a connection (no statement running)
            # whose wording oslo.db's filters do not know, such as libpq's
            # 'connection to server at ... failed: Connection refused'.
            if exc.statement is not None:
                raise
            raise self._unavailable(exc) from exc
        except db_exc.DBNonExistentDatabase as exc:
            raise exception.DatabaseUnavailable(
                url=self.safe_url, reason="the database does not exist"
            ) from exc
        except (ImportError, sa.exc.NoSuchModuleError) as exc:
            raise exception.DatabaseConfigError(
                url=self.safe_url,
                reason="its driver is not installed (%s)" % exc,
            )
        except Exception as exc:
            if self._facade._factory._started:
                raise
            # NOTE: the engine failed while starting, e.g. its first
            # connection was cut during the driver's handshake queries
            # (seen as NotImplementedError from PyMySQL).  The next call
            # starts it again.
            raise exception.DatabaseUnavailable(
                url=self.safe_url,
                reason="the connection failed while starting (%s)"
                % (_reason(exc),),
            ) from exc

    @contextlib.contextmanager
    def connect(self):
        """A plain connection outside the enginefacade (for migrations)."""
        with self._translate_errors():
            with self.get_engine().connect() as conn:
                yield conn

    @contextlib.contextmanager
    def writer(self):
        """One read-write transaction on the primary database."""
        self._check_schema_once()
        token = _SQLITE_WRITER.set(True)
        try:
            with self._translate_errors():
                with self._facade.writer.connection.using(_Context()) as conn:
                    yield conn
        finally:
            _SQLITE_WRITER.reset(token)

    @contextlib.contextmanager
    def reader(self):
        """One read-only transaction that sees every committed write.

        It is always a new transaction, so under REPEATABLE READ its snapshot
        starts after whatever the caller committed before (DESIGN H2).
        """
        self._check_schema_once()
        with self._translate_errors():
            with self._facade.reader.connection.using(_Context()) as conn:
                yield conn

    def get_engine(self):
        """The writer engine, started on first call."""
        with self._translate_errors():
            return self._facade.writer.get_engine()

    def dispose(self):
        """Close pooled connections (after a fork, or when done)."""
        if self._facade._factory._started:
            self._facade.dispose_pool()


def _reason(exc):
    inner = getattr(exc, "inner_exception", None) or exc
    orig = getattr(inner, "orig", None) or inner
    text = str(orig).strip().splitlines()[0] if str(orig).strip() else ""
    return text or type(orig).__name__


def transactional(mode):
    """Decorate a method of an object with a ``db`` attribute.

    The method receives a Core connection as its first argument after
    ``self``; it is retried in a fresh transaction (see ``retry``).
    """

    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            opener = self.db.writer if mode == "writer" else self.db.reader
            with opener() as conn:
                return fn(self, conn, *args, **kwargs)

        # NOTE: readers are retried too: after a lost connection a read is
        # simply run again; a writer's retry is a fresh transaction.
        return retry(wrapper)

    return decorator
