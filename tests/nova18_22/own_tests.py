"""The pieces of a runner of Nova's own functional tests, with the stock
scheduler or with ours, shared by ``tests.nova22.own_tests`` (Nova 22) and
``tests.nova18_21.own_tests`` (Nova 18-21).

Each worker process runs its shard of the named tests, monkey-patched as
Nova's tests require (its entry module does that first).  With
grant_scheduler, every ``start_service('scheduler')`` of a test whose
scheduler is the stock one is given ``[scheduler] driver =
grant_scheduler`` (loaded by the release's SchedulerManager through the
installed entry point) and a ``[grant_scheduler_database]`` of its own, a
copy of one SQLite file migrated by ``grant-scheduler-manage db sync``.
Every other option keeps its default.
"""

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

OUTCOMES = ("passed", "failed", "error", "skipped")
STOCK_DRIVER = "filter_scheduler"
NODES_SEEN = {}


class Outcomes(unittest.TestResult):
    """``{test id: outcome}`` and the last lines of each failure."""

    def __init__(self):
        super().__init__()
        self.outcomes, self.details, self.seconds = {}, {}, {}
        self._started = None

    def startTest(self, test):
        super().startTest(test)
        self._started = time.monotonic()

    def stopTest(self, test):
        super().stopTest(test)
        self.seconds[test.id()] = round(time.monotonic() - self._started, 2)

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


def migrated_template(workdir, cwd=None):
    """A SQLite file at grant_scheduler's head revision, made by the
    operator's command (run in ``cwd``)."""
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
        cwd=cwd,
    )
    return template


def count_nodes(test_id, database):
    """How many compute nodes the driver registered: proof that it ran."""
    with contextlib.closing(sqlite3.connect(database)) as db:
        [(count,)] = db.execute("SELECT COUNT(*) FROM gs_hosts").fetchall()
    NODES_SEEN[test_id] = count


def use_grant_scheduler(workdir, cwd=None):
    """Give every stock scheduler service of a test the grant_scheduler
    driver and a migrated database of its own."""
    from nova import test as nova_test

    from grant_scheduler import conf as gs_conf

    template = migrated_template(workdir, cwd)
    start_service = nova_test.TestCase.start_service

    def start_with_grants(self, name, *args, **kwargs):
        conf = nova_test.CONF
        if name == "scheduler" and conf.scheduler.driver == STOCK_DRIVER:
            gs_conf.register_opts(conf)
            database = tempfile.mktemp(suffix=".sqlite", dir=workdir)
            shutil.copyfile(template, database)
            self.addCleanup(os.unlink, database)
            self.addCleanup(count_nodes, self.id(), database)
            self.flags(driver="grant_scheduler", group="scheduler")
            self.flags(
                connection="sqlite:///" + database,
                group="grant_scheduler_database",
            )
        return start_service(self, name, *args, **kwargs)

    nova_test.TestCase.start_service = start_with_grants


def tests(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from tests(test)
        else:
            yield test


def shard(names, index, count):
    """Every ``count``-th test of ``names``, from ``index``, in the order
    they load: each class is dealt out over the shards, so that a class
    of slow tests (Nova 18's resizes and migrations of
    ``ServerMovingTests``) does not leave one worker busy after the
    others are done, as dealing out whole classes did."""
    found = list(tests(unittest.defaultTestLoader.loadTestsFromNames(names)))
    return unittest.TestSuite(found[index::count])


def lines(given):
    """``given``, each ``@FILE`` replaced by FILE's lines (without ``#``
    comments and blank lines)."""
    found = []
    for name in given:
        if not name.startswith("@"):
            found.append(name)
            continue
        with open(name[1:]) as f:
            found.extend(
                line.split("#")[0].strip()
                for line in f
                if line.split("#")[0].strip()
            )
    return found


def allowed(path):
    """``{test id: reason}`` of a file of ``TEST_ID REASON`` lines."""
    found = {}
    if path:
        for line in lines(["@" + path]):
            test_id, _, reason = line.partition(" ")
            found[test_id] = reason.strip()
    return found


def worker(args, migrate_in_workdir=False):
    """Run shard ``args.shard`` of ``args.names`` with ``args.scheduler``
    and write the outcomes to ``args.json`` (``migrate_in_workdir``: the
    template migrated from the worker's scratch directory, so the
    installed grant_scheduler does it rather than a checkout's)."""
    workdir = tempfile.mkdtemp(prefix="nova-own-tests-")
    try:
        if args.scheduler == "grant_scheduler":
            use_grant_scheduler(
                workdir, workdir if migrate_in_workdir else None
            )
        index, count = (int(n) for n in args.shard.split("/"))
        result = Outcomes()
        shard(args.names, index, count).run(result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    with open(args.json, "w") as f:
        json.dump(
            {
                "outcomes": result.outcomes,
                "details": result.details,
                "nodes_seen": NODES_SEEN,
                "seconds": result.seconds,
            },
            f,
        )
    return 0


class WorkerFailed(Exception):
    """A worker exited badly or wrote nothing: ``args[0]`` is its part."""


def run_workers(module, scheduler, names, parts):
    """Run ``names`` with ``scheduler`` in one worker process (``python3
    -m module``) per path of ``parts``, each writing its outcomes there
    (and its output beside, ``.log``); the outcomes merged."""
    processes = []
    for index, part in enumerate(parts):
        command = [sys.executable, "-W", "ignore", "-m", module]
        command += ["--scheduler", scheduler, "--json", part]
        command += ["--shard", "%d/%d" % (index, len(parts))] + names
        log = open(part + ".log", "w")
        processes.append(
            (
                part,
                subprocess.Popen(
                    command, stdout=log, stderr=subprocess.STDOUT
                ),
            )
        )
    found = {"outcomes": {}, "details": {}, "nodes_seen": {}, "seconds": {}}
    for part, process in processes:
        if process.wait() != 0 or not os.path.exists(part):
            raise WorkerFailed(part)
        with open(part) as f:
            for key, value in json.load(f).items():
                found[key].update(value)
    return found


def run_once(module, scheduler, test_id, part):
    """``test_id`` alone with ``scheduler`` in one worker process (its
    outcomes in ``part``): its outcome, and the failure's last lines."""
    try:
        found = run_workers(module, scheduler, [test_id], [part])
    except WorkerFailed:
        with open(part + ".log") as f:
            return "worker failed", f.read()[-3000:]
    return (
        found["outcomes"].get(test_id, "not run"),
        found["details"].get(test_id, ""),
    )


def recheck(module, worse, directory, details, run=run_once):
    """Run each test of ``worse`` (the stock scheduler's record passes
    it, grant_scheduler did not in the main run) once more, now and alone
    in a worker of ``module``: the main run's workers load the machine
    beside whatever else runs there, and a few of Nova's tests give a
    server only five seconds (ten looks half a second apart) to reach a
    state.  With grant_scheduler first: a pass alone clears it.  Where it
    fails again, with the stock scheduler too, in the same conditions:
    a stock pass makes it a regression; a stock failure says the
    machine cannot pass it now with either, so it is not counted against
    grant_scheduler.  Returns the regressions; prints each test's failure
    in the main run (``details``: ``{test id: text}``) and each verdict,
    so a test that needed the second run is never silent."""
    regressions = []
    for index, test_id in enumerate(worse):
        if details.get(test_id):
            print("--- %s\n%s" % (test_id, details[test_id]))
        part = os.path.join(directory, "recheck-%d" % index)
        ours, detail = run(module, "grant_scheduler", test_id, part + ".ours")
        if ours == "passed":
            print(
                "%s: failed in the main run, passed alone with "
                "grant_scheduler: load, not a regression" % test_id
            )
            continue
        stock, stock_detail = run(module, "stock", test_id, part + ".stock")
        if stock == "passed":
            print(
                "%s: %s again alone with grant_scheduler, stock passed "
                "it beside: a regression\n%s" % (test_id, ours, detail)
            )
            regressions.append(test_id)
        else:
            print(
                "%s: %s again alone with grant_scheduler and %s with "
                "stock: neither passes it here now, not counted"
                % (test_id, ours, stock)
            )
            for name, text in (
                ("grant_scheduler", detail),
                ("stock", stock_detail),
            ):
                if text:
                    print("--- %s\n%s" % (name, text))
    return regressions


def module_of(test_id):
    """The test module of a test id, short (``test_servers``,
    ``regressions.test_bug_1718512``)."""
    parts = test_id.split(".")
    for index, part in enumerate(parts):
        if part.startswith("test_"):
            parts = parts[: index + 1]
            break
    return ".".join(parts).replace("nova.tests.functional.", "")


def compare(stock, ours, allowed):
    """Print stock's and grant_scheduler's outcomes side by side, per
    module; return the tests stock passes and ours does not, less those
    ``allowed`` (``{test id: reason}``) lists."""
    rows = {}
    for test_id in set(stock) | set(ours):
        row = rows.setdefault(module_of(test_id), [0, 0, 0])
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
