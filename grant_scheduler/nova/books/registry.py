"""Nova's compute nodes as grant_scheduler rows.

A node Nova knows and grant_scheduler does not is registered (insert
only, so concurrent schedulers cannot overwrite each other or a row claims
maintain) with no usage; the process that created the row then claims
the instances Nova already places on the node, so the node's usage is the
sum of claimed instances from the start (I4).  The driver does this per
request only for nodes its view does not know; ``sync`` (from
``run_periodic_tasks``) also reports capacity that changed (totals,
reserved amounts, allocation ratios) without touching usage.

Where a node's capacity comes from depends on the release:

* Nova 17-22 (``PlacementCapacities``): the node's provider inventory in
  placement (``inventory``), which decides there; a node placement has
  no inventory for is not registered yet.  What placement holds there
  beyond the books (``others``) is noted at each look.
* Nova 13-16 (``RecordCapacities``): Nova's compute node record, its
  reserved share taken from Nova's ``reserved_host_*`` options.
"""

import time

from oslo_log import log as logging

from grant_scheduler import api
from grant_scheduler.nova import amounts as nova_amounts
from grant_scheduler.nova import fanout

LOG = logging.getLogger(__name__)

# Seconds between two reads of one node's inventory on refused grants.
_REFRESH_EVERY = 10.0


class RecordCapacities:
    """Capacities from Nova's compute node records (Nova 13-16)."""

    # Nodes ``sync`` reads at a time: the records are in hand.
    at_once = 1

    def __init__(self, reserved):
        """:param reserved: ``f()`` giving the reserved ``Resources``."""
        self._reserved = reserved

    def of(self, context, host_state):
        return nova_amounts.capacity_of(host_state, self._reserved())

    def allocations(self, node_uuid):
        """None: no placement before Nova 17."""
        return None

    def to_check(self, context, host_states):
        """The nodes whose capacity ``sync`` compares: every one."""
        return host_states

    def others(self, node_uuid):
        """Nothing: the books are the only record before placement."""
        return api.NOTHING

    def look_again(self, context, state):
        """Nothing to look at."""

    def look_now(self, context, node_uuid):
        """None: no placement before Nova 17."""
        return None

    def of_node(self, context, node_uuid):
        """None: a record is read with every node's, at ``sync``."""
        return None


class PlacementCapacities:
    """Capacities from placement's inventories (Nova 17-22)."""

    def __init__(self, inventory, at_once=1):
        """
        :param inventory: ``inventory.PlacementInventory``.
        :param at_once: nodes ``sync`` reads from placement at a time
            (``[grant_scheduler] sync_concurrency``).
        """
        self._inventory = inventory
        self._others = {}
        self.at_once = at_once

    def others(self, node_uuid):
        """What placement held on the node at the last look beyond the
        books' usage and live grants (``api.NOTHING`` if nothing)."""
        return self._others.get(node_uuid, api.NOTHING)

    def look_again(self, context, state):
        """Note what placement holds on ``state``'s node now that the
        books do not (a consumer that is no instance the books follow)."""
        usage = self._inventory.usage(context, state.node_uuid)
        if usage is None:
            return
        others = nova_amounts.not_below_zero(
            usage - state.used - state.granted
        )
        if others == api.NOTHING:
            self._others.pop(state.node_uuid, None)
        else:
            self._others[state.node_uuid] = others

    def look_now(self, context, node_uuid):
        """What placement has for the node now: ``(usage, capacity)`` as
        ``inventory.PlacementInventory.look`` answers (one ``GET
        .../usages``, and one ``GET .../inventories`` where the provider
        moved since the last sync).

        Nothing is noted from it: against the books as this request last
        read them, the grants other requests have made since, claimed in
        placement already, would look like another consumer's (and leave
        the node out of later requests where placement has room); the
        periodic look notes what is beyond the books; the inventory is
        reported to the books by the next sync or a refused grant."""
        return self._inventory.look(context, node_uuid)

    def of(self, context, host_state):
        return self.of_node(context, host_state.uuid)

    def allocations(self, node_uuid):
        """What each consumer holds on the node's provider now, or None
        (``inventory.PlacementInventory.allocations``)."""
        return self._inventory.allocations(None, node_uuid)

    def of_node(self, context, node_uuid):
        """The node's capacity in placement now, or None."""
        return self._inventory.capacity(context, node_uuid)

    def to_check(self, context, host_states):
        """The nodes whose provider changed in placement since the last
        sync."""
        changed = self._inventory.changed(context)
        if not changed:
            return []
        return [h for h in host_states if h.uuid in changed]


class NodeRegistry:
    """Registers Nova's compute nodes in one scheduler process."""

    def __init__(self, grant_scheduler, capacities, host_manager):
        """
        :param grant_scheduler: ``f()`` giving the ``GrantScheduler``.
        :param capacities: ``f()`` giving ``RecordCapacities`` or
            ``PlacementCapacities``.
        :param host_manager: ``f()`` giving the ``GrantsHostManager``
            (``instances_on_node``, ``instance_claims``), or None.
        """
        self._gs = grant_scheduler
        self._capacities = capacities
        self._host_manager = host_manager
        self._refused = {}  # (host, node) -> capacity that was refused
        self._refreshed = {}  # node uuid -> time.monotonic() of a refresh

    def register_unknown(self, context, known, host_states):
        """Register the nodes of ``host_states`` not in ``known``, and take
        the new uuid of a node Nova has re-created under the same names.

        :param known: ``{(host, node): HostState}`` of grant_scheduler's
            rows.
        :returns: True when a row was created or changed.
        """
        unknown = []
        for host_state in host_states:
            if host_state.uuid is None:
                continue  # Nova has not yet seen its usage
            # NOTE: the common case, a node known under its uuid, costs no
            # capacity arithmetic: this runs for every node per request.
            state = known.get((host_state.host, host_state.nodename))
            if state is None or state.node_uuid not in (
                None,
                host_state.uuid,
            ):
                unknown.append((host_state, state))
        if not unknown:
            return False
        capacities = self._capacities()
        changed = []

        def register(pair):
            host_state, state = pair
            capacity = capacities.of(context, host_state)
            if capacity is None:
                return  # placement has no inventory for it yet
            if state is not None:
                changed.append(self._recreated(host_state, capacity))
            elif self._refused.get(
                (host_state.host, host_state.nodename)
            ) != capacity and self._register(context, host_state, capacity):
                changed.append(True)

        fanout.each(unknown, register, capacities.at_once)
        return any(changed)

    def _recreated(self, host_state, capacity):
        """Nova deleted a compute node and made a new one of the same
        names (a service deleted and started again): the row follows the
        new record, its claims stay."""
        host, node = host_state.host, host_state.nodename
        try:
            self._gs().report_host(
                host, node, capacity, node_uuid=host_state.uuid
            )
        except api.InvalidResources as exc:
            LOG.warning("Compute node %s/%s not updated: %s", host, node, exc)
            return False
        LOG.info(
            "Compute node %s/%s was re-created by Nova as %s",
            host,
            node,
            host_state.uuid,
        )
        return True

    def refresh(self, context, state):
        """Report ``state``'s node again if its capacity changed where it
        is read node by node (placement); True when it did.

        :param state: grant_scheduler's ``HostState`` of the node.
        """
        # NOTE(placement): most refused grants lost a race for the node's
        # last room; placement is read again for a node at most every
        # _REFRESH_EVERY seconds, so that contention does not become
        # placement requests.
        now = time.monotonic()
        if now - self._refreshed.get(state.node_uuid, -_REFRESH_EVERY) < (
            _REFRESH_EVERY
        ):
            return False
        self._refreshed[state.node_uuid] = now
        capacity = self._capacities().of_node(context, state.node_uuid)
        if capacity is None or nova_amounts.same_capacity(
            capacity, state.capacity
        ):
            return False
        return self._report(state, capacity, state.node_uuid)

    def _report(self, state, capacity, node_uuid):
        try:
            self._gs().report_host(
                state.host, state.node, capacity, node_uuid=node_uuid
            )
        except api.InvalidResources as exc:
            LOG.warning(
                "Capacity of %s/%s not updated: %s",
                state.host,
                state.node,
                exc,
            )
            return False
        LOG.info(
            "Capacity of %s/%s is now %s", state.host, state.node, capacity
        )
        return True

    def sync(self, context, states, host_states):
        """Register unknown nodes and report changed capacities.

        :param states: grant_scheduler's ``HostState``s.
        """
        by_key = {(s.host, s.node): s for s in states}
        self._refused.clear()
        if self.register_unknown(context, by_key, host_states):
            by_key = {(s.host, s.node): s for s in self._gs().view().states()}
        capacities = self._capacities()
        to_check = []
        for host_state in capacities.to_check(context, host_states):
            state = by_key.get((host_state.host, host_state.nodename))
            if state is not None and host_state.uuid is not None:
                to_check.append((host_state, state))

        def check(pair):
            host_state, state = pair
            capacities.look_again(context, state)
            capacity = capacities.of(context, host_state)
            if capacity is not None and not nova_amounts.same_capacity(
                capacity, state.capacity
            ):
                self._report(state, capacity, host_state.uuid)

        # NOTE(placement): one or two requests a node, every node at a
        # process's first sync: a few nodes at a time.
        fanout.each(to_check, check, capacities.at_once)

    def _register(self, context, host_state, capacity):
        host, node = host_state.host, host_state.nodename
        try:
            created = self._gs().register_host(
                host, node, capacity, node_uuid=host_state.uuid
            )
        except api.InvalidResources as exc:
            self._refused[(host, node)] = capacity
            LOG.warning(
                "Compute node %s/%s not scheduled by grant_scheduler: %s",
                host,
                node,
                exc,
            )
            return False
        if created is None:
            return False  # another scheduler registered it meanwhile
        LOG.info("Registered compute node %s/%s: %s", host, node, capacity)
        self._claim_existing(context, host, node)
        return True

    def _claim_existing(self, context, host, node):
        manager = self._host_manager()
        find = getattr(manager, "instances_on_node", None)
        if find is None:
            return
        try:
            instances = find(context, host, node)
        except Exception:  # noqa: BLE001 - the host's next sync claims them
            LOG.exception("Could not read the instances of %s/%s", host, node)
            return
        # NOTE: the row is new, so nothing is claimed on it, whatever this
        # process remembers (a database replaced under it).
        manager.instance_claims.forget(host, node)
        if instances:
            manager.instance_claims.updated(
                context, host, instances, manager.instance_resources
            )
