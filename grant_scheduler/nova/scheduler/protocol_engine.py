"""Nova 13-16's engine: Nova ranks, a grant decides.

Also every call without instance uuids (a conductor older than Pike).
Per request: Nova's HostStates, less the live grants of this process's
cached view (``GrantScheduler.view``: one read of the rows changed since
the last request), are filtered and weighed by Nova's own host manager
(``ranker.NovaRanker``); the chosen host is then granted through the
protocol (``GrantScheduler.schedule_request``), falling over to the next
one when the grant does not fit.  Without Nova importable, the
scheduler's own view and ranking do the same job over grant_scheduler's
rows.

While grant_scheduler's database is down (``outage``) the stock choice
is made instead (``stock``), without a grant; with ``database_failure =
refuse`` nothing is placed.
"""

from grant_scheduler import api
from grant_scheduler.nova import amounts as nova_amounts
from grant_scheduler.nova import compat
from grant_scheduler.nova import outage as outage_module
from grant_scheduler.nova.scheduler import ranker as nova_ranker


class ProtocolEngine:
    """Selections for one request, by the protocol over Nova's ranking."""

    def __init__(self, parts):
        """:param parts: the driver's ``parts.SchedulerParts``."""
        self._parts = parts
        self._consumed = None

    def select(self, context, spec_obj, instance_uuids, alternates):
        """Grant every instance of the request a host.

        :param instance_uuids: as Nova passed them (None before 15).
        :param alternates: how many alternates each selection carries.
        :returns: ``(selections, host_state)``: the protocol's selections,
            and ``host_state(host, node)`` giving the request's Nova
            HostState of a node (or None), for the release's answer.
        :raises NoValidHost: Nova's, when not every instance fits; nothing
            stays granted then.
        """
        try:
            request = _request(context, spec_obj, instance_uuids, alternates)
        except api.GrantSchedulerError as exc:
            raise compat.no_valid_host(str(exc)) from exc
        outage = self._parts.outage if compat.have_nova() else None
        if outage is None or outage.usable():
            try:
                return self._by_grants(context, spec_obj, request)
            except outage_module.FAILURES as exc:
                if outage is None:
                    raise
                outage.failed(exc, "granting")
        if outage.refuses:
            raise outage.refusal()
        return self._as_stock(context, spec_obj, request)

    def _by_grants(self, context, spec_obj, request):
        parts = self._parts
        gs = parts.grant_scheduler
        parts.withdraw_rescheduled(spec_obj, request.instance_uuids)
        request_view, ranker = self._view(gs, context, spec_obj, request)
        try:
            selections = gs.schedule_request(request, view=request_view)
        except api.NoValidHost as exc:
            rejected_by = parts.host_manager.rejected_by(spec_obj)
            if rejected_by is None:
                raise compat.no_valid_host(str(exc)) from exc
            raise compat.no_valid_host(
                compat.NOT_ENOUGH_HOSTS, rejected_by
            ) from exc
        for instance_uuid in request.instance_uuids:
            if instance_uuid is not None:
                parts.granted_here.note(instance_uuid, request.resources)
        return selections, _host_state_of(ranker)

    def _as_stock(self, context, spec_obj, request):
        """While the database is down: Nova's stock choice, no grant; the
        compute's own claim guards the node."""
        from grant_scheduler.nova.scheduler import stock

        if self._consumed is None:
            self._consumed = stock.Consumed()
        parts = self._parts
        manager = parts.host_manager
        choice = stock.StockChoice(
            manager.host_states(_admin(context), spec_obj),
            spec_obj,
            manager,
            subset_size=compat.nova_option(parts.conf, "host_subset_size", 1),
            consumed=self._consumed,
        )
        chosen = choice.select(request.instance_uuids, request.num_alternates)
        parts.outage.skipped()
        if chosen is None:
            raise compat.no_valid_host()
        return chosen, _host_state_of(choice)

    def _view(self, gs, context, spec_obj, request):
        """This request's view and its ranker (Nova's filters and
        weighers); ``(None, None)`` (the scheduler's own cached view and
        default ranking) without Nova."""
        if not compat.have_nova():
            return None, None
        parts = self._parts
        manager = parts.host_manager
        # NOTE: as Nova's FilterScheduler, read the hosts as an admin.
        context = _admin(context)
        host_states = manager.host_states(context, spec_obj)
        ranker = nova_ranker.NovaRanker(
            host_states,
            spec_obj,
            manager,
            request.instance_uuids,
            subset_size=compat.nova_option(parts.conf, "host_subset_size"),
        )
        request_view = gs.view(ranker=ranker)
        known = {(s.host, s.node): s for s in request_view.states()}
        if parts.registry.register_unknown(context, known, host_states):
            request_view = gs.view(ranker=ranker)
        return request_view, ranker


def _admin(context):
    elevated = getattr(context, "elevated", None)
    return elevated() if elevated is not None else context


def _host_state_of(found):
    """``host_state(host, node)`` of a ranker or stock choice, or one that
    knows none."""
    find = getattr(found, "host_state", None)
    return find if find is not None else (lambda host, node: None)


def _request(context, spec_obj, instance_uuids, alternates):
    count = compat.field(spec_obj, "num_instances", 1)
    if not instance_uuids:
        # NOTE: Nova 13-14 pass no uuids; the spec names at most the first
        # instance, and the compute claims the rest by resources.
        first = compat.field(spec_obj, "instance_uuid")
        instance_uuids = [first] + [None] * (count - 1)
    return api.Request.build(
        resources=nova_amounts.spec_resources(spec_obj),
        instance_uuids=instance_uuids,
        request_id=getattr(context, "request_id", None),
        ignore_hosts=compat.field(spec_obj, "ignore_hosts", ()),
        force_hosts=compat.field(spec_obj, "force_hosts", ()),
        force_nodes=compat.field(spec_obj, "force_nodes", ()),
        num_alternates=alternates,
    )
