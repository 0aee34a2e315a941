"""The decisions of the grants protocol, with no storage in them.

*Which host?*  ``Spread`` ranks the nodes that fit a request, most free
first (RAM, then vCPU, then disk: Nova's default spreading weighers), ties
broken by a random order of the nodes drawn once per scheduler process, and
``Spread.choose`` takes one at random among the best ``host_subset_size``
(H7).  Two schedulers facing the same equally free nodes therefore
prefer different ones, and one scheduler's consecutive choices still spread.

*Does the grant hold?*  A node can take a request when its usage plus its
live grants plus the request stays within its limit in every dimension,
and the request itself within the node's total (placement's ``max_unit``)
(``resources.HostState.fits``).  The data layer evaluates exactly this rule
inside the grant's own ``UPDATE`` of the node's row, on the latest committed
row under its lock, so the decision and the write are one step and no
later reader can see a grant that should not have been made (H1, H2, H6).
The same rule re-checks a claim that arrives without a live grant (H5).
"""

import dataclasses
import heapq
import random

# The states of a grant row.
GRANT_WON = "won"
"""Live: the capacity is promised to the instance."""
GRANT_CONSUMED = "consumed"
"""Counted in the node's usage by the compute host's claim."""


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a request may go: filters that do not depend on capacity."""

    ignore_hosts: frozenset = frozenset()
    force_hosts: frozenset = frozenset()
    force_nodes: frozenset = frozenset()

    @property
    def anywhere(self):
        return not (self.ignore_hosts or self.force_hosts or self.force_nodes)

    def allows(self, state):
        if state.host in self.ignore_hosts:
            return False
        if self.force_hosts and state.host not in self.force_hosts:
            return False
        if self.force_nodes and state.node not in self.force_nodes:
            return False
        return True


def free_key(state):
    """The free amounts ``Spread`` ranks by (RAM, vCPU, disk), then the
    largest instance the node takes now in each: the free amount, but no
    more than the node's total (placement's ``max_unit``)."""
    free, total = state.free, state.capacity.total
    return (
        free.memory_mb,
        free.vcpus,
        free.disk_gb,
        min(free.memory_mb, total.memory_mb),
        min(free.vcpus, total.vcpus),
        min(free.disk_gb, total.disk_gb),
    )


class Spread:
    """Rank nodes most free first; choose among the best few at random."""

    def __init__(self, rng=None):
        self.rng = rng or random.Random()
        self._tiebreak = {}

    def _order(self, host_id):
        order = self._tiebreak.get(host_id)
        if order is None:
            order = self._tiebreak[host_id] = self.rng.random()
        return order

    def best(self, states, free, amount, placement, count, exclude=()):
        """Up to ``count`` states that fit ``amount``, best first.

        :param states: ``{host id: HostState}``.
        :param free: ``{host id: free_key(state)}``, kept beside ``states``
            so ranking many nodes is one tight loop.
        """
        ram, vcpus, disk = amount.memory_mb, amount.vcpus, amount.disk_gb
        anywhere = placement.anywhere
        order = self._order
        fitting = [
            (key[0], key[1], key[2], order(host_id), host_id)
            for host_id, key in free.items()
            if key[3] >= ram
            and key[4] >= vcpus
            and key[5] >= disk
            and host_id not in exclude
            and (anywhere or placement.allows(states[host_id]))
        ]
        return [states[key[4]] for key in heapq.nlargest(count, fitting)]

    def choose(self, ranked, subset_size):
        """One of the first ``subset_size`` of ``ranked``, or None."""
        if not ranked:
            return None
        return self.rng.choice(ranked[: max(1, subset_size)])
