"""The reaper: removes grants and claims nobody needs any more.

Idempotent and safe to run from every scheduler worker at once (H12):
each batch re-checks its condition in the delete itself, and an expired
grant leaves its node's live-grant sum in the same transaction.  Expiry is
the only decision that uses a clock, and it is the database server's.

Reasons, in the order they are looked for (``storage.REAP_REASONS``):
``superseded`` (consumed: the build is counted in usage), ``expired``
(live past ``grant_ttl``: the scheduler died or the build never came),
``orphaned`` (the node's row is gone) and ``orphaned_claims`` (claims of a
node that is gone).
"""

from oslo_log import log as logging

from grant_scheduler import storage

LOG = logging.getLogger(__name__)


class Reaper:
    def __init__(self, store, settings):
        self.store = store
        self.settings = settings

    def reap(self):
        """:returns: ``{reason: rows deleted}`` for every reason."""
        limit = self.settings.reap_batch_size
        counts = {}
        for reason in storage.REAP_REASONS:
            counts[reason] = 0
            while True:
                found, deleted = self.store.reap(reason, limit)
                counts[reason] += deleted
                if found < limit:
                    break
        if any(counts.values()):
            LOG.info("Reaped: %s", counts)
        return counts
