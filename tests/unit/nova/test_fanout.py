"""Work on many items a few at a time (``grant_scheduler.nova.fanout``);
no Nova needed."""

import threading
import time
import unittest

from grant_scheduler.nova import fanout


class _Gauge:
    """Counts the calls in flight; each call waits at ``barrier``."""

    def __init__(self, barrier=None):
        self.barrier = barrier
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.done = []
        self.threads = set()

    def __call__(self, item):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.threads.add(threading.get_ident())
        try:
            if self.barrier is not None:
                self.barrier.wait()
            with self.lock:
                self.done.append(item)
        finally:
            with self.lock:
                self.now -= 1


class TestEach(unittest.TestCase):
    def test_one_at_a_time_runs_in_the_callers_thread_in_order(self):
        gauge = _Gauge()
        fanout.each(range(5), gauge, 1)
        self.assertEqual([0, 1, 2, 3, 4], gauge.done)
        self.assertEqual({threading.get_ident()}, gauge.threads)

    def test_that_many_at_a_time_and_never_more(self):
        # A call returns only once three are waiting together: one after
        # the other, the barrier would break instead.
        gauge = _Gauge(threading.Barrier(3, timeout=10))
        fanout.each(range(9), gauge, 3)
        self.assertEqual(list(range(9)), sorted(gauge.done))
        self.assertEqual(3, gauge.most)

    def test_no_more_threads_than_items(self):
        gauge = _Gauge(threading.Barrier(2, timeout=10))
        fanout.each(["a", "b"], gauge, 8)
        self.assertEqual(["a", "b"], sorted(gauge.done))
        self.assertEqual(2, len(gauge.threads))

    def test_nothing_to_do(self):
        gauge = _Gauge()
        fanout.each([], gauge, 4)
        self.assertEqual([], gauge.done)

    def test_a_failure_is_raised_and_the_rest_left(self):
        started = []
        lock = threading.Lock()

        def work(item):
            with lock:
                started.append(item)
            if item == 0:
                raise ValueError("no room")
            time.sleep(0.01)

        with self.assertRaisesRegex(ValueError, "no room"):
            fanout.each(range(100), work, 2)
        # The other worker takes no item once the failure is in: a few
        # hundredths of a second's worth at most, not the hundred.
        self.assertIn(0, started)
        self.assertLess(len(started), 20)
