"""A Nova filter and weigher that record what Nova's pipeline shows them.

Loaded by Nova's own handlers from ``available_filters`` and
``weight_classes`` like any other; every call appends the HostState's
figures to ``CALLS``.
"""

from nova.scheduler import filters
from nova.scheduler import weights

FILTER = "tests.nova34.recorder.RecordingFilter"
WEIGHER = "tests.nova34.recorder.RecordingWeigher"

CALLS = []


def figures(host_state):
    return {
        "host": host_state.host,
        "free_ram_mb": host_state.free_ram_mb,
        "free_disk_mb": host_state.free_disk_mb,
        "vcpus_used": host_state.vcpus_used,
        "num_instances": host_state.num_instances,
    }


class RecordingFilter(filters.BaseHostFilter):
    """Passes every host; records ("filter", index, figures)."""

    RUN_ON_REBUILD = True

    index = None

    def run_filter_for_index(self, index):
        self.index = index
        return True

    def host_passes(self, host_state, spec_obj):
        CALLS.append(("filter", self.index, figures(host_state)))
        return True


class RecordingWeigher(weights.BaseHostWeigher):
    """Weighs by free RAM, like Nova's RAMWeigher; records figures."""

    def _weigh_object(self, host_state, weight_properties):
        CALLS.append(("weigher", None, figures(host_state)))
        return host_state.free_ram_mb
