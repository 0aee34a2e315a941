"""The compute side in Nova: claim a grant when a build starts.

Registered in the ``nova.hooks`` namespace (Nova 13-21):

* ``build_instance`` wraps ``ComputeManager._do_build_and_run_instance``;
  its ``pre`` consumes the instance's grant on this host and node under the
  resource tracker's ``compute_resources`` fair lock, so the claim is
  serialised with Nova's own resource accounting on the host.
* ``delete_instance`` wraps ``ComputeManager._delete_instance``; its
  ``post`` releases the instance's resources.

A claim that does not fit raises ``FatalHookException``: Nova then stops the
build before it touches the hypervisor.  Any other failure is logged here
with the instance and node, and re-raised; Nova's hook runner logs it again
and lets the build go on (Nova's own claim still guards it up to release
19).  ``claim_for_build`` and ``release_for_delete`` are the same calls for
releases without hooks (22 and later): call them from the build path.
"""

from oslo_concurrency import lockutils
from oslo_log import log as logging

from grant_scheduler import exception
from grant_scheduler.nova import compat
from grant_scheduler.nova import service

LOG = logging.getLogger(__name__)

# Nova's resource tracker: nova.utils.synchronized(COMPUTE_RESOURCE_SEMAPHORE,
# fair=True), i.e. oslo.concurrency's in-process fair lock of this name.
COMPUTE_RESOURCE_SEMAPHORE = "compute_resources"
NOVA_LOCK_PREFIX = "nova-"

# _do_build_and_run_instance(self, context, instance, image, request_spec,
#     filter_properties, admin_password, injected_files, requested_networks,
#     security_groups, block_device_mapping, node=None, limits=None, ...)
_NODE_POSITION = 11

_GRANT_SCHEDULER = service.Lazy(claim_lock=lambda host, node: rt_lock())


def rt_lock():
    """The resource tracker's claim lock, as a context manager."""
    return lockutils.lock(
        COMPUTE_RESOURCE_SEMAPHORE, NOVA_LOCK_PREFIX, fair=True
    )


def use(grant_scheduler):
    """Make the hooks use ``grant_scheduler`` (tests, embedding)."""
    _GRANT_SCHEDULER.set(grant_scheduler)


def _nodename(manager, instance, node):
    """The node a hooked call is about: given, the instance's, or what the
    manager's virt driver reports (a single-node host's own name else)."""
    node = node or compat.field(instance, "node")
    if node:
        return node
    find = getattr(manager, "_get_nodename", None)
    return find(instance) if find else manager.host


def claim_for_build(host, instance, node=None):
    """Consume ``instance``'s grant on ``host``/``node``.

    :returns: the ``ClaimOutcome``.
    :raises FatalHookException: the instance does not fit (or the node
        never reported); the build must not go on here.
    """
    node = node or compat.field(instance, "node") or host
    resources = compat.flavor_resources(compat.field(instance, "flavor"))
    try:
        return _GRANT_SCHEDULER.get().claim(
            instance.uuid, host, node, resources
        )
    except (exception.ClaimRejected, exception.UnknownHost) as exc:
        raise compat.FatalHookException(str(exc)) from exc
    except Exception:
        LOG.exception(
            "grant_scheduler could not claim instance %s on %s/%s; "
            "the build goes on without a grant",
            instance.uuid,
            host,
            node,
        )
        raise


def release_for_delete(host, instance, node=None):
    """Release ``instance`` from ``host``/``node``; False if not claimed."""
    node = node or compat.field(instance, "node") or host
    try:
        return _GRANT_SCHEDULER.get().release(instance.uuid, host, node)
    except Exception:
        LOG.exception(
            "grant_scheduler could not release instance %s on %s/%s; "
            "its usage stays counted until the host reports usage again",
            instance.uuid,
            host,
            node,
        )
        raise


class BuildInstanceHook:
    """``nova.hooks`` ``build_instance``: claim before the build."""

    def pre(self, manager, context, instance, *args, **kwargs):
        node = kwargs.get("node")
        if node is None and len(args) > _NODE_POSITION - 3:
            node = args[_NODE_POSITION - 3]
        node = _nodename(manager, instance, node)
        outcome = claim_for_build(manager.host, instance, node)
        LOG.info(
            "Instance %s claimed on %s/%s (%s)",
            instance.uuid,
            manager.host,
            node,
            outcome.how,
        )


class DeleteInstanceHook:
    """``nova.hooks`` ``delete_instance``: release after the delete."""

    def post(self, rv, manager, context, instance, *args, **kwargs):
        node = _nodename(manager, instance, None)
        release_for_delete(manager.host, instance, node)
