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

    def test_a_reader_inside_a_writer_does_not_wait_for_it(self):
        # A claim asks an instance's amount inside its transaction, and
        # the asking may read the books: that read begins DEFERRED, so it
        # reads beside the writer's lock instead of waiting for it.
        import contextvars
        import threading

        done = []
        with self.db.writer() as conn:
            conn.execute(models.hosts.select()).fetchall()

            def read():
                with self.db.reader() as inner:
                    done.append(
                        inner.execute(models.hosts.select()).fetchall()
                    )

            # NOTE: run in the writer's context (as a call from inside its
            # block is), on a thread of its own so a wait cannot hang here.
            inside = contextvars.copy_context()
            reading = threading.Thread(
                target=inside.run, args=(read,), daemon=True
            )
            reading.start()
            reading.join(5)
            self.assertEqual([[]], done)
