"""Books that follow what Nova runs: claims reconciled with Nova's records.

The claims grant_scheduler keeps per node come from casts that arrive
late, get lost or never come.  The truth about a node is what Nova runs
there, and Nova's cell databases say it:

* every instance that is not deleted and has a host and node (a building
  one included: the resource tracker sets its host before the spawn), at
  its current flavour;
* every migration in progress (``IN_PROGRESS``, as the resource tracker
  counts them) counts as
  placement counts it: the destination holds the instance at its new
  flavour (keyed by the instance's uuid), the source holds the old flavour
  keyed by the migration's uuid, a same-host resize both.

``Reconciler.run`` reads that for every node grant_scheduler knows (a
handful of statements per cell, whatever the number of nodes), compares
it with every claim (one statement), and corrects only the nodes that
differ (``GrantScheduler.correct_claims``, one transaction each): a claim
for each instance at its current size, consuming its grant; a release for
each claim whose instance is gone or elsewhere.  An instance that runs is
counted even beyond the node's limit.  A claim written after the claims
were read is never released by that run (its instance may be newer than
Nova's rows as read): the next run looks again.  Nor is the claim of an
instance Nova is still building on no host (a build hook claims before
the resource tracker sets the instance's host).

Every scheduler process may run it at once: corrections are idempotent
and each takes the node's row lock.

Only imported when Nova is.
"""

import dataclasses
import time

from nova import context as nova_context
from nova import objects
from oslo_log import log as logging

from grant_scheduler import api
from grant_scheduler.nova import amounts as nova_amounts
from grant_scheduler.nova import outage
from grant_scheduler.nova.books import claims as nova_claims

LOG = logging.getLogger(__name__)

# The statuses of a migration in progress: every status Nova sets but
# those the resource tracker leaves out (confirmed, reverted, error,
# failed, completed, cancelled, done).
IN_PROGRESS = (
    "accepted",
    "queued",
    "preparing",
    "running",
    "pre-migrating",
    "migrating",
    "post-migrating",
    "finished",
    "confirming",
    "reverting",
)
_FLAVORS = ["flavor", "old_flavor", "new_flavor"]


@dataclasses.dataclass(frozen=True)
class Divergence:
    """One node where the books and Nova's records differ."""

    host: str
    node: str
    nova: dict
    """``{consumer uuid: Resources}`` Nova runs there."""
    books: dict
    """``{consumer uuid: Resources}`` claimed there."""

    def line(self):
        return "%s/%s: Nova runs %s; the books claim %s" % (
            self.host,
            self.node,
            _describe(self.nova),
            _describe(self.books),
        )


def _describe(consumers):
    if not consumers:
        return "nothing"
    total = sum(consumers.values(), api.Resources())
    return "%d (%s: %s)" % (
        len(consumers),
        total,
        ", ".join(sorted(consumers)),
    )


class NovaRecords:
    """What Nova runs on each node, read from every cell."""

    def __init__(self, context=None):
        self._context = context or nova_context.get_admin_context()

    def _cells(self):
        return [
            cell
            for cell in objects.CellMappingList.get_all(self._context)
            if not cell.is_cell0()
        ]

    def by_node(self, hosts):
        """``{(host, node): {consumer uuid: Resources}}`` on ``hosts``."""
        running = {}
        hosts = sorted(hosts)
        if not hosts:
            return running
        for cell in self._cells():
            with nova_context.target_cell(self._context, cell) as cctxt:
                self._read_cell(cctxt, hosts, running)
        return running

    def unplaced(self, uuids):
        """Those of ``uuids`` Nova is still building on no host yet: a
        build hook claims before the resource tracker sets the instance's
        host, so such a claim is not stale."""
        found = set()
        uuids = sorted(uuids)
        if not uuids:
            return found
        for cell in self._cells():
            with nova_context.target_cell(self._context, cell) as cctxt:
                for instance in objects.InstanceList.get_by_filters(
                    cctxt,
                    {"deleted": False, "uuid": uuids, "vm_state": "building"},
                    expected_attrs=[],
                ):
                    if not instance.host:
                        found.add(instance.uuid)
        return found

    def _read_cell(self, context, hosts, running):
        # NOTE: an instance's own columns (vcpus, memory_mb, root_gb,
        # ephemeral_gb) are its current flavour's, kept by Nova through
        # resizes, so only the migrating few are read with their flavours
        # where the columns are the amount (Nova 13-16); placement's
        # amount needs the flavour's swap and extra specs.
        instances = objects.InstanceList.get_by_filters(
            context,
            {"deleted": False, "host": hosts},
            expected_attrs=nova_amounts.amount_attrs(),
        )
        moving = {
            m.instance_uuid: m
            for m in objects.MigrationList.get_by_filters(
                context, {"status": list(IN_PROGRESS)}
            )
        }
        by_uuid = {i.uuid: i for i in instances if i.uuid not in moving}
        if moving:
            for instance in objects.InstanceList.get_by_filters(
                context,
                {"deleted": False, "uuid": sorted(moving)},
                expected_attrs=_FLAVORS,
            ):
                by_uuid[instance.uuid] = instance
        amounts = nova_claims.Amounts(context, by_uuid)

        def add(host, node, consumer, resources):
            if host and node:
                running.setdefault((host, node), {})[consumer] = resources

        for instance in by_uuid.values():
            migration = moving.get(instance.uuid)
            if migration is None:
                add(
                    instance.host,
                    instance.node,
                    instance.uuid,
                    amounts.of(instance),
                )
                continue
            old, new = _flavors(instance, migration)
            add(
                migration.source_compute,
                migration.source_node,
                migration.uuid,
                amounts.of(instance, old),
            )
            add(
                migration.dest_compute,
                migration.dest_node,
                instance.uuid,
                amounts.of(instance, new),
            )


def _flavors(instance, migration):
    """``(source's, destination's)`` flavour of a migration in progress,
    as Nova's resource tracker takes them: the stashed old and new
    flavours for a resize only; every other move (a cold or live
    migration, an evacuation) runs the instance's flavour on both sides,
    whatever an earlier, reverted resize left stashed."""
    if getattr(migration, "migration_type", None) != "resize":
        return instance.flavor, instance.flavor
    return (
        instance.old_flavor or instance.flavor,
        instance.new_flavor or instance.flavor,
    )


class Reconciler:
    """Makes the books equal to Nova's records."""

    def __init__(self, grant_scheduler, records=None, allocations=None):
        """
        :param grant_scheduler: ``f()`` giving the ``GrantScheduler``.
        :param records: ``NovaRecords`` (built on first use).
        :param allocations: ``f(node_uuid)``, what each consumer holds on
            the node's provider in placement (``claims.on_provider``).
        """
        self._gs = grant_scheduler
        self._records = records
        self._allocations = allocations

    def divergences(self, node=None):
        """Every node that differs (read before Nova's records, so that a
        claim written meanwhile is not taken for a stale one).

        :param node: ``(host, node)`` to look at that node alone.
        """
        gs = self._gs()
        books = {}
        for claim in gs.claims(host=None if node is None else node[0]):
            books.setdefault((claim.host, claim.node), {})[
                claim.instance_uuid
            ] = claim.resources
        if node is None:
            states = {
                (r.state.host, r.state.node): r.state for r in gs.hosts()
            }
        else:
            state = gs.view().by_node().get(node)
            states = {} if state is None else {node: state}
        nodes = set(states)
        nova = self._nova_records().by_node({host for host, _ in nodes})
        found = []
        for host, node in sorted(nodes):
            runs = nova_claims.on_provider(
                states[(host, node)],
                nova.get((host, node), {}),
                self._allocations,
            )
            claimed = books.get((host, node), {})
            if runs != claimed:
                found.append(Divergence(host, node, runs, claimed))
        return found

    def _nova_records(self):
        if self._records is None:
            self._records = NovaRecords()
        return self._records

    def run(self, node=None):
        """Correct every node that differs (``node``: that one alone);
        returns the corrections."""
        corrections = []
        divergences = self.divergences(node)
        stale = {
            uuid
            for divergence in divergences
            for uuid in set(divergence.books) - set(divergence.nova)
        }
        building = self._nova_records().unplaced(stale) if stale else set()
        for divergence in divergences:
            releases = set(divergence.books) - set(divergence.nova) - building
            try:
                done = self._gs().correct_claims(
                    divergence.host,
                    divergence.node,
                    divergence.nova,
                    releases,
                )
            except api.GrantSchedulerError:
                LOG.warning(
                    "Could not reconcile %s/%s with Nova's records",
                    divergence.host,
                    divergence.node,
                    exc_info=True,
                )
                continue
            if done.claimed or done.resized or done.released:
                LOG.info(
                    "Reconciled %s/%s with Nova's records: claimed %s, "
                    "resized %s, released %s",
                    divergence.host,
                    divergence.node,
                    list(done.claimed),
                    list(done.resized),
                    list(done.released),
                )
            corrections.append((divergence, done))
        return corrections


class NodeReconciler:
    """One node made what Nova's records say it runs, when a grant on a
    node placement offered is refused by the books.

    The books may hold a claim Nova no longer runs: a delete whose
    instance-info cast was lost (fan-out queues do not outlive a RabbitMQ
    restart) is released by the periodic reconciliation only, up to
    ``reconcile_interval`` later, and meanwhile the stock scheduler would
    have placed there.  Most refusals are a race lost for the node's last
    room, which Nova's records cannot change: a node is looked at again
    at most every ``EVERY`` seconds per process.
    """

    EVERY = 10.0

    def __init__(
        self,
        grant_scheduler,
        records=None,
        clock=time.monotonic,
        allocations=None,
    ):
        """
        :param grant_scheduler: ``f()`` giving the ``GrantScheduler``.
        :param records: ``NovaRecords`` (built on first use).
        :param allocations: as ``Reconciler``'s.
        """
        self._reconciler = Reconciler(grant_scheduler, records, allocations)
        self._clock = clock
        self._looked = {}

    def __call__(self, host, node):
        """True when the node's claims changed (a retry may fit)."""
        now = self._clock()
        if now - self._looked.get((host, node), -self.EVERY) < self.EVERY:
            return False
        self._looked[(host, node)] = now
        try:
            corrections = self._reconciler.run(node=(host, node))
        except outage.FAILURES:
            raise  # grant_scheduler's database: the caller's outage
        except Exception:  # noqa: BLE001 - Nova's records: the grant decides
            LOG.warning(
                "Could not read what Nova runs on %s/%s; its grant is "
                "decided by the books as they are",
                host,
                node,
                exc_info=True,
            )
            return False
        return any(done.released or done.resized for _, done in corrections)
