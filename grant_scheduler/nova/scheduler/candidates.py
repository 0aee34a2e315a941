"""Allocation candidates for the driver on Nova 18-22.

Nova's SchedulerManager asks placement for allocation candidates before
it calls a driver whose ``USES_ALLOCATION_CANDIDATES`` is true: a
``GET /allocation_candidates`` that placement answers with one candidate
per provider with room, every provider's summary, and a JSON body Nova
decodes, all before any filter runs.  At 1,000 compute nodes that is a
quarter of a boot.

The driver asks itself instead (``Candidates.for_request``), with what
the manager would use: Nova's request filters (``process_reqspec``),
``resources_from_request_spec`` and its placement client.  A request of
resources in the one unnumbered group only (standard classes, PCPU, an
Ironic flavour's custom class, all on the compute node's own provider; no
trait, aggregate, tree or request group of its own) needs no candidates
to be claimed: its allocation request
for a node is the node's provider and those amounts, which
``BuiltRequests`` builds for the node Nova's FilterScheduler chose, and
the grant and placement's own claim still decide there.  Every other
request gets placement's candidates as the manager would have fetched
them.

When placement refuses a built request (its inventory is not the one the
amounts assume: DISK_GB from a sharing provider, a provider not there
yet, a ``max_unit`` below the flavour), the rest of the request is
decided by placement's candidates, fetched then.  So a built request
never takes a node placement would not have offered.

A forced host or node is decided by placement's candidates too: Nova's
HostManager runs no filter for it, so only placement's query keeps a
disabled compute out, as for the stock scheduler.

Placement leaves a full provider out of its candidates; a built request
leaves out a node whose usage in grant_scheduler's books leaves no room
for it (``NodeGrants.has_room``), so a full cloud is not tried node by
node.  Live grants do not leave a node out: the grant's own path
withdraws those of instances Nova has given up.  A request that finds no
host that way is decided once more by placement's candidates before
NoValidHost is answered (``BuiltRequests.left_out``): the books'
capacity of a node may be behind placement's (an allocation ratio raised
through placement's API since the last sync), and a node whose built
request was refused before placement's candidates were fetched deserves
their answer too.

``[scheduler] max_placement_results`` limits the candidates placement
returns; with built requests the driver filters and weighs a random
sample of that many of the nodes with room, which is all Nova's
HostManager copies into HostStates (``host_manager.Sample``): a set
placement could have returned.  Once placement's candidates are fetched,
their provider summaries name the nodes, as for the stock scheduler.
"""

import collections
import threading
import time
from urllib import parse

from nova import exception as nova_exception
from nova.scheduler import request_filter
from nova.scheduler import utils as scheduler_utils
from oslo_config import cfg
from oslo_log import log as logging

from grant_scheduler import api
from grant_scheduler.nova import compat
from grant_scheduler.nova import fanout

LOG = logging.getLogger(__name__)

# Nova's request filter (20 and later) forbids this trait on every
# request: placement then leaves out the nodes whose service is disabled,
# which Nova's ComputeFilter also does.
_DISABLED_TRAIT = "!COMPUTE_STATUS_DISABLED"


# The microversions of a built request's claim: the first with consumer
# generations, which Nova's claim sends from 19 on, else the first with
# allocations keyed by provider (18).
class BuiltRequest(dict):
    """One node's allocation request built by ``BuiltRequests``; a plain
    dict to Nova, which JSON-encodes and copies it."""

    def __init__(self, allocations, owner):
        super().__init__(allocations=allocations)
        self.owner = owner

    def plain(self):
        """The request as placement's claim sends it."""
        return {"allocations": self["allocations"]}


class BuiltRequests:
    """``alloc_reqs_by_rp_uuid`` for a request of one unnumbered group:
    every node's allocation request built on demand, until placement
    refuses one; then placement's candidates (``fetch()``).

    Used by one request at a time, as Nova's FilterScheduler uses the
    manager's dict: ``in``, ``[uuid]`` and, for the chosen hosts, ``get``.
    """

    def __init__(self, amounts, fetch, admits=None, now=None):
        """
        :param amounts: ``{resource class: amount}`` of one instance.
        :param fetch: ``f()`` giving placement's candidates by provider
            uuid (empty when there are none) and its provider summaries.
        :param admits: ``f(rp_uuid)``, False for a node known to have no
            room (as placement leaves out a full provider: the books'
            usage and what placement holds there for consumers the books
            do not know, as of the last look), None for one whose own
            provider lacks a class asked for (placement's candidates then
            decide the request); every node is admitted when None.
        :param now: ``f(rp_uuid)``, placement's word on whether a node has
            room for one instance now: asked of each alternate an admitted
            node would be (``choosing_alternates``), which no claim checks
            before the conductor claims it; alternates are as admitted
            when None.
        """
        self._amounts = dict(amounts)
        self._fetch = fetch
        self._admits = admits
        self._now = now
        self._alternates = None
        self._fetched = None
        self._summaries = None
        self._refused = False
        self._built = {}
        self._passed_over = False
        self._ahead = None

    def __bool__(self):
        return True

    def __contains__(self, rp_uuid):
        return self.offers(rp_uuid)

    def __getitem__(self, rp_uuid):
        fetched = self._candidates()
        if fetched is None:
            return [self._build(rp_uuid)]
        return fetched[rp_uuid]

    def get(self, rp_uuid, default=None):
        """The requests of a chosen host: placement's once fetched, else
        the one built (and claimed) there."""
        fetched = self._candidates()
        if fetched is not None and rp_uuid in fetched:
            return fetched[rp_uuid]
        if rp_uuid in self._built:
            return [self._built[rp_uuid]]
        return default

    def offers(self, rp_uuid):
        """Whether the node is among the providers placement would offer
        for the request: its candidates once fetched, else every node
        the books have room on (a node without a uuid has no provider,
        and is never offered)."""
        if rp_uuid is None:
            return False
        fetched = self._candidates()
        if fetched is not None:
            return rp_uuid in fetched
        verdict = True if self._admits is None else self._admits(rp_uuid)
        if verdict is None:
            # NOTE(placement): the node's own provider lacks a class the
            # request asks for: a child or sharing provider of the node may
            # hold it, which only placement's candidates tell.
            self.ask_placement()
            return rp_uuid in self._candidates()
        if not verdict:
            self._passed_over = True
            return False
        if self._alternates is None or self._now is None:
            return True
        # NOTE(placement): an alternate is claimed by the conductor only
        # if the chosen host's build fails: the books' room as of the last
        # look does not tell what another consumer took since, which
        # placement's candidates of this request would leave out.
        if rp_uuid not in self._alternates:
            self._alternates[rp_uuid] = bool(self._now(rp_uuid))
        return self._alternates[rp_uuid]

    def reading_ahead(self, likely):
        """Nova's FilterScheduler has sorted the hosts of a request for
        one instance and is about to grant and claim the first: the nodes
        that would then be its alternates (``likely``) are asked of
        placement now, on a thread of their own (a green thread in Nova),
        so that their reads overlap the grant and the claim rather than
        follow them.  ``choosing_alternates`` takes their answers; a node
        the claim falls over to is asked for nothing more (Nova never
        makes a chosen host an alternate)."""
        if self._now is None or self._refused:
            return
        if self._ahead is not None or self._alternates is not None:
            return
        pending = self._to_ask(likely)
        if not pending:
            return
        answers = {}
        thread = threading.Thread(
            target=self._ask_all, args=(pending, answers), daemon=True
        )
        thread.start()
        self._ahead = (thread, answers)

    def choosing_alternates(self, likely=()):
        """Nova's FilterScheduler has claimed every instance of the
        request: the nodes asked about from now on are alternates, each
        offered only if placement has room on it now (asked once per
        node and request).

        :param likely: uuids of the nodes Nova will ask about first, in
            its order: those the books admit are asked of placement at
            once, side by side, rather than one after the other as Nova
            comes to them (a node Nova then skips is one it would have
            asked about anyway); those read ahead are not asked again.
        """
        if self._alternates is None:
            self._alternates = {}
        ahead, self._ahead = self._ahead, None
        if self._now is None or self._refused:
            return
        if ahead is not None:
            thread, answers = ahead
            thread.join()
            self._alternates.update(answers)
        pending = self._to_ask(likely)
        if len(pending) < 2:
            return
        answers = {}
        self._ask_all(pending, answers)
        self._alternates.update(answers)

    def _to_ask(self, likely):
        """The nodes of ``likely`` whose room now is still to be asked of
        placement: the books admit them, and no answer is kept yet."""
        asked = self._alternates or ()
        return [
            rp_uuid
            for rp_uuid in dict.fromkeys(likely)
            if rp_uuid is not None
            and rp_uuid not in asked
            and (self._admits is None or self._admits(rp_uuid) is True)
        ]

    def _ask_all(self, pending, answers):
        """Placement's room on each node of ``pending``, side by side,
        into ``answers``; a read that fails leaves its node out, to be
        asked again when Nova comes to it."""

        def ask(rp_uuid):
            try:
                answers[rp_uuid] = bool(self._now(rp_uuid))
            except Exception:  # noqa: BLE001 - asked again when Nova comes
                LOG.debug("Placement's room on %s not read", rp_uuid)

        fanout.each(pending, ask, len(pending))

    @property
    def refused(self):
        """True once placement has refused a built request."""
        return self._refused

    def refuse(self, rp_uuid):
        """Placement refused the request built for ``rp_uuid``."""
        if not self._refused:
            LOG.info(
                "Placement refused the allocation request built for "
                "provider %s; asking placement for allocation candidates",
                rp_uuid,
            )
        self._refused = True

    @property
    def left_out(self):
        """True when a node was left out without placement's word: the
        books had no room for it, or its built request was refused."""
        return self._passed_over or self._refused

    def ask_placement(self):
        """From now on, placement's candidates (a request the books found
        no room for is decided by placement, as the stock scheduler's
        would be: the books may be behind placement's inventory)."""
        self._refused = True

    def _build(self, rp_uuid):
        built = self._built.get(rp_uuid)
        if built is None:
            built = BuiltRequest(
                {rp_uuid: {"resources": dict(self._amounts)}}, self
            )
            self._built[rp_uuid] = built
        return built

    @property
    def summaries(self):
        """Placement's provider summaries, once its candidates are
        fetched (what the manager passes the stock scheduler), else
        None."""
        self._candidates()
        return self._summaries

    def _candidates(self):
        if self._refused and self._fetched is None:
            self._fetched, self._summaries = self._fetch()
        return self._fetched


class Candidates:
    """What Nova's SchedulerManager passes a driver that uses allocation
    candidates, found by the driver."""

    def __init__(
        self, conf, client, host_manager, build=True, room=None, room_now=None
    ):
        """
        :param conf: the configuration object (Nova's ``CONF``).
        :param client: Nova's placement client.
        :param host_manager: ``f()`` giving the driver's host manager.
        :param build: build the allocation requests of one-group
            requests (``[grant_scheduler] build_allocation_requests``).
        :param room: ``f(rp_uuid, Resources)``, False for a node known to
            have no room for one instance of a built request.
        :param room_now: ``f(context, rp_uuid, Resources, since)``,
            placement's word on whether a node has room for one instance
            now, from a read made since ``time.monotonic()`` was
            ``since`` (asked of a built request's alternates).
        """
        self._conf = conf
        self._client = client
        self._host_manager = host_manager
        self._build = build
        self._room = room
        self._room_now = room_now
        self._version = compat.claim_version()

    def for_request(self, context, spec_obj):
        """``(alloc_reqs_by_rp_uuid, provider_summaries, version)`` for
        Nova's FilterScheduler, as the manager finds them.

        :raises NoValidHost: Nova's, when a request filter fails or
            placement has no candidate.
        """
        arrived = time.monotonic()
        if scheduler_utils.request_is_rebuild(spec_obj):
            return None, None, None
        try:
            request_filter.process_reqspec(context, spec_obj)
        except nova_exception.RequestFilterFailed as exc:
            raise nova_exception.NoValidHost(reason=exc.message) from exc
        resources = self._resources(context, spec_obj, True)
        amounts = (
            None
            if _skips_filters(spec_obj)
            else (self._built_amounts(resources))
        )
        if amounts is not None:
            requests = BuiltRequests(
                amounts,
                lambda: self._fetch(context, spec_obj, resources, True)[:2],
                self._admits(amounts),
                self._now(context, amounts, arrived),
            )
            return requests, None, self._version
        alloc_reqs, summaries, version = self._fetch(
            context, spec_obj, resources
        )
        if not alloc_reqs:
            LOG.info(
                "Got no allocation candidates from the Placement API. This "
                "could be due to insufficient resources or a temporary "
                "occurrence as compute nodes start up."
            )
            raise nova_exception.NoValidHost(reason="")
        return alloc_reqs, summaries, version

    def _admits(self, amounts):
        if self._room is None:
            return None
        amount = api.Resources.of(amounts)
        return lambda rp_uuid: self._room(rp_uuid, amount)

    def _now(self, context, amounts, since=None):
        if self._room_now is None:
            return None
        amount = api.Resources.of(amounts)
        return lambda rp_uuid: self._room_now(context, rp_uuid, amount, since)

    def _resources(self, context, spec_obj, translate):
        return compat.resource_request(
            context, spec_obj, self._host_manager(), translate
        )

    def _built_amounts(self, resources):
        """The amounts of a request that a built request can claim, or
        None: classes in the one unnumbered group, nothing else
        asked of placement but the disabled-compute trait Nova's
        ComputeFilter also keeps out."""
        if not self._build:
            return None
        amounts = None
        for key, value in parse.parse_qsl(resources.to_querystring()):
            if key == "limit":
                continue
            if key in ("required", "root_required") and value == (
                _DISABLED_TRAIT
            ):
                if not self._computes_filtered():
                    return None
                continue
            if key != "resources" or amounts is not None:
                return None
            amounts = {}
            for item in value.split(","):
                name, _, amount = item.partition(":")
                amounts[name] = int(amount)
        return amounts or None

    def _computes_filtered(self):
        from nova.scheduler.filters import compute_filter

        return any(
            isinstance(f, compute_filter.ComputeFilter)
            for f in getattr(self._host_manager(), "enabled_filters", ())
        )

    def _fetch(self, context, spec_obj, resources, plain=False):
        """Placement's candidates as Nova's manager fetches them: by
        provider uuid (empty when there are none), with the provider
        summaries and microversion; with ``plain`` the requests carry no
        ``mappings`` (a built request's claim is sent at
        ``compat.claim_version()``, which may predate them)."""
        res = self._client.get_allocation_candidates(context, resources)
        alloc_reqs, summaries, version = res or (None, None, None)
        alloc_reqs = list(alloc_reqs or [])
        summaries = dict(summaries or {})
        if getattr(resources, "cpu_pinning_requested", False) and not (
            _workaround(self._conf, "disable_fallback_pcpu_query")
        ):
            # NOTE(nova): as the manager, ask again with VCPU for PCPU, for
            # computes that report no PCPU yet.
            LOG.debug(
                "Requesting fallback allocation candidates with VCPU "
                "instead of PCPU"
            )
            res = self._client.get_allocation_candidates(
                context, self._resources(context, spec_obj, False)
            )
            if res:
                alloc_reqs.extend(res[0] or [])
                summaries.update(res[1] or {})
        by_rp_uuid = collections.defaultdict(list)
        for alloc_req in alloc_reqs:
            if plain:
                alloc_req = {"allocations": alloc_req["allocations"]}
            for rp_uuid in alloc_req["allocations"]:
                by_rp_uuid[rp_uuid].append(alloc_req)
        return by_rp_uuid, summaries, version


def _skips_filters(spec_obj):
    """True for a request Nova's HostManager does not filter (a forced
    host or node, without ``_nova_check_type``): Nova's ComputeFilter does
    not keep a disabled compute out of it, so only placement's candidates
    (whose query forbids ``COMPUTE_STATUS_DISABLED``) do."""
    forced = compat.field(spec_obj, "force_hosts") or compat.field(
        spec_obj, "force_nodes"
    )
    if not forced:
        return False
    hints = compat.field(spec_obj, "scheduler_hints") or {}
    return not hints.get("_nova_check_type")


def _workaround(conf, name):
    try:
        return getattr(conf.workarounds, name)
    except (AttributeError, cfg.NoSuchOptError):
        return False
