"""Turn a run's raw counts into the metrics doc/source/benchmark documents.

Also the fresh read behind ``nvh_with_room``: after each NoValidHost a
scheduler process answers, it reads the tables again (usage plus live
grants per host, or placement's usage and inventory for placement-api) on a
connection of its own that no statement counter sees, and counts the answer
when some host fits the request then.  The read happens after the answer's
latency is taken, and its time is taken off the run's clock (see
``summarise``), so it does not distort placements/s.
"""

from grant_scheduler import api

KEYS = (
    "strategy",
    "unsafe",
    "workload",
    "schedulers",
    "hosts",
    "seed",
    "placed",
    "placed_vcpus",
    "placed_by_vcpus",
    "no_valid_host",
    "nvh_with_room",
    "spurious_no_valid_host",
    "failed_builds",
    "overcommitted_hosts",
    "placements_per_s",
    "p50_ms",
    "p99_ms",
    "attempts_per_placement",
    "conflicts_per_placement",
    "conflicts_ending_no_valid_host",
    "db_statements_per_placement",
    "db_commits_per_placement",
    "db_commit_ceiling_per_s",
    "cpu_busy_pct",
    "scheduler_rss_mb",
)


def percentile(values, fraction):
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))
    return ordered[index]


def summarise(
    strategy,
    workload,
    schedulers,
    raw,
    serial_no_valid_host,
    ceiling,
    seed=None,
):
    """One row of ``KEYS`` for ``strategy`` (a ``strategies`` entry)."""
    sched = raw["schedulers"]
    computes = raw["computes"]
    placed = sum(r["placed"] for r in sched)
    per = max(placed, 1)
    nvh = sum(r["no_valid_host"] for r in sched)
    latencies = [x for r in sched for x in r["latencies"]]
    # NOTE: placement-api's statements run in the service's workers, which
    # report them when the service stops.
    statements = raw.get("service_statements", 0) + sum(
        r.get("statements", 0) for r in sched + computes
    )
    commits = raw.get("service_commits", 0) + sum(
        r.get("commits", 0) for r in sched + computes
    )
    # NOTE: the nvh_with_room reads pause only the process that makes them;
    # the clock loses the longest such pause (the processes run together).
    checks = max((r.get("nvh_check_s", 0.0) for r in sched), default=0.0)
    elapsed = max(raw["elapsed_s"] - checks, 1e-9)
    return {
        "strategy": strategy.name,
        "unsafe": bool(strategy.unsafe),
        "workload": workload.name,
        "schedulers": schedulers,
        "hosts": workload.hosts,
        "seed": seed,
        "placed": placed,
        "placed_vcpus": sum(r.get("placed_vcpus", 0) for r in sched),
        "placed_by_vcpus": _by_vcpus(sched),
        "no_valid_host": nvh,
        "nvh_with_room": sum(r.get("nvh_with_room", 0) for r in sched),
        "spurious_no_valid_host": (
            None
            if serial_no_valid_host is None
            else max(0, nvh - serial_no_valid_host)
        ),
        "failed_builds": sum(r.get("rejected", 0) for r in computes),
        "overcommitted_hosts": raw["overcommitted_hosts"],
        "placements_per_s": round(placed / elapsed, 1),
        "p50_ms": round(1000 * percentile(latencies, 0.50), 2),
        "p99_ms": round(1000 * percentile(latencies, 0.99), 2),
        "attempts_per_placement": round(
            sum(r["attempts"] for r in sched) / per, 2
        ),
        "conflicts_per_placement": round(
            sum(r["conflicts"] for r in sched) / per, 2
        ),
        "conflicts_ending_no_valid_host": sum(
            r.get("nvh_conflicts", 0) for r in sched
        ),
        "db_statements_per_placement": round(statements / per, 1),
        "db_commits_per_placement": round(commits / per, 1),
        "db_commit_ceiling_per_s": round(ceiling, 1),
        "cpu_busy_pct": (
            None
            if raw.get("cpu_busy") is None
            else round(100 * raw["cpu_busy"])
        ),
        "scheduler_rss_mb": round(
            max((r.get("rss_kib", 0) for r in sched), default=0) / 1024, 1
        ),
    }


def _by_vcpus(sched):
    """``{"vCPUs": instances placed}`` over the processes, smallest first
    (string keys: the row is JSON)."""
    total = {}
    for result in sched:
        for vcpus, count in result.get("placed_by_vcpus", {}).items():
            total[int(vcpus)] = total.get(int(vcpus), 0) + count
    return {str(vcpus): total[vcpus] for vcpus in sorted(total)}


def errors(raw, workload=None):
    found = [
        e for r in raw["schedulers"] + raw["computes"] for e in r["errors"]
    ]
    consumers = raw.get("service_consumers")
    if consumers is not None and workload is not None and not workload.churn:
        placed = sum(r["placed"] for r in raw["schedulers"])
        if consumers != placed:
            found.append(
                "the service holds allocations for %d consumers but the "
                "schedulers placed %d" % (consumers, placed)
            )
    return found


# -- nvh_with_room ---------------------------------------------------------


def room_check(strategy, options):
    """The fresh read for one scheduler process: a callable taking the
    request's ``Resources`` and returning the names of the hosts that fit
    it now."""
    own = getattr(strategy, "room_check", None)
    if own is not None:
        return own(options)
    return GrantTablesRoom(options["url"])


class GrantTablesRoom:
    """Room in grant_scheduler's tables: usage plus live grants (one row
    per node), through the public API on an uncounted engine."""

    def __init__(self, url):
        self.gs = api.GrantScheduler(api.Database(url))

    def __call__(self, amount):
        return {
            report.state.host
            for report in self.gs.hosts()
            if report.state.fits(amount)
        }


# -- cpu_busy_pct ----------------------------------------------------------

PROC_STAT = "/proc/stat"


def cpu_ticks(text):
    """``(busy, total)`` ticks of every core from ``/proc/stat``'s text."""
    fields = text.split("\n", 1)[0].split()
    if not fields or fields[0] != "cpu":
        raise ValueError("not /proc/stat: %r" % text[:40])
    # user nice system idle iowait irq softirq steal (guest time is
    # already counted in user and nice).
    ticks = [int(value) for value in fields[1:9]]
    idle = ticks[3] + ticks[4]
    return sum(ticks) - idle, sum(ticks)


class MachineCpu:
    """How busy the machine's cores were between ``start`` and ``share``:
    every process counts (database servers, benchmark, anything else), so
    a run near 100% was bound by CPU.  None where there is no /proc."""

    def __init__(self, path=PROC_STAT):
        self.path = path
        self._start = None

    def _read(self):
        try:
            with open(self.path) as f:
                return cpu_ticks(f.read())
        except (OSError, ValueError):
            return None

    def start(self):
        self._start = self._read()

    def share(self):
        end = self._read()
        if self._start is None or end is None or end[1] <= self._start[1]:
            return None
        return (end[0] - self._start[0]) / (end[1] - self._start[1])
