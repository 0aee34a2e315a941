"""grant-scheduler-bench: the strategies side by side on one database.

With no arguments it runs every strategy over an embedded SQLite file.
"""

import argparse
import json
import os
import sys
import tempfile

from grant_scheduler import exception
from grant_scheduler.bench import metrics
from grant_scheduler.bench import plot
from grant_scheduler.bench import runner
from grant_scheduler.bench import strategies
from grant_scheduler.bench import workloads
from grant_scheduler.cmd import table


def _ints(text):
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a list of integers" % text)
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("%r: give positive integers" % text)
    return values


def _names(choices):
    def parse(text):
        names = [part.strip() for part in text.split(",") if part.strip()]
        unknown = [n for n in names if n not in choices]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                "unknown %s; choose from %s" % (unknown, ", ".join(choices))
            )
        return names

    return parse


def parser():
    p = argparse.ArgumentParser(
        prog="grant-scheduler-bench",
        description="Run the same seeded request stream through each "
        "scheduling strategy and compare them.",
    )
    p.add_argument(
        "--db",
        help="SQLAlchemy URL (default: a temporary SQLite "
        "file). The benchmark empties grant_scheduler's tables.",
    )
    p.add_argument(
        "--strategies",
        type=_names(tuple(strategies.STRATEGIES)),
        default=list(strategies.STRATEGIES),
    )
    p.add_argument(
        "--workloads", type=_names(workloads.NAMES), default=["fill"]
    )
    p.add_argument("--schedulers", type=_ints, default=[1, 4])
    p.add_argument("--hosts", type=_ints, default=[10])
    p.add_argument(
        "--requests",
        type=int,
        default=None,
        help="Requests per run (default: enough to exhaust).",
    )
    p.add_argument("--host-subset-size", type=int, default=3)
    p.add_argument("--max-fallovers", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="Sleep before every statement (a remote database).",
    )
    p.add_argument(
        "--commit-delay-ms",
        type=float,
        default=0.0,
        help="Sleep up to this long, uniformly at random, between a "
        "grant's insert and its commit (shows DESIGN H1).",
    )
    p.add_argument(
        "--build-delay-ms",
        type=float,
        default=0.0,
        help="Up to this long between answer and claim.",
    )
    p.add_argument("--json", metavar="PATH", help="Write the rows as JSON.")
    p.add_argument(
        "--plot",
        metavar="PATH",
        help="Draw throughput and conflicts against schedulers, one line "
        "per strategy, as a PNG (needs matplotlib).",
    )
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    if args.plot:
        try:
            plot.require_matplotlib()
        except exception.GrantSchedulerError as exc:
            print("ERROR: %s" % exc, file=sys.stderr)
            return 1
    with tempfile.TemporaryDirectory() as scratch:
        url = args.db or "sqlite:///%s" % os.path.join(scratch, "bench.sqlite")
        try:
            rows = _run_all(args, url)
        except exception.GrantSchedulerError as exc:
            print("ERROR: %s" % exc, file=sys.stderr)
            return 1
    columns = [k for k in metrics.KEYS if k not in ("workload", "hosts")]
    for workload in args.workloads:
        for hosts in args.hosts:
            print("\nworkload=%s hosts=%d" % (workload, hosts))
            print(
                table.render(
                    columns,
                    [
                        [r[k] for k in columns]
                        for r in rows
                        if r["workload"] == workload and r["hosts"] == hosts
                    ],
                )
            )
    if any(strategies.STRATEGIES[s].unsafe for s in args.strategies):
        print(
            "\n(UNSAFE) grants-naive is the seed's literal protocol, for "
            "comparison only; never deploy it."
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    if args.plot:
        plot.write(rows, args.plot, title=exception.mask_url(url))
    failed = [r for r in rows if r.get("errors")]
    return 1 if failed else 0


def _run_all(args, url):
    options = {
        "url": url,
        "host_subset_size": args.host_subset_size,
        "max_fallovers": args.max_fallovers,
        "seed": args.seed,
        "latency_s": args.latency_ms / 1000.0,
        "commit_delay_ms": args.commit_delay_ms,
        "build_delay_ms": args.build_delay_ms,
    }
    ceiling = runner.commit_ceiling(url)
    runs = len(args.workloads) * len(args.hosts)
    progress = _Progress(
        runs * (1 + len(args.strategies) * len(args.schedulers))
    )
    rows = []
    for name in args.workloads:
        for hosts in args.hosts:
            workload = workloads.make(name, hosts, args.requests)
            run_options = dict(options, churn=workload.churn)
            progress.step("%s serial oracle hosts=%d" % (name, hosts))
            serial = runner.run("grants", workload, 1, run_options)
            serial_nvh = sum(r["no_valid_host"] for r in serial["schedulers"])
            for strategy in args.strategies:
                label = strategies.STRATEGIES[strategy].label
                for count in args.schedulers:
                    progress.step(
                        "%s %s hosts=%d schedulers=%d"
                        % (name, strategy, hosts, count)
                    )
                    raw = runner.run(strategy, workload, count, run_options)
                    row = metrics.summarise(
                        label, workload, count, raw, serial_nvh, ceiling
                    )
                    errors = metrics.errors(raw)
                    if errors:
                        row["errors"] = errors
                        progress.message(errors[0])
                    rows.append(row)
    progress.done()
    return rows


class _Progress:
    """A progress bar on a terminal, one line per run elsewhere (logs)."""

    WIDTH = 24

    def __init__(self, total, stream=None):
        self.total = total
        self.done_count = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()

    def step(self, text):
        filled = self.WIDTH * self.done_count // max(self.total, 1)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        line = "[bench] [%s] %d/%d %s" % (
            bar,
            self.done_count + 1,
            self.total,
            text,
        )
        self.done_count += 1
        if self.tty:
            print("\r\033[K" + line, end="", file=self.stream, flush=True)
        else:
            print(line, file=self.stream, flush=True)

    def message(self, text):
        if self.tty:
            print(file=self.stream)
        print(text, file=self.stream, flush=True)

    def done(self):
        if self.tty:
            print("\r\033[K[bench] done", file=self.stream, flush=True)


if __name__ == "__main__":
    sys.exit(main())
