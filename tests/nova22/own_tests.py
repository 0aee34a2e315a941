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
runs the same tests untouched.  The runner's pieces are
``tests.nova18_22.own_tests``, shared with Nova 18-21's.
"""

import nova.monkey_patch  # noqa: F401,I001 - first, as in nova-scheduler

import argparse
import json
import os
import sys

from tests.nova18_22 import own_tests as shared


def compare(stock_file, ours_file, allowed_file=None):
    """Print stock's and grant_scheduler's outcomes side by side, per
    module; return the tests stock passes and ours does not, less those
    ``allowed_file`` lists (``test id  reason`` lines), and less those
    that pass when run again alone (``shared.recheck``)."""
    with open(stock_file) as f:
        stock = json.load(f)["outcomes"]
    with open(ours_file) as f:
        ours = json.load(f)
    worse = shared.compare(
        stock, ours["outcomes"], shared.allowed(allowed_file)
    )
    return shared.recheck(
        "tests.nova22.own_tests",
        worse,
        os.path.dirname(ours_file),
        ours["details"],
    )


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
        help="compare two earlier runs (what ours failed run again alone)",
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
    args.names = shared.lines(args.names)
    if args.shard:
        return shared.worker(args)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    parts = ["%s.%d" % (args.json, index) for index in range(args.workers)]
    try:
        found = shared.run_workers(
            "tests.nova22.own_tests", args.scheduler, args.names, parts
        )
    except shared.WorkerFailed as failed:
        print("worker %s failed; see %s.log" % ((failed.args[0],) * 2))
        return 1
    outcomes, nodes_seen = found["outcomes"], found["nodes_seen"]
    with open(args.json, "w") as f:
        json.dump(
            dict(found, scheduler=args.scheduler),
            f,
            indent=1,
            sort_keys=True,
        )
    counts = {o: list(outcomes.values()).count(o) for o in shared.OUTCOMES}
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
