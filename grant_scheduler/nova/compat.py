"""What differs between Nova releases, and between Nova and no Nova.

Every check of which Nova this is lives here, each naming the releases
it tells apart; the rest of the adapters call these and hold no release
check of their own.  Nova is optional: every function here works without
it, falling back to grant_scheduler's own types, so the driver and hooks
can be exercised (and used from Python) on a machine without Nova
installed.
"""

import dataclasses
import functools
import importlib
import inspect

from oslo_config import cfg

from grant_scheduler import api


def nova_module(name):
    """Import ``nova.<name>``, or None when Nova is not installed."""
    try:
        return importlib.import_module("nova." + name)
    except ImportError:
        return None


def have_nova():
    return nova_module("objects") is not None


def claims_in_placement():
    """True on Nova 17-22, whose FilterScheduler claims the chosen host's
    allocation candidate in placement and answers ``Selection`` objects
    (16 claims too, but its manager expects HostStates back)."""
    scheduler = nova_module("scheduler.filter_scheduler")
    selection = nova_module("objects.selection")
    return (
        scheduler is not None
        and selection is not None
        and hasattr(scheduler, "FilterScheduler")
    )


def release():
    """Nova's major release number (22 for Victoria), or None."""
    version = nova_module("version")
    try:
        return int(version.version_info.version_string().split(".")[0])
    except (AttributeError, ValueError):
        return None


def resource_tracker_lock_is_fair():
    """Nova 21 and later take the resource tracker's ``compute_resources``
    lock fair; 13-20 take the plain lock of that name."""
    found = release()
    return found is None or found >= 21


def scheduler_report_client():
    """Nova's placement client, as its FilterScheduler builds it."""
    return nova_module("scheduler.client.report").SchedulerReportClient()


def objects():
    """``nova.objects`` with every object registered, or None."""
    module = nova_module("objects")
    if module is not None:
        module.register_all()
    return module


def field(obj, name, default=None):
    """``obj.name`` for a Nova object (unset fields are not lazy-loadable)
    or any other object; ``default`` when unset or None."""
    is_set = getattr(obj, "obj_attr_is_set", None)
    if is_set is not None:
        try:
            if not is_set(name):
                return default
        except AttributeError:  # not a field of this object's version
            return default
    value = getattr(obj, name, None)
    return default if value is None else value


def pinning_translated():
    """True where Nova asks placement for PCPU for a dedicated CPU policy
    (20 and later; earlier releases ask VCPU)."""
    found = release()
    return found is None or found >= 20


# -- Nova's interfaces, by release -------------------------------------------

# NOTE: Nova 15 moved these options into [filter_scheduler] and [scheduler];
# 13 and 14 read them from [DEFAULT] under the older names.
_OPTION_NAMES = {
    "max_attempts": (
        ("scheduler", "max_attempts"),
        (None, "scheduler_max_attempts"),
    ),
    "host_subset_size": (
        ("filter_scheduler", "host_subset_size"),
        (None, "scheduler_host_subset_size"),
    ),
    "track_instance_changes": (
        ("filter_scheduler", "track_instance_changes"),
        (None, "scheduler_tracks_instance_changes"),
    ),
}


def nova_option(conf, key, default=None):
    """A Nova option under its name of 15 and later, or of 13-14."""
    for group, name in _OPTION_NAMES[key]:
        try:
            return getattr(getattr(conf, group), name) if group else conf[name]
        except (cfg.NoSuchOptError, cfg.NoSuchGroupError, AttributeError):
            continue
    return default


@functools.lru_cache(maxsize=None)
def _parameters(function):
    """``function``'s parameters, read once per function (a request's
    path asks again for every request)."""
    try:
        return inspect.signature(function).parameters
    except (TypeError, ValueError):
        return {}


def asks_candidates_itself():
    """True where the driver can find allocation candidates as Nova's
    manager does (18-22: Nova's request filters, ``process_reqspec``, and
    the resource request's query string); 17 has neither."""
    request_filter = nova_module("scheduler.request_filter")
    utils = nova_module("scheduler.utils")
    request = getattr(utils, "ResourceRequest", None)
    return hasattr(request_filter, "process_reqspec") and hasattr(
        request, "to_querystring"
    )


def claim_version():
    """The placement microversion a built allocation request is claimed
    at: 19-22's claim sends a consumer generation (1.28), which 18's does
    not know (placement would refuse its claim without one: 1.12)."""
    report = nova_module("scheduler.client.report")
    claim = report.SchedulerReportClient.claim_resources
    if "consumer_generation" in _parameters(claim):
        return "1.28"
    return "1.12"


def resource_request(context, spec_obj, host_manager, translate):
    """Nova's ``ResourceRequest`` of ``spec_obj``: 18 builds it from the
    spec alone, 19 also reads the host manager's and the context's, 20-22
    take whether to ask dedicated CPUs as PCPU (``translate``)."""
    build = nova_module("scheduler.utils").resources_from_request_spec
    params = _parameters(build)
    if "spec_obj" in params and len(params) == 1:
        return build(spec_obj)
    kwargs = {}
    if "enable_pinning_translate" in params:
        kwargs["enable_pinning_translate"] = translate
    return build(context, spec_obj, host_manager, **kwargs)


def host_states(host_manager, context, spec_obj=None):
    """Nova's HostStates of every compute node: 17 and later read them
    with ``get_host_states_by_uuids(context, None, spec_obj)`` (no uuids:
    every node), 13-16 with ``get_all_host_states(context)`` (15 and 16
    have the first with two arguments only)."""
    by_uuids = getattr(host_manager, "get_host_states_by_uuids", None)
    if by_uuids is not None and "spec_obj" in _parameters(by_uuids):
        return list(by_uuids(context, None, spec_obj))
    return list(host_manager.get_all_host_states(context))


def cell_of_host(host_manager, context, host):
    """The cell mapping of ``host``'s cell: Nova's HostManager finds it
    itself from 20 on (``_get_cell_mapping_for_host``); 13-19 read the
    host mapping."""
    find = getattr(host_manager, "_get_cell_mapping_for_host", None)
    if find is not None:
        return find(context, host)
    return objects().HostMapping.get_by_host(context, host).cell_mapping


def volume_backed_check():
    """Nova's ``compute.utils.is_volume_backed_instance`` (14 and later),
    or None (13, or Nova not installed)."""
    utils = nova_module("compute.utils")
    return getattr(utils, "is_volume_backed_instance", None)


def node_of_instance(manager, instance):
    """The node a compute manager builds ``instance`` on, when neither the
    call nor the instance names it: its virt driver's answer (17 and
    later, ``_get_nodename``), else the host's own name (13-16: a
    single-node host's node is named as the host)."""
    find = getattr(manager, "_get_nodename", None)
    return find(instance) if find else manager.host


# NOTE(nova): the stock scheduler's reason, the fault users see.
NOT_ENOUGH_HOSTS = "There are not enough hosts available."


def no_valid_host(reason=NOT_ENOUGH_HOSTS, rejected_by=None):
    """Nova's ``NoValidHost`` (what the conductor expects), or ours.

    With ``rejected_by`` (the filter that removed every host that had
    room) the message is still Nova's own text (the fault every user
    sees, which Nova's own tests expect word for word), and ``str()``
    also names the filter: what the conductor's log and the instance
    fault's details, shown to admins, carry.  It travels as Nova's own
    class: oslo.messaging serializes an exception by its class's module
    and name and rebuilds Nova's ``NoValidHost`` in the conductor, with
    this ``str()``.
    """
    module = nova_module("exception")
    if module is None:
        return api.NoValidHost("No valid host was found. %s" % reason)
    if rejected_by is None:
        return module.NoValidHost(reason=reason)
    found = _filter_named(module)(reason=reason)
    found.filter_name = rejected_by
    return found


_FILTER_NAMED = {}


def _filter_named(module):
    """``module.NoValidHost`` whose ``str()`` names a filter, made once
    per Nova exception module."""
    if module not in _FILTER_NAMED:

        class NoValidHost(module.NoValidHost):
            __module__ = module.__name__

            def __str__(self):
                return "%s %s rejected every host that had room." % (
                    super().__str__(),
                    self.filter_name,
                )

        _FILTER_NAMED[module] = NoValidHost
    return _FILTER_NAMED[module]


def _fatal_hook_exception():
    module = nova_module("hooks")
    found = getattr(module, "FatalHookException", None)
    if found is not None:
        return found

    class FatalHookException(Exception):
        """Stands in for ``nova.hooks.FatalHookException`` (Nova 22 and
        later have no hooks): a hook raising it stops the hooked call."""

    return FatalHookException


FatalHookException = _fatal_hook_exception()


@dataclasses.dataclass(frozen=True)
class StandaloneSelection:
    """The fields of Nova's ``objects.Selection``, for use without Nova."""

    compute_node_uuid: str
    service_host: str
    nodename: str
    cell_uuid: str = None
    limits: dict = None
    allocation_request: str = None
    allocation_request_version: str = None


@dataclasses.dataclass(frozen=True)
class StandaloneHostState:
    """What Nova 16's manager reads from a driver's answer, without Nova."""

    host: str
    nodename: str
    limits: dict = None
