"""The compute side: claim and release under the local claim lock.

A claim consumes the instance's grant and adds its resources to the node's
usage in one transaction, so a reader sees them exactly once, as a grant or
as usage (H4).  With no live grant (reaped, or never written) the
claim re-checks capacity against usage plus live grants, in the database's
own conditional write, and is rejected when the instance does not fit
(H5).  Claim and release are keyed by instance uuid and safe to repeat
(H12).  The local lock keeps one compute service's claims, releases and
reports on a node in order; the database's row lock is what makes them
safe against every other writer.
"""

from oslo_concurrency import lockutils
from oslo_log import log as logging

from grant_scheduler import injection
from grant_scheduler import storage

LOG = logging.getLogger(__name__)


def claim_lock_name(host, node):
    return "grant_scheduler-claim-%s-%s" % (host, node)


class ClaimAgent:
    """Claims for the nodes of one compute host."""

    def __init__(self, store, hooks=None, lock=None):
        """:param lock: ``lock(host, node)`` returning a context manager;
        by default an in-process oslo.concurrency lock per node.  Nova's
        adapter passes the resource tracker's own lock instead.
        """
        self.store = store
        self.hooks = hooks or injection.NO_HOOKS
        self._lock = lock or (
            lambda host, node: lockutils.lock(claim_lock_name(host, node))
        )

    def report(self, host, node, capacity, used=None, node_uuid=None):
        """Record a node's capacity (and, if given, its true usage)."""
        with self._lock(host, node):
            return self.store.report_host(
                host, node, capacity, used=used, node_uuid=node_uuid
            )

    def claim(
        self,
        instance_uuid,
        host,
        node,
        resources=None,
        request_id=None,
        resources_of=None,
        granted=None,
    ):
        """Count ``instance_uuid`` in the node's usage.

        :returns: a ``storage.ClaimOutcome``.
        :raises ClaimRejected: the instance does not fit; build it
            elsewhere.
        :raises UnknownHost: the node never reported.
        """
        with self._lock(host, node):
            self.hooks.fire("claim_locked", instance_uuid=instance_uuid)
            outcome = self.store.claim(
                storage.Build(
                    instance_uuid,
                    host,
                    node,
                    resources,
                    request_id,
                    resources_of,
                    granted,
                ),
                before_commit=lambda: self.hooks.fire(
                    "claim_written", instance_uuid=instance_uuid
                ),
            )
        LOG.debug(
            "Claimed %s on %s/%s by %s", instance_uuid, host, node, outcome.how
        )
        return outcome

    def release(self, instance_uuid, host, node):
        """Remove an instance from the node's usage; False if not claimed."""
        with self._lock(host, node):
            return self.store.release(instance_uuid, host, node)
