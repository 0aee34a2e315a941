"""Turn a run's raw counts into the documented metrics (README: Benchmark)."""

KEYS = (
    "strategy",
    "workload",
    "schedulers",
    "hosts",
    "placed",
    "no_valid_host",
    "spurious_no_valid_host",
    "overcommitted_hosts",
    "placements_per_s",
    "p50_ms",
    "p99_ms",
    "attempts_per_placement",
    "conflicts_per_placement",
    "db_statements_per_placement",
    "db_commits_per_placement",
    "db_commit_ceiling_per_s",
    "scheduler_rss_mb",
)


def percentile(values, fraction):
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))
    return ordered[index]


def summarise(label, workload, schedulers, raw, serial_no_valid_host, ceiling):
    sched = raw["schedulers"]
    computes = raw["computes"]
    placed = sum(r["placed"] for r in sched)
    per = max(placed, 1)
    nvh = sum(r["no_valid_host"] for r in sched)
    latencies = [x for r in sched for x in r["latencies"]]
    statements = sum(r.get("statements", 0) for r in sched + computes)
    commits = sum(r.get("commits", 0) for r in sched + computes)
    return {
        "strategy": label,
        "workload": workload.name,
        "schedulers": schedulers,
        "hosts": workload.hosts,
        "placed": placed,
        "no_valid_host": nvh,
        "spurious_no_valid_host": (
            None
            if serial_no_valid_host is None
            else max(0, nvh - serial_no_valid_host)
        ),
        "overcommitted_hosts": raw["overcommitted_hosts"],
        "placements_per_s": round(placed / max(raw["elapsed_s"], 1e-9), 1),
        "p50_ms": round(1000 * percentile(latencies, 0.50), 2),
        "p99_ms": round(1000 * percentile(latencies, 0.99), 2),
        "attempts_per_placement": round(
            sum(r["attempts"] for r in sched) / per, 2
        ),
        "conflicts_per_placement": round(
            sum(r["conflicts"] for r in sched) / per, 2
        ),
        "db_statements_per_placement": round(statements / per, 1),
        "db_commits_per_placement": round(commits / per, 1),
        "db_commit_ceiling_per_s": round(ceiling, 1),
        "scheduler_rss_mb": round(
            max((r.get("rss_kib", 0) for r in sched), default=0) / 1024, 1
        ),
    }


def errors(raw):
    return [
        e for r in raw["schedulers"] + raw["computes"] for e in r["errors"]
    ]
