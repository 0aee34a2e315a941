"""The driver's ``host_manager``: Nova's own, consuming grants.

``GrantsHostManager`` is Nova's HostManager (aggregates, cells, instance
tracking, ``get_filtered_hosts`` and ``get_weighed_hosts`` all Nova's)
with five additions:

* the instance-info calls Nova's scheduler manager forwards to it
  (``update_instance_info``, ``delete_instance_info``,
  ``sync_instance_info``) also claim and release in grant_scheduler
  (``instance_info.InstanceInfoClaims``), after Nova's own bookkeeping;
* ``host_states(context, spec_obj)`` reads Nova's HostStates on every
  release (``compat.host_states``);
* ``instances_on_node`` reads a node's instances with their flavours from
  the node's cell, for claiming what a node already runs when
  grant_scheduler first sees it;
* ``get_filtered_hosts`` remembers, per request, which of Nova's enabled
  filters removed the last hosts (``rejected_by``, looked for once, when
  the request ends in NoValidHost);
* Nova's read of every compute node and compute service per request
  becomes a read of the rows that changed (``computes.CellComputes``),
  and Nova's objects and HostStates are rebuilt only for those: each
  request gets its own copies of HostStates that are otherwise kept
  between requests, with the aggregates of that moment and Nova's own
  instances map of the host, as Nova builds them;
* ``get_host_states_by_uuids`` also takes a ``Sample`` for its uuids:
  at most ``[scheduler] max_placement_results`` nodes with room, drawn
  at random, as placement's candidates bound the stock scheduler's
  (``filter_scheduler.GrantingFilterScheduler``), so a request copies,
  filters and weighs a bounded number of HostStates however large the
  cloud.

Only imported when Nova is.
"""

import copy
import random
import threading
import weakref

from nova import conf as nova_conf
from nova import context as nova_context
from nova import objects
from nova.scheduler import host_manager as nova_host_manager
from oslo_log import log as logging

from grant_scheduler.nova import amounts as nova_amounts
from grant_scheduler.nova import compat
from grant_scheduler.nova import outage as outage_module
from grant_scheduler.nova.books import claims
from grant_scheduler.nova.books import instance_info
from grant_scheduler.nova.scheduler import computes as computes_module

LOG = logging.getLogger(__name__)


def _amount_attrs():
    """An instance's fields its amount is read from: always its flavour
    (13-16 too), and what placement's amount adds."""
    return ["flavor"] + [
        a for a in nova_amounts.amount_attrs() if a != "flavor"
    ]


class Sample:
    """``compute_uuids`` for Nova's ``get_host_states_by_uuids`` that
    names no uuid but a rule: at most ``limit`` of the nodes ``offers``
    admits, drawn in random order from every node read.

    This is what placement returns to the stock scheduler as its
    candidates with ``[scheduler] max_placement_results`` set to
    ``limit`` and ``randomize_allocation_candidates`` on: a random subset
    of the providers with room.  Without that option placement returns
    the first ``limit`` in the order of its own query, which sends every
    scheduler's requests to the same nodes while they have room; the
    random draw is a set placement could have returned either way and
    spreads concurrent requests, as Nova's documentation advises for
    large clouds.
    """

    def __init__(self, offers, limit, rng=None):
        """
        :param offers: ``f(node uuid)``, True for a node with room.
        :param limit: at most this many nodes.
        :param rng: ``random.Random`` (tests).
        """
        self._offers = offers
        self._limit = limit
        self._rng = rng or random

    def choose(self, compute_nodes):
        """``{cell uuid: [ComputeNode]}`` of the chosen nodes, from every
        cell's nodes: nodes are drawn one at a time (a partial shuffle)
        until ``limit`` are admitted, so only as many are judged as it
        takes."""
        # NOTE: two flat lists, shuffled together, rather than a pair per
        # node: at 10,000 nodes a pair each is 10,000 objects a request,
        # and the collector's passes over every object they bring on.
        pool, cells = [], []
        for cell_uuid, nodes in compute_nodes.items():
            pool.extend(nodes)
            cells.extend([cell_uuid] * len(nodes))
        chosen = {cell_uuid: [] for cell_uuid in compute_nodes}
        taken = 0
        for i in range(len(pool)):
            if taken >= self._limit:
                break
            j = self._rng.randrange(i, len(pool))
            pool[i], pool[j] = pool[j], pool[i]
            cells[i], cells[j] = cells[j], cells[i]
            node = pool[i]
            if self._offers(node.uuid):
                chosen[cells[i]].append(node)
                taken += 1
        return chosen


def _among(compute_nodes, compute_uuids):
    """``compute_nodes`` restricted as Nova restricts them to
    ``compute_uuids`` (a list, or a ``Sample``)."""
    if compute_uuids is None:
        return compute_nodes
    if isinstance(compute_uuids, Sample):
        return compute_uuids.choose(compute_nodes)
    wanted = set(compute_uuids)
    return {
        cell_uuid: [node for node in nodes if node.uuid in wanted]
        for cell_uuid, nodes in compute_nodes.items()
    }


def _copied(host_state):
    """What ``copy.copy`` makes of a HostState (a new object of its class
    sharing its attributes; Nova's HostState defines no copy protocol of
    its own), made directly: one per node a request judges."""
    copied = object.__new__(type(host_state))
    copied.__dict__.update(host_state.__dict__)
    return copied


def _beaten(before, service):
    """What ``HostState.update(service=dict(service))`` sets as the
    HostState's service, from ``before`` (its service as the HostState
    has it) when only the heartbeat of ``service`` moved since: at 10,000
    nodes a thousand rows heartbeat each second, and the whole object's
    fields and Nova's lock would be gone through for each."""
    service_dict = dict(before)
    for field in computes_module.HEARTBEAT:
        if service.obj_attr_is_set(field):
            service_dict[field] = getattr(service, field)
    return nova_host_manager.ReadOnlyDict(service_dict)


class _PrivateHostState(nova_host_manager.HostState):
    """A HostState that is one request's copy of one kept between
    requests: what Nova's consumption changes in place is copied first.

    Not ``instances``: it is never the kept HostState's (each request's
    copy is given Nova's own, ``_get_host_states``), and it must stay
    Nova's.  Where a compute's instance info is flowing it is the dict
    Nova's HostManager keeps for the host, and the stub Nova's
    FilterScheduler adds to it for the instance it placed
    (``_consume_selected_host``) is what keeps the next request of an
    anti-affinity group off the host until the compute reports."""

    def consume_from_request(self, spec_obj):
        if getattr(self, "pci_stats", None) is not None:
            self.pci_stats = copy.deepcopy(self.pci_stats)
        return super().consume_from_request(spec_obj)


class GrantsHostManager(nova_host_manager.HostManager):
    """Nova's HostManager whose instance info claims grants."""

    host_state_cls = _PrivateHostState

    def __init__(
        self,
        grant_scheduler,
        nodes_of_host,
        outage=None,
        allocations=None,
        timing=None,
    ):
        """
        :param grant_scheduler: ``f()`` giving the ``GrantScheduler``.
        :param nodes_of_host: ``f(host)`` giving the host's node names.
        :param outage: ``f()`` giving the process's ``outage.Outage``:
            while the database is taken as down, instance info is not
            followed (the reconciliation that ends the outage writes it).
        :param allocations: ``f(node_uuid)``, what each consumer holds on
            the node's provider in placement (``claims.on_provider``).
        """
        self._outage = outage
        self.instance_claims = instance_info.InstanceInfoClaims(
            grant_scheduler, nodes_of_host, allocations
        )
        self._rejected_by = weakref.WeakKeyDictionary()
        self._timing = timing or computes_module.Timing.of(nova_conf.CONF)
        self._computes = {}
        """``{cell uuid: computes.CellComputes}`` of the cells read so
        far, each with its cell mapping."""
        self._kept = {}
        """``{(host, node): (HostState, ComputeNode, Service, beat)}``,
        beat the service's heartbeat count (``CellComputes.beats``) as the
        HostState has it."""
        self._kept_lock = threading.Lock()
        super().__init__()

    # -- Nova's compute nodes and services, rebuilt where they changed -------

    def _get_computes_for_cells(self, context, cells, compute_uuids=None):
        """Nova's ``(compute nodes by cell uuid, services by host)``, of
        the nodes among ``compute_uuids`` (a list as Nova passes it, or a
        ``Sample``)."""
        compute_nodes, services = self._read_computes(context, cells)
        return _among(compute_nodes, compute_uuids), services

    def _read_computes(self, context, cells):
        """Every compute node by cell uuid and every service by host, as
        Nova's own read would find them; only the rows that changed are
        read (``computes.CellComputes``)."""
        compute_nodes = {}
        services = {}
        for cell in cells:
            try:
                with nova_context.target_cell(context, cell) as cctxt:
                    with self._kept_lock:
                        computes = self._computes.get(cell.uuid)
                        if computes is None:
                            computes = computes_module.CellComputes(
                                self._timing, cell=cell
                            )
                            self._computes[cell.uuid] = computes
                        nodes, cell_services = computes.read(cctxt)
            except Exception:  # noqa: BLE001 - as Nova: skip the cell
                LOG.warning(
                    "Failed to get computes for cell %s",
                    cell.uuid,
                    exc_info=True,
                )
                continue
            compute_nodes[cell.uuid] = nodes
            services.update(cell_services)
        return compute_nodes, services

    def read_due(self, context, ahead):
        """In each cell read so far, the reads of every compute node or
        service row that fall due within ``ahead`` seconds, made now
        (``computes.CellComputes.read_due``): a loop of the process's own
        runs it every ``ahead`` seconds, so that requests seldom carry
        them.  Each enabled cell not read yet (at the process's start) is
        read whole, and every node's HostState built (``warm``), so that
        the first requests do not carry that either.

        :returns: how many tables were read whole.
        """
        read = self.warm(context)
        for cell_uuid, computes in list(self._computes.items()):
            try:
                with nova_context.target_cell(context, computes.cell) as cctxt:
                    with self._kept_lock:
                        read += computes.read_due(cctxt, ahead)
            except Exception:  # noqa: BLE001 - as Nova: the next cell
                LOG.warning(
                    "Failed to read the computes of cell %s",
                    cell_uuid,
                    exc_info=True,
                )
        return read

    def warm(self, context):
        """Read every compute node and service row of each enabled cell
        not read yet, and build each of its nodes' HostState, as the
        first request that reads the cell would (Nova 18-22, whose host
        manager knows its enabled cells from its start).

        :returns: how many tables were read whole.
        """
        unread = [
            cell
            for cell in getattr(self, "enabled_cells", None) or ()
            if cell.uuid not in self._computes
        ]
        if not unread:
            return 0
        compute_nodes, services = self._read_computes(context, unread)
        self._keep(compute_nodes, services)
        return 2 * len(compute_nodes)

    def _new_host_state(self, key, cell_uuid, compute):
        return self.host_state_cls(*key, cell_uuid)

    def _get_host_states(self, context, compute_nodes, services):
        """One HostState per node for this request: a copy of the one kept
        since its compute node or service last changed, with the
        aggregates and instances Nova's HostManager knows now."""
        found = []
        for kept, compute in self._keep(compute_nodes, services):
            host_state = _copied(kept)
            # NOTE: filters write limits (NUMATopologyFilter); the rest
            # that consumption changes in place is copied on consumption.
            host_state.limits = dict(host_state.limits or {})
            host_state.aggregates = self._get_aggregates_info(compute.host)
            host_state.instances = self._get_instance_info(context, compute)
            found.append(host_state)
        return iter(found)

    def _keep(self, compute_nodes, services):
        """``[(HostState, ComputeNode)]`` of each node with a service: the
        HostState kept since its compute node or service last changed,
        built again where one did."""
        kept = {}
        found = []
        for cell_uuid, computes in compute_nodes.items():
            cell = self._computes.get(cell_uuid)
            beats = cell.beats if cell is not None else {}
            for compute in computes:
                service = services.get(compute.host)
                if service is None:
                    LOG.warning(
                        "No compute service record found for host %s",
                        compute.host,
                    )
                    continue
                key = (compute.host, compute.hypervisor_hostname)
                beat = beats.get(key[0])
                entry = self._kept.get(key)
                if (
                    entry is None
                    or entry[1] is not compute
                    or entry[2] is not service
                ):
                    host_state = self._new_host_state(key, cell_uuid, compute)
                    host_state.update(compute, dict(service))
                    entry = (host_state, compute, service, beat)
                elif entry[3] != beat:
                    # The service's heartbeat alone moved, set on its kept
                    # object (``computes.HEARTBEAT``): its copy too.
                    entry[0].service = _beaten(entry[0].service, service)
                    entry = (entry[0], compute, service, beat)
                kept[key] = entry
                found.append((entry[0], compute))
        with self._kept_lock:
            self._kept.update(kept)
            # More kept than rows: a node's row went (or was renamed), and
            # its HostState goes too.
            if len(self._kept) > sum(map(len, self._computes.values())):
                for key, (host_state, compute, *_) in list(self._kept.items()):
                    computes = self._computes.get(host_state.cell_uuid)
                    if computes is None or not computes.holds(compute):
                        del self._kept[key]
        return found

    # -- why no host passed -----------------------------------------------

    def get_filtered_hosts(self, hosts, spec_obj, index=0):
        hosts = list(hosts)
        passed = list(super().get_filtered_hosts(hosts, spec_obj, index))
        if hosts and not passed:
            # NOTE: which filter it was is looked for only if the request
            # ends in NoValidHost, once, over the last hosts filtered.
            self._rejected_by[spec_obj] = (hosts, index)
        return passed

    def rejected_by(self, spec_obj):
        """The name of Nova's filter that removed the last hosts of
        ``spec_obj``'s request, or None."""
        found = self._rejected_by.get(spec_obj)
        if isinstance(found, tuple):
            found = _rejecting_filter(self, found[0], spec_obj, found[1])
            self._rejected_by[spec_obj] = found
        return found

    # -- reading Nova's view ----------------------------------------------

    def host_states(self, context, spec_obj=None):
        """Nova's HostStates of every compute node, on any release."""
        return compat.host_states(self, context, spec_obj)

    def _cell_context(self, context, host):
        cell = compat.cell_of_host(self, context, host)
        return nova_context.target_cell(context, cell)

    def instances(self, context, host, instance_uuids):
        """``host``'s instances among ``instance_uuids``, with flavours."""
        with self._cell_context(context, host) as cctxt:
            found = objects.InstanceList.get_by_filters(
                cctxt,
                {"uuid": list(instance_uuids), "host": host, "deleted": False},
                expected_attrs=_amount_attrs(),
            )
            return list(found)

    def instances_on_node(self, context, host, node):
        """Every instance Nova places on ``host``/``node``, with flavours."""
        with self._cell_context(context, host) as cctxt:
            found = objects.InstanceList.get_by_host_and_node(
                cctxt, host, node, expected_attrs=_amount_attrs()
            )
            return list(found)

    def instance_resources(self, context, instance):
        """An instance's ``Resources`` by its flavour, the flavour and
        root disk read from its cell when the instance lacks them."""
        host = getattr(instance, "host", None)
        if not instance.obj_attr_is_set("flavor") and host:
            loaded = self.instances(context, host, [instance.uuid])
            if loaded:
                instance = loaded[0]
        if not host:
            return claims.instance_resources(context, instance)
        with self._cell_context(context, host) as cctxt:
            return claims.instance_resources(
                cctxt, instance, is_bfv=self.is_volume_backed(cctxt, instance)
            )

    def is_volume_backed(self, context, instance):
        """Nova's answer, from the instance's block device mappings."""
        return claims.is_volume_backed(context, instance)

    # -- the instance info computes send ----------------------------------

    def update_instance_info(self, context, host_name, instance_info):
        super().update_instance_info(context, host_name, instance_info)
        self._guarded(
            self.instance_claims.updated,
            context,
            host_name,
            list(instance_info.objects),
            self.instance_resources,
            True,
        )

    def delete_instance_info(self, context, host_name, instance_uuid):
        super().delete_instance_info(context, host_name, instance_uuid)
        self._guarded(
            self.instance_claims.deleted, host_name, instance_uuid, True
        )

    def sync_instance_info(self, context, host_name, instance_uuids):
        super().sync_instance_info(context, host_name, instance_uuids)
        self._guarded(
            self.instance_claims.synced,
            context,
            host_name,
            list(instance_uuids),
            self.instances,
            self.instance_resources,
        )

    def _guarded(self, call, *args):
        """Nova's own bookkeeping is done; a failure here is only logged."""
        outage = self._outage() if self._outage is not None else None
        if outage is not None and not outage.usable():
            return
        try:
            call(*args)
        except outage_module.FAILURES as exc:
            if outage is None:
                LOG.exception("grant_scheduler could not follow instance info")
            else:
                outage.failed(exc, "following instance info")
        except Exception:  # noqa: BLE001 - never fail Nova's RPC handler
            LOG.exception("grant_scheduler could not follow instance info")


def _rejecting_filter(host_manager, hosts, spec_obj, index=0):
    """The name of ``host_manager``'s enabled filter that removes the last
    of ``hosts``, run one by one as Nova's filter handler runs them; None
    when no single filter does (the request's ignore, force or destination
    rules)."""
    handler = getattr(host_manager, "filter_handler", None)
    enabled = getattr(host_manager, "enabled_filters", None)
    if handler is None or not enabled:
        return None
    remaining = list(hosts)
    for host_filter in enabled:
        remaining = list(
            handler.get_filtered_objects(
                [host_filter], remaining, spec_obj, index
            )
            or ()
        )
        if not remaining:
            return type(host_filter).__name__
    return None
