"""``GrantsFilter``: Nova's stock scheduler avoids promised capacity.

For any Nova release, 34 included, in ``nova.conf``::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = grant_scheduler.nova.filters.GrantsFilter
    enabled_filters = ComputeFilter,...,GrantsFilter

A host passes when the request still fits after every live grant on it
(written by grant_scheduler schedulers) is subtracted from Nova's free
RAM, disk and vCPU, within the host's allocation ratios and less what
Nova's ``reserved_host_*`` options keep for the host.  The live grants
are read once per request, in one statement, not once per host.
"""

from nova.scheduler import filters
from oslo_log import log as logging

from grant_scheduler import api
from grant_scheduler.nova import amounts as nova_amounts
from grant_scheduler.nova import service

LOG = logging.getLogger(__name__)


def free_after_grants(host_state, granted, reserved=api.NOTHING):
    """What Nova's HostState has left once ``granted`` is promised away,
    within its allocation ratios and less the host's reserved share
    (``nova_amounts.capacity_of``); what this request has already consumed
    from the HostState counts as used."""
    capacity = nova_amounts.capacity_of(host_state, reserved)
    used = nova_amounts.current_usage(host_state, capacity.reserved)
    return capacity.limit() - used - granted


class GrantsFilter(filters.BaseHostFilter):
    """Pass hosts on which the request fits after live grants."""

    RUN_ON_REBUILD = False

    def __init__(self, grant_scheduler=None):
        self._lazy = service.Lazy()
        if grant_scheduler is not None:
            self._lazy.set(grant_scheduler)
        self._spec = None
        self._granted = {}
        self._reserved = api.NOTHING

    def _granted_for(self, spec_obj):
        # NOTE: Nova calls host_passes once per host with the same spec
        # object; a new object is a new request and gets a fresh read.
        if spec_obj is not self._spec:
            self._granted = self._lazy.get().granted_by_node()
            self._reserved = nova_amounts.reserved_from_conf(self._lazy.conf)
            self._spec = spec_obj
        return self._granted

    def host_passes(self, host_state, spec_obj):
        granted = self._granted_for(spec_obj).get(
            (host_state.host, host_state.nodename), api.NOTHING
        )
        wanted = nova_amounts.spec_resources(spec_obj)
        free = free_after_grants(host_state, granted, self._reserved)
        short = wanted.exceeded(free)
        if short:
            LOG.debug(
                "%s/%s: %s short after live grants %s",
                host_state.host,
                host_state.nodename,
                ", ".join(short),
                granted,
            )
            return False
        return True
