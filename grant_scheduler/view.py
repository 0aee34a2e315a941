"""A scheduler's view of the nodes, and the cache it is built from.

Each node's row carries its usage *and* the sum of its live grants, so the
view is the rows alone.  ``ViewCache`` keeps one process's copy of every
row and refreshes it, per request, with one statement: the rows stamped
(``gs_hosts.updated_at``, indexed) since the newest stamp it has seen,
less an ``overlap`` window for writes stamped before that read and
committed after it; every ``resync_interval`` seconds it reads every row
again.  Rows in the overlap window whose stamp is the one the cache holds
come back as their stamps alone (``storage.Known``).  A decision therefore
costs a read of what changed, not of every node.  Inside Nova a loop of the
scheduler process makes the read of every row before it falls due
(``refresh_due``), so that requests seldom carry it; reads are made one at
a time.

The view may be stale; staleness never costs safety, only a lost grant:
a grant is decided by the database in its own write, and the node's row
as that write found it is folded back into the view and the cache.  Before
a request is answered NoValidHost the cache reads every row again, so that
answer always rests on a read begun after the last lost grant (I2).

``View`` is the per-request copy: copy-on-write over the cache, ordered by
a ``Ranker`` (by default ``decision.Spread``'s most free first; Nova's
adapter plugs in Nova's filters and weighers).
"""

import dataclasses
import datetime
import threading
import time

from grant_scheduler import decision
from grant_scheduler import storage


@dataclasses.dataclass(frozen=True)
class Destination:
    host: str
    node: str
    node_uuid: str = None


def _put(states, free, host_id, fresh):
    """Keep ``fresh`` (a node's row as read; None: gone) in both maps."""
    if fresh is None:
        states.pop(host_id, None)
        free.pop(host_id, None)
    else:
        states[host_id] = fresh
        free[host_id] = decision.free_key(fresh)


class Ranker:
    """The ranking hook: which nodes with room one request prefers.

    The scheduler decides *whether* a node has room (the rows, then the
    grant's conditional write); a ``Ranker`` decides which of the nodes
    with room are *best*.  This base class ranks most free first with
    ``decision.Spread``; Nova's adapter plugs in Nova's filters and
    weighers (``nova.scheduler.ranker.NovaRanker``).  The scheduler calls
    it through the request's ``View``, only as documented here, and a
    ranker reads the view only through ``View``'s public methods.  One
    ranker serves one request.
    """

    def admits(self, state):
        """Whether the node may be chosen at all (Nova's adapter: only
        nodes Nova knows); an inadmissible node is left out of the view."""
        return True

    def subset_size(self, configured):
        """Among how many of the best nodes the choice is random."""
        return configured

    def loaded(self, view):
        """The view's rows were (re)read: at the start, after a lost
        grant (a fall-over) and on a full read; ``view.states()`` is now
        what it holds."""

    def rank(self, view, request, count):
        """Up to ``count`` of the view's states with room for
        ``request.resources`` that ``request.placement`` allows, best
        first."""
        return view.most_free(request, count)

    def won(self, view, state, amount):
        """The request took a grant of ``amount`` on ``state`` (the row
        before it; the view already counts the grant)."""

    def alternates(self, view, request, chosen):
        """Up to ``request.num_alternates`` other nodes for the instance
        just placed on ``chosen``, best first, as ``Destination``s."""
        ranked = view.most_free(
            request, request.num_alternates, exclude=(chosen.host_id,)
        )
        return tuple(Destination(s.host, s.node, s.node_uuid) for s in ranked)


DEFAULT_RANKER = Ranker()


class View:
    """The nodes as one request sees them: the rows, copied on write, and
    the ``Ranker`` that orders them."""

    def __init__(self, states, spread=None, ranker=None):
        self.spread = spread or decision.Spread()
        self.ranker = ranker or DEFAULT_RANKER
        self.reload(states)

    @classmethod
    def over(cls, states, free, spread, ranker=None):
        """A view over a cache's dictionaries, copied on write."""
        view = cls.__new__(cls)
        view.spread = spread
        view.ranker = ranker or DEFAULT_RANKER
        if view.ranker is DEFAULT_RANKER:
            view._states = dict(states)
            view._free = dict(free)
        else:
            view._states = {}
            view._free = {}
            admits = view.ranker.admits
            for host_id, state in states.items():
                if admits(state):
                    view._states[host_id] = state
                    view._free[host_id] = free[host_id]
            view.ranker.loaded(view)
        return view

    def reload(self, states):
        """Take every node's row as read (the others are gone)."""
        admits = self.ranker.admits
        self._states = {s.host_id: s for s in states if admits(s)}
        self._free = {h: decision.free_key(s) for h, s in self._states.items()}
        self.ranker.loaded(self)

    # -- what a ranker reads ------------------------------------------------

    def states(self):
        """Every node's row the request sees."""
        return list(self._states.values())

    def by_node(self):
        """``{(host, node): HostState}`` of every row the request sees."""
        return {(s.host, s.node): s for s in self._states.values()}

    def most_free(self, request, count, exclude=()):
        """Up to ``count`` nodes with room for the request, most free
        first (``decision.Spread``): the default ranking."""
        return self.spread.best(
            self._states,
            self._free,
            request.resources,
            request.placement,
            count,
            exclude,
        )

    # -- what the scheduler calls -------------------------------------------

    def ranked(self, request, subset_size, spare=0):
        """The best ``subset_size`` fits, then the alternates' worth and
        ``spare`` more, as the ranker orders them."""
        return self.ranker.rank(
            self, request, subset_size + request.num_alternates + spare
        )

    def candidates(self, request, subset_size, spare=0):
        """Nodes to grant on, in order: one chosen at random among the
        best ``subset_size`` (the ranker may say another size), then the
        others ranked (``spare`` more than the subset and the
        alternates); [] if none fits."""
        subset_size = self.ranker.subset_size(subset_size)
        ranked = self.ranked(request, subset_size, spare)
        chosen = self.spread.choose(ranked, subset_size)
        if chosen is None:
            return []
        return [chosen] + [s for s in ranked if s is not chosen]

    def room(self, request, wanted):
        """How many instances of ``request`` the nodes take in all, by
        their free amounts, counted up to ``wanted``.

        A node takes ``free // amount`` of them in its tightest dimension,
        none when one instance exceeds its total (``max_unit``).  This is
        an upper bound for any ranking (a ranker only orders nodes, or
        leaves some out): fewer than the request means it cannot fit.
        """
        amount = request.resources
        placement = request.placement
        standard = decision.standard_wants(amount)
        found = 0
        for host_id, key in self._free.items():
            if not placement.anywhere and not placement.allows(
                self._states[host_id]
            ):
                continue
            if not decision.fits_key(key, amount, standard):
                continue
            if key[6] is None:
                frees = zip(key[:3], standard)
            else:
                frees = ((key[6].free[n], v) for n, v in amount.items())
            found += min(free // want for free, want in frees if want)
            if found >= wanted:
                return wanted
        return found

    def consume(self, state, amount):
        """Count a grant this request has just won on ``state``."""
        _put(
            self._states,
            self._free,
            state.host_id,
            dataclasses.replace(state, granted=state.granted + amount),
        )
        self.ranker.won(self, state, amount)

    def alternates(self, request, chosen):
        if not request.num_alternates:
            return ()
        return self.ranker.alternates(self, request, chosen)


class ViewCache:
    """One process's node rows, refreshed from what changed."""

    def __init__(
        self, store, resync_interval, overlap, spread=None, clock=None
    ):
        self.store = store
        self.resync_interval = resync_interval
        self.overlap = datetime.timedelta(seconds=overlap)
        self.spread = spread or decision.Spread()
        self._clock = clock or time.monotonic
        self._states = {}
        self._free = {}
        self._stamps = {}
        """``{host id: stamp}`` of each cached row as it was read."""
        self._by_uuid = {}
        """``{node uuid: HostState}`` of the cached rows."""
        self._by_key = {}
        """``{(host, node): HostState}`` of the cached rows."""
        self._newest = None
        self._resync_at = None
        self.rows_read = 0
        self.full_reads = 0
        self.others_granted = False
        """Whether the last read for a request (or a full read made
        ahead since the one before it) found another scheduler's grants."""
        self._others_behind = False
        self._own = set()
        self._lock = threading.Lock()
        """One read at a time: a read applied after a later one would put
        back rows older than those kept, and its stamps could no longer
        tell what changed since (green threads under eventlet)."""

    def refresh(self, full=False):
        """Read what changed (every row when ``full`` or due)."""
        with self._lock:
            self.others_granted = self._read(full) or self._others_behind
            self._others_behind = False

    def refresh_due(self, ahead):
        """Read every row now if that read falls due within ``ahead``
        seconds, or was never made: run by a loop of the process's own
        every ``ahead`` seconds, so that a request seldom finds it due
        (with a ``resync_interval`` of 0 every request reads every row:
        nothing is read here).

        :returns: whether every row was read.
        """
        if not self.resync_interval:
            return False  # every request reads every row
        with self._lock:
            due_at = self._resync_at
            if due_at is not None and self._clock() + ahead < due_at:
                return False
            # NOTE: another scheduler's grants found here are told to the
            # next request, whose own read may find none.
            self._others_behind = self._read(True) or self._others_behind
            return True

    def _read(self, full):
        """One read, under the lock; returns whether it found another
        scheduler's grants."""
        now = self._clock()
        full = full or self._resync_at is None or now >= self._resync_at
        since = None
        if not full and self._newest is not None:
            since = self._newest - self.overlap
        known = None
        if since is not None:
            known = storage.Known(self._stamps, self._newest)
        changes = self.store.read_hosts(since, known)
        previous = self._free
        if full:
            self._states, self._free, self._stamps = {}, {}, {}
            self._by_uuid, self._by_key = {}, {}
            self._resync_at = now + self.resync_interval
            self.full_reads += 1
        others = False
        for state, stamp in changes:
            before = previous.get(state.host_id)
            if (
                before is not None
                and state.host_id not in self._own
                and decision.lowered(decision.free_key(state), before)
            ):
                # NOTE: a claim or a release never lowers what is free;
                # another scheduler's grant does.
                others = True
            self._keep(state.host_id, state)
            self._stamps[state.host_id] = stamp
            if stamp is not None and (
                self._newest is None or stamp > self._newest
            ):
                self._newest = stamp
        self.rows_read += len(changes)
        self._own = set()
        return others

    def own(self, host_id):
        """This process granted on ``host_id`` (not another scheduler)."""
        self._own.add(host_id)

    def view(self, full=False, ranker=None):
        """A fresh ``View`` for one request, ranked by ``ranker``."""
        self.refresh(full)
        return View.over(self._states, self._free, self.spread, ranker)

    def states(self):
        return list(self._states.values())

    def nodes(self):
        """``(by node uuid, by (host, node))``: every cached row, refreshed
        from what changed, in two maps the cache keeps up to date as it
        reads, so that asking costs nothing per node.  The cache's own
        maps: read them, never change them; a full read replaces them."""
        self.refresh()
        return self._by_uuid, self._by_key

    def find(self, host, node):
        """The cached row of ``host``/``node``, or None."""
        return self._by_key.get((host, node))

    def fold(self, host_id, fresh):
        """Keep a row read by a grant's own transaction (None: gone)."""
        self._keep(host_id, fresh)

    def _keep(self, host_id, fresh):
        """``_put``, with the maps by node uuid and by names following."""
        before = self._states.get(host_id)
        if before is not None:
            if self._by_uuid.get(before.node_uuid) is before:
                del self._by_uuid[before.node_uuid]
            if self._by_key.get((before.host, before.node)) is before:
                del self._by_key[(before.host, before.node)]
        _put(self._states, self._free, host_id, fresh)
        if fresh is not None:
            self._by_uuid[fresh.node_uuid] = fresh
            self._by_key[(fresh.host, fresh.node)] = fresh
