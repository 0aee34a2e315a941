"""grant-scheduler-manage as an operator runs it: a real subprocess."""

import os
import subprocess
import sys

from grant_scheduler.db import migration
from tests import base

SECRET = "s3cr3t-pa55word"


class ManageTestCase(base.TestCase):
    def manage(self, connection, *args, extra_conf=""):
        path = base.temp_config_file(
            self,
            "[grant_scheduler_database]\nconnection = %s\n%s"
            % (connection, extra_conf),
        )
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "grant_scheduler.cmd.manage",
                "--config-file",
                path,
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        return result

    def assertOneLineError(self, result, *fragments):
        self.assertEqual(1, result.returncode, result)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertTrue(lines[0].startswith("ERROR: "), lines[0])
        self.assertNotIn("Traceback", result.stderr + result.stdout)
        self.assertNotIn(SECRET, result.stderr + result.stdout)
        for fragment in fragments:
            self.assertIn(fragment, lines[0])


class TestDbCommands(ManageTestCase):
    def setUp(self):
        super().setUp()
        directory = self.useFixture(base.fixtures.TempDir()).path
        self.url = "sqlite:///%s" % os.path.join(directory, "gs.sqlite")

    def test_sync_then_version_prints_head(self):
        result = self.manage(self.url, "db", "sync")
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn(migration.head_revision(), result.stdout)
        result = self.manage(self.url, "db", "version")
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual(migration.head_revision(), result.stdout.strip())

    def test_sync_is_idempotent(self):
        for _ in range(2):
            result = self.manage(self.url, "db", "sync")
            self.assertEqual(0, result.returncode, result.stderr)

    def test_version_of_unmigrated_database_says_run_sync(self):
        result = self.manage(self.url, "db", "version")
        self.assertOneLineError(result, "db sync", "no tables")


class TestBadDatabaseUrls(ManageTestCase):
    def test_malformed_url(self):
        result = self.manage("not a url at all", "db", "version")
        self.assertOneLineError(result, "not usable", "connection")

    def test_unknown_driver(self):
        result = self.manage(
            "nosuchdb+nodriver://admin:%s@127.0.0.1/gs" % SECRET, "db", "sync"
        )
        self.assertOneLineError(result, "not usable")

    def test_unreachable_server(self):
        # NOTE: port 9 (discard) is closed on the test machines, so the
        # connection is refused at once.
        result = self.manage(
            "mysql+pymysql://admin:%s@127.0.0.1:9/gs" % SECRET,
            "db",
            "sync",
            extra_conf="max_retries = 0\n",
        )
        self.assertOneLineError(result, "Cannot connect", "127.0.0.1:9")

    def test_missing_sqlite_directory(self):
        result = self.manage(
            "sqlite:////nonexistent/dir/gs.sqlite", "db", "version"
        )
        self.assertOneLineError(result, "nonexistent")


class TestInspectionCommands(ManageTestCase):
    def setUp(self):
        super().setUp()
        from grant_scheduler import api

        directory = self.useFixture(base.fixtures.TempDir()).path
        self.url = "sqlite:///%s" % os.path.join(directory, "gs.sqlite")
        self.assertEqual(0, self.manage(self.url, "db", "sync").returncode)
        self.gs = api.GrantScheduler.from_url(self.url)
        self.addCleanup(self.gs.database.dispose)
        self.gs.report_host(
            "cmp1", "cmp1", api.Capacity(api.Resources(2, 2048, 20))
        )
        [self.sel] = self.gs.schedule(1, 1024, 10, instance_uuids=["inst-1"])

    def test_hosts_and_grants_tables(self):
        result = self.manage(self.url, "hosts")
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn("cmp1", result.stdout)
        self.assertIn("1/2", result.stdout)
        result = self.manage(self.url, "grants")
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn("inst-1", result.stdout)
        self.assertIn("won", result.stdout)

    def test_reap_prints_counts(self):
        self.gs.claim("inst-1", "cmp1", "cmp1")
        result = self.manage(self.url, "reap")
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertRegex(result.stdout, r"superseded\s+1")

    def test_check_ok_then_violation(self):
        result = self.manage(self.url, "check")
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn("OK", result.stdout)
        result = self.manage(self.url, "check", "--quiescent")
        self.assertEqual(1, result.returncode)
        self.assertIn("remains after quiescence", result.stdout)
        self.assertOneLineError(result, "invariant violation")

    def test_unmigrated_database_is_refused(self):
        directory = self.useFixture(base.fixtures.TempDir()).path
        empty = "sqlite:///%s" % os.path.join(directory, "empty.sqlite")
        result = self.manage(empty, "hosts")
        self.assertOneLineError(result, "db sync")

    def test_schema_newer_than_code_is_refused(self):
        with self.gs.database.writer() as conn:
            conn.exec_driver_sql(
                "UPDATE alembic_version SET version_num = 'f00dfeed0099'"
            )
        for command in (("hosts",), ("reap",), ("db", "sync")):
            result = self.manage(self.url, *command)
            self.assertOneLineError(result, "f00dfeed0099")
