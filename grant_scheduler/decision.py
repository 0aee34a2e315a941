"""The decisions of the grants protocol, with no storage in them.

*Which host?*  ``Spread`` ranks the nodes that fit a request, most free
first (RAM, then vCPU, then disk: Nova's default spreading weighers), ties
broken by a random order of the nodes drawn once per scheduler process, and
``Spread.choose`` takes one at random among the best ``host_subset_size``
(H7).  Two schedulers facing the same equally free nodes therefore
prefer different ones, and one scheduler's consecutive choices still spread.

*Does the grant hold?*  A node can take a request when it offers every
class the request asks, each within the class's units (placement's
``min_unit``, ``max_unit``, ``step_size``), and its usage plus its live
grants plus the request stays within the class's limit
(``resources.HostState.fits``).  The data layer evaluates exactly this rule
inside the grant's own ``UPDATE`` of the node's inventory rows, under the
node's row lock, so the decision and the write are one step and no later
reader can see a grant that should not have been made (H1, H2, H6).
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


_STANDARD = ("MEMORY_MB", "VCPU", "DISK_GB")


def _plain(state):
    """True when the node offers the standard classes alone, in units of
    one: whether a request of them fits is then the key's comparison."""
    inventories = state.capacity.inventories
    return all(
        name in _STANDARD
        and inventory.min_unit <= 1
        and inventory.step_size == 1
        for name, inventory in inventories.items()
    )


def free_key(state):
    """The free amounts ``Spread`` ranks by (RAM, vCPU, disk), then the
    largest instance the node takes now in each (the free amount, but no
    more than the class's ``max_unit``; -1 where it offers none), then
    None, or the state itself when whether a request fits takes more than
    those numbers (another class, a unit above one): ``fits`` decides."""
    free, inventories = state.free, state.capacity.inventories
    units = []
    for name in _STANDARD:
        inventory = inventories.get(name)
        units.append(
            -1 if inventory is None else min(free[name], inventory.max_unit)
        )
    return (
        free["MEMORY_MB"],
        free["VCPU"],
        free["DISK_GB"],
        units[0],
        units[1],
        units[2],
        None if _plain(state) else state,
    )


def lowered(key, before):
    """True when ``key`` leaves less free than ``before`` (another
    scheduler's grant: a claim or a release never lowers what is free)."""
    if any(a < b for a, b in zip(key[:6], before[:6])):
        return True
    state, earlier = key[6], before[6]
    if state is None or earlier is None:
        return False
    return any(
        value < earlier.free[name] for name, value in state.free.items()
    )


def fits_key(key, amount, standard):
    """Whether a node of ``key`` fits ``amount``; ``standard``: the
    amount asks the standard classes alone (``standard_wants``)."""
    if key[6] is not None:
        return key[6].fits(amount)
    if standard is None:
        return False  # another class: a plain node offers none
    ram, vcpus, disk = standard
    return (
        (not ram or key[3] >= ram)
        and (not vcpus or key[4] >= vcpus)
        and (not disk or key[5] >= disk)
    )


def standard_wants(amount):
    """``(RAM, vCPU, disk)`` of an amount of the standard classes alone,
    else None."""
    if any(name not in _STANDARD for name in amount):
        return None
    return (amount["MEMORY_MB"], amount["VCPU"], amount["DISK_GB"])


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
        standard = standard_wants(amount)
        anywhere = placement.anywhere
        order = self._order
        fitting = [
            (key[0], key[1], key[2], order(host_id), host_id)
            for host_id, key in free.items()
            if fits_key(key, amount, standard)
            and host_id not in exclude
            and (anywhere or placement.allows(states[host_id]))
        ]
        return [states[key[4]] for key in heapq.nlargest(count, fitting)]

    def choose(self, ranked, subset_size):
        """One of the first ``subset_size`` of ``ranked``, or None."""
        if not ranked:
            return None
        return self.rng.choice(ranked[: max(1, subset_size)])
