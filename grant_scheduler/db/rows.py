"""Row-level helpers shared by the grants and claims data access.

Table aliases, the per-host sums, the conversions from rows to
``Resources`` and ``HostState``, and the statements both sides use to lock
and read a host (its ticket, its live grants).
"""

import sqlalchemy as sa
from oslo_db import exception as db_exc

from grant_scheduler import decision
from grant_scheduler.db import api as db_api
from grant_scheduler.db import models
from grant_scheduler.resources import NOTHING
from grant_scheduler.resources import Capacity
from grant_scheduler.resources import HostState
from grant_scheduler.resources import Resources

H = models.hosts
G = models.grants
C = models.claims

LIVE = (models.GRANT_PENDING, models.GRANT_WON)


def sums_by_host(table, *where, by=()):
    """SELECT host_id [, by...], SUM(vcpus), SUM(memory_mb), SUM(disk_gb)
    FROM a grants or claims table, grouped by host."""
    return (
        sa.select(
            table.c.host_id,
            *by,
            sa.func.sum(table.c.vcpus).label("vcpus"),
            sa.func.sum(table.c.memory_mb).label("memory_mb"),
            sa.func.sum(table.c.disk_gb).label("disk_gb"),
        )
        .where(*where)
        .group_by(table.c.host_id, *by)
    )


def usage_values(used):
    return {
        "vcpus_used": used.vcpus,
        "memory_mb_used": used.memory_mb,
        "disk_gb_used": used.disk_gb,
    }


class LostUpdate(Exception):
    """A conditional update found the row changed: start again."""


def retry_request():
    return db_exc.RetryRequest(LostUpdate())


def resources_of(row, prefix="", suffix=""):
    # NOTE: MySQL returns SUM() of integers as DECIMAL; amounts are ints
    # everywhere else (Nova's weighers, for one, mix them with floats).
    return Resources(
        *(
            int(row._mapping[prefix + name + suffix])
            for name in ("vcpus", "memory_mb", "disk_gb")
        )
    )


def host_state(row, granted=NOTHING):
    capacity = Capacity(
        total=resources_of(row),
        reserved=resources_of(row, prefix="reserved_"),
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
        used=resources_of(row, suffix="_used"),
        granted=granted,
        generation=row.generation,
    )


def add_usage(amount, sign=1):
    return {
        "vcpus_used": H.c.vcpus_used + sign * amount.vcpus,
        "memory_mb_used": H.c.memory_mb_used + sign * amount.memory_mb,
        "disk_gb_used": H.c.disk_gb_used + sign * amount.disk_gb,
        "generation": H.c.generation + 1,
        "updated_at": db_api.utcnow(),
    }


def take_ticket(conn, host_id):
    """Issue the host's next ticket; hold its row lock until commit.

    The lock is what makes ticket order commit order (DESIGN H1): a
    transaction that holds ticket N commits before any other can be issued
    N + 1.  Returns None when the host row is gone.
    """
    result = conn.execute(
        H.update().where(H.c.id == host_id).values(ticket=H.c.ticket + 1)
    )
    if result.rowcount != 1:
        return None
    return conn.execute(
        sa.select(H.c.ticket).where(H.c.id == host_id)
    ).scalar()


def host_with_live_grants(conn, host_id, max_ticket=None, exclude_id=None):
    """A host row and its live grants, read in one statement.

    One statement is one snapshot on every backend.  Two statements are
    not under PostgreSQL's READ COMMITTED: a claim committing between them
    would move a grant into usage after the host row was read and out of
    the live grants before they were, and the grant would count nowhere
    (DESIGN H4).

    :returns: ``(host row, [LiveGrant, ...])``, or ``(None, [])``.
    """
    on = [G.c.host_id == H.c.id, G.c.state.in_(LIVE)]
    if max_ticket is not None:
        on.append(G.c.ticket <= max_ticket)
    if exclude_id is not None:
        on.append(G.c.id != exclude_id)
    query = (
        sa.select(
            H,
            G.c.id.label("grant_id"),
            G.c.ticket.label("grant_ticket"),
            G.c.vcpus.label("grant_vcpus"),
            G.c.memory_mb.label("grant_memory_mb"),
            G.c.disk_gb.label("grant_disk_gb"),
            G.c.state.label("grant_state"),
        )
        .outerjoin(G, sa.and_(*on))
        .where(H.c.id == host_id)
        .order_by(G.c.ticket)
    )
    rows = conn.execute(query).all()
    if not rows:
        return None, []
    grants = [
        decision.LiveGrant(
            id=row.grant_id,
            ticket=row.grant_ticket,
            resources=resources_of(row, prefix="grant_"),
            state=row.grant_state,
        )
        for row in rows
        if row.grant_id is not None
    ]
    return rows[0], grants
