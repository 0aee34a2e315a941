"""grant-scheduler-bench: the strategies side by side on one database.

With no arguments it runs the default strategies over an embedded SQLite
file, with builds claimed up to ``DEFAULT_BUILD_DELAY_MS`` after the
answer, and prints a table and a summary derived from it.
"""

import argparse
import json
import math
import os
import sys
import tempfile

import sqlalchemy as sa

try:
    import tabulate
    import tqdm
except ImportError as exc:  # the bench extra is not installed
    tabulate = tqdm = None
    MISSING = exc.name
else:
    MISSING = None

from grant_scheduler import api
from grant_scheduler import urls
from grant_scheduler.conf import database as db_conf
from grant_scheduler_bench import metrics
from grant_scheduler_bench import placement_api
from grant_scheduler_bench import plot
from grant_scheduler_bench import profiles
from grant_scheduler_bench import runner
from grant_scheduler_bench import sqla
from grant_scheduler_bench import strategies
from grant_scheduler_bench import workloads

# NOTE: in Nova the build reaches the compute host's claim through the
# conductor and an RPC cast, tens to hundreds of milliseconds after the
# scheduler answers; that gap is the window legacy races in.  Each build
# waits a uniform 0..this long.
DEFAULT_BUILD_DELAY_MS = 200.0
DEFAULT_WORKLOADS = ["ironic"]
DEFAULT_SCHEDULERS = [1, 8]
DEFAULT_HOSTS = [20]
MAX_DELAY_MS = 60000.0
MAX_PROCESSES = 64

# The default table's columns: (JSON key, header); --wide shows every key.
COLUMNS = (
    ("strategy", "strategy"),
    ("schedulers", "sched"),
    ("placed", "placed"),
    ("no_valid_host", "NVH"),
    ("nvh_with_room", "NVH w/\nroom"),
    ("failed_builds", "failed\nbuilds"),
    ("overcommitted_hosts", "over-\ncommitted"),
    ("placements_per_s", "placed/s"),
    ("p50_ms", "p50 ms"),
    ("p99_ms", "p99 ms"),
    ("conflicts_per_placement", "conflicts\n/pl"),
    ("db_statements_per_placement", "stmts\n/pl"),
)


# What a conflict is for each strategy, for the summary.
CONFLICTS = {
    "legacy": "builds rejected by the compute host",
    "placement": "generation compare-and-swap retries",
    "placement-api": "HTTP 409 answers",
    "grants": "lost grants, each fallen over to another host",
    "grants-naive": "lost grants",
}


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (exit status 2)."""

    def error(self, message):
        self.exit(2, "%s: error: %s\n" % (self.prog, message))


def _ints(high):
    def parse(text):
        try:
            values = [int(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                "%r is not a list of integers" % text
            )
        if not values or min(values) < 1 or max(values) > high:
            raise argparse.ArgumentTypeError(
                "%r: give integers from 1 to %d" % (text, high)
            )
        return list(dict.fromkeys(values))

    return parse


def _int_range(low, high=None):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError("%r is not an integer" % text)
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(
                "%d: give an integer %s"
                % (
                    value,
                    "from %d to %d" % (low, high)
                    if high is not None
                    else "of at least %d" % low,
                )
            )
        return value

    return parse


def _delay_ms(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number" % text)
    if not math.isfinite(value) or value < 0 or value > MAX_DELAY_MS:
        raise argparse.ArgumentTypeError(
            "%s: give milliseconds from 0 to %d" % (text, MAX_DELAY_MS)
        )
    return value


def _names(choices):
    def parse(text):
        names = [part.strip() for part in text.split(",") if part.strip()]
        unknown = [n for n in names if n not in choices]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                "unknown %s; choose from %s"
                % (", ".join(unknown) or repr(text), ", ".join(choices))
            )
        return list(dict.fromkeys(names))

    return parse


def _writable_directory(text, directory):
    if not os.path.isdir(directory):
        raise argparse.ArgumentTypeError(
            "%s: directory %s does not exist" % (text, directory)
        )
    if not os.access(directory, os.W_OK):
        raise argparse.ArgumentTypeError(
            "%s: directory %s is not writable" % (text, directory)
        )


def _output_path(text):
    """A file the run can write at its end, checked before it starts."""
    path = os.path.abspath(text)
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError("%s is a directory" % text)
    _writable_directory(text, os.path.dirname(path))
    return text


def _output_dir(text):
    """A directory the runs can write into, checked before they start."""
    _writable_directory(text, os.path.abspath(text))
    return text


def _db_url(text):
    masked = urls.mask(text)
    try:
        db_conf.check_url(text)
    except api.GrantSchedulerError as exc:
        raise argparse.ArgumentTypeError(str(exc))
    try:
        url = sqla.make_url(text)
        # NOTE: builds the dialect and imports the driver; connects to
        # nothing.
        sa.create_engine(url).dispose()
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
        raise argparse.ArgumentTypeError(
            "%s: %s" % (masked, urls.mask(str(exc)))
        )
    except ImportError as exc:
        raise argparse.ArgumentTypeError(
            "%s: its driver is not installed (%s)" % (masked, exc)
        )
    if url.get_backend_name() == "sqlite" and url.database in (
        None,
        "",
        ":memory:",
    ):
        raise argparse.ArgumentTypeError(
            "%s: the benchmark's processes need a SQLite file, not memory"
            % masked
        )
    return text


def default_strategies():
    """The safe strategies; placement-api only when it is installed."""
    return [
        name
        for name, strategy in strategies.STRATEGIES.items()
        if not strategy.unsafe
        and not (getattr(strategy, "missing", None) and strategy.missing())
    ]


def parser():
    p = _Parser(
        prog="grant-scheduler-bench",
        description="Run the same seeded request stream through each "
        "scheduling strategy and compare them.",
    )
    p.add_argument(
        "--db",
        type=_db_url,
        help="SQLAlchemy URL (default: a temporary SQLite "
        "file). The benchmark empties grant_scheduler's tables; "
        "placement-api uses a database of its own next to it.",
    )
    p.add_argument(
        "--strategies",
        type=_names(tuple(strategies.STRATEGIES)),
        default=None,
        help="Comma-separated from %s (default: all but the unsafe "
        "grants-naive; placement-api only when installed)."
        % ", ".join(strategies.STRATEGIES),
    )
    p.add_argument(
        "--workloads",
        type=_names(workloads.NAMES),
        default=DEFAULT_WORKLOADS,
        help="Comma-separated from %s (default: %s)."
        % (", ".join(workloads.NAMES), ",".join(DEFAULT_WORKLOADS)),
    )
    p.add_argument(
        "--schedulers", type=_ints(MAX_PROCESSES), default=DEFAULT_SCHEDULERS
    )
    p.add_argument("--hosts", type=_ints(100000), default=DEFAULT_HOSTS)
    p.add_argument(
        "--requests",
        type=_int_range(1, 1000000),
        default=None,
        help="Requests per run (default: enough to exhaust).",
    )
    # NOTE: the product's own defaults, so a run without these options
    # measures what an operator gets.
    defaults = api.Settings()
    p.add_argument(
        "--host-subset-size",
        type=_int_range(1, 1000),
        default=defaults.host_subset_size,
    )
    p.add_argument(
        "--max-fallovers",
        type=_int_range(0, 10000),
        default=defaults.max_fallovers,
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--repeat",
        type=_int_range(1, 100),
        default=1,
        help="Run everything this many times, with seeds seed, seed+1...",
    )
    p.add_argument(
        "--latency-ms",
        type=_delay_ms,
        default=0.0,
        help="Sleep before every statement (a remote database).",
    )
    p.add_argument(
        "--commit-delay-ms",
        type=_delay_ms,
        default=0.0,
        help="Sleep up to this long, uniformly at random, between a "
        "grant's insert and its commit (shows H1).",
    )
    p.add_argument(
        "--build-delay-ms",
        type=_delay_ms,
        default=DEFAULT_BUILD_DELAY_MS,
        help="Up to this long, uniformly at random, between the answer and "
        "the compute host's claim (default: %(default)s).",
    )
    p.add_argument(
        "--placement-workers",
        type=_int_range(1, MAX_PROCESSES),
        default=4,
        help="placement-api: gunicorn worker processes (one on SQLite).",
    )
    p.add_argument(
        "--placement-conflict-retries",
        type=_int_range(1, 1000),
        default=None,
        help="placement-api: [placement] allocation_conflict_retry_count "
        "(default: placement's own, 10).",
    )
    p.add_argument(
        "--json",
        type=_output_path,
        metavar="PATH",
        help="Write every key of every row as JSON.",
    )
    p.add_argument(
        "--plot",
        type=_output_path,
        metavar="PATH",
        help="Draw throughput and conflicts against schedulers, one line "
        "per strategy, as a PNG (needs matplotlib).",
    )
    p.add_argument(
        "--wide", action="store_true", help="Show every key in the table."
    )
    p.add_argument(
        "--profile",
        type=_output_dir,
        metavar="DIR",
        help="Profile the first scheduler process of each run (cProfile, "
        "from the start of the clock to its last request): one .prof file "
        "per run in DIR and its own time by area printed.  The profiled "
        "process runs slower: read rates from a run without it.",
    )
    return p


def _validate(p, args):
    """What one option alone cannot say, checked before anything runs."""
    if args.strategies is None:
        args.strategies = default_strategies()
    elif placement_api.NAME in args.strategies:
        problem = placement_api.missing()
        if problem:
            p.error(problem)
    if args.plot:
        try:
            plot.require_matplotlib()
        except api.GrantSchedulerError as exc:
            p.error(str(exc))


def missing_extra():
    """The one line to print when the ``bench`` extra is not installed,
    else None."""
    if MISSING is None:
        return None
    return (
        "grant-scheduler-bench: %s is not installed; the benchmark's "
        "dependencies come with its extra: pip install "
        "'grant_scheduler[bench]'" % MISSING
    )


def main(argv=None):
    problem = missing_extra()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    p = parser()
    args = p.parse_args(argv)
    chosen = args.strategies
    _validate(p, args)
    left_out = placement_api.missing() if chosen is None else None
    if left_out:
        # NOTE: the default run goes on without the real service, and
        # says so.
        print(
            "grant-scheduler-bench: %s is left out: %s"
            % (placement_api.NAME, left_out),
            file=sys.stderr,
        )
    with tempfile.TemporaryDirectory() as scratch:
        url = args.db or "sqlite:///%s" % os.path.join(scratch, "bench.sqlite")
        try:
            rows, context = _run_all(args, url)
        except api.GrantSchedulerError as exc:
            print("ERROR: %s" % exc, file=sys.stderr)
            return 1
    for key, group in _groups(rows):
        workload, hosts, seed = key
        print(
            "\nworkload=%s hosts=%d seed=%d build_delay_ms=%g%s"
            % (
                workload,
                hosts,
                seed,
                args.build_delay_ms,
                " backend=%s" % sqla.make_url(url).get_backend_name(),
            )
        )
        print(render(group, wide=args.wide))
        print()
        print(summary(group, context.get(key, {}), args.build_delay_ms))
    if any(r["unsafe"] for r in rows):
        print(
            "\n(UNSAFE) grants-naive is the seed's literal protocol, for "
            "comparison only; never deploy it."
        )
    failed = [r for r in rows if r.get("errors")]
    for row in failed:
        print(
            "\nERROR in %s schedulers=%d: %s"
            % (
                row["strategy"],
                row["schedulers"],
                _last_line(row["errors"][0]),
            ),
            file=sys.stderr,
        )
    if args.profile:
        _print_profiles(args.profile, rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    if args.plot:
        plot.write(rows, args.plot, title=urls.mask(url))
    return 1 if failed else 0


def _print_profiles(directory, rows):
    print(
        "\nProfiles of the first scheduler process (own time by area; "
        "profiling slowed it, so the rates above are not comparable with "
        "a run without --profile):"
    )
    for name, meaning in profiles.AREAS:
        print("  %s: %s" % (name, meaning))
    for row in rows:
        filename = profiles.path(
            directory,
            row["strategy"],
            row["workload"],
            row["hosts"],
            row["schedulers"],
            row["seed"],
        )
        if os.path.exists(filename):
            print(profiles.describe(filename))


def _last_line(text):
    lines = [line for line in str(text).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _groups(rows):
    keys = []
    for row in rows:
        key = (row["workload"], row["hosts"], row["seed"])
        if key not in keys:
            keys.append(key)
    for key in keys:
        yield (
            key,
            [r for r in rows if (r["workload"], r["hosts"], r["seed"]) == key],
        )


def _label(row):
    return row["strategy"] + (" (UNSAFE)" if row["unsafe"] else "")


def render(rows, wide=False):
    """The rows as a table: the key columns (within 120 columns), or every
    key with ``wide``."""
    if wide:
        columns = [
            (k, k)
            for k in metrics.KEYS
            if k not in ("workload", "hosts", "seed")
        ]
    else:
        columns = COLUMNS
    body = [
        [
            _label(r) if key == "strategy" else _cell(r.get(key))
            for key, _ in columns
        ]
        for r in rows
    ]
    # NOTE: cells are formatted here (tabulate would round 1234.56 to
    # 6 significant digits).
    return compact_table(
        body,
        [header for _, header in columns],
        colalign=["left"] + ["right"] * (len(columns) - 1),
    )


def compact_table(body, headers, **options):
    """``tabulate``'s simple table without its two spaces of padding
    around each header, so that the key columns fit 120 columns (and the
    documentation can quote tables as printed)."""
    padding, tabulate.MIN_PADDING = tabulate.MIN_PADDING, 0
    try:
        return tabulate.tabulate(
            body,
            headers=headers,
            tablefmt="simple",
            disable_numparse=True,
            **options,
        )
    finally:
        tabulate.MIN_PADDING = padding


def _cell(value):
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return " ".join("%s:%s" % item for item in value.items()) or "-"
    return str(value)


def _count(n, singular, plural=None):
    return "%d %s" % (n, singular if n == 1 else (plural or singular + "s"))


def _names_of(rows):
    names = [_label(r) for r in rows]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _short(row, fits, fits_vcpus):
    text = "%s placed %d of the %d instances a serial run placed" % (
        _label(row),
        row["placed"],
        fits,
    )
    vcpus = row.get("placed_vcpus")
    if fits_vcpus is not None and vcpus is not None:
        # NOTE: with several flavours, fewer instances can be the same
        # capacity in larger ones.
        text += " (%d vCPUs against its %d%s)" % (
            vcpus,
            fits_vcpus,
            ": larger flavours" if vcpus >= fits_vcpus else "",
        )
    return text


def summary(rows, context, build_delay_ms):
    """One paragraph saying what the rows show, derived from them."""
    if not rows:
        return "No runs."
    most = max(r["schedulers"] for r in rows)
    top = [r for r in rows if r["schedulers"] == most]
    fits = context.get("serial_placed")
    sentences = []
    opening = "With %s" % _count(
        most, "scheduler process", "scheduler processes"
    )
    if build_delay_ms:
        opening += " and builds claimed up to %g ms after the answer" % (
            build_delay_ms
        )
    racing = [r for r in top if r["failed_builds"] or r["nvh_with_room"]]
    clean = [r for r in top if not (r["failed_builds"] or r["nvh_with_room"])]
    parts = []
    for r in racing:
        bits = []
        if r["failed_builds"]:
            bits.append(
                "%s on the compute host (each one rescheduled)"
                % _count(r["failed_builds"], "failed build")
            )
        if r["nvh_with_room"]:
            bits.append(
                "%s while a fresh read showed a host with room"
                % _count(r["nvh_with_room"], "NoValidHost answer")
            )
        parts.append("%s had %s" % (_label(r), " and ".join(bits)))
    if parts:
        sentences.append(opening + ", " + "; ".join(parts) + ".")
        if clean:
            sentences.append("%s had neither." % _names_of(clean))
    else:
        sentences.append(
            opening
            + ", no strategy had a failed build or a NoValidHost answer "
            "while a host had room."
        )
    over = [r for r in rows if r["overcommitted_hosts"]]
    if over:
        bits = []
        for name in dict.fromkeys(r["strategy"] for r in over):
            runs = [r for r in rows if r["strategy"] == name]
            bad = [r for r in runs if r["overcommitted_hosts"]]
            text = "%s overcommitted hosts in %d of %d runs (%s)" % (
                _label(bad[0]),
                len(bad),
                len(runs),
                ", ".join(
                    "%d at %d, placing %d"
                    % (
                        r["overcommitted_hosts"],
                        r["schedulers"],
                        r["placed"],
                    )
                    for r in bad
                ),
            )
            if fits is not None:
                text += " where %d fit" % fits
            bits.append(text)
        sentences.append("; ".join(bits) + ".")
    else:
        sentences.append("No run overcommitted a host.")
    short = [r for r in top if fits is not None and r["placed"] < fits]
    if short:
        sentences.append(
            "; ".join(
                _short(r, fits, context.get("serial_placed_vcpus"))
                for r in short
            )
            + "."
        )
    conflicted = [r for r in top if r["conflicts_per_placement"]]
    if conflicted:
        sentences.append(
            "Conflicts per placement at %d: %s."
            % (
                most,
                ", ".join(
                    "%s %.2f%s"
                    % (
                        _label(r),
                        r["conflicts_per_placement"],
                        " (%s)" % CONFLICTS[r["strategy"]]
                        if r["strategy"] in CONFLICTS
                        else "",
                    )
                    for r in conflicted
                ),
            )
        )
    busy = [r for r in top if r.get("cpu_busy_pct") is not None]
    if busy:
        sentences.append(
            "The machine's %s were busy at %d: %s."
            % (
                _count(os.cpu_count() or 1, "core"),
                most,
                ", ".join(
                    "%s %d%%" % (_label(r), r["cpu_busy_pct"]) for r in busy
                ),
            )
        )
    ranked = sorted(top, key=lambda r: r["placements_per_s"], reverse=True)
    speed = "Placements per second at %d: %s" % (
        most,
        ", ".join(
            "%s %.1f" % (_label(r), r["placements_per_s"]) for r in ranked
        ),
    )
    by_name = {r["strategy"]: r for r in top}
    grants = by_name.get("grants")
    model = by_name.get("placement")
    if grants and model and model["placements_per_s"]:
        speed += " (grants at %.2fx the placement model)" % (
            grants["placements_per_s"] / model["placements_per_s"]
        )
    sentences.append(speed + ".")
    return _wrap(" ".join(sentences))


def _wrap(text, width=100):
    import textwrap  # noqa: PLC0415 - only for the summary

    return textwrap.fill(text, width=width)


def _run_all(args, url):
    options = {
        "url": url,
        "host_subset_size": args.host_subset_size,
        "max_fallovers": args.max_fallovers,
        "latency_s": args.latency_ms / 1000.0,
        "commit_delay_ms": args.commit_delay_ms,
        "build_delay_ms": args.build_delay_ms,
        "placement_workers": args.placement_workers,
        "placement_conflict_retries": args.placement_conflict_retries,
        "profile_dir": args.profile,
    }
    ceiling = runner.commit_ceiling(url)
    seeds = [args.seed + n for n in range(args.repeat)]
    groups = len(args.workloads) * len(args.hosts) * len(seeds)
    progress = Progress(
        groups * (1 + len(args.strategies) * len(args.schedulers))
    )
    rows = []
    context = {}
    try:
        for name in args.workloads:
            for hosts in args.hosts:
                workload = workloads.make(name, hosts, args.requests)
                for seed in seeds:
                    run_options = dict(
                        options, churn=workload.churn, seed=seed
                    )
                    progress.start(
                        "%s hosts=%d seed=%d serial oracle"
                        % (name, hosts, seed)
                    )
                    serial = runner.run(
                        "grants",
                        workload,
                        1,
                        dict(run_options, profile_dir=None),
                    )
                    progress.finish()
                    serial_nvh = sum(
                        r["no_valid_host"] for r in serial["schedulers"]
                    )
                    context[(name, hosts, seed)] = {
                        "serial_placed": sum(
                            r["placed"] for r in serial["schedulers"]
                        ),
                        "serial_placed_vcpus": sum(
                            r["placed_vcpus"] for r in serial["schedulers"]
                        ),
                    }
                    for strategy_name in args.strategies:
                        strategy = strategies.STRATEGIES[strategy_name]
                        for count in args.schedulers:
                            progress.start(
                                "%s hosts=%d seed=%d %s schedulers=%d"
                                % (name, hosts, seed, strategy_name, count)
                            )
                            raw = runner.run(
                                strategy_name, workload, count, run_options
                            )
                            progress.finish()
                            row = metrics.summarise(
                                strategy,
                                workload,
                                count,
                                raw,
                                serial_nvh,
                                ceiling,
                                seed=seed,
                            )
                            errors = metrics.errors(raw, workload)
                            if errors:
                                row["errors"] = errors
                                progress.message(_last_line(errors[0]))
                            rows.append(row)
    finally:
        progress.close()
    return rows, context


class Progress:
    """A tqdm bar on a terminal; one plain line per run elsewhere (CI
    logs), so nothing there depends on carriage returns."""

    def __init__(self, total, stream=None):
        self.total = total
        self.count = 0
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", None)) and (
            self.stream.isatty()
        )
        self.bar = None
        if self.tty:
            self.bar = tqdm.tqdm(
                total=total,
                file=self.stream,
                unit="run",
                leave=False,
                dynamic_ncols=True,
                mininterval=0,
                bar_format="[bench] {n_fmt}/{total_fmt} runs done {bar} "
                "{elapsed} {desc}",
            )

    def start(self, text):
        self.count += 1
        if self.bar is not None:
            self.bar.set_description_str(text)
        else:
            print(
                "[bench] %d/%d %s" % (self.count, self.total, text),
                file=self.stream,
                flush=True,
            )

    def finish(self):
        if self.bar is not None:
            self.bar.update(1)

    def message(self, text):
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


if __name__ == "__main__":
    sys.exit(main())
