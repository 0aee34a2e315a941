"""``GrantsFilter``: Nova's stock scheduler avoids promised capacity.

For any Nova release, 34 included, in ``nova.conf``::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = grant_scheduler.nova.filters.GrantsFilter
    enabled_filters = ComputeFilter,...,GrantsFilter

A host passes when the request still fits after every live grant on it
(won or undecided, written by grant_scheduler schedulers) is subtracted
from Nova's free RAM, disk and vCPU.  The live grants are read once per
request, in one statement, not once per host.
"""

from nova.scheduler import filters
from oslo_log import log as logging

from grant_scheduler.nova import compat
from grant_scheduler.nova import service
from grant_scheduler.resources import NOTHING

LOG = logging.getLogger(__name__)


def free_after_grants(host_state, granted):
    """What Nova's HostState has left once ``granted`` is promised away,
    within its allocation ratios (``compat.capacity_of``)."""
    capacity, used = compat.capacity_of(host_state)
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

    def _granted_for(self, spec_obj):
        # NOTE: Nova calls host_passes once per host with the same spec
        # object; a new object is a new request and gets a fresh read.
        if spec_obj is not self._spec:
            self._granted = self._lazy.get().store.live_grants_by_node()
            self._spec = spec_obj
        return self._granted

    def host_passes(self, host_state, spec_obj):
        granted = self._granted_for(spec_obj).get(
            (host_state.host, host_state.nodename), NOTHING
        )
        wanted = compat.flavor_resources(compat.field(spec_obj, "flavor"))
        free = free_after_grants(host_state, granted)
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
