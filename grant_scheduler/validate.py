"""Input checks of the public API, made before anything reaches a database.

Every backend then sees the same inputs and gives the same answers: a value
the columns cannot hold, a string where a list is meant, or a name that
would print as a terminal escape is refused here with the project's own
exception, naming the value, instead of surfacing as a driver error on one
backend and being stored on another.
"""

import math
import unicodedata
import uuid

from grant_scheduler import exception
from grant_scheduler.resources import CLASS_NAME
from grant_scheduler.resources import MAX_AMOUNT
from grant_scheduler.resources import Inventory
from grant_scheduler.resources import Resources

NAME_LENGTH = 255
"""The width of the host, node, request id and scheduler columns."""


def amount(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int):
        raise exception.InvalidResources(
            name=name, value=value, reason="it must be an integer"
        )
    if value < minimum:
        raise exception.InvalidResources(
            name=name, value=value, reason="it must be at least %d" % minimum
        )
    if value > MAX_AMOUNT:
        raise exception.InvalidResources(
            name=name,
            value=value,
            reason="it must be at most %d" % MAX_AMOUNT,
        )
    return value


def resource_class(name):
    """A resource class name as placement spells one."""
    if not isinstance(name, str) or not CLASS_NAME.match(name):
        raise exception.InvalidResources(
            name="resource class",
            value=name,
            reason="it must be 1 to 255 capital letters, digits and "
            "underscores, as placement's resource classes are",
        )
    return name


def resources(vcpus=0, memory_mb=0, disk_gb=0, classes=None, allow_zero=False):
    """Resources from user input, or ``InvalidResources`` naming the value.

    Every amount is an integer (``bool`` is not one) from 0 to
    ``MAX_AMOUNT``, of a class named as placement names them, and, unless
    ``allow_zero``, at least one amount is above 0 (an Ironic flavour asks
    for one unit of a custom class and nothing else).
    """
    amounts = {
        "VCPU": amount("vcpus", vcpus, 0),
        "MEMORY_MB": amount("memory_mb", memory_mb, 0),
        "DISK_GB": amount("disk_gb", disk_gb, 0),
    }
    for name, value in dict(classes or {}).items():
        resource_class(name)
        value = amount(name, value, 0)
        if amounts.get(name):
            raise exception.InvalidResources(
                name=name, value=value, reason="it is given twice"
            )
        amounts[name] = value
    checked = Resources.of(amounts)
    if not checked and not allow_zero:
        raise exception.InvalidResources(
            name="resources",
            value=str(checked),
            reason="at least one amount must be above 0",
        )
    return checked


def resources_object(value, what, allow_zero=False):
    """A ``Resources`` given by the caller, its amounts checked."""
    if not isinstance(value, Resources):
        raise exception.InvalidResources(
            name=what, value=value, reason="it must be a Resources"
        )
    return resources(classes=value.as_dict(), allow_zero=allow_zero)


def inventory(name, value):
    """One ``Inventory`` of a capacity, its numbers checked."""
    resource_class(name)
    if not isinstance(value, Inventory):
        raise exception.InvalidResources(
            name=name, value=value, reason="it must be an Inventory"
        )
    checked = Inventory(
        total=amount(name + " total", value.total, 0),
        reserved=amount(name + " reserved", value.reserved, 0),
        allocation_ratio=ratio(
            name + " allocation_ratio", value.allocation_ratio
        ),
        min_unit=amount(name + " min_unit", value.min_unit, 1),
        max_unit=amount(name + " max_unit", value.max_unit, 0),
        step_size=amount(name + " step_size", value.step_size, 1),
    )
    return checked


# NOTE: Nova's allocation ratio options have no upper bound, and its own
# tests use 9999 for "unlimited"; a million keeps (2^40 x ratio) within a
# 64-bit integer.
MAX_RATIO = 1000000


def ratio(name, value):
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 < value < MAX_RATIO
    ):
        raise exception.InvalidResources(
            name=name,
            value=value,
            reason="it must be a number in (0, %d)" % MAX_RATIO,
        )
    return float(value)


# NOTE: Unicode categories a name may not hold: control and format
# characters (a newline, NUL, a terminal escape, a bidirectional override
# that prints a name backwards), line and paragraph separators, and
# surrogates, which no database encoding can store.
_REFUSED_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "a control character (format)",
    "Zl": "a control character (line separator)",
    "Zp": "a control character (paragraph separator)",
    "Cs": "a surrogate",
}


def name(what, value, optional=False):
    """A host, node, request or scheduler name: the one rule for every name
    the API takes.

    Non-empty text of at most ``NAME_LENGTH`` characters, without control
    characters (newlines, NUL, terminal escapes), surrogates and without
    leading or trailing white space, which some collations ignore and
    others do not.
    """
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise exception.InvalidRequest(
            reason="%s %r is not a string" % (what, value)
        )
    if not value:
        raise exception.InvalidRequest(reason="%s is empty" % what)
    if len(value) > NAME_LENGTH:
        raise exception.InvalidRequest(
            reason="%s is %d characters long; at most %d fit"
            % (what, len(value), NAME_LENGTH)
        )
    for character in value:
        refused = _REFUSED_CATEGORIES.get(unicodedata.category(character))
        if refused is not None:
            raise exception.InvalidRequest(
                reason="%s %r contains %s" % (what, value, refused)
            )
    if value != value.strip():
        raise exception.InvalidRequest(
            reason="%s %r starts or ends with white space" % (what, value)
        )
    return value


def names(what, values, item):
    """A collection of ``item`` names; a bare string is refused, not
    split into characters."""
    if values is None:
        return frozenset()
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise exception.InvalidRequest(
            reason="%s must be a list of names, not %r" % (what, values)
        )
    return frozenset(name(item, value) for value in values)


def instance_uuid(value, optional=False):
    """An instance uuid as its canonical lower-case text.

    ``uuid.UUID`` objects and 36-character hyphenated strings are accepted.
    """
    if value is None and optional:
        return None
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str) and len(value) == 36:
        try:
            parsed = uuid.UUID(value)
        except ValueError:
            parsed = None
        if parsed is not None and str(parsed) == value.lower():
            return str(parsed)
    raise exception.InvalidRequest(
        reason="instance uuid %r is not a UUID" % (value,)
    )


def instance_uuids(values):
    if isinstance(values, (str, bytes, uuid.UUID)) or not hasattr(
        values, "__iter__"
    ):
        raise exception.InvalidRequest(
            reason="instance_uuids must be a list of UUIDs, not %r" % (values,)
        )
    return tuple(instance_uuid(v, optional=True) for v in values)


def count(what, value, minimum=0):
    if isinstance(value, bool) or not isinstance(value, int):
        raise exception.InvalidRequest(
            reason="%s %r is not an integer" % (what, value)
        )
    if value < minimum:
        raise exception.InvalidRequest(
            reason="%s must be at least %d, not %d" % (what, minimum, value)
        )
    return value
