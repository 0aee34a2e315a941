"""What the benchmark prints: the table, the summary and the progress."""

import io

from grant_scheduler_bench import cli as bench
from grant_scheduler_bench import metrics
from tests import base


def row(strategy, schedulers=8, unsafe=False, **values):
    figures = dict.fromkeys(metrics.KEYS, 0)
    figures.update(
        strategy=strategy,
        unsafe=unsafe,
        workload="ironic",
        hosts=20,
        seed=1,
        schedulers=schedulers,
        placed=20,
        no_valid_host=6,
        spurious_no_valid_host=0,
        placements_per_s=50.0,
    )
    figures.update(values)
    return figures


class Table(base.TestCase):
    def test_key_columns_fit_120_columns_with_wide_figures(self):
        rows = [
            row(
                "grants-naive",
                unsafe=True,
                schedulers=64,
                placed=123456,
                no_valid_host=12345,
                nvh_with_room=1234,
                failed_builds=123456,
                overcommitted_hosts=12345,
                placements_per_s=12345.6,
                p50_ms=12345.67,
                p99_ms=123456.78,
                conflicts_per_placement=123.45,
                db_statements_per_placement=1234.5,
            ),
            row("placement-api"),
        ]
        text = bench.render(rows)
        self.assertLessEqual(max(len(line) for line in text.splitlines()), 120)
        self.assertIn("grants-naive (UNSAFE)", text)
        # Figures as measured, not rounded to six significant digits.
        self.assertIn("123456.78", text)

    def test_wide_shows_every_key(self):
        text = bench.render(
            [row("grants", placed_by_vcpus={"1": 3, "8": 2})], wide=True
        )
        self.assertIn("1:3 8:2", text)
        for key in metrics.KEYS:
            if key not in ("workload", "hosts", "seed"):
                self.assertIn(key, text)


class Summary(base.TestCase):
    def test_derived_from_the_rows(self):
        racing = [
            row("legacy", schedulers=1, placements_per_s=7.0),
            row(
                "legacy",
                failed_builds=28,
                nvh_with_room=7,
                placed=19,
                placements_per_s=6.2,
                conflicts_per_placement=1.47,
            ),
            row("placement", placements_per_s=44.9, cpu_busy_pct=96),
            row(
                "grants",
                placements_per_s=10.2,
                conflicts_per_placement=4.0,
                cpu_busy_pct=98,
            ),
        ]
        text = " ".join(
            bench.summary(racing, {"serial_placed": 20}, 200).split()
        )
        self.assertIn("With 8 scheduler processes", text)
        self.assertIn("up to 200 ms", text)
        self.assertIn("legacy had 28 failed builds", text)
        self.assertIn("7 NoValidHost answers while a fresh read", text)
        self.assertIn("placement and grants had neither", text)
        self.assertIn("legacy placed 19 of the 20", text)
        self.assertIn("No run overcommitted a host", text)
        self.assertIn("grants 4.00", text)
        self.assertIn("grants at 0.23x the placement model", text)
        self.assertIn(
            "were busy at 8: legacy 0%, placement 96%, grants 98%", text
        )

        quiet = [row("placement"), row("grants")]
        text = " ".join(bench.summary(quiet, {}, 0).split())
        self.assertIn("no strategy had a failed build", text)
        self.assertNotIn("after the answer", text)

        overcommitting = [
            row("placement-api", schedulers=1, placed=160),
            row(
                "placement-api",
                schedulers=2,
                placed=162,
                overcommitted_hosts=2,
            ),
            row("placement-api", placed=164, overcommitted_hosts=4),
            row("grants", placed=160),
        ]
        text = " ".join(
            bench.summary(overcommitting, {"serial_placed": 160}, 0).split()
        )
        self.assertIn(
            "placement-api overcommitted hosts in 2 of 3 runs (2 at 2, "
            "placing 162, 4 at 8, placing 164) where 160 fit",
            text,
        )

    def test_fewer_instances_of_the_same_capacity_are_told_apart(self):
        rows = [
            row("placement", workload="mixed", placed=106, placed_vcpus=320),
            row("grants", workload="mixed", placed=93, placed_vcpus=320),
            row("legacy", workload="mixed", placed=90, placed_vcpus=300),
        ]
        context = {"serial_placed": 103, "serial_placed_vcpus": 320}
        text = " ".join(bench.summary(rows, context, 200).split())
        self.assertIn(
            "grants placed 93 of the 103 instances a serial run placed "
            "(320 vCPUs against its 320: larger flavours)",
            text,
        )
        self.assertIn("legacy placed 90 of the 103 instances", text)
        self.assertIn("(300 vCPUs against its 320).", text)
        self.assertNotIn("placement placed", text)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


class Progress(base.TestCase):
    def test_plain_lines_without_a_terminal(self):
        stream = io.StringIO()
        progress = bench.Progress(2, stream=stream)
        progress.start("fill grants schedulers=1")
        progress.finish()
        progress.message("a problem")
        progress.start("fill grants schedulers=4")
        progress.finish()
        progress.close()
        self.assertEqual(
            "[bench] 1/2 fill grants schedulers=1\n"
            "a problem\n"
            "[bench] 2/2 fill grants schedulers=4\n",
            stream.getvalue(),
        )

    def test_a_bar_on_a_terminal(self):
        stream = _Terminal()
        progress = bench.Progress(2, stream=stream)
        progress.start("fill grants schedulers=1")
        progress.finish()
        progress.close()
        text = stream.getvalue()
        self.assertIn("\r", text)
        self.assertIn("[bench] 0/2 runs done", text)
        self.assertIn("fill grants schedulers=1", text)
        self.assertIn("[bench] 1/2 runs done", text)
