"""Where Nova finds grant_scheduler's claiming virt drivers.

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
files).  The drivers themselves are ``compute.virt``'s; this module's
path is the one written files import, so it stays.
"""

import argparse
import importlib
import os
import sys

# NOTE: what a written module imports (the drivers by name, built on
# first use) and what another hypervisor's driver is wrapped with.
from grant_scheduler.nova.compute.virt import BASES  # noqa: F401
from grant_scheduler.nova.compute.virt import ClaimingDriver  # noqa: F401
from grant_scheduler.nova.compute.virt import __getattr__  # noqa: F401
from grant_scheduler.nova.compute.virt import claiming  # noqa: F401

# The module written under ``nova.virt``: ``compute_driver =
# grant_scheduler.<name>`` names it.
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
