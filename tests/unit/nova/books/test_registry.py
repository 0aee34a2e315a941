"""What placement holds beyond the books, by node
(``grant_scheduler.nova.books.registry``); no Nova needed."""

import types
import unittest

from grant_scheduler import api
from grant_scheduler.nova.books import inventory
from grant_scheduler.nova.books import registry
from tests.unit.nova.books.test_inventory import _Client
from tests.unit.nova.books.test_inventory import _inventory


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
