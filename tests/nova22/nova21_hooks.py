"""Nova 21's ``nova/hooks.py``, re-created for Nova 22 (which removed it).

The same mechanism as 21.0.0's: a stevedore ``HookManager`` over the
``nova.hooks`` namespace per hook name, cached in ``_HOOKS``; ``pre``
hooks run before the call, ``post`` hooks after it; a
``FatalHookException`` is logged and re-raised, any other exception from a
hook logged and swallowed.  ``FatalHookException`` is the class
grant_scheduler raises where ``nova.hooks`` is missing.  Apply
``add_hook`` outermost to Nova 22's real ComputeManager methods to run
them as Nova 13-21 did.
"""

import functools

import stevedore
from oslo_log import log as logging

from grant_scheduler.nova import compat

LOG = logging.getLogger(__name__)
NS = "nova.hooks"

_HOOKS = {}  # hook name => hook manager

FatalHookException = compat.FatalHookException


class HookManager(stevedore.hook.HookManager):
    def __init__(self, name):
        super().__init__(NS, name, invoke_on_load=True)

    def _run(self, name, method_type, args, kwargs, func=None):
        if method_type not in ("pre", "post"):
            raise ValueError(
                "Wrong type of hook method. Only 'pre' and 'post' type allowed"
            )
        for e in self.extensions:
            obj = e.obj
            hook_method = getattr(obj, method_type, None)
            if hook_method:
                LOG.debug(
                    "Running %(name)s %(type)s-hook: %(obj)s",
                    {"name": name, "type": method_type, "obj": obj},
                )
                try:
                    if func:
                        hook_method(func, *args, **kwargs)
                    else:
                        hook_method(*args, **kwargs)
                except FatalHookException:
                    LOG.exception(
                        "Fatal Exception running %(name)s %(type)s-hook: "
                        "%(obj)s",
                        {"name": name, "type": method_type, "obj": obj},
                    )
                    raise
                except Exception:
                    LOG.exception(
                        "Exception running %(name)s %(type)s-hook: %(obj)s",
                        {"name": name, "type": method_type, "obj": obj},
                    )

    def run_pre(self, name, args, kwargs, f=None):
        self._run(
            name=name, method_type="pre", args=args, kwargs=kwargs, func=f
        )

    def run_post(self, name, rv, args, kwargs, f=None):
        self._run(
            name=name,
            method_type="post",
            args=(rv,) + args,
            kwargs=kwargs,
            func=f,
        )


def add_hook(name, pass_function=False):
    """Execute optional pre and post methods around the decorated
    function."""

    def outer(f):
        f.__hook_name__ = name

        @functools.wraps(f)
        def inner(*args, **kwargs):
            manager = _HOOKS.setdefault(name, HookManager(name))
            function = None
            if pass_function:
                function = f
            manager.run_pre(name, args, kwargs, f=function)
            rv = f(*args, **kwargs)
            manager.run_post(name, rv, args, kwargs, f=function)
            return rv

        return inner

    return outer


def reset():
    """Clear loaded hooks."""
    _HOOKS.clear()
