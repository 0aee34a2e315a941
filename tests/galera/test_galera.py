"""grant_scheduler on a 3-node MariaDB Galera cluster (DESIGN H8).

Needs the cluster of ``tools/galera-cluster.sh start`` (``tox -e galera``
starts and stops it).  Every process writes to its own node (multi-writer,
the hardest case) with ``mysql_wsrep_sync_wait = 1``, as the docs
recommend.  Checked: two grants on one host written on two nodes at once
conflict at certification and both succeed after a retry; and a fill with
schedulers and computes spread over the nodes keeps I1 and I4 while one
node is killed and rejoins.
"""

import os
import subprocess
import threading
import uuid

import fixtures
import sqlalchemy as sa

from grant_scheduler import api
from grant_scheduler import storage
from grant_scheduler.db import api as db_api
from grant_scheduler.db import migration
from grant_scheduler.db import sa_compat
from grant_scheduler.db import store as gs_store
from tests import base
from tests.faults import harness

REPO = __file__.rsplit("/tests/", 1)[0]
URLS = os.environ.get(
    "GRANT_SCHEDULER_TEST_GALERA_URLS",
    ",".join(
        "mysql+pymysql://openstack_citest:openstack_citest@127.0.0.1:%d/"
        % port
        for port in (4401, 4402, 4403)
    ),
).split(",")
CAUSAL = {"mysql_wsrep_sync_wait": 1}


def cluster(*args):
    subprocess.run(
        ["bash", REPO + "/tools/galera-cluster.sh", *args],
        check=True,
        capture_output=True,
    )


def cert_failures(url):
    """Certification failures and brute-force aborts this node has seen."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = sa_compat.execute_text(
                conn,
                "SHOW STATUS WHERE Variable_name IN "
                "('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')",
            ).fetchall()
    finally:
        engine.dispose()
    return sum(int(value) for _, value in rows)


class GaleraTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.name = "gs_galera_%s" % uuid.uuid4().hex[:10]
        admin = sa.create_engine(
            URLS[0], isolation_level="AUTOCOMMIT", pool_pre_ping=True
        )
        self.addCleanup(admin.dispose)
        try:
            with admin.connect() as conn:
                sa_compat.execute_text(conn, "CREATE DATABASE %s" % self.name)
        except sa.exc.OperationalError as exc:
            raise AssertionError(
                "The Galera cluster at %s is not reachable (%s); run "
                "tools/galera-cluster.sh start" % (URLS[0], exc.orig)
            )
        self.addCleanup(self._drop, admin)
        self.urls = [
            sa_compat.render_url(
                sa_compat.url_with_database(
                    sa_compat.make_url(url), self.name
                ),
                hide_password=False,
            )
            for url in URLS
        ]
        self.db = db_api.Database(self.urls[0], **CAUSAL)
        self.addCleanup(self.db.dispose)
        migration.upgrade(self.db)

    def _drop(self, admin):
        with admin.connect() as conn:
            sa_compat.execute_text(
                conn, "DROP DATABASE IF EXISTS %s" % self.name
            )

    def node(self, n):
        database = db_api.Database(self.urls[n], **CAUSAL)
        self.addCleanup(database.dispose)
        return database


class TestCertification(GaleraTestCase):
    def _race(self, capacity):
        """Two grants on one host, written at once on two nodes."""
        gs = api.GrantScheduler(self.db)
        host_id = gs.report_host("cmp1", "cmp1", api.Capacity(capacity))
        stores = [gs_store.Store(self.node(0)), gs_store.Store(self.node(1))]
        both_written = threading.Barrier(2, timeout=30)
        attempts = [0, 0]
        outcomes = [None, None]

        def grant(n):
            def before_commit(**info):
                attempts[n] += 1
                if attempts[n] == 1:
                    # Both hold the host row on their own node, uncommitted:
                    # Galera has no cluster-wide lock to stop either.
                    both_written.wait()

            ask = storage.Ask(
                api.Resources(1, 1024, 10),
                "scheduler%d" % n,
                str(uuid.uuid4()),
                "req-%d" % n,
                api.Settings().grant_ttl,
            )
            outcomes[n] = stores[n].grant(
                [host_id], ask, [], before_commit=before_commit
            )

        before = sum(cert_failures(url) for url in URLS[:2])
        threads = [threading.Thread(target=grant, args=(n,)) for n in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        after = sum(cert_failures(url) for url in URLS[:2])
        # One of the two lost certification and ran again, in a fresh
        # transaction, without the caller seeing an error.
        self.assertGreater(after, before)
        return gs, outcomes, attempts

    def test_conflicting_grants_on_two_nodes_are_retried(self):
        gs, outcomes, attempts = self._race(api.Resources(8, 8192, 100))
        self.assertTrue(all(o.won for o in outcomes), outcomes)
        self.assertEqual([1, 2], sorted(o.ticket for o in outcomes))
        self.assertEqual(3, sum(attempts))
        self.assertEqual([], gs.check())

    def test_the_last_slot_goes_to_one_node_only(self):
        # Each node decided on its own copy of the host row; certification
        # aborts the later commit, and its retry sees the other grant.
        gs, outcomes, attempts = self._race(api.Resources(1, 1024, 10))
        self.assertEqual([False, True], sorted(o.won for o in outcomes))
        self.assertEqual([], gs.check())

    def test_a_node_without_causal_reads_is_warned_about(self):
        logged = self.useFixture(fixtures.FakeLogger("grant_scheduler"))
        database = db_api.Database(self.urls[0])
        self.addCleanup(database.dispose)
        api.GrantScheduler(database).hosts()
        self.assertIn("mysql_wsrep_sync_wait", logged.output)
        logged = self.useFixture(fixtures.FakeLogger("grant_scheduler"))
        api.GrantScheduler(self.node(1)).hosts()
        self.assertNotIn("causal reads", logged.output)


class TestFillWhileANodeDies(GaleraTestCase):
    def test_node_killed_and_rejoined(self):
        rejoin = threading.Thread(target=self._kill_and_rejoin)
        started = []

        def during(run):
            if not started and len(run.answered) >= 10:
                started.append(True)
                rejoin.start()
                run.count_fault("Galera node killed and rejoined")

        run = harness.FillRun(
            self,
            computes=3,
            urls=[(url, CAUSAL) for url in self.urls],
        )
        run.run(during=during)
        if started:
            rejoin.join(180)
        self.assertTrue(started, "the fill ended before the node was killed")
        record = run.verify("Galera, node 3 killed (multi-writer)")
        self.assertEqual(
            1, record["faults"]["Galera node killed and rejoined"]
        )

    def _kill_and_rejoin(self):
        cluster("kill", "3")
        cluster("rejoin", "3")
