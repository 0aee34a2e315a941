"""The ``grant_scheduler`` scheduler driver for Nova 13 to 22.

Enabled with ``[DEFAULT] scheduler_driver = grant_scheduler`` (Nova 13-14;
the class path ``grant_scheduler.nova.driver.GrantSchedulerDriver`` works
too) or ``[scheduler] driver = grant_scheduler`` (15-22).  Nova's scheduler
manager loads it with ``stevedore.driver.DriverManager(
"nova.scheduler.driver", name, invoke_on_load=True)`` before forking its
workers, so construction only records what it was given (H9).

The driver binds each release's call to one of two engines and answers
in the shape that release's manager expects:

* Nova 17-22, every call that passes instance uuids and wants Selection
  objects: ``placement_engine``, Nova's own FilterScheduler with a grant
  written before each placement claim (Nova's request filters,
  allocation candidates, filters, weighers and options decide,
  placement records, the grant guards the node);
* otherwise (13-16, and older conductors): ``protocol_engine``, Nova's
  filters and weighers ranking what the protocol grants.

What both are built from, the host manager that consumes grants from
the instance information computes send (so Nova 22 needs nothing
installed on its computes), and the periodic tasks (reap, register,
follow grants to their instances, reconcile with Nova's records) are
``scheduler.parts``.
"""

from oslo_log import log as logging

from grant_scheduler.nova import compat
from grant_scheduler.nova.scheduler import parts

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
MANAGER_CALLS = parts.MANAGER_CALLS
StandaloneHostManager = parts.StandaloneHostManager


class GrantSchedulerDriver(parts.SchedulerParts):
    """A Nova scheduler driver that grants before it answers."""

    # NOTE(placement): what Nova's SchedulerManager reads to decide whether
    # it runs Nova's request filters and asks placement for allocation
    # candidates before calling the driver.  On Nova 17-22 the driver
    # claims the chosen candidate as Nova's FilterScheduler does; on 18-22
    # it finds the candidates itself (``candidates``), so the manager is
    # told False.  Setting it False, as Nova's own tests do to stand for a
    # driver that does not use placement, turns the driver's placement
    # claims off.
    @property
    def USES_ALLOCATION_CANDIDATES(self):
        return self._claims_in_placement and not self.asks_candidates_itself

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
        super().__init__(conf=conf, grant_scheduler=grant_scheduler)
        self._claims_in_placement = compat.claims_in_placement()
        self.asks_candidates_itself = (
            self._claims_in_placement and compat.asks_candidates_itself()
        )

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
            # protocol's own path grants.
            return self.placement_engine.select(
                context,
                spec_obj,
                call["instance_uuids"],
                (
                    call["alloc_reqs_by_rp_uuid"],
                    call["provider_summaries"],
                    call["allocation_request_version"],
                ),
                bool(call["return_alternates"]),
            )
        alternates = 0
        if call["answer"] == SELECTIONS and call["return_alternates"]:
            max_attempts = compat.nova_option(
                self.conf, "max_attempts", DEFAULT_MAX_ATTEMPTS
            )
            alternates = max(0, max_attempts - 1)
        selections, host_state = self.protocol_engine.select(
            context, spec_obj, call["instance_uuids"], alternates
        )
        return _Answer(host_state).build(call["answer"], selections)


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


class _Answer:
    """Selections in the form the calling release expects."""

    def __init__(self, host_state):
        """:param host_state: ``host_state(host, node)``, the request's
        Nova HostState of a node, or None."""
        self._host_state = host_state
        self._objects = compat.objects()

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
