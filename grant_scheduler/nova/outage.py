"""grant_scheduler's own database failing under a Nova scheduler.

On Nova 17-22 placement's claim guards every node whatever this driver
does, so a scheduler whose grants database cannot be reached, or fails in
the middle of a grant, goes on deciding as the stock scheduler decides
(``[grant_scheduler] database_failure = schedule``, the default): Nova's
FilterScheduler with placement's candidates and claims, no grant written.
With ``refuse`` no placement claim is made meanwhile and the request is
answered NoValidHost naming the cause.  Either way no exception of
grant_scheduler's own reaches Nova's conductor.

One ``Outage`` per scheduler process says whether the database is taken
as down: from the first failure until a request finds it back.  Then,
before any grant is made again, the books catch up with what Nova placed
meanwhile (``recover``: the reconciliation from Nova's records); until
that has run, placement alone decides.  The outage is logged when it
starts, every ``LOG_EVERY`` seconds while it lasts (with how many
requests placement decided alone), and when it ends.
"""

import time

from oslo_log import log as logging

from grant_scheduler import api
from grant_scheduler.nova import compat

LOG = logging.getLogger(__name__)

FAILURES = (
    api.DatabaseUnavailable,
    api.DatabaseError,
    api.SchemaNotMigrated,
    api.SchemaNewerThanCode,
    api.SchemaInterrupted,
    api.MigrationLocked,
)
"""What grant_scheduler raises when its database, not the request, fails."""

SCHEDULE = "schedule"
REFUSE = "refuse"

LOG_EVERY = 60.0
"""Seconds between two warnings of one outage."""

PROBE_EVERY = 10.0
"""Seconds between two tries, by requests, of a database taken as down."""


class Outage:
    """Whether one scheduler process takes its grants database as down."""

    def __init__(self, mode, recover, clock=time.monotonic):
        """
        :param mode: ``SCHEDULE`` (placement decides alone meanwhile) or
            ``REFUSE`` (NoValidHost naming the cause).
        :param recover: ``f()`` that catches the books up with Nova's
            records; raises one of ``FAILURES`` when the database is still
            down.
        """
        self.mode = mode
        self._recover = recover
        self._clock = clock
        self.since = None
        self.cause = None
        self.outages = 0
        """How many outages this process has seen."""
        self.decided_without = 0
        """Placement claims made without a grant during outages."""
        self._logged_at = None
        self._tried_at = None
        self._logged_count = 0

    @property
    def down(self):
        return self.since is not None

    def failed(self, exc, what):
        """The database failed at ``what``: take it as down (logged when
        the outage starts and every ``LOG_EVERY`` seconds)."""
        now = self._clock()
        self.cause = exc
        self._tried_at = now
        if self.since is None:
            self.since = now
            self.outages += 1
            self._logged_at = now
            self._logged_count = self.decided_without
            LOG.warning(
                "grant_scheduler's database failed (%s: %s); %s until it "
                "is back",
                what,
                exc,
                "placement's claims alone decide"
                if self.mode == SCHEDULE
                else "requests are refused",
            )
        elif now - self._logged_at >= LOG_EVERY:
            LOG.warning(
                "grant_scheduler's database still failing after %.0f s (%s: "
                "%s); %d placement claims made without a grant since the "
                "last warning",
                now - self.since,
                what,
                exc,
                self.decided_without - self._logged_count,
            )
            self._logged_at = now
            self._logged_count = self.decided_without

    @property
    def refuses(self):
        """True while down in ``REFUSE`` mode: no placement claim."""
        return self.since is not None and self.mode == REFUSE

    def refusal(self):
        """NoValidHost naming the cause, as Nova's conductor expects it."""
        return compat.no_valid_host(
            "grant_scheduler's database is unavailable (%s); "
            "[grant_scheduler] database_failure = refuse" % (self.cause,)
        )

    def usable(self):
        """True when grants may be made: the database is not taken as
        down, or it is back and the books have caught up (tried at most
        every ``PROBE_EVERY`` seconds)."""
        if self.since is None:
            return True
        now = self._clock()
        if now - self._tried_at < PROBE_EVERY:
            return False
        self._tried_at = now
        try:
            self._recover()
        except FAILURES as exc:
            self.failed(exc, "catching up with Nova's records")
            return False
        LOG.warning(
            "grant_scheduler's database is back after %.0f s; the books "
            "have caught up with Nova's records (%d placement claims were "
            "made without a grant meanwhile)",
            now - self.since,
            self.decided_without,
        )
        self.since = None
        self.cause = None
        return True

    def decided_by_placement(self):
        """Count a placement claim made without a grant."""
        self.decided_without += 1
