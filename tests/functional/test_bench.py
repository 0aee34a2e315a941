"""A tiny benchmark run: the JSON keys and zero overcommit, no timings."""

import json
import os

from grant_scheduler.bench import metrics
from grant_scheduler.cmd import bench
from tests import base


@base.with_scenarios(base.ALL_BACKENDS)
class BenchSmoke(base.DatabaseTestCase):
    def test_tiny_run_reports_every_key_and_no_overcommit(self):
        scratch = self.useFixture(base.fixtures.TempDir()).path
        path = os.path.join(scratch, "b.json")
        picture = os.path.join(scratch, "b.png")
        status = bench.main(
            [
                "--db",
                self.db_fixture.url,
                "--schedulers",
                "2",
                "--hosts",
                "3",
                "--workloads",
                "ironic",
                "--json",
                path,
                "--plot",
                picture,
            ]
        )
        self.assertEqual(0, status)
        with open(picture, "rb") as f:
            self.assertEqual(b"\x89PNG\r\n\x1a\n", f.read(8))
        with open(path) as f:
            rows = json.load(f)
        self.assertEqual(4, len(rows))
        for row in rows:
            self.assertEqual(set(metrics.KEYS), set(row))
        by_strategy = {row["strategy"]: row for row in rows}
        for name in ("grants", "placement", "legacy"):
            self.assertEqual(0, by_strategy[name]["overcommitted_hosts"])
        # Every one of the three capacity-one hosts ends up used.
        self.assertEqual(3, by_strategy["grants"]["placed"])
        self.assertEqual(3, by_strategy["placement"]["placed"])
        self.assertEqual(0, by_strategy["grants"]["spurious_no_valid_host"])
