"""The invariant checker: reads the tables and reports violations.

It trusts nothing a scheduler or compute host kept in memory.

I1 (safety)
    On every host, usage plus won grants is within
    ``(total - reserved) x allocation ratio`` for vCPU, RAM and disk.
I4 (no leak)
    Usage equals the sum of the claimed instances on every host, and, once
    the system is quiescent (builds done, one TTL and one reap passed), no
    grant rows remain.
"""

import dataclasses

from grant_scheduler.resources import DIMENSIONS


@dataclasses.dataclass(frozen=True)
class Violation:
    invariant: str
    host: str
    node: str
    detail: str

    def __str__(self):
        return "%s on %s/%s: %s" % (
            self.invariant,
            self.host,
            self.node,
            self.detail,
        )


def check(host_reports, grant_rows, quiescent=False):
    """Return the list of violations (empty when all invariants hold)."""
    violations = []
    for report in host_reports:
        state = report.state
        committed = state.used + state.granted
        limit = state.limit
        for name in committed.exceeded(limit):
            violations.append(
                Violation(
                    "I1",
                    state.host,
                    state.node,
                    "%s used %d + granted %d > limit %d"
                    % (
                        name,
                        getattr(state.used, name),
                        getattr(state.granted, name),
                        getattr(limit, name),
                    ),
                )
            )
        for name in DIMENSIONS:
            used = getattr(state.used, name)
            claimed = getattr(report.claimed, name)
            if used != claimed:
                violations.append(
                    Violation(
                        "I4",
                        state.host,
                        state.node,
                        "%s used %d but claimed instances sum to %d"
                        % (name, used, claimed),
                    )
                )
    if quiescent:
        for row in grant_rows:
            violations.append(
                Violation(
                    "I4",
                    row.host,
                    row.node,
                    "grant %d (ticket %d, %s) remains after quiescence"
                    % (row.id, row.ticket, row.state),
                )
            )
    return violations
