"""Benchmark options are validated before anything runs: one line, exit 2.

Each bad value used to give a traceback (``--json`` into a missing
directory only after the whole run).  Here the runner is replaced by one
that fails the test, so an option that slips through shows up at once.
"""

import contextlib
import io
import os

import fixtures

from grant_scheduler_bench import cli as bench
from grant_scheduler_bench import placement_api
from grant_scheduler_bench import runner
from tests import base


class BenchOptions(base.TestCase):
    def setUp(self):
        super().setUp()
        self.scratch = self.useFixture(fixtures.TempDir()).path

        def must_not_run(*args, **kwargs):
            raise AssertionError("the benchmark started a run")

        self.useFixture(fixtures.MockPatchObject(runner, "run", must_not_run))
        self.useFixture(
            fixtures.MockPatchObject(runner, "commit_ceiling", must_not_run)
        )

    def rejected(self, *argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            with self.assertRaises(SystemExit) as caught:
                bench.main(list(argv))
        self.assertEqual(2, caught.exception.code)
        lines = err.getvalue().splitlines()
        self.assertEqual(1, len(lines), err.getvalue())
        self.assertNotIn("Traceback", lines[0])
        self.assertTrue(lines[0].startswith("grant-scheduler-bench: error:"))
        return lines[0]

    def test_the_reported_three(self):
        self.assertIn("--latency-ms", self.rejected("--latency-ms", "-5"))
        self.assertIn(
            "--host-subset-size", self.rejected("--host-subset-size", "0")
        )
        self.assertIn(
            "does not exist",
            self.rejected("--json", os.path.join(self.scratch, "no", "x")),
        )

    def test_negative_and_non_finite_delays(self):
        for option in (
            "--latency-ms",
            "--commit-delay-ms",
            "--build-delay-ms",
        ):
            for value in ("-5", "nan", "inf", "ten", "1e9"):
                line = self.rejected(option + "=" + value)
                self.assertIn(option, line)

    def test_counts_below_their_minimum(self):
        for argv in (
            ("--host-subset-size", "0"),
            ("--host-subset-size", "-1"),
            ("--max-fallovers", "-1"),
            ("--requests", "0"),
            ("--repeat", "0"),
            ("--schedulers", "0"),
            ("--schedulers", "1,x"),
            ("--schedulers", "1000"),
            ("--hosts", "0"),
            ("--hosts", ""),
            ("--placement-workers", "0"),
            ("--placement-conflict-retries", "0"),
        ):
            line = self.rejected(*argv)
            self.assertIn(argv[0], line)

    def test_unknown_names(self):
        self.assertIn("nosuch", self.rejected("--strategies", "grants,nosuch"))
        self.assertIn("nosuch", self.rejected("--workloads", "nosuch"))

    def test_outputs_into_a_missing_directory_fail_before_the_run(self):
        missing = os.path.join(self.scratch, "no", "such", "dir", "out.json")
        line = self.rejected("--json", missing)
        self.assertIn("does not exist", line)
        self.assertIn("does not exist", self.rejected("--plot", missing))
        self.assertIn("is a directory", self.rejected("--json", self.scratch))
        line = self.rejected("--profile", os.path.dirname(missing))
        self.assertIn("does not exist", line)

    def test_database_urls(self):
        self.assertIn("--db", self.rejected("--db", "not a url"))
        self.assertIn("--db", self.rejected("--db", "nosuchdialect://x/y"))
        self.assertIn("SQLite file", self.rejected("--db", "sqlite://"))

    def test_placement_api_without_placement_says_how_to_install(self):
        self.useFixture(
            fixtures.MockPatchObject(
                placement_api, "missing", lambda: placement_api.INSTALL_HINT
            )
        )
        line = self.rejected("--strategies", "grants,placement-api")
        self.assertIn("pip install '.[placement]'", line)
        # ...and the default run leaves it out, and says so.
        self.assertNotIn("placement-api", bench.default_strategies())
        err = io.StringIO()
        self.useFixture(
            fixtures.MockPatchObject(bench, "_run_all", lambda *a: ([], {}))
        )
        with (
            contextlib.redirect_stderr(err),
            contextlib.redirect_stdout(io.StringIO()),
        ):
            bench.main([])
        self.assertIn(
            "placement-api is left out: %s" % placement_api.INSTALL_HINT,
            err.getvalue(),
        )

    def test_default_run_includes_placement_api_when_installed(self):
        self.useFixture(
            fixtures.MockPatchObject(placement_api, "missing", lambda: None)
        )
        self.assertIn("placement-api", bench.default_strategies())
        self.assertNotIn("grants-naive", bench.default_strategies())

    def test_defaults_are_valid_and_show_the_race(self):
        args = bench.parser().parse_args([])
        # A build reaches the compute host's claim some time after the
        # answer; at zero legacy's race window hardly exists.
        self.assertGreater(args.build_delay_ms, 0)
        self.assertGreater(max(args.schedulers), 1)
