"""``grant_scheduler.nova.books.reconcile`` in Nova 22: the
reconciliation with Nova's records consumes a grant once Nova has set
its instance's host, before the spawn ends."""

from unittest import mock

from tests.nova22.in_nova import base
from tests.nova22.in_nova import lifecycle


class TestGrantConsumedBeforeTheSpawnEnds(lifecycle.BooksTestBase):
    HOSTS = ("host1",)

    def test_the_reconciliation_consumes_it_while_the_build_spawns(self):
        seen = {}
        spawn = base.DiskFakeDriver.spawn

        def slow_spawn(driver, context, instance, *args, **kwargs):
            # However long the spawn takes, Nova has set the instance's
            # host before it: the next reconciliation counts it.
            seen["before"] = {g.state for g in self.gs.grants()}
            self.reconcile()
            seen["during"] = {g.state for g in self.gs.grants()}
            seen["claimed"] = instance.uuid in self.claimed("host1")
            return spawn(driver, context, instance, *args, **kwargs)

        with mock.patch.object(base.DiskFakeDriver, "spawn", slow_spawn):
            self.boot()
        self.assertEqual({"won"}, seen["before"])
        self.assertEqual({"consumed"}, seen["during"])
        self.assertTrue(seen["claimed"])
        self.assert_books_agree()
