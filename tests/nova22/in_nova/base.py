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

import sys
import types
import uuid

from nova import conf as nova_conf
from nova.tests.functional import integrated_helpers
from nova.virt import fake as fake_virt

from grant_scheduler import api
from grant_scheduler import conf as gs_conf
from tests import base as gs_base

CONF = nova_conf.CONF

# Nova loads "nova.virt." + compute_driver; the test's own drivers are
# registered under this name (the claiming drivers are placed for real,
# see test_virt_driver.py).
TEST_DRIVERS = "grant_scheduler_test_drivers"


class DiskFakeDriver(fake_virt.FakeDriver):
    """Nova's fake driver with a small capacity and real free disk.

    The fake driver reports ``disk_available_least = 0``, which Nova takes
    as free disk, so every host would look full of disk.  Two
    ``FLAVOR``-sized servers fill a host exactly (with Nova's default
    ``reserved_host_memory_mb`` of 512).
    """

    vcpus = 2
    memory_mb = 2048 + 512
    local_gb = 20

    def get_available_resource(self, nodename):
        resources = super().get_available_resource(nodename)
        if resources:
            resources["disk_available_least"] = (
                resources["local_gb"] - resources["local_gb_used"]
            )
        return resources


FLAVOR = {"vcpu": 1, "memory_mb": 1024, "disk": 10, "ephemeral": 0}
SLOTS_PER_HOST = 2

_module = types.ModuleType("nova.virt." + TEST_DRIVERS)
_module.DiskFakeDriver = DiskFakeDriver
sys.modules[_module.__name__] = _module


class GrantsTestBase(integrated_helpers._IntegratedTestBase):
    """Nova's services with the grant_scheduler driver and N computes."""

    ADMIN_API = True
    microversion = "latest"
    HOSTS = ("host1", "host2")
    compute_driver = TEST_DRIVERS + ".DiskFakeDriver"

    def _setup_services(self):
        gs_conf.register_opts(CONF)
        self.gs_db = self.useFixture(gs_base.DatabaseFixture("mysql"))
        self.flags(connection=self.gs_db.url, group="grant_scheduler_database")
        self.flags(driver="grant_scheduler", group="scheduler")
        self.flags(compute_driver=self.compute_driver)
        # NOTE: Nova looks for api-paste.ini beside dist-packages; Debian
        # ships it in /etc/nova.
        self.flags(api_paste_config="/etc/nova/api-paste.ini", group="wsgi")
        super()._setup_services()
        self.flavor_id = self._create_flavor(**FLAVOR)

    def _setup_compute_service(self):
        for host in self.HOSTS:
            self._start_compute(host)
        return self.computes[self.HOSTS[0]]

    @property
    def driver(self):
        return self.scheduler.manager.driver

    @property
    def gs(self):
        """The scheduler driver's own GrantScheduler."""
        return self.driver.grant_scheduler

    def post_server(self, **extra):
        body = self._build_server(flavor_id=self.flavor_id, networks="none")
        body.update(extra)
        return self.api.post_server({"server": body})

    def boot(self, expected_state="ACTIVE", **extra):
        server = self.post_server(**extra)
        return self._wait_for_state_change(server, expected_state)

    def usage(self):
        """``{host: used Resources}`` in grant_scheduler's books."""
        return {r.state.host: r.state.used for r in self.gs.hosts()}

    def placement_provider(self, host):
        [provider] = self.placement.get(
            "/resource_providers?name=%s" % host
        ).body["resource_providers"]
        return provider["uuid"]

    def placement_usage(self, host):
        """``(VCPU, MEMORY_MB, DISK_GB)`` placement records on ``host``."""
        usages = self.placement.get(
            "/resource_providers/%s/usages" % self.placement_provider(host)
        ).body["usages"]
        return (usages["VCPU"], usages["MEMORY_MB"], usages["DISK_GB"])

    def placement_over_capacity(self):
        """Hosts whose placement usage exceeds their inventory's
        capacity, ``(total - reserved) x allocation_ratio``."""
        over = []
        for host in self.HOSTS:
            provider = self.placement_provider(host)
            inventories = self.placement.get(
                "/resource_providers/%s/inventories" % provider
            ).body["inventories"]
            usages = self.placement.get(
                "/resource_providers/%s/usages" % provider
            ).body["usages"]
            for name, inventory in inventories.items():
                capacity = (inventory["total"] - inventory["reserved"]) * (
                    inventory["allocation_ratio"]
                )
                if usages.get(name, 0) > capacity:
                    over.append((host, name))
        return over

    def live_grants(self):
        return [g for g in self.gs.grants() if g.state == "won"]

    def flavor_resources(self, count=1):
        return api.Resources(
            FLAVOR["vcpu"] * count,
            FLAVOR["memory_mb"] * count,
            FLAVOR["disk"] * count,
        )

    def over_limit(self):
        """Hosts over their limit in grant_scheduler's books (I1)."""
        return [
            r.state.host
            for r in self.gs.hosts()
            if not (r.state.used + r.state.granted).fits_within(r.state.limit)
        ]

    def expire_and_reap(self):
        """Move the database clock past every grant's TTL and reap."""
        self.gs.database.clock_offset = self.gs.settings.grant_ttl + 1
        self.addCleanup(setattr, self.gs.database, "clock_offset", 0)
        return self.gs.reap()

    def steal_after_scheduling(self, everywhere=False):
        """After the driver answers, take the chosen host's room away
        (``everywhere``: every host's).

        The grant expires and is reaped (the database clock moved past
        its TTL), then another instance claims all the room there is: the
        build reaching that host finds no grant and no room.
        """
        select = self.driver.select_destinations
        stolen = []

        def select_then_steal(*args, **kwargs):
            answer = select(*args, **kwargs)
            for selections in answer:
                chosen = selections[0]
                self.expire_and_reap()
                self.gs.database.clock_offset = 0
                for selection in selections if everywhere else [chosen]:
                    self.fill(selection.service_host, selection.nodename)
                    stolen.append(selection.service_host)
            return answer

        self.driver.select_destinations = select_then_steal
        self.addCleanup(setattr, self.driver, "select_destinations", select)
        return stolen

    def fill(self, host, node):
        """Claim all the room left on ``host``/``node`` for strangers, each
        at most the node's total (one instance's largest size)."""
        filled = api.Resources()
        while True:
            [report] = [
                r
                for r in self.gs.hosts()
                if (r.state.host, r.state.node) == (host, node)
            ]
            free, total = report.state.free, report.state.capacity.total
            each = api.Resources(
                min(free.vcpus, total.vcpus),
                min(free.memory_mb, total.memory_mb),
                min(free.disk_gb, total.disk_gb),
            )
            if min(each.vcpus, each.memory_mb, each.disk_gb) < 1:
                return filled
            self.gs.claim(str(uuid.uuid4()), host, node, each)
            filled += each
