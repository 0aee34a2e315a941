"""Each SQL function that is a transaction says so at its definition, and
``db_api.writer``/``reader`` retry it as the Database's policy says."""

import inspect

from oslo_db import exception as db_exc

from grant_scheduler.db import api as db_api
from grant_scheduler.db import claims
from grant_scheduler.db import grants
from grant_scheduler.db import hosts
from grant_scheduler.db import models
from grant_scheduler.db import rows
from grant_scheduler.db import store as gs_store
from tests import base

WRITERS = {
    hosts: ["report", "register", "delete"],
    grants: [
        "take",
        "withdraw",
        "withdraw_instance",
        "expire",
        "reap_consumed",
        "reap_orphaned",
        "reap_orphaned_claims",
    ],
    claims: ["claim", "release", "correct"],
}
READERS = {
    hosts: ["read", "state", "granted_by_node", "reports", "orphan_claims"],
    grants: ["listed"],
    claims: ["existing", "listed"],
}


class TestDeclared(base.TestCase):
    def test_every_transaction_is_declared_where_its_sql_is(self):
        for kinds, kind in ((WRITERS, "writer"), (READERS, "reader")):
            for module, names in kinds.items():
                for name in names:
                    fn = getattr(module, name)
                    self.assertEqual(kind, getattr(fn, "transaction", None))
                    # Called with the Database first, no connection.
                    params = list(inspect.signature(fn).parameters)
                    self.assertEqual("db", params[0], name)
                    self.assertNotIn("conn", params, name)
                    raw = inspect.unwrap(fn)
                    self.assertEqual(
                        ["db", "conn"],
                        list(inspect.signature(raw).parameters)[:2],
                    )

    def test_helpers_inside_a_transaction_stay_plain(self):
        for helper in (hosts.one, grants.withdraw_live, grants.insert):
            self.assertFalse(hasattr(helper, "transaction"))
            params = list(inspect.signature(helper).parameters)
            self.assertEqual("conn", params[0])

    def test_the_sql_store_keeps_no_table_of_functions(self):
        source = inspect.getsource(gs_store.Store)
        self.assertNotIn("transactional", source)
        self.assertIn("grants.take(self.db", source)


@db_api.writer
def _insert(db, conn, name, failures, calls):
    calls.append(name)
    conn.execute(
        models.hosts.insert().values(host=name, node=name, created_at=db.now())
    )
    if failures:
        raise failures.pop(0)
    return name


@db_api.reader
def _count(db, conn):
    return len(conn.execute(models.hosts.select()).fetchall())


class TestRetried(base.DatabaseTestCase, base.TestCase):
    def test_deadlocks_and_lost_updates_are_retried_afresh(self):
        calls = []
        failures = [db_exc.DBDeadlock(), rows.retry_request()]
        self.assertEqual("h1", _insert(self.db, "h1", failures, calls))
        self.assertEqual(3, len(calls))
        self.assertEqual(1, _count(self.db))

    def test_other_errors_roll_back_once(self):
        calls = []
        self.assertRaises(
            ValueError, _insert, self.db, "h1", [ValueError()], calls
        )
        self.assertEqual((1, 0), (len(calls), _count(self.db)))

    def _one_retry(self):
        """A Database whose policy allows one retry, without pauses."""
        database = db_api.Database(
            self.db_fixture.url,
            retry_policy={
                "max_retries": 1,
                "retry_interval": 0,
                "inc_retry_interval": False,
                "max_retry_interval": 0,
            },
        )
        self.addCleanup(database.dispose)
        return database

    def test_a_lost_update_that_outlives_the_policy_is_raised(self):
        calls = []
        failures = [rows.retry_request(), rows.retry_request()]
        self.assertRaises(
            rows.LostUpdate, _insert, self._one_retry(), "h1", failures, calls
        )
        self.assertEqual(2, len(calls))

    def test_retries_follow_the_configured_policy(self):
        calls = []
        failures = [db_exc.DBDeadlock(), db_exc.DBDeadlock()]
        self.assertRaises(
            db_exc.DBDeadlock,
            _insert,
            self._one_retry(),
            "h1",
            failures,
            calls,
        )
        self.assertEqual(2, len(calls))

    def test_the_engine_starts_outside_the_retries(self):
        # A database unreachable from the start fails at once: the start
        # is tried once, not once per retry, and the function never runs.
        database = db_api.Database("mysql+pymysql://u:p@127.0.0.1:9/gs")
        starts = []

        def start():
            starts.append(1)
            raise db_exc.DBConnectionError("refused")

        database.start = start
        calls = []
        self.assertRaises(
            db_exc.DBConnectionError, _insert, database, "h1", [], calls
        )
        self.assertEqual(([1], []), (starts, calls))
