"""Boots through Nova 22's own scheduler: the stock FilterScheduler with
placement against grant_scheduler, side by side in one run.

Run in the Debian bullseye root (``tools/nova22-root.sh build`` and
``install`` first)::

    bash tools/nova22-run.sh python3 -W ignore tools/nova-path-bench.py \\
        --nodes 100,1000 --callers 1,4 [--workload ironic]

For each size a cloud is built once (``tests/nova22/cloud.py``: Nova's
API database, cell0 and cell1 on MariaDB made by nova-manage with a
service, compute node and host mapping per node, Debian's placement with
a provider per node, MariaDB for placement and grant_scheduler; the time
each part took is printed); then, for each number of callers and each
system, ``--processes`` scheduler processes (Nova's SchedulerManager,
``[scheduler] driver`` the system's) make ``--requests`` boots,
``--callers`` at a time in each.  Every boot writes, in the scheduler
process and alike for both systems, Nova's records of it: the API's
request spec, build request and instance mapping, then the scheduler's
answer, the conductor's instance in cell1, and the compute's claim (the
instance's host and node, the compute node's usage) and its instance
information to the scheduler, from which grant_scheduler's host manager
claims the instance, consuming its grant, as on Nova 22 with nothing of
grant_scheduler on the computes (``--compute-claim virt-driver``: the
compute claims it first, as the opt-in claiming virt driver does; a
grant_scheduler row's ``unclaimed`` lists the placed boots its books did
not claim and the grants left live, and fails the run).  Between two
runs placement's allocations, Nova's instances and compute node usage,
and grant_scheduler's books are emptied.  One row per run:

* ``boots/s``: placed boots over the wall-clock time from the start signal
  to the last boot's records (``span_s``; the processes' exit, after it,
  is not a boot's);
* ``p50``, ``p99``: milliseconds of ``select_destinations``;
* ``rec ms``: median milliseconds a placed boot spent writing Nova's
  records (API, conductor and compute, and with ``--compute-claim
  virt-driver`` the books' claim; the instance information is cast, as
  the compute casts it, to every scheduler process (Nova's fanout), each
  handling it on a green thread of its own, and the run's wall clock
  ends when every process has handled every cast; wall clock: other
  callers of the process run meanwhile; the JSON rows have the median of
  each step);
* ``cpu ms``: the schedulers' CPU per placed boot: the CPU time spent in
  ``select_destinations`` (and the green threads it spawned), summed over
  the scheduler processes (``cloud.Phases``);
* ``plc cpu``: placement's CPU per placed boot (its service's processes,
  user and system time, from the start signal to the end of the run);
* ``db cpu``: the MariaDB server's CPU per placed boot, the same way (every
  database's statements: Nova's records, placement's, grant_scheduler's,
  the heartbeats', and any other client's of that server meanwhile;
  ``nan`` where the server runs on another machine);
* ``nova sql``, ``gs sql``: statements per boot on Nova's databases and on
  grant_scheduler's, in the scheduler processes (records included;
  placement's are in its service);
* ``http``: placement HTTP requests per boot;
* ``nvh``, ``nvh room``: NoValidHost answers, and those answered while a
  node had room (placement's records for stock; usage plus live grants
  for grant_scheduler);
* ``over``: nodes over capacity in placement's records, and for
  grant_scheduler in its books too.

The last lines give grant_scheduler's ratios to stock, per size and
number of callers, stock's CPU per boot (scheduler and placement) over
grant_scheduler's, and each system's CPU per boot on the whole machine:
the scheduler processes' (every phase, the records' among them),
placement's and MariaDB's.  ``--json PATH`` writes the rows (with the
statements and CPU of every phase: ``records``, ``scheduler`` and
``other``, the processes' own loops and eventlet's hub; grant_scheduler's
part of the records apart, as ``records: claim`` and ``records: instance
info``), ``first_ms``, the first five boots' ``select_destinations`` in
the order they ended, ``run_s``, the seconds the slowest process took
from its start of work to its last boot's records, ``span_s``, the
seconds from the start signal to the last process's last boot's
records, and ``wall_s``, to the last process's exit.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from grant_scheduler import api  # noqa: E402
from grant_scheduler import decision  # noqa: E402
from grant_scheduler_bench import placement_api  # noqa: E402
from tests import base as gs_base  # noqa: E402
from tests.nova22 import cloud  # noqa: E402

NODE = {
    "vcpus": 16,
    "memory_mb": 32768 + 512,
    "local_gb": 400,
    "reserved_mb": 512,
}
FLAVOR = {"vcpus": 1, "memory_mb": 2048, "root_gb": 20}
# ``--workload ironic``: the seed's case, every node one unit of a custom
# class (as Nova 22's Ironic driver reports a node) and a bare-metal
# flavour that asks for that unit alone.
WORKLOADS = {
    "vm": (NODE, FLAVOR),
    "ironic": (
        {
            "vcpus": 0,
            "memory_mb": 0,
            "local_gb": 0,
            "reserved_mb": 0,
            "resource_class": "CUSTOM_BAREMETAL_GOLD",
        },
        {
            "vcpus": 8,
            "memory_mb": 65536,
            "root_gb": 400,
            "extra_specs": {
                "resources:CUSTOM_BAREMETAL_GOLD": "1",
                "resources:VCPU": "0",
                "resources:MEMORY_MB": "0",
                "resources:DISK_GB": "0",
            },
        },
    ),
}


# Where a select_destinations spends its time, by the cumulative time of
# the functions that do each part: (part, (file suffix, function name)...),
# the largest of them where there are several.
PARTS = (
    (
        "select_destinations",
        ("nova/scheduler/manager.py", "select_destinations"),
    ),
    (
        "placement: candidates",
        ("nova/scheduler/client/report.py", "get_allocation_candidates"),
    ),
    (
        "Nova: host states",
        ("nova/scheduler/host_manager.py", "get_host_states_by_uuids"),
    ),
    (
        "Nova: filters",
        ("nova/scheduler/host_manager.py", "get_filtered_hosts"),
    ),
    (
        "Nova: weighers",
        ("nova/scheduler/host_manager.py", "get_weighed_hosts"),
    ),
    (
        # Nova's claim, or grant_scheduler's, which is Nova's where the
        # consumer is not new.
        "placement: claim",
        ("nova/scheduler/client/report.py", "claim_resources"),
        (
            "grant_scheduler/nova/scheduler/filter_scheduler.py",
            "_placement_claim",
        ),
    ),
    (
        "grant_scheduler: view",
        ("grant_scheduler/nova/scheduler/filter_scheduler.py", "known"),
    ),
    (
        "grant_scheduler: registry",
        ("grant_scheduler/nova/books/registry.py", "register_unknown"),
    ),
    (
        "grant_scheduler: grant",
        ("grant_scheduler/nova/scheduler/filter_scheduler.py", "grant"),
    ),
    (
        "grant_scheduler: claim",
        ("grant_scheduler/nova/books/claims.py", "claim"),
    ),
    ("records: API", ("tests/nova22/cloud.py", "api")),
    ("records: conductor", ("tests/nova22/cloud.py", "conductor")),
    ("records: compute", ("tests/nova22/cloud.py", "compute")),
    (
        "records: instance info",
        ("nova/scheduler/manager.py", "update_instance_info"),
    ),
)


def _is_file(filename, suffix):
    """Nova's ``nova/...`` is not grant_scheduler's ``.../nova/...``."""
    if not filename.endswith(suffix):
        return False
    ours = "grant_scheduler/" in filename
    return ours == suffix.startswith("grant_scheduler/")


def profile_parts(stats, boots):
    """``[(part, ms per boot)]`` from cProfile's ``pstats.Stats``."""
    parts = []
    for part, *places in PARTS:
        seconds = max(
            sum(
                entry[3]
                for (filename, _, function), entry in stats.stats.items()
                if _is_file(filename, where) and function == which
            )
            for where, which in places
        )
        parts.append((part, seconds * 1000 / max(boots, 1)))
    return parts


def profile(the_cloud, gs, system, requests, keep=None):
    """One process, one caller, under cProfile; its stats copied to
    ``keep`` (a path) when given."""
    the_cloud.reset_placement()
    empty_books(gs)
    result = the_cloud.schedule(system, 1, 1, requests, profile=True)
    boots = sum(1 for c in result["calls"] if "host" in c)
    import pstats

    stats = pstats.Stats(*result["profiles"])
    if keep:
        stats.dump_stats(keep)
    return profile_parts(stats, boots)


def percentile(values, fraction):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def empty_books(gs):
    """Every claim released and every live grant withdrawn, the nodes
    kept registered (as in a cloud whose schedulers restart: only a new
    node is registered, at a scheduler's first sync)."""
    for claim in gs.claims():
        gs.release(claim.instance_uuid, claim.host, claim.node)
    for grant in gs.grants():
        if grant.state == decision.GRANT_WON:
            gs.withdraw_instance(grant.instance_uuid)


def _per_phase(counts, label):
    """``{phase: count}`` of ``label``'s statements, all processes."""
    phases = {}
    for process in counts:
        for phase, count in process["statements"].get(label, {}).items():
            phases[phase] = phases.get(phase, 0) + count
    return phases


def measure(
    the_cloud, gs, system, nodes, processes, callers, requests, timeout=3600
):
    the_cloud.reset_placement()
    empty_books(gs)
    result = the_cloud.schedule(
        system, processes, callers, requests, timeout=timeout
    )
    calls = result["calls"]
    errors = [c["error"] for c in calls if "error" in c]
    placed = [c for c in calls if "host" in c]
    refused = [c for c in calls if c.get("nvh")]
    nova_sql = _per_phase(result["counts"], "nova")
    gs_sql = _per_phase(result["counts"], "gs")
    http = sum(sum(c["http"].values()) for c in result["counts"])
    cpu = {}
    for process in result["cpu"]:
        for phase, seconds in process.items():
            cpu[phase] = cpu.get(phase, 0.0) + seconds
    over = sorted(placement_api.overcommitted_in(the_cloud.placement_usage()))
    unclaimed = []
    if system == "grants":
        # Every placed boot counted in the books by its claim, its grant
        # consumed: what the compute step's claim is for.
        claimed = {c.instance_uuid for c in gs.claims()}
        unclaimed = sorted(
            c["instance"] for c in placed if c["instance"] not in claimed
        )
        unclaimed += sorted(
            g.instance_uuid
            for g in gs.grants()
            if g.state == decision.GRANT_WON
        )
        over = sorted(
            set(over)
            | {
                r.state.host
                for r in gs.hosts()
                if not (r.state.used + r.state.granted).fits_within(
                    r.state.limit
                )
            }
        )
    boots = max(len(placed), 1)
    latencies = [c["ms"] for c in calls if "ms" in c]
    records = [c["rec_ms"] for c in placed]
    return {
        "system": system,
        "workload": the_cloud.spec["node"].get("resource_class") or "vm",
        "nodes": nodes,
        "processes": processes,
        "callers": callers,
        "requests": requests,
        "placed": len(placed),
        "errors": errors,
        "start_s": result["start_s"],
        "start_steps_s": result["start_steps_s"],
        "wall_s": result["wall_s"],
        "run_s": result["run_s"],
        "span_s": result["span_s"],
        "boots_per_s": len(placed) / result["span_s"],
        "p50_ms": statistics.median(latencies) if latencies else float("nan"),
        "p99_ms": percentile(latencies, 0.99),
        "first_ms": latencies[:5],
        "records_ms": statistics.median(records) if records else float("nan"),
        "records_ms_by_step": {
            step: statistics.median(
                c["rec_steps_ms"][step]
                for c in placed
                if step in c["rec_steps_ms"]
            )
            for step in sorted({s for c in placed for s in c["rec_steps_ms"]})
        },
        "cpu_ms": cpu.get("scheduler", 0.0) * 1000 / boots,
        "cpu_ms_by_phase": {
            phase: seconds * 1000 / boots for phase, seconds in cpu.items()
        },
        "placement_cpu_ms": result["placement_cpu_s"] * 1000 / boots,
        "database_cpu_ms": (
            float("nan")
            if result["database_cpu_s"] is None
            else result["database_cpu_s"] * 1000 / boots
        ),
        "nova_sql_per_boot": sum(nova_sql.values()) / boots,
        "gs_sql_per_boot": sum(gs_sql.values()) / boots,
        "nova_sql_by_phase": {p: n / boots for p, n in nova_sql.items()},
        "gs_sql_by_phase": {p: n / boots for p, n in gs_sql.items()},
        "http_per_boot": http / boots,
        "nvh": len(refused),
        "nvh_with_room": sum(1 for c in refused if c["room"]),
        "over_capacity": over,
        "unclaimed": unclaimed,
        "compute_claim": the_cloud.spec["compute_claim"],
    }


def table(rows):
    head = (
        "system  nodes  proc  C  placed  boots/s    p50    p99  rec ms"
        "  cpu ms  plc cpu  db cpu  nova sql  gs sql  http  nvh  nvh room"
        "  over"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            "%-6s  %5d  %4d  %1d  %6d  %7.2f  %5.0f  %5.0f  %6.0f  %6.1f"
            "  %7.1f  %6.1f  %8.1f  %6.1f  %4.1f  %3d  %8d  %4d"
            % (
                r["system"],
                r["nodes"],
                r["processes"],
                r["callers"],
                r["placed"],
                r["boots_per_s"],
                r["p50_ms"],
                r["p99_ms"],
                r["records_ms"],
                r["cpu_ms"],
                r["placement_cpu_ms"],
                r["database_cpu_ms"],
                r["nova_sql_per_boot"],
                r["gs_sql_per_boot"],
                r["http_per_boot"],
                r["nvh"],
                r["nvh_with_room"],
                len(r["over_capacity"]),
            )
        )
    by = {(r["system"], r["nodes"], r["callers"]): r for r in rows}
    lines.append("")
    for (system, nodes, callers), r in sorted(by.items()):
        stock = by.get(("stock", nodes, callers))
        if system != "grants" or stock is None:
            continue
        stock_cpu = stock["cpu_ms"] + stock["placement_cpu_ms"]
        ours_cpu = r["cpu_ms"] + r["placement_cpu_ms"]
        stock_all, ours_all = _machine_cpu(stock), _machine_cpu(r)
        lines.append(
            "%d nodes, C=%d: grant_scheduler %.2fx stock's boots/s, "
            "p50 %.2fx, p99 %.2fx; CPU per boot, scheduler + placement: "
            "stock %.1f ms, grant_scheduler %.1f ms, stock/ours %.2fx; "
            "on the whole machine (scheduler processes + placement + "
            "MariaDB): stock %.0f (%.0f + %.0f + %.0f) ms, grant_scheduler "
            "%.0f (%.0f + %.0f + %.0f) ms"
            % (
                nodes,
                callers,
                r["boots_per_s"] / stock["boots_per_s"],
                r["p50_ms"] / stock["p50_ms"],
                r["p99_ms"] / stock["p99_ms"],
                stock_cpu,
                ours_cpu,
                stock_cpu / ours_cpu if ours_cpu else float("nan"),
                sum(stock_all),
                *stock_all,
                sum(ours_all),
                *ours_all,
            )
        )
    return "\n".join(lines)


def _machine_cpu(row):
    """A row's CPU per boot: its scheduler processes' (every phase),
    placement's and MariaDB's."""
    return (
        sum(row["cpu_ms_by_phase"].values()),
        row["placement_cpu_ms"],
        row["database_cpu_ms"],
    )


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="100,1000")
    parser.add_argument("--callers", default="1,4")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--systems", default="stock,grants")
    parser.add_argument(
        "--workload",
        choices=sorted(WORKLOADS),
        default="vm",
        help="vm: nodes of VCPU, MEMORY_MB and DISK_GB and a small flavour; "
        "ironic: nodes of one CUSTOM_BAREMETAL_GOLD unit each and a "
        "bare-metal flavour (then --requests beyond --nodes end in "
        "NoValidHost)",
    )
    parser.add_argument("--placement-workers", type=int, default=2)
    parser.add_argument(
        "--compute-claim",
        choices=cloud.COMPUTE_CLAIMS,
        default=cloud.HOST_MANAGER,
        help="where grant_scheduler's claim of a boot is made: host-manager "
        "(Nova 22's default, nothing of grant_scheduler on the computes: "
        "the scheduler's host manager claims the instance from the "
        "instance information the compute sends) or virt-driver (the "
        "opt-in claiming virt driver: the compute claims before the "
        "spawn, then the host manager's claim is a repeat)",
    )
    parser.add_argument(
        "--no-heartbeats",
        dest="heartbeats",
        action="store_false",
        help="the compute services' rows do not heartbeat (by default a "
        "tenth of them each second, as the database servicegroup driver "
        "writes every report_interval)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=3600,
        help="seconds a run's scheduler processes may take to start, and "
        "then to make their boots (grant_scheduler registers every node "
        "in its emptied books at its start: minutes at 10,000 nodes)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="after the timed runs, N boots of each system in one process "
        "with one caller under cProfile, and where their time went",
    )
    parser.add_argument(
        "--profile-dir",
        metavar="DIR",
        help="keep each profile's stats there, as SYSTEM-NODES.prof "
        "(pstats; read with python3 -m pstats)",
    )
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    rows = []
    profiles = []
    builds = []
    for nodes in [int(n) for n in args.nodes.split(",")]:
        with (
            gs_base.DatabaseFixture("mysql") as gs_db,
            gs_base.DatabaseFixture("mysql", migrate=False) as placement_db,
            tempfile.TemporaryDirectory() as directory,
        ):
            started = time.monotonic()
            node, flavor = WORKLOADS[args.workload]
            the_cloud = cloud.Cloud(
                directory,
                nodes,
                node,
                flavor,
                gs_db.url,
                placement_db.url,
                heartbeats=args.heartbeats,
                compute_claim=args.compute_claim,
            )
            the_cloud.start(placement_workers=args.placement_workers)
            built = time.monotonic() - started
            builds.append({"nodes": nodes, "s": built, **the_cloud.build_s})
            print(
                "%d nodes: cloud built in %.0f s (%s)"
                % (
                    nodes,
                    built,
                    ", ".join(
                        "%s %.0f s" % item
                        for item in the_cloud.build_s.items()
                    ),
                ),
                flush=True,
            )
            gs = api.GrantScheduler.from_url(gs_db.url)
            try:
                for callers in [int(c) for c in args.callers.split(",")]:
                    for system in args.systems.split(","):
                        row = measure(
                            the_cloud,
                            gs,
                            system,
                            nodes,
                            args.processes,
                            callers,
                            args.requests,
                            timeout=args.timeout,
                        )
                        rows.append(row)
                        print(table([row]).splitlines()[2], flush=True)
                for system in args.systems.split(",") if args.profile else ():
                    keep = None
                    if args.profile_dir:
                        os.makedirs(args.profile_dir, exist_ok=True)
                        keep = os.path.join(
                            args.profile_dir, "%s-%d.prof" % (system, nodes)
                        )
                    parts = profile(
                        the_cloud, gs, system, args.profile, keep=keep
                    )
                    profiles.append((nodes, system, parts))
            finally:
                gs.database.dispose()
                the_cloud.stop()
    print()
    print(table(rows))
    for nodes, system, parts in profiles:
        print()
        print(
            "%s at %d nodes, ms per boot (cumulative, under cProfile):"
            % (system, nodes)
        )
        for part, ms in parts:
            print("  %-28s %8.1f" % (part, ms))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"rows": rows, "builds": builds, "profiles": profiles},
                f,
                indent=1,
            )
    return (
        1
        if any(
            r["errors"] or r["over_capacity"] or r["unclaimed"] for r in rows
        )
        else 0
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
