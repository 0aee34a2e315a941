"""Several ``db sync`` at once, as deploy pipelines run them.

Each scenario starts N operating-system processes running the real command
(and, in one test, plain ``alembic upgrade head`` from the checkout) against
one database, empty or at the first revision, and checks that every one
exits 0 and that the schema ends at head and matches the models.
"""

import os
import subprocess
import sys
import time

import sqlalchemy as sa
from alembic.runtime import migration as alembic_migration

from alembic import autogenerate
from grant_scheduler.db import migration
from grant_scheduler.db import models
from tests import base

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
FIRST = "0001_initial_schema"

SCENARIOS = base.multiply_scenarios(
    base.ALL_BACKENDS,
    [
        ("empty", {"start": None}),
        ("from_0001", {"start": FIRST}),
    ],
    [("3", {"processes": 3}), ("8", {"processes": 8})],
)


class SyncTestCase(base.DatabaseTestCase):
    migrate = False
    start = None
    processes = 3

    def setUp(self):
        super().setUp()
        if self.start is not None:
            migration.upgrade(self.db, self.start)
            self.assertEqual(self.start, migration.current_revision(self.db))
        self.config_file = base.temp_config_file(
            self,
            "[grant_scheduler_database]\nconnection = %s\n"
            % self.db_fixture.url,
        )

    # NOTE: each process imports everything, then waits at a barrier (a
    # file of its own saying it is ready, then the test's "go" file), so
    # that all of them start the command together instead of one Python
    # start-up apart, which is longer than a migration takes.
    BARRIER = (
        "import os, sys, time\n"
        "from grant_scheduler.cmd import manage\n"
        "from alembic import config\n"
        "directory, name, kind = sys.argv[1:4]\n"
        "open(os.path.join(directory, name), 'w').close()\n"
        "go = os.path.join(directory, 'go')\n"
        "deadline = time.monotonic() + 120\n"
        "while not os.path.exists(go) and time.monotonic() < deadline:\n"
        "    time.sleep(0.005)\n"
        "if kind == 'manage':\n"
        "    sys.exit(manage.main(sys.argv[4:]))\n"
        "config.main(argv=sys.argv[4:])\n"
    )

    def manage_sync(self):
        return ("manage", ["--config-file", self.config_file, "db", "sync"])

    def alembic_upgrade(self):
        return ("alembic", ["upgrade", "head"])

    def run_all(self, commands, env=None):
        """Start every command together; return (command, status, output)."""
        barrier = self.useFixture(base.fixtures.TempDir()).path
        running = []
        for number, (kind, args) in enumerate(commands):
            argv = [
                sys.executable,
                "-c",
                self.BARRIER,
                barrier,
                "ready%d" % number,
                kind,
                *args,
            ]
            process = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                cwd=REPO_ROOT,
                env=env,
            )
            running.append(("%s %s" % (kind, " ".join(args[-2:])), process))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            ready = [n for n in os.listdir(barrier) if n.startswith("ready")]
            exited = [p for _, p in running if p.poll() is not None]
            if len(ready) == len(commands) or exited:
                break
            time.sleep(0.01)
        open(os.path.join(barrier, "go"), "w").close()
        results = []
        for command, process in running:
            output, _ = process.communicate(timeout=300)
            results.append((command, process.returncode, output))
        return results

    def assertAllSucceeded(self, results):
        failures = [
            "%s exited %d:\n%s" % (command, code, output)
            for command, code, output in results
            if code != 0
        ]
        self.assertEqual([], failures, "\n".join(failures))

    def assertSchemaAtHead(self):
        self.reflect_no_check_constraints_where_impossible()
        self.assertEqual(
            migration.head_revision(), migration.current_revision(self.db)
        )
        migration.check_schema(self.db)
        with self.db.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT version_num FROM alembic_version")
            ).fetchall()
            self.assertEqual([(migration.head_revision(),)], list(rows))
            context = alembic_migration.MigrationContext.configure(conn)
            diffs = [
                diff
                for diff in autogenerate.compare_metadata(
                    context, models.metadata
                )
                # NOTE: SQLite's sqlite_sequence is reflected as a table by
                # older SQLAlchemy releases; it is SQLite's, not ours.
                if not (
                    diff[0] == "remove_table"
                    and diff[1].name in ("alembic_version", "sqlite_sequence")
                )
            ]
        self.assertEqual([], diffs)


@base.with_scenarios(SCENARIOS)
class ConcurrentSync(SyncTestCase):
    def test_concurrent_db_sync(self):
        results = self.run_all([self.manage_sync()] * self.processes)
        self.assertAllSucceeded(results)
        for _argv, _code, output in results:
            self.assertIn(
                "is at revision %s." % migration.head_revision(), output
            )
        self.assertSchemaAtHead()


@base.with_scenarios(base.ALL_BACKENDS)
class ConcurrentSyncAndAlembic(SyncTestCase):
    """The CLI and plain alembic take the same lock."""

    processes = 4

    def test_db_sync_and_alembic_upgrade_at_once(self):
        env = dict(os.environ)
        env.pop(migration.CONFIG_FILE_ENV, None)
        env[migration.URL_ENV] = self.db_fixture.url
        results = self.run_all(
            [self.manage_sync(), self.alembic_upgrade()] * 2, env=env
        )
        self.assertAllSucceeded(results)
        self.assertSchemaAtHead()
