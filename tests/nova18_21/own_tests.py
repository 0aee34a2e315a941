"""A release's own functional tests, with the stock scheduler and with ours.

``python3 -m tests.nova18_21.own_tests [--workers N] [--record FILE
[--both]] NAME...`` (a NAME is a module, or ``@LIST``: a file of modules,
one a line, each optionally followed by the releases that run it), inside
a release's venv (``tools/nova-releases.sh own RELEASE``), runs the named
Nova test modules in worker processes monkey-patched as Nova's tests
require (``nova.tests.functional`` imported first): untouched (the stock
FilterScheduler) and with every ``start_service('scheduler')`` given
``[scheduler] driver = grant_scheduler`` (``tests.nova18_22.own_tests``,
shared with Nova 22's runner).  With ``--record`` and without ``--both``,
the stock outcomes recorded in FILE for the modules named stand for the
stock run; with ``--both`` the stock scheduler runs too and its outcomes
replace those of the modules named in FILE (the others are kept, so a
module can be recorded on its own).  Modules the release does not have
are listed and left out.

It prints both outcomes per module and exits 1 when grant_scheduler fails
a test the stock scheduler passes in the same release (except the
``TEST_ID REASON`` lines of ``--allowed``) and fails it again when run
alone while the stock scheduler passes it beside (``shared.recheck``), or
when no test ran with grant_scheduler registering compute nodes.
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
import importlib  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402

from tests.nova18_22 import own_tests as shared  # noqa: E402


def _for_release(lines, release):
    """The names of ``lines`` (``NAME [RELEASE...]``) that ``release``
    (its major number) runs."""
    names = []
    for line in lines:
        name, *releases = line.split()
        if not releases or str(release) in releases:
            names.append(name)
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
                shared.tests(
                    unittest.defaultTestLoader.loadTestsFromNames([name])
                )
            )
            if not tests or any(
                type(t).__name__ == "_FailedTest" for t in tests
            ):
                missing.append(name)
                continue
        present.append(name)
    return present, missing


def _under(test_id, names):
    """Whether ``test_id`` is one of ``names`` or within one of them."""
    return any(test_id == n or test_id.startswith(n + ".") for n in names)


def _run(scheduler, names, workers, directory):
    """Run ``names`` with ``scheduler`` in ``workers`` processes."""
    parts = [
        os.path.join(directory, "%s.%d.json" % (scheduler, index))
        for index in range(workers)
    ]
    try:
        return shared.run_workers(__spec__.name, scheduler, names, parts)
    except shared.WorkerFailed as failed:
        with open(failed.args[0] + ".log") as f:
            print(f.read()[-5000:])
        raise SystemExit("worker %s failed" % failed.args[0])


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
    from nova import version

    release = version.version_info.release_string()
    args.names = _for_release(
        shared.lines(args.names), int(release.split(".")[0])
    )
    if args.shard:
        return shared.worker(args, migrate_in_workdir=True)
    names, missing = _present(args.names)
    for name in missing:
        print("not in Nova %s: %s" % (release, name))
    if not names:
        raise SystemExit("none of the modules is in Nova %s" % release)
    directory = os.path.join(args.out, release)
    os.makedirs(directory, exist_ok=True)
    results = {}
    schedulers = ("stock", "grant_scheduler")
    recorded = {}
    if args.record and os.path.exists(args.record):
        with open(args.record) as f:
            recorded = json.load(f)["outcomes"]
    if args.record and not args.both:
        results["stock"] = {
            "outcomes": {t: o for t, o in recorded.items() if _under(t, names)}
        }
        unrecorded = [
            n for n in names if not any(_under(t, [n]) for t in recorded)
        ]
        if unrecorded:
            raise SystemExit(
                "%s records no test of %s: run the stock scheduler too "
                "(--both)" % (args.record, ", ".join(unrecorded))
            )
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
        outcomes = {t: o for t, o in recorded.items() if not _under(t, names)}
        outcomes.update(results["stock"]["outcomes"])
        with open(args.record, "w") as f:
            json.dump(
                {
                    "release": release,
                    "scheduler": "stock",
                    "outcomes": outcomes,
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
    worse = shared.compare(
        results["stock"]["outcomes"],
        results["grant_scheduler"]["outcomes"],
        shared.allowed(args.allowed),
    )
    worse = shared.recheck(
        __spec__.name,
        worse,
        directory,
        results["grant_scheduler"]["details"],
    )
    if not registered:
        print("FAILED: grant_scheduler registered no compute node")
        return 1
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
