"""Where a profiled scheduler process spent its time, by area.

``--profile`` keeps a cProfile of the first scheduler process of each run;
this sorts each function's own time into a few areas, so one line says
whether a run was bound by round trips to the database, by SQLAlchemy, or
by grant_scheduler's own code.
"""

import json
import os
import pstats

AREAS = (
    ("round trips", "waiting on the database's answers (socket reads)"),
    ("sleep", "modelled latency (--latency-ms, --commit-delay-ms)"),
    ("driver", "PyMySQL, psycopg2 or sqlite3 calls"),
    ("sqlalchemy", "SQLAlchemy and oslo.db"),
    ("grant_scheduler", "grant_scheduler and the benchmark"),
    ("other", "everything else (the standard library, queues)"),
)

_WAITS = ("recv_into", "recv", "poll", "select", "'read' of")


def path(directory, strategy_name, workload, hosts, schedulers, seed):
    """Where ``--profile`` keeps one run's profile."""
    return os.path.join(
        directory,
        "%s-%s-%dhosts-%dsched-seed%d.prof"
        % (strategy_name, workload, hosts, schedulers, seed),
    )


def write_clocks(profile, wall_s, cpu_s):
    """Keep beside ``profile`` the wall and CPU seconds it covered."""
    with open(profile + ".clocks.json", "w") as f:
        json.dump({"wall_s": wall_s, "cpu_s": cpu_s}, f)


def read_clocks(profile):
    """``(wall seconds, CPU seconds)`` of ``profile``, or None."""
    try:
        with open(profile + ".clocks.json") as f:
            clocks = json.load(f)
    except (OSError, ValueError):
        return None
    return clocks["wall_s"], clocks["cpu_s"]


def _area(filename, function):
    if filename == "~":
        if "sleep" in function:
            return "sleep"
        if any(wait in function for wait in _WAITS):
            return "round trips"
        if "psycopg2" in function or "sqlite3" in function:
            return "driver"
        return "other"
    for marker, area in (
        ("/pymysql/", "driver"),
        ("/psycopg2/", "driver"),
        ("/sqlite3/", "driver"),
        ("/sqlalchemy/", "sqlalchemy"),
        ("/oslo_db/", "sqlalchemy"),
        ("/grant_scheduler/", "grant_scheduler"),
    ):
        if marker in filename:
            return area
    return "other"


def breakdown(filename):
    """``(total seconds, {area: seconds})`` of one profile file."""
    stats = pstats.Stats(filename).stats
    areas = dict.fromkeys((name for name, _ in AREAS), 0.0)
    for (source, _line, function), row in stats.items():
        areas[_area(source, function)] += row[2]
    return sum(areas.values()), areas


def describe(filename):
    """One line: the profile's total and each area's share."""
    total, areas = breakdown(filename)
    if not total:
        return "%s: nothing profiled" % os.path.basename(filename)
    shares = ", ".join(
        "%s %.0f%%" % (name, 100 * areas[name] / total)
        for name, _ in AREAS
        if areas[name]
    )
    line = "%s: %.2f s profiled: %s" % (
        os.path.basename(filename),
        total,
        shares,
    )
    clocks = read_clocks(filename)
    if clocks is not None and clocks[0]:
        # NOTE: cProfile times by the wall clock: a process waiting for a
        # core has that time charged to whatever it was running.  Its own
        # CPU time says how much of the wall it actually computed.
        line += "; the process computed %.2f s of %.2f s (%.0f%%)" % (
            clocks[1],
            clocks[0],
            100 * clocks[1] / clocks[0],
        )
    return line
