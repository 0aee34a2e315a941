"""Placement's inventories and allocations as grant_scheduler's amounts
(``grant_scheduler.nova.books.inventory``, ``compat.placement_resources``);
no Nova needed."""

import types
import unittest
from unittest import mock

from grant_scheduler import api
from grant_scheduler.nova import compat
from grant_scheduler.nova.books import claims as nova_claims
from grant_scheduler.nova.books import inventory
from grant_scheduler.nova.books import registry


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


class TestOthers(unittest.TestCase):
    """What placement holds beyond the books' usage and live grants."""

    def setUp(self):
        self.client = _Client(
            {"a": (1, {"VCPU": _inventory(4), "MEMORY_MB": _inventory(64)})}
        )
        self.inventory = inventory.PlacementInventory(lambda: self.client)
        self.capacities = registry.PlacementCapacities(self.inventory)
        self.state = types.SimpleNamespace(
            node_uuid="a",
            used=api.Resources(1, 8, 0),
            granted=api.Resources(1, 8, 0),
        )

    def test_a_consumer_the_books_do_not_know(self):
        self.client.usages["a"] = {"VCPU": 4, "MEMORY_MB": 16, "PCPU": 0}
        self.capacities.look_again(None, self.state)
        self.assertEqual(api.Resources(2, 0, 0), self.capacities.others("a"))

    def test_nothing_beyond_the_books_forgets_what_was(self):
        self.client.usages["a"] = {"VCPU": 4, "MEMORY_MB": 16}
        self.capacities.look_again(None, self.state)
        # The other consumer is gone; a grant not yet in placement makes
        # placement hold less than the books: nothing beyond them.
        self.client.usages["a"] = {"VCPU": 1, "MEMORY_MB": 8}
        self.capacities.look_again(None, self.state)
        self.assertEqual(api.NOTHING, self.capacities.others("a"))

    def test_placement_not_answering_keeps_what_was_seen(self):
        self.client.usages["a"] = {"VCPU": 3, "MEMORY_MB": 16}
        self.capacities.look_again(None, self.state)
        del self.client.providers["a"]
        self.capacities.look_again(None, self.state)
        self.assertEqual(api.Resources(1, 0, 0), self.capacities.others("a"))

    def test_before_placement_there_is_nothing_beyond_the_books(self):
        records = registry.RecordCapacities(lambda: api.NOTHING)
        records.look_again(None, self.state)
        self.assertEqual(api.NOTHING, records.others("a"))
        self.assertIsNone(records.look_now(None, "a"))

    def test_the_usage_now_is_placements_and_notes_nothing(self):
        # Two grants made since this request read the books, claimed in
        # placement already: not another consumer's.
        self.client.usages["a"] = {"VCPU": 4, "MEMORY_MB": 16}
        usage, _ = self.capacities.look_now(None, "a")
        self.assertEqual(api.Resources(4, 16, 0), usage)
        self.assertEqual(api.NOTHING, self.capacities.others("a"))

    def test_no_usage_now_when_placement_does_not_answer(self):
        del self.client.providers["a"]
        self.assertEqual((None, None), self.capacities.look_now(None, "a"))

    def test_the_inventory_is_read_only_where_the_provider_moved(self):
        self.assertEqual({"a"}, self.inventory.changed(None))
        self.client.urls.clear()
        self.assertIsNone(self.capacities.look_now(None, "a")[1])
        self.assertEqual(["/resource_providers/a/usages"], self.client.urls)
        # The inventory lowered in placement since the last sync: its
        # provider's generation moved.
        self.client.providers["a"] = (2, {"VCPU": _inventory(4, reserved=3)})
        self.client.urls.clear()
        _, capacity = self.capacities.look_now(None, "a")
        self.assertEqual(
            inventory.capacity_from({"VCPU": _inventory(4, reserved=3)}),
            capacity,
        )
        self.assertEqual(
            [
                "/resource_providers/a/usages",
                "/resource_providers/a/inventories",
            ],
            self.client.urls,
        )

    def test_a_provider_left_without_inventory_offers_nothing(self):
        self.inventory.changed(None)
        self.client.providers["a"] = (2, {})
        self.assertIs(
            inventory.NO_INVENTORY, self.capacities.look_now(None, "a")[1]
        )


def _flavor(vcpus, memory_mb, root_gb, ephemeral_gb=0, swap=0, **specs):
    return types.SimpleNamespace(
        vcpus=vcpus,
        memory_mb=memory_mb,
        root_gb=root_gb,
        ephemeral_gb=ephemeral_gb,
        swap=swap,
        extra_specs=specs,
    )


class TestPlacementResources(unittest.TestCase):
    def test_a_plain_flavour(self):
        self.assertEqual(
            api.Resources(2, 512, 11),
            compat.placement_resources(_flavor(2, 512, 10, ephemeral_gb=1)),
        )

    def test_swap_is_disk_in_whole_gb(self):
        self.assertEqual(
            api.Resources(1, 128, 7 + 2),
            compat.placement_resources(_flavor(1, 128, 7, swap=1025)),
        )

    def test_a_volume_backed_server_takes_no_root_disk(self):
        self.assertEqual(
            api.Resources(1, 128, 1),
            compat.placement_resources(
                _flavor(1, 128, 10, swap=1024), is_bfv=True
            ),
        )

    def test_an_override_takes_the_flavours_place(self):
        flavor = _flavor(2, 512, 10, **{"resources:VCPU": "1"})
        self.assertEqual(
            api.Resources(1, 512, 10), compat.placement_resources(flavor)
        )

    def test_an_ironic_flavour_takes_its_class_alone(self):
        flavor = _flavor(
            4,
            4096,
            100,
            **{
                "resources:CUSTOM_BAREMETAL_GOLD": "1",
                "resources:VCPU": "0",
                "resources:MEMORY_MB": "0",
                "resources:DISK_GB": "0",
            },
        )
        self.assertEqual(
            api.Resources(CUSTOM_BAREMETAL_GOLD=1),
            compat.placement_resources(flavor),
        )

    def test_dedicated_cpus_asked_as_pcpu(self):
        flavor = _flavor(4, 512, 1, **{"resources:PCPU": "4"})
        self.assertEqual(
            api.Resources(0, 512, 1, PCPU=4),
            compat.placement_resources(flavor),
        )

    def test_dedicated_cpus_by_policy_are_pcpu_from_nova_20(self):
        pinned = _flavor(4, 512, 1, **{"hw:cpu_policy": "dedicated"})
        isolated = _flavor(
            4,
            512,
            1,
            **{
                "hw:cpu_policy": "dedicated",
                "hw:emulator_threads_policy": "isolate",
            },
        )
        with mock.patch.object(compat, "release", lambda: 22):
            self.assertEqual(
                api.Resources(0, 512, 1, PCPU=4),
                compat.placement_resources(pinned),
            )
            self.assertEqual(
                api.Resources(0, 512, 1, PCPU=5),
                compat.placement_resources(isolated),
            )
        # Before Train placement had no PCPU: pinned vCPUs are VCPU.
        with mock.patch.object(compat, "release", lambda: 19):
            self.assertEqual(
                api.Resources(4, 512, 1), compat.placement_resources(pinned)
            )

    def test_dedicated_cpus_by_the_images_policy_are_pcpu(self):
        flavor = _flavor(4, 512, 1)
        shared = _flavor(4, 512, 1, **{"hw:cpu_policy": "shared"})
        instance = types.SimpleNamespace(
            system_metadata={"image_hw_cpu_policy": "dedicated"}
        )
        in_placement = mock.patch.object(
            compat, "claims_in_placement", lambda: True
        )
        in_placement.start()
        self.addCleanup(in_placement.stop)
        with mock.patch.object(compat, "release", lambda: 22):
            self.assertEqual(
                api.Resources(0, 512, 1, PCPU=4),
                compat.instance_amount(flavor, instance=instance),
            )
            # The flavour's own policy comes first.
            self.assertEqual(
                api.Resources(4, 512, 1),
                compat.instance_amount(shared, instance=instance),
            )
            # Not loaded: never read lazily.
            self.assertEqual(
                api.Resources(4, 512, 1),
                compat.instance_amount(
                    flavor, instance=types.SimpleNamespace()
                ),
            )
            self.assertIn("system_metadata", compat.amount_attrs())
        with mock.patch.object(compat, "release", lambda: 19):
            self.assertEqual(
                api.Resources(4, 512, 1),
                compat.instance_amount(flavor, instance=instance),
            )
            self.assertNotIn("system_metadata", compat.amount_attrs())

    def test_a_numbered_group_is_not_the_nodes(self):
        flavor = _flavor(2, 512, 1, **{"resources1:VCPU": "1"})
        self.assertEqual(
            api.Resources(2, 512, 1), compat.placement_resources(flavor)
        )

    def test_before_placement_a_flavour_is_counted_as_its_record(self):
        flavor = _flavor(2, 512, 10, swap=2048, **{"resources:VCPU": "1"})
        with mock.patch.object(compat, "claims_in_placement", lambda: False):
            self.assertEqual(
                api.Resources(2, 512, 10), compat.instance_amount(flavor)
            )
            self.assertEqual([], compat.amount_attrs())

    def test_with_placement_a_flavour_is_counted_as_placement_counts_it(self):
        flavor = _flavor(2, 512, 10, swap=2048, **{"resources:VCPU": "1"})
        with mock.patch.object(compat, "claims_in_placement", lambda: True):
            self.assertEqual(
                api.Resources(1, 512, 12), compat.instance_amount(flavor)
            )
            with mock.patch.object(compat, "release", lambda: 19):
                self.assertEqual(["flavor"], compat.amount_attrs())


class TestOnProvider(unittest.TestCase):
    """What placement holds for an instance on its node's own provider:
    the classes the node's inventory lacks are another provider's."""

    def state(self, capacity):
        return api.HostState(1, "cmp1", "cmp1", capacity, api.NOTHING)

    def test_a_sharing_providers_disk_is_not_the_nodes(self):
        no_disk = self.state(
            inventory.capacity_from(
                {"VCPU": _inventory(4), "MEMORY_MB": _inventory(1024)}
            )
        )
        amounts = {"u1": api.Resources(1, 512, 10)}
        with mock.patch.object(compat, "claims_in_placement", lambda: True):
            self.assertEqual(
                {"u1": api.Resources(1, 512, 0)},
                nova_claims.on_provider(no_disk, amounts),
            )
            # A node the books do not know: unchanged.
            self.assertEqual(amounts, nova_claims.on_provider(None, amounts))
        # Pinned vCPUs on a node that reports no PCPU yet are VCPU there
        # (Nova's fallback query); on a node with PCPU, PCPU.
        pinned = {"u2": api.Resources(0, 512, 0, PCPU=2)}
        vcpu_only = self.state(
            inventory.capacity_from(
                {"VCPU": _inventory(4), "MEMORY_MB": _inventory(1024)}
            )
        )
        with_pcpu = self.state(
            inventory.capacity_from(
                {"PCPU": _inventory(4), "MEMORY_MB": _inventory(1024)}
            )
        )
        with mock.patch.object(compat, "claims_in_placement", lambda: True):
            self.assertEqual(
                {"u2": api.Resources(2, 512, 0)},
                nova_claims.on_provider(vcpu_only, pinned),
            )
            self.assertEqual(
                pinned, nova_claims.on_provider(with_pcpu, pinned)
            )
        # Before placement the record's three classes are the node's.
        with mock.patch.object(compat, "claims_in_placement", lambda: False):
            self.assertEqual(
                amounts, nova_claims.on_provider(no_disk, amounts)
            )

    def test_dedicated_cpus_are_what_placement_allocated(self):
        # Nova's fallback query put u3 on VCPU although the node has PCPU:
        # placement's allocation decides; the others are never asked.
        both = api.HostState(
            1,
            "cmp1",
            "cmp1",
            inventory.capacity_from(
                {
                    "VCPU": _inventory(4),
                    "PCPU": _inventory(2),
                    "MEMORY_MB": _inventory(1024),
                }
            ),
            api.NOTHING,
            node_uuid="rp1",
        )
        amounts = {
            "u1": api.Resources(1, 128, 0),
            "u2": api.Resources(0, 128, 0, PCPU=2),
            "u3": api.Resources(0, 128, 0, PCPU=2),
        }
        asked = []

        def allocations(node_uuid):
            asked.append(node_uuid)
            return {
                "u2": api.Resources(0, 128, 0, PCPU=2),
                "u3": api.Resources(2, 128, 0),
                "elsewhere": api.Resources(1, 1, 1),
            }

        with mock.patch.object(compat, "claims_in_placement", lambda: True):
            self.assertEqual(
                {
                    "u1": api.Resources(1, 128, 0),
                    "u2": api.Resources(0, 128, 0, PCPU=2),
                    "u3": api.Resources(2, 128, 0),
                },
                nova_claims.on_provider(both, amounts, allocations),
            )
            self.assertEqual(["rp1"], asked)
            # Nothing pinned: placement is not asked.
            nova_claims.on_provider(both, {"u1": amounts["u1"]}, allocations)
            self.assertEqual(["rp1"], asked)
            # Placement not answering: Nova's records as they are.
            self.assertEqual(
                amounts,
                nova_claims.on_provider(both, amounts, lambda uuid: None),
            )
