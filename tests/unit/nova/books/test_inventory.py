"""Placement's inventories as grant_scheduler's capacities
(``grant_scheduler.nova.books.inventory``); no Nova needed."""

import types
import unittest

from grant_scheduler import api
from grant_scheduler.nova.books import inventory


def _inventory(total, reserved=0, ratio=1.0, max_unit=None):
    return {
        "total": total,
        "reserved": reserved,
        "allocation_ratio": ratio,
        "min_unit": 1,
        "max_unit": max_unit or total,
        "step_size": 1,
    }


class TestCapacityFrom(unittest.TestCase):
    def test_every_field_is_placements(self):
        capacity = inventory.capacity_from(
            {
                "VCPU": _inventory(2, reserved=0, ratio=2.0),
                "MEMORY_MB": _inventory(2560, reserved=0, ratio=1.0),
                "DISK_GB": _inventory(20, reserved=1, ratio=1.5),
            }
        )
        self.assertEqual(api.Resources(2, 2560, 20), capacity.total)
        self.assertEqual(api.Resources(0, 0, 1), capacity.reserved)
        self.assertEqual(
            (2.0, 1.0, 1.5),
            (
                capacity.cpu_allocation_ratio,
                capacity.ram_allocation_ratio,
                capacity.disk_allocation_ratio,
            ),
        )
        self.assertEqual(api.Resources(4, 2560, 28), capacity.limit())

    def test_dedicated_cpus_are_their_own_class(self):
        capacity = inventory.capacity_from(
            {"PCPU": _inventory(8, reserved=2), "MEMORY_MB": _inventory(64)}
        )
        self.assertEqual(api.Resources(0, 64, 0, PCPU=8), capacity.total)
        self.assertEqual(api.Resources(PCPU=2), capacity.reserved)
        self.assertEqual(["MEMORY_MB", "PCPU"], capacity.classes())

    def test_every_field_of_every_class_is_placements(self):
        capacity = inventory.capacity_from(
            {
                "CUSTOM_BAREMETAL_GOLD": _inventory(1),
                "VCPU": {
                    "total": 16,
                    "reserved": 2,
                    "allocation_ratio": 4.0,
                    "min_unit": 1,
                    "max_unit": 8,
                    "step_size": 2,
                },
            }
        )
        self.assertEqual(
            api.Inventory(16, 2, 4.0, 1, 8, 2), capacity.inventories["VCPU"]
        )
        self.assertEqual(
            api.Resources(56, CUSTOM_BAREMETAL_GOLD=1), capacity.limit()
        )
        self.assertEqual(["VCPU", "CUSTOM_BAREMETAL_GOLD"], capacity.classes())

    def test_disk_from_a_sharing_provider_counts_nothing_here(self):
        capacity = inventory.capacity_from(
            {"VCPU": _inventory(4), "MEMORY_MB": _inventory(1024)}
        )
        self.assertEqual(0, capacity.total.disk_gb)
        self.assertEqual(0, capacity.limit().disk_gb)

    def test_no_inventory_is_no_capacity(self):
        self.assertIsNone(inventory.capacity_from({}))

    def test_an_ironic_node_is_its_one_unit(self):
        capacity = inventory.capacity_from(
            {"CUSTOM_BAREMETAL_GOLD": _inventory(1)}
        )
        self.assertEqual(
            api.Resources(CUSTOM_BAREMETAL_GOLD=1), capacity.limit()
        )


class _Response:
    def __init__(self, status_code, body):
        self.status_code = status_code
        self._body = body

    def json(self):
        return self._body


class _Client:
    """Answers GET as placement would, from ``providers``
    ``{uuid: (generation, inventories)}``."""

    def __init__(self, providers):
        self.providers = providers
        self.usages = {}
        self.allocations = {}
        self.urls = []

    def get(self, url, version=None, global_request_id=None):
        self.urls.append(url)
        if url == "/resource_providers":
            return _Response(
                200,
                {
                    "resource_providers": [
                        {"uuid": uuid, "generation": generation}
                        for uuid, (generation, _) in self.providers.items()
                    ]
                },
            )
        uuid = url.split("/")[2]
        if uuid not in self.providers:
            return _Response(404, {})
        if url.endswith("/usages"):
            return _Response(
                200,
                {
                    "usages": self.usages.get(uuid, {}),
                    "resource_provider_generation": self.providers[uuid][0],
                },
            )
        if url.endswith("/allocations"):
            held = self.allocations.get(uuid, {})
            return _Response(
                200,
                {
                    "allocations": {
                        consumer: {"resources": resources}
                        for consumer, resources in held.items()
                    },
                    "resource_provider_generation": self.providers[uuid][0],
                },
            )
        return _Response(200, {"inventories": self.providers[uuid][1]})


class TestPlacementInventory(unittest.TestCase):
    def setUp(self):
        self.client = _Client(
            {
                "a": (1, {"VCPU": _inventory(2), "MEMORY_MB": _inventory(8)}),
                "b": (5, {"VCPU": _inventory(4), "MEMORY_MB": _inventory(8)}),
            }
        )
        self.inventory = inventory.PlacementInventory(lambda: self.client)

    def test_a_node_is_read_from_its_provider(self):
        self.assertEqual(
            api.Resources(4, 8, 0),
            self.inventory.capacity(None, "b").total,
        )
        self.assertEqual(
            ["/resource_providers/b/inventories"], self.client.urls
        )

    def test_a_provider_placement_does_not_have_is_no_capacity(self):
        self.assertIsNone(self.inventory.capacity(None, "c"))

    def test_only_providers_whose_generation_moved_are_changed(self):
        self.assertEqual({"a", "b"}, self.inventory.changed(None))
        self.assertEqual(set(), self.inventory.changed(None))
        self.client.providers["b"] = (6, self.client.providers["b"][1])
        self.client.providers["c"] = (0, {})
        self.assertEqual({"b", "c"}, self.inventory.changed(None))

    def test_what_each_consumer_holds_on_a_provider(self):
        self.client.allocations["a"] = {"u1": {"PCPU": 2, "MEMORY_MB": 4}}
        self.assertEqual(
            {"u1": api.Resources(0, 4, 0, PCPU=2)},
            self.inventory.allocations(None, "a"),
        )
        self.assertEqual({}, self.inventory.allocations(None, "b"))
        self.assertIsNone(self.inventory.allocations(None, "c"))

    def test_placement_not_answering_changes_nothing(self):
        def broken(*args, **kwargs):
            raise OSError("placement is down")

        self.client.get = broken
        self.assertIsNone(self.inventory.changed(None))
        self.assertIsNone(self.inventory.capacity(None, "a"))


def _flavor(vcpus, memory_mb, root_gb, ephemeral_gb=0, swap=0, **specs):
    return types.SimpleNamespace(
        vcpus=vcpus,
        memory_mb=memory_mb,
        root_gb=root_gb,
        ephemeral_gb=ephemeral_gb,
        swap=swap,
        extra_specs=specs,
    )
