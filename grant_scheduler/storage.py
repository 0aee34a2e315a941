"""The data-access interface the protocol is written against.

``scheduler``, ``compute``, ``reaper`` and ``checker`` decide; they read and
write only through a ``Store``: this abstract class, implemented over SQL
by ``grant_scheduler.db.store.Store`` (one module of SQL per table under
``grant_scheduler/db/``) and in memory by the tests' ``MemoryStore``
(``tests/memory_store.py``); a conformance test runs the same scenarios
against both and compares what they do.  The types the methods return are
defined here too, so neither side depends on the other.

A node *fits* an amount ``R`` when ``used + granted + R <= limit`` and
``R <= total`` in every dimension (``HostState.fits``); ``grant`` and a
``claim`` without a grant of its own apply exactly this rule.

Every method is one transaction (retried by the implementation on deadlock
or a lost connection) and raises the project's exceptions for what a caller
can act on; any other database error propagates as oslo.db raised it, to
be translated once at the API edge.
"""

import abc
import dataclasses
import datetime

from grant_scheduler.resources import Resources


@dataclasses.dataclass(frozen=True)
class Ask:
    """What a grant is for, as its row records it."""

    resources: Resources
    scheduler: str
    instance_uuid: str
    request_id: str
    ttl: int
    """Seconds until the grant expires, on the database's clock."""


@dataclasses.dataclass(frozen=True)
class Known:
    """The node rows a reader holds already, so a read can leave out the
    ones that have not changed."""

    stamps: dict
    """``{host id: stamp}``: the change time of each row as it was read."""
    newest: datetime.datetime
    """The newest of ``stamps``: a row stamped after it is new."""


@dataclasses.dataclass(frozen=True)
class Build:
    """One instance arriving on a compute node to be claimed."""

    instance_uuid: str
    host: str
    node: str
    resources: Resources = None
    """Its ``Resources``, or None to trust its grant's amount."""
    request_id: str = None
    """Its request: a grant written without an instance uuid is taken only
    within the same request."""
    resources_of: object = None
    """With ``resources`` None: ``f()`` giving its ``Resources``, asked
    only when it holds no grant on the node (a Nova compute's claim, whose
    amount costs a query of Nova's records), and at most once per claim
    (``asked_once``)."""
    granted: Resources = None
    """With ``resources`` None: the amount the claiming process granted
    the instance, when it did.  A grant of exactly that amount is consumed
    without its amount being read back (a statement fewer on MySQL); a
    grant of another amount is found and trusted as without it."""


def asked_once(f):
    """``f`` (or None), called at most once: later calls answer the
    first call's result (a claim's transaction may be retried)."""
    if f is None:
        return None
    found = []

    def once():
        if not found:
            found.append(f())
        return found[0]

    return once


@dataclasses.dataclass(frozen=True)
class Taken:
    """What ``Store.grant`` did."""

    won: bool
    host_id: int = None
    """The node the grant went to."""
    grant_id: int = None
    ticket: int = None
    states: dict = None
    """When lost: ``{host id: HostState}`` of every candidate as the write
    found it, for the scheduler's view (None for a node that is gone)."""


@dataclasses.dataclass(frozen=True)
class ClaimOutcome:
    """What a claim did: ``how`` is ``grant``, ``recheck`` or ``existing``."""

    resources: Resources
    grant_ticket: int
    how: str
    host_id: int = None


@dataclasses.dataclass(frozen=True)
class ClaimRow:
    """One claim, for people and for reconciling with what runs."""

    instance_uuid: str
    host: str
    node: str
    resources: Resources
    grant_ticket: int
    created_at: datetime.datetime


@dataclasses.dataclass(frozen=True)
class Correction:
    """What ``Store.correct_claims`` changed: instance uuids, sorted."""

    claimed: tuple = ()
    resized: tuple = ()
    released: tuple = ()


CLAIM_BY_GRANT = "grant"
CLAIM_BY_RECHECK = "recheck"
CLAIM_EXISTING = "existing"


@dataclasses.dataclass(frozen=True)
class HostReport:
    """A node for people and for the checker, read in one snapshot."""

    state: object
    claimed: Resources
    """The sum of the node's claims."""
    external: Resources
    """Usage no claim accounts for (a resync, Nova's existing instances)."""
    live_grants: Resources
    """The sum of the node's live grant rows; ``state.granted`` must equal
    it."""
    last_grant_ticket: int
    last_grant_at: datetime.datetime


@dataclasses.dataclass(frozen=True)
class GrantRow:
    """One grant row, for people."""

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
    expires_at: datetime.datetime


# Why the reaper deletes a row, in the order it looks for them.
SUPERSEDED = "superseded"
EXPIRED = "expired"
ORPHANED = "orphaned"
ORPHANED_CLAIMS = "orphaned_claims"
REAP_REASONS = (SUPERSEDED, EXPIRED, ORPHANED, ORPHANED_CLAIMS)


class Store(abc.ABC):
    """What the protocol needs from storage."""

    @abc.abstractmethod
    def report_host(self, host, node, capacity, used=None, node_uuid=None):
        """Create or update a node's capacity; with ``used``, resync usage.

        A new node starts with ``used`` (or nothing) as its usage and as
        its usage no claim accounts for, no grants and ticket 0.  An
        existing node gets the new capacity and limit (and ``node_uuid``
        when given); with ``used``, its usage and its unclaimed usage
        become ``used`` and its claims are deleted.  Live grants stay.
        :returns: the node's id (the same id for every report of a node).
        """

    @abc.abstractmethod
    def register_host(self, host, node, capacity, used=None, node_uuid=None):
        """Create a node unless it exists, as ``report_host`` creates one.

        :returns: its new id, or None when it existed (nothing is changed).
        """

    @abc.abstractmethod
    def delete_host(self, host, node):
        """Delete a node with its grants and claims, in one transaction.

        A node reported again later gets a new id.
        :returns: False when there was no such node.
        """

    @abc.abstractmethod
    def read_hosts(self, since=None, known=None):
        """Nodes whose row changed at or after ``since`` (all when None).

        Every write to a node's row (a report, a grant, a withdrawal, a
        claim, a release, a correction, an expiry) stamps it.
        :param known: a ``Known``: of the rows stamped at or after
            ``since``, those stamped after ``known.newest`` or whose stamp
            differs from ``known.stamps`` are returned; the others are
            left out (only their stamps are read).  Ignored when ``since``
            is None.
        :returns: ``[(HostState, stamp)]`` in no particular order,
            ``stamp`` the row's change time on the database's clock.
        """

    @abc.abstractmethod
    def host_state(self, host_id):
        """:returns: one node's ``HostState``, or None when it is gone."""

    @abc.abstractmethod
    def granted_by_node(self):
        """:returns: ``{(host, node): Resources}`` of live grants, for the
        nodes that hold any."""

    @abc.abstractmethod
    def grant(self, host_ids, ask, taken, before_commit=None):
        """Grant ``ask`` on the first of ``host_ids`` (the candidates, best
        first) where it fits now.

        The node's ``granted`` grows by ``ask.resources``, its ticket by
        one, and a live grant row with that ticket is written, expiring
        ``ask.ttl`` seconds from now.  When an earlier call with the same
        ``taken`` list committed a grant that is still live, was written
        for ``ask`` (its scheduler, request and instance) and is on one of
        ``host_ids``, that grant is returned and nothing is written.

        :param ask: an ``Ask``.
        :param taken: a list the store appends ``(host id, ticket)`` to
            before each commit; kept by the caller across failures.
        :param before_commit: ``f(grant_id=, ticket=)``, called with the
            grant written and not committed (an injection point; what it
            raises rolls the grant back).
        :returns: a ``Taken``: when won, the node, grant id and ticket;
            when no candidate fits, ``states`` of every candidate.
        """

    @abc.abstractmethod
    def withdraw(self, host_id, ticket, ask):
        """Delete a live grant ``ask`` wrote, which nobody will build, and
        lower its node's ``granted`` by ``ask.resources``.

        Only a grant written for ``ask`` (its scheduler, request and
        instance) goes: a ticket alone may by now be another grant's.
        :returns: False when it was not there (never committed, gone,
            consumed, or its node is gone).
        """

    @abc.abstractmethod
    def withdraw_instance(self, instance_uuid, scheduler=None):
        """Delete every live grant of one instance (scheduled again) on a
        node that still exists, lowering each node's ``granted``; only
        those ``scheduler`` wrote, when it is given.

        :returns: how many there were.
        """

    @abc.abstractmethod
    def claim(self, build, before_commit=None):
        """Count an instance in its node's usage, consuming its grant.

        The grant consumed is the instance's oldest live grant on the node
        or, when it has none and ``build`` names a request and resources,
        the oldest live grant of that request written without an instance
        uuid for exactly those resources.  When its amount is the claimed
        amount it moves from ``granted`` to ``used`` whatever the limit
        (``how`` is ``grant``); otherwise (no grant, or another amount)
        the claim takes its place only if the node fits the claimed amount
        with the grant's own amount taken out (``how`` is ``recheck``).
        Without a grant and without ``build.resources``, the amount is
        ``build.resources_of()``, asked then only (not for a repeated
        claim), at most once, in the claim's own transaction before it
        locks anything (it may read the store).
        The node's last-grant mark moves forward to a consumed grant, and
        every other live grant of the instance, on any node, is withdrawn.

        :param build: a ``Build``.
        :param before_commit: ``f()``, called with the claim written and
            not committed (an injection point).
        :returns: a ``ClaimOutcome`` (``grant_ticket`` None without a
            grant); a repeated claim of the instance on the node returns
            the first, with ``how`` ``existing``, and changes nothing.
        :raises UnknownHost: the node never reported.
        :raises ClaimRejected: no grant of its own and the instance does
            not fit (or no grant and no resources to re-check with).
        """

    @abc.abstractmethod
    def release(self, instance_uuid, host, node):
        """Remove an instance's claim and its amount from its node's usage.

        :returns: False when it was not claimed there (nothing changes).
        """

    @abc.abstractmethod
    def claim_rows(self, host=None):
        """:returns: every ``ClaimRow`` of an existing node (on ``host``
        only, when given), ordered by host, node and instance."""

    @abc.abstractmethod
    def claimed_on(self, instance_uuids):
        """:returns: ``{instance uuid: [(host, node), ...]}``, the existing
        nodes each of ``instance_uuids`` is claimed on, in order (an
        instance claimed nowhere is left out); one read."""

    @abc.abstractmethod
    def correct_claims(self, host, node, amounts, releases):
        """Make a node's claims what runs there, whatever its limit.

        :param amounts: ``{instance uuid: Resources}`` to be claimed on the
            node at exactly these amounts (their oldest live grants there
            are consumed, their other live grants withdrawn, anywhere).
        :param releases: instance uuids to release there (unless also in
            ``amounts``).
        :returns: a ``Correction``.
        :raises UnknownHost: the node never reported.
        """

    @abc.abstractmethod
    def reap(self, reason, limit):
        """Delete up to ``limit`` rows for one of ``REAP_REASONS``, oldest
        id first: consumed grants (``SUPERSEDED``); live grants past
        their expiry, lowering their node's ``granted`` (``EXPIRED``);
        grants whose node is gone (``ORPHANED``); claims whose node is
        gone (``ORPHANED_CLAIMS``).

        :returns: ``(found, deleted)``.
        """

    @abc.abstractmethod
    def host_reports(self):
        """:returns: a ``HostReport`` per node, ordered by host and node."""

    @abc.abstractmethod
    def orphan_claims(self):
        """:returns: ``[(instance uuid, host id)]`` of claims whose node is
        gone, in no particular order."""

    @abc.abstractmethod
    def grant_rows(self, host=None, live=False):
        """:returns: every ``GrantRow`` (on ``host`` only, when given; the
        live ones only, which hold room, when ``live``; a grant whose node
        is gone has ``host`` and ``node`` None), ordered by node id and
        ticket."""
