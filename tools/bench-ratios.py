#!/usr/bin/env python3
"""The benchmark's JSON as ratios: grants against every other strategy.

    python3 tools/bench-ratios.py \
        doc/source/benchmark/bench-mariadb-20.json [...]

One line per workload, host count, seed and scheduler count: each
strategy's placements per second, grants' rate divided by each other's,
and grants' conflicts, statements and commits per placement and its
NoValidHost answers given while a host had room (``NVH room``); then what
each strategy placed, how busy the machine's cores were during each run
(``CPU %``) and the hosts it overcommitted (``over``).  ``model``
is the placement model, ``api`` the real placement service.
"""

import collections
import json
import sys

from grant_scheduler_bench import cli as bench


def _short(name):
    return {"placement": "model", "placement-api": "api"}.get(name, name)


def ratios(rows):
    runs = collections.OrderedDict()
    for row in rows:
        key = (row["workload"], row["hosts"], row["seed"], row["schedulers"])
        runs.setdefault(key, {})[row["strategy"]] = row
    others = []
    for by_name in runs.values():
        for name in by_name:
            if name != "grants" and name not in others:
                others.append(name)
    table = []
    for (workload, hosts, seed, schedulers), by_name in runs.items():
        grants = by_name.get("grants")
        line = [workload, hosts, seed, schedulers]
        for name in ["grants"] + others:
            row = by_name.get(name)
            line.append(None if row is None else row["placements_per_s"])
        for name in others:
            row = by_name.get(name)
            if grants is None or row is None or not row["placements_per_s"]:
                line.append(None)
            else:
                rate = grants["placements_per_s"] / row["placements_per_s"]
                line.append(round(rate, 2))
        if grants is None:
            line += [None] * 4
        else:
            line += [
                grants["conflicts_per_placement"],
                grants["db_statements_per_placement"],
                grants["db_commits_per_placement"],
                grants["nvh_with_room"],
            ]
        for key in ("placed", "cpu_busy_pct", "overcommitted_hosts"):
            line.append(
                " ".join(
                    "%s:%d" % (_short(name), row[key])
                    for name, row in by_name.items()
                    if row.get(key) or key == "placed"
                )
                or "-"
            )
        table.append(line)
    headers = (
        ["load", "hosts", "seed", "S"]
        + ["%s/s" % _short(name) for name in ["grants"] + others]
        + ["x %s" % _short(name) for name in others]
        + ["confl/pl", "stmts/pl", "commits/pl", "NVH room"]
        + ["placed", "CPU %", "over"]
    )
    return bench.compact_table(table, headers)


def main(paths):
    if not paths:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    rows = []
    for path in paths:
        with open(path) as f:
            rows.extend(json.load(f))
    print(ratios(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
