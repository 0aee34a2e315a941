"""Claiming virt drivers (opt-in): the compute host claims before it spawns.

A virt driver here is Nova's own (libvirt, or the fake driver for tests)
with ``spawn`` claiming the instance's grant first, under the resource
tracker's ``compute_resources`` lock, and raising
``ComputeResourcesUnavailable`` when the claim is rejected: Nova's build
path turns that into a reschedule to one of the alternates the driver
returned (or, with none left, into ERROR with the reason as the fault),
before anything reaches the hypervisor.  A spawn that fails releases the
claim again; ``destroy`` releases it too.

Nova finds them as ``compute_driver = grant_scheduler.<name>`` through
``grant_scheduler.nova.virt`` (the module placed under ``nova.virt`` and
the command that places it).  Another hypervisor's driver is
``claiming(TheirDriver)``.
"""

import importlib

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import excutils

from grant_scheduler.nova import compat
from grant_scheduler.nova.compute import hooks

LOG = logging.getLogger(__name__)

# The names ``compute_driver = grant_scheduler.<name>`` may use.
BASES = {
    "LibvirtDriver": ("nova.virt.libvirt", "LibvirtDriver"),
    "FakeDriver": ("nova.virt.fake", "FakeDriver"),
    "SmallFakeDriver": ("nova.virt.fake", "SmallFakeDriver"),
    "MediumFakeDriver": ("nova.virt.fake", "MediumFakeDriver"),
}


class ClaimingDriver:
    """Mixin over a Nova ``ComputeDriver``: claim in ``spawn``."""

    def init_host(self, host):
        self._grant_scheduler_host = host
        return super().init_host(host)

    def _claim_host(self):
        return getattr(self, "_grant_scheduler_host", None) or cfg.CONF.host

    def spawn(self, context, instance, *args, **kwargs):
        host = self._claim_host()
        node = compat.field(instance, "node") or host
        claimed = False
        try:
            outcome = hooks.claim_for_build(
                host,
                instance,
                node,
                context=context,
                request_id=getattr(context, "request_id", None),
            )
            claimed = outcome is not None
            if claimed:
                LOG.info(
                    "Instance %s claimed on %s/%s (%s)",
                    instance.uuid,
                    host,
                    node,
                    outcome.how,
                )
        except compat.FatalHookException as exc:
            raise _unavailable(str(exc)) from exc
        except Exception:  # noqa: BLE001 - logged by claim_for_build
            LOG.warning(
                "Instance %s spawns on %s/%s without a claim",
                instance.uuid,
                host,
                node,
            )
        try:
            return super().spawn(context, instance, *args, **kwargs)
        except Exception:
            with excutils.save_and_reraise_exception():
                if claimed:
                    self._release(instance, host, node)

    def destroy(self, context, instance, *args, **kwargs):
        result = super().destroy(context, instance, *args, **kwargs)
        host = self._claim_host()
        self._release(instance, host, compat.field(instance, "node") or host)
        return result

    @staticmethod
    def _release(instance, host, node):
        try:
            hooks.release_for_delete(host, instance, node)
        except Exception:  # noqa: BLE001 - logged by release_for_delete
            pass


def _unavailable(reason):
    nova_exception = importlib.import_module("nova.exception")
    return nova_exception.ComputeResourcesUnavailable(reason=reason)


def claiming(base):
    """``base`` (a ComputeDriver class) with a claiming ``spawn``."""
    return type(
        base.__name__,
        (ClaimingDriver, base),
        {
            # NOTE(nova): where Nova imported it from (``nova.virt``'s
            # module of that name, written by ``grant_scheduler.nova.virt``).
            "__module__": "nova.virt.grant_scheduler",
            "__doc__": "%s, claiming grant_scheduler's grant in spawn."
            % base.__name__,
        },
    )


_BUILT = {}


def __getattr__(name):
    """``grant_scheduler.nova.virt.LibvirtDriver`` and friends, built on
    first use (so importing this never imports a hypervisor's driver)."""
    if name not in BASES:
        raise AttributeError(name)
    if name not in _BUILT:
        module, attribute = BASES[name]
        _BUILT[name] = claiming(
            getattr(importlib.import_module(module), attribute)
        )
    return _BUILT[name]
