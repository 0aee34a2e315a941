"""Live grants followed to their instances in Nova's records.

A grant holds its room until it is consumed.  The compute side consumes
it late (the instance information casts come after the spawn, and an
Ironic deploy or a large image can outlast ``grant_ttl``), or never (the
instance never reaches a compute).  Nova's records say sooner: the
resource tracker's claim on the compute saves the instance's host and
node in the cell database before the spawn begins, and an instance Nova
gives up is deleted, or left in ERROR without a host, at once.

``GrantFollower.run`` reads, for every live grant, its instance in Nova's
records (the instance mappings in one query, then one query per cell for
the instances and one for their block device mappings), and:

* an instance that is building (or unshelving) on a node is counted
  there at its flavour (``GrantScheduler.correct_claims``): its grant on
  that node is consumed, its grants elsewhere are withdrawn (the first
  host's grant of a build rescheduled to an alternate), and it is counted
  even when the node has no room left, since it runs there;
* a grant Nova has given up (``given_up``) is withdrawn;
* anything else (not yet on a compute, or moving) is left as it is: the
  reconciliation with Nova's records (``reconcile``) looks after moves.

``GrantFollower.on_node`` follows the live grants of one node that a
grant was refused on although placement offered it.  There, besides,
a grant whose scheduler process has ended (``api.scheduler_ended``: killed
between its grant and its answer, on this host) before it claimed in
placement is withdrawn: Nova's conductor gives its request up only when
its call times out (``rpc_response_timeout``), and until then the grant
would hold room that placement, and so the stock scheduler, gives.  A
grant whose consumer placement holds on the node stays, as placement's
claim does, until Nova builds or gives up its instance.

Each scheduler process runs it every ``[grant_scheduler]
consume_interval`` seconds (``loop.Loop``), so a grant is consumed within
that interval of the resource tracker's claim, whatever the spawn takes.

Only imported when Nova is.
"""

import dataclasses

from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from oslo_log import log as logging

from grant_scheduler import api
from grant_scheduler.nova import amounts as nova_amounts
from grant_scheduler.nova.books import claims as nova_claims

LOG = logging.getLogger(__name__)

LIVE = "won"
ERROR = "error"
# The vm_states of an instance that a compute is building from a grant
# (a build, an unshelve).  Moves keep their own vm_state and are left to
# the reconciliation.
FOLLOWED = ("building", "shelved_offloaded")


def _mapping(context, instance_uuid):
    try:
        return objects.InstanceMapping.get_by_instance_uuid(
            context, instance_uuid
        )
    except nova_exception.InstanceMappingNotFound:
        return None


def _has_build_request(context, instance_uuid):
    """Whether the API database holds the instance's build request.

    Its row is read (``BuildRequest._get_by_instance_uuid_from_db``, Nova
    13 to 22), not made into Nova's object: ``get_by_instance_uuid``
    rebuilds the whole instance from the row's serialised copy, milliseconds
    for each, and while a multi-create's conductor works through its
    instances every scheduler worker would do so for each of them at every
    look."""
    read = getattr(objects.BuildRequest, "_get_by_instance_uuid_from_db", None)
    if read is None:
        read = objects.BuildRequest.get_by_instance_uuid
    try:
        read(context, instance_uuid)
    except nova_exception.BuildRequestNotFound:
        return False
    return True


def _gave_up_before_a_cell(context, instance_uuid):
    """Whether an instance mapped to no cell is gone: no build request
    any more, read twice so that the conductor's create-map-delete
    sequence in between is not mistaken for a delete."""
    if _has_build_request(context, instance_uuid):
        return False
    mapping = _mapping(context, instance_uuid)
    return mapping is None or mapping.cell_mapping is None


def _gave_up_in_cell(instance):
    """An instance that is deleted (``None`` here) or in ERROR without a
    host will never be built where it was granted."""
    return instance is None or (
        instance.vm_state == ERROR and not instance.host
    )


def given_up(context, instance_uuid):
    """True when Nova will never build ``instance_uuid`` where it was
    granted: it has no instance mapping (the API deleted the build request
    and its mapping), or a mapping without a cell and no build request,
    or no live instance in its cell, or one in ERROR with no host."""
    mapping = _mapping(context, instance_uuid)
    if mapping is None:
        return True
    if mapping.cell_mapping is None:
        return _gave_up_before_a_cell(context, instance_uuid)
    with nova_context.target_cell(context, mapping.cell_mapping) as cctxt:
        try:
            instance = objects.Instance.get_by_uuid(
                cctxt, instance_uuid, expected_attrs=[]
            )
        except nova_exception.InstanceNotFound:
            instance = None
    return _gave_up_in_cell(instance)


@dataclasses.dataclass
class Outcome:
    """What one run did, by instance uuid."""

    counted: list = dataclasses.field(default_factory=list)
    """Instances counted where Nova builds them (their grants consumed)."""
    withdrawn: list = dataclasses.field(default_factory=list)
    """Instances whose grants were withdrawn: Nova gave them up."""
    abandoned: list = dataclasses.field(default_factory=list)
    """Instances whose grants were withdrawn: the scheduler process that
    took them has ended."""

    def __bool__(self):
        return bool(self.counted or self.withdrawn or self.abandoned)


class GrantFollower:
    """Follows live grants to their instances (see the module)."""

    def __init__(self, grant_scheduler, allocations=None):
        """
        :param grant_scheduler: ``f()`` giving the ``GrantScheduler``.
        :param allocations: ``f(node_uuid)``, what each consumer holds on
            the node's provider in placement (``claims.on_provider``).
        """
        self._gs = grant_scheduler
        self._allocations = allocations

    def run(self, context=None):
        """Follow every live grant; returns an ``Outcome``."""
        return self._follow(context, self._gs().grants(live=True))

    def on_node(self, context, host, node, node_uuid=None):
        """Follow the live grants on one node (whose room they hold), and
        withdraw those whose scheduler process ended before it claimed in
        placement (on the provider ``node_uuid``, when given)."""
        grants = [
            g
            for g in self._gs().grants(host=host, live=True)
            if g.node == node
        ]
        outcome = self._follow(context, grants)
        done = set(outcome.counted) | set(outcome.withdrawn)
        ended = [
            g
            for g in grants
            if g.state == LIVE
            and g.instance_uuid is not None
            and g.instance_uuid not in done
            and api.scheduler_ended(g.scheduler)
        ]
        held = None
        if ended and node_uuid and self._allocations is not None:
            held = self._allocations(node_uuid)
        for grant in ended:
            if held is None or grant.instance_uuid not in held:
                self._abandon(grant, outcome)
        return outcome

    def _follow(self, context, grants):
        context = context or nova_context.get_admin_context()
        uuids = sorted(
            {g.instance_uuid for g in grants if g.state == LIVE} - {None}
        )
        outcome = Outcome()
        if not uuids:
            return outcome
        gone, building = self._read(context, uuids)
        for instance_uuid in gone:
            self._withdraw(instance_uuid, outcome)
        states = self._gs().view().by_node() if building else {}
        for (host, node), amounts in sorted(building.items()):
            state = states.get((host, node))
            self._count(host, node, amounts, outcome, state)
        return outcome

    def _read(self, context, uuids):
        """``(given up uuids, {(host, node): {uuid: Resources}})``."""
        mapped = {
            m.instance_uuid: m
            for m in objects.InstanceMappingList.get_by_instance_uuids(
                context, uuids
            )
        }
        gone = []
        by_cell = {}
        for instance_uuid in uuids:
            mapping = mapped.get(instance_uuid)
            if mapping is None:
                gone.append(instance_uuid)
            elif mapping.cell_mapping is None:
                if _gave_up_before_a_cell(context, instance_uuid):
                    gone.append(instance_uuid)
            else:
                cell = mapping.cell_mapping
                by_cell.setdefault(cell.uuid, (cell, []))[1].append(
                    instance_uuid
                )
        building = {}
        for cell, in_cell in by_cell.values():
            with nova_context.target_cell(context, cell) as cctxt:
                self._read_cell(cctxt, in_cell, gone, building)
        return gone, building

    @staticmethod
    def _read_cell(context, uuids, gone, building):
        instances = {
            i.uuid: i
            for i in objects.InstanceList.get_by_filters(
                context,
                {"deleted": False, "uuid": uuids},
                expected_attrs=nova_amounts.amount_attrs(),
            )
        }
        placed = []
        for instance_uuid in uuids:
            instance = instances.get(instance_uuid)
            if _gave_up_in_cell(instance):
                gone.append(instance_uuid)
            elif (
                instance.vm_state in FOLLOWED
                and instance.host
                and instance.node
            ):
                placed.append(instance)
        if not placed:
            return
        amounts = nova_claims.Amounts(context, [i.uuid for i in placed])
        for instance in placed:
            building.setdefault((instance.host, instance.node), {})[
                instance.uuid
            ] = amounts.of(instance)

    def _withdraw(self, instance_uuid, outcome):
        try:
            self._gs().withdraw_instance(instance_uuid)
        except api.GrantSchedulerError:
            LOG.warning(
                "Could not withdraw the grant of %s, which Nova gave up",
                instance_uuid,
                exc_info=True,
            )
            return
        outcome.withdrawn.append(instance_uuid)
        LOG.info(
            "Withdrew the grant of %s: Nova has deleted it or set it to "
            "ERROR without a host",
            instance_uuid,
        )

    def _abandon(self, grant, outcome):
        try:
            withdrawn = self._gs().withdraw_instance(
                grant.instance_uuid, scheduler=grant.scheduler
            )
        except api.GrantSchedulerError:
            LOG.warning(
                "Could not withdraw the grant of %s, whose scheduler %s "
                "has ended",
                grant.instance_uuid,
                grant.scheduler,
                exc_info=True,
            )
            return
        if withdrawn:
            outcome.abandoned.append(grant.instance_uuid)
            LOG.warning(
                "Withdrew the grant of %s on %s/%s: the scheduler process "
                "%s that took it has ended before it claimed in placement",
                grant.instance_uuid,
                grant.host,
                grant.node,
                grant.scheduler,
            )

    def _count(self, host, node, amounts, outcome, state):
        try:
            amounts = nova_claims.on_provider(
                state, amounts, self._allocations
            )
            done = self._gs().correct_claims(host, node, amounts)
        except api.GrantSchedulerError:
            LOG.warning(
                "Could not count %s on %s/%s, where Nova builds them",
                sorted(amounts),
                host,
                node,
                exc_info=True,
            )
            return
        counted = sorted(done.claimed) + sorted(done.resized)
        outcome.counted.extend(counted)
        if counted:
            LOG.debug(
                "Counted %s on %s/%s, where Nova builds them",
                counted,
                host,
                node,
            )
