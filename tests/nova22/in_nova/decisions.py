"""The same request shapes decided by Nova 22's stock FilterScheduler and
by grant_scheduler, side by side.

Each scenario is written once (``Decisions``) and run twice: by
``TestStockDecisions`` with Nova's own ``filter_scheduler`` and by
``TestGrantsDecisions`` with ``[scheduler] driver = grant_scheduler``,
every option at its default.  The assertions are what the stock
scheduler does (its class passing shows it), so grant_scheduler passing
the same assertions is deciding as stock decides: the same servers
ACTIVE, on the same hosts, the same NoValidHost, the same allocations
in placement.

The inventory a node offers is placement's in every scenario (an
allocation ratio or a reserved amount set through placement's API, as an
operator sets them since Stein), and a flavour's amounts are its
allocation in placement (``resources:<CLASS>=N`` overrides).
"""

import sys
import types
import uuid

import eventlet
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova.scheduler import weights
from nova.tests.functional import integrated_helpers

from tests.nova22.in_nova import base


class Decisions:
    """The scenarios' helpers; mixed into a test base that starts one
    compute per name in ``HOSTS`` with ``compute_driver`` (by default
    ``base.DiskFakeDriver``: 2 vCPU, 2,560 MB, 20 GB)."""

    HOSTS = ("host1",)

    def _setup_services(self):
        # NOTE: the computes' first report puts these ratios into
        # placement and their compute node records (Nova's own initial
        # ratios are 16.0 and 1.5): one vCPU, one MB, one GB each.
        for name in ("cpu", "ram", "disk"):
            self.flags(**{"initial_%s_allocation_ratio" % name: 1.0})
        super()._setup_services()

    # -- helpers -----------------------------------------------------------

    def make_flavor(self, vcpus, ram, disk, extra_specs=None):
        flavor_id = str(uuid.uuid4())
        self.api.post_flavor(
            {
                "flavor": {
                    "name": "decide-" + flavor_id[:8],
                    "id": flavor_id,
                    "ram": ram,
                    "vcpus": vcpus,
                    "disk": disk,
                }
            }
        )
        if extra_specs:
            self.api.post_extra_spec(flavor_id, {"extra_specs": extra_specs})
        return flavor_id

    def boot_flavor(self, flavor_id, expected_state="ACTIVE", **extra):
        body = self._build_server(flavor_id=flavor_id, networks="none")
        body.update(extra)
        server = self.api.post_server({"server": body})
        return self._wait_for_state_change(server, expected_state)

    def boot_until_no_valid_host(self, flavor_id, most):
        """Boot ``flavor_id`` servers one after another until one ends in
        ERROR (at most ``most``); the ACTIVE ones and the failed one."""
        active = []
        for _ in range(most):
            body = self._build_server(flavor_id=flavor_id, networks="none")
            server = self.api.post_server({"server": body})
            server = self._wait_until_built(server)
            self.check_books()
            if server["status"] != "ACTIVE":
                return active, server
            active.append(server)
        self.fail("%d servers booted, none refused" % most)

    def _wait_until_built(self, server):
        for _ in range(200):
            server = self.api.get_server(server["id"])
            if server["status"] in ("ACTIVE", "ERROR"):
                return server
            self._sleep()
        self.fail("server %s never left BUILD" % server["id"])

    @staticmethod
    def _sleep():
        eventlet.sleep(0.05)

    def check_books(self):
        """After a boot: what the scheduler's own records must say (the
        stock scheduler has none)."""

    def run_periodic_tasks(self):
        """The scheduler service's periodic tasks, as it runs them every
        ``[scheduler] periodic_task_interval``."""
        self.scheduler.manager.periodic_tasks(nova_context.get_admin_context())
        stop = getattr(self.scheduler.manager.driver, "stop", None)
        if stop is not None:
            self.addCleanup(stop)

    def provider(self, host):
        [found] = self.placement.get(
            "/resource_providers?name=%s" % host
        ).body["resource_providers"]
        return found["uuid"]

    def set_inventory(self, host, resource_class, **fields):
        """Change ``host``'s inventory of one class in placement, as an
        operator does through placement's API."""
        rp = self.provider(host)
        url = "/resource_providers/%s/inventories/%s" % (rp, resource_class)
        inventory = self.placement.get(url).body
        inventory.update(fields)
        inventory["resource_provider_generation"] = self.placement.get(
            "/resource_providers/%s" % rp
        ).body["generation"]
        self.assertEqual(200, self.placement.put(url, inventory).status)

    def allocated(self, server):
        """``{class: amount}`` placement holds for ``server`` on its host's
        provider."""
        allocations = self._get_allocations_by_server_uuid(server["id"])
        provider = self.provider(server["OS-EXT-SRV-ATTR:host"])
        return allocations[provider]["resources"]

    def refuse_forced_onto_disabled_host1(self):
        """Disable host1's compute service and force a server onto host1:
        NoValidHost.  Returns the service and the flavour."""
        [service] = self.api.get_services(binary="nova-compute", host="host1")
        self.api.put_service(service["id"], {"status": "disabled"})
        flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
        server = self.boot_flavor(
            flavor, expected_state="ERROR", availability_zone="nova:host1"
        )
        self.assert_no_valid_host(server)
        return service, flavor

    def assert_no_valid_host(self, server):
        self.assertEqual("ERROR", server["status"])
        self.assertIn("No valid host", server["fault"]["message"])
        self.assertEqual(
            {}, self._get_allocations_by_server_uuid(server["id"])
        )


class OneNodeDecisions(Decisions):
    """Scenarios on one node."""

    def test_allocation_ratio_set_in_placement(self):
        """Placement's VCPU allocation ratio 2.0 decides, not the compute
        node record's 1.0: a 2-vCPU node takes four 1-vCPU servers."""
        flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
        first = self.boot_flavor(flavor)
        # Raised once the node is known and holds a server.
        self.set_inventory("host1", "VCPU", allocation_ratio=2.0)
        node = objects.ComputeNode.get_first_node_by_host_for_old_compat(
            nova_context.get_admin_context(), "host1"
        )
        self.assertEqual(1.0, node.cpu_allocation_ratio)
        active, refused = self.boot_until_no_valid_host(flavor, 6)
        self.assertEqual(4, len([first] + active))
        self.assert_no_valid_host(refused)

    def test_reserved_memory_set_in_placement(self):
        """Placement's MEMORY_MB reserved amount decides, not the
        scheduler's own ``reserved_host_memory_mb``: with nothing reserved
        a 2,560 MB node takes two 1,280 MB servers."""
        self.set_inventory("host1", "MEMORY_MB", reserved=0)
        flavor = self.make_flavor(vcpus=1, ram=1280, disk=1)
        active, refused = self.boot_until_no_valid_host(flavor, 4)
        self.assertEqual(2, len(active))
        self.assert_no_valid_host(refused)

    def test_reserved_memory_raised_in_placement(self):
        """A reserved amount raised in placement once the node holds a
        server: the 2,560 MB node keeps its one 1,280 MB server and takes
        no second."""
        flavor = self.make_flavor(vcpus=1, ram=1280, disk=1)
        self.set_inventory("host1", "MEMORY_MB", reserved=0)
        self.boot_flavor(flavor)
        self.set_inventory("host1", "MEMORY_MB", reserved=1024)
        refused = self.boot_flavor(flavor, expected_state="ERROR")
        self.assert_no_valid_host(refused)

    def test_a_resources_override_is_what_is_taken(self):
        """``resources:VCPU=1`` on a 2-vCPU flavour allocates one VCPU, so
        a 2-vCPU node takes two of them."""
        flavor = self.make_flavor(
            vcpus=2, ram=128, disk=1, extra_specs={"resources:VCPU": "1"}
        )
        active, refused = self.boot_until_no_valid_host(flavor, 4)
        self.assertEqual(2, len(active))
        for server in active:
            self.assertEqual(1, self.allocated(server)["VCPU"])
        self.assert_no_valid_host(refused)

    def test_swap_is_disk_in_placement(self):
        """A flavour's swap is part of its DISK_GB allocation: 20 GB of
        disk takes one server of 7 GB root and 7,168 MB swap, not two."""
        flavor_id = str(uuid.uuid4())
        self.api.post_flavor(
            {
                "flavor": {
                    "name": "swap-" + flavor_id[:8],
                    "id": flavor_id,
                    "ram": 128,
                    "vcpus": 1,
                    "disk": 7,
                    "swap": 7168,
                }
            }
        )
        active, refused = self.boot_until_no_valid_host(flavor_id, 3)
        self.assertEqual(1, len(active))
        self.assertEqual(14, self.allocated(active[0])["DISK_GB"])
        self.assert_no_valid_host(refused)

    def test_a_forced_host_whose_service_is_disabled(self):
        """A server forced onto a host whose compute service is disabled
        is refused (placement leaves a disabled compute out)."""
        self.refuse_forced_onto_disabled_host1()


class TwoNodeDecisions(Decisions):
    """Scenarios on ``host1`` of two nodes beside ``host2`` of one."""

    HOSTS = ("host1", "host2")
    NODES = ("host1-a", "host1-b")

    def _setup_compute_service(self):
        compute = super()._setup_compute_service()
        host1 = self.computes["host1"]
        host1.driver._set_nodes(list(self.NODES))
        host1.manager.update_available_resource(
            nova_context.get_admin_context()
        )
        return compute

    def test_a_forced_host_of_two_nodes_whose_service_is_disabled(self):
        service, flavor = self.refuse_forced_onto_disabled_host1()
        # Enabled again, the forced host takes it.
        self.api.put_service(service["id"], {"status": "enabled"})
        server = self.boot_flavor(flavor, availability_zone="nova:host1")
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])


class GroupDecisions(Decisions):
    """Server groups on two hosts of one node each."""

    HOSTS = ("host1", "host2")

    def hold_first_build(self):
        """The first build a compute is asked for waits (as a build on
        its way to a compute does) until the returned event is sent:
        its instance has no host in Nova's records until then."""
        release = eventlet.event.Event()
        held = []
        for compute in self.computes.values():
            real = compute.manager.build_and_run_instance

            def delayed(*args, _real=real, **kwargs):
                if held:
                    return _real(*args, **kwargs)
                held.append(kwargs.get("instance"))

                def later():
                    release.wait()
                    _real(*args, **kwargs)

                eventlet.spawn_n(later)

            compute.manager.build_and_run_instance = delayed
        return release

    def test_anti_affinity_before_the_first_is_on_its_host(self):
        self.flags(max_attempts=1, group="scheduler")
        group = self.api.post_server_groups(
            {"name": "apart", "policy": "anti-affinity"}
        )
        flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
        # A server on each host: the computes' instance information now
        # flows to the scheduler, whose HostManager then keeps the
        # in-flight record of a chosen host between requests.
        for host in self.HOSTS:
            self.boot_flavor(flavor, availability_zone="nova:" + host)
        release = self.hold_first_build()
        servers = []
        for _ in range(2):
            body = self._build_server(flavor_id=flavor, networks="none")
            servers.append(
                self.api.post_server(
                    {
                        "server": body,
                        "os:scheduler_hints": {"group": group["id"]},
                    }
                )
            )
        second = self._wait_until_built(servers[1])
        release.send()
        first = self._wait_until_built(servers[0])
        self.assertEqual(
            ("ACTIVE", "ACTIVE"),
            (first["status"], second["status"]),
            (first.get("fault"), second.get("fault")),
        )
        self.assertNotEqual(
            first["OS-EXT-SRV-ATTR:host"], second["OS-EXT-SRV-ATTR:host"]
        )


class HostNameWeigher(weights.BaseHostWeigher):
    """host1 first, then host2, then host3: a repeatable ranking."""

    def _weigh_object(self, host_state, weight_properties):
        return -int(host_state.host[len("host") :])


class AlternateDecisions(Decisions):
    """Alternates for a reschedule, on three hosts ranked by name."""

    HOSTS = ("host1", "host2", "host3")

    def _setup_services(self):
        self.flags(
            weight_classes=[__name__ + ".HostNameWeigher"],
            group="filter_scheduler",
        )
        self.flags(max_attempts=2, group="scheduler")
        super()._setup_services()

    def hold_in_placement(self, host, resources):
        """Allocate ``resources`` of ``host`` to a consumer that is not a
        Nova instance."""
        response = self.placement.put(
            "/allocations/%s" % uuid.uuid4(),
            {
                "allocations": {self.provider(host): {"resources": resources}},
                "project_id": str(uuid.uuid4()),
                "user_id": str(uuid.uuid4()),
                "consumer_generation": None,
            },
            version="1.28",
        )
        self.assertEqual(204, response.status)

    def test_the_alternate_is_a_host_placement_has_room_on(self):
        self.hold_in_placement("host2", {"VCPU": 2})
        self.run_periodic_tasks()
        failed = []

        def fail_first(instance):
            if not failed:
                failed.append(instance.host)
                raise nova_exception.ComputeResourcesUnavailable(
                    reason="the first build fails"
                )

        base.DiskFakeDriver.at_spawn = fail_first
        self.addCleanup(setattr, base.DiskFakeDriver, "at_spawn", None)
        flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
        server = self.boot_flavor(flavor)
        self.assertEqual(["host1"], failed)
        self.assertEqual("host3", server["OS-EXT-SRV-ATTR:host"])


class BareMetalFakeDriver(base.DiskFakeDriver):
    """A node as Nova 22's Ironic driver reports it: one unit of a custom
    resource class, no VCPU, MEMORY_MB or DISK_GB, a compute node record
    of zeros."""

    vcpus = 0
    memory_mb = 0
    local_gb = 0

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        provider_tree.update_inventory(
            nodename,
            {
                "CUSTOM_BAREMETAL_GOLD": {
                    "total": 1,
                    "reserved": 0,
                    "min_unit": 1,
                    "max_unit": 1,
                    "step_size": 1,
                    "allocation_ratio": 1.0,
                }
            },
        )


_BARE_METAL = types.ModuleType("nova.virt.gs_decisions_bare_metal")
_BARE_METAL.BareMetalFakeDriver = BareMetalFakeDriver
sys.modules[_BARE_METAL.__name__] = _BARE_METAL


class BareMetalDecisions(Decisions):
    """Ironic-style nodes and flavours, as Nova 17-22 schedule them."""

    HOSTS = ("host1", "host2")
    compute_driver = "gs_decisions_bare_metal.BareMetalFakeDriver"

    def check_books(self):
        """Nothing of a bare-metal node is in the books (``placement``)."""

    def test_each_node_takes_one_bare_metal_server(self):
        flavor = self.make_flavor(
            vcpus=4,
            ram=4096,
            disk=100,
            extra_specs={
                "resources:CUSTOM_BAREMETAL_GOLD": "1",
                "resources:VCPU": "0",
                "resources:MEMORY_MB": "0",
                "resources:DISK_GB": "0",
            },
        )
        active, refused = self.boot_until_no_valid_host(flavor, 4)
        self.assertEqual(
            sorted(self.HOSTS),
            sorted(s["OS-EXT-SRV-ATTR:host"] for s in active),
        )
        for server in active:
            self.assertEqual(
                {"CUSTOM_BAREMETAL_GOLD": 1}, self.allocated(server)
            )
        self.assert_no_valid_host(refused)


class SharedDiskFakeDriver(base.DiskFakeDriver):
    """A compute whose disk is a sharing provider's: its own provider
    has no DISK_GB."""

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        super().update_provider_tree(provider_tree, nodename, allocations)
        inventory = dict(provider_tree.data(nodename).inventory)
        inventory.pop("DISK_GB", None)
        provider_tree.update_inventory(nodename, inventory)


_BARE_METAL.SharedDiskFakeDriver = SharedDiskFakeDriver


class SharedDiskDecisions(Decisions):
    """One compute taking DISK_GB from a sharing provider in its
    aggregate."""

    compute_driver = "gs_decisions_bare_metal.SharedDiskFakeDriver"

    def share_disk(self, total):
        shared = str(uuid.uuid4())
        self.placement.post(
            "/resource_providers",
            {"name": "shared-disk", "uuid": shared},
            version="1.20",
        )
        self.placement.put(
            "/resource_providers/%s/inventories" % shared,
            {
                "resource_provider_generation": 0,
                "inventories": {"DISK_GB": {"total": total}},
            },
        )
        generation = self.placement.get(
            "/resource_providers/%s" % shared
        ).body["generation"]
        self.placement.put(
            "/resource_providers/%s/traits" % shared,
            {
                "resource_provider_generation": generation,
                "traits": ["MISC_SHARES_VIA_AGGREGATE"],
            },
            version="1.6",
        )
        aggregate = str(uuid.uuid4())
        for rp in (shared, self.provider("host1")):
            generation = self.placement.get(
                "/resource_providers/%s" % rp
            ).body["generation"]
            self.placement.put(
                "/resource_providers/%s/aggregates" % rp,
                {
                    "resource_provider_generation": generation,
                    "aggregates": [aggregate],
                },
                version="1.19",
            )
        return shared

    def check_books(self):
        """DISK_GB is not the node's: placement's usage of the node has
        none (``_GrantsBooks`` compares the three classes)."""

    def test_disk_from_a_sharing_provider(self):
        shared = self.share_disk(25)
        flavor = self.make_flavor(vcpus=1, ram=128, disk=10)
        active, refused = self.boot_until_no_valid_host(flavor, 4)
        self.assertEqual(2, len(active))
        for server in active:
            allocations = self._get_allocations_by_server_uuid(server["id"])
            self.assertEqual({"DISK_GB": 10}, allocations[shared]["resources"])
            self.assertNotIn("DISK_GB", self.allocated(server))
        self.assert_no_valid_host(refused)


class _StockTestBase(integrated_helpers._IntegratedTestBase):
    """Nova's services with the stock FilterScheduler and the same
    computes as ``base.GrantsTestBase``."""

    ADMIN_API = True
    microversion = "latest"
    compute_driver = base.COMPUTE_DRIVER

    def _setup_services(self):
        self.flags(compute_driver=self.compute_driver)
        self.flags(api_paste_config="/etc/nova/api-paste.ini", group="wsgi")
        super()._setup_services()

    def _setup_compute_service(self):
        for host in self.HOSTS:
            self._start_compute(host)
        return self.computes[self.HOSTS[0]]


class TestStockDecisions(OneNodeDecisions, _StockTestBase):
    pass


class TestStockTwoNodeDecisions(TwoNodeDecisions, _StockTestBase):
    pass


class TestStockBareMetalDecisions(BareMetalDecisions, _StockTestBase):
    pass


class TestStockGroupDecisions(GroupDecisions, _StockTestBase):
    pass


class TestStockAlternateDecisions(AlternateDecisions, _StockTestBase):
    pass


class TestStockSharedDiskDecisions(SharedDiskDecisions, _StockTestBase):
    pass


class _GrantsBooks:
    def check_books(self):
        """The books, once reconciled with Nova's records as every
        scheduler does periodically, hold on each node what placement
        holds there, and no node is over its limit."""
        self.reconcile()
        for host in self.HOSTS:
            used = self.usage()[host]
            self.assertEqual(
                (used.vcpus, used.memory_mb, used.disk_gb),
                self.placement_usage(host),
            )
        self.assertEqual([], self.over_limit())

    def test_the_driver_is_grant_scheduler(self):
        self.assertEqual("GrantSchedulerDriver", type(self.driver).__name__)


class TestGrantsDecisions(_GrantsBooks, OneNodeDecisions, base.GrantsTestBase):
    pass


class TestGrantsTwoNodeDecisions(
    _GrantsBooks, TwoNodeDecisions, base.GrantsTestBase
):
    pass


class TestGrantsBareMetalDecisions(BareMetalDecisions, base.GrantsTestBase):
    def test_no_grant_is_taken_and_nothing_is_in_the_books(self):
        self.test_each_node_takes_one_bare_metal_server()
        self.assertEqual([], self.gs.grants())
        self.assertEqual([], list(self.gs.hosts()))
        self.assertEqual([], self.gs.check())


class TestGrantsSharedDiskDecisions(SharedDiskDecisions, base.GrantsTestBase):
    pass


class TestGrantsGroupDecisions(GroupDecisions, base.GrantsTestBase):
    pass


class TestGrantsAlternateDecisions(AlternateDecisions, base.GrantsTestBase):
    pass
