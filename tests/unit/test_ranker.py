"""The ranking hook: the scheduler orders nodes through a ``Ranker`` and
calls it only as ``api.Ranker`` documents."""

import random
import uuid

import fixtures

from grant_scheduler import api
from grant_scheduler import scheduler
from grant_scheduler.settings import Settings
from tests import base
from tests.unit import fakes
from tests.unit.test_decision import R
from tests.unit.test_decision import host


class LeastFree(api.Ranker):
    """Packs: the least free node first; records every call."""

    def __init__(self, admitted=None):
        self.admitted = admitted
        self.calls = []

    def admits(self, state):
        return self.admitted is None or state.host in self.admitted

    def subset_size(self, configured):
        return 1  # always the first of the ranking

    def loaded(self, view):
        self.calls.append(("loaded", sorted(s.host for s in view.states())))

    def rank(self, view, request, count):
        self.calls.append(("rank", count))
        fits = [s for s in view.states() if s.fits(request.resources)]
        fits.sort(key=lambda s: (s.free.memory_mb, s.host))
        return fits[:count]

    def won(self, view, state, amount):
        self.calls.append(("won", state.host, amount))


class TestRanker(base.TestCase):
    def schedule(self, states, ranker, count=1, memory_mb=1024):
        store = fakes.FakeStore(states)
        sched = scheduler.Scheduler(store, Settings(), rng=random.Random(3))
        request = scheduler.Request.build(
            1,
            memory_mb,
            1,
            instance_uuids=[str(uuid.uuid4()) for _ in range(count)],
        )
        return sched.schedule(request, view=sched.view(ranker=ranker))

    def test_the_rankers_order_decides(self):
        # The default ranking spreads (most free first); this ranker packs,
        # and every instance goes where it says.
        states = [host(1, 8192), host(2, 2048), host(3, 4096)]
        ranker = LeastFree()
        packed = self.schedule(states, ranker, count=2)
        self.assertEqual(["host2", "host2"], [s.host for s in packed])
        self.assertEqual(
            [("won", "host2", R(1, 1024, 1))] * 2,
            [c for c in ranker.calls if c[0] == "won"],
        )

    def test_a_node_the_ranker_does_not_admit_is_never_chosen(self):
        states = [host(1, 8192), host(2, 2048)]
        ranker = LeastFree(admitted={"host1"})
        [selection] = self.schedule(states, ranker)
        self.assertEqual("host1", selection.host)
        self.assertIn(("loaded", ["host1"]), ranker.calls)
        with self.assertRaises(api.NoValidHost):
            self.schedule(states, LeastFree(admitted=set()))

    def test_the_view_is_loaded_before_it_is_ranked(self):
        ranker = LeastFree()
        self.schedule([host(1, 2048)], ranker)
        self.assertEqual("loaded", ranker.calls[0][0])
        self.assertIn("rank", [c[0] for c in ranker.calls])

    def test_the_api_refuses_a_ranker_of_another_kind(self):
        gs = api.GrantScheduler.from_url(
            "sqlite:///%s/gs.sqlite" % self.useFixture(fixtures.TempDir()).path
        )
        gs.upgrade_schema()
        with self.assertRaises(api.InvalidRequest):
            gs.view(ranker=object())
