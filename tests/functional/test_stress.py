"""Eight scheduler processes and two compute processes fill the hosts.

Real OS processes against MySQL and PostgreSQL, each with its own engine.
Checked: I1 at every checkpoint while they run (the checker reads usage,
won grants and claims in one statement), I3 (every request ended), I2
(a NoValidHost only for a flavour that no host can take once the fill is
over: free capacity never grows during a fill) and I4 (after release and
one reap, no grant rows and usage equal to claims, i.e. zero).
"""

import multiprocessing
import time

from grant_scheduler import api
from tests import base
from tests import workers

SCHEDULERS = 8
COMPUTES = 2
RESULT_TIMEOUT = 600

SHAPES = [
    (
        "ironic",
        {
            # Every host fits exactly one instance.
            "hosts": 24,
            "capacity": (32, 131072, 1000),
            "flavours": [(32, 131072, 1000)],
            "max_requests": 12,
        },
    ),
    (
        "mixed",
        {
            "hosts": 10,
            "capacity": (16, 32768, 500),
            "flavours": [
                (1, 2048, 20),
                (2, 4096, 40),
                (4, 8192, 80),
                (8, 16384, 160),
            ],
            "max_requests": 200,
        },
    ),
]


@base.with_scenarios(base.multiply_scenarios(base.SERVERS, SHAPES))
class FillToExhaustion(base.DatabaseTestCase):
    def test_fill(self):
        gs = api.GrantScheduler(self.db)
        names = ["stress%02d" % n for n in range(self.hosts)]
        for name in names:
            gs.report_host(
                name, name, api.Capacity(api.Resources(*self.capacity))
            )
        host_owner = {name: n % COMPUTES for n, name in enumerate(names)}

        ctx = multiprocessing.get_context("spawn")
        compute_queues = [ctx.SimpleQueue() for _ in range(COMPUTES)]
        events = ctx.SimpleQueue()
        computes = [
            ctx.Process(
                target=workers.compute_process,
                args=(
                    "compute%d" % n,
                    self.db_fixture.url,
                    compute_queues[n],
                    events,
                ),
                kwargs={"build_delay": 0.005, "tolerate_db_errors": False},
            )
            for n in range(COMPUTES)
        ]
        schedulers = [
            ctx.Process(
                target=workers.scheduler_process,
                args=(
                    "scheduler%d" % n,
                    self.db_fixture.url,
                    self.flavours,
                    n,
                    self.max_requests,
                    compute_queues,
                    host_owner,
                    events,
                ),
                kwargs={"tolerate_db_errors": False},
            )
            for n in range(SCHEDULERS)
        ]
        for process in computes + schedulers:
            process.start()
        self.addCleanup(workers.kill, computes + schedulers)

        checkpoints = 0
        violations = []
        results = {}
        deadline = time.monotonic() + RESULT_TIMEOUT

        def drain():
            while not events.empty():
                kind, name, payload = events.get()
                if kind == "result":
                    results[name] = payload

        while (
            len([n for n in results if n.startswith("scheduler")]) < SCHEDULERS
        ):
            self.assertLess(time.monotonic(), deadline, "schedulers hung")
            violations.extend(gs.check())
            checkpoints += 1
            drain()
            time.sleep(0.02)
        for compute_queue in compute_queues:
            compute_queue.put(workers.STOP)
        while len(results) < SCHEDULERS + COMPUTES:
            self.assertLess(time.monotonic(), deadline, "computes hung")
            drain()
            time.sleep(0.02)
        for process in computes + schedulers:
            process.join(60)
        violations.extend(gs.check())
        scheduler_results = [
            r for n, r in results.items() if n.startswith("scheduler")
        ]
        compute_results = [
            r for n, r in results.items() if n.startswith("compute")
        ]

        self.assertGreater(checkpoints, 1)
        self.assertEqual([], violations, "I1/I4 violated at a checkpoint")
        for result in results.values():
            self.assertEqual([], result["errors"], result["name"])

        # I3: every request ended, placed or NoValidHost.
        placed = sum(r["placed"] for r in scheduler_results)
        for result in scheduler_results:
            self.assertEqual(
                result["requests"],
                result["placed"] + len(result["no_valid_host"]),
            )
        claimed = [c for r in compute_results for c in r["claimed"]]
        rejected = [c for r in compute_results for c in r["rejected"]]
        self.assertEqual([], rejected, "a won grant was not claimable")
        self.assertEqual(placed, len(claimed))

        # I2: nothing that got NoValidHost fits anywhere after the fill.
        reports = gs.hosts()
        failed = {f for r in scheduler_results for f in r["no_valid_host"]}
        # Under the defaults, with no override (a request that keeps losing
        # reads again instead of giving up).
        self.assertTrue(failed, "the fill never reached exhaustion")
        for flavour in failed:
            room = [
                r.state.host
                for r in reports
                if r.state.fits(api.Resources(*flavour))
            ]
            self.assertEqual(
                [], room, "spurious NoValidHost for %s" % (flavour,)
            )
        if len(self.flavours) == 1:
            self.assertEqual(self.hosts, placed)

        # I4: release everything, reap once: no grants, no usage.
        for instance_uuid, host, node in claimed:
            self.assertTrue(gs.release(instance_uuid, host, node))
        gs.reap()
        self.assertEqual([], gs.check(quiescent=True))
        self.assertEqual({api.Resources()}, {r.state.used for r in gs.hosts()})
