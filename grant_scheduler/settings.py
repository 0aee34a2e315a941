"""The protocol's settings, read once from ``[grant_scheduler]``.

``Settings`` has one field per option of ``grant_scheduler.conf.scheduler``,
with the option's default and bounds: an option added there is a field
here, and no default is written twice.  It is a frozen dataclass::

    Settings()                      # the option defaults
    Settings(grant_ttl=30)          # checked like the option
    Settings.from_conf(cfg.CONF)    # [grant_scheduler] of a ConfigOpts
    settings.replace(max_fallovers=2)

A value of the wrong type (``True`` or ``"3"`` for an integer), out of the
option's bounds, or not finite raises ``InvalidSettings`` naming the field,
the value and the bounds.
"""

import dataclasses
import math

from oslo_config import types as cfg_types

from grant_scheduler import exception
from grant_scheduler.conf import scheduler as scheduler_conf

OPTIONS = tuple(scheduler_conf.scheduler_opts)


def _kind(opt):
    if isinstance(opt.type, cfg_types.Integer):
        return int
    if isinstance(opt.type, cfg_types.Float):
        return float
    if isinstance(opt.type, cfg_types.Boolean):
        return bool
    if isinstance(opt.type, cfg_types.String):
        return str
    return object


_KIND_NAMES = {
    int: "an integer",
    float: "a finite number",
    bool: "true or false",
    str: "a string",
    object: "a value",
}


def _expected(opt):
    kind = _kind(opt)
    text = _KIND_NAMES[kind]
    low = getattr(opt.type, "min", None)
    high = getattr(opt.type, "max", None)
    if kind in (int, float):
        if low is not None and high is not None:
            text += " from %s to %s" % (low, high)
        elif low is not None:
            text += " of at least %s" % low
        elif high is not None:
            text += " of at most %s" % high
    choices = getattr(opt.type, "choices", None)
    if choices:
        text += " among %s" % ", ".join(repr(c) for c in choices)
    return text


def _in_bounds(opt, value):
    low = getattr(opt.type, "min", None)
    high = getattr(opt.type, "max", None)
    return (low is None or value >= low) and (high is None or value <= high)


def _checked(opt, value):
    """``value`` as the field holds it; raise unless the option takes it."""
    kind = _kind(opt)
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        ok = ok and _in_bounds(opt, value)
    elif kind is float:
        ok = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and _in_bounds(opt, value)
        )
        if ok:
            value = float(value)
    elif kind is bool:
        ok = isinstance(value, bool)
    else:
        ok = kind is object or isinstance(value, kind)
        if ok:
            try:
                ok = opt.type(value) == value
            except ValueError:
                ok = False
    if not ok:
        raise exception.InvalidSettings(
            name=opt.dest, value=value, reason="must be " + _expected(opt)
        )
    return value


def _post_init(self):
    for opt in OPTIONS:
        object.__setattr__(
            self, opt.dest, _checked(opt, getattr(self, opt.dest))
        )


@classmethod
def _from_conf(cls, conf):
    """Read ``[grant_scheduler]`` of ``conf`` (options registered)."""
    group = conf[scheduler_conf.GROUP_NAME]
    return cls(**{opt.dest: group[opt.dest] for opt in OPTIONS})


def _replace(self, **changes):
    """A copy with ``changes``, checked like the original."""
    return dataclasses.replace(self, **changes)


Settings = dataclasses.make_dataclass(
    "Settings",
    [
        (opt.dest, _kind(opt), dataclasses.field(default=opt.default))
        for opt in OPTIONS
    ],
    frozen=True,
    namespace={
        "__module__": __name__,
        "__doc__": "The knobs of the grants protocol; see the module.",
        "__post_init__": _post_init,
        "from_conf": _from_conf,
        "replace": _replace,
    },
)
