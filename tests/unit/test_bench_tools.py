"""tools/bench-ratios.py: grants' rate over each other strategy's."""

import os
import runpy

from grant_scheduler.bench import metrics
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
                row("grants", 200.0, conflicts_per_placement=0.04),
                row("placement", 160.0),
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
        self.assertIn("0.9", one)
        # No placement-api row at one scheduler: no ratio, no rate.
        self.assertEqual("-", one[-1])

    def test_no_file_is_a_usage_error(self):
        self.assertEqual(2, self.tool["main"]([]))
