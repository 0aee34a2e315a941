"""The scheduler side of the grants protocol.

Per request (DESIGN section 2): take the baseline view of every host minus
live grants (from this process's ``view.ViewCache``, which reads only the
host rows that changed); per instance, pick randomly among the best fits,
write a grant, verify it in a fresh transaction after its commit, and fall
over to the next host when it lost, folding what the verification read
revealed into the view.  A multi-instance request is all-or-nothing (H11).
"""

import dataclasses
import os
import random
import socket
import uuid

from oslo_log import log as logging

from grant_scheduler import decision
from grant_scheduler import exception
from grant_scheduler import injection
from grant_scheduler import resources as gs_resources
from grant_scheduler import view as gs_view

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Request:
    """A request for ``len(instance_uuids)`` identical instances."""

    resources: gs_resources.Resources
    instance_uuids: tuple
    request_id: str
    placement: decision.Placement = decision.Placement()
    num_alternates: int = 0

    @classmethod
    def build(
        cls,
        vcpus,
        memory_mb,
        disk_gb,
        num_instances=None,
        instance_uuids=None,
        request_id=None,
        ignore_hosts=(),
        force_hosts=(),
        force_nodes=(),
        num_alternates=0,
    ):
        """Validate user input into a ``Request``.

        :raises InvalidResources: an amount is not a positive integer.
        :raises InvalidRequest: the instance count or uuids are wrong.
        """
        amount = gs_resources.validated(vcpus, memory_mb, disk_gb)
        if instance_uuids is None:
            count = 1 if num_instances is None else num_instances
            if isinstance(count, bool) or not isinstance(count, int):
                raise exception.InvalidRequest(
                    reason="num_instances %r is not an integer" % (count,)
                )
            if count < 1:
                raise exception.InvalidRequest(
                    reason="num_instances must be at least 1, not %d" % count
                )
            instance_uuids = [None] * count
        instance_uuids = tuple(instance_uuids)
        if not instance_uuids:
            raise exception.InvalidRequest(reason="no instance uuids given")
        if num_instances is not None and num_instances != len(instance_uuids):
            raise exception.InvalidRequest(
                reason="num_instances is %s but %d instance uuids were given"
                % (num_instances, len(instance_uuids))
            )
        known = [u for u in instance_uuids if u is not None]
        if len(set(known)) != len(known):
            raise exception.InvalidRequest(reason="instance uuids repeat")
        if num_alternates < 0:
            raise exception.InvalidRequest(reason="num_alternates < 0")
        return cls(
            resources=amount,
            instance_uuids=instance_uuids,
            request_id=request_id or "req-%s" % uuid.uuid4(),
            placement=decision.Placement(
                ignore_hosts=frozenset(ignore_hosts or ()),
                force_hosts=frozenset(force_hosts or ()),
                force_nodes=frozenset(force_nodes or ()),
            ),
            num_alternates=num_alternates,
        )


@dataclasses.dataclass(frozen=True)
class Selection:
    """Where one instance goes, and the grant that holds its place."""

    instance_uuid: str
    host: str
    node: str
    node_uuid: str
    grant_id: int
    ticket: int
    resources: gs_resources.Resources
    alternates: tuple = ()
    """``Destination``s with room that hold no grant, best first."""


@dataclasses.dataclass
class Counters:
    """What this scheduler did, for the benchmark and for logs."""

    requests: int = 0
    placed: int = 0
    no_valid_host: int = 0
    attempts: int = 0
    conflicts: int = 0
    settles: int = 0


def default_name():
    return "%s:%d" % (socket.gethostname(), os.getpid())


class Scheduler:
    """Schedules requests through the grants protocol."""

    def __init__(self, store, settings, name=None, rng=None, hooks=None):
        self.store = store
        self.settings = settings
        self.name = name or default_name()
        self.rng = rng or random.Random()
        self.hooks = hooks or injection.NO_HOOKS
        self.counters = Counters()
        self.view_cache = gs_view.ViewCache(
            store,
            resync_interval=settings.view_resync_interval,
            overlap=settings.view_overlap,
        )

    def schedule(self, request, view=None):
        """Place every instance of ``request`` or none of them.

        :param view: a ``view.View`` to rank hosts with; by default one
            from this scheduler's cache (Nova's adapter passes a view that
            runs Nova's filters and weighers).
        :returns: one ``Selection`` per instance, in order.
        :raises NoValidHost: some instance could not be placed; every grant
            the request wrote has been withdrawn.
        """
        self.counters.requests += 1
        if view is None:
            view = self.view_cache.view()
        self.hooks.fire("view_loaded", request=request)
        selections = []
        try:
            for instance_uuid in request.instance_uuids:
                selections.append(self._place(view, request, instance_uuid))
        except exception.NoValidHost:
            self.counters.no_valid_host += 1
            self._withdraw(selections)
            raise
        except BaseException:
            self._withdraw(selections)
            raise
        self.hooks.fire("before_answer", selections=selections)
        self.counters.placed += len(selections)
        return selections

    def _withdraw(self, selections):
        if selections:
            LOG.debug(
                "Withdrawing %d grant(s) of an unplaceable request",
                len(selections),
            )
            self.store.withdraw([s.grant_id for s in selections])

    def _place(self, view, request, instance_uuid):
        amount = request.resources
        fallovers = 0
        while True:
            ranked = view.ranked(request, self.settings.host_subset_size)
            if not ranked:
                ranked = self._reload_or_settle(view, request)
            chosen = decision.pick(
                ranked, self.settings.host_subset_size, self.rng
            )
            self.counters.attempts += 1
            inserted = self.store.insert_grant(
                chosen.host_id,
                amount,
                self.name,
                instance_uuid,
                request.request_id,
                before_commit=self._hook("grant_inserted", chosen),
            )
            if inserted is None:
                view.forget(chosen.host_id)
                continue
            grant_id, ticket = inserted
            self.hooks.fire("grant_committed", host=chosen.host, ticket=ticket)
            won, fresh = self.store.verify_grant(
                grant_id, chosen.host_id, ticket
            )
            self.hooks.fire("grant_verified", host=chosen.host, won=won)
            if won:
                view.consume(chosen, amount)
                return Selection(
                    instance_uuid=instance_uuid,
                    host=chosen.host,
                    node=chosen.node,
                    node_uuid=chosen.node_uuid,
                    grant_id=grant_id,
                    ticket=ticket,
                    resources=amount,
                    alternates=view.alternates(request, chosen),
                )
            self.counters.conflicts += 1
            view.replace(chosen.host_id, fresh)
            fallovers += 1
            if fallovers > self.settings.max_fallovers:
                raise exception.NoValidHost(
                    count=len(request.instance_uuids),
                    resources=amount,
                    reason="gave up after %d fall-overs (max_fallovers)"
                    % self.settings.max_fallovers,
                )
            LOG.debug(
                "Grant on %s lost to an earlier one; falling over", chosen.host
            )

    def _hook(self, point, chosen):
        def fire(**info):
            self.hooks.fire(point, host=chosen.host, **info)

        return fire

    def _reload_or_settle(self, view, request):
        """Nothing fits in the view: look again before saying NoValidHost.

        The view may be stale (grants withdrawn, instances released) and
        undecided grants may yet lose; decide those on the hosts where they
        alone stand in the way, then look once more (DESIGN I2).
        """
        view.reload(self.store.load_view())
        ranked = view.ranked(request, self.settings.host_subset_size)
        if ranked:
            return ranked
        blocked = view.blocked_by_undecided(request)
        if blocked:
            for host_id in blocked:
                self.counters.settles += 1
                self.store.settle_host(host_id)
            view.reload(self.store.load_view())
            ranked = view.ranked(request, self.settings.host_subset_size)
            if ranked:
                return ranked
        raise exception.NoValidHost(
            count=len(request.instance_uuids),
            resources=request.resources,
            reason="no host has room for it",
        )
