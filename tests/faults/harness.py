"""A fill workload under faults, and the invariant checks around it.

``FillRun`` starts scheduler and compute processes (``workers``), checks I1
at every checkpoint while they run, restarts a compute that died with its
unfinished builds redelivered, and at the end waits one TTL, reaps once and
checks I4 (no grant rows left, usage equal to the claimed instances).
Every run appends a line to ``RECORDS``; ``conftest.py`` prints them.
"""

import multiprocessing
import signal
import time

from grant_scheduler import api
from grant_scheduler import exception
from tests import workers

RECORDS = []

HOSTS = 12
# Every host offers a custom class beside the standard ones, and one
# flavour asks for it: its last units are raced for like the last vCPUs.
FPGA = "CUSTOM_FPGA_XILINX"
CAPACITY = api.Capacity.of(
    {
        "VCPU": api.Inventory(16),
        "MEMORY_MB": api.Inventory(32768),
        "DISK_GB": api.Inventory(500),
        FPGA: api.Inventory(2),
    }
)
FLAVOURS = [
    (1, 2048, 20),
    (2, 4096, 40),
    (4, 8192, 80),
    (1, 2048, 20, ((FPGA, 1),)),
]
TIMEOUT = 600


class FillRun:
    def __init__(
        self,
        testcase,
        schedulers=6,
        computes=2,
        scheduler_kills=None,
        compute_kills=None,
        urls=None,
        checker=None,
    ):
        """
        :param scheduler_kills: ``{index: (injection point, request n)}``.
        :param compute_kills: ``{index: claim n}`` (killed inside it).
        :param urls: where process N connects: ``urls[N % len(urls)]``, a
            URL or ``(URL, engine options)``; the test database by default.
        :param checker: the ``Database`` the checker reads.
        """
        self.test = testcase
        self.urls = urls or [testcase.db_fixture.url]
        self.checker_db = checker or testcase.db
        self.gs = api.GrantScheduler(self.checker_db)
        self.scheduler_count = schedulers
        self.compute_count = computes
        self.scheduler_kills = scheduler_kills or {}
        self.compute_kills = compute_kills or {}
        self.ctx = multiprocessing.get_context("spawn")
        # NOTE: SimpleQueue writes synchronously, so what a process put is
        # in the pipe even when it is SIGKILLed right after.
        self.events = self.ctx.SimpleQueue()
        self.queues = [self.ctx.SimpleQueue() for _ in range(computes)]
        self.faults = {}
        self.checkpoints = 0
        self.unchecked = 0
        self.violations = []
        self.results = {}
        self.answered = set()
        self.outcomes = {}
        self.in_flight = {}
        self.started_at = None

    def count_fault(self, kind, n=1):
        self.faults[kind] = self.faults.get(kind, 0) + n

    # -- processes ---------------------------------------------------------

    def _compute(self, index, name, kill_on_claim=None, backlog=()):
        process = self.ctx.Process(
            target=workers.compute_process,
            args=(
                name,
                self.urls[index % len(self.urls)],
                self.queues[index],
                self.events,
                kill_on_claim,
                list(backlog),
            ),
        )
        process.start()
        self.in_flight[name] = {}
        return process

    def start(self):
        names = ["fault%02d" % n for n in range(HOSTS)]
        for name in names:
            self.gs.report_host(name, name, CAPACITY)
        owner = {name: n % self.compute_count for n, name in enumerate(names)}
        self.computes = {
            "compute%d" % n: (
                n,
                self._compute(n, "compute%d" % n, self.compute_kills.get(n)),
            )
            for n in range(self.compute_count)
        }
        self.schedulers = {}
        for n in range(self.scheduler_count):
            point, on_request = self.scheduler_kills.get(n, (None, None))
            name = "scheduler%d" % n
            process = self.ctx.Process(
                target=workers.scheduler_process,
                args=(
                    name,
                    self.urls[n % len(self.urls)],
                    FLAVOURS,
                    n,
                    400,
                    self.queues,
                    owner,
                    self.events,
                    point,
                    on_request,
                ),
            )
            process.start()
            self.schedulers[name] = process
        self.test.addCleanup(self._kill_all)
        self.started_at = time.monotonic()

    def _kill_all(self):
        processes = list(self.schedulers.values())
        processes += [p for _, p in self.computes.values()]
        for process in processes:
            if process.is_alive():
                process.kill()
            process.join(10)

    # -- the run -----------------------------------------------------------

    def checkpoint(self):
        try:
            self.violations.extend(self.gs.check())
            self.checkpoints += 1
        except exception.DatabaseUnavailable:
            self.unchecked += 1

    def _drain(self):
        while not self.events.empty():
            kind, name, payload = self.events.get()
            if kind == "result":
                self.results[name] = payload
            elif kind == "answered":
                self.answered.add(payload)
            elif kind == "started":
                self.in_flight[name][payload[0]] = payload
            else:
                self.in_flight[name].pop(payload, None)
                self.outcomes[payload] = kind

    def _restart_dead_computes(self):
        for name, (index, process) in list(self.computes.items()):
            if process.exitcode != -signal.SIGKILL:
                continue
            self._drain()
            self.count_fault("compute killed mid-claim")
            redelivered = list(self.in_flight.pop(name).values())
            new_name = name + "+"
            self.computes.pop(name)
            self.computes[new_name] = (
                index,
                self._compute(index, new_name, backlog=redelivered),
            )
            self.count_fault("builds redelivered", len(redelivered))

    def _schedulers_running(self):
        return [
            name
            for name, process in self.schedulers.items()
            if name not in self.results and process.exitcode is None
        ]

    def run(self, during=None):
        """Run to the end of the fill; ``during(run)`` is called each loop."""
        self.start()
        deadline = time.monotonic() + TIMEOUT
        while self._schedulers_running():
            self.test.assertLess(time.monotonic(), deadline, "hung")
            self.checkpoint()
            self._drain()
            self._restart_dead_computes()
            if during is not None:
                during(self)
            time.sleep(0.02)
        for process in self.schedulers.values():
            process.join(30)
            if process.exitcode == -signal.SIGKILL:
                self.count_fault("scheduler killed")
        self._drain()
        for build_queue in self.queues:
            build_queue.put(workers.STOP)
        while any(p.exitcode is None for _, p in self.computes.values()):
            self.test.assertLess(time.monotonic(), deadline, "hung")
            self._drain()
            self._restart_dead_computes()
            time.sleep(0.02)
        self._drain()
        self.checkpoint()

    # -- the verdict -------------------------------------------------------

    def verify(self, scenario):
        test = self.test
        for result in self.results.values():
            test.assertEqual([], result["errors"], result["name"])
        killed = {
            name
            for name, process in self.schedulers.items()
            if process.exitcode == -signal.SIGKILL
        }
        test.assertEqual(
            set(self.schedulers) - killed,
            set(self.results) & set(self.schedulers),
        )
        test.assertLessEqual(set(self.computes), set(self.results))
        test.assertGreater(self.checkpoints, 1)
        test.assertEqual([], self.violations, "I1 violated at a checkpoint")
        # Nothing lost: every answered build was claimed or, after its
        # grant expired with no room left, rejected for rescheduling.
        test.assertEqual(self.answered, set(self.outcomes))
        # I4 after one TTL (on the database's clock) and one reap.
        self.checker_db.clock_offset = api.Settings().grant_ttl + 1
        reaped = self.gs.reap()
        final = self.gs.check(quiescent=True)
        test.assertEqual([], final, "I4 (leak) after TTL and reap")
        claimed = [u for u, kind in self.outcomes.items() if kind == "claimed"]
        test.assertTrue(claimed, "nothing was placed")
        RECORDS.append(
            {
                "scenario": scenario,
                "faults": dict(self.faults),
                "checkpoints": self.checkpoints,
                "unchecked": self.unchecked,
                "placed": len(claimed),
                "rejected": len(self.outcomes) - len(claimed),
                "db_errors": sum(
                    r["db_errors"] for r in self.results.values()
                ),
                "reaped": sum(reaped.values()),
                "seconds": round(time.monotonic() - self.started_at, 1),
            }
        )
        return RECORDS[-1]
