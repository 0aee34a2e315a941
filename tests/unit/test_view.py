"""The per-request view ranks exactly as ``decision.best_fits`` does."""

import random

from grant_scheduler import decision
from grant_scheduler import resources as gs_resources
from grant_scheduler import scheduler
from grant_scheduler import view as gs_view
from tests import base

R = gs_resources.Resources


def random_states(rng, count):
    states = []
    for host_id in range(1, count + 1):
        capacity = gs_resources.Capacity(
            R(rng.choice([4, 8, 16]), rng.choice([8192, 16384]), 200),
            ram_allocation_ratio=rng.choice([1.0, 1.5]),
        )
        states.append(
            gs_resources.HostState(
                host_id=host_id,
                host="host%d" % (host_id % 7),
                node="node%d" % host_id,
                capacity=capacity,
                used=R(rng.randint(0, 4), rng.randint(0, 8192), 0),
                granted=R(rng.randint(0, 2), rng.randint(0, 4096), 10),
            )
        )
    return states


class TestRanking(base.TestCase):
    def test_same_order_as_best_fits(self):
        rng = random.Random(7)
        for trial in range(300):
            states = random_states(rng, rng.randint(1, 40))
            request = scheduler.Request.build(
                rng.randint(1, 6),
                rng.choice([512, 2048, 8192, 12000]),
                rng.choice([0, 10, 150]),
                ignore_hosts=rng.choice([(), ("host1",)]),
                force_nodes=rng.choice([(), ("node2", "node3")]),
            )
            count = rng.randint(1, 5)
            expected = decision.best_fits(
                states, request.resources, request.placement, count
            )
            view = gs_view.View(states)
            got = view._best(request, count)
            self.assertEqual(
                [s.host_id for s in expected],
                [s.host_id for s in got],
                "trial %d" % trial,
            )

    def test_over_a_cache_adds_live_grants_without_touching_it(self):
        states = random_states(random.Random(3), 5)
        for state in states:
            state.granted = R()
        base_states = {s.host_id: s for s in states}
        base_free = {
            h: (s.free.memory_mb, s.free.vcpus, s.free.disk_gb)
            for h, s in base_states.items()
        }
        granted = {1: R(1, 1024, 10), 99: R(1, 1, 1)}
        view = gs_view.View.over(base_states, base_free, granted, {})
        self.assertEqual(R(1, 1024, 10), view._states[1].granted)
        self.assertEqual(R(), base_states[1].granted)
        view.consume(view._states[2], R(1, 1, 1))
        self.assertEqual(R(), base_states[2].granted)
        self.assertEqual(R(1, 1, 1), view._states[2].granted)
