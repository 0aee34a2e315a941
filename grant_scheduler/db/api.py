"""The single entry point to grant_scheduler's database.

A ``Database`` owns a *private* oslo.db enginefacade: never the global one,
which inside Nova is bound to Nova's own ``[database]`` (H10).  The
engine starts lazily, on the first transaction, so a driver built before
nova-scheduler forks its workers opens no connection in the parent (H9).

Transactions are short and explicit: ``with db.writer() as conn`` and
``with db.reader() as conn`` yield a SQLAlchemy Core connection inside one
transaction; a writer commits when the block ends, a reader is rolled back
(it wrote nothing).

Each function of SQL that is a transaction of its own says so where it is
defined, as placement's ``@wrap_db_retry`` over ``@...writer`` does::

    @db_api.writer
    def take(db, conn, host_ids, ask, taken, before_commit=None):
        ...

    grants.take(database, host_ids, ask, taken)   # one retried transaction

``writer`` and ``reader`` take the ``Database`` as the function's first
argument, open one transaction on it and pass its connection second, and
retry the whole with ``oslo_db.api.wrap_db_retry``, above the transaction,
so a deadlock, a Galera certification failure, a lost connection or a lost
conditional update (``RetryRequest``) is tried again in a fresh transaction
(H8).  The retry policy is the ``Database``'s, from
``[grant_scheduler_database] db_max_retries`` and friends.  The engine is
started *outside* the retries: a database that is unreachable from the
start fails at once instead of after every retry.  A function that runs
inside another one's transaction is a plain ``(conn, ...)`` function.

One ``Database`` (one enginefacade, one pool) serves a process per URL and
options: ``Database.shared`` and ``Database.shared_from_conf`` hand out the
same object to every caller of this process, and a new one in a child
after a fork.

Errors leave this module as oslo.db raised them; ``grant_scheduler.api``
translates them once, at the edge, into the project's exceptions.

Per backend, what every connection is given:

MySQL and MariaDB
    ``READ COMMITTED``: each statement sees what committed before it, as on
    PostgreSQL, so no snapshot taken early in a transaction can hide a
    grant (H2) and InnoDB takes no gap locks for plain searches.  The
    ``utf8mb4`` character set, as the tables use.  ``wsrep_sync_wait`` when
    ``mysql_wsrep_sync_wait`` is set, also on oslo.db releases without that
    option; and a warning at start on a Galera node running without it.
SQLite
    A long busy timeout, WAL, and writers that ``BEGIN IMMEDIATE``.
"""

import contextlib
import contextvars
import functools
import inspect
import os
import threading
import weakref

import sqlalchemy as sa
from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_db import options as oslo_db_options
from oslo_db.sqlalchemy import enginefacade
from oslo_log import log as logging
from sqlalchemy.ext import compiler as sa_compiler

from grant_scheduler import exception
from grant_scheduler import urls
from grant_scheduler.conf import database as db_conf
from grant_scheduler.db import rows
from grant_scheduler.db import sa_compat

LOG = logging.getLogger(__name__)

# NOTE: SQLite needs a longer wait for its single writer lock than pysqlite's
# default of five seconds once several scheduler processes share one file.
SQLITE_BUSY_TIMEOUT_MS = 60000

_SQLITE_WRITER = contextvars.ContextVar("gs_sqlite_writer", default=False)

_OSLO_DB_OPTIONS = {opt.dest for opt in oslo_db_options.database_opts}


@enginefacade.transaction_context_provider
class _Context:
    """A throw-away context: each transaction gets its own."""


class server_utc(sa.sql.functions.FunctionElement):
    """The database server's UTC time plus an offset in microseconds.

    Every timestamp the protocol writes or compares (grant creation and
    expiry, claims, the view's change stamps) comes from here, never from
    a scheduler's clock, and none decides which grant wins (H1, H8).
    Build it with ``Database.now()``.
    """

    type = sa.DateTime()
    name = "server_utc"
    inherit_cache = True


def _offset(compiler, element, kw):
    return compiler.process(element.clauses, **kw)


@sa_compiler.compiles(server_utc)
def _utc_default(element, compiler, **kw):
    return "CURRENT_TIMESTAMP"


@sa_compiler.compiles(server_utc, "mysql")
def _utc_mysql(element, compiler, **kw):
    return "(UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND)" % _offset(
        compiler, element, kw
    )


@sa_compiler.compiles(server_utc, "postgresql")
def _utc_postgresql(element, compiler, **kw):
    return (
        "((CLOCK_TIMESTAMP() AT TIME ZONE 'UTC') + "
        "CAST(%s AS BIGINT) * INTERVAL '1 microsecond')"
        % _offset(compiler, element, kw)
    )


@sa_compiler.compiles(server_utc, "sqlite")
def _utc_sqlite(element, compiler, **kw):
    # NOTE: SQLite's clock has millisecond precision; pad to the six digits
    # SQLAlchemy's SQLite DATETIME stores, so comparisons stay textual.
    return (
        "(STRFTIME('%Y-%m-%d %H:%M:%f', 'now', "
        "PRINTF('%+.6f seconds', "
        + _offset(compiler, element, kw)
        + " / 1000000.0)) || '000')"
    )


def _is_retryable(exc):
    """Errors worth a fresh transaction besides deadlocks and disconnects."""
    consistency = getattr(db_exc, "DBConsistencyError", None)
    if consistency is not None and isinstance(exc, consistency):
        # NOTE: MariaDB with innodb_snapshot_isolation reports "Record has
        # changed since last read", the conflict a deadlock reports.
        return True
    if isinstance(exc, db_exc.DBError) and exc.inner_exception is not None:
        exc = exc.inner_exception
    return "database is locked" in str(exc)


def _prepare_sqlite(engine):
    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection, connection_record):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = %d" % SQLITE_BUSY_TIMEOUT_MS)
        if engine.url.database not in (None, "", ":memory:"):
            cursor.execute("PRAGMA journal_mode = WAL")
        cursor.close()

    # NOTE(sqlite-begin): oslo.db turns pysqlite's own transaction handling
    # off and emits a deferred BEGIN from its "begin" listener unless
    # conn.info holds "in_transaction" (its commit and rollback listeners
    # clear it).  A writer's connection begins IMMEDIATE here instead, as
    # it is handed out and before any transaction starts, taking the write
    # lock before its first read, so a read-then-write transaction cannot
    # interleave with another writer; readers stay DEFERRED and, in WAL
    # mode, never block writers.  The BEGIN goes to the driver directly:
    # SQLAlchemy would begin a transaction of its own around it.
    @sa.event.listens_for(engine, "engine_connect")
    def _begin_writer(conn, *branch):
        if branch and branch[0]:
            return  # a 1.3 branch of a connection already handed out
        if _SQLITE_WRITER.get() and "in_transaction" not in conn.info:
            cursor = conn.connection.cursor()
            cursor.execute("BEGIN IMMEDIATE")
            cursor.close()
            conn.info["in_transaction"] = True


def _prepare_mysql(engine, wsrep_sync_wait):
    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection, connection_record):
        cursor = dbapi_connection.cursor()
        cursor.execute(
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
        )
        if wsrep_sync_wait:
            cursor.execute(
                "SET SESSION wsrep_sync_wait = %d" % wsrep_sync_wait
            )
        cursor.close()


def _warn_galera_without_causal_reads(engine):
    with engine.connect() as conn:
        variables = dict(
            sa_compat.execute_text(
                conn,
                "SHOW VARIABLES WHERE Variable_name IN "
                "('wsrep_on', 'wsrep_sync_wait')",
            ).fetchall()
        )
    if variables.get("wsrep_on") == "ON" and variables.get(
        "wsrep_sync_wait"
    ) in ("0", None):
        LOG.warning(
            "grant_scheduler's database is a Galera node running without "
            "causal reads: a scheduler's view, a compute host's claim and "
            "the checker may read another node's commit late.  Grants stay "
            "safe (each is decided by a write that Galera certifies), but "
            "set [%s] mysql_wsrep_sync_wait = 1 to avoid needless "
            "fall-overs and rejected claims.",
            db_conf.GROUP_NAME,
        )


def _with_mysql_charset(url):
    # NOTE: the tables are utf8mb4; a utf8 (3-byte) connection cannot send
    # a four-byte character and MariaDB reports "Illegal mix of collations".
    if url.get_backend_name() != "mysql" or "charset" in url.query:
        return url
    return sa_compat.make_url(
        "%s%scharset=utf8mb4"
        % (
            sa_compat.render_url(url, hide_password=False),
            "&" if url.query else "?",
        )
    )


def writer(fn):
    """Make ``fn(db, conn, *args)`` one read-write transaction, retried.

    The result is called as ``fn(db, *args)``: on each try a transaction
    is opened with ``db.writer()`` and its connection passed after ``db``;
    it commits when ``fn`` returns.  Deadlocks, lost connections, the
    errors of ``_is_retryable`` and a ``RetryRequest`` (``rows.LostUpdate``)
    start it again in a fresh transaction, by ``db``'s retry policy.  The
    engine starts before the first try, outside the retries.
    """
    return _transactional(fn, True)


def reader(fn):
    """``writer`` for a function that only reads: its transaction is a
    new ``db.reader()`` on each try, rolled back at its end."""
    return _transactional(fn, False)


def _transactional(fn, write):
    @functools.wraps(fn)
    def call(db, *args, **kwargs):
        return db.run(fn, write, args, kwargs)

    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    call.__signature__ = signature.replace(parameters=params[:1] + params[2:])
    call.transaction = "writer" if write else "reader"
    return call


_SHARED = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def _after_fork_in_child():
    # NOTE: a fork while another thread held the lock would leave it held
    # for ever in the child.
    global _SHARED_LOCK
    _SHARED_LOCK = threading.Lock()


# NOTE: Python 3.6 has no fork hooks; a child there builds its own
# Database (``shared`` keys by process id) and its own lock with it.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)  # novermin


def _frozen(mapping):
    return repr(sorted((mapping or {}).items()))


class Database:
    """grant_scheduler's database: a private enginefacade and its engine."""

    def __init__(self, connection, retry_policy=None, **engine_options):
        """Describe a database; nothing connects until the first use.

        :param connection: a SQLAlchemy URL.
        :param retry_policy: ``wrap_db_retry`` arguments (default:
            ``conf.database.retry_policy()``).
        :param engine_options: any further oslo.db enginefacade option
            (``max_pool_size``, ``mysql_wsrep_sync_wait``, ...).
        :raises DatabaseConfigError: when the URL is missing or malformed.
        """
        if not connection:
            raise exception.DatabaseConfigError(
                url="(none)", reason="no database URL is configured"
            )
        db_conf.check_url(connection)
        try:
            url = sa_compat.make_url(connection)
        except sa.exc.ArgumentError as exc:
            raise exception.DatabaseConfigError(
                url=urls.mask(connection), reason=str(exc)
            )
        self.url = _with_mysql_charset(url)
        self.safe_url = urls.mask(
            sa_compat.render_url(url, hide_password=False)
        )
        self._skips_locked = None
        self.clock_offset = 0.0
        """Seconds added to the server's clock wherever the protocol reads
        it: tests move time forward with it instead of sleeping."""
        self._retry = oslo_db_api.wrap_db_retry(
            retry_on_deadlock=True,
            retry_on_disconnect=True,
            exception_checker=_is_retryable,
            jitter=True,
            **(retry_policy or db_conf.retry_policy()),
        )
        self._retried = self._retry(self._in_transaction)
        engine_options = {k: v for k, v in engine_options.items()}
        wsrep_sync_wait = engine_options.get("mysql_wsrep_sync_wait")
        if "mysql_wsrep_sync_wait" not in _OSLO_DB_OPTIONS:
            engine_options.pop("mysql_wsrep_sync_wait", None)
        else:
            wsrep_sync_wait = None  # oslo.db sets it itself
        self._facade = enginefacade.transaction_context()
        self._facade.configure(
            connection=sa_compat.render_url(self.url, hide_password=False),
            **{**db_conf.CONNECT_RETRIES, **engine_options},
        )
        self._facade.append_on_engine_create(
            lambda engine: self._on_engine_create(engine, wsrep_sync_wait)
        )

    @classmethod
    def from_conf(cls, conf):
        """Build from ``[grant_scheduler_database]`` of ``conf``."""
        connection, retry_policy, options = cls._conf_arguments(conf)
        return cls(connection, retry_policy=retry_policy, **options)

    @classmethod
    def shared(cls, connection, retry_policy=None, **engine_options):
        """This process's one ``Database`` for these arguments.

        Every caller of a process with the same URL, retry policy and
        engine options gets the same object, and so one enginefacade and
        one connection pool (Nova's driver, filter, hooks and host manager
        each build a ``GrantScheduler``).  A child process after a fork
        gets a new one: a pool is never shared across processes (H9).  An
        object nobody holds any more is forgotten.
        """
        key = (os.getpid(), connection, _frozen(retry_policy))
        key += (_frozen(engine_options),)
        with _SHARED_LOCK:
            database = _SHARED.get(key)
            if database is None:
                database = cls(
                    connection, retry_policy=retry_policy, **engine_options
                )
                _SHARED[key] = database
            return database

    @classmethod
    def shared_from_conf(cls, conf):
        """``shared`` for ``[grant_scheduler_database]`` of ``conf``."""
        connection, retry_policy, options = cls._conf_arguments(conf)
        return cls.shared(connection, retry_policy=retry_policy, **options)

    @staticmethod
    def _conf_arguments(conf):
        group = conf[db_conf.GROUP_NAME]
        skip = {"connection"} | {opt.dest for opt in db_conf.retry_opts}
        options = {
            opt: group[opt]
            for opt in group
            if opt not in skip and group[opt] is not None
        }
        return group.connection, db_conf.retry_policy(group), options

    @staticmethod
    def _on_engine_create(engine, wsrep_sync_wait):
        if engine.dialect.name == "sqlite":
            _prepare_sqlite(engine)
        elif engine.dialect.name == "mysql":
            _prepare_mysql(engine, wsrep_sync_wait)
        # NOTE: oslo.db tested a connection before this hook ran, and the
        # pool keeps it; it would miss the settings above.
        engine.dispose()
        if engine.dialect.name == "mysql":
            _warn_galera_without_causal_reads(engine)

    @property
    def dialect_name(self):
        return self.url.get_backend_name()

    @property
    def skips_locked_rows(self):
        """Whether ``SELECT ... FOR UPDATE SKIP LOCKED`` works here."""
        if self._skips_locked is None:
            self._skips_locked = self._can_skip_locked()
        return self._skips_locked

    def _can_skip_locked(self):
        dialect = self.get_engine().dialect
        version = dialect.server_version_info or ()
        if dialect.name == "postgresql":
            return version >= (9, 5)
        if dialect.name == "mysql":
            mariadb = getattr(dialect, "_is_mariadb", False) or getattr(
                dialect, "is_mariadb", False
            )
            return version >= ((10, 6) if mariadb else (8, 0, 1))
        return False

    @property
    def is_started(self):
        # NOTE(oslo.db): the context manager says it in Nova 19's 4.45; in
        # Nova 18's 4.40 only its factory knows.
        started = getattr(self._facade, "is_started", None)
        if started is None:
            started = self._facade._factory._started
        return started

    def now(self, plus_seconds=0):
        """The server's UTC time (plus ``plus_seconds``), as SQL."""
        offset = round((self.clock_offset + plus_seconds) * 1000000)
        # NOTE: type_coerce, so SQLAlchemy 1.3 also reads SQLite's text back
        # as a datetime.
        return sa.type_coerce(
            server_utc(sa.literal(offset, sa.BigInteger)), sa.DateTime()
        )

    def start(self):
        """Start the engine (and test a connection) if it has not started."""
        if not self.is_started:
            self._facade.writer.get_engine()

    def run(self, fn, write, args=(), kwargs=None):
        """``fn(self, conn, *args, **kwargs)`` in one transaction, retried.

        What ``writer`` and ``reader`` do.  The engine is started before
        the retries: only a connection lost after the start is retried.
        """
        self.start()
        return self._retried(fn, write, args, kwargs or {})

    def _in_transaction(self, fn, write, args, kwargs):
        opener = self.writer if write else self.reader
        with opener() as conn:
            return fn(self, conn, *args, **kwargs)

    def ping(self):
        """One ``SELECT 1`` on a new transaction, tried once: whether the
        database answers now, without the retries of ``run`` (a probe of
        a database taken as down must not wait through them)."""
        with self.reader() as conn:
            conn.execute(sa.text("SELECT 1"))

    @contextlib.contextmanager
    def connect(self):
        """A plain connection outside the enginefacade (for migrations)."""
        with self.get_engine().connect() as conn:
            yield conn

    @contextlib.contextmanager
    def writer(self):
        """One read-write transaction; it commits when the block ends."""
        token = _SQLITE_WRITER.set(True)
        try:
            with self._facade.writer.connection.using(_Context()) as conn:
                yield conn
        finally:
            _SQLITE_WRITER.reset(token)

    @contextlib.contextmanager
    def reader(self):
        """One read-only transaction, always a new one (H2); on SQLite
        ``DEFERRED`` even inside a writer's block (a claim asking an
        amount that reads the books), which would else wait for the
        writer's own lock."""
        token = _SQLITE_WRITER.set(False)
        try:
            with self._facade.reader.connection.using(_Context()) as conn:
                yield conn
        finally:
            _SQLITE_WRITER.reset(token)

    def get_engine(self):
        """The writer engine, started on first call."""
        return self._facade.writer.get_engine()

    def dispose(self):
        """Close pooled connections (after a fork, or when done)."""
        if self.is_started:
            self._facade.dispose_pool()


def reason(exc):
    """The first line of the driver's message for a database error."""
    inner = getattr(exc, "inner_exception", None) or exc
    orig = getattr(inner, "orig", None) or inner
    text = str(orig).strip().splitlines()[0] if str(orig).strip() else ""
    return text or type(orig).__name__


def translate(database, exc):
    """The project's exception for a database error, or None.

    Used once, at the API edge (``grant_scheduler.api``).
    """
    if isinstance(exc, exception.GrantSchedulerError):
        return None
    if isinstance(exc, db_exc.DBNonExistentDatabase):
        return exception.DatabaseUnavailable(
            url=database.safe_url, reason="the database does not exist"
        )
    if isinstance(exc, db_exc.DBConnectionError):
        return exception.DatabaseUnavailable(
            url=database.safe_url, reason=reason(exc)
        )
    if isinstance(exc, sa.exc.OperationalError) and exc.statement is None:
        # NOTE: a failure to open a connection whose wording oslo.db's
        # filters do not know, such as libpq's "connection to server at
        # ... failed: Connection refused".
        return exception.DatabaseUnavailable(
            url=database.safe_url, reason=reason(exc)
        )
    if isinstance(exc, (ImportError, sa.exc.NoSuchModuleError)):
        return exception.DatabaseConfigError(
            url=database.safe_url,
            reason="its driver is not installed (%s)" % exc,
        )
    if not database.is_started and not isinstance(exc, db_exc.DBError):
        # NOTE: the engine failed while starting, e.g. its first connection
        # was cut during the driver's handshake (seen as NotImplementedError
        # from PyMySQL).  The next call starts it again.
        return exception.DatabaseUnavailable(
            url=database.safe_url,
            reason="the connection failed while starting (%s)" % reason(exc),
        )
    return None


def translate_any(database, exc):
    """``translate``, and for the public API a ``DatabaseError`` for any
    other database error, so that its callers catch one base class.

    A lost conditional update that outlived every retry is one of them:
    the rows it read kept changing, and nothing of the call committed.
    """
    translated = translate(database, exc)
    if translated is not None:
        return translated
    if isinstance(exc, rows.LostUpdate):
        return exception.DatabaseError(
            url=database.safe_url,
            reason="a row kept changing under the write through every retry",
        )
    if isinstance(exc, (db_exc.DBError, sa.exc.SQLAlchemyError)):
        return exception.DatabaseError(
            url=database.safe_url, reason=reason(exc)
        )
    return None
