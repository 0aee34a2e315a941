"""Reading rows into the protocol's types, and the SQL of one rule.

Shared by ``hosts``, ``grants`` and ``claims``: the one conversion from a
row to ``Resources`` and ``HostState``, and ``fits``, the capacity rule of
``HostState.fits`` written as SQL so the database can apply it in the very
``UPDATE`` that takes a grant or a claim.
"""

import sqlalchemy as sa
from oslo_db import exception as db_exc

from grant_scheduler.db import models
from grant_scheduler.db import sa_compat
from grant_scheduler.resources import DIMENSIONS
from grant_scheduler.resources import Capacity
from grant_scheduler.resources import HostState
from grant_scheduler.resources import Resources

HOSTS = models.hosts


def amount(row, prefix="", suffix=""):
    """The ``Resources`` in a row's ``<prefix><dimension><suffix>`` columns.

    NOTE: MySQL returns SUM() of integers as DECIMAL, and an outer join
    gives NULL; amounts are ints everywhere else (Nova's weighers, for one,
    mix them with floats).
    """
    values = sa_compat.mapping(row)
    return Resources(
        *(int(values[prefix + name + suffix] or 0) for name in DIMENSIONS)
    )


def host_state(row):
    """A ``HostState`` from a ``gs_hosts`` row."""
    capacity = Capacity(
        total=amount(row),
        reserved=amount(row, prefix="reserved_"),
        cpu_allocation_ratio=row.cpu_allocation_ratio,
        ram_allocation_ratio=row.ram_allocation_ratio,
        disk_allocation_ratio=row.disk_allocation_ratio,
    )
    return HostState(
        host_id=row.id,
        host=row.host,
        node=row.node,
        node_uuid=row.node_uuid,
        capacity=capacity,
        used=amount(row, suffix="_used"),
        granted=amount(row, prefix="granted_"),
        limit=amount(row, prefix="limit_"),
    )


def columns(table, prefix="", suffix=""):
    """A table's ``<prefix><dimension><suffix>`` columns."""
    return [table.c[prefix + name + suffix] for name in DIMENSIONS]


HOST_STATE_COLUMNS = (
    [HOSTS.c.host, HOSTS.c.node, HOSTS.c.node_uuid]
    + columns(HOSTS)
    + columns(HOSTS, prefix="reserved_")
    + [
        HOSTS.c.cpu_allocation_ratio,
        HOSTS.c.ram_allocation_ratio,
        HOSTS.c.disk_allocation_ratio,
    ]
    + columns(HOSTS, suffix="_used")
    + columns(HOSTS, prefix="granted_")
    + columns(HOSTS, prefix="limit_")
)
"""What ``host_state`` reads of a ``gs_hosts`` row, beside its id."""


def values(resources, prefix="", suffix=""):
    """``{column: value}`` for a ``Resources`` in prefixed columns."""
    return {
        prefix + name + suffix: getattr(resources, name) for name in DIMENSIONS
    }


def moved(table, resources, prefix="", suffix="", sign=1):
    """``{column: column + sign x amount}`` for an ``UPDATE``."""
    return {
        prefix + name + suffix: table.c[prefix + name + suffix]
        + sign * getattr(resources, name)
        for name in DIMENSIONS
    }


def fits(resources, minus=None):
    """SQL for ``HostState.fits``: used + granted (- minus) + resources
    within the limit, and resources within the node's total (one
    instance's ``max_unit``), in every dimension, on the row being
    updated."""
    minus = minus or Resources()
    return sa.and_(
        *(
            HOSTS.c[name + "_used"]
            + HOSTS.c["granted_" + name]
            + (getattr(resources, name) - getattr(minus, name))
            <= HOSTS.c["limit_" + name]
            for name in DIMENSIONS
        ),
        *(HOSTS.c[name] >= getattr(resources, name) for name in DIMENSIONS),
    )


def sums_by_host(table, condition=None):
    """``SELECT host_id, SUM(<dimension>)...`` of grants or claims."""
    query = sa_compat.select(
        table.c.host_id,
        *(sa.func.sum(table.c[name]).label(name) for name in DIMENSIONS),
    )
    if condition is not None:
        query = query.where(condition)
    return query.group_by(table.c.host_id)


class LostUpdate(Exception):
    """A conditional update found the row changed: start again."""


def retry_request():
    return db_exc.RetryRequest(LostUpdate())
