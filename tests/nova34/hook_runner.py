"""Nova 13-21's hook mechanism, for releases whose code is not installed.

Nova's ``nova.hooks.add_hook(name)`` wrapped a ComputeManager method and
ran, around every call, the ``pre`` and ``post`` methods of each object a
stevedore ``HookManager`` loaded from the ``nova.hooks`` namespace under
that name (``invoke_on_load=True``).  A ``FatalHookException`` from a hook
was logged and re-raised, stopping the call; any other exception was logged
and swallowed.  This module behaves the same way, so the hooks are loaded
and called exactly as such a Nova would.
"""

import functools
import logging

from stevedore import hook

from grant_scheduler.nova import compat

LOG = logging.getLogger(__name__)
NAMESPACE = "nova.hooks"


def add_hook(name):
    manager = hook.HookManager(NAMESPACE, name, invoke_on_load=True)

    def outer(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            _run(manager, "pre", name, args, kwargs)
            rv = fn(*args, **kwargs)
            _run(manager, "post", name, (rv,) + args, kwargs)
            return rv

        return inner

    return outer


def _run(manager, phase, name, args, kwargs):
    extensions = manager.extensions
    if phase == "post":
        extensions = list(reversed(extensions))
    for extension in extensions:
        method = getattr(extension.obj, phase, None)
        if method is None:
            continue
        try:
            method(*args, **kwargs)
        except compat.FatalHookException:
            LOG.exception("Fatal exception running %s %s-hook", name, phase)
            raise
        except Exception:
            LOG.exception("Exception running %s %s-hook", name, phase)
