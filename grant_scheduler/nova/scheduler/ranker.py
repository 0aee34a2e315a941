"""Nova's filters and weighers over HostStates that count live grants.

The grants protocol decides *whether* a host has room (``HostState.fits``
on grant_scheduler's own rows, then the grant's conditional write); Nova
decides which of the hosts with room is *best*, with its own code: the
host manager's ``get_filtered_hosts`` (``ignore_hosts``, ``force_hosts``,
``force_nodes``, ``requested_destination``, the ``_nova_check_type`` hint,
then the enabled filters) and ``get_weighed_hosts``.  They run over copies
of Nova's HostStates from which every live grant has been subtracted, so a
weigher that prefers free RAM sees the RAM other schedulers have promised
away as used.

The filters run once per instance of a request, as in Nova's
FilterScheduler: instance N+1 is ranked among the hosts that passed for
instance N, a lost grant drops the hosts that no longer fit from the
ranking instead of filtering again (all of them gone: the next ranking
filters anew, over the fresh read the scheduler makes before answering
NoValidHost), and alternates come from the same ranking.
"""

import copy

from grant_scheduler import api
from grant_scheduler.nova import compat


class NovaRanker(api.Ranker):
    """Nova's filters and weighers ranking one request's nodes.

    Only nodes that both Nova and grant_scheduler know are candidates.
    Each Nova HostState here is a copy, kept equal to Nova's figures minus
    the live grants last read for its node (``_applied``): through
    reloads, fall-overs and this request's own wins (which Nova's
    ``consume_from_request`` accounts, as Nova's scheduler does).
    """

    def __init__(
        self,
        host_states,
        spec_obj,
        host_manager,
        instance_uuids=(),
        subset_size=None,
    ):
        """
        :param host_states: Nova's HostStates for this request.
        :param host_manager: has ``get_filtered_hosts`` and
            ``get_weighed_hosts`` (Nova's HostManager).
        :param instance_uuids: the request's, in order (filters such as
            ServerGroupAntiAffinityFilter read ``spec_obj.instance_uuid``).
        :param subset_size: Nova's ``host_subset_size``: the choice is
            random among this many of the hosts Nova's weighers put first
            (Nova's default, 1, takes the best), whatever the protocol's
            own option says.
        """
        # NOTE: copies, because Nova 13-19 keep their HostStates between
        # requests and this request must not leave grants subtracted in
        # them; won() copies what consume_from_request changes in place.
        self._nova = {
            (hs.host, hs.nodename): copy.copy(hs) for hs in host_states
        }
        self._spec = spec_obj
        self._host_manager = host_manager
        self._instance_uuids = tuple(instance_uuids)
        self._applied = {}
        self._index = 0
        self._survivors = None
        self._ranking = None
        self._last_ranking = ()
        self._chosen = []
        self._amount = None
        self._subset_size = subset_size
        self.filter_runs = 0

    def host_state(self, host, node):
        """This request's copy of Nova's HostState for a node."""
        return self._nova[(host, node)]

    # -- the hook the scheduler calls ---------------------------------------

    def admits(self, state):
        return (state.host, state.node) in self._nova

    def subset_size(self, configured):
        return self._subset_size or configured

    def loaded(self, view):
        for state in view.states():
            self._subtract_grants(state)
        self._keep_ranking_that_fits(view)

    def rank(self, view, request, count):
        by_key = view.by_node()
        ranked = [by_key[k] for k in self._rank(view, request) if k in by_key]
        return ranked[:count]

    def won(self, view, state, amount):
        key = (state.host, state.node)
        # NOTE: Nova's figures are consumed by Nova's own code here, so the
        # grant is counted as applied rather than subtracted again.
        host_state = self._private_copy(key)
        host_state.consume_from_request(self._spec)
        self._applied[key] = self._applied.get(key, api.NOTHING) + amount
        self._add_to_group(host_state)
        self._chosen.append(key)
        self._last_ranking = self._ranking[1] if self._ranking else ()
        self._survivors = frozenset(self._last_ranking)
        self._index += 1
        self._ranking = None

    def alternates(self, view, request, chosen):
        """Hosts that passed for the instance just placed, best first, in
        the chosen host's cell, none this request has chosen."""
        by_key = view.by_node()
        cell = getattr(
            self._nova[(chosen.host, chosen.node)], "cell_uuid", None
        )
        found = []
        for key in self._last_ranking:
            if key in self._chosen or key not in by_key:
                continue
            if getattr(self._nova[key], "cell_uuid", None) != cell:
                continue
            state = by_key[key]
            found.append(
                api.Destination(state.host, state.node, state.node_uuid)
            )
            if len(found) == request.num_alternates:
                break
        return tuple(found)

    # -- keeping Nova's figures net of live grants --------------------------

    def _keep_ranking_that_fits(self, view):
        """After a lost grant the scheduler reloads the view: keep this
        instance's ranking, less the nodes that no longer fit, instead of
        filtering again.  An empty ranking is dropped, so the next one
        (the full read before a NoValidHost answer) filters every node
        that fits anew."""
        if self._ranking is None:
            return
        index, keys = self._ranking
        by_key = view.by_node()
        keys = [
            k
            for k in keys
            if k in by_key
            and (self._amount is None or by_key[k].fits(self._amount))
        ]
        self._ranking = (index, keys) if keys else None

    def _subtract_grants(self, state):
        key = (state.host, state.node)
        delta = state.granted - self._applied.get(key, api.NOTHING)
        host_state = self._nova[key]
        host_state.free_ram_mb -= delta.memory_mb
        host_state.free_disk_mb -= delta.disk_gb * 1024
        host_state.vcpus_used += delta.vcpus
        self._applied[key] = state.granted

    def _private_copy(self, key):
        """Give the HostState its own copies of what Nova's consumption
        changes in place (PCI pools, the instances map)."""
        host_state = self._nova[key]
        if getattr(host_state, "pci_stats", None) is not None:
            host_state.pci_stats = copy.deepcopy(host_state.pci_stats)
        if getattr(host_state, "instances", None) is not None:
            host_state.instances = dict(host_state.instances)
        return host_state

    def _add_to_group(self, host_state):
        """What Nova's FilterScheduler does after choosing a host, for the
        (anti-)affinity filters of the next instance."""
        group = getattr(self._spec, "instance_group", None)
        if group is None:
            return
        group.hosts.append(host_state.host)
        group.obj_reset_changes(["hosts"])
        instance_uuid = self._current_instance_uuid()
        if instance_uuid and instance_uuid not in host_state.instances:
            host_state.instances[instance_uuid] = compat.objects().Instance(
                uuid=instance_uuid
            )

    # -- ranking ------------------------------------------------------------

    def _current_instance_uuid(self):
        if self._index < len(self._instance_uuids):
            return self._instance_uuids[self._index]
        return None

    def _rank(self, view, request):
        """Keys of the hosts that pass Nova's filters for this instance,
        best first; computed once per instance."""
        self._amount = request.resources
        if self._ranking is not None and self._ranking[0] == self._index:
            return self._ranking[1]
        instance_uuid = self._current_instance_uuid()
        if instance_uuid and hasattr(self._spec, "obj_reset_changes"):
            self._spec.instance_uuid = instance_uuid
            self._spec.obj_reset_changes(["instance_uuid"])
        candidates = [
            self._nova[(s.host, s.node)]
            for s in view.states()
            if s.fits(request.resources) and self._survived(s)
        ]
        self.filter_runs += 1
        passed = list(
            self._host_manager.get_filtered_hosts(
                candidates, self._spec, self._index
            )
            or ()
        )
        weighed = (
            self._host_manager.get_weighed_hosts(passed, self._spec)
            if passed
            else []
        )
        keys = [(w.obj.host, w.obj.nodename) for w in weighed]
        self._ranking = (self._index, keys)
        return keys

    def _survived(self, state):
        survivors = self._survivors
        return survivors is None or (state.host, state.node) in survivors
