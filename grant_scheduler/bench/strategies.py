"""The strategies the benchmark compares, behind one small interface.

A strategy has a scheduler side (``place``: choose a host for one instance,
or None) and a compute side (``claim``: accept or reject the build).  Only
``grants`` runs the product's code path; the others are models of what
they stand for:

``grants``
    The product: ``GrantScheduler.schedule`` and ``GrantScheduler.claim``.
``grants-naive`` (UNSAFE)
    The seed's steps taken literally: earliest database timestamp wins, no
    ticket.  Exists to show DESIGN H1 happening.
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

import sqlalchemy as sa

from grant_scheduler import api
from grant_scheduler import decision
from grant_scheduler import exception
from grant_scheduler.bench import naive
from grant_scheduler.bench import placement_api
from grant_scheduler.db import api as db_api
from grant_scheduler.db import claims
from grant_scheduler.db import models
from grant_scheduler.db import rows
from grant_scheduler.db import store as gs_store

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
        except exception.NoValidHost:
            return None
        finally:
            self.attempts += self.gs.counters.attempts - before[0]
            self.conflicts += self.gs.counters.conflicts - before[1]


class ClaimingCompute(_Side):
    def claim(self, instance_uuid, host, node, amount):
        try:
            self.gs.claim(instance_uuid, host, node, amount)
            return True
        except exception.ClaimRejected:
            return False


class LegacyScheduler(_Side):
    """Chooses from host rows alone; the caller retries on rejection."""

    def choose(self, amount, ignore):
        self.attempts += 1
        placement = decision.Placement(ignore_hosts=frozenset(ignore))
        states = self.gs.store.load_view()
        for state in states:
            state.granted = api.Resources()
        ranked = decision.best_fits(
            states, amount, placement, self.gs.settings.host_subset_size
        )
        chosen = decision.pick(
            ranked, self.gs.settings.host_subset_size, self.gs.scheduler.rng
        )
        return None if chosen is None else (chosen.host, chosen.node)


class PlacementStore(gs_store.Store):
    """Capacity check and allocation in one transaction, guarded by the
    host's generation (placement's resource-provider generation)."""

    @db_api.transactional("writer")
    def allocate(self, conn, host_id, generation, amount, instance_uuid):
        H = models.hosts
        result = conn.execute(
            H.update()
            .where(H.c.id == host_id, H.c.generation == generation)
            .values(**rows.add_usage(amount))
        )
        if result.rowcount != 1:
            return False
        claims.insert_claim(conn, instance_uuid, host_id, amount, None)
        return True

    @db_api.transactional("reader")
    def usage_view(self, conn):
        return [
            rows.host_state(row)
            for row in conn.execute(sa.select(models.hosts))
        ]


class PlacementScheduler(_Side):
    def place(self, amount, instance_uuid):
        store = self.gs.store
        size = self.gs.settings.host_subset_size
        for _ in range(MAX_CAS_RETRIES):
            self.attempts += 1
            ranked = decision.best_fits(
                store.usage_view(), amount, decision.Placement(), size
            )
            chosen = decision.pick(ranked, size, self.gs.scheduler.rng)
            if chosen is None:
                return None
            if store.allocate(
                chosen.host_id, chosen.generation, amount, instance_uuid
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

    def _gs(self, url, settings, hooks=None):
        database = db_api.Database(url)
        store = self.store_cls(database) if self.store_cls else None
        return api.GrantScheduler(
            database, settings=settings, hooks=hooks, store=store
        )

    def scheduler_side(self, url, settings, hooks=None):
        return self.scheduler_cls(self._gs(url, settings, hooks))

    def compute_side(self, url, settings):
        return self.compute_cls(self._gs(url, settings))


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
            store_cls=PlacementStore,
        ),
        Strategy("grants", GrantsScheduler, ClaimingCompute),
        Strategy(
            "grants-naive",
            GrantsScheduler,
            ClaimingCompute,
            store_cls=naive.NaiveStore,
            unsafe=True,
        ),
    )
}

# placement-api: the real openstack-placement service (bench/placement_api.py),
# an optional extra; the benchmark leaves it out unless it is installed.
STRATEGIES[placement_api.STRATEGY.name] = placement_api.STRATEGY
