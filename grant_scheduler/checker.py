"""The invariant checker: reads the tables and reports violations.

It trusts nothing a scheduler or compute host kept in memory.

I1 (safety)
    On every node, usage plus live grants is within
    ``(total - reserved) x allocation ratio`` for vCPU, RAM and disk, and
    neither is below zero.
I4 (no leak)
    Usage equals the claimed instances plus the usage a resync reported
    that no claim accounts for; the node's live-grant sum equals its live
    grant rows; and, once the system is quiescent (builds done, one TTL
    and one reap passed), no grant row and no claim of a deleted node
    remains.
"""

import dataclasses


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


def _node_violations(report):
    state = report.state
    found = []

    def add(invariant, detail, name, *amounts):
        values = tuple(amount[name] for amount in amounts)
        found.append(
            Violation(
                invariant, state.host, state.node, detail % ((name,) + values)
            )
        )

    for name in (state.used + state.granted).exceeded(state.limit):
        add(
            "I1",
            "%s used %d + granted %d > limit %d",
            name,
            state.used,
            state.granted,
            state.limit,
        )
    for what, amount in (("used", state.used), ("granted", state.granted)):
        for name in amount.negative():
            add("I1", "%s " + what + " is %d", name, amount)
    accounted = report.claimed + report.external
    classes = set(state.used) | set(state.granted) | set(accounted)
    classes |= set(report.live_grants)
    for name in sorted(classes):
        if state.used[name] != accounted[name]:
            add(
                "I4",
                "%s used %d but claimed instances sum to %d (+ %d not "
                "from claims)",
                name,
                state.used,
                report.claimed,
                report.external,
            )
        if state.granted[name] != report.live_grants[name]:
            add(
                "I4",
                "%s granted %d but live grant rows sum to %d",
                name,
                state.granted,
                report.live_grants,
            )
    return found


def check(host_reports, grant_rows, orphan_claims=(), quiescent=False):
    """Return the list of violations (empty when all invariants hold)."""
    violations = []
    for report in host_reports:
        violations.extend(_node_violations(report))
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
        for instance_uuid, host_id in orphan_claims:
            violations.append(
                Violation(
                    "I4",
                    "(node %s, deleted)" % host_id,
                    "-",
                    "claim of instance %s remains" % instance_uuid,
                )
            )
    return violations
