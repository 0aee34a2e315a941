"""What Nova's objects hold, in grant_scheduler's amounts.

A flavour, a request spec or an instance as the ``Resources`` its node
counts for it (the compute node record's three classes before Nova 17,
placement's allocation from 17 on, ``compat.claims_in_placement``), a
HostState as a ``Capacity``, and what Nova's ``reserved_host_*`` options
keep for the host.
"""

import dataclasses
import math

from oslo_config import cfg

from grant_scheduler import api
from grant_scheduler.nova import compat


def flavor_resources(flavor, is_bfv=False):
    """A flavour's ``Resources``, counted the way Nova's HostState consumes
    it: vCPU, RAM, and root plus ephemeral disk (swap is not local disk
    in Nova's scheduler accounting).  A server booted from a volume has
    its root disk on the volume, so only its ephemeral disk is local."""
    root_gb = 0 if is_bfv else compat.field(flavor, "root_gb", 0)
    return api.Resources(
        vcpus=compat.field(flavor, "vcpus", 0),
        memory_mb=compat.field(flavor, "memory_mb", 0),
        disk_gb=root_gb + compat.field(flavor, "ephemeral_gb", 0),
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
    root_gb = 0 if is_bfv else compat.field(flavor, "root_gb", 0)
    swap_gb = int(math.ceil(compat.field(flavor, "swap", 0) / 1024))
    amounts = {
        "VCPU": compat.field(flavor, "vcpus", 0),
        "MEMORY_MB": compat.field(flavor, "memory_mb", 0),
        "DISK_GB": root_gb + compat.field(flavor, "ephemeral_gb", 0) + swap_gb,
    }
    for key, value in (compat.field(flavor, "extra_specs") or {}).items():
        prefix, _, resource_class = key.partition(":")
        if prefix != "resources" or not resource_class:
            continue
        try:
            amounts[resource_class] = int(value)
        except (TypeError, ValueError):
            continue
    extra_specs = compat.field(flavor, "extra_specs") or {}
    overridden = _overridden(flavor)
    # NOTE(nova): the flavour's policy first, else the image's (an image
    # asking dedicated CPUs of a flavour that says shared never boots).
    policy = extra_specs.get("hw:cpu_policy") or image_cpu_policy
    if (
        policy == "dedicated"
        and not overridden & {"VCPU", "PCPU"}
        and compat.pinning_translated()
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


def _overridden(flavor):
    return {
        key.partition(":")[2]
        for key in compat.field(flavor, "extra_specs") or {}
        if key.startswith("resources:")
    }


def instance_amount(flavor, is_bfv=False, instance=None):
    """What one instance of ``flavor`` holds on its node: placement's
    allocation on Nova 17-22 (``placement_resources``, with the CPU policy
    of ``instance``'s image), the flavour as the compute node record
    counts it before (``flavor_resources``)."""
    if compat.claims_in_placement():
        return placement_resources(
            flavor, is_bfv=is_bfv, image_cpu_policy=image_cpu_policy(instance)
        )
    return flavor_resources(flavor, is_bfv=is_bfv)


def image_cpu_policy(instance):
    """The ``hw_cpu_policy`` of the image ``instance`` was built from, as
    Nova keeps it in the instance's system metadata (None when that is not
    loaded: it is never read lazily, one query per instance)."""
    metadata = compat.field(instance, "system_metadata") or {}
    return metadata.get("image_hw_cpu_policy")


def amount_attrs():
    """The instance fields ``instance_amount`` reads beyond an instance's
    own columns: its flavour (extra specs, swap) where placement counts
    them, and its system metadata (the image's CPU policy) where a
    dedicated policy is asked of placement as PCPU; nothing before."""
    if not compat.claims_in_placement():
        return []
    return (
        ["flavor", "system_metadata"]
        if compat.pinning_translated()
        else ["flavor"]
    )


def spec_resources(spec_obj):
    """What a RequestSpec asks of a host.

    ``is_bfv`` is RequestSpec's field from Nova 18 on (its placement
    request leaves the root disk out for volume-backed servers).  Older
    releases have no such field, and their own scheduler charged the root
    disk; so does this one there.
    """
    return flavor_resources(
        compat.field(spec_obj, "flavor"),
        is_bfv=bool(compat.field(spec_obj, "is_bfv")),
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
