"""The nodes a built request's HostStates are made for
(``host_manager.Sample``): at most ``[scheduler] max_placement_results``
of those with room, at random, as placement would return them."""

import collections
import copy
import random
import types
import unittest

from grant_scheduler.nova.scheduler import host_manager


def nodes(cell, count, start=0):
    return [
        types.SimpleNamespace(uuid="%s-%d" % (cell, i))
        for i in range(start, start + count)
    ]


class TestSample(unittest.TestCase):
    def setUp(self):
        self.judged = []
        self.full = {"c1-3", "c2-5"}

    def offers(self, uuid):
        self.judged.append(uuid)
        return uuid not in self.full

    def choose(self, limit, compute_nodes, seed=0):
        sample = host_manager.Sample(self.offers, limit, random.Random(seed))
        return sample.choose(compute_nodes)

    def test_at_most_the_limit_of_the_nodes_with_room_from_every_cell(self):
        cells = {"c1": nodes("c1", 10), "c2": nodes("c2", 10)}
        counts = collections.Counter()
        for seed in range(300):
            chosen = self.choose(4, cells, seed)
            self.assertEqual({"c1", "c2"}, set(chosen))
            uuids = [n.uuid for ns in chosen.values() for n in ns]
            self.assertEqual(4, len(uuids))
            self.assertEqual(4, len(set(uuids)))
            for cell, ns in chosen.items():
                self.assertTrue(all(n.uuid.startswith(cell) for n in ns))
            counts.update(uuids)
        self.assertEqual(set(), set(counts) & self.full)
        # Every node with room is drawn, about as often as any other.
        self.assertEqual(18, len(counts))
        self.assertLess(max(counts.values()), 2 * min(counts.values()))

    def test_only_as_many_nodes_are_judged_as_it_takes(self):
        self.full = set()
        chosen = self.choose(5, {"c1": nodes("c1", 1000)})
        self.assertEqual(5, len(chosen["c1"]))
        self.assertEqual(5, len(self.judged))

    def test_fewer_nodes_with_room_than_the_limit_gives_them_all(self):
        cells = {"c1": nodes("c1", 5), "c2": nodes("c2", 6)}
        chosen = self.choose(1000, cells)
        self.assertEqual(
            {n.uuid for ns in cells.values() for n in ns} - self.full,
            {n.uuid for ns in chosen.values() for n in ns},
        )
        self.assertEqual(11, len(self.judged))

    def test_uuids_as_nova_passes_them_or_a_sample(self):
        cells = {"c1": nodes("c1", 3)}
        self.assertIs(cells, host_manager._among(cells, None))
        self.assertEqual(
            ["c1-2"],
            [n.uuid for n in host_manager._among(cells, ["c1-2"])["c1"]],
        )
        self.assertEqual({"c1": []}, host_manager._among(cells, []))
        sample = host_manager.Sample(lambda uuid: uuid == "c1-1", 2)
        self.assertEqual(
            ["c1-1"],
            [n.uuid for n in host_manager._among(cells, sample)["c1"]],
        )


class TestCopied(unittest.TestCase):
    """A request's HostState is what ``copy.copy`` makes of the kept one."""

    def test_as_copy_copy_makes_it(self):
        kept = host_manager._PrivateHostState("host1", "node1", "cell1")
        kept.limits = {"vcpu": 4.0}
        kept.free_ram_mb = 2048
        copied = host_manager._copied(kept)
        reference = copy.copy(kept)
        self.assertIs(type(reference), type(copied))
        self.assertIsNot(kept, copied)
        self.assertEqual(vars(reference).keys(), vars(copied).keys())
        for name, value in vars(reference).items():
            self.assertIs(value, getattr(copied, name), name)
        # NOTE: its own attributes: what a request sets stays its own.
        copied.free_ram_mb = 0
        self.assertEqual(2048, kept.free_ram_mb)
