"""The compute side's SQL: claim (consume a grant) and release.

Mixed into ``store.Store``.  A claim moves a grant into usage in one
transaction (DESIGN H4); without a live grant it locks the host and
re-checks capacity (H5).  Both are idempotent per instance (H12).
"""

import dataclasses
import datetime

import sqlalchemy as sa

from grant_scheduler import exception
from grant_scheduler.db import api as db_api
from grant_scheduler.db import models
from grant_scheduler.db import rows
from grant_scheduler.resources import Resources

H = models.hosts
G = models.grants
C = models.claims


class Claims:
    """Claim and release; needs a ``db`` attribute."""

    def claim(
        self, instance_uuid, host, node, resources, ttl, before_commit=None
    ):
        """Count an instance in its host's usage, consuming its grant.

        Idempotent per (instance, host): a second claim returns the first.
        ``before_commit()``, if given, runs once a grant's consumption is
        written and not yet committed (an injection point for tests).

        :returns: a ``ClaimOutcome``.
        :raises UnknownHost: no row for ``host``/``node``.
        :raises ClaimRejected: no live grant and the instance does not fit
            (DESIGN H5).
        """
        outcome = self._claim_by_grant(
            instance_uuid, host, node, resources, ttl, before_commit
        )
        if outcome is None:
            outcome = self._claim_by_recheck(
                instance_uuid, host, node, resources
            )
        return outcome

    @db_api.transactional("writer")
    def _claim_by_grant(
        self, conn, instance_uuid, host, node, resources, ttl, before_commit
    ):
        """The common case: consume a live grant.  None when there is none.

        No host lock is needed: the grant already holds the capacity, and
        moving it into usage is one transaction (DESIGN H4).
        """
        row = conn.execute(
            sa.select(H.c.id).where(H.c.host == host, H.c.node == node)
        ).first()
        if row is None:
            raise exception.UnknownHost(host=host, node=node)
        found = _existing_or_grant(conn, row.id, instance_uuid, resources)
        if isinstance(found, ClaimOutcome):
            return found
        grant = found
        if grant is None:
            return None
        now = conn.execute(sa.select(db_api.utcnow())).scalar()
        expired = grant.created_at < now - datetime.timedelta(seconds=ttl)
        amount = rows.resources_of(grant)
        if expired or (resources is not None and resources != amount):
            return None
        _consume(conn, grant)
        conn.execute(
            H.update()
            .where(H.c.id == row.id)
            .values(**_advance_mark(grant), **rows.add_usage(amount))
        )
        insert_claim(conn, instance_uuid, row.id, amount, grant.ticket)
        if before_commit is not None:
            before_commit()
        return ClaimOutcome(amount, grant.ticket, "grant")

    @db_api.transactional("writer")
    def _claim_by_recheck(self, conn, instance_uuid, host, node, resources):
        """No live grant: lock the host, re-check capacity, then claim.

        The lock is the transaction's first statement so that, on InnoDB,
        the snapshot every later read uses starts after it is granted.
        """
        locked = conn.execute(
            H.update()
            .where(H.c.host == host, H.c.node == node)
            .values(ticket=H.c.ticket + 1)
        )
        if locked.rowcount != 1:
            raise exception.UnknownHost(host=host, node=node)
        host_id = conn.execute(
            sa.select(H.c.id).where(H.c.host == host, H.c.node == node)
        ).scalar()
        found = _existing_or_grant(conn, host_id, instance_uuid, resources)
        if isinstance(found, ClaimOutcome):
            return found
        grant = found
        if resources is None:
            if grant is None:
                raise exception.ClaimRejected(
                    instance_uuid=instance_uuid,
                    host=host,
                    node=node,
                    reason="there is no grant for it and no resources were "
                    "given to re-check capacity with",
                )
            resources = rows.resources_of(grant)
        exclude = grant.id if grant is not None else None
        row, others = rows.host_with_live_grants(
            conn, host_id, exclude_id=exclude
        )
        state = rows.host_state(row)
        for other in others:
            state.granted = state.granted + other.resources
        if not state.fits(resources):
            short = (state.used + state.granted + resources).exceeded(
                state.limit
            )
            raise exception.ClaimRejected(
                instance_uuid=instance_uuid,
                host=host,
                node=node,
                reason="it has no live grant and %s does not fit (short in %s)"
                % (resources, ", ".join(short)),
            )
        mark = {}
        if grant is not None:
            _consume(conn, grant)
            mark = _advance_mark(grant)
        conn.execute(
            H.update()
            .where(H.c.id == host_id)
            .values(**mark, **rows.add_usage(resources))
        )
        ticket = grant.ticket if grant is not None else None
        insert_claim(conn, instance_uuid, host_id, resources, ticket)
        return ClaimOutcome(resources, ticket, "recheck")

    @db_api.transactional("writer")
    def release(self, conn, instance_uuid, host, node):
        """Remove an instance from its host's usage; False if not claimed."""
        row = conn.execute(
            sa.select(C)
            .join(H, H.c.id == C.c.host_id)
            .where(
                C.c.instance_uuid == instance_uuid,
                H.c.host == host,
                H.c.node == node,
            )
        ).first()
        if row is None:
            return False
        if conn.execute(C.delete().where(C.c.id == row.id)).rowcount != 1:
            raise rows.retry_request()
        conn.execute(
            H.update()
            .where(H.c.id == row.host_id)
            .values(**rows.add_usage(rows.resources_of(row), sign=-1))
        )
        return True


@dataclasses.dataclass(frozen=True)
class ClaimOutcome:
    """What a claim did: ``how`` is grant, recheck or existing."""

    resources: Resources
    grant_ticket: int
    how: str


def _existing_or_grant(conn, host_id, instance_uuid, resources):
    """The instance's claim on this host as a ``ClaimOutcome`` if it has
    one (a repeated claim), else its grant row (or None)."""
    existing = conn.execute(
        sa.select(C).where(
            C.c.instance_uuid == instance_uuid, C.c.host_id == host_id
        )
    ).first()
    if existing is not None:
        return ClaimOutcome(
            rows.resources_of(existing), existing.grant_ticket, "existing"
        )
    return _find_grant(conn, host_id, instance_uuid, resources)


def insert_claim(conn, instance_uuid, host_id, amount, ticket):
    conn.execute(
        C.insert().values(
            instance_uuid=instance_uuid,
            host_id=host_id,
            vcpus=amount.vcpus,
            memory_mb=amount.memory_mb,
            disk_gb=amount.disk_gb,
            grant_ticket=ticket,
            created_at=db_api.utcnow(),
        )
    )


def _find_grant(conn, host_id, instance_uuid, resources):
    """The instance's won grant on this host, else the seed's fallback.

    The fallback, for grants written without an instance uuid, is the oldest
    won grant on the host for exactly these resources.
    """
    won = sa.and_(G.c.host_id == host_id, G.c.state == models.GRANT_WON)
    grant = conn.execute(
        sa.select(G)
        .where(won, G.c.instance_uuid == instance_uuid)
        .order_by(G.c.ticket)
        .limit(1)
    ).first()
    if grant is not None or resources is None:
        return grant
    return conn.execute(
        sa.select(G)
        .where(
            won,
            G.c.instance_uuid.is_(None),
            G.c.vcpus == resources.vcpus,
            G.c.memory_mb == resources.memory_mb,
            G.c.disk_gb == resources.disk_gb,
        )
        .order_by(G.c.ticket)
        .limit(1)
    ).first()


def _consume(conn, grant):
    result = conn.execute(
        G.update()
        .where(G.c.id == grant.id, G.c.state == models.GRANT_WON)
        .values(state=models.GRANT_CONSUMED, consumed_at=db_api.utcnow())
    )
    if result.rowcount != 1:
        raise rows.retry_request()


def _advance_mark(grant):
    """Move the host's last-grant mark forward to ``grant``, never back.

    NOTE: MySQL evaluates SET assignments left to right, so the second one
    may see ``last_grant_ticket`` already moved to ``grant.ticket``;
    PostgreSQL and SQLite see the old value.  ``<=`` gives the same result
    either way (at equality the mark is this very grant).
    """
    return {
        "last_grant_ticket": sa.case(
            (H.c.last_grant_ticket < grant.ticket, grant.ticket),
            else_=H.c.last_grant_ticket,
        ),
        "last_grant_at": sa.case(
            (H.c.last_grant_ticket <= grant.ticket, grant.created_at),
            else_=H.c.last_grant_at,
        ),
    }
