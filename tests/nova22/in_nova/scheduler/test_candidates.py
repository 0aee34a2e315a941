"""Built allocation requests in Nova 22's services and placement
(``tests/nova18_22/candidates.py``)."""

import time
import unittest

import eventlet

from grant_scheduler import api
from grant_scheduler.nova.books import inventory
from grant_scheduler.nova.scheduler import filter_scheduler
from tests.nova18_22 import candidates
from tests.nova22.in_nova import base


class TestBuiltRequests(candidates.BuiltRequestsTests, base.GrantsTestBase):
    pass


class TestAlternatesUsageReads(unittest.TestCase):
    """``NodeGrants.placement_has_room``: placement's usage of an
    alternate, and its inventory where the provider moved since the last
    sync, read once for the requests that arrived before the read started
    (monkey-patched, as the scheduler service is)."""

    def setUp(self):
        self.reads = []
        self.usage = api.Resources(3, 0, 0)
        self.capacity = None

        def usage(context, node_uuid):
            self.reads.append(node_uuid)
            eventlet.sleep(0.01)
            return self.usage, self.capacity

        self.grants = filter_scheduler.NodeGrants(
            lambda: None, None, usage=usage
        )
        self.grants._by_uuid = {
            "a": api.HostState(
                1,
                "host1",
                "node1",
                api.Capacity.of({"VCPU": api.Inventory(total=4)}),
                api.NOTHING,
                node_uuid="a",
            )
        }
        self.one = api.Resources.of({"VCPU": 1})

    def test_placements_usage_decides_not_the_books(self):
        self.assertTrue(self.grants.placement_has_room(None, "a", self.one))
        self.usage = api.Resources(4, 0, 0)
        self.assertFalse(self.grants.placement_has_room(None, "a", self.one))
        self.assertEqual(["a", "a"], self.reads)

    def test_an_inventory_lowered_since_the_last_sync_decides(self):
        self.capacity = api.Capacity.of(
            {"VCPU": api.Inventory(total=4, reserved=1)}
        )
        self.assertFalse(self.grants.placement_has_room(None, "a", self.one))
        self.usage = api.Resources(2, 0, 0)
        self.assertTrue(self.grants.placement_has_room(None, "a", self.one))

    def test_a_provider_left_without_inventory_has_no_room(self):
        self.capacity = inventory.NO_INVENTORY
        self.usage = api.NOTHING
        self.assertFalse(self.grants.placement_has_room(None, "a", self.one))

    def test_a_read_started_since_a_request_arrived_is_shared(self):
        arrived = time.monotonic()
        pool = eventlet.GreenPool()
        answers = [
            pool.spawn(
                self.grants.placement_has_room, None, "a", self.one, arrived
            )
            for _ in range(3)
        ]
        self.assertEqual([True] * 3, [a.wait() for a in answers])
        self.assertEqual(["a"], self.reads)
        # A request that arrives after that read started reads again.
        self.grants.placement_has_room(None, "a", self.one, time.monotonic())
        self.assertEqual(["a", "a"], self.reads)

    def test_placement_not_answering_leaves_the_books_to_decide(self):
        self.usage = None
        self.assertTrue(self.grants.placement_has_room(None, "a", self.one))
        self.grants._by_uuid["a"].used = api.Resources(4, 0, 0)
        self.assertFalse(self.grants.placement_has_room(None, "a", self.one))
