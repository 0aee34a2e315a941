"""What placement holds beyond the books, by node
(``grant_scheduler.nova.books.registry``); no Nova needed."""

import threading
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


class _SlowClient(_Client):
    """Placement whose usages answer only once ``barrier``'s parties ask
    together; counts the reads in flight."""

    def __init__(self, providers, barrier):
        super().__init__(providers)
        self.barrier = barrier
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0

    def get(self, url, **kwargs):
        if not url.endswith("/usages"):
            return super().get(url, **kwargs)
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            self.barrier.wait()
            return super().get(url, **kwargs)
        finally:
            with self.lock:
                self.now -= 1


class _Books:
    """The books' side of ``NodeRegistry``: what was reported."""

    def __init__(self):
        self.reported = []

    def report_host(self, host, node, capacity, node_uuid=None):
        self.reported.append((host, node, capacity, node_uuid))


class TestSync(unittest.TestCase):
    """A sync reads the providers that moved a few at a time."""

    NODES = 6

    def setUp(self):
        self.inventories = {"VCPU": _inventory(4), "MEMORY_MB": _inventory(64)}
        self.capacity = inventory.capacity_from(self.inventories)
        self.client = _SlowClient(
            {
                "u%d" % n: (1, dict(self.inventories))
                for n in range(self.NODES)
            },
            threading.Barrier(3, timeout=10),
        )
        self.books = _Books()
        self.states = [
            types.SimpleNamespace(
                host="h%d" % n,
                node="n%d" % n,
                node_uuid="u%d" % n,
                capacity=self.capacity,
                used=api.NOTHING,
                granted=api.NOTHING,
            )
            for n in range(self.NODES)
        ]
        self.host_states = [
            types.SimpleNamespace(
                host="h%d" % n, nodename="n%d" % n, uuid="u%d" % n
            )
            for n in range(self.NODES)
        ]

    def sync(self, at_once):
        capacities = registry.PlacementCapacities(
            inventory.PlacementInventory(lambda: self.client), at_once=at_once
        )
        nodes = registry.NodeRegistry(
            lambda: self.books, lambda: capacities, None
        )
        nodes.sync(None, self.states, self.host_states)
        return capacities

    def test_three_at_a_time_and_what_changed_reported(self):
        # Placement lowered one node's inventory and another consumer
        # holds a vCPU on another: both found, while the reads of three
        # nodes were in flight together (one after the other, the
        # barrier would break) and never more.
        lowered = dict(self.inventories, VCPU=_inventory(2))
        self.client.providers["u4"] = (2, lowered)
        self.client.usages["u1"] = {"VCPU": 1}
        capacities = self.sync(3)
        self.assertEqual(3, self.client.most)
        self.assertEqual(
            [("h4", "n4", inventory.capacity_from(lowered), "u4")],
            self.books.reported,
        )
        self.assertEqual(api.Resources(VCPU=1), capacities.others("u1"))
        self.assertEqual(api.NOTHING, capacities.others("u2"))

    def test_one_at_a_time_by_default(self):
        self.client.barrier = threading.Barrier(1)
        self.sync(registry.PlacementCapacities(None).at_once)
        self.assertEqual(1, self.client.most)
        self.assertEqual([], self.books.reported)
