"""The benchmark runner's watch over its processes
(``grant_scheduler_bench.runner``): a process that dies ends the run at
once with an error instead of leaving it waiting for a result."""

import multiprocessing
import sys
import time

from grant_scheduler_bench import runner
from tests import base

# NOTE: fork, for speed: the watch reads only exit codes and the queue.
CTX = multiprocessing.get_context("fork")


def _put_and_exit(results):
    results.put(("compute", {"claimed": 1}))


def _wait(event):
    event.wait(60)


class TestWatch(base.TestCase):
    def process(self, target, *args):
        process = CTX.Process(target=target, args=args)
        process.start()
        self.addCleanup(process.join, 10)
        return process

    def test_a_dead_process_without_a_result_is_an_error_at_once(self):
        results = CTX.Queue()
        dead = self.process(sys.exit, 1)
        dead.join(30)
        started = time.monotonic()
        with self.assertRaisesRegex(RuntimeError, r"exit codes \[1\]"):
            runner._next_result(results, [dead], timeout=20)
        self.assertLess(time.monotonic() - started, 30)

    def test_a_result_put_before_the_exit_is_read(self):
        results = CTX.Queue()
        done = self.process(_put_and_exit, results)
        done.join(30)
        self.assertEqual(0, done.exitcode)
        self.assertEqual(
            ("compute", {"claimed": 1}), runner._next_result(results, [done])
        )

    def test_a_compute_that_died_stops_the_run(self):
        release = CTX.Event()
        scheduler = self.process(_wait, release)
        self.addCleanup(release.set)
        compute = self.process(sys.exit, 3)
        compute.join(30)
        with self.assertRaisesRegex(RuntimeError, r"exit code 3"):
            runner._check_alive([scheduler], [compute])

    def test_no_scheduler_left_stops_the_run(self):
        scheduler = self.process(sys.exit, 0)
        scheduler.join(30)
        with self.assertRaisesRegex(RuntimeError, "scheduler process died"):
            runner._check_alive([scheduler], [])

    def test_live_processes_let_the_run_go_on(self):
        release = CTX.Event()
        scheduler = self.process(_wait, release)
        compute = self.process(_wait, release)
        self.addCleanup(release.set)
        runner._check_alive([scheduler], [compute])
