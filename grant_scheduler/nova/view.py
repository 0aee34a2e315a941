"""Nova's filters and weighers over HostStates that count live grants.

The grants protocol decides *whether* a host has room (``HostState.fits``
on grant_scheduler's own rows, then the verification); Nova decides which
of the hosts with room is *best*: its configured filters (aggregates,
affinity, image properties, ...) and weighers run over Nova's HostStates,
from which every live grant has been subtracted, so a weigher that prefers
free RAM sees the RAM other schedulers have promised away as used.
"""

from oslo_config import cfg
from oslo_log import log as logging

from grant_scheduler import exception
from grant_scheduler import view as gs_view
from grant_scheduler.nova import compat
from grant_scheduler.resources import NOTHING

LOG = logging.getLogger(__name__)

# NOTE: Nova 15 moved these options into [filter_scheduler] and [scheduler];
# 13 and 14 read them from [DEFAULT] under the older names.
_OPTION_NAMES = {
    "available_filters": (
        ("filter_scheduler", "available_filters"),
        (None, "scheduler_available_filters"),
    ),
    "enabled_filters": (
        ("filter_scheduler", "enabled_filters"),
        (None, "scheduler_default_filters"),
    ),
    "weight_classes": (
        ("filter_scheduler", "weight_classes"),
        (None, "scheduler_weight_classes"),
    ),
    "max_attempts": (
        ("scheduler", "max_attempts"),
        (None, "scheduler_max_attempts"),
    ),
}


def nova_option(conf, key, default=None):
    """A Nova option under its current name or its 13-14 name."""
    for group, name in _OPTION_NAMES[key]:
        try:
            return getattr(getattr(conf, group), name) if group else conf[name]
        except (cfg.NoSuchOptError, cfg.NoSuchGroupError, AttributeError):
            continue
    return default


class Pipeline:
    """Nova's enabled filters and weighers, run outside a HostManager."""

    def __init__(self, conf):
        filters = compat.nova_module("scheduler.filters")
        weights = compat.nova_module("scheduler.weights")
        self.filter_handler = filters.HostFilterHandler()
        self.weight_handler = weights.HostWeightHandler()
        available = {
            cls.__name__: cls
            for cls in self.filter_handler.get_matching_classes(
                nova_option(conf, "available_filters", ())
            )
        }
        enabled = list(nova_option(conf, "enabled_filters", ()))
        unknown = [name for name in enabled if name not in available]
        if unknown:
            raise exception.GrantSchedulerError(
                "[filter_scheduler] enabled_filters names %s, which no "
                "module in available_filters provides" % ", ".join(unknown)
            )
        self.filters = [available[name]() for name in enabled]
        self.weighers = [
            cls()
            for cls in self.weight_handler.get_matching_classes(
                nova_option(conf, "weight_classes", ())
            )
        ]

    def rank(self, host_states, spec_obj, index, forced):
        """Host states that pass the filters, best first.

        Like Nova's HostManager, forcing a host or node skips the filters.
        """
        if not forced:
            host_states = self.filter_handler.get_filtered_objects(
                self.filters, host_states, spec_obj, index
            )
        if not host_states:
            return []
        weighed = self.weight_handler.get_weighed_objects(
            self.weighers, host_states, spec_obj
        )
        return [w.obj for w in weighed]


class NovaView(gs_view.View):
    """The scheduler's view over Nova's HostStates for one request.

    Only hosts that both Nova and grant_scheduler know are candidates.
    Each Nova HostState is kept equal to Nova's figures minus the live
    grants grant_scheduler last read for its host (``_applied``), through
    reloads, fall-overs and this request's own wins.
    """

    def __init__(self, states, host_states, spec_obj, pipeline):
        self._nova = {(hs.host, hs.nodename): hs for hs in host_states}
        self._applied = {}
        self._spec = spec_obj
        self._pipeline = pipeline
        self._index = 0
        # NOTE: like Nova's FilterScheduler, instance N+1 is ranked among
        # the hosts that passed the filters for instance N (filters that
        # run once per request do not run again).
        self._survivors = None
        self._last_ranked = None
        super().__init__(states)

    def host_state(self, host, node):
        return self._nova[(host, node)]

    def reload(self, states):
        super().reload(s for s in states if (s.host, s.node) in self._nova)
        for state in self._states.values():
            self._subtract_grants(state)

    def replace(self, host_id, fresh):
        super().replace(host_id, fresh)
        if fresh is not None and host_id in self._states:
            self._subtract_grants(fresh)

    def consume(self, state, amount):
        super().consume(state, amount)
        key = (state.host, state.node)
        self._nova[key].consume_from_request(self._spec)
        self._applied[key] = self._applied.get(key, NOTHING) + amount
        self._index += 1
        self._survivors = self._last_ranked

    def _subtract_grants(self, state):
        key = (state.host, state.node)
        delta = state.granted - self._applied.get(key, NOTHING)
        host_state = self._nova[key]
        host_state.free_ram_mb -= delta.memory_mb
        host_state.free_disk_mb -= delta.disk_gb * 1024
        host_state.vcpus_used += delta.vcpus
        self._applied[key] = state.granted

    def _rank(self, request, exclude=None):
        placement = request.placement
        by_key = {
            (s.host, s.node): s
            for s in self._states.values()
            if s.host_id != exclude
            and placement.allows(s)
            and s.fits(request.resources)
            and self._survived(s)
        }
        ranked = self._pipeline.rank(
            [self._nova[key] for key in by_key],
            self._spec,
            self._index,
            forced=bool(placement.force_hosts or placement.force_nodes),
        )
        keys = [(hs.host, hs.nodename) for hs in ranked]
        if exclude is None:
            self._last_ranked = frozenset(keys)
        return [by_key[key] for key in keys]

    def _survived(self, state):
        survivors = self._survivors
        return survivors is None or (state.host, state.node) in survivors

    def ranked(self, request, subset_size):
        return self._rank(request)[: subset_size + request.num_alternates]

    def alternates(self, request, chosen):
        if not request.num_alternates:
            return ()
        ranked = self._rank(request, exclude=chosen.host_id)
        return tuple(
            gs_view.Destination(s.host, s.node, s.node_uuid)
            for s in ranked[: request.num_alternates]
        )
