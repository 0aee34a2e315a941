"""A release's own functional framework with grant_scheduler as its driver.

``nova.tests.functional.integrated_helpers.ProviderUsageBaseTestCase``
(the same in Nova 18 to 21) starts that release's real API (through
wsgi-intercept), conductor and scheduler in one process, with its
placement fixture, the Neutron fixture and ``CastAsCall``; the computes are
its own ``ComputeManager`` services.  Here ``[scheduler] driver =
grant_scheduler`` (loaded by the release's SchedulerManager through
stevedore, from the installed wheel's entry point), its database a
throw-away MariaDB database, and each compute a fake virt driver with a
small, exact capacity.  The wheel's ``nova.hooks`` entry points are
installed too, so every build runs through the build hook as on a compute
host with grant_scheduler installed.  Every protocol option keeps its
default.
"""

import uuid

import eventlet
from nova import conf as nova_conf
from nova import context as nova_context
from nova.tests.functional import integrated_helpers

from grant_scheduler import conf as gs_conf
from grant_scheduler.nova import compat
from grant_scheduler.nova.compute import hooks as gs_hooks
from tests import base as gs_base
from tests.nova18_22 import in_nova as shared

CONF = nova_conf.CONF
RELEASE = compat.release()

# Nova loads "nova.virt." + compute_driver.
TEST_DRIVERS = "grant_scheduler_release_test_drivers"
# nova.tests.unit.image.fake's first image, in every release.
IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"

# Nova's fake driver with a small capacity and real free disk: two
# FLAVOR-sized servers fill a host exactly; its ``at_spawn`` records, per
# instance, what grant_scheduler's books held when the spawn began.
DiskFakeDriver = shared.DiskFakeDriver
FLAVOR = shared.FLAVOR
SLOTS_PER_HOST = shared.SLOTS_PER_HOST
COMPUTE_DRIVER = shared.register_test_drivers(TEST_DRIVERS)
# wait_for's default: the server's host does not matter.
ANY_HOST = shared.ANY_HOST


class GrantsTestBase(
    shared.GrantsHelpers, integrated_helpers.ProviderUsageBaseTestCase
):
    """The release's services with the grant_scheduler driver and N
    computes."""

    HOSTS = ("host1", "host2")
    compute_driver = COMPUTE_DRIVER
    microversion = "latest"

    def setUp(self):
        gs_conf.register_opts(CONF)
        self.flags(driver="grant_scheduler", group="scheduler")
        # Servers in ERROR count against the project's quota (10 instances
        # by default), and the conductor's recheck after scheduling would
        # refuse builds the concurrent test expects.
        self.flags(instances=-1, cores=-1, ram=-1, group="quota")
        self.gs_db = gs_base.DatabaseFixture("mysql")
        self.gs_db.setUp()
        self.addCleanup(self.gs_db.cleanUp)
        self.flags(connection=self.gs_db.url, group="grant_scheduler_database")
        # The hooks build their GrantScheduler from CONF on first use.
        gs_hooks.use(None)
        self.addCleanup(gs_hooks.use, None)
        DiskFakeDriver.at_spawn = None
        self.addCleanup(setattr, DiskFakeDriver, "at_spawn", None)
        super().setUp()
        self.scheduler = self.scheduler_service
        self.addCleanup(self.driver.stop)
        self.computes = getattr(self, "computes", {})
        for host in self.HOSTS:
            self._start_compute(host)
        self.flavor_id = self.create_flavor(**FLAVOR)

    @property
    def placement_client(self):
        return self.placement_api

    # -- servers ----------------------------------------------------------

    def post_server(self, **extra):
        body = {
            "name": "gs-" + uuid.uuid4().hex[:8],
            "imageRef": IMAGE,
            "flavorRef": self.flavor_id,
            "networks": "none",
        }
        body.update(extra)
        return self.api.post_server({"server": body})

    def boot(self, expected_state="ACTIVE", **extra):
        return self.wait_for(self.post_server(**extra), expected_state)

    def eventually(self, expected, read, tries=40):
        """Assert that ``read()`` comes to equal ``expected`` (what a
        compute does after the API answered, such as the delete hook's
        release, may take a moment)."""
        for _ in range(tries):
            found = read()
            if found == expected:
                return
            eventlet.sleep(0.25)
        self.assertEqual(expected, found)

    def _run_periodics(self):
        ctxt = nova_context.get_admin_context()
        for compute in self.computes.values():
            compute.manager.update_available_resource(ctxt)

    def active_on(self, host):
        return [
            s
            for s in self.api.get_servers()
            if s["status"] == "ACTIVE" and s["OS-EXT-SRV-ATTR:host"] == host
        ]
