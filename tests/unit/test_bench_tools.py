"""tools/bench-ratios.py: grants' rate over each other strategy's."""

import os
import runpy

from grant_scheduler_bench import metrics
from tests import base

TOOL = os.path.join(
    os.path.dirname(__file__), "..", "..", "tools", "bench-ratios.py"
)


def row(strategy, rate, schedulers=8, **values):
    figures = dict.fromkeys(metrics.KEYS, 0)
    figures.update(
        strategy=strategy,
        workload="fill",
        hosts=20,
        seed=1,
        schedulers=schedulers,
        placements_per_s=rate,
        placed=160,
    )
    figures.update(values)
    return figures


class Ratios(base.TestCase):
    def setUp(self):
        super().setUp()
        self.tool = runpy.run_path(TOOL)

    def lines(self, rows):
        return self.tool["ratios"](rows).splitlines()

    def test_grants_over_each_other_strategy_per_run(self):
        lines = self.lines(
            [
                row(
                    "grants",
                    200.0,
                    conflicts_per_placement=0.04,
                    cpu_busy_pct=97,
                ),
                row("placement", 160.0, cpu_busy_pct=95),
                row("placement-api", 20.0, overcommitted_hosts=2),
                row("grants", 90.0, schedulers=1),
                row("placement", 100.0, schedulers=1),
            ]
        )
        self.assertIn("x model", lines[0])
        self.assertIn("x api", lines[0])
        eight, one = lines[2].split(), lines[3].split()
        self.assertEqual(["fill", "20", "1", "8"], eight[:4])
        # 200 / 160 and 200 / 20; the api's overcommit is named.
        self.assertIn("1.25", eight)
        self.assertIn("10.0", eight)
        self.assertIn("api:2", eight)
        self.assertIn("grants:97", eight)
        self.assertIn("model:95", eight)
        self.assertIn("0.9", one)
        # No placement-api row at one scheduler: no ratio, no rate.
        self.assertEqual("-", one[-1])

    def test_no_file_is_a_usage_error(self):
        self.assertEqual(2, self.tool["main"]([]))


PROC_STAT = """cpu  100 5 50 800 40 3 2 0 0 0
cpu0 50 2 25 400 20 1 1 0 0 0
"""


class MachineCpu(base.TestCase):
    def test_busy_is_everything_but_idle_and_iowait(self):
        self.assertEqual((160, 1000), metrics.cpu_ticks(PROC_STAT))

    def test_share_between_two_reads(self):
        path = self.useFixture(base.fixtures.TempDir()).join("stat")
        with open(path, "w") as f:
            f.write(PROC_STAT)
        cpu = metrics.MachineCpu(path)
        cpu.start()
        with open(path, "w") as f:
            # 300 more ticks, 240 of them busy.
            f.write("cpu  300 5 90 850 50 3 2 0 0 0\n")
        self.assertEqual(0.8, cpu.share())

    def test_no_proc_is_no_figure(self):
        cpu = metrics.MachineCpu("/nonexistent/stat")
        cpu.start()
        self.assertIsNone(cpu.share())
