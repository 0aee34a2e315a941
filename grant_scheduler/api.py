"""The public Python API of grant_scheduler.

One object, ``GrantScheduler``, serves a scheduler service, a compute agent,
the benchmark and the operator's tools alike::

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
built before a service forks its workers (DESIGN H9).  The first call checks
the schema revision and raises ``SchemaNotMigrated`` (or
``SchemaNewerThanCode``) with the command to run, rather than failing later
on a missing table.
"""

from grant_scheduler import checker
from grant_scheduler import compute
from grant_scheduler import exception
from grant_scheduler import reaper
from grant_scheduler import scheduler
from grant_scheduler.db import api as db_api
from grant_scheduler.db import maintenance
from grant_scheduler.db import migration
from grant_scheduler.db import store as gs_store
from grant_scheduler.resources import Capacity
from grant_scheduler.resources import Resources
from grant_scheduler.resources import validated
from grant_scheduler.settings import Settings

__all__ = [
    "Capacity",
    "GrantScheduler",
    "Request",
    "Resources",
    "Selection",
    "Settings",
    "ClaimRejected",
    "InvalidRequest",
    "InvalidResources",
    "NoValidHost",
    "UnknownHost",
]

Request = scheduler.Request
Selection = scheduler.Selection
ClaimRejected = exception.ClaimRejected
InvalidRequest = exception.InvalidRequest
InvalidResources = exception.InvalidResources
NoValidHost = exception.NoValidHost
UnknownHost = exception.UnknownHost


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
        :param database: a ``grant_scheduler.db.api.Database``.
        :param settings: a ``Settings`` (defaults to the option defaults).
        :param name: this scheduler's identity, written into its grants
            (default ``hostname:pid``).
        :param hooks: ``injection.Hooks`` for tests; off by default.
        :param rng: a ``random.Random`` for the host-subset choice.
        :param claim_lock: ``lock(host, node)`` for the compute side.
        :param store: the data-access object (the benchmark swaps in its
            unsafe baselines here); default ``Store(database)``.
        """
        self.database = database
        database.require_current_schema()
        self.settings = settings or Settings()
        self.store = store or gs_store.Store(database)
        self.maintenance = maintenance.Maintenance(database)
        self.scheduler = scheduler.Scheduler(
            self.store, self.settings, name=name, rng=rng, hooks=hooks
        )
        self.claims = compute.ClaimAgent(
            self.store, self.settings, hooks=hooks, lock=claim_lock
        )
        self.reaper = reaper.Reaper(self.maintenance, self.settings)

    @classmethod
    def from_url(cls, url, **kwargs):
        return cls(db_api.Database(url), **kwargs)

    @classmethod
    def from_conf(cls, conf, **kwargs):
        """Build from the ``grant_scheduler*`` option groups of ``conf``."""
        return cls(
            db_api.Database.from_conf(conf),
            settings=Settings.from_conf(conf),
            **kwargs,
        )

    def check_schema(self):
        """Raise unless the schema is at this code's head revision."""
        migration.check_schema(self.database)

    # -- compute side ----------------------------------------------------

    def report_host(
        self,
        host,
        node,
        capacity,
        used=None,
        node_uuid=None,
    ):
        """Create or update a node's capacity; usage only when ``used``.

        Taken under the node's claim lock, so a report never races a claim
        (DESIGN H4).  :returns: the host row's id.
        """
        validated(**capacity.total.as_dict(), allow_zero=True)
        validated(**capacity.reserved.as_dict(), allow_zero=True)
        if used is not None:
            validated(**used.as_dict(), allow_zero=True)
        for name in (
            "cpu_allocation_ratio",
            "ram_allocation_ratio",
            "disk_allocation_ratio",
        ):
            ratio = getattr(capacity, name)
            if not isinstance(ratio, (int, float)) or not 0 < ratio < 1000:
                raise exception.InvalidResources(
                    name=name, value=ratio, reason="it must be in (0, 1000)"
                )
        return self.claims.report(
            host, node, capacity, used=used, node_uuid=node_uuid
        )

    def delete_host(self, host, node):
        """Forget a node; the reaper removes its remaining grants."""
        return self.store.delete_host(host, node)

    def claim(self, instance_uuid, host, node, resources=None):
        """Claim on the compute host; see ``ClaimAgent.claim``."""
        if not instance_uuid:
            raise exception.InvalidRequest(
                reason="a claim needs an instance uuid"
            )
        if resources is not None:
            resources = validated(**resources.as_dict())
        return self.claims.claim(instance_uuid, host, node, resources)

    def release(self, instance_uuid, host, node):
        """Release an instance's resources; False if it was not claimed."""
        return self.claims.release(instance_uuid, host, node)

    # -- scheduler side --------------------------------------------------

    def schedule(self, vcpus, memory_mb, disk_gb, **kwargs):
        """Place a request of 1..N instances; see ``Request.build``.

        :returns: one ``Selection`` per instance.
        :raises NoValidHost: not every instance fits (nothing is granted).
        """
        request = Request.build(vcpus, memory_mb, disk_gb, **kwargs)
        return self.scheduler.schedule(request)

    @property
    def counters(self):
        return self.scheduler.counters

    # -- maintenance and inspection --------------------------------------

    def reap(self):
        """Run the reaper once; returns counts per reason."""
        return self.reaper.reap()

    def hosts(self):
        """Per-host capacity, usage, won grants and claims."""
        return self.maintenance.hosts()

    def grants(self, host=None):
        """Every grant row, optionally on one host."""
        return self.maintenance.grants(host=host)

    def check(self, quiescent=False):
        """Violations of I1 and I4 (an empty list when they hold).

        Usage, won grants and claims are read in one statement, so each
        host's figures are one consistent snapshot even under load.
        """
        return checker.check(self.hosts(), self.grants(), quiescent=quiescent)
