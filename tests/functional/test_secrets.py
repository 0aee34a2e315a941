"""Database passwords never reach output, errors or logs.

A MariaDB user with a distinctive password is created for the test; every
failing command is run with and without ``--debug`` and its whole output
searched for the password.
"""

import logging
import subprocess
import sys
import uuid

import fixtures
import sqlalchemy as sa

from grant_scheduler import api
from grant_scheduler import exception
from tests import base

PASSWORD = "Pw-%s" % uuid.uuid4().hex[:12]


class TestSecrets(base.DatabaseTestCase, base.TestCase):
    backend = "mysql"
    migrate = False

    def setUp(self):
        super().setUp()
        self.user = "gs_secret_%s" % uuid.uuid4().hex[:6]
        url = sa.engine.make_url(self.db_fixture.url)
        admin = sa.create_engine(
            base.ADMIN_URLS["mysql"], isolation_level="AUTOCOMMIT"
        )
        self.addCleanup(admin.dispose)
        with admin.connect() as conn:
            # NOTE: "%%" is MySQL's any-host "%", escaped for the driver.
            for host in ("%%", "localhost"):
                conn.exec_driver_sql(
                    "CREATE USER '%s'@'%s' IDENTIFIED BY '%s'"
                    % (self.user, host, PASSWORD)
                )
                conn.exec_driver_sql(
                    "GRANT ALL ON %s.* TO '%s'@'%s'"
                    % (url.database, self.user, host)
                )
        self.addCleanup(self._drop_user, admin)
        self.secret_url = url.set(
            username=self.user, password=PASSWORD
        ).render_as_string(hide_password=False)

    def _drop_user(self, admin):
        with admin.connect() as conn:
            for host in ("%%", "localhost"):
                conn.exec_driver_sql(
                    "DROP USER IF EXISTS '%s'@'%s'" % (self.user, host)
                )

    def run_command(self, *argv):
        result = subprocess.run(
            [sys.executable, "-m", *argv],
            capture_output=True,
            text=True,
            timeout=300,
        )
        return result.returncode, result.stdout + result.stderr

    def manage(self, connection, *args):
        path = base.temp_config_file(
            self, "[grant_scheduler_database]\nconnection = %s\n" % connection
        )
        return self.run_command(
            "grant_scheduler.cmd.manage", "--config-file", path, *args
        )

    def failing_urls(self):
        url = sa.engine.make_url(self.secret_url)
        return {
            "unmigrated": self.secret_url,
            "no such database": url.set(
                database="gs_missing"
            ).render_as_string(hide_password=False),
            "wrong password": url.set(
                password=PASSWORD + "x"
            ).render_as_string(hide_password=False),
            "unreachable": url.set(port=9).render_as_string(
                hide_password=False
            ),
            "malformed": "%s:%s@127.0.0.1/gs" % (self.user, PASSWORD),
        }

    def test_failing_manage_commands(self):
        commands = [("db", "version"), ("hosts",), ("reap",)]
        checked = 0
        for case, url in self.failing_urls().items():
            for command in commands:
                for debug in ((), ("--debug",)):
                    with self.subTest(case=case, command=command, debug=debug):
                        code, output = self.manage(url, *debug, *command)
                        self.assertNotEqual(0, code, output)
                        self.assertIn("ERROR", output)
                        self.assertNotIn(PASSWORD, output)
                        checked += 1
        self.assertEqual(5 * 3 * 2, checked)

    def test_failing_benchmark(self):
        urls = self.failing_urls()
        del urls["unmigrated"]  # the benchmark migrates its database
        for case, url in urls.items():
            with self.subTest(case=case):
                code, output = self.run_command(
                    "grant_scheduler.cmd.bench",
                    "--db",
                    url,
                    "--requests",
                    "4",
                    "--schedulers",
                    "1",
                )
                self.assertNotEqual(0, code, output)
                self.assertNotIn(PASSWORD, output)

    def test_api_errors_and_logs(self):
        logger = self.useFixture(
            fixtures.FakeLogger(level=logging.DEBUG, format="%(message)s")
        )
        for case, url in self.failing_urls().items():
            with self.subTest(case=case):
                with self.assertRaises(
                    exception.GrantSchedulerError
                ) as caught:
                    api.GrantScheduler.from_url(url).hosts()
                self.assertNotIn(PASSWORD, str(caught.exception))
                self.assertNotIn(PASSWORD, repr(caught.exception))
        self.assertNotIn(PASSWORD, logger.output)
