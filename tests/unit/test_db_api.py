"""The data-access layer: lazy engines, retries, SQLite locking, masking."""

import os
import sqlite3

from oslo_db import exception as db_exc

from grant_scheduler import exception
from grant_scheduler.db import api as db_api
from grant_scheduler.db import models
from tests import base


class TestMaskUrl(base.TestCase):
    def test_password_is_masked(self):
        masked = exception.mask_url("mysql+pymysql://u:hunter2@db:3306/gs")
        self.assertNotIn("hunter2", masked)
        self.assertIn("u:***@db:3306/gs", masked)

    def test_malformed_url_is_masked_too(self):
        masked = exception.mask_url("mysql+pymysql://u:hunter2@db:notaport/gs")
        self.assertNotIn("hunter2", masked)


class TestDatabase(base.TestCase):
    def test_missing_url_is_a_config_error(self):
        self.assertRaises(exception.DatabaseConfigError, db_api.Database, "")

    def test_construction_does_not_connect(self):
        # DESIGN H9: nothing connects before the first transaction.
        database = db_api.Database(
            "mysql+pymysql://u:p@127.0.0.1:9/gs", max_retries=0
        )
        self.assertEqual("mysql", database.dialect_name)
        self.assertFalse(database._facade._factory._started)
        with self.assertRaises(exception.DatabaseUnavailable):
            with database.reader():
                pass


class _Counter:
    """An object with a ``db`` attribute, as ``transactional`` expects."""

    def __init__(self, db, failures):
        self.db = db
        self.failures = list(failures)
        self.calls = 0

    @db_api.transactional("writer")
    def insert_host(self, conn, name):
        self.calls += 1
        conn.execute(
            models.hosts.insert().values(
                host=name, node=name, created_at=db_api.utcnow()
            )
        )
        if self.failures:
            raise self.failures.pop(0)


class TestRetry(base.DatabaseTestCase, base.TestCase):
    def _host_count(self):
        with self.db.reader() as conn:
            return len(conn.execute(models.hosts.select()).all())

    def test_deadlock_is_retried_in_a_fresh_transaction(self):
        counter = _Counter(self.db, [db_exc.DBDeadlock(), db_exc.DBDeadlock()])
        counter.insert_host("h1")
        self.assertEqual(3, counter.calls)
        # The two failed attempts rolled back: one row, not three.
        self.assertEqual(1, self._host_count())

    def test_other_errors_are_not_retried(self):
        counter = _Counter(self.db, [ValueError("boom")])
        self.assertRaises(ValueError, counter.insert_host, "h1")
        self.assertEqual(1, counter.calls)
        self.assertEqual(0, self._host_count())


class TestSQLiteWriterLock(base.DatabaseTestCase, base.TestCase):
    def test_writer_holds_the_write_lock_from_its_first_read(self):
        path = self.db.url.database
        self.assertTrue(os.path.exists(path))
        with self.db.writer() as conn:
            conn.execute(models.hosts.select()).all()
            other = sqlite3.connect(path, timeout=0.1, isolation_level=None)
            self.addCleanup(other.close)
            with self.assertRaises(sqlite3.OperationalError) as caught:
                other.execute("BEGIN IMMEDIATE")
            self.assertIn("locked", str(caught.exception))

    def test_reader_does_not_block_writers(self):
        path = self.db.url.database
        with self.db.reader() as conn:
            conn.execute(models.hosts.select()).all()
            other = sqlite3.connect(path, timeout=0.1, isolation_level=None)
            self.addCleanup(other.close)
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
