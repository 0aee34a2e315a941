"""The request shapes of ``tests/nova18_22/decisions.py`` in Nova 22's
functional framework, with the stock FilterScheduler and with
grant_scheduler, and the shapes only Nova 22's fake driver can report:
a host of two nodes, Ironic-style nodes of one custom resource class,
DISK_GB from a sharing provider."""

import sys
import types
import uuid

from nova import context as nova_context

from grant_scheduler import api
from tests.nova18_22 import decisions
from tests.nova22.in_nova import base

Decisions = decisions.Decisions


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
        self.admin.put_service(service["id"], {"status": "enabled"})
        server = self.boot_flavor(flavor, availability_zone="nova:host1")
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])


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
        self.placement_client.post(
            "/resource_providers",
            {"name": "shared-disk", "uuid": shared},
            version="1.20",
        )
        self.placement_client.put(
            "/resource_providers/%s/inventories" % shared,
            {
                "resource_provider_generation": 0,
                "inventories": {"DISK_GB": {"total": total}},
            },
        )
        generation = self.placement_client.get(
            "/resource_providers/%s" % shared
        ).body["generation"]
        self.placement_client.put(
            "/resource_providers/%s/traits" % shared,
            {
                "resource_provider_generation": generation,
                "traits": ["MISC_SHARES_VIA_AGGREGATE"],
            },
            version="1.6",
        )
        aggregate = str(uuid.uuid4())
        for rp in (shared, self.provider("host1")):
            generation = self.placement_client.get(
                "/resource_providers/%s" % rp
            ).body["generation"]
            self.placement_client.put(
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


class _StockTestBase(base.NovaTestBase):
    """Nova's services with the stock FilterScheduler and the same
    computes as ``base.GrantsTestBase``."""


class TestStockDecisions(decisions.OneNodeDecisions, _StockTestBase):
    pass


class TestStockTwoNodeDecisions(TwoNodeDecisions, _StockTestBase):
    pass


class TestStockBareMetalDecisions(BareMetalDecisions, _StockTestBase):
    pass


class TestStockGroupDecisions(decisions.FlowingGroupDecisions, _StockTestBase):
    pass


class TestStockAlternateDecisions(
    decisions.AlternateDecisions, _StockTestBase
):
    pass


class TestStockSharedDiskDecisions(SharedDiskDecisions, _StockTestBase):
    pass


class _GrantsBooks(decisions.GrantsBooks):
    def test_the_driver_is_grant_scheduler(self):
        self.assertEqual("GrantSchedulerDriver", type(self.driver).__name__)


class TestGrantsDecisions(
    _GrantsBooks, decisions.OneNodeDecisions, base.GrantsTestBase
):
    pass


class TestGrantsTwoNodeDecisions(
    _GrantsBooks, TwoNodeDecisions, base.GrantsTestBase
):
    pass


class TestGrantsBareMetalDecisions(
    _GrantsBooks, BareMetalDecisions, base.GrantsTestBase
):
    def test_each_unit_is_granted_claimed_and_in_the_books(self):
        self.test_each_node_takes_one_bare_metal_server()
        unit = api.Resources(CUSTOM_BAREMETAL_GOLD=1)
        grants = self.gs.grants()
        self.assertEqual(sorted(self.HOSTS), sorted(g.host for g in grants))
        self.assertEqual({unit}, {g.resources for g in grants})
        # Each grant was consumed by its compute's claim.
        self.assertEqual({"consumed"}, {g.state for g in grants})
        books = {r.state.host: r for r in self.gs.hosts()}
        for host in self.HOSTS:
            self.assertEqual(unit, books[host].state.used)
            self.assertEqual(unit, books[host].claimed)
            self.assertEqual(unit, books[host].state.limit)
        self.assertEqual([], self.gs.check())


class TestGrantsSharedDiskDecisions(SharedDiskDecisions, base.GrantsTestBase):
    pass


class TestGrantsGroupDecisions(
    decisions.FlowingGroupDecisions, base.GrantsTestBase
):
    pass


class TestGrantsAlternateDecisions(
    decisions.AlternateDecisions, base.GrantsTestBase
):
    pass


class TestStockWeighingDecisions(decisions.WeighingDecisions, _StockTestBase):
    pass


class TestGrantsWeighingDecisions(
    decisions.WeighingDecisions, base.GrantsTestBase
):
    pass


class TestStockPinnedDecisions(decisions.PinnedDecisions, _StockTestBase):
    pass


class TestGrantsPinnedDecisions(
    _GrantsBooks,
    decisions.PinnedDecisions,
    base.GrantsTestBase,
):
    pass
