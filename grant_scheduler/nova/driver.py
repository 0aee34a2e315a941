"""The ``grant_scheduler`` scheduler driver for Nova 13 to 22.

Enabled with ``[DEFAULT] scheduler_driver = grant_scheduler`` (Nova 13-14;
the class path ``grant_scheduler.nova.driver.GrantSchedulerDriver`` works
too) or ``[scheduler] driver = grant_scheduler`` (15-22).  Nova's scheduler
manager loads it with ``stevedore.driver.DriverManager(
"nova.scheduler.driver", name, invoke_on_load=True)`` before forking its
workers, so construction only records what it was given (H9).

On Nova 17-22 (every call that passes instance uuids and wants Selection
objects) the driver is Nova's own FilterScheduler, with a grant written
before each placement claim (``placement``): Nova's request filters,
allocation candidates, filters, weighers and options decide, placement
records, the grant guards the node.  On 18-22 the driver finds the
allocation candidates itself, and builds the chosen node's for a request
of one unnumbered group of resources (``candidates``).

Otherwise (13-16, and older conductors), per request: Nova's HostStates,
less the live grants of this process's cached view
(``GrantScheduler.view``: one read of the rows changed since the last
request), are filtered and weighed by Nova's own host manager
(``nova_ranker.NovaRanker``); the chosen host is then granted through the
protocol (``GrantScheduler.schedule_request``), falling over to the next
one when the grant does not fit.  Without Nova importable, the
scheduler's own view and ranking do the same job over grant_scheduler's
rows.

``host_manager`` is Nova's HostManager extended to consume grants from
the instance information computes send (``host_manager``), so Nova 22
needs nothing installed on its computes; the periodic tasks reap grants,
register nodes, follow live grants to their instances in Nova's records
(``follow``: a grant is consumed once Nova has set its instance's host,
withdrawn once Nova gives the instance up; also every
``consume_interval`` seconds on a loop of its own) and reconcile the
claims with Nova's records (``reconcile``).
"""

from oslo_log import log as logging
from oslo_service import periodic_task

from grant_scheduler import api
from grant_scheduler.nova import compat
from grant_scheduler.nova import outage as outage_module
from grant_scheduler.nova import service
from grant_scheduler.nova.books import registry
from grant_scheduler.nova.scheduler import ranker as nova_ranker

LOG = logging.getLogger(__name__)

# The optional arguments of select_destinations, in Nova's order: 15 added
# instance_uuids, 16 the two placement arguments, 17 the last two.
_OPTIONAL_ARGS = (
    "instance_uuids",
    "alloc_reqs_by_rp_uuid",
    "provider_summaries",
    "allocation_request_version",
    "return_alternates",
)
_HOST_STATES_FROM = 1  # index of alloc_reqs_by_rp_uuid (16)
_SELECTION_OBJECTS_FROM = 3  # index of allocation_request_version (17+)

# The answer each release's manager expects.
DICTS = "dicts"  # 13-15: [{"host", "nodename", "limits"}]
HOST_STATES = "host_states"  # 16: objects with .host, .nodename, .limits
SELECTIONS = "selections"  # 17-22: [[Selection, alternates...]]

DEFAULT_MAX_ATTEMPTS = 3

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

    def __init__(self, conf, driver):
        super().__init__(conf)
        self._driver = driver
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
        counts = self._driver.while_up("reaping grants", self._reap)
        if counts and any(counts.values()):
            LOG.info("Reaped grants: %s", counts)

    def _reap(self):
        return self._driver.grant_scheduler.reap()

    @periodic_task.periodic_task(spacing=60, run_immediately=True)
    def sync_hosts(self, context):
        self._driver.while_up(
            "registering compute nodes", self._driver.sync_hosts, context
        )

    @periodic_task.periodic_task(spacing=60, run_immediately=True)
    def follow_grants(self, context):
        self._driver.while_up(
            "following grants", self._driver.follow_grants, context
        )

    @periodic_task.periodic_task(spacing=60, run_immediately=True)
    def reconcile_claims(self, context):
        self._driver.while_up(
            "reconciling claims", self._driver.reconcile_claims, context
        )


class GrantSchedulerDriver:
    """A Nova scheduler driver that grants before it answers."""

    # NOTE(placement): what Nova's SchedulerManager reads to decide whether
    # it runs Nova's request filters and asks placement for allocation
    # candidates before calling the driver.  On Nova 17-22 the driver
    # claims the chosen candidate as Nova's FilterScheduler does
    # (``filter_scheduler.GrantingFilterScheduler``); on 18-22 it finds the
    # candidates itself (``candidates``), so the manager is told False.
    # Setting it False, as Nova's own tests do to stand for a driver that
    # does not use placement, turns the driver's placement claims off.
    @property
    def USES_ALLOCATION_CANDIDATES(self):
        return self._claims_in_placement and not self._asks_itself

    @USES_ALLOCATION_CANDIDATES.setter
    def USES_ALLOCATION_CANDIDATES(self, value):
        placement = compat.claims_in_placement()
        self._claims_in_placement = bool(value) and placement

    @property
    def claims_in_placement(self):
        """True where each chosen node is claimed in placement (Nova
        17-22, unless ``USES_ALLOCATION_CANDIDATES`` was set False)."""
        return self._claims_in_placement

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
        self._filter_scheduler = None
        self._claims_in_placement = compat.claims_in_placement()
        self._asks_itself = False
        self._candidates = None
        if self._claims_in_placement:
            self._asks_itself = compat.asks_candidates_itself()
        self._capacities = None
        self._outage = None
        self._consumed = None
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
                    )
                )
            else:
                self._capacities = registry.RecordCapacities(
                    lambda: compat.reserved_from_conf(self._lazy.conf)
                )
        return self._capacities

    @property
    def grant_scheduler(self):
        return self._lazy.get()

    @property
    def host_manager(self):
        """``host_manager.GrantsHostManager`` (built in the worker, on
        first use), or a stand-in when Nova is not installed."""
        if self._host_manager is None:
            if not compat.have_nova():
                self._host_manager = StandaloneHostManager()
            else:
                from grant_scheduler.nova.scheduler import host_manager

                self._warn_without_instance_info()
                self._host_manager = host_manager.GrantsHostManager(
                    self._lazy.get,
                    self.nodes_of_host,
                    outage=lambda: self.outage,
                    allocations=self.allocations,
                )
        return self._host_manager

    @host_manager.setter
    def host_manager(self, value):
        self._host_manager = value

    def _warn_without_instance_info(self):
        tracked = compat.nova_option(
            self._lazy.conf, "track_instance_changes", True
        )
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
        """Called by Nova's scheduler manager from its periodic task."""
        if self._periodic is None:
            self._periodic = _Periodic(self._lazy.conf, self)
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
            from grant_scheduler.nova.books import follow

            self._follower = follow.Follower(
                self,
                lambda driver: driver.while_up(
                    "following grants", driver._grant_follower().run
                ),
                self._lazy.conf.grant_scheduler.consume_interval,
            )
        return self._follower

    def stop(self):
        """Stop this process's loop (tests; Nova never calls it)."""
        if self._follower is not None:
            self._follower.stop()

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
                self._lazy.conf.grant_scheduler.database_failure,
                self._catch_up,
                probe=lambda: self.grant_scheduler.ping(),
            )
        return self._outage

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

    def select_destinations(self, context, spec_obj, *args, **kwargs):
        """Every signature from Nova 13 to 22 (see ``_OPTIONAL_ARGS``).

        :returns: for 13-15 a list of ``{"host", "nodename", "limits"}``
            dicts, one per instance; for 16 the chosen HostStates; for
            17-22 one list per instance of ``Selection`` objects, the
            granted host first, then up to ``max_attempts - 1`` alternates
            when ``return_alternates``.
        :raises NoValidHost: Nova's, when not every instance fits; nothing
            stays granted then.
        """
        call = _bind(args, kwargs)
        if (
            self._claims_in_placement
            and call["answer"] == SELECTIONS
            and call["instance_uuids"]
        ):
            # NOTE(placement): without instance uuids (a conductor older
            # than Pike) Nova's FilterScheduler claims nothing; the
            # protocol's own path below still grants.
            return self._select_with_placement(context, spec_obj, call)
        alternates = 0
        if call["answer"] == SELECTIONS and call["return_alternates"]:
            max_attempts = compat.nova_option(
                self._lazy.conf, "max_attempts", DEFAULT_MAX_ATTEMPTS
            )
            alternates = max(0, max_attempts - 1)
        try:
            request = _request(context, spec_obj, call, alternates)
        except api.GrantSchedulerError as exc:
            raise compat.no_valid_host(str(exc)) from exc
        outage = self.outage if compat.have_nova() else None
        if outage is None or outage.usable():
            try:
                return self._select_by_grants(context, spec_obj, call, request)
            except outage_module.FAILURES as exc:
                if outage is None:
                    raise
                outage.failed(exc, "granting")
        if outage.refuses:
            raise outage.refusal()
        return self._select_as_stock(context, spec_obj, call, request)

    def _select_by_grants(self, context, spec_obj, call, request):
        """The protocol's path (13-16): Nova ranks, a grant decides."""
        gs = self.grant_scheduler
        if _is_reschedule(spec_obj):
            self._withdraw_earlier(request.instance_uuids)
        request_view, ranker = self._view(gs, context, spec_obj, request)
        try:
            selections = gs.schedule_request(request, view=request_view)
        except api.NoValidHost as exc:
            rejected_by = self.host_manager.rejected_by(spec_obj)
            if rejected_by is None:
                raise compat.no_valid_host(str(exc)) from exc
            raise compat.no_valid_host(
                compat.NOT_ENOUGH_HOSTS, rejected_by
            ) from exc
        return _Answer(ranker).build(call["answer"], selections)

    def _select_as_stock(self, context, spec_obj, call, request):
        """While the database is down (13-16): Nova's stock choice, no
        grant (``stock``); the compute's own claim guards the node."""
        from grant_scheduler.nova.scheduler import stock

        if self._consumed is None:
            self._consumed = stock.Consumed()
        elevated = getattr(context, "elevated", None)
        manager = self.host_manager
        choice = stock.StockChoice(
            manager.host_states(elevated() if elevated else context, spec_obj),
            spec_obj,
            manager,
            subset_size=compat.nova_option(
                self._lazy.conf, "host_subset_size", 1
            ),
            consumed=self._consumed,
        )
        chosen = choice.select(request.instance_uuids, request.num_alternates)
        self.outage.skipped()
        if chosen is None:
            raise compat.no_valid_host()
        return _Answer(choice).build(call["answer"], chosen)

    def _select_with_placement(self, context, spec_obj, call):
        """Nova 17-22: Nova's FilterScheduler, each placement claim granted
        first (``placement``)."""
        outage = self.filter_scheduler.grants.outage
        if not outage.usable():
            if outage.refuses:
                raise outage.refusal()
        elif _is_reschedule(spec_obj):
            self._withdraw_earlier(call["instance_uuids"], outage)
        found = (
            call["alloc_reqs_by_rp_uuid"],
            call["provider_summaries"],
            call["allocation_request_version"],
        )
        if self._asks_itself:
            found = self.candidates.for_request(context, spec_obj)
        group = compat.field(spec_obj, "instance_group")
        hosts = list(compat.field(group, "hosts", ())) if group else None

        def select():
            return self.filter_scheduler.select_destinations(
                context,
                spec_obj,
                call["instance_uuids"],
                *found,
                bool(call["return_alternates"]),
            )

        try:
            return select()
        except compat.nova_module("exception").NoValidHost:
            requests = found[0]
            if not getattr(requests, "left_out", False):
                raise
        # NOTE(placement): the books found no room on a node placement was
        # not asked about; placement decides, as for the stock scheduler.
        requests.ask_placement()
        if group is not None:
            group.hosts = hosts
            group.obj_reset_changes(["hosts"])
        return select()

    @property
    def candidates(self):
        """``candidates.Candidates`` (Nova 18-22; built on first use)."""
        if self._candidates is None:
            from grant_scheduler.nova.scheduler import candidates

            conf = self._lazy.conf
            self._candidates = candidates.Candidates(
                conf,
                self.filter_scheduler.placement_client,
                lambda: self.host_manager,
                build=conf.grant_scheduler.build_allocation_requests,
                room=self.filter_scheduler.grants.has_room,
                room_now=self.filter_scheduler.grants.placement_has_room,
            )
        return self._candidates

    def _withdraw_earlier(self, instance_uuids, outage=None):
        # NOTE: the earlier destination failed the build: its grant would
        # hold the capacity until it expires.
        gs = self.grant_scheduler
        try:
            for instance_uuid in filter(None, instance_uuids or ()):
                gs.withdraw_instance(instance_uuid)
        except outage_module.FAILURES as exc:
            if outage is None:
                raise  # Nova 13-16: the protocol's path has no placement
            outage.failed(exc, "withdrawing a rescheduled build's grant")

    def _view(self, gs, context, spec_obj, request):
        """This request's view and its ranker (Nova's filters and
        weighers); ``(None, None)`` (the scheduler's own cached view and
        default ranking) without Nova."""
        if not compat.have_nova():
            return None, None
        manager = self.host_manager
        # NOTE: as Nova's FilterScheduler, read the hosts as an admin.
        elevated = getattr(context, "elevated", None)
        context = elevated() if elevated is not None else context
        host_states = manager.host_states(context, spec_obj)
        ranker = nova_ranker.NovaRanker(
            host_states,
            spec_obj,
            manager,
            request.instance_uuids,
            subset_size=compat.nova_option(
                self._lazy.conf, "host_subset_size"
            ),
        )
        request_view = gs.view(ranker=ranker)
        known = {(s.host, s.node): s.node_uuid for s in request_view.states()}
        if self.registry.register_unknown(context, known, host_states):
            request_view = gs.view(ranker=ranker)
        return request_view, ranker


def _once(make):
    """``f()`` giving what ``make()`` gave at the first call."""
    made = []

    def get():
        if not made:
            made.append(make())
        return made[0]

    return get


def _bind(args, kwargs):
    """Name the optional arguments of any release's call."""
    if len(args) > len(_OPTIONAL_ARGS):
        raise TypeError(
            "select_destinations takes at most %d arguments after spec_obj"
            % len(_OPTIONAL_ARGS)
        )
    unknown = set(kwargs) - set(_OPTIONAL_ARGS)
    if unknown:
        raise TypeError(
            "select_destinations got unexpected arguments %s"
            % ", ".join(sorted(unknown))
        )
    call = dict.fromkeys(_OPTIONAL_ARGS)
    call.update(zip(_OPTIONAL_ARGS, args))
    call.update(kwargs)

    def given_from(index):
        return len(args) > index or any(
            name in kwargs for name in _OPTIONAL_ARGS[index:]
        )

    if given_from(_SELECTION_OBJECTS_FROM):
        call["answer"] = SELECTIONS
    elif given_from(_HOST_STATES_FROM):
        call["answer"] = HOST_STATES
    else:
        call["answer"] = DICTS
    call["selection_objects"] = call["answer"] == SELECTIONS
    return call


def _request(context, spec_obj, call, alternates):
    count = compat.field(spec_obj, "num_instances", 1)
    instance_uuids = call["instance_uuids"]
    if not instance_uuids:
        # NOTE: Nova 13-14 pass no uuids; the spec names at most the first
        # instance, and the compute claims the rest by resources.
        first = compat.field(spec_obj, "instance_uuid")
        instance_uuids = [first] + [None] * (count - 1)
    amount = compat.spec_resources(spec_obj)
    return api.Request.build(
        resources=amount,
        instance_uuids=instance_uuids,
        request_id=getattr(context, "request_id", None),
        ignore_hosts=compat.field(spec_obj, "ignore_hosts", ()),
        force_hosts=compat.field(spec_obj, "force_hosts", ()),
        force_nodes=compat.field(spec_obj, "force_nodes", ()),
        num_alternates=alternates,
    )


class _Answer:
    """Selections in the form the calling release expects."""

    def __init__(self, ranker):
        self._ranker = ranker
        self._objects = compat.objects()

    def _host_state(self, host, node):
        find = getattr(self._ranker, "host_state", None)
        return find(host, node) if find else None

    def build(self, style, selections):
        if style == SELECTIONS:
            return [self._selection_list(s) for s in selections]
        if style == HOST_STATES:
            return [self._host_state_like(s) for s in selections]
        return [self._legacy_dict(s) for s in selections]

    def _selection(self, destination):
        host_state = self._host_state(destination.host, destination.node)
        if self._objects is not None and host_state is not None:
            return self._objects.Selection.from_host_state(host_state)
        return compat.StandaloneSelection(
            compute_node_uuid=destination.node_uuid,
            service_host=destination.host,
            nodename=destination.node,
            limits=dict(getattr(host_state, "limits", None) or {}),
        )

    def _selection_list(self, selection):
        return [self._selection(selection)] + [
            self._selection(alternate) for alternate in selection.alternates
        ]

    def _host_state_like(self, selection):
        host_state = self._host_state(selection.host, selection.node)
        if host_state is not None:
            return host_state
        return compat.StandaloneHostState(
            host=selection.host, nodename=selection.node, limits={}
        )

    def _legacy_dict(self, selection):
        host_state = self._host_state(selection.host, selection.node)
        return {
            "host": selection.host,
            "nodename": selection.node,
            "limits": dict(getattr(host_state, "limits", None) or {}),
        }


def _is_reschedule(spec_obj):
    """A build Nova schedules again after a compute host failed it."""
    retry = compat.field(spec_obj, "retry")
    return compat.field(retry, "num_attempts", 0) > 1 if retry else False
