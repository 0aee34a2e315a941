"""SQL of the reaper and of inspection: what no request waits for.

The reaper deletes in small batches, one transaction each, so it holds no
long locks and many reapers may run at once: each batch selects candidate
ids, then deletes them under the same condition, counting what it deleted.
"""

import dataclasses
import datetime

import sqlalchemy as sa

from grant_scheduler.db import api as db_api
from grant_scheduler.db import models
from grant_scheduler.db import rows
from grant_scheduler.resources import Resources

H = models.hosts
G = models.grants
C = models.claims

# Why a grant may go, in the order the reaper looks for them.
SUPERSEDED = "superseded"
WITHDRAWN = "withdrawn"
ORPHANED = "orphaned"
EXPIRED = "expired"
REASONS = (SUPERSEDED, WITHDRAWN, ORPHANED, EXPIRED)


def _candidates(reason, cutoff):
    """A query of grant ids to reap for ``reason``, and its delete guard."""
    if reason == SUPERSEDED:
        # NOTE(H3): only consumed grants go by the mark; an unconsumed grant
        # below it may belong to a build still in flight.
        guard = G.c.state == models.GRANT_CONSUMED
        query = (
            sa.select(G.c.id)
            .join(H, H.c.id == G.c.host_id)
            .where(guard, G.c.ticket <= H.c.last_grant_ticket)
        )
    elif reason == WITHDRAWN:
        guard = G.c.state == models.GRANT_LOST
        query = sa.select(G.c.id).where(guard)
    elif reason == ORPHANED:
        guard = ~sa.exists().where(H.c.id == G.c.host_id)
        query = sa.select(G.c.id).where(guard)
    else:
        guard = sa.and_(G.c.state.in_(rows.LIVE), G.c.created_at < cutoff)
        query = sa.select(G.c.id).where(guard)
    return query, guard


@dataclasses.dataclass(frozen=True)
class GrantRow:
    id: int
    host: str
    node: str
    ticket: int
    state: str
    resources: Resources
    instance_uuid: str
    request_id: str
    scheduler: str
    created_at: datetime.datetime


def _prefixed(subquery, prefix):
    return [
        subquery.c[name].label(prefix + name)
        for name in ("vcpus", "memory_mb", "disk_gb")
    ]


def _amount(row, prefix):
    values = row._mapping
    return Resources(
        *(
            int(values[prefix + name] or 0)
            for name in ("vcpus", "memory_mb", "disk_gb")
        )
    )


class Maintenance:
    """Reaping and inspection against one ``Database``."""

    def __init__(self, db):
        self.db = db

    @db_api.transactional("reader")
    def db_now(self, conn):
        """The database server's UTC time (the only clock expiry uses)."""
        return conn.execute(sa.select(db_api.utcnow())).scalar()

    @db_api.transactional("writer")
    def reap_batch(self, conn, reason, cutoff, limit):
        """Delete up to ``limit`` grants reapable for ``reason``."""
        query, guard = _candidates(reason, cutoff)
        ids = list(conn.execute(query.order_by(G.c.id).limit(limit)).scalars())
        if not ids:
            return 0, 0
        deleted = conn.execute(
            G.delete().where(G.c.id.in_(ids), guard)
        ).rowcount
        return len(ids), deleted

    @db_api.transactional("reader")
    def hosts(self, conn):
        """Every host with its won grants and claims, for inspection.

        One statement, so that on every backend each host's usage, grants
        and claims come from one snapshot (the checker relies on it).
        """
        won = rows.sums_by_host(G, G.c.state == models.GRANT_WON).subquery(
            "won"
        )
        claimed = rows.sums_by_host(C).subquery("claimed")
        query = (
            sa.select(
                H,
                *_prefixed(won, "won_"),
                *_prefixed(claimed, "claimed_"),
            )
            .outerjoin(won, won.c.host_id == H.c.id)
            .outerjoin(claimed, claimed.c.host_id == H.c.id)
            .order_by(H.c.host, H.c.node)
        )
        result = []
        for row in conn.execute(query):
            won_amount = _amount(row, "won_")
            result.append(
                HostReport(
                    state=rows.host_state(row, won_amount),
                    claimed=_amount(row, "claimed_"),
                    last_grant_ticket=row.last_grant_ticket,
                    last_grant_at=row.last_grant_at,
                )
            )
        return result

    @db_api.transactional("reader")
    def grants(self, conn, host=None):
        """Every grant row (optionally on one host), oldest ticket first."""
        query = sa.select(G, H.c.host, H.c.node).outerjoin(
            H, H.c.id == G.c.host_id
        )
        if host is not None:
            query = query.where(H.c.host == host)
        result = conn.execute(query.order_by(G.c.host_id, G.c.ticket))
        return [
            GrantRow(
                id=row.id,
                host=row.host,
                node=row.node,
                ticket=row.ticket,
                state=row.state,
                resources=rows.resources_of(row),
                instance_uuid=row.instance_uuid,
                request_id=row.request_id,
                scheduler=row.scheduler,
                created_at=row.created_at,
            )
            for row in result
        ]


@dataclasses.dataclass(frozen=True)
class HostReport:
    """A host for people: its state, won grants and the claims behind usage."""

    state: object
    claimed: Resources
    last_grant_ticket: int
    last_grant_at: datetime.datetime
