"""Nova 22's own functional framework with grant_scheduler as its driver.

``nova.tests.functional.integrated_helpers._IntegratedTestBase`` starts
Nova's real API (through wsgi-intercept), conductor, scheduler and compute
services in one process, with the placement fixture and ``CastAsCall``.
Here ``[scheduler] driver = grant_scheduler`` (loaded by Nova's
SchedulerManager through stevedore from the installed wheel's entry
point), its database a throw-away MariaDB database, and each compute a
fake virt driver with a small, exact capacity.  Every protocol option
keeps its default.
"""

from nova import conf as nova_conf
from nova.tests.functional import integrated_helpers

from grant_scheduler import conf as gs_conf
from tests import base as gs_base
from tests.nova18_22 import in_nova as shared

CONF = nova_conf.CONF

# Nova loads "nova.virt." + compute_driver; the test's own drivers are
# registered under this name (the claiming drivers are placed for real,
# see test_virt_driver.py).
TEST_DRIVERS = "grant_scheduler_test_drivers"

# Nova's fake driver with a small capacity and real free disk: two
# FLAVOR-sized servers fill a host exactly.
DiskFakeDriver = shared.DiskFakeDriver
FLAVOR = shared.FLAVOR
SLOTS_PER_HOST = shared.SLOTS_PER_HOST
COMPUTE_DRIVER = shared.register_test_drivers(TEST_DRIVERS)


class NovaTestBase(integrated_helpers._IntegratedTestBase):
    """Nova's services with its configured scheduler and one compute
    with ``compute_driver`` per name in ``HOSTS``."""

    ADMIN_API = True
    microversion = "latest"
    HOSTS = ("host1", "host2")
    compute_driver = COMPUTE_DRIVER

    def _setup_services(self):
        self.flags(compute_driver=self.compute_driver)
        # NOTE: Nova looks for api-paste.ini beside dist-packages; Debian
        # ships it in /etc/nova.
        self.flags(api_paste_config="/etc/nova/api-paste.ini", group="wsgi")
        super()._setup_services()

    def _setup_compute_service(self):
        for host in self.HOSTS:
            self._start_compute(host)
        return self.computes[self.HOSTS[0]]

    @property
    def placement_client(self):
        return self.placement


class GrantsTestBase(shared.GrantsHelpers, NovaTestBase):
    """Nova's services with the grant_scheduler driver and N computes."""

    # NOTE: GrantsHelpers, first in the order, declares it abstract.
    placement_client = NovaTestBase.placement_client

    def _setup_services(self):
        gs_conf.register_opts(CONF)
        self.gs_db = self.useFixture(gs_base.DatabaseFixture("mysql"))
        self.flags(
            connection=self.database_url(), group="grant_scheduler_database"
        )
        self.flags(driver="grant_scheduler", group="scheduler")
        super()._setup_services()
        self.flavor_id = self._create_flavor(**FLAVOR)

    def database_url(self):
        """The URL the driver reaches grant_scheduler's database by."""
        return self.gs_db.url

    def post_server(self, **extra):
        body = self._build_server(flavor_id=self.flavor_id, networks="none")
        body.update(extra)
        return self.api.post_server({"server": body})

    def boot(self, expected_state="ACTIVE", **extra):
        server = self.post_server(**extra)
        return self._wait_for_state_change(server, expected_state)
