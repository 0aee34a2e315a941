"""grant_scheduler's books against what the release's computes run.

A node's instances that were there before grant_scheduler's rows (a fresh
grant_scheduler database under a running scheduler, or a node first seen
with servers on it) must be claimed: the books then hold what Nova's own
records hold, and no node takes more than its room.
"""

from nova import context as nova_context

from grant_scheduler.nova.compute import hooks as gs_hooks
from tests import base as gs_base
from tests.nova18_21 import base


class TestExistingInstances(base.GrantsTestBase):
    HOSTS = ("host1",)

    def swap_database(self):
        """A fresh, empty grant_scheduler database under the running
        scheduler and computes."""
        fresh = gs_base.DatabaseFixture("mysql")
        fresh.setUp()
        self.addCleanup(fresh.cleanUp)
        self.flags(connection=fresh.url, group="grant_scheduler_database")
        self.driver._lazy.set(None)
        gs_hooks.use(None)
        self.assertEqual([], self.gs.hosts())

    def sync_instance_info(self):
        """What every compute casts every 120 s: its instances' uuids."""
        ctxt = nova_context.get_admin_context()
        for compute in self.computes.values():
            compute.manager._sync_scheduler_instance_info(ctxt)

    def fill_until_no_valid_host(self, limit=4):
        for _ in range(limit):
            server = self.boot(expected_state=("ACTIVE", "ERROR"))
            if server["status"] == "ERROR":
                self.assertIn("No valid host", server["fault"]["message"])
                return
        self.fail("no NoValidHost after %d more servers" % limit)

    def test_first_request_claims_what_the_node_runs(self):
        self.boot()
        self.swap_database()
        self.boot()
        # The node was registered by that request, with the server that
        # was already there claimed.
        self.assertEqual({"host1": self.flavor_resources(2)}, self.usage())
        self.fill_until_no_valid_host()
        self.assertEqual(base.SLOTS_PER_HOST, len(self.active_on("host1")))
        self.assertEqual([], self.nova_over_capacity())
        self.assertEqual([], self.over_limit())
        self.assertEqual([], self.gs.check())

    def test_instance_sync_claims_what_the_books_lost(self):
        self.boot()
        self.assertEqual({"host1": self.flavor_resources(1)}, self.usage())
        self.swap_database()
        # The scheduler process still remembers the server as claimed.
        self.sync_instance_info()
        self.fill_until_no_valid_host()
        self.sync_instance_info()
        self.assertEqual(base.SLOTS_PER_HOST, len(self.active_on("host1")))
        self.assertEqual({"host1": self.flavor_resources(2)}, self.usage())
        self.assertEqual([], self.nova_over_capacity())
        self.assertEqual([], self.over_limit())

    def test_periodic_reconciliation_restores_the_books(self):
        self.boot()
        self.swap_database()
        self.boot()
        # What the release's SchedulerManager runs every
        # periodic_task_interval: the driver's periodic tasks, among them
        # the reconciliation with Nova's records.
        self.scheduler.manager._run_periodic_tasks(
            nova_context.get_admin_context()
        )
        self.assertEqual({"host1": self.flavor_resources(2)}, self.usage())
        self.assertEqual([], self.gs.check())
        self.boot(expected_state="ERROR")
        self.assertEqual(base.SLOTS_PER_HOST, len(self.active_on("host1")))
        self.assertEqual([], self.nova_over_capacity())

    def test_a_restarted_scheduler_claims_what_the_node_runs(self):
        # A scheduler process that starts with the node's servers already
        # running (nothing remembered) reads them from the node's cell
        # when it registers the node (on 18 through the host mapping, as
        # its HostManager has no _get_cell_mapping_for_host).
        self.boot()
        self.swap_database()
        self.driver.host_manager.instance_claims._claimed.clear()
        self.boot()
        self.assertEqual({"host1": self.flavor_resources(2)}, self.usage())
        self.boot(expected_state="ERROR")
        self.assertEqual([], self.gs.check())
        self.assertEqual([], self.nova_over_capacity())
