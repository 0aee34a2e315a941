"""The scheduler's view cache reads what changed, and stays correct."""

from grant_scheduler import api
from grant_scheduler import view as gs_view
from grant_scheduler.db import models
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
        self.gs = api.GrantScheduler(
            self.db, settings=api.Settings(host_subset_size=1, view_overlap=0)
        )
        for n in range(20):
            self.gs.report_host("h%02d" % n, "h%02d" % n, CAPACITY)
        self.clock = Clock()
        self.cache = gs_view.ViewCache(
            self.gs.store, resync_interval=60, overlap=0, clock=self.clock
        )

    def test_reads_only_changed_rows_until_resync(self):
        self.cache.view()
        self.assertEqual(20, self.cache.rows_read)
        self.cache.view()
        self.assertEqual(20, self.cache.rows_read)
        self.gs.claim("i-1", "h03", "h03", SLOT)
        view = self.cache.view()
        self.assertEqual(21, self.cache.rows_read)
        self.assertEqual(SLOT, view._states[self._id("h03")].used)
        self.clock.now = 61
        self.cache.view()
        self.assertEqual(41, self.cache.rows_read)

    def test_live_grants_are_always_current(self):
        self.cache.view()
        [selection] = self.gs.schedule(*SLOT.as_dict().values())
        view = self.cache.view()
        state = view._states[self._id(selection.host)]
        self.assertEqual(SLOT, state.granted)
        self.assertEqual(20, self.cache.rows_read)

    def test_new_hosts_appear(self):
        self.cache.view()
        self.gs.report_host("new", "new", CAPACITY)
        view = self.cache.view()
        self.assertIn("new", {s.host for s in view._states.values()})

    def test_a_missed_change_costs_a_fall_over_not_safety(self):
        self.gs.scheduler.view_cache.view()  # warm the cache
        # Fill every host with usage the cache cannot see: no stamp, as if
        # its commit landed after the cache's read and its overlap.
        with self.db.writer() as conn:
            conn.execute(
                models.hosts.update().values(
                    vcpus_used=models.hosts.c.vcpus,
                    memory_mb_used=models.hosts.c.memory_mb,
                    disk_gb_used=models.hosts.c.disk_gb,
                )
            )
        with self.assertRaises(api.NoValidHost):
            self.gs.schedule(*SLOT.as_dict().values())
        self.assertGreater(self.gs.counters.conflicts, 0)
        # (I4 does not hold here by construction: the usage has no claims.)
        self.assertEqual(
            [], [v for v in self.gs.check() if v.invariant == "I1"]
        )

    def _id(self, name):
        return [
            r.state.host_id for r in self.gs.hosts() if r.state.host == name
        ][0]
