"""A tiny benchmark run: the JSON keys and zero overcommit, no timings."""

import contextlib
import io
import json
import os

from grant_scheduler_bench import cli as bench
from grant_scheduler_bench import metrics
from grant_scheduler_bench import profiles
from tests import base

SAFE_AND_NAIVE = "legacy,placement,grants,grants-naive"


def run_bench(url, strategies, schedulers, *extra):
    """``ironic`` on three hosts, claims at once: ``(status, output)``."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = bench.main(
            [
                "--db",
                url,
                "--strategies",
                strategies,
                "--schedulers",
                schedulers,
                "--hosts",
                "3",
                "--workloads",
                "ironic",
                "--build-delay-ms",
                "0",
                *extra,
            ]
        )
    return status, out.getvalue()


@base.with_scenarios(base.ALL_BACKENDS)
class BenchSmoke(base.DatabaseTestCase):
    def test_tiny_run_reports_every_key_and_no_overcommit(self):
        scratch = self.useFixture(base.fixtures.TempDir()).path
        path = os.path.join(scratch, "b.json")
        picture = os.path.join(scratch, "b.png")
        status, text = run_bench(
            self.db_fixture.url,
            SAFE_AND_NAIVE,
            "2",
            "--json",
            path,
            "--plot",
            picture,
        )
        self.assertEqual(0, status)
        with open(picture, "rb") as f:
            self.assertEqual(b"\x89PNG\r\n\x1a\n", f.read(8))
        with open(path) as f:
            rows = json.load(f)
        self.assertEqual(4, len(rows))
        for row in rows:
            self.assertEqual(set(metrics.KEYS), set(row))
            # JSON ids are plain names; unsafety is a key of its own.
            self.assertNotIn(" ", row["strategy"])
        by_strategy = {row["strategy"]: row for row in rows}
        self.assertEqual(
            {"legacy", "placement", "grants", "grants-naive"},
            set(by_strategy),
        )
        self.assertIs(True, by_strategy["grants-naive"]["unsafe"])
        self.assertIs(False, by_strategy["grants"]["unsafe"])
        for name in ("grants", "placement", "legacy"):
            self.assertEqual(0, by_strategy[name]["overcommitted_hosts"])
        # Every one of the three capacity-one hosts ends up used.
        self.assertEqual(3, by_strategy["grants"]["placed"])
        self.assertEqual(3, by_strategy["placement"]["placed"])
        # ironic's one flavour is a whole 32-vCPU node.
        self.assertEqual(3 * 32, by_strategy["grants"]["placed_vcpus"])
        self.assertEqual({"32": 3}, by_strategy["grants"]["placed_by_vcpus"])
        for row in rows:
            self.assertGreater(row["cpu_busy_pct"], 0)
            self.assertLessEqual(row["cpu_busy_pct"], 100)
        self.assertEqual(0, by_strategy["grants"]["spurious_no_valid_host"])
        self.assertEqual(0, by_strategy["grants"]["nvh_with_room"])
        self.assertEqual(0, by_strategy["placement"]["failed_builds"])
        self.assertIn("grants-naive (UNSAFE)", text)
        self.assertLessEqual(max(len(line) for line in text.splitlines()), 120)


class BenchProfile(base.TestCase):
    def test_profile_keeps_one_file_per_run_and_says_where_time_went(self):
        scratch = self.useFixture(base.fixtures.TempDir()).path
        status, text = run_bench(
            "sqlite:///%s" % os.path.join(scratch, "b.sqlite"),
            "grants,placement",
            "1,2",
            "--latency-ms",
            "5",
            "--profile",
            scratch,
        )
        self.assertEqual(0, status)
        # One per strategy and scheduler count; the serial oracle run
        # keeps none.
        made = sorted(f for f in os.listdir(scratch) if f.endswith(".prof"))
        for name in made:
            wall, cpu = profiles.read_clocks(os.path.join(scratch, name))
            # Mostly asleep (5 ms per statement): less CPU than wall.
            self.assertGreater(wall, 0)
            self.assertLess(cpu, wall)
        self.assertEqual(
            [
                "grants-ironic-3hosts-1sched-seed1.prof",
                "grants-ironic-3hosts-2sched-seed1.prof",
                "placement-ironic-3hosts-1sched-seed1.prof",
                "placement-ironic-3hosts-2sched-seed1.prof",
            ],
            made,
        )
        for name in made:
            self.assertIn(name + ":", text)
        self.assertIn("the process computed", text)
        # 5 ms before every statement: the modelled latency shows as sleep.
        total, areas = profiles.breakdown(os.path.join(scratch, made[0]))
        self.assertGreater(areas["sleep"], 0.2 * total)
        self.assertGreater(areas["sqlalchemy"], 0)
