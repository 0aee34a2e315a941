"""The decisions of the grants protocol, with no storage in them.

Two decisions are made here and nowhere else:

* *Which host?*  ``best_fits`` filters and weighs host states and
  ``pick`` chooses randomly among the best ``host_subset_size`` of them
  (DESIGN H7).
* *Did my grant win?*  ``replay`` walks a host's live grants in ticket
  order, the order in which they committed (H1): a grant whose verdict is
  already recorded as won counts; an undecided one wins when it fits on top
  of the host's usage and the winners before it, and loses otherwise, so a
  loser that has not yet withdrawn never counts against later grants (H6).

Why verdicts are recorded rather than replayed from scratch each time: a
replay that re-decides every undecided grant from the *current* usage is not
stable.  If capacity is freed between two replays (an instance is released,
a winner is withdrawn), an early grant that lost in one replay can win in
the next and push out a later grant that had already won; both builds then
land on the host.  So the first replay that decides a grant records the
verdict, and every later replay takes recorded verdicts as they are.
"""

import dataclasses
import heapq

from grant_scheduler.db import models


@dataclasses.dataclass(frozen=True)
class LiveGrant:
    """A grant as the verifier reads it back."""

    id: int
    ticket: int
    resources: object
    state: str


@dataclasses.dataclass(frozen=True)
class Replay:
    """The outcome of walking one host's live grants in ticket order."""

    verdicts: dict
    """``{grant id: True (won) or False (lost)}`` for undecided grants."""

    committed: object
    """Usage plus every winner walked (a ``Resources``)."""


def replay(used, limit, grants):
    """Decide the undecided grants among ``grants`` (see module doc).

    :param used: the host's usage (``Resources``), consumed grants included.
    :param limit: the host's limit (``Resources``).
    :param grants: live (pending or won) grants on the host.
    :returns: a ``Replay``.
    """
    verdicts = {}
    committed = used
    for grant in sorted(grants, key=lambda g: g.ticket):
        if grant.state == models.GRANT_WON:
            committed = committed + grant.resources
        elif grant.state == models.GRANT_PENDING:
            fits = (committed + grant.resources).fits_within(limit)
            verdicts[grant.id] = fits
            if fits:
                committed = committed + grant.resources
    return Replay(verdicts=verdicts, committed=committed)


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a request may go: filters that do not depend on capacity."""

    ignore_hosts: frozenset = frozenset()
    force_hosts: frozenset = frozenset()
    force_nodes: frozenset = frozenset()

    def allows(self, state):
        if state.host in self.ignore_hosts:
            return False
        if self.force_hosts and state.host not in self.force_hosts:
            return False
        if self.force_nodes and state.node not in self.force_nodes:
            return False
        return True


def weight(state):
    """Spread: most free RAM first, then most free vCPU (Nova's default)."""
    free = state.free
    return (free.memory_mb, free.vcpus, free.disk_gb, -state.host_id)


def best_fits(states, request, placement, count):
    """Up to ``count`` host states that fit ``request``, best first."""
    fitting = (s for s in states if placement.allows(s) and s.fits(request))
    return heapq.nlargest(count, fitting, key=weight)


def pick(ranked, subset_size, rng):
    """Choose randomly among the first ``subset_size`` of ``ranked``."""
    if not ranked:
        return None
    return rng.choice(ranked[: max(1, subset_size)])
