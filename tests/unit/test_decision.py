"""The protocol's decisions, with no database: replay, choice, fall-over."""

import datetime
import random

from grant_scheduler import decision
from grant_scheduler import exception
from grant_scheduler import resources as gs_resources
from grant_scheduler import scheduler
from grant_scheduler.db import models
from grant_scheduler.db import store as gs_store
from grant_scheduler.settings import Settings
from tests import base

R = gs_resources.Resources
PENDING = models.GRANT_PENDING
WON = models.GRANT_WON


def grant(grant_id, ticket, memory_mb, state=PENDING, vcpus=1):
    return decision.LiveGrant(grant_id, ticket, R(vcpus, memory_mb, 0), state)


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


class TestReplay(base.TestCase):
    limit = R(8, 3000, 100)

    def test_undecided_grants_win_in_ticket_order_while_they_fit(self):
        grants = [grant(3, 3, 1000), grant(1, 1, 1000), grant(2, 2, 1000)]
        outcome = decision.replay(R(), self.limit, grants)
        self.assertEqual({1: True, 2: True, 3: True}, outcome.verdicts)
        self.assertEqual(R(3, 3000, 0), outcome.committed)

    def test_loser_does_not_count_against_later_grants(self):
        # H6: ticket 2 cannot fit after ticket 1; ticket 3 still can.
        grants = [grant(1, 1, 2000), grant(2, 2, 2000), grant(3, 3, 1000)]
        outcome = decision.replay(R(), self.limit, grants)
        self.assertEqual({1: True, 2: False, 3: True}, outcome.verdicts)

    def test_recorded_winners_count_and_are_not_re_decided(self):
        grants = [grant(1, 1, 2500, state=WON), grant(2, 2, 1000)]
        outcome = decision.replay(R(), self.limit, grants)
        self.assertEqual({2: False}, outcome.verdicts)
        self.assertEqual(R(1, 2500, 0), outcome.committed)

    def test_usage_counts_before_any_grant(self):
        outcome = decision.replay(
            R(0, 2500, 0), self.limit, [grant(1, 1, 1000)]
        )
        self.assertEqual({1: False}, outcome.verdicts)

    def test_every_dimension_must_fit(self):
        grants = [grant(1, 1, 10, vcpus=8), grant(2, 2, 10, vcpus=1)]
        outcome = decision.replay(R(), self.limit, grants)
        self.assertEqual({1: True, 2: False}, outcome.verdicts)

    def test_re_deciding_from_current_usage_is_unstable(self):
        # Why verdicts are recorded: ticket 2 won while usage was 500;
        # once that usage is released, a replay from scratch lets ticket 1
        # win instead and pushes ticket 2 (whose build is on its way) out.
        grants = [grant(1, 1, 2600), grant(2, 2, 2400)]
        first = decision.replay(R(0, 500, 0), self.limit, grants)
        self.assertEqual({1: False, 2: True}, first.verdicts)
        again = decision.replay(R(), self.limit, grants)
        self.assertEqual({1: True, 2: False}, again.verdicts)
        # With ticket 1 recorded lost (gone from the live grants) and
        # ticket 2 recorded won, the later replay agrees with the first.
        recorded = [grant(2, 2, 2400, state=WON)]
        self.assertEqual(
            {}, decision.replay(R(), self.limit, recorded).verdicts
        )


class TestChoice(base.TestCase):
    def test_best_fits_spreads_by_free_ram(self):
        states = [host(1, 2048), host(2, 8192), host(3, 4096)]
        ranked = decision.best_fits(
            states, R(1, 1024, 1), decision.Placement(), 3
        )
        self.assertEqual([2, 3, 1], [s.host_id for s in ranked])

    def test_best_fits_drops_hosts_that_do_not_fit(self):
        states = [host(1, 2048, used=R(0, 1500, 0)), host(2, 2048)]
        ranked = decision.best_fits(
            states, R(1, 1024, 1), decision.Placement(), 5
        )
        self.assertEqual([2], [s.host_id for s in ranked])

    def test_granted_counts_like_usage(self):
        states = [host(1, 2048, granted=R(0, 1500, 0))]
        self.assertEqual(
            [],
            decision.best_fits(states, R(1, 1024, 1), decision.Placement(), 5),
        )

    def test_ignore_and_force(self):
        states = [host(1), host(2), host(3)]
        amount = R(1, 1, 1)
        ignore = decision.Placement(ignore_hosts=frozenset({"host1"}))
        force = decision.Placement(force_hosts=frozenset({"host3"}))
        nodes = decision.Placement(force_nodes=frozenset({"node2"}))
        self.assertNotIn(
            1,
            [s.host_id for s in decision.best_fits(states, amount, ignore, 3)],
        )
        self.assertEqual(
            [3],
            [s.host_id for s in decision.best_fits(states, amount, force, 3)],
        )
        self.assertEqual(
            [2],
            [s.host_id for s in decision.best_fits(states, amount, nodes, 3)],
        )

    def test_pick_is_random_within_the_subset_only(self):
        ranked = [host(i) for i in range(10)]
        rng = random.Random(7)
        picked = {decision.pick(ranked, 3, rng).host_id for _ in range(200)}
        self.assertEqual({0, 1, 2}, picked)
        self.assertEqual(0, decision.pick(ranked, 1, rng).host_id)
        self.assertIsNone(decision.pick([], 3, rng))


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

    def test_validation_names_the_bad_value(self):
        for bad in (0, -1, 1.5, "2", True, 2**41):
            with self.assertRaises(exception.InvalidResources) as caught:
                gs_resources.validated(bad, 1024, 10)
            self.assertIn("vcpus", str(caught.exception))
        self.assertEqual(R(1, 1, 0), gs_resources.validated(1, 1, 0))


class FakeStore:
    """A store in memory whose verifications lose on chosen hosts."""

    def __init__(self, states, losing_hosts=()):
        self.states = {s.host_id: s for s in states}
        self.losing = set(losing_hosts)
        self.grants = {}
        self.withdrawn = []
        self._next = 0

    def load_view(self):
        granted = {}
        for host_id, amount in self.grants.values():
            granted[host_id] = granted.get(host_id, R()) + amount
        return [
            host(
                s.host_id,
                s.limit.memory_mb,
                s.limit.vcpus,
                used=s.used,
                granted=granted.get(s.host_id, R()),
            )
            for s in self.states.values()
        ]

    def read_changes(self, since=None):
        states = self.load_view()
        granted = {s.host_id: s.granted for s in states if s.granted != R()}
        for state in states:
            state.granted = R()
        return gs_store.ViewChanges(
            datetime.datetime.now(), states, granted, {}
        )

    def insert_grant(
        self, host_id, amount, name, uuid, request_id, before_commit
    ):
        self._next += 1
        self.grants[self._next] = (host_id, amount)
        return self._next, self._next

    def verify_grant(self, grant_id, host_id, ticket):
        state = self.states[host_id]
        if host_id in self.losing:
            del self.grants[grant_id]
            full = host(host_id, state.limit.memory_mb, used=state.limit)
            return False, full
        return True, state

    def withdraw(self, grant_ids):
        self.withdrawn.extend(grant_ids)
        for grant_id in grant_ids:
            self.grants.pop(grant_id, None)

    def settle_host(self, host_id):
        return None


class TestFallOver(base.TestCase):
    def make(self, states, losing=(), max_fallovers=10, subset=1):
        store = FakeStore(states, losing)
        settings = Settings(
            host_subset_size=subset, max_fallovers=max_fallovers
        )
        sched = scheduler.Scheduler(store, settings, rng=random.Random(1))
        return store, sched

    def request(self, count=1, memory_mb=1024):
        return scheduler.Request.build(1, memory_mb, 1, num_instances=count)

    def test_lost_grant_falls_over_to_the_next_host(self):
        store, sched = self.make([host(1, 8192), host(2, 4096)], losing={1})
        [selection] = sched.schedule(self.request())
        self.assertEqual("host2", selection.host)
        self.assertEqual(1, sched.counters.conflicts)
        self.assertEqual(2, sched.counters.attempts)

    def test_fallover_bound_gives_no_valid_host(self):
        states = [host(i, 4096 + i) for i in range(1, 6)]
        store, sched = self.make(
            states, losing={1, 2, 3, 4, 5}, max_fallovers=2
        )
        with self.assertRaises(exception.NoValidHost) as caught:
            sched.schedule(self.request())
        self.assertIn("max_fallovers", str(caught.exception))
        self.assertEqual(3, sched.counters.attempts)

    def test_multi_instance_request_is_all_or_nothing(self):
        store, sched = self.make([host(1, 2048), host(2, 1024)])
        with self.assertRaises(exception.NoValidHost):
            sched.schedule(self.request(count=4))
        self.assertEqual(3, len(store.withdrawn))
        self.assertEqual({}, store.grants)

    def test_instances_of_one_request_see_each_others_grants(self):
        store, sched = self.make([host(1, 2048), host(2, 2048)])
        selections = sched.schedule(self.request(count=4))
        hosts = sorted(s.host for s in selections)
        self.assertEqual(["host1", "host1", "host2", "host2"], hosts)


class TestRequestValidation(base.TestCase):
    def test_bad_counts_and_uuids(self):
        build = scheduler.Request.build
        self.assertRaises(
            exception.InvalidRequest, build, 1, 1, 1, num_instances=0
        )
        self.assertRaises(
            exception.InvalidRequest, build, 1, 1, 1, instance_uuids=[]
        )
        self.assertRaises(
            exception.InvalidRequest, build, 1, 1, 1, instance_uuids=["a", "a"]
        )
        self.assertRaises(
            exception.InvalidRequest,
            build,
            1,
            1,
            1,
            num_instances=2,
            instance_uuids=["a"],
        )
        self.assertRaises(exception.InvalidResources, build, 0, 1, 1)
        self.assertEqual(
            3, len(build(1, 1, 1, num_instances=3).instance_uuids)
        )
