"""SQL of ``gs_claims``: the compute side's claim and release.

A claim moves its grant into usage in one transaction (H4): the
node's row is locked first (usage up, live grants down, the last-grant mark
forward), then the grant is marked consumed and the claim row written.
Without a grant of its own the claim is the same conditional ``UPDATE`` a
grant is, ``HostState.fits`` evaluated by the database (H5).  The claim
row's unique (instance, node) makes a repeated claim find the first (H12).
A claim consumes exactly one grant, or none: any other live grant of the
instance (a reschedule, a retried request) is withdrawn with it.

A function decorated ``@db_api.writer`` or ``@db_api.reader`` is one
transaction of its own, retried: it is defined as ``fn(db, conn, ...)`` and
called as ``fn(db, ...)``; the others are plain ``(conn, ...)`` helpers
inside their caller's transaction.
"""

import sqlalchemy as sa

from grant_scheduler import decision
from grant_scheduler import exception
from grant_scheduler import storage
from grant_scheduler.db import api as db_api
from grant_scheduler.db import grants
from grant_scheduler.db import models
from grant_scheduler.db import rows
from grant_scheduler.db import sa_compat
from grant_scheduler.resources import NOTHING

HOSTS = models.hosts
GRANTS = models.grants
CLAIMS = models.claims


def _grant_columns():
    return [
        GRANTS.c.id.label("grant_id"),
        GRANTS.c.ticket.label("grant_ticket"),
        GRANTS.c.created_at.label("grant_created_at"),
        GRANTS.c.resources.label("grant_resources"),
    ]


def _node_and_grant(conn, host, node, on, claimed_by=None):
    """``(node id, its oldest live grant matching on or None, the claim
    of instance claimed_by on the node or None)``, in one statement."""
    columns = [HOSTS.c.id, *_grant_columns()]
    joined = HOSTS.outerjoin(
        GRANTS,
        sa.and_(
            GRANTS.c.host_id == HOSTS.c.id,
            GRANTS.c.state == decision.GRANT_WON,
            on,
        ),
    )
    if claimed_by is not None:
        # NOTE: one claim row at most per instance and node (unique).
        columns += [
            CLAIMS.c.id.label("claim_id"),
            CLAIMS.c.grant_ticket.label("claim_ticket"),
            CLAIMS.c.resources.label("claim_resources"),
        ]
        joined = joined.outerjoin(
            CLAIMS,
            sa.and_(
                CLAIMS.c.host_id == HOSTS.c.id,
                CLAIMS.c.instance_uuid == claimed_by,
            ),
        )
    query = (
        sa_compat.select(*columns)
        .select_from(joined)
        .where(sa.and_(HOSTS.c.host == host, HOSTS.c.node == node))
        .order_by(GRANTS.c.ticket)
        .limit(1)
    )
    row = conn.execute(query).first()
    if row is None:
        raise exception.UnknownHost(host=host, node=node)
    grant = row if row.grant_id is not None else None
    claim = None
    if claimed_by is not None and row.claim_id is not None:
        claim = storage.ClaimOutcome(
            rows.amount(row, "claim_resources"),
            row.claim_ticket,
            storage.CLAIM_EXISTING,
            host_id=row.id,
        )
    return row.id, grant, claim


def _find_grant(conn, instance_uuid, host, node, resources, request_id):
    """``(node id, grant, claim)``: the instance's live grant on the node,
    else the seed's fallback; and the instance's claim there (or None),
    read by the same statement.

    The fallback, for grants written without an instance uuid (Nova 13-14
    multi-create), is the oldest such grant of the *same request* for
    exactly these resources; another request's grant is never taken.
    """
    host_id, grant, claim = _node_and_grant(
        conn,
        host,
        node,
        GRANTS.c.instance_uuid == instance_uuid,
        claimed_by=instance_uuid,
    )
    if grant is None and request_id is not None and resources is not None:
        _, grant, _ = _node_and_grant(
            conn,
            host,
            node,
            sa.and_(
                GRANTS.c.instance_uuid.is_(None),
                GRANTS.c.request_id == request_id,
                GRANTS.c.resources == rows.encode(resources),
            ),
        )
    return host_id, grant, claim


def _advance_mark(ticket, created_at):
    """Move the node's last-grant mark forward to a grant, never back.

    NOTE: MySQL evaluates SET assignments left to right, so the second one
    may see ``last_grant_ticket`` already moved to this ticket; PostgreSQL
    and SQLite see the old value.  ``<=`` gives the same result either way
    (at equality the mark is this very grant).
    """
    return {
        "last_grant_ticket": sa_compat.case(
            (HOSTS.c.last_grant_ticket < ticket, ticket),
            else_=HOSTS.c.last_grant_ticket,
        ),
        "last_grant_at": sa_compat.case(
            (HOSTS.c.last_grant_ticket <= ticket, created_at),
            else_=HOSTS.c.last_grant_at,
        ),
    }


def _others_live(instance_uuid):
    """The instance's live grants, anywhere (a reschedule's or a retried
    request's duplicates once its own grant is consumed)."""
    return sa.and_(
        GRANTS.c.instance_uuid == instance_uuid,
        GRANTS.c.state == decision.GRANT_WON,
    )


def _consume_own_grant(conn, db, host_id, instance_uuid, resources):
    """Consume the instance's oldest live grant on the node (of exactly
    ``resources``, when given), by one ``UPDATE`` of that one row:
    ``(ticket, created_at, amount)``, or None.

    The row is named by its id, chosen in the statement itself: duplicate
    grants of the instance match the same condition, and a claim consumes
    exactly one grant.  PostgreSQL returns what the claim needs with the
    ``UPDATE``; MySQL hands back the ticket in the statement's OK packet,
    and reads the grant's amount (when not given) by it; SQLite reads both.
    """
    own = [
        GRANTS.c.host_id == host_id,
        GRANTS.c.instance_uuid == instance_uuid,
        GRANTS.c.state == decision.GRANT_WON,
    ]
    if resources is not None:
        own.append(GRANTS.c.resources == rows.encode(resources))
    oldest = (
        sa_compat.select(GRANTS.c.id)
        .where(sa.and_(*own))
        .order_by(GRANTS.c.ticket)
        .limit(1)
    )
    dialect = db.dialect_name
    if dialect == "mysql":
        # NOTE: MySQL refuses a subquery on the table being updated unless
        # it is materialised as a derived table first.
        derived = oldest.alias("oldest")
        oldest = sa_compat.select(derived.c.id)
    values = {"state": decision.GRANT_CONSUMED, "consumed_at": db.now()}
    if dialect == "mysql":
        # NOTE: hands the ticket back in the statement's OK packet.
        values["ticket"] = sa.func.last_insert_id(GRANTS.c.ticket)
    statement = (
        GRANTS.update()
        .where(
            sa.and_(
                GRANTS.c.id == sa_compat.scalar_subquery(oldest),
                GRANTS.c.state == decision.GRANT_WON,
            )
        )
        .values(**values)
    )
    if dialect == "postgresql":
        row = conn.execute(
            statement.returning(
                GRANTS.c.ticket, GRANTS.c.created_at, GRANTS.c.resources
            )
        ).first()
        if row is None:
            return None
        return row[0], row[1], rows.amount(row)
    result = conn.execute(statement)
    if result.rowcount == 0:
        return None
    if result.rowcount != 1:
        raise rows.retry_request()
    if dialect == "mysql":
        ticket = sa_compat.lastrowid(result)
        if resources is not None:
            created_at = sa_compat.scalar_subquery(
                sa_compat.select(GRANTS.c.created_at).where(
                    sa.and_(
                        GRANTS.c.host_id == host_id, GRANTS.c.ticket == ticket
                    )
                )
            )
            return ticket, created_at, resources
        found = conn.execute(
            sa_compat.select(GRANTS.c.created_at, GRANTS.c.resources).where(
                sa.and_(GRANTS.c.host_id == host_id, GRANTS.c.ticket == ticket)
            )
        ).first()
        return ticket, found.created_at, rows.amount(found)
    found = conn.execute(
        sa_compat.select(
            GRANTS.c.ticket, GRANTS.c.created_at, GRANTS.c.resources
        )
        .where(
            sa.and_(
                GRANTS.c.host_id == host_id,
                GRANTS.c.instance_uuid == instance_uuid,
                GRANTS.c.state == decision.GRANT_CONSUMED,
            )
        )
        .order_by(GRANTS.c.ticket.desc())
        .limit(1)
    ).first()
    return found.ticket, found.created_at, rows.amount(found)


NO_GRANT = object()
"""``_claim_in_one``'s answer when the instance has no live grant of its
own on the node."""


# NOTE: data-modifying CTEs share one snapshot, taken as the statement
# begins: ``target`` sees the grant it picks as live (hence ``o.id <>
# g.id``), and each later CTE writes only rows an earlier one handed on.
# The row locks follow those rows: the grant's (``consumed``), then the
# node's (``node`` joins ``consumed``), then its inventory rows
# (``inventory`` joins ``node``) and the claim's ``INSERT``: the order of
# the statements it replaces.  Every write is gated on ``target.common``.
_CLAIM_BY_OWN_GRANT = """
WITH target AS (
    SELECT g.id, NOT EXISTS (
               SELECT 1 FROM gs_grants AS o
                WHERE o.instance_uuid = :instance_uuid
                  AND o.state = :won AND o.id <> g.id)
           AND NOT EXISTS (
               SELECT 1
                 FROM json_object_keys(CAST(g.resources AS JSON)) AS k (name)
                WHERE NOT EXISTS (
                      SELECT 1 FROM gs_inventories AS i
                       WHERE i.host_id = :host_id
                         AND i.resource_class = k.name)) AS common
      FROM gs_grants AS g
     WHERE g.host_id = :host_id AND g.instance_uuid = :instance_uuid
       AND g.state = :won{same_amount}
     ORDER BY g.ticket
     LIMIT 1
), consumed AS (
    UPDATE gs_grants AS g SET state = :consumed, consumed_at = {now}
      FROM target
     WHERE target.common AND g.id = target.id AND g.state = :won
    RETURNING g.ticket, g.created_at, g.resources
), node AS (
    UPDATE gs_hosts AS h
       SET updated_at = {now},
           last_grant_ticket = CASE
               WHEN h.last_grant_ticket < consumed.ticket THEN consumed.ticket
               ELSE h.last_grant_ticket END,
           last_grant_at = CASE
               WHEN h.last_grant_ticket <= consumed.ticket
               THEN consumed.created_at
               ELSE h.last_grant_at END
      FROM consumed
     WHERE h.id = :host_id
    RETURNING h.id
), inventory AS (
    UPDATE gs_inventories AS i
       SET used = i.used + CAST(a.value AS BIGINT),
           granted = i.granted - CAST(a.value AS BIGINT)
      FROM node, consumed,
           json_each_text(CAST(consumed.resources AS JSON)) AS a
     WHERE i.host_id = node.id AND i.resource_class = a.key
    RETURNING i.resource_class
), claim AS (
    INSERT INTO gs_claims
           (instance_uuid, host_id, grant_ticket, created_at, resources)
    SELECT :instance_uuid, node.id, consumed.ticket, {now},
           consumed.resources
      FROM node, consumed
    RETURNING id
)
SELECT target.common, consumed.ticket, consumed.resources,
       (SELECT count(*) FROM node) AS nodes,
       (SELECT array_agg(resource_class) FROM inventory) AS moved,
       (SELECT count(*) FROM claim) AS claims
  FROM target LEFT JOIN consumed ON TRUE
"""


def _claim_in_one(conn, db, host_id, build):
    """PostgreSQL's claim by the instance's own grant, in one statement
    (``_CLAIM_BY_OWN_GRANT``) when it is the common one: the instance's
    oldest live grant on the node is its only live grant, and the node's
    books have a row for every class of its amount.  :returns:
    ``(ticket, amount)`` once written; ``NO_GRANT`` when the instance has
    no such grant there; None, nothing written, in the other cases (the
    statements of ``_by_own_grant`` follow).

    The statement's snapshot is older than the node's lock it waits for:
    an inventory row written again meanwhile (a report rewrites the
    books) is not among the rows it moves, so the classes it did not
    move are moved after it, under that lock.
    """
    now = str(
        db.now().compile(
            dialect=conn.dialect, compile_kwargs={"literal_binds": True}
        )
    )
    params = {
        "instance_uuid": build.instance_uuid,
        "host_id": host_id,
        "won": decision.GRANT_WON,
        "consumed": decision.GRANT_CONSUMED,
    }
    same_amount = ""
    if build.resources is not None:
        same_amount = " AND g.resources = :resources"
        params["resources"] = rows.encode(build.resources)
    statement = sa.text(
        _CLAIM_BY_OWN_GRANT.format(now=now, same_amount=same_amount)
    )
    row = conn.execute(statement, params).first()
    if row is None:
        return NO_GRANT
    if row.ticket is None:
        return None
    if row.nodes != 1 or row.claims != 1:
        raise rows.retry_request()
    amount = rows.amount(row)
    moved = set(row.moved or ())
    rest = amount.map(lambda name, value: 0 if name in moved else value)
    rows.move(conn, host_id, used=rest, granted=-rest)
    return row.ticket, amount


def _by_own_grant(conn, db, host_id, build, before_commit):
    """The common claim, for a node whose id is known: consume the
    instance's grant (of ``build.resources``, or of any amount when the
    claim trusts its grant; of ``build.granted`` where the claiming
    process took it, whose amount then needs no reading back), move it
    into usage, write the claim; None, nothing written, when the instance
    has no such grant there (the general claim then finds a grant of
    another amount and trusts it).

    On PostgreSQL that is one statement when the instance has no other
    live grant and the node's books have every class of the amount
    (``_claim_in_one``); otherwise, and on the other backends, the grant
    is consumed first, then the node's row moves in the same ``UPDATE``
    that checks the instance has no other live grant; when it has (a
    reschedule's, a retried request's), the row is locked again without
    that condition and the others are withdrawn with the claim.
    """
    instance_uuid = build.instance_uuid
    if db.dialect_name == "postgresql":
        claimed = _claim_in_one(conn, db, host_id, build)
        if claimed is NO_GRANT:
            return None
        if claimed is not None:
            ticket, amount = claimed
            if before_commit is not None:
                before_commit()
            return storage.ClaimOutcome(
                amount, ticket, storage.CLAIM_BY_GRANT, host_id=host_id
            )
    consumed = _consume_own_grant(
        conn,
        db,
        host_id,
        instance_uuid,
        build.resources if build.resources is not None else build.granted,
    )
    if consumed is None:
        return None
    ticket, created_at, amount = consumed
    node = HOSTS.update().values(
        updated_at=db.now(), **_advance_mark(ticket, created_at)
    )
    moved = conn.execute(
        node.where(
            sa.and_(
                HOSTS.c.id == host_id,
                ~sa.exists().where(_others_live(instance_uuid)),
            )
        )
    )
    others = moved.rowcount != 1
    if others:
        locked = conn.execute(node.where(HOSTS.c.id == host_id))
        if locked.rowcount != 1:
            raise rows.retry_request()
    rows.move(conn, host_id, used=amount, granted=-amount)
    if others:
        grants.withdraw_live(conn, db, instance_uuid)
    return _write_claim(
        conn,
        db,
        host_id,
        instance_uuid,
        amount,
        ticket,
        storage.CLAIM_BY_GRANT,
        before_commit,
    )


def _insert_claim(conn, db, host_id, instance_uuid, amount, ticket):
    conn.execute(
        CLAIMS.insert().values(
            instance_uuid=instance_uuid,
            host_id=host_id,
            grant_ticket=ticket,
            created_at=db.now(),
            resources=rows.encode(amount),
        )
    )


def _write_claim(
    conn, db, host_id, instance_uuid, amount, ticket, how, before_commit
):
    _insert_claim(conn, db, host_id, instance_uuid, amount, ticket)
    if before_commit is not None:
        before_commit()
    return storage.ClaimOutcome(amount, ticket, how, host_id=host_id)


def _claim_row(conn, instance_uuid, host, node):
    return conn.execute(
        sa_compat.select(CLAIMS)
        .select_from(CLAIMS.join(HOSTS, HOSTS.c.id == CLAIMS.c.host_id))
        .where(
            sa.and_(
                CLAIMS.c.instance_uuid == instance_uuid,
                HOSTS.c.host == host,
                HOSTS.c.node == node,
            )
        )
    ).first()


@db_api.reader
def existing(db, conn, instance_uuid, host, node):
    """The instance's claim on the node as a ``ClaimOutcome``, or None."""
    return _existing(conn, instance_uuid, host, node)


def _existing(conn, instance_uuid, host, node):
    row = _claim_row(conn, instance_uuid, host, node)
    if row is None:
        return None
    return storage.ClaimOutcome(
        rows.amount(row),
        row.grant_ticket,
        storage.CLAIM_EXISTING,
        host_id=row.host_id,
    )


@db_api.reader
def claimed_on(db, conn, instance_uuids):
    """``{instance uuid: [(host, node), ...]}`` of the claims of
    ``instance_uuids`` on existing nodes, in one statement."""
    found = {}
    if not instance_uuids:
        return found
    query = (
        sa_compat.select(CLAIMS.c.instance_uuid, HOSTS.c.host, HOSTS.c.node)
        .select_from(CLAIMS.join(HOSTS, HOSTS.c.id == CLAIMS.c.host_id))
        .where(CLAIMS.c.instance_uuid.in_(sorted(set(instance_uuids))))
        .order_by(CLAIMS.c.instance_uuid, HOSTS.c.host, HOSTS.c.node)
    )
    for row in conn.execute(query):
        found.setdefault(row.instance_uuid, []).append((row.host, row.node))
    return found


@db_api.writer
def claim(db, conn, build, host_id=None, before_commit=None):
    """Count an instance in its node's usage, consuming its grant.

    Where the node's id is known (``host_id``), the instance's own grant
    is consumed first (``_by_own_grant``); that is the whole claim in the
    common case.  Otherwise, or when the instance has no such grant
    there, the general claim follows in the same transaction.  Without a
    grant and without ``build.resources`` the amount is
    ``build.resources_of()``, asked there (unless the instance is claimed
    already) before any row is locked: the statements before it only read
    or matched nothing, which leaves no lock under MySQL's ``READ
    COMMITTED`` or PostgreSQL; SQLite's writer holds its write lock, and
    a read of the books from inside (a ``DEFERRED`` reader) does not wait
    for it.  A live
    grant is consumed whether or not it has expired (until the reaper
    deletes it, its amount is still in the node's ``granted_*``, so moving
    it into usage is exact); a grant whose amount differs from
    ``build.resources`` (the build asks for something else) is replaced:
    the claim re-checks with ``resources`` in place of the grant's amount.

    :raises UnknownHost: no row for ``host``/``node``.
    :raises ClaimRejected: no grant and the instance does not fit (or no
        grant and no resources to re-check with).
    :raises DBDuplicateEntry: the instance is claimed there already (the
        caller answers with ``existing``).
    """
    if host_id is not None:
        outcome = _by_own_grant(conn, db, host_id, build, before_commit)
        if outcome is not None:
            return outcome
    instance_uuid, host, node = build.instance_uuid, build.host, build.node
    resources, request_id = build.resources, build.request_id
    host_id, grant, claimed = _find_grant(
        conn, instance_uuid, host, node, resources, request_id
    )
    if grant is None and resources is None and build.resources_of is not None:
        # NOTE: a repeat (every scheduler follows the compute's instance
        # info): answered here, nothing written or locked so far.
        if claimed is not None:
            return claimed
        resources = build.resources_of()
    held = NOTHING if grant is None else rows.amount(grant, "grant_resources")
    amount = resources if resources is not None else held
    if grant is None and resources is None:
        _reject(
            conn,
            instance_uuid,
            host,
            node,
            "there is no grant for it and no resources were given to "
            "re-check capacity with",
        )
    update = HOSTS.update().values(
        updated_at=db.now(),
        **(
            {}
            if grant is None
            else _advance_mark(grant.grant_ticket, grant.grant_created_at)
        ),
    )
    by_grant = grant is not None and amount == held
    locked = conn.execute(update.where(HOSTS.c.id == host_id))
    if locked.rowcount != 1:
        raise exception.UnknownHost(host=host, node=node)
    if by_grant:
        rows.move(conn, host_id, used=amount, granted=-held)
    elif not rows.take(
        conn, db, host_id, amount, minus=held, used=amount, granted=-held
    ):
        # NOTE: the row lock stays until the rollback, as with any claim.
        _reject(
            conn,
            instance_uuid,
            host,
            node,
            "it has no live grant of its size and %s does not fit" % amount,
        )
    if grant is not None:
        consumed = conn.execute(
            GRANTS.update()
            .where(
                sa.and_(
                    GRANTS.c.id == grant.grant_id,
                    GRANTS.c.state == decision.GRANT_WON,
                )
            )
            .values(state=decision.GRANT_CONSUMED, consumed_at=db.now())
        )
        if consumed.rowcount != 1:
            raise rows.retry_request()
    # The instance is built here: its other live grants hold capacity
    # nobody will use, and go in the same transaction.
    grants.withdraw_live(conn, db, instance_uuid)
    ticket = None if grant is None else grant.grant_ticket
    how = storage.CLAIM_BY_GRANT if by_grant else storage.CLAIM_BY_RECHECK
    return _write_claim(
        conn, db, host_id, instance_uuid, amount, ticket, how, before_commit
    )


def _reject(conn, instance_uuid, host, node, reason):
    """Raise ``ClaimRejected``, unless the instance is claimed already."""
    if _existing(conn, instance_uuid, host, node) is not None:
        raise AlreadyClaimed()
    raise exception.ClaimRejected(
        instance_uuid=instance_uuid, host=host, node=node, reason=reason
    )


class AlreadyClaimed(Exception):
    """The claim is a repeat; the caller reads the first one."""


@db_api.writer
def release(db, conn, instance_uuid, host, node):
    """Remove an instance from its node's usage; False if not claimed."""
    row = _claim_row(conn, instance_uuid, host, node)
    if row is None:
        return False
    conn.execute(
        HOSTS.update()
        .where(HOSTS.c.id == row.host_id)
        .values(updated_at=db.now())
    )
    rows.move(conn, row.host_id, used=-rows.amount(row))
    if (
        conn.execute(CLAIMS.delete().where(CLAIMS.c.id == row.id)).rowcount
        != 1
    ):
        raise rows.retry_request()
    return True


@db_api.reader
def listed(db, conn, host=None):
    """Every claim, as ``ClaimRow``s ordered by host, node and instance."""
    query = sa_compat.select(
        CLAIMS.c.instance_uuid,
        HOSTS.c.host,
        HOSTS.c.node,
        CLAIMS.c.grant_ticket,
        CLAIMS.c.created_at,
        CLAIMS.c.resources,
    ).select_from(CLAIMS.join(HOSTS, HOSTS.c.id == CLAIMS.c.host_id))
    if host is not None:
        query = query.where(HOSTS.c.host == host)
    query = query.order_by(HOSTS.c.host, HOSTS.c.node, CLAIMS.c.instance_uuid)
    return [
        storage.ClaimRow(
            instance_uuid=row.instance_uuid,
            host=row.host,
            node=row.node,
            resources=rows.amount(row),
            grant_ticket=row.grant_ticket,
            created_at=row.created_at,
        )
        for row in conn.execute(query)
    ]


def _lock_node(conn, db, host, node):
    """Lock the node's row (the lock every grant and claim takes) and
    return its id."""
    where = sa.and_(HOSTS.c.host == host, HOSTS.c.node == node)
    locked = conn.execute(
        HOSTS.update().where(where).values(updated_at=db.now())
    )
    if locked.rowcount != 1:
        raise exception.UnknownHost(host=host, node=node)
    return conn.execute(sa_compat.select(HOSTS.c.id).where(where)).scalar()


def _live_grants(conn, host_id, instance_uuids):
    """``{instance uuid: oldest live grant row}`` on the node."""
    if not instance_uuids:
        return {}
    found = conn.execute(
        sa_compat.select(
            GRANTS.c.id,
            GRANTS.c.ticket,
            GRANTS.c.created_at,
            GRANTS.c.instance_uuid,
            GRANTS.c.resources,
        )
        .where(
            sa.and_(
                GRANTS.c.host_id == host_id,
                GRANTS.c.state == decision.GRANT_WON,
                GRANTS.c.instance_uuid.in_(sorted(instance_uuids)),
            )
        )
        .order_by(GRANTS.c.ticket.desc())
    )
    return {row.instance_uuid: row for row in found}


@db_api.writer
def correct(db, conn, host, node, amounts, releases):
    """Make a node's claims what runs there, in one transaction.

    Each instance of ``amounts`` ends claimed on the node at exactly its
    amount: a new claim, or a claim of another amount changed, consumes the
    instance's live grant there (and withdraws its other live grants,
    anywhere).  Each instance of ``releases`` still claimed there is
    released.  The node may end over its limit: what runs is counted, and
    no grant of a class it is over in fits there until that class is back
    within its limit.

    :returns: a ``Correction``.
    :raises UnknownHost: no row for ``host``/``node``.
    """
    host_id = _lock_node(conn, db, host, node)
    claimed = {
        row.instance_uuid: row
        for row in conn.execute(
            sa_compat.select(
                CLAIMS.c.id, CLAIMS.c.instance_uuid, CLAIMS.c.resources
            ).where(CLAIMS.c.host_id == host_id)
        )
    }
    new = sorted(set(amounts) - set(claimed))
    resized = sorted(
        uuid
        for uuid in set(amounts) & set(claimed)
        if rows.amount(claimed[uuid]) != amounts[uuid]
    )
    released = sorted(set(releases) & set(claimed) - set(amounts))
    # NOTE: a resized instance (a resize to the same host) has a grant for
    # its new size too.
    grant_of = _live_grants(conn, host_id, new + resized)
    used = NOTHING
    granted = NOTHING
    mark = None
    for grant in grant_of.values():
        granted += rows.amount(grant)
        if mark is None or grant.ticket > mark.ticket:
            mark = grant
    for uuid in new:
        used += amounts[uuid]
        grant = grant_of.get(uuid)
        ticket = None if grant is None else grant.ticket
        _insert_claim(conn, db, host_id, uuid, amounts[uuid], ticket)
    for uuid in resized:
        used += amounts[uuid] - rows.amount(claimed[uuid])
        conn.execute(
            CLAIMS.update()
            .where(CLAIMS.c.id == claimed[uuid].id)
            .values(resources=rows.encode(amounts[uuid]))
        )
    for uuid in released:
        used -= rows.amount(claimed[uuid])
    if released:
        conn.execute(
            CLAIMS.delete().where(
                CLAIMS.c.id.in_([claimed[u].id for u in released])
            )
        )
    if grant_of:
        conn.execute(
            GRANTS.update()
            .where(GRANTS.c.id.in_([g.id for g in grant_of.values()]))
            .values(state=decision.GRANT_CONSUMED, consumed_at=db.now())
        )
    if mark is not None:
        conn.execute(
            HOSTS.update()
            .where(HOSTS.c.id == host_id)
            .values(**_advance_mark(mark.ticket, mark.created_at))
        )
    if new or resized or released:
        rows.move(conn, host_id, used=used, granted=-granted)
    for uuid in new + resized:
        grants.withdraw_live(conn, db, uuid)
    return storage.Correction(
        claimed=tuple(new), resized=tuple(resized), released=tuple(released)
    )
