"""The protocol's decisions, with no database: ranking, choice, input."""

import collections
import random
import uuid

from grant_scheduler import decision
from grant_scheduler import exception
from grant_scheduler import resources as gs_resources
from grant_scheduler import validate
from tests import base

R = gs_resources.Resources


def host(
    host_id,
    memory_mb=4096,
    vcpus=8,
    used=gs_resources.NOTHING,
    granted=gs_resources.NOTHING,
    name=None,
):
    return gs_resources.HostState(
        host_id=host_id,
        host=name or "host%d" % host_id,
        node="node%d" % host_id,
        capacity=gs_resources.Capacity(R(vcpus, memory_mb, 100)),
        used=used,
        granted=granted,
    )


def best(states, amount, placement=None, count=5, rng=None):
    placement = placement or decision.Placement()
    by_id = {s.host_id: s for s in states}
    free = {h: decision.free_key(s) for h, s in by_id.items()}
    spread = decision.Spread(rng or random.Random(1))
    return spread.best(by_id, free, amount, placement, count)


class TestSpread(base.TestCase):
    def test_most_free_ram_first(self):
        states = [host(1, 2048), host(2, 8192), host(3, 4096)]
        ranked = best(states, R(1, 1024, 1))
        self.assertEqual([2, 3, 1], [s.host_id for s in ranked])

    def test_drops_nodes_that_do_not_fit(self):
        states = [host(1, 2048, used=R(0, 1500, 0)), host(2, 2048)]
        self.assertEqual([2], [s.host_id for s in best(states, R(1, 1024, 1))])

    def test_live_grants_count_like_usage(self):
        states = [host(1, 2048, granted=R(0, 1500, 0))]
        self.assertEqual([], best(states, R(1, 1024, 1)))

    def test_ignore_and_force(self):
        states = [host(1), host(2), host(3)]
        amount = R(1, 1, 1)
        ignore = decision.Placement(ignore_hosts=frozenset({"host1"}))
        force = decision.Placement(force_hosts=frozenset({"host3"}))
        nodes = decision.Placement(force_nodes=frozenset({"node2"}))
        self.assertNotIn(1, [s.host_id for s in best(states, amount, ignore)])
        self.assertEqual([3], [s.host_id for s in best(states, amount, force)])
        self.assertEqual([2], [s.host_id for s in best(states, amount, nodes)])

    def test_ties_are_broken_differently_by_each_scheduler(self):
        # DESIGN H7: 32 equally free nodes.  A fixed tie-break (by id)
        # would send every scheduler to the same three; each scheduler's
        # own random order spreads their first choices over many nodes.
        states = [host(i, 4096) for i in range(1, 33)]
        firsts = collections.Counter()
        for seed in range(64):
            spread = decision.Spread(random.Random(seed))
            by_id = {s.host_id: s for s in states}
            free = {h: decision.free_key(s) for h, s in by_id.items()}
            ranked = spread.best(
                by_id, free, R(1, 1, 1), decision.Placement(), 3
            )
            firsts[spread.choose(ranked, 3).host_id] += 1
        self.assertGreater(len(firsts), 20)
        self.assertLess(max(firsts.values()), 10)

    def test_choice_is_random_within_the_subset_only(self):
        ranked = [host(i) for i in range(10)]
        spread = decision.Spread(random.Random(7))
        picked = {spread.choose(ranked, 3).host_id for _ in range(200)}
        self.assertEqual({0, 1, 2}, picked)
        self.assertEqual(0, spread.choose(ranked, 1).host_id)
        self.assertIsNone(spread.choose([], 3))


class TestCapacity(base.TestCase):
    def test_limit_is_total_minus_reserved_times_ratio(self):
        capacity = gs_resources.Capacity(
            R(16, 32768, 1000),
            reserved=R(2, 2048, 100),
            cpu_allocation_ratio=1.5,
            ram_allocation_ratio=1.0,
            disk_allocation_ratio=0.9,
        )
        self.assertEqual(R(21, 30720, 810), capacity.limit())


class TestValidation(base.TestCase):
    def test_amounts_name_the_bad_value(self):
        for bad in (-1, 1.5, "2", True, 2**41):
            with self.assertRaises(exception.InvalidResources) as caught:
                validate.resources(bad, 1024, 10)
            self.assertIn("vcpus", str(caught.exception))
        self.assertEqual(R(1, 1, 0), validate.resources(1, 1, 0))

    def test_one_class_may_be_all_a_request_asks_for(self):
        # An Ironic flavour: one unit of a custom class, nothing else.
        self.assertEqual(
            R(CUSTOM_BAREMETAL_GOLD=1),
            validate.resources(0, 0, 0, {"CUSTOM_BAREMETAL_GOLD": 1}),
        )
        self.assertEqual(R(0, 1024, 0), validate.resources(0, 1024, 0))
        with self.assertRaises(exception.InvalidResources) as caught:
            validate.resources(0, 0, 0)
        self.assertIn("at least one amount", str(caught.exception))

    def test_class_names_are_placements(self):
        for bad in ("custom_gold", "CUSTOM-GOLD", "", "X" * 256, 5):
            with self.assertRaises(exception.InvalidResources):
                validate.resources(classes={bad: 1})
        with self.assertRaises(exception.InvalidResources) as caught:
            validate.resources(1, 0, 0, {"VCPU": 1})
        self.assertIn("twice", str(caught.exception))

    def test_names(self):
        self.assertEqual(
            "cmp-1.example", validate.name("host", "cmp-1.example")
        )
        for bad in (
            "",
            " cmp1",
            "cmp1 ",
            "a\nb",
            "a\x1b[31m",
            "a\x00",
            "x" * 256,
            5,
        ):
            self.assertRaises(
                exception.InvalidRequest, validate.name, "host", bad
            )

    def test_a_bare_string_is_not_a_list_of_names(self):
        self.assertRaises(
            exception.InvalidRequest,
            validate.names,
            "force_hosts",
            "cmp1",
            "host",
        )
        self.assertEqual(
            frozenset({"cmp1"}),
            validate.names("force_hosts", ["cmp1"], "host"),
        )

    def test_instance_uuids(self):
        value = uuid.uuid4()
        self.assertEqual(str(value), validate.instance_uuid(value))
        self.assertEqual(
            str(value), validate.instance_uuid(str(value).upper())
        )
        for bad in (
            "abc",
            str(value) + "0000",
            str(value).replace("-", ""),
            5,
        ):
            self.assertRaises(
                exception.InvalidRequest, validate.instance_uuid, bad
            )
        self.assertRaises(
            exception.InvalidRequest, validate.instance_uuids, "abc"
        )

    def test_ratios(self):
        for bad in (True, 0, -1.0, float("nan"), float("inf"), "1.5", 1000000):
            self.assertRaises(
                exception.InvalidResources,
                validate.ratio,
                "cpu_allocation_ratio",
                bad,
            )
        self.assertEqual(16.0, validate.ratio("cpu_allocation_ratio", 16))
        # Nova's own tests use 9999 for "unlimited".
        self.assertEqual(9999.0, validate.ratio("cpu_allocation_ratio", 9999))
