"""The per-request view and the per-process cache it is copied from."""

import dataclasses
import datetime
import functools
import operator
import random
import threading
import time

from grant_scheduler import decision
from grant_scheduler import resources as gs_resources
from grant_scheduler import scheduler
from grant_scheduler import view as gs_view
from tests import base
from tests.unit import fakes

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
    def test_ranks_the_fitting_nodes_most_free_first(self):
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
            fitting = [
                s
                for s in states
                if s.fits(request.resources) and request.placement.allows(s)
            ]
            view = gs_view.View(states)
            got = view.ranked(request, count)
            self.assertEqual(min(count, len(fitting)), len(got), trial)
            keys = [decision.free_key(s) for s in got]
            self.assertEqual(sorted(keys, reverse=True), keys, trial)
            if got:
                # Nothing left out is freer than the last one ranked.
                left = [s for s in fitting if s not in got]
                self.assertTrue(
                    all(decision.free_key(s) <= keys[-1] for s in left), trial
                )


def make_cache(clock, seed=3, count=5, resync_interval=60.0):
    """``(store, cache)``: a ``ViewCache`` over ``count`` random nodes."""
    store = fakes.FakeStore(random_states(random.Random(seed), count))
    cache = gs_view.ViewCache(
        store, resync_interval=resync_interval, overlap=2.0, clock=clock
    )
    return store, cache


class TestCache(base.TestCase):
    def make(self, clock):
        return make_cache(clock)

    def test_reads_what_changed_since_the_newest_stamp_less_the_overlap(self):
        now = [0.0]
        store, cache = self.make(lambda: now[0])
        cache.view()
        self.assertEqual([None], store.reads)
        cache.view()
        newest = fakes._EPOCH + datetime.timedelta(seconds=5)
        self.assertEqual(
            newest - datetime.timedelta(seconds=2), store.reads[1]
        )
        now[0] = 61.0
        cache.view()
        self.assertIsNone(store.reads[2])
        self.assertEqual(2, cache.full_reads)

    def test_tells_the_store_which_rows_it_holds_and_their_stamps(self):
        store, cache = self.make(lambda: 0.0)
        cache.view()
        self.assertEqual([None], store.known)
        cache.view()
        known = store.known[1]
        self.assertEqual(
            {
                host_id: fakes._EPOCH + datetime.timedelta(seconds=n + 1)
                for n, host_id in enumerate(store.states)
            },
            known.stamps,
        )
        self.assertEqual(max(known.stamps.values()), known.newest)

    def test_a_view_is_a_copy(self):
        store, cache = self.make(lambda: 0.0)
        view = cache.view()
        state = view.states()[0]
        view.consume(state, R(1, 1, 1))
        cached = {s.host_id: s for s in cache.states()}
        self.assertEqual(state.granted, cached[state.host_id].granted)
        mine = {s.host_id: s for s in view.states()}
        self.assertEqual(
            state.granted + R(1, 1, 1), mine[state.host_id].granted
        )

    def test_fold_keeps_what_a_grant_saw(self):
        store, cache = self.make(lambda: 0.0)
        cache.view()
        full = gs_resources.HostState(
            host_id=1,
            host="h",
            node="n",
            capacity=gs_resources.Capacity(R(1, 1, 1)),
            used=R(1, 1, 1),
        )
        cache.fold(1, full)
        cached = {s.host_id: s for s in cache.states()}
        self.assertEqual(R(1, 1, 1), cached[1].used)
        cache.fold(1, None)
        self.assertNotIn(1, {s.host_id for s in cache.states()})

    def test_tells_other_schedulers_grants_from_claims_and_its_own(self):
        store, cache = self.make(lambda: 0.0)
        cache.view()
        self.assertFalse(cache.others_granted)
        # A claim moves a grant into usage: nothing less is free.
        first = store.states[1]
        store.states[1] = dataclasses.replace(
            first, used=first.used + first.granted, granted=R()
        )
        cache.view()
        self.assertFalse(cache.others_granted)
        # This process's own grant.
        store.take(2, R(1, 1, 1))
        cache.own(2)
        cache.view()
        self.assertFalse(cache.others_granted)
        # Another scheduler's grant.
        store.take(3, R(1, 1, 1))
        cache.view()
        self.assertTrue(cache.others_granted)


def _wait(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("not reached in %s s" % timeout)
        time.sleep(0.01)


class TestReadsAhead(base.TestCase):
    """``ViewCache.refresh_due``: the read of every row made before a
    request finds it due, and reads made one at a time."""

    def make(self, clock):
        return make_cache(clock, seed=5, count=4)

    def test_reads_every_row_within_its_interval_and_requests_do_not(self):
        now = [0.0]
        store, cache = self.make(lambda: now[0])
        # Never read: it reads.
        self.assertTrue(cache.refresh_due(1.0))
        cache.view()
        now[0] = 58.5
        self.assertFalse(cache.refresh_due(1.0))
        now[0] = 59.2
        self.assertTrue(cache.refresh_due(1.0))
        self.assertEqual(2, cache.full_reads)
        # The request at 60 s (when the request itself would have read
        # every row) reads what changed.
        now[0] = 60.0
        cache.view()
        self.assertEqual(2, cache.full_reads)
        self.assertIsNotNone(store.reads[-1])
        now[0] = 119.0
        cache.view()
        self.assertEqual(2, cache.full_reads)
        now[0] = 119.3
        cache.view()
        self.assertEqual(3, cache.full_reads)

    def test_an_interval_of_zero_leaves_every_read_to_the_requests(self):
        store, cache = make_cache(lambda: 0.0, resync_interval=0.0)
        self.assertFalse(cache.refresh_due(1.0))
        self.assertEqual([], store.reads)
        cache.view()
        cache.view()
        self.assertEqual([None, None], store.reads)

    def test_another_schedulers_grant_found_ahead_is_told_to_the_next(self):
        now = [0.0]
        store, cache = self.make(lambda: now[0])
        cache.view()
        store.take(2, R(1, 1, 1))
        now[0] = 59.5
        self.assertTrue(cache.refresh_due(1.0))
        cache.view()
        self.assertTrue(cache.others_granted)
        cache.view()
        self.assertFalse(cache.others_granted)

    def test_reads_are_made_one_at_a_time(self):
        # A request's read that began while the loop's read of every row
        # waits on the database begins after that read is kept: else the
        # older rows would be kept last.
        store, cache = self.make(lambda: 0.0)
        cache.view()
        began = []
        release = threading.Event()
        read_hosts = store.read_hosts

        def slow_read(since=None, known=None):
            began.append(since)
            if since is None:
                self.assertTrue(release.wait(10))
            return read_hosts(since, known)

        store.read_hosts = slow_read
        ahead = threading.Thread(target=cache.refresh, kwargs={"full": True})
        ahead.start()
        _wait(lambda: began == [None])
        request = threading.Thread(target=cache.view)
        request.start()
        request.join(0.3)
        self.assertEqual([None], began)
        release.set()
        ahead.join(10)
        request.join(10)
        self.assertEqual(2, len(began))
        self.assertIsNotNone(began[1])


class TestCacheMaps(base.TestCase):
    """``ViewCache.nodes``: the maps by node uuid and by names follow every
    read, fold and full read, as maps built from ``states()`` would."""

    def assert_maps(self, cache, step):
        by_uuid, by_key = cache.nodes()
        states = cache.states()
        self.assertEqual({s.node_uuid: s for s in states}, by_uuid, step)
        self.assertEqual({(s.host, s.node): s for s in states}, by_key, step)
        for state in states:
            self.assertIs(state, by_uuid[state.node_uuid], step)
            self.assertIs(state, cache.find(state.host, state.node), step)

    def test_the_maps_follow_every_change(self):
        rng = random.Random(11)
        for trial in range(40):
            states = [
                dataclasses.replace(s, node_uuid="uuid-%d" % s.host_id)
                for s in random_states(rng, 6)
            ]
            store = fakes.FakeStore(states)
            now = [0.0]
            cache = gs_view.ViewCache(
                store,
                resync_interval=60.0,
                overlap=2.0,
                clock=functools.partial(operator.getitem, now, 0),
            )
            renamed = 0
            for step in range(30):
                what = rng.choice(["rename", "uuid", "fold", "gone", "full"])
                host_id = rng.choice(sorted(store.states) or [None])
                if host_id is None:
                    break
                state = store.states[host_id]
                if what == "rename":
                    # A node row taken by other names (a re-created node).
                    renamed += 1
                    store.states[host_id] = dataclasses.replace(
                        state, host="re%d" % renamed, node="rn%d" % renamed
                    )
                elif what == "uuid":
                    renamed += 1
                    store.states[host_id] = dataclasses.replace(
                        state, node_uuid="uuid-new-%d" % renamed
                    )
                elif what == "fold":
                    cache.nodes()
                    fresh = dataclasses.replace(
                        state, granted=state.granted + R(1, 1, 1)
                    )
                    cache.fold(host_id, rng.choice([fresh, None]))
                    self.assert_maps_after_fold(cache, (trial, step))
                    continue
                elif what == "gone":
                    # A row deleted outright: seen at the next full read.
                    del store.states[host_id]
                else:
                    now[0] += 61.0
                self.assert_maps(cache, (trial, step))
            now[0] += 61.0
            self.assert_maps(cache, trial)
            self.assertEqual(
                {s.node_uuid for s in store.states.values()},
                set(cache.nodes()[0]),
                trial,
            )

    def assert_maps_after_fold(self, cache, step):
        # Without reading again: the fold alone must leave the maps right.
        states = cache.states()
        by_uuid, by_key = cache._by_uuid, cache._by_key
        self.assertEqual({s.node_uuid: s for s in states}, by_uuid, step)
        self.assertEqual({(s.host, s.node): s for s in states}, by_key, step)
