"""The ``grant_scheduler`` scheduler driver for Nova 13 to 22.

Enabled with ``[DEFAULT] scheduler_driver = grant_scheduler`` (Nova 13-14;
the class path ``grant_scheduler.nova.driver.GrantSchedulerDriver`` works
too) or ``[scheduler] driver = grant_scheduler`` (15-22).  Nova's scheduler
manager loads it with ``stevedore.driver.DriverManager(
"nova.scheduler.driver", name, invoke_on_load=True)`` before forking its
workers, so construction only records what it was given (DESIGN H9).

Per request: Nova's HostStates (from ``host_manager``), less the live
grants, go through Nova's own filters and weighers; the chosen host is then
granted through the protocol, falling over to the next one when the grant
loses.  Without Nova importable the built-in capacity filter and RAM/vCPU
weigher do the same job over grant_scheduler's own host rows.
"""

from oslo_db import exception as db_exc
from oslo_log import log as logging
from oslo_service import periodic_task

from grant_scheduler import exception
from grant_scheduler import scheduler
from grant_scheduler.nova import compat
from grant_scheduler.nova import service
from grant_scheduler.nova import view as nova_view

LOG = logging.getLogger(__name__)

# The optional arguments of select_destinations, in Nova's order: 15 added
# instance_uuids, 16 the two placement arguments, 17 the last two.
_OPTIONAL_ARGS = (
    "instance_uuids",
    "alloc_reqs_by_rp_uuid",
    "provider_summaries",
    "allocation_request_version",
    "return_alternates",
)
_SELECTION_OBJECTS_FROM = 3  # index of allocation_request_version (17+)

DEFAULT_MAX_ATTEMPTS = 3

# What Nova's scheduler manager calls on driver.host_manager (13-22).
MANAGER_CALLS = frozenset(
    (
        "update_aggregates",
        "delete_aggregate",
        "update_instance_info",
        "delete_instance_info",
        "sync_instance_info",
        "refresh_cells_caches",
    )
)


class StandaloneHostManager:
    """What Nova's manager calls on ``driver.host_manager``, without Nova.

    Aggregate and instance-info updates matter only to Nova's own filters,
    which are not run without Nova; they are accepted and logged.
    """

    def _ignored(self, name):
        def call(*args, **kwargs):
            LOG.debug("host_manager.%s ignored: Nova is not loaded", name)

        return call

    def __getattr__(self, name):
        if name in MANAGER_CALLS:
            return self._ignored(name)
        raise AttributeError(name)


class _Reaper(periodic_task.PeriodicTasks):
    """The reaper as an oslo periodic task, due every ``reap_interval``."""

    def __init__(self, conf, grant_scheduler):
        super().__init__(conf)
        self._grant_scheduler = grant_scheduler
        # NOTE: the decorator fixes a spacing at import time, before the
        # configuration is read; this instance takes the configured one.
        self._periodic_spacing = dict(self._periodic_spacing)
        self._periodic_spacing["reap_grants"] = (
            conf.grant_scheduler.reap_interval
        )

    @periodic_task.periodic_task(spacing=60, run_immediately=True)
    def reap_grants(self, context):
        counts = self._grant_scheduler.get().reap()
        if any(counts.values()):
            LOG.info("Reaped grants: %s", counts)


class GrantSchedulerDriver:
    """A Nova scheduler driver that grants before it answers."""

    USES_ALLOCATION_CANDIDATES = False

    def __init__(self, *args, conf=None, grant_scheduler=None, **kwargs):
        """
        :param conf: the configuration object (Nova's ``CONF`` by default).
        :param grant_scheduler: a ``GrantScheduler`` to use instead of one
            built from ``conf`` on first use.
        """
        self._lazy = service.Lazy(conf=conf)
        if grant_scheduler is not None:
            self._lazy.set(grant_scheduler)
        self._host_manager = None
        self._pipeline = None
        self._reaper = None

    @property
    def grant_scheduler(self):
        return self._lazy.get()

    @property
    def host_manager(self):
        """Nova's HostManager (built in the worker, on first use), or a
        stand-in when Nova is not installed."""
        if self._host_manager is None:
            module = compat.nova_module("scheduler.host_manager")
            if module is None:
                self._host_manager = StandaloneHostManager()
            else:
                self._host_manager = module.HostManager()
        return self._host_manager

    @host_manager.setter
    def host_manager(self, value):
        self._host_manager = value

    def run_periodic_tasks(self, context):
        """Called by Nova's scheduler manager from its periodic task."""
        if self._reaper is None:
            self._reaper = _Reaper(self._lazy.conf, self._lazy)
        return self._reaper.run_periodic_tasks(context)

    def select_destinations(self, context, spec_obj, *args, **kwargs):
        """Every signature from Nova 13 to 22 (see ``_OPTIONAL_ARGS``).

        :returns: for 13-16 a list of ``{"host", "nodename", "limits"}``
            dicts, one per instance; for 17-22 one list per instance of
            ``Selection`` objects, the granted host first, then up to
            ``max_attempts - 1`` alternates when ``return_alternates``.
        :raises NoValidHost: Nova's, when not every instance fits; nothing
            stays granted then.
        """
        call = _bind(args, kwargs)
        objects_style = call["selection_objects"]
        alternates = 0
        if objects_style and call["return_alternates"]:
            max_attempts = nova_view.nova_option(
                self._lazy.conf, "max_attempts", DEFAULT_MAX_ATTEMPTS
            )
            alternates = max(0, max_attempts - 1)
        try:
            request = _request(context, spec_obj, call, alternates)
        except exception.GrantSchedulerError as exc:
            raise compat.no_valid_host(str(exc)) from exc
        gs = self.grant_scheduler
        request_view = self._view(context, spec_obj)
        try:
            selections = gs.scheduler.schedule(request, view=request_view)
        except exception.NoValidHost as exc:
            raise compat.no_valid_host(str(exc)) from exc
        answer = _Answer(request_view)
        if objects_style:
            return [answer.selection_list(s) for s in selections]
        return [answer.legacy_dict(s) for s in selections]

    # -- the view ----------------------------------------------------------

    def _view(self, context, spec_obj):
        """Nova's view for this request; None (the scheduler's own cached
        view and built-in ranking) without Nova."""
        if not compat.have_nova():
            return None
        gs = self.grant_scheduler
        states = gs.store.load_view()
        host_states = list(self.host_manager.get_all_host_states(context))
        if self._register_new_hosts(gs, states, host_states):
            states = gs.store.load_view()
        if self._pipeline is None:
            self._pipeline = nova_view.Pipeline(self._lazy.conf)
        return nova_view.NovaView(
            states, host_states, spec_obj, self._pipeline
        )

    def _register_new_hosts(self, gs, states, host_states):
        """Give every compute node Nova knows a row; True if any was new.

        A new row takes its capacity and usage from Nova's compute node
        record; from then on claims and releases move its usage.  A row
        whose capacity changed in Nova (totals, allocation ratios) is
        updated without touching usage.
        """
        known = {(s.host, s.node): s for s in states}
        added = False
        for host_state in host_states:
            if host_state.uuid is None:
                continue  # Nova has not yet seen this node's usage
            capacity, used = compat.capacity_of(host_state)
            state = known.get((host_state.host, host_state.nodename))
            if state is None:
                try:
                    added |= (
                        gs.store.register_host(
                            host_state.host,
                            host_state.nodename,
                            capacity,
                            used=used,
                            node_uuid=host_state.uuid,
                        )
                        is not None
                    )
                except (exception.InvalidResources, db_exc.DBError):
                    LOG.exception(
                        "Could not register %s/%s",
                        host_state.host,
                        host_state.nodename,
                    )
            elif state.capacity != capacity:
                gs.store.report_host(
                    host_state.host,
                    host_state.nodename,
                    capacity,
                    node_uuid=host_state.uuid,
                )
                added = True
        return added


def _bind(args, kwargs):
    """Name the optional arguments of any release's call."""
    if len(args) > len(_OPTIONAL_ARGS):
        raise TypeError(
            "select_destinations takes at most %d arguments after spec_obj"
            % len(_OPTIONAL_ARGS)
        )
    unknown = set(kwargs) - set(_OPTIONAL_ARGS)
    if unknown:
        raise TypeError(
            "select_destinations got unexpected arguments %s"
            % ", ".join(sorted(unknown))
        )
    call = dict.fromkeys(_OPTIONAL_ARGS)
    call.update(zip(_OPTIONAL_ARGS, args, strict=False))
    call.update(kwargs)
    call["selection_objects"] = len(args) > _SELECTION_OBJECTS_FROM or any(
        name in kwargs for name in _OPTIONAL_ARGS[_SELECTION_OBJECTS_FROM:]
    )
    return call


def _request(context, spec_obj, call, alternates):
    count = compat.field(spec_obj, "num_instances", 1)
    instance_uuids = call["instance_uuids"]
    if not instance_uuids:
        # NOTE: Nova 13-14 pass no uuids; the spec names at most the first
        # instance, and the compute claims the rest by resources.
        first = compat.field(spec_obj, "instance_uuid")
        instance_uuids = [first] + [None] * (count - 1)
    amount = compat.flavor_resources(compat.field(spec_obj, "flavor"))
    return scheduler.Request.build(
        amount.vcpus,
        amount.memory_mb,
        amount.disk_gb,
        instance_uuids=instance_uuids,
        request_id=getattr(context, "request_id", None),
        ignore_hosts=compat.field(spec_obj, "ignore_hosts", ()),
        force_hosts=compat.field(spec_obj, "force_hosts", ()),
        force_nodes=compat.field(spec_obj, "force_nodes", ()),
        num_alternates=alternates,
    )


class _Answer:
    """Selections in the form the calling release expects."""

    def __init__(self, request_view):
        self._view = request_view
        self._objects = compat.objects()

    def _host_state(self, host, node):
        find = getattr(self._view, "host_state", None)
        return find(host, node) if find else None

    def _selection(self, destination):
        host_state = self._host_state(destination.host, destination.node)
        if self._objects is not None and host_state is not None:
            return self._objects.Selection.from_host_state(host_state)
        return compat.StandaloneSelection(
            compute_node_uuid=destination.node_uuid,
            service_host=destination.host,
            nodename=destination.node,
            limits=dict(getattr(host_state, "limits", None) or {}),
        )

    def selection_list(self, selection):
        return [self._selection(selection)] + [
            self._selection(alternate) for alternate in selection.alternates
        ]

    def legacy_dict(self, selection):
        host_state = self._host_state(selection.host, selection.node)
        return {
            "host": selection.host,
            "nodename": selection.node,
            "limits": dict(getattr(host_state, "limits", None) or {}),
        }
