"""The database entry point: lazy engines, retries, SQLite locking, clock."""

import datetime
import os
import sqlite3

from oslo_db import exception as db_exc

from grant_scheduler import api
from grant_scheduler import exception
from grant_scheduler.db import api as db_api
from grant_scheduler.db import models
from grant_scheduler.db import rows
from grant_scheduler.db import sa_compat
from tests import base


class TestDatabase(base.TestCase):
    def test_missing_url_is_a_config_error(self):
        self.assertRaises(exception.DatabaseConfigError, db_api.Database, "")

    def test_construction_does_not_connect(self):
        # DESIGN H9: nothing connects before the first transaction.
        database = db_api.Database("mysql+pymysql://u:p@127.0.0.1:9/gs")
        self.assertEqual("mysql", database.dialect_name)
        self.assertFalse(database.is_started)

    def test_unreachable_at_start_is_one_translated_error(self):
        gs = api.GrantScheduler.from_url("mysql+pymysql://u:p@127.0.0.1:9/gs")
        with self.assertRaises(exception.DatabaseUnavailable) as caught:
            gs.hosts()
        self.assertNotIn(":p@", str(caught.exception))

    def test_mysql_connections_speak_utf8mb4(self):
        database = db_api.Database("mysql+pymysql://u:p@127.0.0.1/gs")
        self.assertEqual("utf8mb4", database.url.query["charset"])
        kept = db_api.Database("mysql+pymysql://u:p@127.0.0.1/gs?charset=utf8")
        self.assertEqual("utf8", kept.url.query["charset"])

    def test_the_api_edge_translates_every_database_error(self):
        # A lost update that outlived its retries and a statement the
        # server refused reach a caller as DatabaseError; a programming
        # error is not dressed up as one.
        database = db_api.Database("sqlite://")
        database.start()
        self.addCleanup(database.dispose)
        for error in (
            rows.LostUpdate(),
            db_exc.DBDataError(Exception("Data too long for column")),
        ):
            translated = db_api.translate_any(database, error)
            self.assertIsInstance(translated, exception.DatabaseError)
        self.assertIsNone(db_api.translate_any(database, TypeError("x")))


def _insert_host(failures, calls):
    def insert(conn, name):
        calls.append(name)
        conn.execute(
            models.hosts.insert().values(
                host=name, node=name, created_at=datetime.datetime(2026, 1, 1)
            )
        )
        if failures:
            raise failures.pop(0)

    return insert


class TestRetry(base.DatabaseTestCase, base.TestCase):
    def _host_count(self):
        with self.db.reader() as conn:
            return len(conn.execute(models.hosts.select()).fetchall())

    def test_deadlock_is_retried_in_a_fresh_transaction(self):
        calls = []
        failures = [db_exc.DBDeadlock(), db_exc.DBDeadlock()]
        self.db.transactional(_insert_host(failures, calls))("h1")
        self.assertEqual(3, len(calls))
        # The two failed attempts rolled back: one row, not three.
        self.assertEqual(1, self._host_count())

    def test_other_errors_are_not_retried(self):
        calls = []
        insert = self.db.transactional(_insert_host([ValueError("x")], calls))
        self.assertRaises(ValueError, insert, "h1")
        self.assertEqual(1, len(calls))
        self.assertEqual(0, self._host_count())

    def test_retries_follow_the_configured_policy(self):
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
        calls = []
        failures = [db_exc.DBDeadlock(), db_exc.DBDeadlock()]
        insert = database.transactional(_insert_host(failures, calls))
        self.assertRaises(db_exc.DBDeadlock, insert, "h1")
        self.assertEqual(2, len(calls))


class TestClock(base.DatabaseTestCase, base.TestCase):
    def test_clock_offset_moves_the_server_clock(self):
        with self.db.reader() as conn:
            before = conn.execute(sa_compat.select(self.db.now())).scalar()
        self.db.clock_offset = 3600
        with self.db.reader() as conn:
            after = conn.execute(sa_compat.select(self.db.now(30))).scalar()
        self.assertGreater(after - before, datetime.timedelta(seconds=3629))
        self.assertLess(after - before, datetime.timedelta(seconds=3700))


class TestSQLiteWriterLock(base.DatabaseTestCase, base.TestCase):
    def test_writer_holds_the_write_lock_from_its_first_read(self):
        path = self.db.url.database
        self.assertTrue(os.path.exists(path))
        with self.db.writer() as conn:
            conn.execute(models.hosts.select()).fetchall()
            other = sqlite3.connect(path, timeout=0.1, isolation_level=None)
            self.addCleanup(other.close)
            with self.assertRaises(sqlite3.OperationalError) as caught:
                other.execute("BEGIN IMMEDIATE")
            self.assertIn("locked", str(caught.exception))

    def test_reader_does_not_block_writers(self):
        path = self.db.url.database
        with self.db.reader() as conn:
            conn.execute(models.hosts.select()).fetchall()
            other = sqlite3.connect(path, timeout=0.1, isolation_level=None)
            self.addCleanup(other.close)
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
