"""A release's own functional tests, with the stock scheduler and with ours.

``python3 -m tests.nova_releases.own_tests [--workers N] [--record FILE
[--both]] @LIST``, inside a release's venv (``tools/nova-releases.sh own
RELEASE``), runs the named Nova test modules in worker processes
monkey-patched as Nova's tests require (``nova.tests.functional`` imported
first): untouched (the stock FilterScheduler; with ``--record`` and
without ``--both``, the stock outcomes recorded in FILE stand for this
run) and with every ``start_service(
'scheduler')`` given ``[scheduler] driver = grant_scheduler`` (loaded by
the release's SchedulerManager through the installed entry point) and a
``[grant_scheduler_database]`` of its own, a copy of one SQLite file
migrated by ``grant-scheduler-manage db sync``.  Every other option keeps
its default.  Modules the release does not have are listed and left out.

It prints both outcomes per module and exits 1 when grant_scheduler fails
a test the stock scheduler passes in the same release (except the
``TEST_ID REASON`` lines of ``--allowed``), or when no test ran with
grant_scheduler registering compute nodes.
"""

import os
import sys

_CHECKOUT = os.path.abspath(
    os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
)
sys.path[:] = [
    p for p in sys.path if os.path.abspath(p or os.curdir) != _CHECKOUT
] + [_CHECKOUT]

import nova.tests.functional  # noqa: E402,F401,I001 - first: it monkey-patches

import argparse  # noqa: E402
import contextlib  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402

STOCK_DRIVER = "filter_scheduler"
NODES_SEEN = {}


class _Outcomes(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.outcomes, self.details = {}, {}

    def addSuccess(self, test):
        self.outcomes[test.id()] = "passed"

    def _bad(self, outcome, test, err):
        self.outcomes[test.id()] = outcome
        self.details[test.id()] = self._exc_info_to_string(err, test)[-3000:]

    def addFailure(self, test, err):
        self._bad("failed", test, err)

    def addError(self, test, err):
        self._bad("error", test, err)

    def addSkip(self, test, reason):
        self.outcomes[test.id()] = "skipped"

    def addExpectedFailure(self, test, err):
        self.outcomes[test.id()] = "passed"

    def addUnexpectedSuccess(self, test):
        self.outcomes[test.id()] = "failed"


def _migrated_template(workdir):
    template = os.path.join(workdir, "template.sqlite")
    config = os.path.join(workdir, "gs.conf")
    with open(config, "w") as f:
        f.write(
            "[grant_scheduler_database]\nconnection = sqlite:///%s\n"
            % template
        )
    subprocess.run(
        [sys.executable, "-m", "grant_scheduler.cmd.manage"]
        + ["--config-file", config, "db", "sync"],
        check=True,
        cwd=workdir,
    )
    return template


def _count_nodes(test_id, database):
    with contextlib.closing(sqlite3.connect(database)) as db:
        [(count,)] = db.execute("SELECT COUNT(*) FROM gs_hosts").fetchall()
    NODES_SEEN[test_id] = count


def _use_grant_scheduler(workdir):
    from nova import test as nova_test

    from grant_scheduler import conf as gs_conf

    template = _migrated_template(workdir)
    start_service = nova_test.TestCase.start_service

    def start_with_grants(self, name, *args, **kwargs):
        conf = nova_test.CONF
        if name == "scheduler" and conf.scheduler.driver == STOCK_DRIVER:
            gs_conf.register_opts(conf)
            database = tempfile.mktemp(suffix=".sqlite", dir=workdir)
            shutil.copyfile(template, database)
            self.addCleanup(os.unlink, database)
            self.addCleanup(_count_nodes, self.id(), database)
            self.flags(driver="grant_scheduler", group="scheduler")
            self.flags(
                connection="sqlite:///" + database,
                group="grant_scheduler_database",
            )
        return start_service(self, name, *args, **kwargs)

    nova_test.TestCase.start_service = start_with_grants


def _tests(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _tests(test)
        else:
            yield test


def _shard(names, index, count):
    """Every ``count``-th class from ``index``, the biggest spread first."""
    by_class = {}
    for test in _tests(unittest.defaultTestLoader.loadTestsFromNames(names)):
        by_class.setdefault(type(test).__qualname__, []).append(test)
    shards = [[] for _ in range(count)]
    for tests in sorted(by_class.values(), key=len, reverse=True):
        min(shards, key=len).extend(tests)
    return unittest.TestSuite(shards[index])


def _names(given):
    names = []
    for name in given:
        if not name.startswith("@"):
            names.append(name)
            continue
        with open(name[1:]) as f:
            names.extend(
                line.split("#")[0].strip()
                for line in f
                if line.split("#")[0].strip()
            )
    return names


def _present(names):
    """The modules this release has, and those it has not."""
    present, missing = [], []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            # A class or a test of a module.
            tests = list(
                _tests(unittest.defaultTestLoader.loadTestsFromNames([name]))
            )
            if not tests or any(
                type(t).__name__ == "_FailedTest" for t in tests
            ):
                missing.append(name)
                continue
        present.append(name)
    return present, missing


def _worker(args):
    workdir = tempfile.mkdtemp(prefix="nova-own-tests-")
    try:
        if args.scheduler == "grant_scheduler":
            _use_grant_scheduler(workdir)
        index, count = (int(n) for n in args.shard.split("/"))
        result = _Outcomes()
        _shard(args.names, index, count).run(result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    with open(args.json, "w") as f:
        json.dump(
            {
                "outcomes": result.outcomes,
                "details": result.details,
                "nodes_seen": NODES_SEEN,
            },
            f,
        )
    return 0


def _run(scheduler, names, workers, directory):
    """Run ``names`` with ``scheduler`` in ``workers`` processes."""
    processes = []
    for index in range(workers):
        part = os.path.join(directory, "%s.%d.json" % (scheduler, index))
        command = [sys.executable, "-W", "ignore", "-m", __spec__.name]
        command += ["--scheduler", scheduler, "--json", part]
        command += ["--shard", "%d/%d" % (index, workers)] + names
        log = open(part + ".log", "w")
        processes.append(
            (
                part,
                subprocess.Popen(
                    command, stdout=log, stderr=subprocess.STDOUT
                ),
            )
        )
    found = {"outcomes": {}, "details": {}, "nodes_seen": {}}
    for part, process in processes:
        if process.wait() != 0 or not os.path.exists(part):
            with open(part + ".log") as f:
                print(f.read()[-5000:])
            raise SystemExit("worker %s failed" % part)
        with open(part) as f:
            for key, value in json.load(f).items():
                found[key].update(value)
    return found


def _module(test_id):
    parts = test_id.split(".")
    for index, part in enumerate(parts):
        if part.startswith("test_"):
            parts = parts[: index + 1]
            break
    return ".".join(parts).replace("nova.tests.functional.", "")


def compare(stock, ours, allowed):
    """Print both outcomes per module; return the tests stock passes and
    ours does not, less the allowed ones."""
    rows = {}
    for test_id in set(stock) | set(ours):
        row = rows.setdefault(_module(test_id), [0, 0, 0])
        row[0] += 1
        row[1] += stock.get(test_id) == "passed"
        row[2] += ours.get(test_id) == "passed"
    width = max([len(m) for m in rows] + [6])
    print("%-*s %6s %6s %6s" % (width, "module", "tests", "stock", "ours"))
    for module in sorted(rows):
        print("%-*s %6d %6d %6d" % ((width, module) + tuple(rows[module])))
    totals = [sum(r[i] for r in rows.values()) for i in range(3)]
    print("%-*s %6d %6d %6d" % ((width, "total") + tuple(totals)))
    worse = sorted(
        t
        for t, outcome in stock.items()
        if outcome == "passed" and ours.get(t) != "passed"
    )
    for test_id in worse:
        note = allowed.get(test_id)
        print(
            "%s: stock passed, ours %s%s"
            % (
                test_id,
                ours.get(test_id, "not run"),
                " (allowed: %s)" % note if note is not None else "",
            )
        )
    return [t for t in worse if t not in allowed]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scheduler", choices=("stock", "grant_scheduler"))
    parser.add_argument("--json", help=argparse.SUPPRESS)
    parser.add_argument("--shard", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=".nova-own-tests")
    parser.add_argument("--allowed", help="'TEST_ID REASON' lines")
    parser.add_argument(
        "--record",
        help="the stock scheduler's outcomes in this release (JSON): "
        "compared with, or with --both rewritten",
    )
    parser.add_argument(
        "--both",
        action="store_true",
        help="run the stock scheduler too (and rewrite --record)",
    )
    parser.add_argument("names", nargs="+", help="modules, or @FILE")
    args = parser.parse_args(argv)
    args.names = _names(args.names)
    if args.shard:
        return _worker(args)
    from nova import version

    release = version.version_info.release_string()
    names, missing = _present(args.names)
    for name in missing:
        print("not in Nova %s: %s" % (release, name))
    if not names:
        raise SystemExit("none of the modules is in Nova %s" % release)
    directory = os.path.join(args.out, release)
    os.makedirs(directory, exist_ok=True)
    results = {}
    schedulers = ("stock", "grant_scheduler")
    if args.record and not args.both:
        with open(args.record) as f:
            results["stock"] = {"outcomes": json.load(f)["outcomes"]}
        print("stock: the run recorded in %s" % args.record)
        schedulers = ("grant_scheduler",)
    for scheduler in schedulers:
        start = time.monotonic()
        results[scheduler] = _run(scheduler, names, args.workers, directory)
        counts = {}
        for outcome in results[scheduler]["outcomes"].values():
            counts[outcome] = counts.get(outcome, 0) + 1
        print(
            "Nova %s, %s: %s in %.0f s"
            % (release, scheduler, counts, time.monotonic() - start),
            flush=True,
        )
        with open(os.path.join(directory, scheduler + ".json"), "w") as f:
            json.dump(results[scheduler], f, indent=1, sort_keys=True)
    if args.record and args.both:
        with open(args.record, "w") as f:
            json.dump(
                {
                    "release": release,
                    "scheduler": "stock",
                    "outcomes": results["stock"]["outcomes"],
                },
                f,
                indent=1,
                sort_keys=True,
            )
            f.write("\n")
    nodes_seen = results["grant_scheduler"]["nodes_seen"]
    registered = sum(1 for n in nodes_seen.values() if n)
    print(
        "tests whose scheduler was grant_scheduler: %d, with compute nodes "
        "registered: %d" % (len(nodes_seen), registered)
    )
    allowed = {}
    if args.allowed:
        for line in _names(["@" + args.allowed]):
            test_id, _, reason = line.partition(" ")
            allowed[test_id] = reason.strip()
    worse = compare(
        results["stock"]["outcomes"],
        results["grant_scheduler"]["outcomes"],
        allowed,
    )
    for test_id in worse:
        detail = results["grant_scheduler"]["details"].get(test_id)
        if detail:
            print("--- %s\n%s" % (test_id, detail))
    if not registered:
        print("FAILED: grant_scheduler registered no compute node")
        return 1
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
