"""A scheduler's view of the hosts, and the cache it is built from.

``ViewCache`` keeps one process's copy of every host row and refreshes it
from the rows stamped since its last read (``gs_hosts.updated_at``, indexed)
plus the live grants, which are few; every ``resync_interval`` seconds it
reads every row again.  A request's decision therefore costs reads of what
changed, not of every host (DESIGN section 5, scale).

The view may be stale: a change stamped before the last read but committed
after it is caught by re-reading an ``overlap`` window, and anything else
by the periodic resync.  Staleness never costs safety: a grant is decided
by its verification, which reads the host as committed, and what that read
reveals is folded back into the view.

``View`` is the per-request copy: copy-on-write over the cache, ranked by a
tight loop over precomputed free amounts, with the same result as
``decision.best_fits`` (best fit first: most free RAM, then vCPU, disk).
"""

import dataclasses
import datetime
import heapq
import time

from grant_scheduler.resources import NOTHING


def _free(state):
    free = state.free
    return (free.memory_mb, free.vcpus, free.disk_gb)


@dataclasses.dataclass(frozen=True)
class Destination:
    host: str
    node: str
    node_uuid: str = None


class View:
    """The hosts as one request sees them.

    A subclass may rank differently (Nova's adapter runs Nova's filters and
    weighers); the protocol only needs the methods below.
    """

    def __init__(self, states):
        self.reload(states)

    @classmethod
    def over(cls, base_states, base_free, granted, pending):
        """A view over a cache's rows plus the current live grants."""
        view = cls.__new__(cls)
        view._states = dict(base_states)
        view._free = dict(base_free)
        for host_id, amount in granted.items():
            state = view._states.get(host_id)
            if state is None:
                continue  # a grant on a host this cache has not seen yet
            state = dataclasses.replace(
                state, granted=amount, pending=pending.get(host_id, NOTHING)
            )
            view._states[host_id] = state
            view._free[host_id] = _free(state)
        return view

    def reload(self, states):
        # NOTE: grants this request already won stay counted: they are in
        # the database's live grants, so a reload keeps them.
        self._states = {state.host_id: state for state in states}
        self._free = {h: _free(s) for h, s in self._states.items()}

    def _best(self, request, count, exclude=None):
        amount = request.resources
        placement = request.placement
        anywhere = not (
            placement.ignore_hosts
            or placement.force_hosts
            or placement.force_nodes
        )
        ram, vcpus, disk = amount.memory_mb, amount.vcpus, amount.disk_gb
        states, free = self._states, self._free
        fitting = [
            (free_ram, free_vcpus, free_disk, -host_id)
            for host_id, (free_ram, free_vcpus, free_disk) in free.items()
            if free_ram >= ram
            and free_vcpus >= vcpus
            and free_disk >= disk
            and host_id != exclude
            and (anywhere or placement.allows(states[host_id]))
        ]
        return [states[-key[3]] for key in heapq.nlargest(count, fitting)]

    def ranked(self, request, subset_size):
        return self._best(request, subset_size + request.num_alternates)

    def consume(self, state, amount):
        """Count a grant this request has just won on ``state``."""
        self.replace(
            state.host_id,
            dataclasses.replace(state, granted=state.granted + amount),
        )

    def alternates(self, request, chosen):
        if not request.num_alternates:
            return ()
        ranked = self._best(
            request, request.num_alternates, exclude=chosen.host_id
        )
        return tuple(Destination(s.host, s.node, s.node_uuid) for s in ranked)

    def blocked_by_undecided(self, request):
        return [
            state.host_id
            for state in self._states.values()
            if request.placement.allows(state)
            and state.pending != NOTHING
            and state.fits_if_undecided_lose(request.resources)
        ]

    def forget(self, host_id):
        self._states.pop(host_id, None)
        self._free.pop(host_id, None)

    def replace(self, host_id, fresh):
        if fresh is None:
            self.forget(host_id)
        else:
            self._states[host_id] = fresh
            self._free[host_id] = _free(fresh)


class ViewCache:
    """One process's host rows, refreshed from what changed."""

    def __init__(self, store, resync_interval=60.0, overlap=2.0, clock=None):
        self.store = store
        self.resync_interval = resync_interval
        self.overlap = datetime.timedelta(seconds=overlap)
        self._clock = clock or time.monotonic
        self._states = {}
        self._free = {}
        self._read_at = None
        self._resync_at = 0.0
        self.rows_read = 0

    def view(self, view_cls=View):
        resync = self._read_at is None or self._clock() >= self._resync_at
        since = None if resync else self._read_at - self.overlap
        changes = self.store.read_changes(since)
        if resync:
            self._states, self._free = {}, {}
            self._resync_at = self._clock() + self.resync_interval
        for state in changes.hosts:
            self._states[state.host_id] = state
            self._free[state.host_id] = _free(state)
        self.rows_read += len(changes.hosts)
        self._read_at = changes.read_at
        return view_cls.over(
            self._states, self._free, changes.granted, changes.pending
        )
