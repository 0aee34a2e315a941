"""SQL of ``gs_grants``: take a grant, withdraw it, reap, list.

A function decorated ``@db_api.writer`` or ``@db_api.reader`` is one
transaction of its own, retried: it is defined as ``fn(db, conn, ...)`` and
called as ``fn(db, ...)``; the others are plain ``(conn, ...)`` helpers
inside their caller's transaction.  Every transaction locks in one
order: the node's ``gs_hosts`` row first, then grant rows.  The node's
inventory rows carry the sum of its live grants (``granted``, by class), so
every statement that makes a grant live or not live moves that sum in the
same transaction, under the node's lock.
"""

import sqlalchemy as sa

from grant_scheduler import decision
from grant_scheduler import storage
from grant_scheduler.db import api as db_api
from grant_scheduler.db import hosts
from grant_scheduler.db import models
from grant_scheduler.db import rows
from grant_scheduler.db import sa_compat
from grant_scheduler.resources import NOTHING

HOSTS = models.hosts
GRANTS = models.grants
CLAIMS = models.claims


def _next_ticket(conn, db, host_id):
    """Lock the node's row and count one more ticket on it: the new
    ticket, or None when the node is gone."""
    dialect = db.dialect_name
    next_ticket = HOSTS.c.ticket + 1
    if dialect == "mysql":
        # NOTE: LAST_INSERT_ID(expr) hands the value back in the statement's
        # OK packet, so MySQL needs no second statement to read it.
        next_ticket = sa.func.last_insert_id(next_ticket)
    statement = (
        HOSTS.update()
        .where(HOSTS.c.id == host_id)
        .values(ticket=next_ticket, updated_at=db.now())
    )
    if dialect == "postgresql":
        row = conn.execute(statement.returning(HOSTS.c.ticket)).first()
        return None if row is None else row[0]
    result = conn.execute(statement)
    if result.rowcount != 1:
        return None
    if dialect == "mysql":
        return sa_compat.lastrowid(result)
    return conn.execute(
        sa_compat.select(HOSTS.c.ticket).where(HOSTS.c.id == host_id)
    ).scalar()


def _issue_ticket(conn, db, host_id, amount):
    """Add ``amount`` to the node's live grants if it fits; its ticket.

    The ticket's ``UPDATE`` takes the node's row lock, so every earlier
    grant on the node has committed or rolled back when the next
    statement, one conditional ``UPDATE`` of the node's inventory rows,
    decides: its condition is ``HostState.fits``, read from what committed
    before it began (on every backend), and it moves every class of the
    grant or none (H1, H2).  Ticket order is commit order.  A grant that
    does not fit gives its ticket back.

    :returns: the new ticket, or None when the grant does not fit (or the
        node is gone); then nothing was written.
    """
    ticket = _next_ticket(conn, db, host_id)
    if ticket is None:
        return None
    if rows.take(conn, db, host_id, amount, granted=amount):
        return ticket
    conn.execute(
        HOSTS.update()
        .where(HOSTS.c.id == host_id)
        .values(ticket=HOSTS.c.ticket - 1)
    )
    return None


def _written_for(ask):
    """The grant rows ``ask`` wrote: a ticket alone does not say it, since
    a try that rolled back leaves its ticket to the next grant."""
    mine = GRANTS.c.instance_uuid == ask.instance_uuid
    if ask.instance_uuid is None:
        mine = GRANTS.c.instance_uuid.is_(None)
    return sa.and_(
        GRANTS.c.scheduler == ask.scheduler,
        GRANTS.c.request_id == ask.request_id,
        mine,
    )


def _committed_earlier(conn, host_ids, ask, taken):
    """A grant an earlier try of this very call committed, if any.

    ``taken`` lists the ``(host id, ticket)`` of every earlier try: when a
    commit's acknowledgement was lost the retry finds its grant here
    instead of writing a second one.
    """
    tried = [pair for pair in taken if pair[0] in host_ids]
    if not tried:
        return None
    return conn.execute(
        sa_compat.select(GRANTS.c.id, GRANTS.c.host_id, GRANTS.c.ticket).where(
            sa.and_(
                sa.or_(
                    *(
                        sa.and_(
                            GRANTS.c.host_id == host_id,
                            GRANTS.c.ticket == ticket,
                        )
                        for host_id, ticket in tried
                    )
                ),
                GRANTS.c.state == decision.GRANT_WON,
                _written_for(ask),
            )
        )
    ).first()


def _fitting(host_ids, amount):
    """The ``gs_hosts`` ids of ``host_ids`` the books say fit ``amount``,
    in the order of ``host_ids``."""
    preference = sa_compat.case(
        *((HOSTS.c.id == host_id, n) for n, host_id in enumerate(host_ids)),
        else_=len(host_ids),
    )
    return (
        sa_compat.select(HOSTS.c.id)
        .where(sa.and_(HOSTS.c.id.in_(host_ids), rows.fits(amount)))
        .order_by(preference)
    )


def _first_free(conn, db, host_ids, amount):
    """The first of ``host_ids`` that seems to fit and no transaction in
    flight holds, locked.

    A locking read that skips rows another transaction has locked: where
    schedulers race for the same nodes, a grant goes to the next candidate
    at once instead of waiting for a node the other grant is taking.  The
    row it returns stays locked until this transaction ends; whether the
    grant fits is decided again under the lock (``_issue_ticket``).  None
    when every candidate is taken or busy.
    """
    query = (
        _fitting(host_ids, amount)
        .limit(1)
        # NOTE: spelt out: SQLAlchemy 1.3 drops SKIP LOCKED for MariaDB.
        .suffix_with("FOR UPDATE SKIP LOCKED")
    )
    return conn.execute(query).scalar()


def _grant_first(conn, db, host_ids, amount):
    """Issue a ticket on the first of ``host_ids`` that fits: ``(host id,
    ticket)``, or None when none does.

    Where the server skips locked rows, candidates no other transaction
    holds are tried first, without waiting.  Then, in order, the others
    (of several, those the books say fit, read without locks, so that a
    node with no room is neither waited for nor held): each is locked,
    then decided.
    """
    refused = set()
    if len(host_ids) > 1 and db.skips_locked_rows:
        while len(refused) < len(host_ids):
            left = [h for h in host_ids if h not in refused]
            free = _first_free(conn, db, left, amount)
            if free is None:
                break
            ticket = _issue_ticket(conn, db, free, amount)
            if ticket is not None:
                return free, ticket
            refused.add(free)
    left = [h for h in host_ids if h not in refused]
    if len(left) > 1:
        left = [row[0] for row in conn.execute(_fitting(left, amount))]
    for host_id in left:
        ticket = _issue_ticket(conn, db, host_id, amount)
        if ticket is not None:
            return host_id, ticket
    return None


@db_api.writer
def take(db, conn, host_ids, ask, taken, before_commit=None):
    """Grant ``ask`` on the first of ``host_ids`` that can take it.

    :param host_ids: candidates, in the scheduler's order of preference.
    :param taken: a list this call appends ``(host id, ticket)`` to before
        it commits, kept by the caller across retries and failures (to
        withdraw an answer that never came, or recognise a landed commit).
    :returns: a ``storage.Taken``; when lost, ``states`` holds each
        candidate as the write found it.
    """
    earlier = _committed_earlier(conn, host_ids, ask, taken)
    if earlier is not None:
        return storage.Taken(
            True,
            host_id=earlier.host_id,
            grant_id=earlier.id,
            ticket=earlier.ticket,
        )
    granted = _grant_first(conn, db, host_ids, ask.resources)
    if granted is None:
        return storage.Taken(
            False, states={h: hosts.one(conn, h) for h in host_ids}
        )
    host_id, ticket = granted
    grant_id = insert(conn, db, host_id, ticket, ask, decision.GRANT_WON)
    taken.append((host_id, ticket))
    if before_commit is not None:
        before_commit(grant_id=grant_id, ticket=ticket)
    return storage.Taken(
        True, host_id=host_id, grant_id=grant_id, ticket=ticket
    )


def insert(conn, db, host_id, ticket, ask, state):
    """Write a grant row; its id."""
    result = conn.execute(
        GRANTS.insert().values(
            host_id=host_id,
            ticket=ticket,
            instance_uuid=ask.instance_uuid,
            request_id=ask.request_id,
            scheduler=ask.scheduler,
            state=state,
            created_at=db.now(),
            expires_at=db.now(ask.ttl),
            resources=rows.encode(ask.resources),
        )
    )
    return result.inserted_primary_key[0]


@db_api.writer
def withdraw(db, conn, host_id, ticket, ask):
    """Delete a live grant ``ask`` wrote that nobody will build; True if
    it was there."""
    return _withdraw(
        conn, db, host_id, ticket, ask.resources, _written_for(ask)
    )


def _withdraw(conn, db, host_id, ticket, amount, mine=None):
    live = sa.and_(
        GRANTS.c.host_id == host_id,
        GRANTS.c.ticket == ticket,
        GRANTS.c.state == decision.GRANT_WON,
        *(() if mine is None else (mine,)),
    )
    locked = conn.execute(
        HOSTS.update()
        .where(
            sa.and_(
                HOSTS.c.id == host_id,
                sa.exists().where(live),
            )
        )
        .values(updated_at=db.now())
    )
    if locked.rowcount != 1:
        return False
    rows.move(conn, host_id, granted=-amount)
    if conn.execute(GRANTS.delete().where(live)).rowcount != 1:
        raise rows.retry_request()
    return True


@db_api.writer
def withdraw_instance(db, conn, instance_uuid, scheduler=None):
    """Withdraw every live grant of one instance (only those ``scheduler``
    wrote, when given); how many there were.

    For a build that is scheduled again (its first destination failed):
    the grant of the earlier answer holds capacity nobody will use.  With
    ``scheduler``: the grants of a scheduler process that has ended.
    """
    return withdraw_live(conn, db, instance_uuid, scheduler)


def withdraw_live(conn, db, instance_uuid, scheduler=None):
    """``withdraw_instance`` inside the caller's transaction (a claim's:
    the instance is built, its other live grants go with it)."""
    wanted = [
        GRANTS.c.instance_uuid == instance_uuid,
        GRANTS.c.state == decision.GRANT_WON,
    ]
    if scheduler is not None:
        wanted.append(GRANTS.c.scheduler == scheduler)
    found = conn.execute(
        sa_compat.select(GRANTS.c.host_id, GRANTS.c.ticket, GRANTS.c.resources)
        .where(sa.and_(*wanted))
        .order_by(GRANTS.c.host_id)
    ).fetchall()
    return sum(
        _withdraw(conn, db, row.host_id, row.ticket, rows.amount(row))
        for row in found
    )


# -- the reaper ------------------------------------------------------------


@db_api.writer
def expire(db, conn, limit):
    """Delete up to ``limit`` live grants past ``expires_at``.

    Node by node, in id order (the lock order), each node's row is locked
    and its live-grant sum lowered before its grants go; a grant consumed
    meanwhile makes the batch start again.  :returns: (found, deleted).
    """
    now = conn.execute(sa_compat.select(db.now())).scalar()
    expired = sa.and_(
        GRANTS.c.state == decision.GRANT_WON, GRANTS.c.expires_at < now
    )
    found = conn.execute(
        sa_compat.select(GRANTS.c.id, GRANTS.c.host_id, GRANTS.c.resources)
        .where(expired)
        .order_by(GRANTS.c.host_id, GRANTS.c.id)
        .limit(limit)
    ).fetchall()
    by_host = {}
    for row in found:
        ids, amount = by_host.get(row.host_id, ([], NOTHING))
        by_host[row.host_id] = (ids + [row.id], amount + rows.amount(row))
    deleted = 0
    for host_id in sorted(by_host):
        ids, amount = by_host[host_id]
        conn.execute(
            HOSTS.update()
            .where(HOSTS.c.id == host_id)
            .values(updated_at=db.now())
        )
        rows.move(conn, host_id, granted=-amount)
        count = conn.execute(
            GRANTS.delete().where(sa.and_(GRANTS.c.id.in_(ids), expired))
        ).rowcount
        if count != len(ids):
            raise rows.retry_request()
        deleted += count
    return len(found), deleted


def _delete_batch(conn, table, condition, limit):
    ids = [
        row[0]
        for row in conn.execute(
            sa_compat.select(table.c.id)
            .where(condition)
            .order_by(table.c.id)
            .limit(limit)
        )
    ]
    if not ids:
        return 0, 0
    deleted = conn.execute(
        table.delete().where(sa.and_(table.c.id.in_(ids), condition))
    ).rowcount
    return len(ids), deleted


def _orphan(table):
    return ~sa.exists().where(HOSTS.c.id == table.c.host_id)


@db_api.writer
def reap_consumed(db, conn, limit):
    """Delete consumed grants: their builds are counted in usage now.

    These are the grants the seed calls superseded (older than the node's
    last-grant mark): a grant below the mark that is *not* consumed may
    belong to a build still in flight and is left alone (H3).
    """
    return _delete_batch(
        conn, GRANTS, GRANTS.c.state == decision.GRANT_CONSUMED, limit
    )


@db_api.writer
def reap_orphaned(db, conn, limit):
    """Delete grants whose node row is gone."""
    return _delete_batch(conn, GRANTS, _orphan(GRANTS), limit)


@db_api.writer
def reap_orphaned_claims(db, conn, limit):
    """Delete claims whose node row is gone."""
    return _delete_batch(conn, CLAIMS, _orphan(CLAIMS), limit)


# -- inspection ------------------------------------------------------------


@db_api.reader
def listed(db, conn, host=None, live=False):
    """Every grant row (optionally on one host, optionally the live ones
    alone), oldest ticket first."""
    query = sa_compat.select(GRANTS, HOSTS.c.host, HOSTS.c.node).select_from(
        GRANTS.outerjoin(HOSTS, HOSTS.c.id == GRANTS.c.host_id)
    )
    if host is not None:
        query = query.where(HOSTS.c.host == host)
    if live:
        query = query.where(GRANTS.c.state == decision.GRANT_WON)
    result = conn.execute(query.order_by(GRANTS.c.host_id, GRANTS.c.ticket))
    return [
        storage.GrantRow(
            id=row.id,
            host=row.host,
            node=row.node,
            ticket=row.ticket,
            state=row.state,
            resources=rows.amount(row),
            instance_uuid=row.instance_uuid,
            request_id=row.request_id,
            scheduler=row.scheduler,
            created_at=row.created_at,
            expires_at=row.expires_at,
        )
        for row in result
    ]
