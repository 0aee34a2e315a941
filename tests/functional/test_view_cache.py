"""The scheduler's view cache reads what changed, and stays correct."""

import datetime
import uuid

import sqlalchemy as sa

from grant_scheduler import api
from grant_scheduler import view as gs_view
from grant_scheduler.db import models
from grant_scheduler.db import sa_compat
from grant_scheduler.db import store as gs_store
from tests import base

CAPACITY = api.Capacity(api.Resources(2, 2048, 20))
SLOT = api.Resources(1, 1024, 10)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@base.with_scenarios(base.ALL_BACKENDS)
class ViewCache(base.DatabaseTestCase):
    def setUp(self):
        super().setUp()
        self.gs = api.GrantScheduler(self.db)
        for n in range(20):
            self.gs.report_host("h%02d" % n, "h%02d" % n, CAPACITY)
        self.clock = Clock()
        # A cache of its own: overlap 0, so the counts below are exact.
        self.cache = gs_view.ViewCache(
            gs_store.Store(self.db),
            resync_interval=60,
            overlap=0,
            clock=self.clock,
        )

    def states(self, view):
        return {s.host: s for s in view.states()}

    def test_reads_only_changed_rows_until_resync(self):
        self.cache.view()
        self.assertEqual(20, self.cache.rows_read)
        self.cache.view()
        # The newest row read again: at or after the newest stamp seen.
        self.assertLessEqual(self.cache.rows_read, 21)
        before = self.cache.rows_read
        self.gs.claim(str(uuid.uuid4()), "h03", "h03", SLOT)
        view = self.cache.view()
        self.assertLessEqual(self.cache.rows_read - before, 2)
        self.assertEqual(SLOT, self.states(view)["h03"].used)
        self.clock.now = 61
        before = self.cache.rows_read
        self.cache.view()
        self.assertEqual(20, self.cache.rows_read - before)

    def product_cache(self):
        """The view cache of a scheduler built with the defaults."""
        return api.GrantScheduler(self.db)._scheduler.view_cache

    def test_rows_read_again_in_the_overlap_come_back_only_if_changed(self):
        # Every row was stamped within the default overlap: each refresh
        # looks at all of them again, but reads only the changed one whole.
        cache = self.product_cache()
        cache.view()
        self.assertEqual(20, cache.rows_read)
        cache.view()
        self.assertEqual(20, cache.rows_read)
        self.gs.claim(str(uuid.uuid4()), "h03", "h03", SLOT)
        view = cache.view()
        self.assertEqual(21, cache.rows_read)
        self.assertEqual(SLOT, self.states(view)["h03"].used)

    def test_a_late_commit_in_the_overlap_is_read_whole(self):
        cache = self.product_cache()
        cache.view()
        # A write stamped before the newest row the cache read, committed
        # after its read: the stamp differs from the one the cache holds.
        [stamp] = [
            s
            for h, s in cache._stamps.items()
            if cache._states[h].host == "h05"
        ]
        h05 = sa_compat.scalar_subquery(
            sa_compat.select(models.hosts.c.id).where(
                models.hosts.c.host == "h05"
            )
        )
        with self.db.writer() as conn:
            conn.execute(
                models.hosts.update()
                .where(models.hosts.c.host == "h05")
                .values(updated_at=stamp - datetime.timedelta(milliseconds=1))
            )
            conn.execute(
                models.inventories.update()
                .where(
                    sa.and_(
                        models.inventories.c.host_id == h05,
                        models.inventories.c.resource_class == "VCPU",
                    )
                )
                .values(used=1)
            )
        view = cache.view()
        self.assertEqual(21, cache.rows_read)
        self.assertEqual(1, self.states(view)["h05"].used.vcpus)

    def test_live_grants_are_in_the_rows(self):
        self.cache.view()
        [selection] = self.gs.schedule(*SLOT.as_dict().values())
        view = self.cache.view()
        self.assertEqual(SLOT, self.states(view)[selection.host].granted)
        self.assertLess(self.cache.rows_read, 24)

    def test_new_hosts_appear(self):
        self.cache.view()
        self.gs.report_host("new", "new", CAPACITY)
        self.assertIn("new", self.states(self.cache.view()))

    def test_a_missed_change_costs_a_fall_over_not_safety(self):
        self.gs.view()  # warm the scheduler's own cache
        # Fill every host with usage the cache cannot see: no new stamp, as
        # if its commit landed after the cache's read and its overlap.
        with self.db.writer() as conn:
            conn.execute(
                models.inventories.update().values(
                    used=models.inventories.c.capacity
                )
            )
            conn.execute(
                models.hosts.update().values(
                    updated_at=datetime.datetime(2000, 1, 1)
                )
            )
        with self.assertRaises(api.NoValidHost) as caught:
            self.gs.schedule(*SLOT.as_dict().values())
        self.assertGreater(self.gs.counters.conflicts, 0)
        self.assertTrue(caught.exception.contention)
        # (I4 does not hold here by construction: the usage has no claims.)
        self.assertEqual(
            [], [v for v in self.gs.check() if v.invariant == "I1"]
        )
