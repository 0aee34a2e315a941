"""Nova 17-22's engine: Nova's FilterScheduler, each placement claim
granted first (``filter_scheduler.GrantingFilterScheduler``).

On 18-22 the candidates are found as Nova's manager finds them, and for
a request of one unnumbered group of resources the chosen node's request
is built instead (``candidates``); when the books found no room on a
node placement was not asked about, placement's own candidates decide,
as for the stock scheduler.
"""

from grant_scheduler.nova import compat


class PlacementEngine:
    """Selections for one request, by Nova's FilterScheduler."""

    def __init__(self, parts):
        """:param parts: the driver's ``parts.SchedulerParts``."""
        self._parts = parts
        self._candidates = None

    @property
    def candidates(self):
        """``candidates.Candidates`` (18-22; built on first use)."""
        if self._candidates is None:
            from grant_scheduler.nova.scheduler import candidates

            parts = self._parts
            grants = parts.filter_scheduler.grants
            self._candidates = candidates.Candidates(
                parts.conf,
                parts.filter_scheduler.placement_client,
                lambda: parts.host_manager,
                build=parts.conf.grant_scheduler.build_allocation_requests,
                room=grants.has_room,
                room_now=grants.placement_has_room,
            )
        return self._candidates

    def select(self, context, spec_obj, instance_uuids, found, alternates):
        """Nova's FilterScheduler's answer: one list of ``Selection``
        objects per instance.

        :param found: ``(alloc_reqs_by_rp_uuid, provider_summaries,
            allocation_request_version)`` as Nova's manager passed them
            (found here instead where the driver
            ``asks_candidates_itself``).
        :param alternates: whether Nova asked for alternates.
        """
        parts = self._parts
        scheduler = parts.filter_scheduler
        outage = scheduler.grants.outage
        if not outage.usable():
            if outage.refuses:
                raise outage.refusal()
        else:
            parts.withdraw_rescheduled(spec_obj, instance_uuids, outage)
        if parts.asks_candidates_itself:
            found = self.candidates.for_request(context, spec_obj)
        group = compat.field(spec_obj, "instance_group")
        hosts = list(compat.field(group, "hosts", ())) if group else None

        def select():
            return scheduler.select_destinations(
                context, spec_obj, instance_uuids, *found, alternates
            )

        try:
            return select()
        except compat.nova_module("exception").NoValidHost:
            requests = found[0]
            if not getattr(requests, "left_out", False):
                raise
        # NOTE(placement): the books found no room on a node placement was
        # not asked about; placement decides, as for the stock scheduler.
        requests.ask_placement()
        if group is not None:
            group.hosts = hosts
            group.obj_reset_changes(["hosts"])
        return select()
