"""The data-access interface the protocol is written against.

``scheduler``, ``compute``, ``reaper`` and ``checker`` decide; they read and
write only through a ``Store``: this ``typing.Protocol``, implemented over
SQL by ``grant_scheduler.db.store.Store`` (one module of SQL per table
under ``grant_scheduler/db/``) and in memory by the unit tests' fake, which
a test holds to this interface.  The types the methods return are defined
here too, so neither side depends on the other.

Every method is one transaction (retried by the implementation on deadlock
or a lost connection) and raises the project's exceptions for what a caller
can act on; any other database error propagates as oslo.db raised it, to
be translated once at the API edge.
"""

import dataclasses
import datetime
import typing

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


@typing.runtime_checkable
class Store(typing.Protocol):
    """What the protocol needs from storage."""

    def report_host(self, host, node, capacity, used=None, node_uuid=None):
        """Create or update a node's capacity; with ``used``, resync usage.

        ``used`` replaces the node's claims with usage no claim accounts
        for; live grants stay.
        :returns: the node's id.
        """

    def register_host(self, host, node, capacity, used=None, node_uuid=None):
        """Create a node unless it exists.

        :returns: its id, or None when it existed (nothing is changed).
        """

    def delete_host(self, host, node):
        """Delete a node with its grants and claims.

        :returns: False when there was no such node.
        """

    def read_hosts(self, since=None, known=None):
        """Nodes whose row changed at or after ``since`` (all when None).

        :param known: a ``Known``: rows still stamped as it holds them are
            left out (only their stamps are read).
        :returns: ``[(HostState, stamp)]``, ``stamp`` the row's change
            time on the database's clock.
        """

    def host_state(self, host_id):
        """:returns: one node's ``HostState``, or None when it is gone."""

    def granted_by_node(self):
        """:returns: ``{(host, node): Resources}`` of live grants, for the
        nodes that hold any."""

    def grant(self, host_ids, ask, taken, before_commit=None):
        """Grant ``ask`` on the first of ``host_ids`` (the candidates, best
        first) where it fits now.

        :param ask: an ``Ask``.
        :param taken: a list the store appends ``(host id, ticket)`` to
            before each commit; kept by the caller across failures.
        :param before_commit: ``f(grant_id=, ticket=)``, called with the
            grant written and not committed (an injection point).
        :returns: a ``Taken``.
        """

    def withdraw(self, host_id, ticket, ask):
        """Delete a live grant ``ask`` wrote, which nobody will build.

        Only a grant written for ``ask`` (its scheduler, request and
        instance) goes: a ticket alone may by now be another grant's.
        :returns: False when it was not there (never committed, or gone).
        """

    def withdraw_instance(self, instance_uuid):
        """Delete every live grant of one instance (scheduled again).

        :returns: how many there were.
        """

    def claim(self, build, before_commit=None):
        """Count an instance in its node's usage, consuming its grant.

        :param build: a ``Build``.
        :param before_commit: ``f()``, called with the claim written and
            not committed (an injection point).
        :returns: a ``ClaimOutcome``; a repeated claim returns the first.
        :raises UnknownHost: the node never reported.
        :raises ClaimRejected: no grant, and the instance does not fit.
        """

    def release(self, instance_uuid, host, node):
        """Remove an instance from its node's usage.

        :returns: False when it was not claimed there.
        """

    def claim_rows(self, host=None):
        """:returns: every ``ClaimRow`` (on ``host`` only, when given),
        ordered by host, node and instance."""

    def correct_claims(self, host, node, amounts, releases):
        """Make a node's claims what runs there, whatever its limit.

        :param amounts: ``{instance uuid: Resources}`` to be claimed on the
            node at exactly these amounts (their live grants there are
            consumed, their other live grants withdrawn).
        :param releases: instance uuids to release there.
        :returns: a ``Correction``.
        :raises UnknownHost: the node never reported.
        """

    def reap(self, reason, limit):
        """Delete up to ``limit`` rows for one of ``REAP_REASONS``.

        :returns: ``(found, deleted)``.
        """

    def host_reports(self):
        """:returns: a ``HostReport`` per node, ordered by host and node."""

    def orphan_claims(self):
        """:returns: ``[(instance uuid, host id)]`` of claims whose node is
        gone."""

    def grant_rows(self, host=None):
        """:returns: every ``GrantRow`` (on ``host`` only, when given)."""
