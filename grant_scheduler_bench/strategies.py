"""The strategies the benchmark compares, behind one small interface.

A strategy has a scheduler side (``place``: choose a host for one instance,
or None) and a compute side (``claim``: accept or reject the build).  Only
``grants`` runs the product's code path; the others are models of what
they stand for:

``grants``
    The product: ``GrantScheduler.schedule``, and on the compute side
    ``GrantScheduler.claim_instance``, the claim Nova's compute makes.
``grants-naive`` (UNSAFE)
    The seed's steps taken literally: earliest database timestamp wins, no
    ticket.  Exists to show H1 happening.
``placement``
    Today's Nova answer: read usage, check capacity and write the
    allocation with a per-host generation compare-and-swap in one
    transaction, retried on conflict.  The compute host has nothing left to
    claim.
``legacy``
    Nova before placement: read every host row, no grants; the compute host
    rejects what no longer fits and the request is retried on another host,
    up to ``max_attempts`` times.
"""

import random

from grant_scheduler import api
from grant_scheduler_bench import baselines
from grant_scheduler_bench import factory
from grant_scheduler_bench import placement_api

MAX_ATTEMPTS = 3
MAX_CAS_RETRIES = 200


class _Side:
    def __init__(self, gs):
        self.gs = gs
        self.attempts = 0
        self.conflicts = 0


class GrantsScheduler(_Side):
    def place(self, amount, instance_uuid):
        before = self.gs.counters.attempts, self.gs.counters.conflicts
        try:
            [selection] = self.gs.schedule(
                amount.vcpus,
                amount.memory_mb,
                amount.disk_gb,
                instance_uuids=[instance_uuid],
            )
            return selection.host, selection.node
        except api.NoValidHost:
            return None
        finally:
            self.attempts += self.gs.counters.attempts - before[0]
            self.conflicts += self.gs.counters.conflicts - before[1]


class ClaimingCompute(_Side):
    """Claims as Nova's compute side does (``nova/books/claims.py``): by the
    instance's grant when it holds one there, else by re-checking the node
    with the instance's amount."""

    def claim(self, instance_uuid, host, node, amount):
        try:
            self.gs.claim_instance(instance_uuid, host, node, lambda: amount)
            return True
        except api.ClaimRejected:
            return False


class _FullReads(_Side):
    """A scheduler that reads every node row per attempt, as Nova's
    HostManager and placement's allocation candidates do."""

    def __init__(self, gs, rng):
        super().__init__(gs)
        # One view per process, reloaded per read: its Spread keeps the
        # order among equals it drew, as a scheduler process's does.
        self.view = api.View([], api.Spread(rng))
        self.store = factory.store_of(gs)

    def _choose(self, states, amount, ignore=()):
        self.view.reload(states)
        request = api.Request.build(
            amount.vcpus,
            amount.memory_mb,
            amount.disk_gb,
            ignore_hosts=sorted(ignore),
        )
        candidates = self.view.candidates(
            request, self.gs.settings.host_subset_size
        )
        return candidates[0] if candidates else None


class LegacyScheduler(_FullReads):
    """Chooses from node rows alone; the caller retries on rejection."""

    def choose(self, amount, ignore):
        self.attempts += 1
        states = [state for state, _ in self.store.read_hosts()]
        chosen = self._choose(states, amount, ignore)
        return None if chosen is None else (chosen.host, chosen.node)


class PlacementScheduler(_FullReads):
    """Read usage, choose, allocate with a generation compare-and-swap."""

    def place(self, amount, instance_uuid):
        for _ in range(MAX_CAS_RETRIES):
            self.attempts += 1
            read = self.store.read_with_generation()
            generations = {state.host_id: gen for state, gen in read}
            chosen = self._choose([state for state, _ in read], amount)
            if chosen is None:
                return None
            if self.store.allocate(
                chosen.host_id,
                generations[chosen.host_id],
                amount,
                instance_uuid,
            ):
                return chosen.host, chosen.node
            self.conflicts += 1
        return None


class AllocatedCompute(_Side):
    def claim(self, instance_uuid, host, node, amount):
        return True


class Strategy:
    """A named pair of scheduler and compute sides."""

    def __init__(
        self,
        name,
        scheduler_cls,
        compute_cls,
        store_cls=None,
        unsafe=False,
        retries_on_reject=False,
    ):
        self.name = name
        self.scheduler_cls = scheduler_cls
        self.compute_cls = compute_cls
        self.store_cls = store_cls
        self.unsafe = unsafe
        self.retries_on_reject = retries_on_reject

    @property
    def label(self):
        return self.name + (" (UNSAFE)" if self.unsafe else "")

    def scheduler_side(self, url, settings, hooks=None, rng=None):
        rng = rng or random.Random()
        gs = factory.grant_scheduler(
            url, settings, hooks=hooks, rng=rng, store_cls=self.store_cls
        )
        if issubclass(self.scheduler_cls, _FullReads):
            return self.scheduler_cls(gs, rng)
        return self.scheduler_cls(gs)

    def compute_side(self, url, settings):
        return self.compute_cls(
            factory.grant_scheduler(url, settings, store_cls=self.store_cls)
        )


STRATEGIES = {
    s.name: s
    for s in (
        Strategy(
            "legacy", LegacyScheduler, ClaimingCompute, retries_on_reject=True
        ),
        Strategy(
            "placement",
            PlacementScheduler,
            AllocatedCompute,
            store_cls=baselines.PlacementModelStore,
        ),
        Strategy("grants", GrantsScheduler, ClaimingCompute),
        Strategy(
            "grants-naive",
            GrantsScheduler,
            ClaimingCompute,
            store_cls=baselines.NaiveStore,
            unsafe=True,
        ),
    )
}

# placement-api: the real openstack-placement service (placement_api.py),
# an optional extra; the benchmark leaves it out unless it is installed.
STRATEGIES[placement_api.STRATEGY.name] = placement_api.STRATEGY
