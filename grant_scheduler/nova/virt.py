"""Claiming virt drivers (opt-in): the compute host claims before it spawns.

A virt driver here is Nova's own (libvirt, or the fake driver for tests)
with ``spawn`` claiming the instance's grant first, under the resource
tracker's ``compute_resources`` lock, and raising
``ComputeResourcesUnavailable`` when the claim is rejected: Nova's build
path turns that into a reschedule to one of the alternates the driver
returned (or, with none left, into ERROR with the reason as the fault),
before anything reaches the hypervisor.  A spawn that fails releases the
claim again; ``destroy`` releases it too.

Nova 22 loads ``importutils.import_object('nova.virt.' + compute_driver)``
and nothing else, so a driver must be importable under ``nova.virt``.  On
each compute host, once::

    python3 -m grant_scheduler.nova.virt install

writes ``nova/virt/grant_scheduler.py`` (one import line, marked as ours)
beside Nova's own drivers; then in ``nova.conf``::

    [DEFAULT]
    compute_driver = grant_scheduler.LibvirtDriver

(``grant_scheduler.FakeDriver``, ``SmallFakeDriver`` and
``MediumFakeDriver`` for tests).  ``uninstall`` removes the file; a Nova
package upgrade leaves it in place (dpkg and pip remove only their own
files).  Another hypervisor's driver is ``claiming(TheirDriver)``.
"""

import argparse
import importlib
import os
import sys

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import excutils

from grant_scheduler.nova import compat
from grant_scheduler.nova import hooks

LOG = logging.getLogger(__name__)

# The names ``compute_driver = grant_scheduler.<name>`` may use.
BASES = {
    "LibvirtDriver": ("nova.virt.libvirt", "LibvirtDriver"),
    "FakeDriver": ("nova.virt.fake", "FakeDriver"),
    "SmallFakeDriver": ("nova.virt.fake", "SmallFakeDriver"),
    "MediumFakeDriver": ("nova.virt.fake", "MediumFakeDriver"),
}

MODULE_NAME = "grant_scheduler"
MARKER = "# Written by grant_scheduler.nova.virt; safe to remove."
MODULE_TEXT = (
    '''"""grant_scheduler's claiming virt drivers, where Nova finds drivers.

compute_driver = grant_scheduler.LibvirtDriver (or FakeDriver) selects one;
"python3 -m grant_scheduler.nova.virt uninstall" removes this file.
"""
%s
from grant_scheduler.nova.virt import __getattr__  # noqa: F401
'''
    % MARKER
)


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
            "__module__": "nova.virt.%s" % MODULE_NAME,
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


# -- placing the module under nova.virt ------------------------------------


def nova_virt_dir():
    """The directory of the ``nova.virt`` package Nova imports."""
    return os.path.dirname(importlib.import_module("nova.virt").__file__)


def module_path(directory=None):
    return os.path.join(directory or nova_virt_dir(), MODULE_NAME + ".py")


def _ours(path):
    with open(path) as f:
        return MARKER in f.read()


def install(directory=None):
    """Write ``nova/virt/grant_scheduler.py``; returns its path.

    :raises FileExistsError: a file of that name is not ours.
    """
    path = module_path(directory)
    if os.path.exists(path) and not _ours(path):
        raise FileExistsError(
            "%s exists and was not written by grant_scheduler; not "
            "replacing it" % path
        )
    temporary = path + ".tmp"
    with open(temporary, "w") as f:
        f.write(MODULE_TEXT)
    os.replace(temporary, path)
    importlib.invalidate_caches()
    return path


def uninstall(directory=None):
    """Remove the module if it is ours; returns its path or None."""
    path = module_path(directory)
    if not os.path.exists(path):
        return None
    if not _ours(path):
        raise FileExistsError(
            "%s was not written by grant_scheduler; not removing it" % path
        )
    os.unlink(path)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m grant_scheduler.nova.virt",
        description="Place grant_scheduler's claiming virt drivers where "
        "Nova loads virt drivers (nova/virt/grant_scheduler.py).",
    )
    parser.add_argument("action", choices=("install", "uninstall", "path"))
    parser.add_argument(
        "--nova-virt-dir",
        help="the nova/virt directory (default: that of the nova package "
        "this Python imports)",
    )
    args = parser.parse_args(argv)
    try:
        if args.action == "install":
            print(install(args.nova_virt_dir))
        elif args.action == "uninstall":
            removed = uninstall(args.nova_virt_dir)
            print(removed or "nothing to remove")
        else:
            print(module_path(args.nova_virt_dir))
    except (OSError, ImportError) as exc:
        print("grant_scheduler.nova.virt: %s" % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
