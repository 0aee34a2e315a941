"""One ``Database`` (one enginefacade, one pool) per URL per process: the
Nova driver's, the filter's and the hooks' ``GrantScheduler``s share it,
and a child after a fork gets its own."""

import os
import threading

from grant_scheduler import api
from grant_scheduler.db import api as db_api
from grant_scheduler.nova import service
from tests import base
from tests.unit.nova import test_driver as nova_driver_tests


class TestOneDatabasePerProcess(
    nova_driver_tests.StandaloneTestCase, base.TestCase
):
    def lazies(self):
        """What Nova builds: the driver's, a filter's (a ``Lazy`` on the
        configuration) and the compute hooks' (with a claim lock)."""
        lock = threading.Lock()
        return [
            self.driver._lazy,
            service.Lazy(conf=self.conf),
            service.Lazy(conf=self.conf, claim_lock=lambda host, node: lock),
        ]

    def test_driver_filter_and_hooks_share_one_database(self):
        built = [lazy.get() for lazy in self.lazies()]
        self.assertEqual(3, len({id(gs) for gs in built}))
        databases = {id(gs.database) for gs in built}
        self.assertEqual(1, len(databases))
        database = built[0].database
        self.assertIsNot(self.db, database)
        self.assertEqual(self.db_fixture.url, str(database.url))
        # Once one of them has worked the others find its engine started.
        self.assertFalse(database.is_started)
        built[1].hosts()
        self.assertTrue(all(gs.database.is_started for gs in built))
        self.assertIs(
            built[0].database.get_engine(), built[2].database.get_engine()
        )

    def test_from_conf_and_from_url_share_by_url(self):
        first = api.GrantScheduler.from_conf(self.conf)
        second = api.GrantScheduler.from_conf(self.conf)
        self.assertIs(first.database, second.database)
        by_url = api.GrantScheduler.from_url(self.db_fixture.url)
        self.assertIs(
            by_url.database,
            api.GrantScheduler.from_url(self.db_fixture.url).database,
        )
        other = self.useFixture(base.DatabaseFixture("sqlite"))
        self.conf.set_override(
            "connection", other.url, "grant_scheduler_database"
        )
        elsewhere = api.GrantScheduler.from_conf(self.conf)
        self.assertIsNot(first.database, elsewhere.database)
        self.assertEqual(other.url, str(elsewhere.database.url))

    def test_other_engine_options_get_another_database(self):
        first = db_api.Database.shared_from_conf(self.conf)
        self.conf.set_override("max_pool_size", 7, "grant_scheduler_database")
        second = db_api.Database.shared_from_conf(self.conf)
        self.assertIsNot(first, second)
        self.assertIs(second, db_api.Database.shared_from_conf(self.conf))

    def test_a_child_after_fork_gets_its_own_database(self):
        lazies = self.lazies()
        parent = lazies[0].get().database
        parent.start()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            try:
                os.close(read)
                built = [lazy.get() for lazy in lazies]
                mine = {id(gs.database) for gs in built}
                shared = db_api.Database.shared_from_conf(self.conf)
                answer = "%d %d %d %d" % (
                    len(mine),
                    id(parent) in mine,
                    shared is built[0].database,
                    len(built[1].hosts()),
                )
                os.write(write, answer.encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            answer = pipe.read()
        os.waitpid(pid, 0)
        # One Database in the child, not the parent's, and it works.
        self.assertEqual("1 0 1 2", answer)
        # The parent still uses its own.
        self.assertIs(parent, lazies[2].get().database)
        self.assertEqual(2, len(lazies[1].get().hosts()))
