"""The public Python API of grant_scheduler.

One object, ``GrantScheduler``, serves a scheduler service, a compute agent
and the operator's tools alike.  This module is the one door into the
package: the Nova adapters (``grant_scheduler.nova``), the command line
(``grant_scheduler.cmd``) and the benchmark (``grant_scheduler_bench``)
import nothing else of it but the option definitions
(``grant_scheduler.conf``) and ``grant_scheduler.urls``, and touch no
private name (``tests/unit/test_layering.py`` holds them to it)::

    from grant_scheduler import api

    gs = api.GrantScheduler.from_url("mysql+pymysql://u:p@db/gs")
    capacity = api.Capacity(api.Resources(32, 65536, 1000))
    gs.report_host("cmp1", "cmp1", capacity)
    [selection] = gs.schedule(vcpus=2, memory_mb=4096, disk_gb=40,
                              instance_uuids=[instance_uuid])
    gs.claim(instance_uuid, selection.host, selection.node,
             api.Resources(2, 4096, 40))    # on the compute host
    gs.release(instance_uuid, selection.host, selection.node)
    gs.reap()                               # periodically, anywhere
    gs.check()                              # [] when I1 and I4 hold

Nothing connects to the database until the first call, so the object may be
built before a service forks its workers (H9).  The first call checks
the schema revision and raises ``SchemaNotMigrated`` (or
``SchemaNewerThanCode``) with the command to run.  Every input is checked
before it reaches the database, and every database error leaves as one of
the exceptions below (translated here, once).

Besides the object, the door offers the seams others plug into:

``Ranker`` (with ``View`` and ``Destination``)
    The ranking hook: which of the nodes with room a request prefers.
    ``gs.view(ranker=...)`` gives a request's view ordered by it, to pass
    to ``schedule``; Nova's filters and weighers are one.
``Store`` (with ``SQLStore`` and ``Database``)
    The storage interface the protocol reads and writes through, its SQL
    implementation and the database it runs on; ``GrantScheduler(...,
    store=...)`` puts another implementation behind the object (the
    benchmark's baselines, the tests' in-memory store).
``Request``, ``Selection``, ``Hooks``
    A request built from user input, the answer, and the injection points
    tests pause or kill a process at.
"""

import collections
import functools
import threading

from grant_scheduler import checker
from grant_scheduler import compute
from grant_scheduler import decision
from grant_scheduler import exception
from grant_scheduler import injection
from grant_scheduler import process
from grant_scheduler import reaper
from grant_scheduler import scheduler
from grant_scheduler import storage
from grant_scheduler import validate
from grant_scheduler import view as gs_view
from grant_scheduler.db import api as db_api
from grant_scheduler.db import migration
from grant_scheduler.db import store as gs_store
from grant_scheduler.resources import NOTHING
from grant_scheduler.resources import Capacity
from grant_scheduler.resources import HostState
from grant_scheduler.resources import Inventory
from grant_scheduler.resources import Resources
from grant_scheduler.settings import Settings

__all__ = [
    "Capacity",
    "ClaimRejected",
    "Database",
    "Destination",
    "DatabaseConfigError",
    "DatabaseError",
    "DatabaseUnavailable",
    "GrantScheduler",
    "GrantSchedulerError",
    "Hooks",
    "HostState",
    "InvalidRequest",
    "InvalidResources",
    "InvalidRevision",
    "InvalidSettings",
    "InvariantViolated",
    "Inventory",
    "MigrationLocked",
    "NOTHING",
    "NoValidHost",
    "Ranker",
    "Request",
    "Resources",
    "SQLStore",
    "SchemaInterrupted",
    "SchemaNewerThanCode",
    "SchemaNotMigrated",
    "SchemaRevisions",
    "Selection",
    "Settings",
    "Spread",
    "Store",
    "Taken",
    "UnknownHost",
    "View",
    "schema_head",
    "scheduler_ended",
]

Database = db_api.Database
Hooks = injection.Hooks
Store = storage.Store
SQLStore = gs_store.Store
Request = scheduler.Request
Selection = scheduler.Selection
View = gs_view.View
Ranker = gs_view.Ranker
Destination = gs_view.Destination
GrantSchedulerError = exception.GrantSchedulerError
ClaimRejected = exception.ClaimRejected
DatabaseConfigError = exception.DatabaseConfigError
DatabaseError = exception.DatabaseError
DatabaseUnavailable = exception.DatabaseUnavailable
InvalidRequest = exception.InvalidRequest
InvalidResources = exception.InvalidResources
InvalidSettings = exception.InvalidSettings
InvariantViolated = exception.InvariantViolated
InvalidRevision = exception.InvalidRevision
MigrationLocked = exception.MigrationLocked
SchemaInterrupted = exception.SchemaInterrupted
NoValidHost = exception.NoValidHost
SchemaNewerThanCode = exception.SchemaNewerThanCode
SchemaNotMigrated = exception.SchemaNotMigrated
UnknownHost = exception.UnknownHost
scheduler_ended = process.ended
"""``scheduler_ended(name)``: whether the scheduler process a grant names
(its ``scheduler``) has ended, as far as this host can tell
(``process.ended``)."""

SchemaRevisions = collections.namedtuple(
    "SchemaRevisions", ["current", "head"]
)


# -- for a Store or a ranking of one's own (the benchmark's baselines) ----
#
# ``Taken`` is what ``Store.grant`` returns: a ``Store`` subclass that
# grants by a rule of its own (``GrantScheduler(..., store=)``) builds one.
# ``Spread`` is the default ranking's order among equals and its random
# choice among the best: ``View(states, Spread(random.Random(seed)))``
# ranks reproducibly, and one ``Spread`` kept across requests keeps its
# order, as a scheduler process's does.

Taken = storage.Taken
CLAIM_EXISTING = storage.CLAIM_EXISTING
"""A ``ClaimOutcome``'s ``how`` when the instance was claimed already."""
Spread = decision.Spread


def schema_head():
    """The schema revision this code needs (``alembic upgrade head``'s)."""
    return migration.head_revision()


def _translating(method):
    """Translate database errors into the project's exceptions (once)."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            translated = db_api.translate_any(self.database, exc)
            if translated is None:
                raise
            raise translated from exc

    return call


def _edge(method):
    """Check the schema once, then run ``method``, translating errors."""

    @functools.wraps(method)
    def checked(self, *args, **kwargs):
        self._check_schema_once()
        return method(self, *args, **kwargs)

    return _translating(checked)


def _capacity(capacity):
    if not isinstance(capacity, Capacity):
        raise exception.InvalidResources(
            name="capacity", value=capacity, reason="it must be a Capacity"
        )
    return Capacity.of(
        {
            name: validate.inventory(name, inventory)
            for name, inventory in capacity.inventories.items()
        }
    )


class GrantScheduler:
    """Scheduler, compute claims, reaper and checker over one database."""

    def __init__(
        self,
        database,
        settings=None,
        name=None,
        hooks=None,
        rng=None,
        claim_lock=None,
        store=None,
    ):
        """
        :param database: a ``Database``.
        :param settings: a ``Settings`` (defaults to the option defaults).
        :param name: this scheduler's identity, written into its grants
            (default ``process.name()``: ``host:pid:start:ns``).
        :param hooks: ``Hooks`` for tests; off by default.
        :param rng: a ``random.Random`` for the choice among equals.
        :param claim_lock: ``lock(host, node)`` for the compute side.
        :param store: a ``Store`` over ``database`` to read and write
            through instead of the product's ``SQLStore`` (the benchmark's
            baselines, and tests).
        :raises InvalidRequest: ``name`` is not a valid name.
        """
        name = validate.name("name", name, optional=True)
        if store is not None and not isinstance(store, Store):
            raise exception.InvalidRequest(
                reason="store must be a grant_scheduler.api.Store"
            )
        self.database = database
        self.settings = settings or Settings()
        self.store = store if store is not None else SQLStore(database)
        """The ``Store`` every call reads and writes through."""
        self._schema_checked = False
        self._schema_lock = threading.Lock()
        self._scheduler = scheduler.Scheduler(
            self.store, self.settings, name=name, rng=rng, hooks=hooks
        )
        self._claims = compute.ClaimAgent(
            self.store, hooks=hooks, lock=claim_lock
        )
        self._reaper = reaper.Reaper(self.store, self.settings)

    @classmethod
    def from_url(cls, url, **kwargs):
        return cls(db_api.Database.shared(url), **kwargs)

    @classmethod
    def from_conf(cls, conf, **kwargs):
        """Build from the ``grant_scheduler*`` option groups of ``conf``."""
        return cls(
            db_api.Database.shared_from_conf(conf),
            settings=Settings.from_conf(conf),
            **kwargs,
        )

    def _check_schema_once(self):
        if self._schema_checked:
            return
        with self._schema_lock:
            if not self._schema_checked:
                migration.check_schema(self.database)
                self._schema_checked = True

    @_edge
    def check_schema(self):
        """Raise unless the schema is at this code's head revision."""

    @_edge
    def ping(self):
        """Whether the database answers now: one statement, no retries
        (a probe while it is taken as down).

        :raises DatabaseUnavailable: it does not.
        """
        self.database.ping()

    @_translating
    def schema_revisions(self):
        """The database's schema revision and this code's head, as a
        ``SchemaRevisions`` (``current`` is None on an empty database)."""
        return SchemaRevisions(
            migration.current_revision(self.database),
            migration.head_revision(),
        )

    @_translating
    def upgrade_schema(self, revision="head"):
        """Create or upgrade the schema to ``revision`` (alembic's names:
        ``head``, a revision id or a unique prefix), under a lock that
        serialises concurrent upgrades; what ``grant-scheduler-manage db
        sync`` runs.

        :raises InvalidRevision: ``revision`` is not one of this code's.
        :raises SchemaNewerThanCode: a newer release migrated the database.
        """
        migration.upgrade(self.database, revision)
        self._schema_checked = False

    # -- compute side ----------------------------------------------------

    @_edge
    def report_host(self, host, node, capacity, used=None, node_uuid=None):
        """Create or update a node's capacity; resync usage with ``used``.

        ``used`` is the node's true usage (from the hypervisor): it
        replaces the node's claims, so a later release of an instance
        claimed before it changes nothing.  Taken under the node's claim
        lock, so a report never races this process's claims (H4).
        :returns: the node's id.
        """
        return self._claims.report(
            *self._node(host, node),
            _capacity(capacity),
            used=self._used(used),
            node_uuid=validate.instance_uuid(node_uuid, optional=True),
        )

    @_edge
    def register_host(self, host, node, capacity, used=None, node_uuid=None):
        """Create a node unless it exists (its usage is then left alone).

        :returns: the new node's id, or None when it existed.
        """
        return self.store.register_host(
            *self._node(host, node),
            _capacity(capacity),
            used=self._used(used),
            node_uuid=validate.instance_uuid(node_uuid, optional=True),
        )

    @_edge
    def delete_host(self, host, node):
        """Forget a node, its grants and its claims; False if unknown."""
        return self.store.delete_host(*self._node(host, node))

    @_edge
    def claim(
        self, instance_uuid, host, node, resources=None, request_id=None
    ):
        """Count an instance in its node's usage, consuming its grant.

        :param resources: the instance's ``Resources``; needed to re-check
            capacity when it has no grant.
        :param request_id: the request it was scheduled in; a grant written
            without an instance uuid is found only within that request.
        :returns: a ``storage.ClaimOutcome`` (``how``: grant, recheck or
            existing; a repeated claim returns the first one).
        :raises ClaimRejected: no grant and it does not fit; build it
            elsewhere.
        :raises UnknownHost: the node never reported.
        """
        if resources is not None:
            resources = validate.resources_object(resources, "resources")
        return self._claims.claim(
            validate.instance_uuid(instance_uuid),
            *self._node(host, node),
            resources,
            request_id=validate.name("request_id", request_id, optional=True),
        )

    @_edge
    def claim_instance(
        self,
        instance_uuid,
        host,
        node,
        resources_of,
        request_id=None,
        granted=None,
    ):
        """Claim an arriving instance as every compute-side path does: by
        its grant when it holds one there (the grant's amount, which is
        what the scheduler promised), else by re-checking the node with
        ``resources_of()``, called only then and at most once, inside the
        claim's one transaction before it locks anything (it may read the
        books).

        :param granted: the ``Resources`` this process granted the
            instance, when it did (a scheduler claiming from the compute's
            instance information): its grant of that amount is consumed
            without reading the amount back.  A grant of another amount is
            claimed as without it.

        :returns: a ``storage.ClaimOutcome``.
        :raises ClaimRejected: no grant, and it does not fit.
        :raises UnknownHost: the node never reported.
        """
        return self._claims.claim(
            validate.instance_uuid(instance_uuid),
            *self._node(host, node),
            request_id=validate.name("request_id", request_id, optional=True),
            resources_of=lambda: validate.resources_object(
                resources_of(), "resources"
            ),
            granted=(
                None
                if granted is None
                else validate.resources_object(granted, "granted")
            ),
        )

    @_edge
    def claimed_on(self, instance_uuids):
        """``{instance uuid: [(host, node), ...]}``: the nodes each of
        ``instance_uuids`` is claimed on (one read; an instance claimed
        nowhere is left out)."""
        return self.store.claimed_on(
            [validate.instance_uuid(u) for u in instance_uuids]
        )

    @_edge
    def correct_claims(self, host, node, amounts, releases=()):
        """Make a node's claims what runs there (Nova's records, say).

        Each instance of ``amounts`` ends claimed on the node at exactly
        its amount, consuming its live grant there; each instance of
        ``releases`` claimed there is released.  Unlike ``claim``, this
        never refuses: an instance that runs is counted even over the
        node's limit, which ``check`` then reports; no grant of a class it is
        over in fits there until that class is back within its limit.

        :param amounts: ``{instance uuid: Resources}``.
        :param releases: instance uuids.
        :returns: a ``storage.Correction`` (``claimed``, ``resized``,
            ``released``: instance uuids).
        :raises UnknownHost: the node never reported.
        """
        host, node = self._node(host, node)
        checked = {
            validate.instance_uuid(uuid): validate.resources_object(
                amount, "resources"
            )
            for uuid, amount in dict(amounts).items()
        }
        return self.store.correct_claims(
            host,
            node,
            checked,
            sorted({validate.instance_uuid(u) for u in releases}),
        )

    @_edge
    def claims(self, host=None):
        """Every claim (on ``host`` only, when given), as
        ``storage.ClaimRow``s ordered by host, node and instance."""
        return self.store.claim_rows(
            validate.name("host", host, optional=True)
        )

    @_edge
    def release(self, instance_uuid, host, node):
        """Release an instance's resources; False if it was not claimed."""
        return self._claims.release(
            validate.instance_uuid(instance_uuid), *self._node(host, node)
        )

    # -- scheduler side --------------------------------------------------

    @_edge
    def schedule(self, vcpus=0, memory_mb=0, disk_gb=0, view=None, **kwargs):
        """Place a request of 1..N instances; see ``Request.build``
        (``resources=Resources(...)`` asks for any resource class, an
        Ironic node's ``CUSTOM_BAREMETAL_GOLD=1`` for one).

        :param view: this request's ``View`` from ``self.view()`` (with a
            ``Ranker`` of one's own); by default one with the default
            ranking.
        :returns: one ``Selection`` per instance.
        :raises NoValidHost: not every instance fits (nothing is granted).
        """
        request = Request.build(vcpus, memory_mb, disk_gb, **kwargs)
        return self._scheduler.schedule(request, view=view)

    @_edge
    def grant_on(self, instance_uuid, host, node, resources, request_id=None):
        """Grant one instance on a node the caller has chosen (Nova's
        FilterScheduler, say): the protocol's write on that node alone,
        with no view read and no ranking; a caller with a ranked list of
        its own moves to its next node when this raises ``NoValidHost``.

        :returns: a ``Selection`` (no alternates).
        :raises NoValidHost: it does not fit there now; nothing is
            granted.
        :raises UnknownHost: the node never reported.
        """
        resources = validate.resources_object(resources, "resources")
        request = Request.build(
            resources=resources,
            instance_uuids=[validate.instance_uuid(instance_uuid)],
            request_id=request_id,
        )
        host, node = self._node(host, node)
        return self._scheduler.grant_on(request, host, node)

    @_edge
    def withdraw_instance(self, instance_uuid, scheduler=None):
        """Withdraw every live grant of an instance that is being scheduled
        again (its earlier destination failed), or only those
        ``scheduler`` wrote (a grant's ``scheduler``: a scheduler process
        that has ended); how many there were."""
        return self.store.withdraw_instance(
            validate.instance_uuid(instance_uuid),
            validate.name("scheduler", scheduler, optional=True),
        )

    @_edge
    def schedule_request(self, request, view=None):
        """``schedule`` for a ``Request`` already built (Nova's adapter)."""
        return self._scheduler.schedule(request, view=view)

    @_edge
    def view(self, ranker=None):
        """This process's view of every node, refreshed from what changed,
        for one request: pass it to ``schedule``/``schedule_request``.

        :param ranker: a ``Ranker`` that orders the nodes with room (Nova's
            filters and weighers, say); by default most free first.
        """
        if ranker is not None and not isinstance(ranker, Ranker):
            raise exception.InvalidRequest(
                reason="ranker must be a grant_scheduler.api.Ranker"
            )
        return self._scheduler.view(ranker=ranker)

    @_edge
    def nodes(self):
        """``(by node uuid, by (host, node))``: every node's
        ``HostState`` as this process's view has it, refreshed from what
        changed.  The view's own maps, kept up to date as it reads: read
        them, never change them (a request that needs a view of its own
        takes ``view()``)."""
        return self._scheduler.view_cache.nodes()

    @_edge
    def read_due(self, ahead):
        """Read every node's row now if this process's view would read them
        all within ``ahead`` seconds (``view_resync_interval``), so that a
        request seldom finds that read due: for a loop of the process's
        own.  Returns whether it read them."""
        return self._scheduler.view_cache.refresh_due(ahead)

    @_edge
    def granted_by_node(self):
        """``{(host, node): Resources}`` promised by live grants."""
        return self.store.granted_by_node()

    @property
    def counters(self):
        return self._scheduler.counters

    # -- maintenance and inspection --------------------------------------

    @_edge
    def reap(self):
        """Run the reaper once; returns counts per reason."""
        return self._reaper.reap()

    @_edge
    def hosts(self):
        """Per-node capacity, usage, live grants and claims."""
        return self.store.host_reports()

    @_edge
    def grants(self, host=None, live=False):
        """Every grant row, optionally on one host; with ``live``, only the
        live ones (which hold room: not yet consumed, withdrawn or
        reaped)."""
        return self.store.grant_rows(
            validate.name("host", host, optional=True), live=bool(live)
        )

    @_edge
    def check(self, quiescent=False):
        """Violations of I1 and I4 (an empty list when they hold).

        Each node's usage, live grants and claims are read in one
        statement, so its figures are one consistent snapshot under load.
        """
        return checker.check(
            self.store.host_reports(),
            self.store.grant_rows(),
            self.store.orphan_claims(),
            quiescent=quiescent,
        )

    # -- input -----------------------------------------------------------

    @staticmethod
    def _node(host, node):
        return validate.name("host", host), validate.name("node", node)

    @staticmethod
    def _used(used):
        if used is None:
            return None
        return validate.resources_object(used, "used", allow_zero=True)
