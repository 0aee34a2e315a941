"""grant_scheduler's own database failing under Nova.

A scheduler whose grants database cannot be reached, or fails in the
middle of a grant, goes on deciding as the stock scheduler decides
(``[grant_scheduler] database_failure = schedule``, the default), with no
grant written: on Nova 17-22 Nova's FilterScheduler with placement's
candidates and claims, which still guard every node; on 13-16 Nova's
filters and weighers over its HostStates (``stock``), the computes' own
resource claims guarding the nodes as they do for the stock scheduler.
With ``refuse`` nothing is placed meanwhile and each request is answered
NoValidHost naming the cause.  Either way no exception of
grant_scheduler's own reaches Nova's conductor.

One ``Outage`` per scheduler process says whether the database is taken
as down: from the first failure until a probe finds it back (one
statement, every ``PROBE_EVERY`` seconds, tried by a request).  Then,
before any grant is made again, the books catch up with what Nova placed
meanwhile (``recover``: the reconciliation from Nova's records).  The
outage is logged when it starts, every ``LOG_EVERY`` seconds while it
lasts (with how many instances were placed without a grant), and when it
ends.

``ComputeOutage`` is the same for the compute side's claims (the build
hook and the claiming virt drivers): a build or delete goes on without its
claim or release while the database is down, and the reconciliation
records it.
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

    meanwhile = (
        "Nova's stock scheduling decides alone (placement's claims guard "
        "each node on Nova 17-22, the computes' own claims before)"
    )
    """What happens while the database is down (for the log)."""
    skipped_what = "instances placed without a grant"
    """What ``decided_without`` counts (for the log)."""
    back = "the books have caught up with Nova's records"
    """What was done before it is used again (for the log)."""

    def __init__(self, mode, recover, clock=time.monotonic, probe=None):
        """
        :param mode: ``SCHEDULE`` (placement decides alone meanwhile) or
            ``REFUSE`` (NoValidHost naming the cause).
        :param recover: ``f()`` that catches the books up with Nova's
            records; raises one of ``FAILURES`` when the database is still
            down.
        :param probe: ``f()`` that raises one of ``FAILURES`` unless the
            database answers now, at once (``GrantScheduler.ping``): tried
            before ``recover``, so a probe of a database still down costs
            one connection attempt, not the retries of a transaction.
        """
        self.mode = mode
        self._recover = recover
        self._probe = probe
        self._clock = clock
        self.since = None
        self.cause = None
        self.outages = 0
        """How many outages this process has seen."""
        self.decided_without = 0
        """Instances placed without a grant during outages."""
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
                self.meanwhile
                if self.mode == SCHEDULE
                else "requests are refused",
            )
        elif now - self._logged_at >= LOG_EVERY:
            LOG.warning(
                "grant_scheduler's database still failing after %.0f s (%s: "
                "%s); %d %s since the last warning",
                now - self.since,
                what,
                exc,
                self.decided_without - self._logged_count,
                self.skipped_what,
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
            if self._probe is not None:
                self._probe()
            self._recover()
        except FAILURES as exc:
            self.failed(exc, "trying it again")
            return False
        LOG.warning(
            "grant_scheduler's database is back after %.0f s; %s (%d %s "
            "meanwhile)",
            now - self.since,
            self.back,
            self.decided_without,
            self.skipped_what,
        )
        self.since = None
        self.cause = None
        return True

    def decided_by_placement(self):
        """Count an instance placed without a grant."""
        self.decided_without += 1

    skipped = decided_by_placement


class ComputeOutage(Outage):
    """The compute side's view of the database (the build hook and the
    claiming virt drivers of one nova-compute process).

    While it is down a build or delete goes on as Nova lets it, without
    its claim or release: nothing is recorded here, and the scheduler's
    reconciliation from Nova's records (at the latest ``[grant_scheduler]
    reconcile_interval`` seconds after the database is back, and before
    any grant of a scheduler that saw the outage) writes what was missed.
    A probe every ``PROBE_EVERY`` seconds is one statement, so a build
    meanwhile never waits through a transaction's retries under Nova's
    resource tracker lock.
    """

    meanwhile = (
        "builds and deletes go on without their claims, which the "
        "scheduler's reconciliation writes once it is back"
    )
    skipped_what = "claims and releases left to the reconciliation"
    back = "claims are recorded again"

    def __init__(self, probe, clock=time.monotonic):
        super().__init__(SCHEDULE, lambda: None, clock=clock, probe=probe)
