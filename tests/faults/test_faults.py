"""Faults during a fill: killed processes, dropped connections, a restart.

Each scenario drives six scheduler and two compute processes through a
fill and checks, through ``harness.FillRun``: I1 at every checkpoint, every
surviving process finished on its own (no operator action), every answered
build claimed (or rejected after its grant expired, DESIGN H5), and, after
one TTL and one reap, no grant rows left and usage equal to the claims (I4).
"""

import subprocess
import threading
import time

import sqlalchemy as sa

from grant_scheduler.db import sa_compat
from tests import base
from tests.faults import harness

REPO = __file__.rsplit("/tests/", 1)[0]


@base.with_scenarios(base.SERVERS)
class ProcessKills(base.DatabaseTestCase):
    def test_kills_at_each_step(self):
        run = harness.FillRun(
            self,
            scheduler_kills={
                # After the grant's commit, before its verification.
                # (Early requests, so that a scheduler that started late on
                # a loaded machine still reaches its point before the fill
                # is over.)
                0: ("grant_committed", 2),
                # After the verification, before the answer.
                1: ("grant_verified", 3),
                2: ("before_answer", 4),
            },
            # Inside the claim transaction, before its commit.
            compute_kills={0: 4, 1: 9},
        )
        run.run()
        record = run.verify("process kills (%s)" % self.backend)
        self.assertEqual(3, record["faults"]["scheduler killed"])
        self.assertEqual(2, record["faults"]["compute killed mid-claim"])


class _ConnectionKiller:
    """Kills every connection to the test database, every ``interval``."""

    def __init__(self, testcase, interval=0.5, rounds=8):
        url = sa_compat.make_url(testcase.db_fixture.url)
        self.database = url.database
        self.backend = testcase.backend
        admin_url = sa_compat.make_url(base.ADMIN_URLS[self.backend])
        self.admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        testcase.addCleanup(self.admin.dispose)
        self.interval = interval
        self.rounds = rounds
        self.next_at = None

    def _kill_mysql(self, conn):
        ids = conn.execute(
            sa.text(
                "SELECT id FROM information_schema.processlist "
                "WHERE db = :db AND id <> CONNECTION_ID()"
            ),
            {"db": self.database},
        )
        killed = 0
        for (connection_id,) in list(ids):
            try:
                sa_compat.execute_text(conn, "KILL %d" % connection_id)
                killed += 1
            except sa.exc.DBAPIError:
                pass  # it ended on its own meanwhile
        return killed

    def _kill_postgresql(self, conn):
        return len(
            conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :db AND pid <> pg_backend_pid()"
                ),
                {"db": self.database},
            ).fetchall()
        )

    def __call__(self, run):
        now = time.monotonic()
        if self.rounds <= 0 or (self.next_at and now < self.next_at):
            return
        self.next_at = now + self.interval
        self.rounds -= 1
        with self.admin.connect() as conn:
            if self.backend == "mysql":
                killed = self._kill_mysql(conn)
            else:
                killed = self._kill_postgresql(conn)
        run.count_fault("connections killed", killed)
        run.count_fault("kill rounds")


@base.with_scenarios(base.SERVERS)
class ConnectionDrops(base.DatabaseTestCase):
    def test_connections_killed_under_load(self):
        run = harness.FillRun(self)
        run.run(during=_ConnectionKiller(self))
        record = run.verify("connections dropped (%s)" % self.backend)
        self.assertGreater(record["faults"]["connections killed"], 0)


class _MariaDBRestart:
    """Shuts MariaDB down once the fill is under way, then starts it."""

    def __init__(self, after_answers=10, down_for=1.0):
        self.after_answers = after_answers
        self.down_for = down_for
        self.thread = None
        self.errors = []
        self.down_at = self.up_at = None

    def _restart(self, run):
        try:
            subprocess.run(
                [
                    "mysqladmin",
                    "--protocol=tcp",
                    "-h127.0.0.1",
                    "-uroot",
                    "shutdown",
                ],
                check=True,
                capture_output=True,
            )
            self.down_at = time.time()
            run.count_fault("MariaDB restarts")
            time.sleep(self.down_for)
        except subprocess.CalledProcessError as exc:
            self.errors.append(exc.stderr)
        finally:
            started = subprocess.run(
                ["bash", REPO + "/tools/prepare-test-databases.sh"],
                capture_output=True,
                text=True,
            )
            if started.returncode != 0:
                self.errors.append(started.stderr)
            self.up_at = time.time()
            if self.down_at is not None:
                run.count_fault(
                    "ms MariaDB was away",
                    int((self.up_at - self.down_at) * 1000),
                )

    def __call__(self, run):
        # NOTE: once the fill is under way (answers are coming), not at a
        # fixed time: process start-up varies with the machine's load.
        if self.thread is None and len(run.answered) >= self.after_answers:
            self.thread = threading.Thread(target=self._restart, args=(run,))
            self.thread.start()


class TestMariaDBRestart(base.DatabaseTestCase, base.TestCase):
    backend = "mysql"

    def test_server_restarted_mid_run(self):
        restart = _MariaDBRestart()
        run = harness.FillRun(self)
        run.run(during=restart)
        restart.thread.join(120)
        self.assertEqual([], restart.errors)
        record = run.verify("MariaDB restarted (mysql)")
        self.assertEqual(1, record["faults"]["MariaDB restarts"])
        # The server went away while schedulers were still filling (their
        # wall clocks, on this machine, are comparable).
        last_finished = max(
            r["finished_at"]
            for name, r in run.results.items()
            if name.startswith("scheduler")
        )
        self.assertLess(restart.down_at, last_finished)
