"""What differs between Nova releases, and between Nova and no Nova.

Nova is optional: every function here works without it, falling back to
grant_scheduler's own types, so the driver and hooks can be exercised (and
used from Python) on a machine without Nova installed.
"""

import dataclasses
import importlib

from grant_scheduler import exception
from grant_scheduler.resources import Capacity
from grant_scheduler.resources import Resources


def nova_module(name):
    """Import ``nova.<name>``, or None when Nova is not installed."""
    try:
        return importlib.import_module("nova." + name)
    except ImportError:
        return None


def have_nova():
    return nova_module("objects") is not None


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
    if is_set is not None and not is_set(name):
        return default
    value = getattr(obj, name, None)
    return default if value is None else value


def flavor_resources(flavor):
    """A flavour's ``Resources``, counted the way Nova's HostState consumes
    it: vCPU, RAM, and root plus ephemeral disk (swap is not local disk
    in Nova's scheduler accounting)."""
    return Resources(
        vcpus=field(flavor, "vcpus", 0),
        memory_mb=field(flavor, "memory_mb", 0),
        disk_gb=field(flavor, "root_gb", 0) + field(flavor, "ephemeral_gb", 0),
    )


def capacity_of(host_state):
    """Capacity and usage of a Nova HostState.

    Nova counts reserved memory and disk as used, so the capacity has no
    reserved part; an unset allocation ratio is taken as 1.0 (no
    overcommit) rather than guessed.
    """
    total = Resources(
        vcpus=host_state.vcpus_total,
        memory_mb=host_state.total_usable_ram_mb,
        disk_gb=host_state.total_usable_disk_gb,
    )
    used = Resources(
        vcpus=host_state.vcpus_used,
        memory_mb=host_state.total_usable_ram_mb - host_state.free_ram_mb,
        disk_gb=host_state.total_usable_disk_gb
        - host_state.free_disk_mb // 1024,
    )
    capacity = Capacity(
        total=total,
        cpu_allocation_ratio=host_state.cpu_allocation_ratio or 1.0,
        ram_allocation_ratio=host_state.ram_allocation_ratio or 1.0,
        disk_allocation_ratio=host_state.disk_allocation_ratio or 1.0,
    )
    return capacity, used


def no_valid_host(reason):
    """Nova's ``NoValidHost`` (what the conductor expects), or ours."""
    module = nova_module("exception")
    if module is None:
        return exception.NoValidHost("No valid host was found. %s" % reason)
    return module.NoValidHost(reason=reason)


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
