"""The runners of Nova's own tests: a test grant_scheduler failed in the
main run is run again alone, and counts only if it fails again while the
stock scheduler passes it beside (``tests.nova18_22.own_tests.recheck``).
"""

import contextlib
import io

from tests import base
from tests.nova18_22 import own_tests


class Recheck(base.TestCase):
    def recheck(self, worse, outcomes, details=None):
        """``recheck`` with each run's outcome taken from ``outcomes``
        (``{(scheduler, test id): outcome}``) and the main run's failures
        ``details``; the regressions, the runs made, and what it
        printed."""
        runs = []

        def run(module, scheduler, test_id, part):
            runs.append((module, scheduler, test_id))
            return outcomes[scheduler, test_id], "trace of " + scheduler

        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            regressions = own_tests.recheck(
                "tests.module", worse, "/nowhere", details or {}, run=run
            )
        return regressions, runs, printed.getvalue()

    def test_a_pass_alone_clears_it_without_running_stock(self):
        regressions, runs, printed = self.recheck(
            ["t.one"], {("grant_scheduler", "t.one"): "passed"}
        )
        self.assertEqual([], regressions)
        self.assertEqual([("tests.module", "grant_scheduler", "t.one")], runs)
        self.assertIn("t.one: failed in the main run, passed alone", printed)

    def test_a_second_failure_beside_a_stock_pass_is_a_regression(self):
        regressions, runs, printed = self.recheck(
            ["t.one"],
            {
                ("grant_scheduler", "t.one"): "failed",
                ("stock", "t.one"): "passed",
            },
        )
        self.assertEqual(["t.one"], regressions)
        self.assertEqual(
            ["grant_scheduler", "stock"], [run[1] for run in runs]
        )
        self.assertIn("a regression", printed)
        self.assertIn("trace of grant_scheduler", printed)

    def test_both_failing_now_is_not_counted_and_says_why(self):
        regressions, _, printed = self.recheck(
            ["t.one"],
            {
                ("grant_scheduler", "t.one"): "error",
                ("stock", "t.one"): "failed",
            },
        )
        self.assertEqual([], regressions)
        self.assertIn("error again alone", printed)
        self.assertIn("failed with stock", printed)
        self.assertIn("trace of stock", printed)

    def test_each_test_is_judged_on_its_own(self):
        regressions, _, _ = self.recheck(
            ["t.one", "t.two", "t.three"],
            {
                ("grant_scheduler", "t.one"): "failed",
                ("stock", "t.one"): "passed",
                ("grant_scheduler", "t.two"): "passed",
                ("grant_scheduler", "t.three"): "worker failed",
                ("stock", "t.three"): "passed",
            },
        )
        self.assertEqual(["t.one", "t.three"], regressions)

    def test_the_main_runs_failure_is_printed_before_the_verdict(self):
        _, _, printed = self.recheck(
            ["t.one", "t.two"],
            {
                ("grant_scheduler", "t.one"): "passed",
                ("grant_scheduler", "t.two"): "passed",
            },
            details={"t.one": "main trace"},
        )
        self.assertIn("--- t.one\nmain trace\n", printed)
        self.assertLess(
            printed.index("main trace"), printed.index("t.one: failed in")
        )
        self.assertNotIn("--- t.two", printed)

    def test_nothing_worse_runs_nothing(self):
        self.assertEqual(([], [], ""), self.recheck([], {}))
