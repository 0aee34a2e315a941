"""The compute side in Nova 13-21: claim a grant when a build starts.

Registered in the ``nova.hooks`` namespace:

* ``build_instance`` wraps ``ComputeManager._do_build_and_run_instance``;
  its ``pre`` consumes the instance's grant on this host and node under the
  resource tracker's ``compute_resources`` fair lock, so the claim is
  serialised with Nova's own resource accounting on the host.
* ``delete_instance`` wraps ``ComputeManager._delete_instance``; its
  ``post`` releases the instance's resources.

``add_hook('build_instance')`` is the outermost decorator of
``_do_build_and_run_instance``, above ``wrap_exception``,
``reverts_task_state`` and ``wrap_instance_fault``: an exception from
``pre`` escapes all of Nova's reschedule and fault handling.  So a claim
that does not fit (or a node grant_scheduler does not know) first does
what Nova's own failure path does, here: it records an instance fault that
says why and puts the instance in ERROR, off the host; then it raises
``FatalHookException``, which stops the build before it touches the
hypervisor.  While grant_scheduler's database is down (``outage``) a
build or delete goes on as Nova lets it, without its claim or release,
logged once a minute: the scheduler's reconciliation from Nova's records
writes them within ``[grant_scheduler] reconcile_interval`` seconds of the
database being back.  Any other failure is logged with the instance and
node and re-raised; Nova's hook runner logs it again and lets the build
go on.

``claim_for_build`` and ``release_for_delete`` are the same calls from
Python, for a build path of one's own.
"""

import sys

from oslo_concurrency import lockutils
from oslo_log import log as logging

from grant_scheduler import api
from grant_scheduler.nova import compat
from grant_scheduler.nova import outage as outage_module
from grant_scheduler.nova import service
from grant_scheduler.nova.books import claims

LOG = logging.getLogger(__name__)

# Nova's resource tracker: nova.utils.synchronized(COMPUTE_RESOURCE_SEMAPHORE),
# oslo.concurrency's in-process lock of this name: fair from Nova 21 on,
# plain before (oslo.concurrency keeps the two kinds apart, so the hook must
# take the kind the tracker takes).
COMPUTE_RESOURCE_SEMAPHORE = "compute_resources"
NOVA_LOCK_PREFIX = "nova-"

# _do_build_and_run_instance(self, context, instance, image, request_spec,
#     filter_properties, admin_password, injected_files, requested_networks,
#     security_groups, block_device_mapping, node=None, limits=None, ...):
# positions in the arguments after (self, context, instance).
_BDMS_POSITION = 7
_NODE_POSITION = 8


def rt_lock():
    """The resource tracker's claim lock, as a context manager."""
    # NOTE(nova): asked for fair only where Nova takes it fair (21 and
    # later): oslo.concurrency before 3.29 (Rocky's 3.27, 18's pin) has no
    # ``fair`` argument, and 13-20 take the plain lock.
    fair = {"fair": True} if compat.resource_tracker_lock_is_fair() else {}
    return lockutils.lock(COMPUTE_RESOURCE_SEMAPHORE, NOVA_LOCK_PREFIX, **fair)


_GRANT_SCHEDULER = service.Lazy(claim_lock=lambda host, node: rt_lock())
_OUTAGE = []


def use(grant_scheduler):
    """Make the hooks use ``grant_scheduler`` (tests, embedding)."""
    _GRANT_SCHEDULER.set(grant_scheduler)
    _OUTAGE.clear()


def outage():
    """This process's ``outage.ComputeOutage`` (built on first use)."""
    if not _OUTAGE:
        _OUTAGE.append(
            outage_module.ComputeOutage(lambda: grant_scheduler().ping())
        )
    return _OUTAGE[0]


def grant_scheduler():
    """The compute side's ``GrantScheduler`` (claims under Nova's lock)."""
    return _GRANT_SCHEDULER.get()


def _nodename(manager, instance, node):
    """The node a hooked call is about: given, the instance's, or what the
    manager's virt driver reports (a single-node host's own name else)."""
    return (
        node
        or compat.field(instance, "node")
        or compat.node_of_instance(manager, instance)
    )


def claim_for_build(
    host, instance, node=None, context=None, bdms=None, request_id=None
):
    """Consume ``instance``'s grant on ``host``/``node``.

    :param bdms: the build's block device mappings (to tell a
        volume-backed server, whose root disk is not local, without a
        database read); only needed when it has no grant.
    :returns: the ``ClaimOutcome``, or None when the database is down
        (``outage``): the build goes on, and the reconciliation records
        the instance once the database is back.
    :raises FatalHookException: the instance does not fit (or the node
        never reported); the build must not go on here.
    """
    node = node or compat.field(instance, "node") or host
    down = outage()
    if not down.usable():
        down.skipped()
        return None
    try:
        return claims.claim(
            grant_scheduler(),
            instance.uuid,
            host,
            node,
            lambda: claims.instance_resources(context, instance, bdms),
            request_id=request_id,
        )
    except (api.ClaimRejected, api.UnknownHost) as exc:
        raise compat.FatalHookException(str(exc)) from exc
    except outage_module.FAILURES as exc:
        down.failed(
            exc, "claiming instance %s on %s/%s" % (instance.uuid, host, node)
        )
        return None
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
    """Release ``instance`` from ``host``/``node``; False if not claimed
    (or the database is down: the reconciliation releases it then)."""
    node = node or compat.field(instance, "node") or host
    down = outage()
    if not down.usable():
        down.skipped()
        return False
    try:
        return grant_scheduler().release(instance.uuid, host, node)
    except outage_module.FAILURES as exc:
        down.failed(
            exc, "releasing instance %s on %s/%s" % (instance.uuid, host, node)
        )
        return False
    except Exception:
        LOG.exception(
            "grant_scheduler could not release instance %s on %s/%s; "
            "its usage stays counted until the host reports usage again",
            instance.uuid,
            host,
            node,
        )
        raise


def fail_build(context, instance, reason):
    """Do what Nova's build path does when a build fails for good: add
    an instance fault that says why, clear the host and node and set the
    instance to ERROR.  Only for a real Nova instance; False otherwise."""
    vm_states = compat.nova_module("compute.vm_states")
    compute_utils = compat.nova_module("compute.utils")
    if vm_states is None or compute_utils is None:
        return False
    if context is None or not hasattr(instance, "save"):
        return False
    try:
        compute_utils.add_instance_fault_from_exc(
            context,
            instance,
            reason,
            sys.exc_info(),
            fault_message=str(reason),
        )
        instance.host = None
        instance.node = None
        instance.vm_state = vm_states.ERROR
        instance.task_state = None
        instance.save()
    except Exception:  # noqa: BLE001 - the build stops either way
        LOG.exception(
            "Could not record the rejected build of instance %s",
            instance.uuid,
        )
        return False
    return True


def _argument(args, kwargs, name, position):
    if name in kwargs:
        return kwargs[name]
    return args[position] if len(args) > position else None


class BuildInstanceHook:
    """``nova.hooks`` ``build_instance``: claim before the build."""

    def pre(self, manager, context, instance, *args, **kwargs):
        node = _nodename(
            manager, instance, _argument(args, kwargs, "node", _NODE_POSITION)
        )
        try:
            outcome = claim_for_build(
                manager.host,
                instance,
                node,
                context=context,
                bdms=_argument(
                    args, kwargs, "block_device_mapping", _BDMS_POSITION
                ),
                request_id=getattr(context, "request_id", None),
            )
        except compat.FatalHookException as exc:
            if fail_build(context, instance, exc):
                LOG.error(
                    "Build of instance %s on %s/%s stopped and the instance "
                    "set to ERROR: %s",
                    instance.uuid,
                    manager.host,
                    node,
                    exc,
                )
            raise
        if outcome is not None:
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
