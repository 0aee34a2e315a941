"""The scheduler side of the grants protocol.

Per request: take the view of every node (its usage and
live grants are one row, from this process's ``view.ViewCache``); per
instance, choose randomly among the best fits (``decision.Spread``) and
take a grant there.  The grant is decided by the database in the write
itself (``storage.Store.grant``): it is written only if it fits on the
node's latest committed row, under that row's lock.  A grant that does not
fit is never written; the node's row as the write found it is folded into
the view and the cache, and the instance falls over to the next node.

After ``max_fallovers`` lost grants in a row, or when nothing in the view
fits, every node is read again and the request goes on with that view:
NoValidHost is answered only when a read begun after the last lost grant
shows that nothing fits (I2).  Every lost grant means another writer
changed that node after this request last read it, so a request does work
in proportion to the competition it meets, and some writer makes progress
with each of its fall-overs (I3).

A request the view's free amounts cannot hold as a whole is answered
NoValidHost before any grant, once a fresh read agrees.

A multi-instance request is all-or-nothing (H11): on any failure every
grant it took, and one whose commit may have landed unacknowledged, is
withdrawn before the error leaves ``schedule``.  Racing multi-instance
requests may each hold part of the room and all fail; one that failed
reads every node again once its grants are withdrawn and, while that read
holds all of it, starts again after a growing random pause (bounded by
``REQUEST_RETRIES``), so the requests that fit are placed.
"""

import dataclasses
import random
import time
import uuid

from oslo_log import log as logging

from grant_scheduler import decision
from grant_scheduler import exception
from grant_scheduler import injection
from grant_scheduler import process
from grant_scheduler import resources as gs_resources
from grant_scheduler import storage
from grant_scheduler import validate
from grant_scheduler import view as gs_view

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Request:
    """A request for ``len(instance_uuids)`` identical instances."""

    resources: gs_resources.Resources
    instance_uuids: tuple
    request_id: str
    placement: decision.Placement = decision.Placement()
    num_alternates: int = 0

    @classmethod
    def build(
        cls,
        vcpus=0,
        memory_mb=0,
        disk_gb=0,
        num_instances=None,
        instance_uuids=None,
        request_id=None,
        ignore_hosts=(),
        force_hosts=(),
        force_nodes=(),
        num_alternates=0,
        resources=None,
    ):
        """Validate user input into a ``Request``.

        :param resources: a ``Resources`` of any classes, in place of the
            three standard amounts.
        :raises InvalidResources: an amount is not an integer from 0 up,
            a class is not named as placement names them, or nothing at
            all is asked for.
        :raises InvalidRequest: a count, uuid, name or list is wrong.
        """
        if resources is None:
            amount = validate.resources(vcpus, memory_mb, disk_gb)
        elif vcpus or memory_mb or disk_gb:
            raise exception.InvalidResources(
                name="resources",
                value=resources,
                reason="give resources or the three amounts, not both",
            )
        else:
            amount = validate.resources_object(resources, "resources")
        if num_instances is not None:
            validate.count("num_instances", num_instances, minimum=1)
        if instance_uuids is None:
            instance_uuids = (None,) * (num_instances or 1)
        instance_uuids = validate.instance_uuids(instance_uuids)
        if not instance_uuids:
            raise exception.InvalidRequest(reason="no instance uuids given")
        if num_instances is not None and num_instances != len(instance_uuids):
            raise exception.InvalidRequest(
                reason="num_instances is %s but %d instance uuids were given"
                % (num_instances, len(instance_uuids))
            )
        known = [u for u in instance_uuids if u is not None]
        if len(set(known)) != len(known):
            raise exception.InvalidRequest(reason="instance uuids repeat")
        return cls(
            resources=amount,
            instance_uuids=instance_uuids,
            request_id=validate.name("request_id", request_id, optional=True)
            or "req-%s" % uuid.uuid4(),
            placement=decision.Placement(
                ignore_hosts=validate.names(
                    "ignore_hosts", ignore_hosts, "host"
                ),
                force_hosts=validate.names("force_hosts", force_hosts, "host"),
                force_nodes=validate.names("force_nodes", force_nodes, "node"),
            ),
            num_alternates=validate.count("num_alternates", num_alternates),
        )


@dataclasses.dataclass(frozen=True)
class Selection:
    """Where one instance goes, and the grant that holds its place."""

    instance_uuid: str
    host: str
    node: str
    node_uuid: str
    grant_id: int
    ticket: int
    resources: gs_resources.Resources
    alternates: tuple = ()
    """``Destination``s with room that hold no grant, best first."""


def _selection(instance_uuid, state, outcome, amount, alternates=()):
    """The answer for a grant ``outcome`` won on ``state``."""
    return Selection(
        instance_uuid=instance_uuid,
        host=state.host,
        node=state.node,
        node_uuid=state.node_uuid,
        grant_id=outcome.grant_id,
        ticket=outcome.ticket,
        resources=amount,
        alternates=alternates,
    )


@dataclasses.dataclass
class Counters:
    """What this scheduler did, for the benchmark and for logs."""

    requests: int = 0
    placed: int = 0
    no_valid_host: int = 0
    attempts: int = 0
    conflicts: int = 0
    full_reads: int = 0


# After a lost grant, or a view that shows other schedulers' grants, this
# many of the following requests offer the store every candidate (a locking
# read that skips nodes other grants hold); alone, a scheduler offers only
# its first choice, which costs one statement less.
CONTENDED_REQUESTS = 32
# How many more nodes than the subset a contended grant offers: the locking
# read takes the first of them that fits and no other grant holds, so a
# grant is lost only when every one of them was taken since the last read.
CONTENDED_SPARE = 13


# A multi-instance request that met other requests and found no room for
# its last instances gives its grants back; while a fresh read then shows
# room for all of it, it starts again, at most this many times, after a
# random pause of up to RETRY_DELAY seconds, doubled at each retry.
REQUEST_RETRIES = 8
RETRY_DELAY = 0.02


def default_name():
    """This process's name on its grants (``process.name``), by which a
    process on the same host can tell once it has ended."""
    return process.name()


class Scheduler:
    """Schedules requests through the grants protocol."""

    def __init__(self, store, settings, name=None, rng=None, hooks=None):
        self.store = store
        self.settings = settings
        self.name = name or default_name()
        self.hooks = hooks or injection.NO_HOOKS
        self.counters = Counters()
        self._rng = rng or random.Random()
        self._contended = 0
        self.view_cache = gs_view.ViewCache(
            store,
            resync_interval=settings.view_resync_interval,
            overlap=settings.view_overlap,
            spread=decision.Spread(rng),
        )

    def view(self, ranker=None):
        """This request's view, from the cache (one read of what changed),
        ordered by ``ranker`` (a ``view.Ranker``; the default when None)."""
        return self.view_cache.view(ranker=ranker)

    def schedule(self, request, view=None):
        """Place every instance of ``request`` or none of them.

        :param view: the request's ``view.View``, from ``view()``; by
            default one from this scheduler's cache with the default
            ranking (Nova's adapter passes one whose ``Ranker`` runs Nova's
            filters and weighers).
        :returns: one ``Selection`` per instance, in order.
        :raises NoValidHost: some instance could not be placed; every grant
            the request took has been withdrawn.
        """
        self.counters.requests += 1
        self._contended = max(0, self._contended - 1)
        if view is None:
            view = self.view()
        if self.view_cache.others_granted:
            self._contended = CONTENDED_REQUESTS
        self.hooks.fire("view_loaded", request=request)
        wanted = len(request.instance_uuids)
        try:
            self._check_room(view, request, wanted, contention=False)
            for retry in range(REQUEST_RETRIES + 1):
                if retry:
                    self._back_off(retry)
                try:
                    selections = self._place_all(view, request)
                    break
                except exception.NoValidHost:
                    # NOTE: the grants it held are withdrawn: room that
                    # racing requests left may now hold all of it.
                    if wanted == 1 or retry == REQUEST_RETRIES:
                        raise
                    self._check_room(view, request, wanted, contention=True)
        except exception.NoValidHost:
            self.counters.no_valid_host += 1
            raise
        self.counters.placed += len(selections)
        return selections

    def grant_on(self, request, host, node):
        """Grant the one instance of ``request`` on a node the caller has
        chosen (Nova's FilterScheduler), without ranking or falling over.

        No view is read: the grant's write decides against the node's
        row under its lock, as every grant does; the node's id comes from
        the cache, read again only when the node is not in it.
        :returns: the ``Selection``.
        :raises NoValidHost: it does not fit there now (nothing written).
        :raises UnknownHost: grant_scheduler does not know the node.
        """
        [instance_uuid] = request.instance_uuids
        self.counters.requests += 1
        state = self.view_cache.find(host, node)
        if state is None:
            self.view_cache.refresh(full=True)
            state = self.view_cache.find(host, node)
            if state is None:
                raise exception.UnknownHost(host=host, node=node)
        ask = self._ask(request, instance_uuid)
        self.counters.attempts += 1
        taken = []
        try:
            outcome = self.store.grant(
                [state.host_id],
                ask,
                taken,
                before_commit=self._hook("grant_inserted", state),
            )
        except BaseException:
            self._withdraw(request, [(h, t, ask) for h, t in taken])
            raise
        self.hooks.fire("grant_verified", host=host, won=outcome.won)
        if not outcome.won:
            self.counters.conflicts += 1
            for host_id, fresh in outcome.states.items():
                self.view_cache.fold(host_id, fresh)
            self.counters.no_valid_host += 1
            raise exception.NoValidHost(
                count=1,
                resources=request.resources,
                reason="it does not fit on %s/%s now" % (host, node),
                contention=False,
            )
        self.hooks.fire("grant_committed", host=host, ticket=outcome.ticket)
        self.view_cache.fold(
            state.host_id,
            dataclasses.replace(
                state, granted=state.granted + request.resources
            ),
        )
        self.view_cache.own(state.host_id)
        self.counters.placed += 1
        return _selection(instance_uuid, state, outcome, request.resources)

    def _ask(self, request, instance_uuid):
        return storage.Ask(
            request.resources,
            self.name,
            instance_uuid,
            request.request_id,
            self.settings.grant_ttl,
        )

    def _check_room(self, view, request, wanted, contention):
        """Raise NoValidHost, writing nothing, unless the view's free
        amounts hold the whole request; a view that does not is read again
        first, so the answer rests on a fresh read (I2)."""
        if view.room(request, wanted) >= wanted:
            return
        self._refresh(view)
        if view.room(request, wanted) < wanted:
            raise self._no_valid_host(view, request, contention)

    def _back_off(self, retry):
        """A random pause before a request starts again, growing with each
        retry: requests that took parts of the same room and gave them
        back all at once then do not meet again at the same moment."""
        time.sleep(self._rng.uniform(0, RETRY_DELAY * 2 ** (retry - 1)))

    def _place_all(self, view, request):
        """Place every instance, or withdraw every grant taken and raise."""
        selections = []
        taken = []
        try:
            for instance_uuid in request.instance_uuids:
                selections.append(
                    self._place(view, request, instance_uuid, taken)
                )
            self.hooks.fire("before_answer", selections=selections)
        except BaseException:
            self._withdraw(request, taken)
            raise
        return selections

    def _withdraw(self, request, taken):
        """Best effort, and idempotent: a grant not there is skipped."""
        for host_id, ticket, ask in taken:
            try:
                self.store.withdraw(host_id, ticket, ask)
            except Exception:
                LOG.warning(
                    "Could not withdraw grant %s on node %s of request %s; "
                    "it holds its capacity until it expires",
                    ticket,
                    host_id,
                    request.request_id,
                    exc_info=True,
                )
        if taken:
            LOG.debug(
                "Withdrew the grants of unplaced request %s",
                request.request_id,
            )

    def _refresh(self, view):
        """Read every node again into the cache and ``view``."""
        self.view_cache.refresh(full=True)
        self.counters.full_reads += 1
        view.reload(self.view_cache.states())

    def _place(self, view, request, instance_uuid, taken):
        amount = request.resources
        ask = self._ask(request, instance_uuid)
        subset = self.settings.host_subset_size
        losses = 0
        lost_any = False
        while True:
            spare = CONTENDED_SPARE if self._contended else 0
            candidates = []
            if losses < self.settings.max_fallovers:
                candidates = view.candidates(request, subset, spare)
            if not candidates:
                self._refresh(view)
                losses = 0
                candidates = view.candidates(request, subset, spare)
                if not candidates:
                    raise self._no_valid_host(view, request, lost_any)
            self.counters.attempts += 1
            # NOTE: one list per grant: the store recognises its own earlier
            # tries in it; the request's list collects them all, also when
            # the grant raises, for withdrawal.
            tries = []
            if not self._contended:
                candidates = candidates[:1]
            try:
                outcome = self.store.grant(
                    [state.host_id for state in candidates],
                    ask,
                    tries,
                    before_commit=self._hook("grant_inserted", candidates[0]),
                )
            finally:
                taken.extend(
                    (host_id, ticket, ask) for host_id, ticket in tries
                )
            self.hooks.fire(
                "grant_verified", host=candidates[0].host, won=outcome.won
            )
            if outcome.won:
                [chosen] = [
                    s for s in candidates if s.host_id == outcome.host_id
                ]
                self.hooks.fire(
                    "grant_committed", host=chosen.host, ticket=outcome.ticket
                )
                view.consume(chosen, amount)
                self.view_cache.own(chosen.host_id)
                return _selection(
                    instance_uuid,
                    chosen,
                    outcome,
                    amount,
                    view.alternates(request, chosen),
                )
            self.counters.conflicts += 1
            self._contended = CONTENDED_REQUESTS
            losses += 1
            lost_any = True
            # The lost write read the candidates under their locks: keep
            # that, then read what else changed meanwhile.
            for host_id, state in outcome.states.items():
                self.view_cache.fold(host_id, state)
            self.view_cache.refresh()
            view.reload(self.view_cache.states())
            LOG.debug(
                "No candidate of %s still fits %s; falling over",
                [s.host for s in candidates],
                amount,
            )

    def _hook(self, point, chosen):
        def fire(**info):
            self.hooks.fire(point, host=chosen.host, **info)

        return fire

    @staticmethod
    def _no_valid_host(view, request, contention):
        placement = request.placement
        known_hosts = {s.host for s in view.states()}
        known_nodes = {s.node for s in view.states()}
        unknown = sorted(placement.force_hosts - known_hosts) + sorted(
            placement.force_nodes - known_nodes
        )
        if unknown:
            reason = "the forced host or node %s is not known" % ", ".join(
                unknown
            )
        else:
            reason = "no host has room for it"
        return exception.NoValidHost(
            count=len(request.instance_uuids),
            resources=request.resources,
            reason=reason,
            contention=contention,
        )
