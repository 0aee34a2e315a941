"""The reaper: removes grants nobody needs any more (DESIGN section 2).

Idempotent and safe to run from every scheduler worker at once (H12):
each batch re-checks its condition in the delete itself.  Expiry is the
only decision that uses a clock, and it is the database server's.
"""

import datetime

from oslo_log import log as logging

from grant_scheduler.db import maintenance

LOG = logging.getLogger(__name__)


class Reaper:
    def __init__(self, maintenance_store, settings):
        self.maintenance = maintenance_store
        self.settings = settings

    def reap(self):
        """Delete superseded, withdrawn, orphaned and expired grants.

        :returns: ``{reason: number of grants deleted}`` for every reason.
        """
        cutoff = self.maintenance.db_now() - datetime.timedelta(
            seconds=self.settings.grant_ttl
        )
        limit = self.settings.reap_batch_size
        counts = {}
        for reason in maintenance.REASONS:
            counts[reason] = 0
            while True:
                found, deleted = self.maintenance.reap_batch(
                    reason, cutoff, limit
                )
                counts[reason] += deleted
                if found < limit:
                    break
        if any(counts.values()):
            LOG.info("Reaped grants: %s", counts)
        return counts
