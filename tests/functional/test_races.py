"""Every public method raises only ``GrantSchedulerError``, under races.

Real OS processes against MariaDB and PostgreSQL, each with its own
engine, started together at a barrier so that their first statements
meet: first reports of one new node, reports racing a ``delete_host``,
and repeated claims racing the deletion of their node.  Whatever the
interleaving, every call returns or raises one of the project's
exceptions, and a node has one row.
"""

import random
import uuid

from grant_scheduler import api
from tests import base
from tests import workers

PROCESSES = 6
ROUNDS = 20
CAPACITY = api.Capacity(api.Resources(4, 8192, 100))
ONE = api.Resources(1, 1024, 10)
WAIT = 300


def _gs(url):
    import logging

    logging.disable(logging.CRITICAL)
    return api.GrantScheduler.from_url(url)


def _outcome(call):
    """``("ok", result)``, ``("error", class name)`` for the project's
    exceptions, ``("raw", class and message)`` for anything else."""
    try:
        return ("ok", call())
    except api.GrantSchedulerError as exc:
        return ("error", type(exc).__name__)
    except Exception as exc:
        return (
            "raw",
            "%s.%s: %s"
            % (
                type(exc).__module__,
                type(exc).__name__,
                (str(exc).splitlines() or [""])[0][:120],
            ),
        )


def first_reports(url, barrier, rounds, results):
    gs = _gs(url)
    outcomes = []
    for number in range(rounds):
        barrier.wait(WAIT)
        name = "new%d" % number
        outcomes.append(
            (name, _outcome(lambda n=name: gs.report_host(n, n, CAPACITY)))
        )
    results.put(outcomes)


def churn(url, barrier, seed, steps, results):
    """Report, register, delete, schedule, claim, claim again, release,
    withdraw, reap and check one node, at random, while the other
    processes do the same."""
    gs = _gs(url)
    rng = random.Random(seed)
    claimed = []
    outcomes = []
    barrier.wait(WAIT)
    for _ in range(steps):
        action = rng.choice(
            ["report", "report", "register", "delete", "claim", "reclaim"]
            + ["reclaim", "release", "withdraw", "reap", "check"]
        )
        if action == "report":
            call = lambda: gs.report_host("h", "n", CAPACITY)  # noqa: E731
        elif action == "register":
            call = lambda: gs.register_host("h", "n", CAPACITY)  # noqa: E731
        elif action == "reap":
            call = gs.reap
        elif action == "check":
            call = gs.check
        elif action in ("release", "withdraw") and claimed:
            instance = rng.choice(claimed)
            if action == "release":
                call = lambda i=instance: gs.release(i, "h", "n")  # noqa: E731
            else:
                call = lambda i=instance: gs.withdraw_instance(i)  # noqa: E731
        elif action == "delete":
            call = lambda: gs.delete_host("h", "n")  # noqa: E731
        elif action == "claim":
            instance = str(uuid.uuid4())
            claimed.append(instance)

            def call(instance=instance):
                gs.schedule(1, 1024, 10, instance_uuids=[instance])
                return gs.claim(instance, "h", "n", ONE)

        elif action == "reclaim" and claimed:
            instance = rng.choice(claimed)
            call = lambda i=instance: gs.claim(i, "h", "n", ONE)  # noqa: E731
        else:
            continue
        outcomes.append((action, _outcome(call)))
    results.put(outcomes)


@base.with_scenarios(base.SERVERS)
class Races(base.DatabaseTestCase):
    def run_processes(self, target, args_for):
        outcomes = workers.run_together(
            self,
            target,
            self.db_fixture.url,
            [args_for(n) for n in range(PROCESSES)],
            WAIT,
        )
        return [item for outcome in outcomes for item in outcome]

    def assertNoRawErrors(self, outcomes):
        raw = [result for _, (kind, result) in outcomes if kind == "raw"]
        self.assertEqual([], sorted(set(raw)), "%d raw errors" % len(raw))

    def test_first_reports_of_a_node_all_return_one_row(self):
        outcomes = self.run_processes(first_reports, lambda n: (ROUNDS,))
        self.assertNoRawErrors(outcomes)
        self.assertEqual(
            [], [o for o in outcomes if o[1][0] != "ok"], "a report failed"
        )
        ids = {}
        for name, (_, node_id) in outcomes:
            ids.setdefault(name, set()).add(node_id)
        self.assertEqual({1}, {len(found) for found in ids.values()})
        reports = api.GrantScheduler(self.db).hosts()
        self.assertEqual(sorted(ids), sorted(r.state.host for r in reports))
        self.assertEqual(
            {(name, node_id) for name, (node_id,) in ids.items()},
            {(r.state.host, r.state.host_id) for r in reports},
        )

    def test_reports_claims_and_deletes_raise_only_our_errors(self):
        outcomes = self.run_processes(churn, lambda n: (n, 60))
        self.assertNoRawErrors(outcomes)
        gs = api.GrantScheduler(self.db)
        self.assertEqual([], gs.check())
        self.assertLessEqual(len(gs.hosts()), 1)
