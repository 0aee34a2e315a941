"""What differs between Nova releases, and between Nova and no Nova.

Every check of which Nova this is lives here, each naming the releases
it tells apart; the rest of the adapters call these and hold no release
check of their own.  Nova is optional: every function here works without
it, falling back to grant_scheduler's own types, so the driver and hooks
can be exercised (and used from Python) on a machine without Nova
installed.
"""

import dataclasses
import importlib
import inspect
import math

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


def flavor_resources(flavor, is_bfv=False):
    """A flavour's ``Resources``, counted the way Nova's HostState consumes
    it: vCPU, RAM, and root plus ephemeral disk (swap is not local disk
    in Nova's scheduler accounting).  A server booted from a volume has
    its root disk on the volume, so only its ephemeral disk is local."""
    root_gb = 0 if is_bfv else field(flavor, "root_gb", 0)
    return api.Resources(
        vcpus=field(flavor, "vcpus", 0),
        memory_mb=field(flavor, "memory_mb", 0),
        disk_gb=root_gb + field(flavor, "ephemeral_gb", 0),
    )


def placement_resources(flavor, is_bfv=False, image_cpu_policy=None):
    """What Nova 17-22 allocates in placement on the compute node's own
    provider for one instance of ``flavor``: swap is part of DISK_GB (in
    whole GB, rounded up), and a ``resources:<CLASS>=N`` extra spec takes
    the place of the flavour's amount of that class (``resources:VCPU=1``
    on a 2-vCPU flavour allocates one VCPU; an Ironic flavour asks one
    unit of its custom class and sets VCPU, MEMORY_MB and DISK_GB to 0).
    A flavour that asks PCPU, or dedicated CPUs (``hw:cpu_policy``, from
    Nova 20 on, the flavour's or else the image's: ``image_cpu_policy``),
    asks no VCPU for its vCPUs.  Numbered groups (``resourcesN:``, on
    other providers) are not counted."""
    root_gb = 0 if is_bfv else field(flavor, "root_gb", 0)
    swap_gb = int(math.ceil(field(flavor, "swap", 0) / 1024))
    amounts = {
        "VCPU": field(flavor, "vcpus", 0),
        "MEMORY_MB": field(flavor, "memory_mb", 0),
        "DISK_GB": root_gb + field(flavor, "ephemeral_gb", 0) + swap_gb,
    }
    for key, value in (field(flavor, "extra_specs") or {}).items():
        prefix, _, resource_class = key.partition(":")
        if prefix != "resources" or not resource_class:
            continue
        try:
            amounts[resource_class] = int(value)
        except (TypeError, ValueError):
            continue
    extra_specs = field(flavor, "extra_specs") or {}
    overridden = _overridden(flavor)
    # NOTE(nova): the flavour's policy first, else the image's (an image
    # asking dedicated CPUs of a flavour that says shared never boots).
    policy = extra_specs.get("hw:cpu_policy") or image_cpu_policy
    if (
        policy == "dedicated"
        and not overridden & {"VCPU", "PCPU"}
        and _pinning_translated()
    ):
        # NOTE(nova): 20 and later ask pinned vCPUs as PCPU, one more for
        # emulator threads of their own (resources_from_request_spec).
        isolate = extra_specs.get("hw:emulator_threads_policy") == "isolate"
        amounts["PCPU"] = amounts["VCPU"] + int(isolate)
    if "PCPU" in amounts and "VCPU" not in overridden:
        amounts["VCPU"] = 0  # the flavour's vCPUs are the PCPU asked for
    return api.Resources.of(
        {name: value for name, value in amounts.items() if value > 0}
    )


def _pinning_translated():
    """True where Nova asks placement for PCPU for a dedicated CPU policy
    (20 and later; earlier releases ask VCPU)."""
    found = release()
    return found is None or found >= 20


def _overridden(flavor):
    return {
        key.partition(":")[2]
        for key in field(flavor, "extra_specs") or {}
        if key.startswith("resources:")
    }


def instance_amount(flavor, is_bfv=False, instance=None):
    """What one instance of ``flavor`` holds on its node: placement's
    allocation on Nova 17-22 (``placement_resources``, with the CPU policy
    of ``instance``'s image), the flavour as the compute node record
    counts it before (``flavor_resources``)."""
    if claims_in_placement():
        return placement_resources(
            flavor, is_bfv=is_bfv, image_cpu_policy=image_cpu_policy(instance)
        )
    return flavor_resources(flavor, is_bfv=is_bfv)


def image_cpu_policy(instance):
    """The ``hw_cpu_policy`` of the image ``instance`` was built from, as
    Nova keeps it in the instance's system metadata (None when that is not
    loaded: it is never read lazily, one query per instance)."""
    metadata = field(instance, "system_metadata") or {}
    return metadata.get("image_hw_cpu_policy")


def amount_attrs():
    """The instance fields ``instance_amount`` reads beyond an instance's
    own columns: its flavour (extra specs, swap) where placement counts
    them, and its system metadata (the image's CPU policy) where a
    dedicated policy is asked of placement as PCPU; nothing before."""
    if not claims_in_placement():
        return []
    return (
        ["flavor", "system_metadata"] if _pinning_translated() else ["flavor"]
    )


def spec_resources(spec_obj):
    """What a RequestSpec asks of a host.

    ``is_bfv`` is RequestSpec's field from Nova 18 on (its placement
    request leaves the root disk out for volume-backed servers).  Older
    releases have no such field, and their own scheduler charged the root
    disk; so does this one there.
    """
    return flavor_resources(
        field(spec_obj, "flavor"), is_bfv=bool(field(spec_obj, "is_bfv"))
    )


# Nova's compute-side options for what the host keeps for itself.  The
# resource tracker writes them into the compute node record as used
# (memory_mb_used = reserved_host_memory_mb + instances, ...).
_RESERVED_OPTIONS = (
    ("vcpus", "reserved_host_cpus", 1),
    ("memory_mb", "reserved_host_memory_mb", 1),
    ("disk_gb", "reserved_host_disk_mb", 1024),
)


def reserved_from_conf(conf):
    """``Resources`` reserved for the host itself, from Nova's options.

    Disk is rounded up to whole GB, as Nova reports DISK_GB's reserved
    amount to placement.  An option this release does not have counts 0.
    """
    amounts = {}
    for name, option, per_unit in _RESERVED_OPTIONS:
        try:
            value = conf[option] or 0
        except (cfg.NoSuchOptError, KeyError):
            value = 0
        amounts[name] = int(math.ceil(value / per_unit))
    return api.Resources(**amounts)


def capacity_of(host_state, reserved=api.NOTHING):
    """The ``Capacity`` of a Nova HostState.

    ``reserved`` (``reserved_from_conf``) is the host's own share: Nova
    counts it as used in the compute node record, grant_scheduler as
    reserved, so usage is the instances alone.  An unset allocation ratio
    is taken as 1.0 (no overcommit) rather than guessed.
    """
    total = api.Resources(
        vcpus=host_state.vcpus_total,
        memory_mb=host_state.total_usable_ram_mb,
        disk_gb=host_state.total_usable_disk_gb,
    )
    return api.Capacity(
        total=total,
        reserved=_at_most(reserved, total),
        cpu_allocation_ratio=host_state.cpu_allocation_ratio or 1.0,
        ram_allocation_ratio=host_state.ram_allocation_ratio or 1.0,
        disk_allocation_ratio=host_state.disk_allocation_ratio or 1.0,
    )


def current_usage(host_state, reserved=api.NOTHING):
    """What a HostState counts as used now, including what this very
    request has consumed from it (``consume_from_request`` lowers free
    RAM and free disk), less the host's reserved share."""
    return not_below_zero(
        api.Resources(
            vcpus=host_state.vcpus_used,
            memory_mb=host_state.total_usable_ram_mb - host_state.free_ram_mb,
            disk_gb=host_state.total_usable_disk_gb
            - host_state.free_disk_mb // 1024,
        )
        - reserved
    )


def not_below_zero(amount):
    """``amount`` with every negative amount raised to 0."""
    return amount.map(lambda name, value: max(0, value))


def _at_most(amount, limit):
    return amount.map(lambda name, value: min(value, limit[name]))


def same_capacity(one, other):
    """The same classes with equal amounts, and allocation ratios equal
    to the precision a database float keeps (MySQL's FLOAT is 4 bytes)."""
    if set(one.inventories) != set(other.inventories):
        return False
    for name, inventory in one.inventories.items():
        theirs = other.inventories[name]
        if dataclasses.replace(
            inventory, allocation_ratio=1.0
        ) != dataclasses.replace(theirs, allocation_ratio=1.0):
            return False
        if not math.isclose(
            inventory.allocation_ratio, theirs.allocation_ratio, rel_tol=1e-6
        ):
            return False
    return True


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


def _parameters(function):
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
