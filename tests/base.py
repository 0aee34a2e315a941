"""Test base classes, database fixtures and scenario expansion.

Tests are unittest-style so ``python -m unittest`` runs them as well as
pytest.  Backend matrices use testscenarios' scenario lists, expanded into
concrete subclasses at import time: pytest ignores ``load_tests`` and
``testscenarios.WithScenarios`` loses scenario attributes under pytest 9.

A database test never skips: when its server is missing it fails, naming
the URL it tried and the environment variable that sets it.

Why ``DatabaseFixture`` rather than oslo.db's opportunistic fixtures
(``oslo_db.sqlalchemy.test_fixtures``): those skip when a server is missing
unless ``SKIP_ON_UNAVAILABLE_DB`` is turned off, they read the admin URLs
once, at import, from ``OS_TEST_DBAPI_ADMIN_CONNECTION``, and they hand each
test an engine bound to one process, while the stress, fault and
Galera tests need a URL that other OS processes open on their own, and
they create their databases through the provisioning layer's own naming,
which the fault suite's MariaDB restarts and connection kills would have
to work around.  This fixture is the small part of them the suite needs:
a throw-away database per test on each server, a URL any process can use,
a migrated schema (``migrate=False`` for the migration tests), and a drop
that survives a server restart.
"""

import os
import sys
import tempfile
import unittest
import uuid

import fixtures
import sqlalchemy as sa
from testscenarios import scenarios as ts_scenarios

from grant_scheduler.db import api as db_api
from grant_scheduler.db import migration
from grant_scheduler.db import sa_compat

# Admin URLs of the servers the functional tests create throw-away databases
# in.  .ci/run and tools/prepare-test-databases.sh create these users.
ADMIN_URLS = {
    "mysql": os.environ.get(
        "GRANT_SCHEDULER_TEST_MYSQL_URL",
        "mysql+pymysql://openstack_citest:openstack_citest@127.0.0.1/",
    ),
    "postgresql": os.environ.get(
        "GRANT_SCHEDULER_TEST_POSTGRESQL_URL",
        "postgresql+psycopg2://openstack_citest:openstack_citest"
        "@127.0.0.1/postgres",
    ),
}
ADMIN_URL_ENV = {
    "mysql": "GRANT_SCHEDULER_TEST_MYSQL_URL",
    "postgresql": "GRANT_SCHEDULER_TEST_POSTGRESQL_URL",
}

SQLITE = [("sqlite", {"backend": "sqlite"})]
SERVERS = [
    ("mysql", {"backend": "mysql"}),
    ("postgresql", {"backend": "postgresql"}),
]
ALL_BACKENDS = SQLITE + SERVERS


class TestCase(fixtures.TestWithFixtures, unittest.TestCase):
    """Base for every grant_scheduler test."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(600, gentle=True))


def with_scenarios(scenarios):
    """Class decorator: one concrete TestCase per scenario.

    ``scenarios`` is a testscenarios list of ``(name, attributes)``; combine
    lists with ``multiply_scenarios``.  The decorated class is a mixin that
    is not collected itself; ``TestFoo_mysql`` and friends are added to its
    module.
    """

    def decorate(mixin):
        module = sys.modules[mixin.__module__]
        for name, attributes in scenarios:
            cls_name = "Test%s_%s" % (mixin.__name__, name)
            namespace = dict(attributes, __module__=mixin.__module__)
            setattr(
                module, cls_name, type(cls_name, (mixin, TestCase), namespace)
            )
        return mixin

    return decorate


multiply_scenarios = ts_scenarios.multiply_scenarios


class DatabaseFixture(fixtures.Fixture):
    """A throw-away database on one backend, migrated to head by default.

    ``self.url`` is a URL other processes can use; ``self.database`` is a
    ``Database`` for this process.
    """

    def __init__(self, backend, migrate=True):
        super().__init__()
        self.backend = backend
        self.migrate = migrate

    def _setUp(self):
        if self.backend == "sqlite":
            directory = self.useFixture(fixtures.TempDir()).path
            self.url = "sqlite:///%s" % os.path.join(directory, "test.sqlite")
        else:
            self.url = self._create_server_database()
        self.database = db_api.Database(self.url)
        self.addCleanup(self.database.dispose)
        if self.migrate:
            migration.upgrade(self.database)

    def _create_server_database(self):
        admin_url = sa_compat.make_url(ADMIN_URLS[self.backend])
        name = "gs_test_%s" % uuid.uuid4().hex[:12]
        # NOTE: pre-ping, so the drop at cleanup survives a server restart
        # during the test (the fault-injection suite restarts MariaDB).
        admin = sa.create_engine(
            admin_url, isolation_level="AUTOCOMMIT", pool_pre_ping=True
        )
        self.addCleanup(admin.dispose)
        try:
            with admin.connect() as conn:
                sa_compat.execute_text(conn, "CREATE DATABASE %s" % name)
        except sa.exc.OperationalError as exc:
            raise AssertionError(
                "The %s test server at %s is not reachable (%s). Start it, "
                "run tools/prepare-test-databases.sh, or point %s at an "
                "admin URL."
                % (
                    self.backend,
                    sa_compat.render_url(admin_url),
                    exc.orig,
                    ADMIN_URL_ENV[self.backend],
                )
            )
        self.addCleanup(self._drop, admin, name)
        url = sa_compat.url_with_database(admin_url, name)
        return sa_compat.render_url(url, hide_password=False)

    def _drop(self, admin, name):
        with admin.connect() as conn:
            if self.backend == "postgresql":
                sa_compat.execute_text(
                    conn, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % name
                )
            else:
                sa_compat.execute_text(
                    conn, "DROP DATABASE IF EXISTS %s" % name
                )


class DatabaseTestCase:
    """Mixin: ``self.db`` is a migrated throw-away database on ``backend``."""

    backend = "sqlite"
    migrate = True

    def setUp(self):
        super().setUp()
        self.db_fixture = self.useFixture(
            DatabaseFixture(self.backend, migrate=self.migrate)
        )
        self.db = self.db_fixture.database

    def reflect_no_check_constraints_where_impossible(self):
        """Reflect no CHECK constraints where this SQLAlchemy cannot.

        SQLAlchemy 1.2.10 (Nova 18's pin) reads them from
        ``pg_constraint.consrc``, which PostgreSQL 12 removed; a schema
        comparison then still compares every table, column, index and key.
        """
        if self.backend != "postgresql":
            return
        engine = self.db.get_engine()
        with engine.connect() as conn:
            try:
                sa.inspect(conn).get_check_constraints("gs_hosts")
                return
            except Exception as exc:  # noqa: BLE001 - oslo.db wraps it
                if "consrc" not in str(exc):
                    raise
        dialect = engine.dialect
        dialect.get_check_constraints = lambda *args, **kwargs: []
        self.addCleanup(delattr, dialect, "get_check_constraints")


def temp_config_file(testcase, text):
    """Write an oslo.config file for ``testcase``; return its path."""
    handle, path = tempfile.mkstemp(suffix=".conf")
    with os.fdopen(handle, "w") as f:
        f.write(text)
    testcase.addCleanup(os.unlink, path)
    return path
