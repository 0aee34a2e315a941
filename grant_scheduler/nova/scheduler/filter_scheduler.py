"""The driver on Nova 17-22: Nova's FilterScheduler, each claim granted.

From Nova 17 on, Nova keeps every instance's resources in placement and
its conductor and computes move, swap and check those allocations for
every move, evacuation and quota count, whatever the scheduler driver
does.  A driver that writes nothing to placement breaks them.  So on
these releases the driver is Nova's own ``FilterScheduler`` (Nova's
request filters, allocation candidates, filters, weighers,
``[filter_scheduler] host_subset_size``, alternates, NoValidHost and its
reason, all Nova's) with one change, at the one place where a host is
taken: before Nova claims the chosen candidate in placement, grant_scheduler
grants it (``GrantingPlacementClient.claim_resources``).

* The grant decides.  It is written only if it fits the node's row under
  its lock (the protocol's write); a grant that does not fit answers the
  claim as placement's own capacity conflict does, and Nova moves to the
  next host of its sorted list.  Placement's claim then records the
  instance there; if placement refuses it, the grant is withdrawn.  No
  node is overcommitted in grant_scheduler's books even where placement
  itself overcommits under concurrency.
* Candidates are found by the driver, as Nova's manager finds them, but
  for a request of one unnumbered group of resources the chosen node's
  request is built instead of asking placement for every node's first
  (``candidates``); placement still decides the claim.
* The records stay Nova's.  Allocations are placement's, made by Nova's
  own code, so moves, forced evacuations and live migrations, request
  filters and quota from placement work as with the stock scheduler.
* Rebuilds on the same host take no grant: Nova does not claim for them
  either (``request_is_rebuild``).
* A grant held by an instance that Nova has deleted, or set to ERROR
  without a host (the conductor's quota recheck, a failed build request),
  is withdrawn as soon as it stands in the way (``follow.GrantFollower``),
  not after ``grant_ttl``.

Only imported when Nova 17-22 is.
"""

import collections
import contextlib
import dataclasses
import inspect
import threading
import time

from nova import conf as nova_conf
from nova import exception as nova_exception
from nova import rpc
from nova import servicegroup
from nova.scheduler import filter_scheduler
from oslo_log import log as logging
from oslo_utils import versionutils

from grant_scheduler import api
from grant_scheduler.nova import compat
from grant_scheduler.nova import outage as outage_module
from grant_scheduler.nova.scheduler import candidates
from grant_scheduler.nova.scheduler import host_manager as gs_host_manager

LOG = logging.getLogger(__name__)


def granted_amount(allocation_request, node_uuid):
    """The ``Resources`` an allocation request takes from one node's own
    provider, every class (a volume-backed server takes no DISK_GB there,
    nor does one whose disk is a sharing provider's)."""
    allocations = allocation_request.get("allocations") or {}
    held = (allocations.get(node_uuid) or {}).get("resources") or {}
    return api.Resources.of(
        {name: int(value) for name, value in held.items() if value}
    )


def _lacks_a_class(state, amount):
    """True when ``amount`` asks a class the node offers none of."""
    return any(name not in state.capacity.inventories for name in amount)


def _likely_alternates(
    selected_hosts, spec_obj, hosts, index, num_alts, *args, **kwargs
):
    """The uuids of the hosts Nova's ``_get_alternate_hosts`` (18-22, same
    arguments) comes to first for a request of one instance: the first
    ``num_alts`` of the sorted ``hosts`` in the chosen host's cell, the
    chosen aside; none for more instances (Nova sorts the hosts again)."""
    if len(selected_hosts) != 1 or index > 0 or num_alts < 1:
        return ()
    chosen = selected_hosts[0]
    likely = []
    for host in hosts:
        if len(likely) >= num_alts:
            break
        if host.cell_uuid == chosen.cell_uuid and host not in selected_hosts:
            likely.append(host.uuid)
    return likely


def _alternates_wanted(schedule, args, kwargs):
    """How many alternates Nova's ``_schedule`` (``schedule``, called with
    ``args`` and ``kwargs``) will choose for the host of a request for
    one instance: ``[scheduler] max_attempts`` less one when it returns
    alternates; 0 when it returns none, or for more instances (Nova sorts
    the hosts again for each)."""
    try:
        called = inspect.signature(schedule).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return 0
    uuids = called.arguments.get("instance_uuids")
    if not called.arguments.get("return_alternates") or not uuids:
        return 0
    if len(uuids) != 1:
        return 0
    return max(0, nova_conf.CONF.scheduler.max_attempts - 1)


class _NodeLocks:
    """A lock per node, held while this process claims on the node in
    placement.

    Placement refuses a claim whose provider another claim changed while
    it ran (a generation conflict), and Nova's client then sleeps a
    random time of up to two seconds before it tries again.  A process's
    concurrent requests granted on one node (the node Nova's weighers
    rank first for all of them) would meet there; one after the other,
    each claim waits only for the claims before it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._locks = {}  # node uuid -> [its lock, the claims using it]

    @contextlib.contextmanager
    def held(self, node_uuid):
        with self._lock:
            entry = self._locks.setdefault(node_uuid, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._lock:
                entry[1] -= 1
                if not entry[1]:
                    del self._locks[node_uuid]


# NOTE(placement): from this microversion on, a claim that names
# ``consumer_generation`` null is taken only if the consumer is new.
NEW_CONSUMER_VERSION = (1, 28)


class GrantingPlacementClient:
    """Nova's placement client whose claims a grant decides first.

    Everything but ``claim_resources`` and
    ``delete_allocation_for_instance`` is the wrapped client's.

    A claim for a new server (19-22: Nova's ``claim_resources`` given no
    consumer generation, the allocation request naming none, in a request
    that ignores no host, ``new_consumer``) is first one ``PUT
    /allocations/{consumer}`` that says so (``consumer_generation``
    null), which placement takes only if the consumer holds nothing;
    Nova's client first reads the consumer's allocations (one ``GET``)
    to find a move's.  Anything but placement taking it (no room, a
    conflict, a consumer that holds allocations after all, no answer)
    leaves the claim to Nova's ``claim_resources``, which reads, merges,
    retries and answers as for the stock scheduler.  A move's claim is
    Nova's alone: an evacuation's consumer holds the source's allocation
    while it is scheduled, and Nova's requests for it are exactly the
    stock scheduler's.
    """

    def __init__(self, client, grants, new_consumer=None):
        """
        :param client: Nova's ``SchedulerReportClient``.
        :param grants: the driver's ``NodeGrants``.
        :param new_consumer: ``f()``, True while the running request's
            consumers are new servers (none by default).
        """
        self._client = client
        self._grants = grants
        self._claiming = _NodeLocks()
        self._signature = None
        self._new_consumer = new_consumer or (lambda: False)

    def __getattr__(self, name):
        return getattr(self._client, name)

    def _placement_claim(self, context, consumer_uuid, request, *args, **kw):
        """Nova's claim of ``request`` (an allocation request, plain or
        ``candidates.BuiltRequest``) in placement, a new consumer's in one
        request where it can be."""
        if isinstance(request, candidates.BuiltRequest):
            request = request.plain()
        if self._claimed_as_new(context, consumer_uuid, request, args, kw):
            return True
        return self._client.claim_resources(
            context, consumer_uuid, request, *args, **kw
        )

    def _claimed_as_new(self, context, consumer_uuid, request, args, kw):
        """True when placement took ``request`` for ``consumer_uuid`` as
        a new consumer's; False when this was not tried or not taken
        (nothing was allocated then)."""
        if not self._new_consumer():
            return False
        if self._signature is None:
            self._signature = inspect.signature(self._client.claim_resources)
        parameters = self._signature.parameters
        if "consumer_generation" not in parameters:
            return False  # Nova 17-18: no consumer generations
        try:
            called = self._signature.bind(
                context, consumer_uuid, request, *args, **kw
            ).arguments
        except TypeError:
            return False
        version = called.get("allocation_request_version")
        if (
            called.get("consumer_generation") is not None
            or "consumer_generation" in request
            or not version
            or versionutils.convert_version_to_tuple(version)
            < NEW_CONSUMER_VERSION
        ):
            return False
        payload = dict(
            request,
            project_id=called["project_id"],
            user_id=called["user_id"],
            consumer_generation=None,
        )
        try:
            answer = self._client.put(
                "/allocations/%s" % consumer_uuid,
                payload,
                version=version,
                global_request_id=context.global_id,
            )
        except Exception:  # noqa: BLE001 - Nova's claim meets it as Nova does
            LOG.debug(
                "Claiming %s as a new consumer failed; Nova's claim follows",
                consumer_uuid,
                exc_info=True,
            )
            return False
        if answer is not None and answer.status_code == 204:
            return True
        LOG.debug(
            "Placement did not take %s as a new consumer (%s); Nova's "
            "claim follows",
            consumer_uuid,
            getattr(answer, "status_code", None),
        )
        return False

    def claim_resources(
        self, context, consumer_uuid, alloc_request, *args, **kw
    ):
        """Grant, then claim in placement; False (the next host) if either
        refuses, and then nothing stays granted or allocated.

        While grant_scheduler's database is taken as down (``outage``),
        placement's claim alone decides, or, with ``database_failure =
        refuse``, nothing is claimed."""
        built = isinstance(alloc_request, candidates.BuiltRequest)
        outage = self._grants.outage
        if outage.usable():
            try:
                return self._granted_claim(
                    context, consumer_uuid, alloc_request, built, *args, **kw
                )
            except outage_module.FAILURES as exc:
                outage.failed(exc, "granting %s" % consumer_uuid)
        if outage.refuses:
            return False
        claimed = self._placement_claim(
            context, consumer_uuid, alloc_request, *args, **kw
        )
        if claimed:
            # NOTE: only what placement took: a refused claim placed nothing.
            outage.decided_by_placement()
        return claimed

    def _granted_claim(
        self, context, consumer_uuid, alloc_request, built, *args, **kw
    ):
        node = self._grants.node_of(alloc_request)
        amount = (
            None
            if node is None
            else (granted_amount(alloc_request, node.node_uuid))
        )
        if amount is None or amount == api.NOTHING:
            # NOTE(placement): a node not in the books yet (its provider
            # had no inventory at the last sync), or nothing asked of the
            # node's own provider: placement's claim alone decides, as
            # for the stock scheduler.
            LOG.debug(
                "Nothing to grant for %s; placement's claim decides",
                consumer_uuid,
            )
            return self._placement_claim(
                context, consumer_uuid, alloc_request, *args, **kw
            )
        if not self._grants.grant(context, consumer_uuid, node, amount):
            if built and _lacks_a_class(node, amount):
                # NOTE(placement): the node has no inventory of a class the
                # request asks (its disk is a sharing provider's): a request
                # for its own provider is not the one placement offers.
                alloc_request.owner.refuse(node.node_uuid)
            return False
        try:
            with self._claiming.held(node.node_uuid):
                claimed = self._placement_claim(
                    context, consumer_uuid, alloc_request, *args, **kw
                )
        except BaseException:
            self._grants.withdraw(consumer_uuid)
            raise
        if not claimed:
            self._grants.withdraw(consumer_uuid)
            if built:
                alloc_request.owner.refuse(node.node_uuid)
        return claimed

    def delete_allocation_for_instance(self, context, uuid, *args, **kw):
        """Nova gives up a request's claims (a multi-create that did not
        fit): its grants go with them (while the database is down, the
        follower and the reaper take them later)."""
        if not self._grants.outage.down:
            self._grants.withdraw(uuid)
        return self._client.delete_allocation_for_instance(
            context, uuid, *args, **kw
        )


class _UsageRead:
    """One read of a node's usage (and inventory) in placement, which
    the requests that arrived before it started may share
    (``NodeGrants._read_since``)."""

    def __init__(self, started):
        self.started = started
        self.done = threading.Event()
        self.usage = None
        self.capacity = None


def _room(state, others, amount):
    """``NodeGrants.has_room``'s answer for a node of the books: the test
    of HostState.fits with usage plus ``others`` and no live grants,
    without building that state."""
    capacity = state.capacity
    offered = capacity.inventories
    if any(name not in offered for name in amount):
        return None
    if not capacity.admits(amount):
        return False
    used, limit = state.used, state.limit
    return all(
        used[name] + others[name] + value <= limit[name]
        for name, value in amount.items()
    )


class _Verdicts:
    """``has_room``'s answers by amount, then by node uuid: ``(state,
    others, answer)``, the answer valid while the node's row and what
    placement holds beyond it are those objects.  The answers of the
    last ``amounts`` amounts asked are kept (a cloud's flavours)."""

    def __init__(self, amounts=8):
        self._amounts = amounts
        self._by_amount = collections.OrderedDict()
        self._last = (None, None)
        self._lock = threading.Lock()

    def of(self, amount):
        """``{node uuid: (state, others, answer)}`` for ``amount``."""
        last, verdicts = self._last
        if amount is last:
            return verdicts
        with self._lock:
            verdicts = self._by_amount.pop(amount, None)
            if verdicts is None:
                verdicts = {}
            self._by_amount[amount] = verdicts
            while len(self._by_amount) > self._amounts:
                self._by_amount.popitem(last=False)
            self._last = (amount, verdicts)
        return verdicts


class NodeGrants:
    """Grants on the node Nova's FilterScheduler chose, for one process."""

    def __init__(
        self,
        grant_scheduler,
        follower,
        refresh=None,
        others=None,
        outage=None,
        reconcile=None,
        usage=None,
        granted_here=None,
    ):
        """
        :param grant_scheduler: ``f()`` giving the ``GrantScheduler``.
        :param follower: ``follow.GrantFollower``.
        :param refresh: ``f(context, state)``, True when it reported a
            node's capacity that had changed (``NodeRegistry.refresh``).
        :param others: ``f(node_uuid)``, what placement holds on a node
            beyond the books (``PlacementCapacities.others``).
        :param usage: ``f(context, node_uuid)``, what placement has for
            the node now, ``(usage, capacity)`` as
            ``inventory.PlacementInventory.look`` answers, or None
            (``PlacementCapacities.look_now``).
        :param granted_here: ``instance_info.GrantedHere`` noting each
            instance this process grants, or None.
        :param outage: ``outage.Outage`` of this process (one that never
            recovers by itself when None: tests).
        :param reconcile: ``f(host, node)``, True when it corrected the
            node's claims to what Nova runs there
            (``reconcile.NodeReconciler``).
        """
        self._gs = grant_scheduler
        self._follower = follower
        self._refresh = refresh
        self._others = others
        self._reconcile = reconcile
        self._usage = usage
        self._granted_here = granted_here
        self._reads = {}  # node uuid -> the last _UsageRead of it
        self._by_uuid = {}
        self._verdicts = _Verdicts()
        self.outage = outage or outage_module.Outage(
            outage_module.SCHEDULE, lambda: None
        )

    def known(self):
        """``{(host, node): HostState}`` of grant_scheduler's rows, read
        from the view (its changes since the last read), so that a node
        whose row is gone (a database restored under a running scheduler)
        is registered again.  The view's own maps (``GrantScheduler.nodes``):
        nothing is built per node."""
        self._by_uuid, by_key = self._gs().nodes()
        return by_key

    def node_of(self, alloc_request):
        """grant_scheduler's node among an allocation request's providers.

        Names and uuids only, which change only when a node is registered
        or re-created: from the last ``known``, read again on a miss."""
        providers = alloc_request.get("allocations") or {}
        for attempt in range(2):
            for node_uuid in providers:
                state = self._by_uuid.get(node_uuid)
                if state is not None:
                    return state
            if not attempt:
                self.known()
        return None

    def has_room(self, node_uuid, amount):
        """False when the node's usage in the books, as of the last
        ``known``, with what placement holds there beyond the books as of
        the last look, leaves no room for ``amount`` (live grants aside:
        a grant of an instance Nova gave up is withdrawn on the grant's
        path); None when the node's own provider lacks a class of
        ``amount`` (a child or sharing provider may hold it: placement
        knows); True for a node not known."""
        state = self._by_uuid.get(node_uuid)
        if state is None:
            return True
        others = (
            api.NOTHING if self._others is None else self._others(node_uuid)
        )
        # NOTE: asked of every node a request may be offered, a thousand
        # times a request at the default max_placement_results: a node's
        # answer is kept while its row and ``others`` are the same objects
        # (both are replaced, never changed, when they change).
        verdicts = self._verdicts.of(amount)
        kept = verdicts.get(node_uuid)
        if kept is not None and kept[0] is state and kept[1] is others:
            return kept[2]
        verdict = _room(state, others, amount)
        verdicts[node_uuid] = (state, others, verdict)
        return verdict

    def placement_has_room(self, context, node_uuid, amount, since=None):
        """Whether placement has room for ``amount`` on the node now, as
        its candidates query decides: its usage read now (one ``GET
        .../usages``) within its inventory, the one in the books (read
        from placement at the last sync) or, where the provider moved
        since, read again (one ``GET .../inventories`` more).  For an
        alternate, which no claim checks before the conductor claims it:
        what another consumer took there since the last look, or an
        inventory lowered in placement since, leaves it out, as it leaves
        it out of placement's candidates.  ``has_room``'s answer when the
        node is not known or placement does not answer.

        :param since: ``time.monotonic()`` when the request arrived: a
            read of the node another request of this process started
            since then is used (it is as fresh as the candidates the
            stock scheduler fetches when a request arrives), else the
            node is read again.
        """
        state = self._by_uuid.get(node_uuid)
        read = (
            None
            if state is None or self._usage is None
            else self._read_since(context, node_uuid, since)
        )
        if read is None or read.usage is None:
            return self.has_room(node_uuid, amount)
        now = dataclasses.replace(state, used=read.usage, granted=api.NOTHING)
        if read.capacity is not None:
            now = dataclasses.replace(now, capacity=read.capacity, limit=None)
        return now.fits(amount)

    def _read_since(self, context, node_uuid, since):
        read = self._reads.get(node_uuid)
        if read is not None and since is not None and read.started >= since:
            read.done.wait()
            return read
        read = _UsageRead(time.monotonic())
        self._reads[node_uuid] = read
        try:
            looked = self._usage(context, node_uuid)
            if looked is not None:
                read.usage, read.capacity = looked
        finally:
            read.done.set()
        return read

    def grant(self, context, instance_uuid, node, amount):
        """Take a grant for ``instance_uuid`` on ``node``; False if it
        does not fit there even once stale grants are withdrawn."""
        if self._try(context, instance_uuid, node, amount):
            return True
        # NOTE(grants): placement offered this node, the books did not:
        # a grant of an instance Nova has already given up, or built
        # elsewhere, may hold it, or placement's inventory of the node
        # changed since the books last read it.
        retry = self._follower.on_node(
            context, node.host, node.node, node.node_uuid
        )
        if self._refresh is not None:
            retry = self._refresh(context, node) or retry
        if retry and self._try(context, instance_uuid, node, amount):
            return True
        # NOTE(grants): or a claim of an instance Nova no longer runs there
        # (its delete's cast was lost): the node's books made what Nova
        # runs, as the periodic reconciliation would make them.
        if self._reconcile is not None and self._reconcile(
            node.host, node.node
        ):
            return self._try(context, instance_uuid, node, amount)
        return False

    def _try(self, context, instance_uuid, node, amount):
        try:
            self._gs().grant_on(
                instance_uuid,
                node.host,
                node.node,
                amount,
                request_id=getattr(context, "request_id", None),
            )
        except (api.NoValidHost, api.UnknownHost) as exc:
            LOG.debug(
                "No grant for %s on %s/%s: %s",
                instance_uuid,
                node.host,
                node.node,
                exc,
            )
            return False
        if self._granted_here is not None:
            self._granted_here.note(instance_uuid, amount)
        return True

    def withdraw(self, instance_uuid):
        try:
            self._gs().withdraw_instance(instance_uuid)
        except api.GrantSchedulerError:
            LOG.warning(
                "Could not withdraw the grant of %s; it holds its room "
                "until it expires",
                instance_uuid,
                exc_info=True,
            )


class GrantingFilterScheduler(filter_scheduler.FilterScheduler):
    """Nova's FilterScheduler over the driver's host manager, claiming
    through ``GrantingPlacementClient``."""

    def __init__(self, host_manager, grants, registry):
        """
        :param host_manager: the driver's ``GrantsHostManager``.
        :param grants: ``NodeGrants``.
        :param registry: the driver's ``registry.NodeRegistry``.
        """
        # NOTE(nova): FilterScheduler.__init__ would build a HostManager of
        # its own (reading every instance of every cell); the driver's is
        # used instead, and the other attributes are set as Nova sets them.
        self.host_manager = host_manager
        self.servicegroup_api = servicegroup.API()
        self.notifier = rpc.get_notifier("scheduler")
        self._local = threading.local()
        self.placement_client = GrantingPlacementClient(
            compat.scheduler_report_client(),
            grants,
            new_consumer=lambda: getattr(self._local, "new_consumer", False),
        )
        self._grants = grants
        self._registry = registry

    @property
    def grants(self):
        """The ``NodeGrants`` its claims are granted by."""
        return self._grants

    def _schedule(self, context, spec_obj, *args, **kwargs):
        # NOTE(nova): every release's _schedule takes instance_uuids, then
        # alloc_reqs_by_rp_uuid; _get_all_host_states is not given them.
        self._local.requests = args[1] if len(args) > 1 else None
        self._local.alternates = _alternates_wanted(
            super()._schedule, (context, spec_obj) + args, kwargs
        )
        # NOTE(nova): a new server's request ignores no host; an
        # evacuation's ignores its source, where it still holds its
        # allocation (and a resize's or migration's, most often, its own).
        self._local.new_consumer = not compat.field(spec_obj, "ignore_hosts")
        try:
            return super()._schedule(context, spec_obj, *args, **kwargs)
        except nova_exception.NoValidHost as exc:
            if self._grants.outage.refuses:
                raise self._grants.outage.refusal() from exc
            rejected_by = self.host_manager.rejected_by(spec_obj)
            if rejected_by is None:
                raise
            reason = exc.kwargs.get("reason", compat.NOT_ENOUGH_HOSTS)
            raise compat.no_valid_host(reason, rejected_by) from exc
        finally:
            self._local.requests = None
            self._local.alternates = 0
            self._local.new_consumer = False

    def _get_sorted_hosts(self, spec_obj, host_states, index, *args, **kw):
        """Nova's sorted hosts; for the only instance of a request whose
        alternates are built requests, the nodes that will be its
        alternates if the first host's claim holds are read from
        placement while it is granted and claimed
        (``BuiltRequests.reading_ahead``)."""
        hosts = super()._get_sorted_hosts(
            spec_obj, host_states, index, *args, **kw
        )
        requests = getattr(self._local, "requests", None)
        wanted = getattr(self._local, "alternates", 0)
        if (
            wanted
            and hosts
            and index == 0
            and isinstance(requests, candidates.BuiltRequests)
        ):
            requests.reading_ahead(
                _likely_alternates(hosts[:1], spec_obj, hosts, 0, wanted)
            )
        return hosts

    def _get_alternate_hosts(self, *args, **kwargs):
        """Nova's alternates; with built requests, only nodes placement has
        room on now (``BuiltRequests.choosing_alternates``)."""
        requests = getattr(self._local, "requests", None)
        if isinstance(requests, candidates.BuiltRequests):
            requests.choosing_alternates(_likely_alternates(*args, **kwargs))
        return super()._get_alternate_hosts(*args, **kwargs)

    def _get_all_host_states(self, context, spec_obj, provider_summaries):
        """Nova's HostStates; a node grant_scheduler has not seen yet is
        registered first, so its grant can be decided.

        With built requests, the nodes are those placement would have
        offered (``BuiltRequests.offers``): at most ``[scheduler]
        max_placement_results`` of them drawn at random
        (``host_manager.Sample``) while the books decide, placement's
        own candidates (its provider summaries, as the manager passes
        them to the stock scheduler) once they are fetched.  So a request
        filters and weighs a bounded set of nodes, one stock could have
        been given: Nova's weighers normalise over the hosts they get.
        """
        requests = getattr(self._local, "requests", None)
        built = isinstance(requests, candidates.BuiltRequests)
        outage = self._grants.outage
        known = None
        if outage.usable():
            try:
                # NOTE: first, as the books' room decides the sample.
                known = self._grants.known()
            except outage_module.FAILURES as exc:
                outage.failed(exc, "reading the books")
        if built and not requests.refused:
            host_states = list(
                self.host_manager.get_host_states_by_uuids(
                    context,
                    gs_host_manager.Sample(
                        requests.offers,
                        nova_conf.CONF.scheduler.max_placement_results,
                    ),
                    spec_obj,
                )
            )
        else:
            if built:
                provider_summaries = requests.summaries
            host_states = list(
                super()._get_all_host_states(
                    context, spec_obj, provider_summaries
                )
            )
        if known is not None and outage.usable():
            try:
                self._registry.register_unknown(context, known, host_states)
            except outage_module.FAILURES as exc:
                outage.failed(exc, "registering compute nodes")
        if built and requests.refused:
            # NOTE(placement): placement's candidates, fetched while the
            # sample was drawn (a node whose own provider lacks a class).
            host_states = [h for h in host_states if requests.offers(h.uuid)]
        return host_states
