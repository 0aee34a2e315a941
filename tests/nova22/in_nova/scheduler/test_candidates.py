"""Built allocation requests in Nova 22's services and placement
(``tests/nova18_22/candidates.py``)."""

import dataclasses
import random
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
        # NOTE: the view replaces a row that changed; it never changes one.
        self.grants._by_uuid["a"] = dataclasses.replace(
            self.grants._by_uuid["a"], used=api.Resources(4, 0, 0)
        )
        self.assertFalse(self.grants.placement_has_room(None, "a", self.one))


class TestBooksRoom(unittest.TestCase):
    """``NodeGrants.has_room``, asked of every node a request may be
    offered, answers as ``HostState.fits`` of the node with what
    placement holds beyond the books added to its usage and no live
    grants; None where the node's own provider lacks a class."""

    CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_GOLD")

    def _inventory(self, rng):
        total = rng.randint(1, 40)
        return api.Inventory(
            total=total,
            reserved=rng.randint(0, 3),
            allocation_ratio=rng.choice((1.0, 1.5, 16.0)),
            min_unit=rng.randint(1, 2),
            max_unit=rng.randint(1, total),
            step_size=rng.choice((1, 1, 2)),
        )

    def _amount(self, rng, classes, low=0):
        return api.Resources.of(
            {
                name: rng.randint(low, 12)
                for name in rng.sample(classes, rng.randint(1, len(classes)))
            }
        )

    def test_as_the_node_state_fits(self):
        rng = random.Random(20261206)
        answers = set()
        for number in range(3000):
            offered = rng.sample(self.CLASSES, rng.randint(1, 4))
            state = api.HostState(
                number,
                "host%d" % number,
                "node%d" % number,
                api.Capacity.of({n: self._inventory(rng) for n in offered}),
                self._amount(rng, offered),
                granted=self._amount(rng, offered),
                node_uuid="uuid%d" % number,
            )
            others = self._amount(rng, offered)
            amount = self._amount(rng, self.CLASSES, low=1)
            grants = filter_scheduler.NodeGrants(
                lambda: None, None, others={state.node_uuid: others}.get
            )
            grants._by_uuid = {state.node_uuid: state}
            if any(name not in offered for name in amount):
                expected = None
            else:
                expected = dataclasses.replace(
                    state, used=state.used + others, granted=api.NOTHING
                ).fits(amount)
            answer = grants.has_room(state.node_uuid, amount)
            self.assertIs(expected, answer, (state, others, amount))
            answers.add(answer)
        # NOTE: the draw reaches every answer.
        self.assertEqual({None, True, False}, answers)
        self.assertIs(True, grants.has_room("not known", amount))

    def test_an_answer_follows_the_row_and_placement(self):
        """An answer is kept for the next request only while the node's
        row and what placement holds beyond it are the same: the view and
        the look replace them when they change."""
        others = {}
        grants = filter_scheduler.NodeGrants(
            lambda: None,
            None,
            others=lambda uuid: others.get(uuid, api.NOTHING),
        )
        state = api.HostState(
            1,
            "host1",
            "node1",
            api.Capacity.of({"VCPU": api.Inventory(total=4)}),
            api.Resources.of({"VCPU": 2}),
            node_uuid="a",
        )
        grants._by_uuid = {"a": state}
        two = api.Resources.of({"VCPU": 2})
        three = api.Resources.of({"VCPU": 3})
        self.assertIs(True, grants.has_room("a", two))
        self.assertIs(False, grants.has_room("a", three))
        # An equal amount of another request, after another amount.
        self.assertIs(
            True, grants.has_room("a", api.Resources.of({"VCPU": 2}))
        )
        # Another scheduler's grant, read by the view: a new row.
        grants._by_uuid = {
            "a": dataclasses.replace(state, used=api.Resources.of({"VCPU": 3}))
        }
        self.assertIs(False, grants.has_room("a", two))
        # The row as it was, and placement holding one more beyond it.
        grants._by_uuid = {"a": state}
        self.assertIs(True, grants.has_room("a", two))
        others["a"] = api.Resources.of({"VCPU": 1})
        self.assertIs(False, grants.has_room("a", two))
        del others["a"]
        self.assertIs(True, grants.has_room("a", two))
