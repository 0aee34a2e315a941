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
from grant_scheduler.resources import Resources

LOG = logging.getLogger(__name__)


def free_after_grants(host_state, granted):
    """What Nova's HostState has left once ``granted`` is promised away,
    within its allocation ratios (an unset ratio counts as 1.0)."""
    cpu_ratio = host_state.cpu_allocation_ratio or 1.0
    ram_ratio = host_state.ram_allocation_ratio or 1.0
    disk_ratio = host_state.disk_allocation_ratio or 1.0
    ram_used = host_state.total_usable_ram_mb - host_state.free_ram_mb
    disk_used_gb = (
        host_state.total_usable_disk_gb - host_state.free_disk_mb / 1024
    )
    disk_limit_gb = host_state.total_usable_disk_gb * disk_ratio
    return Resources(
        vcpus=int(host_state.vcpus_total * cpu_ratio)
        - host_state.vcpus_used
        - granted.vcpus,
        memory_mb=int(host_state.total_usable_ram_mb * ram_ratio)
        - ram_used
        - granted.memory_mb,
        disk_gb=int(disk_limit_gb - disk_used_gb) - granted.disk_gb,
    )


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
