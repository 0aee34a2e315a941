"""Nova 22's own functional tests, with the stock scheduler or with ours.

``python3 -m tests.nova22.own_tests --scheduler grant_scheduler --json OUT
--workers 2 TEST_NAME...`` runs the named Nova test modules, classes or
methods (``nova.tests.functional.test_server_group``, ...) in worker
processes, each monkey-patched as Nova's services are, and writes
``{test id: outcome}`` to OUT.

With ``--scheduler grant_scheduler`` every ``start_service('scheduler')``
of a test is given ``[scheduler] driver = grant_scheduler`` (loaded by
Nova's SchedulerManager through the installed entry point) and a
``[grant_scheduler_database]`` of its own: a copy of one SQLite file
migrated at the start of the worker.  Nothing else of Nova's test changes:
every other option, grant_scheduler's included, keeps its default, and a
test that picks its own scheduler driver keeps it.  ``--scheduler stock``
runs the same tests untouched.
"""

import nova.monkey_patch  # noqa: F401,I001 - first, as in nova-scheduler

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest

OUTCOMES = ("passed", "failed", "error", "skipped")
STOCK_DRIVER = "filter_scheduler"


class _Outcomes(unittest.TestResult):
    """``{test id: outcome}`` and the first lines of each failure."""

    def __init__(self):
        super().__init__()
        self.outcomes = {}
        self.details = {}

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
    """A SQLite file at grant_scheduler's head revision, made by the
    operator's command."""
    template = os.path.join(workdir, "template.sqlite")
    config = os.path.join(workdir, "gs.conf")
    with open(config, "w") as f:
        f.write(
            "[grant_scheduler_database]\nconnection = sqlite:///%s\n"
            % template
        )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grant_scheduler.cmd.manage",
            "--config-file",
            config,
            "db",
            "sync",
        ],
        check=True,
    )
    return template


def _use_grant_scheduler(workdir):
    """Give every scheduler service of a test the grant_scheduler driver
    and a migrated database of its own."""
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


NODES_SEEN = {}


def _count_nodes(test_id, database):
    """How many compute nodes the driver registered: proof that it ran."""
    with contextlib.closing(sqlite3.connect(database)) as db:
        [(count,)] = db.execute("SELECT COUNT(*) FROM gs_hosts").fetchall()
    NODES_SEEN[test_id] = count


def _shard(names, index, count):
    """The tests of every ``count``-th class, from ``index``: whole classes
    stay together, and the biggest are spread first."""
    by_class = {}
    for test in _tests(unittest.defaultTestLoader.loadTestsFromNames(names)):
        by_class.setdefault(type(test).__qualname__, []).append(test)
    shards = [[] for _ in range(count)]
    for tests in sorted(by_class.values(), key=len, reverse=True):
        min(shards, key=len).extend(tests)
    return unittest.TestSuite(shards[index])


def _tests(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _tests(test)
        else:
            yield test


def _names(given):
    names = []
    for name in given:
        if not name.startswith("@"):
            names.append(name)
            continue
        with open(name[1:]) as f:
            names.extend(
                line.strip()
                for line in f
                if line.strip() and not line.startswith("#")
            )
    return names


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


def _module(test_id):
    """The test module of a test id, short (``test_servers``,
    ``regressions.test_bug_1718512``)."""
    parts = test_id.split(".")
    for index, part in enumerate(parts):
        if part.startswith("test_"):
            parts = parts[: index + 1]
            break
    return ".".join(parts).replace("nova.tests.functional.", "")


def compare(stock_file, ours_file, allowed_file=None):
    """Print stock's and grant_scheduler's outcomes side by side, per
    module; return the tests stock passes and ours does not, less those
    ``allowed_file`` lists (``test id  reason`` lines)."""
    with open(stock_file) as f:
        stock = json.load(f)["outcomes"]
    with open(ours_file) as f:
        ours = json.load(f)["outcomes"]
    allowed = {}
    if allowed_file:
        for name in _names(["@" + allowed_file]):
            test_id, _, reason = name.partition(" ")
            allowed[test_id] = reason.strip()
    rows = {}
    for test_id in set(stock) | set(ours):
        row = rows.setdefault(_module(test_id), [0, 0, 0])
        row[0] += 1
        row[1] += stock.get(test_id) == "passed"
        row[2] += ours.get(test_id) == "passed"
    width = max(len(m) for m in rows)
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
    parser.add_argument("--json", help="where to write")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shard", help=argparse.SUPPRESS)
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("STOCK_JSON", "OURS_JSON"),
        help="only compare two earlier runs",
    )
    parser.add_argument(
        "--allowed",
        help="tests that may pass with stock and not with ours: "
        "'TEST_ID REASON' lines",
    )
    parser.add_argument(
        "names",
        nargs="*",
        help="test names, or @FILE for the names in FILE (one a line)",
    )
    args = parser.parse_args(argv)
    if args.compare:
        return 1 if compare(*args.compare, allowed_file=args.allowed) else 0
    args.names = _names(args.names)
    if args.shard:
        return _worker(args)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    workers = []
    for index in range(args.workers):
        part = "%s.%d" % (args.json, index)
        command = [
            sys.executable,
            "-W",
            "ignore",
            "-m",
            "tests.nova22.own_tests",
            "--scheduler",
            args.scheduler,
            "--json",
            part,
            "--shard",
            "%d/%d" % (index, args.workers),
        ] + args.names
        log = open(part + ".log", "w")
        workers.append(
            (
                part,
                subprocess.Popen(
                    command, stdout=log, stderr=subprocess.STDOUT
                ),
            )
        )
    outcomes, details, nodes_seen = {}, {}, {}
    for part, process in workers:
        if process.wait() != 0 or not os.path.exists(part):
            print("worker %s failed; see %s.log" % (part, part))
            return 1
        with open(part) as f:
            found = json.load(f)
        outcomes.update(found["outcomes"])
        details.update(found["details"])
        nodes_seen.update(found["nodes_seen"])
    with open(args.json, "w") as f:
        json.dump(
            {
                "scheduler": args.scheduler,
                "outcomes": outcomes,
                "details": details,
                "nodes_seen": nodes_seen,
            },
            f,
            indent=1,
            sort_keys=True,
        )
    counts = {o: list(outcomes.values()).count(o) for o in OUTCOMES}
    print("%s: %s" % (args.scheduler, counts))
    if args.scheduler == "grant_scheduler":
        print(
            "tests whose scheduler was grant_scheduler: %d, of which with "
            "compute nodes registered: %d"
            % (len(nodes_seen), sum(1 for n in nodes_seen.values() if n))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
