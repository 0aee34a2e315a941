"""Nova's own choice, with no grant: the 13-16 path while the database is
down.

On Nova 13-16 nothing but the scheduler's choice and the compute's claim
stand between a request and a node (no placement claims), and Nova's
stock FilterScheduler decides from its HostStates alone: the host
manager's filters (capacity ones included, on Nova's compute node
records) and weighers, a random pick among the ``host_subset_size`` best,
``consume_from_request`` on the chosen HostState so that the next
instance of the request, and the next request of this process, see it
used.  ``StockChoice`` does exactly that over the driver's host manager,
which is what the driver answers while grant_scheduler's database cannot
be reached (``[grant_scheduler] database_failure = schedule``).  The
compute's own resource claim then guards each node, as it does for the
stock scheduler.
"""

import random

from grant_scheduler.nova import compat


class Chosen:
    """One instance's destination, in the shape ``driver._Answer`` reads
    (grant_scheduler's ``Selection``'s)."""

    def __init__(self, host_state, alternates=()):
        self.host = host_state.host
        self.node = host_state.nodename
        self.node_uuid = compat.field(host_state, "uuid")
        self.alternates = [Chosen(a) for a in alternates]


class Consumed:
    """What one process chose without grants, by node, until Nova's record
    of the node changes (the compute reported it, so its figures count
    what was built there): as Nova's kept HostStates remember it."""

    def __init__(self):
        self._by_node = {}

    def add(self, key, updated, spec_obj):
        """Remember ``spec_obj`` consumed on node ``key`` whose record was
        last updated at ``updated``."""
        stamp, specs = self._by_node.get(key, (None, []))
        if stamp != updated:
            specs = []
        self._by_node[key] = (updated, specs + [spec_obj])

    def apply(self, host_state):
        """Consume again on a fresh copy of Nova's HostState what was
        chosen since its record last changed (and forget the rest)."""
        key = (host_state.host, host_state.nodename)
        updated, specs = self._by_node.get(key, (None, ()))
        if not specs:
            return
        if updated != host_state.updated:
            del self._by_node[key]
            return
        for spec_obj in specs:
            host_state.consume_from_request(spec_obj)


class StockChoice:
    """Nova's FilterScheduler's ``_schedule`` over one request's
    HostStates."""

    def __init__(
        self,
        host_states,
        spec_obj,
        host_manager,
        subset_size=1,
        consumed=None,
        rng=random,
    ):
        """
        :param host_states: Nova's HostStates for this request (copies).
        :param host_manager: has ``get_filtered_hosts`` and
            ``get_weighed_hosts``.
        :param subset_size: Nova's ``host_subset_size``.
        :param consumed: ``Consumed`` of this process: what its earlier
            choices consumed, applied again to each HostState Nova has not
            updated since (Nova's scheduler keeps its HostStates, so its
            next request sees what the last one took).
        """
        self._host_states = list(host_states)
        self._spec = spec_obj
        self._host_manager = host_manager
        self._subset_size = max(1, subset_size or 1)
        self._consumed = consumed if consumed is not None else Consumed()
        self._rng = rng
        self._by_node = {}
        # NOTE(nova): consume_from_request stamps the HostState with the
        # time; the record's own stamp is read before.
        self._stamps = {
            (state.host, state.nodename): state.updated
            for state in self._host_states
        }
        for state in self._host_states:
            self._consumed.apply(state)

    def host_state(self, host, node):
        """The HostState a destination was chosen from."""
        return self._by_node.get((host, node))

    def select(self, instance_uuids, alternates=0):
        """One ``Chosen`` per instance, or None when not every instance
        found a host (Nova's NoValidHost)."""
        chosen = []
        hosts = self._host_states
        group = compat.field(self._spec, "instance_group")
        for index, instance_uuid in enumerate(instance_uuids):
            if instance_uuid and _has_field(self._spec, "instance_uuid"):
                self._spec.instance_uuid = instance_uuid
            hosts = list(
                self._host_manager.get_filtered_hosts(hosts, self._spec, index)
            )
            if not hosts:
                return None
            weighed = list(
                self._host_manager.get_weighed_hosts(hosts, self._spec)
            )
            best = weighed[: self._subset_size]
            pick = self._rng.choice(best).obj
            others = [w.obj for w in weighed if w.obj is not pick]
            same_cell = [
                o
                for o in others
                if compat.field(o, "cell_uuid")
                == compat.field(pick, "cell_uuid")
            ][:alternates]
            for state in [pick] + same_cell:
                self._by_node[(state.host, state.nodename)] = state
            pick.consume_from_request(self._spec)
            key = (pick.host, pick.nodename)
            self._consumed.add(key, self._stamps.get(key), self._spec)
            if group is not None and compat.field(group, "hosts") is not None:
                group.hosts.append(pick.host)
                group.obj_reset_changes(["hosts"])
            chosen.append(Chosen(pick, same_cell))
        return chosen


def _has_field(obj, name):
    fields = getattr(obj, "fields", None)
    return fields is None or name in fields
