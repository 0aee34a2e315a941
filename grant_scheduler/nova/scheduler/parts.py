"""The scheduler process's parts, built in the worker on first use.

Nova's scheduler manager builds the driver before it forks its workers
(H9), so ``SchedulerParts`` only records what it was given; each part is
built on first use, in the worker: the ``GrantScheduler``, Nova's host
manager consuming grants (``host_manager``), where nodes' capacities are
read (placement on 17-22, Nova's compute node records before), the node
registry, the outage of grant_scheduler's database, the grant follower
and its loop, the reconciliation, and the two engines the driver binds
Nova's calls to:

* ``placement_engine`` (17-22): Nova's FilterScheduler, each placement
  claim granted first;
* ``protocol_engine`` (13-16, and calls without instance uuids): Nova's
  filters and weighers rank, the protocol grants.

The periodic tasks (reap, register nodes, follow grants, reconcile,
refresh the views) run from the manager's periodic task
(``run_periodic_tasks``); following the grants and refreshing the views
also run on loops of their own (``loop.Loop``), every few seconds.
"""

from oslo_log import log as logging
from oslo_service import periodic_task

from grant_scheduler.nova import amounts as nova_amounts
from grant_scheduler.nova import compat
from grant_scheduler.nova import outage as outage_module
from grant_scheduler.nova import service
from grant_scheduler.nova.books import instance_info
from grant_scheduler.nova.books import registry

LOG = logging.getLogger(__name__)

# What Nova's scheduler manager calls on driver.host_manager (13-22).
MANAGER_CALLS = frozenset(
    (
        "update_aggregates",
        "delete_aggregate",
        "update_instance_info",
        "delete_instance_info",
        "sync_instance_info",
        "refresh_cells_caches",
    )
)


class StandaloneHostManager:
    """What Nova's manager calls on ``driver.host_manager``, without Nova.

    Aggregate and instance-info updates matter only to Nova's own filters,
    which are not run without Nova; they are accepted and logged.
    """

    def _ignored(self, name):
        def call(*args, **kwargs):
            LOG.debug("host_manager.%s ignored: Nova is not loaded", name)

        return call

    def rejected_by(self, spec_obj):
        """No filter of Nova's runs without Nova."""
        return None

    def __getattr__(self, name):
        if name in MANAGER_CALLS:
            return self._ignored(name)
        raise AttributeError(name)


class _Periodic(periodic_task.PeriodicTasks):
    """The driver's periodic tasks, run from the manager's."""

    def __init__(self, conf, parts):
        super().__init__(conf)
        self._parts = parts
        # NOTE: the decorator fixes a spacing at import time, before the
        # configuration is read; this instance takes the configured one.
        self._periodic_spacing = dict(self._periodic_spacing)
        self._periodic_spacing["reap_grants"] = (
            conf.grant_scheduler.reap_interval
        )
        reconcile = conf.grant_scheduler.reconcile_interval
        if reconcile:
            self._periodic_spacing["reconcile_claims"] = reconcile
        else:
            self._periodic_tasks = [
                (name, task)
                for name, task in self._periodic_tasks
                if name != "reconcile_claims"
            ]

    @periodic_task.periodic_task(spacing=60, run_immediately=True)
    def reap_grants(self, context):
        counts = self._parts.while_up("reaping grants", self._reap)
        if counts and any(counts.values()):
            LOG.info("Reaped grants: %s", counts)

    def _reap(self):
        return self._parts.grant_scheduler.reap()

    @periodic_task.periodic_task(spacing=60, run_immediately=True)
    def sync_hosts(self, context):
        self._parts.while_up(
            "registering compute nodes", self._parts.sync_hosts, context
        )

    @periodic_task.periodic_task(spacing=60, run_immediately=True)
    def follow_grants(self, context):
        self._parts.while_up(
            "following grants", self._parts.follow_grants, context
        )

    @periodic_task.periodic_task(spacing=60, run_immediately=True)
    def reconcile_claims(self, context):
        self._parts.while_up(
            "reconciling claims", self._parts.reconcile_claims, context
        )

    # NOTE: last, so that at the start the reads the tasks above made
    # fall due from their end.
    @periodic_task.periodic_task(spacing=60, run_immediately=True)
    def refresh_views(self, context):
        self._parts.refresh_views(context)


class SchedulerParts:
    """What the driver is made of, each part built on first use."""

    def __init__(self, *args, conf=None, grant_scheduler=None, **kwargs):
        """
        :param conf: the configuration object (Nova's ``CONF`` by default).
        :param grant_scheduler: a ``GrantScheduler`` to use instead of one
            built from ``conf`` on first use.
        """
        self._lazy = service.Lazy(conf=conf)
        if grant_scheduler is not None:
            self._lazy.set(grant_scheduler)
        self._host_manager = None
        self._periodic = None
        self._follower = None
        self._refresher = None
        self._filter_scheduler = None
        self._placement_engine = None
        self._protocol_engine = None
        self._capacities = None
        self._outage = None
        self.granted_here = instance_info.GrantedHere()
        """The instances this process granted, whose claim from the
        compute's instance information it makes at once
        (``InstanceInfoClaims.defer_others``)."""
        self.asks_candidates_itself = False
        """Whether the driver finds allocation candidates itself (18-22)."""
        self.registry = registry.NodeRegistry(
            self._lazy.get, self.capacities, lambda: self.host_manager
        )

    def capacities(self):
        """Where nodes' capacities are read (built in the worker, on first
        use): placement's inventories on Nova 17-22, which decide there
        whatever this driver claims, else Nova's compute node records."""
        if self._capacities is None:
            if compat.claims_in_placement():
                from grant_scheduler.nova.books import inventory

                self._capacities = registry.PlacementCapacities(
                    inventory.PlacementInventory(
                        _once(compat.scheduler_report_client)
                    ),
                    at_once=self.conf.grant_scheduler.sync_concurrency,
                )
            else:
                self._capacities = registry.RecordCapacities(
                    lambda: nova_amounts.reserved_from_conf(self.conf)
                )
        return self._capacities

    @property
    def grant_scheduler(self):
        return self._lazy.get()

    @property
    def conf(self):
        """The configuration the parts are built from."""
        return self._lazy.conf

    @property
    def host_manager(self):
        """``host_manager.GrantsHostManager`` (built in the worker, on
        first use), or a stand-in when Nova is not installed."""
        if self._host_manager is None:
            if not compat.have_nova():
                self._host_manager = StandaloneHostManager()
            else:
                from grant_scheduler.nova.scheduler import computes
                from grant_scheduler.nova.scheduler import host_manager

                self._warn_without_instance_info()
                self._host_manager = host_manager.GrantsHostManager(
                    self._lazy.get,
                    self.nodes_of_host,
                    outage=lambda: self.outage,
                    allocations=self.allocations,
                    timing=computes.Timing.of(self.conf),
                )
                # NOTE(nova): every scheduler worker gets every compute's
                # instance information; the one that granted an instance
                # claims it, the others look after the follower's interval.
                self._host_manager.instance_claims.defer_others(
                    self.granted_here,
                    self.conf.grant_scheduler.consume_interval,
                )
        return self._host_manager

    @host_manager.setter
    def host_manager(self, value):
        self._host_manager = value

    def _warn_without_instance_info(self):
        tracked = compat.nova_option(self.conf, "track_instance_changes", True)
        if not tracked:
            LOG.warning(
                "[filter_scheduler] track_instance_changes is off: computes "
                "then send no instance info, and without the build hook or "
                "a claiming virt driver nothing consumes grants"
            )

    def nodes_of_host(self, host):
        """The names of ``host``'s nodes grant_scheduler knows."""
        return sorted(
            s.node
            for s in self.grant_scheduler.view().states()
            if s.host == host
        )

    def run_periodic_tasks(self, context):
        """Called by Nova's scheduler manager from its periodic task.

        The process's loops (the grant follower's, the views' reads
        ahead) are started first: at a process's start the sync of
        compute nodes reads every provider in placement, minutes at
        10,000 nodes, and the loops would otherwise wait for it."""
        if compat.have_nova():
            self._follower_loop().ensure_started()
            self._refresher_loop().ensure_started()
        if self._periodic is None:
            self._periodic = _Periodic(self.conf, self)
        return self._periodic.run_periodic_tasks(context)

    def follow_grants(self, context=None):
        """Follow the live grants to their instances in Nova's records:
        consume those being built, withdraw those Nova gave up; and keep
        the loop that does so every ``consume_interval`` running."""
        if not compat.have_nova():
            return None
        self._follower_loop().ensure_started()
        return self._grant_follower().run(context)

    def while_up(self, what, call, *args):
        """``call(*args)``, a periodic task's work, unless grant_scheduler's
        database is taken as down (inside Nova): then nothing, and a
        failure takes it as down instead of escaping.  A probe of the
        database that finds it back (the books catching up first) may run
        here, so an outage ends even when no request comes."""
        if not compat.have_nova():
            return call(*args)
        outage = self.outage
        if not outage.usable():
            return None
        try:
            return call(*args)
        except outage_module.FAILURES as exc:
            outage.failed(exc, what)
            return None

    def _follower_loop(self):
        if self._follower is None:
            from grant_scheduler.nova import loop

            self._follower = loop.Loop(
                self,
                lambda parts: parts.while_up(
                    "following grants", parts._follow
                ),
                self.conf.grant_scheduler.consume_interval,
                "follow the live grants",
            )
        return self._follower

    def refresh_views(self, context=None):
        """Make now the reads of every row of the views that fall due
        within ``view_refresh_interval`` (Nova's compute node and service
        rows, grant_scheduler's host rows), and keep the loop that does so
        every ``view_refresh_interval`` running, so that requests read
        only what changed.

        :returns: how many tables were read whole, or None when the loop
            is off (``view_refresh_interval`` 0) or Nova is not loaded.
        """
        ahead = self.conf.grant_scheduler.view_refresh_interval
        if not compat.have_nova() or not ahead:
            return None
        self._refresher_loop().ensure_started()
        return self._read_due(ahead, context)

    def _read_due(self, ahead, context=None):
        from nova import context as nova_context

        context = context or nova_context.get_admin_context()
        # NOTE: a host manager of Nova's own (tests, an operator's
        # override) keeps no rows between requests.
        read_nova = getattr(self.host_manager, "read_due", None)
        read = read_nova(context, ahead) if read_nova else 0
        books = self.while_up(
            "reading every node", self.grant_scheduler.read_due, ahead
        )
        return read + bool(books)

    def _refresher_loop(self):
        if self._refresher is None:
            from grant_scheduler.nova import loop

            ahead = self.conf.grant_scheduler.view_refresh_interval
            self._refresher = loop.Loop(
                self,
                lambda parts: parts._read_due(ahead),
                ahead,
                "read every row of the views",
            )
        return self._refresher

    def stop(self):
        """Stop this process's loops (tests; Nova never calls it)."""
        for running in (self._follower, self._refresher):
            if running is not None:
                running.stop()

    def reconcile_claims(self, context):
        """Make the claims what Nova's records say each node runs."""
        if compat.have_nova():
            from grant_scheduler.nova.books import reconcile

            reconcile.Reconciler(
                self._lazy.get, allocations=self.allocations
            ).run()

    def _catch_up(self):
        """After an outage of the database: the books made what Nova's
        records say each node runs (raises while it is still down)."""
        from grant_scheduler.nova.books import reconcile

        reconcile.Reconciler(
            self._lazy.get, allocations=self.allocations
        ).run()

    def allocations(self, node_uuid):
        """What each consumer holds on the node's provider in placement
        now (Nova 17-22), or None."""
        return self.capacities().allocations(node_uuid)

    @property
    def outage(self):
        """This process's ``outage.Outage`` (built on first use)."""
        if self._outage is None:
            self._outage = outage_module.Outage(
                self.conf.grant_scheduler.database_failure,
                self._catch_up,
                probe=lambda: self.grant_scheduler.ping(),
            )
        return self._outage

    def withdraw_rescheduled(self, spec_obj, instance_uuids, outage=None):
        """A build Nova schedules again after a compute host failed it:
        the earlier destination's grant would hold the capacity until it
        expires, so it is withdrawn first."""
        if not _is_reschedule(spec_obj):
            return
        gs = self.grant_scheduler
        try:
            for instance_uuid in filter(None, instance_uuids or ()):
                gs.withdraw_instance(instance_uuid)
        except outage_module.FAILURES as exc:
            if outage is None:
                raise  # Nova 13-16: the protocol's path has no placement
            outage.failed(exc, "withdrawing a rescheduled build's grant")

    @property
    def placement_engine(self):
        """Nova 17-22's engine (built on first use)."""
        if self._placement_engine is None:
            from grant_scheduler.nova.scheduler import placement_engine

            self._placement_engine = placement_engine.PlacementEngine(self)
        return self._placement_engine

    @property
    def protocol_engine(self):
        """Nova 13-16's engine (built on first use)."""
        if self._protocol_engine is None:
            from grant_scheduler.nova.scheduler import protocol_engine

            self._protocol_engine = protocol_engine.ProtocolEngine(self)
        return self._protocol_engine

    def _follow(self):
        """The follower loop's work: the live grants followed to their
        instances, then the instance-info claims and releases this process
        deferred (``InstanceInfoClaims.claim_deferred``) made where still
        due."""
        followed = self._grant_follower().run()
        claims = getattr(self.host_manager, "instance_claims", None)
        if claims is not None:
            claims.claim_deferred()
        return followed

    def _grant_follower(self):
        from grant_scheduler.nova.books import follow

        return follow.GrantFollower(self._lazy.get, self.allocations)

    @property
    def filter_scheduler(self):
        """Nova's FilterScheduler claiming through grants (17-22; built in
        the worker, on first use)."""
        if self._filter_scheduler is None:
            from grant_scheduler.nova.books import reconcile
            from grant_scheduler.nova.scheduler import filter_scheduler

            self._filter_scheduler = filter_scheduler.GrantingFilterScheduler(
                self.host_manager,
                filter_scheduler.NodeGrants(
                    self._lazy.get,
                    self._grant_follower(),
                    self.registry.refresh,
                    lambda uuid: self.capacities().others(uuid),
                    self.outage,
                    reconcile.NodeReconciler(
                        self._lazy.get, allocations=self.allocations
                    ),
                    usage=lambda context, node_uuid: (
                        self.capacities().look_now(context, node_uuid)
                    ),
                    granted_here=self.granted_here,
                ),
                self.registry,
            )
        return self._filter_scheduler

    def sync_hosts(self, context):
        """Register new compute nodes and report changed capacities."""
        if not compat.have_nova():
            return
        host_states = self.host_manager.host_states(context)
        states = self.grant_scheduler.view().states()
        self.registry.sync(context, states, host_states)


def _once(make):
    """``f()`` giving what ``make()`` gave at the first call."""
    made = []

    def get():
        if not made:
            made.append(make())
        return made[0]

    return get


def _is_reschedule(spec_obj):
    """A build Nova schedules again after a compute host failed it."""
    retry = compat.field(spec_obj, "retry")
    return compat.field(retry, "num_attempts", 0) > 1 if retry else False
