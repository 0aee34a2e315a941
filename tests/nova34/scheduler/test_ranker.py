"""Nova 13-16's ranking (``grant_scheduler.nova.scheduler.ranker``):
Nova's HostState figures net of live grants, and Nova's filters run once
per instance."""

import uuid
from unittest import mock

from tests import base
from tests.nova34 import base as nova_base
from tests.nova34 import fakes
from tests.nova34 import recorder
from tests.nova34.test_driver import RECORDED
from tests.nova34.test_driver import DriverTestCase


class TestHostStateFigures(DriverTestCase, base.TestCase):
    """What Nova's filters and weighers see is Nova's record less every
    live grant, each counted once."""

    overrides = RECORDED

    def setUp(self):
        super().setUp()
        self.cloud.add("only", 8, 16384, 200)
        self.ram = 16384 - nova_base.CONF.reserved_host_memory_mb
        self.driver.sync_hosts(self.context)

    def filtered(self):
        return [
            (index, f) for kind, index, f in recorder.CALLS if kind == "filter"
        ]

    def test_each_instance_sees_the_ones_before_it_once(self):
        uuids = [str(uuid.uuid4()) for _ in range(3)]
        spec = fakes.request_spec(fakes.flavor(2, 4096, 40), num_instances=3)
        self.select_objects(spec, uuids)
        seen = self.filtered()
        self.assertEqual([0, 1, 2], [index for index, _ in seen])
        self.assertEqual(
            [self.ram, self.ram - 4096, self.ram - 8192],
            [f["free_ram_mb"] for _, f in seen],
        )
        self.assertEqual([0, 2, 4], [f["vcpus_used"] for _, f in seen])
        self.assertEqual(
            [200 * 1024, 160 * 1024, 120 * 1024],
            [f["free_disk_mb"] for _, f in seen],
        )
        self.assertEqual([0, 1, 2], [f["num_instances"] for _, f in seen])
        self.assertEqual(3, len(self.live_grants()))

    def test_other_schedulers_grants_are_subtracted(self):
        self.gs.schedule(1, 1024, 10)  # another scheduler's promise
        spec = fakes.request_spec(fakes.flavor(2, 4096, 40), num_instances=2)
        self.select_objects(spec, [str(uuid.uuid4()) for _ in range(2)])
        seen = self.filtered()
        self.assertEqual(
            [self.ram - 1024, self.ram - 1024 - 4096],
            [f["free_ram_mb"] for _, f in seen],
        )
        self.assertEqual([1, 3], [f["vcpus_used"] for _, f in seen])
        # The next request reads everything again: three grants, once each.
        recorder.CALLS.clear()
        self.select(fakes.request_spec(fakes.flavor(1, 1024, 10)))
        [(_, figures)] = self.filtered()
        self.assertEqual(self.ram - 1024 - 8192, figures["free_ram_mb"])
        self.assertEqual(5, figures["vcpus_used"])

    def test_weighers_see_the_same_figures(self):
        self.gs.schedule(1, 8192, 10)
        self.cloud.add("other", 8, 16384, 200)  # Nova weighs two or more
        self.select(fakes.request_spec(fakes.flavor(1, 1024, 1)))
        weighed = {
            f["host"]: f["free_ram_mb"]
            for kind, _, f in recorder.CALLS
            if kind == "weigher"
        }
        self.assertEqual({"only": self.ram - 8192, "other": self.ram}, weighed)


class TestFilterRuns(DriverTestCase, base.TestCase):
    overrides = RECORDED

    def test_filters_run_once_per_instance_with_alternates(self):
        for name in ("a", "b", "c", "d"):
            self.cloud.add(name, 8, 16384, 200)
        uuids = [str(uuid.uuid4()) for _ in range(2)]
        spec = fakes.request_spec(fakes.flavor(1, 1024, 10), num_instances=2)
        answer = self.select_objects(spec, uuids, alternates=True)
        self.assertTrue(all(len(s) > 1 for s in answer))
        runs = {}
        for kind, index, figures in recorder.CALLS:
            if kind == "filter":
                key = (index, figures["host"])
                runs[key] = runs.get(key, 0) + 1
        self.assertEqual({0, 1}, {index for index, _ in runs})
        self.assertEqual(8, len(runs))
        self.assertEqual({1}, set(runs.values()))

    def test_lost_grants_do_not_filter_again(self):
        # Three hosts fill up after this request read its view; the one
        # left is the emptiest by RAM, so the least preferred.
        for name, ram in (("a", 16384), ("b", 16384), ("c", 16384)):
            self.cloud.add(name, 8, ram, 200)
        self.cloud.add("d", 8, 4096, 200)
        self.driver.sync_hosts(self.context)
        gs = self.driver.grant_scheduler
        read_view = gs.view

        def view_then_fill(**kwargs):
            view = read_view(**kwargs)
            for report in self.gs.hosts():
                if report.state.host != "d" and report.state.free.vcpus:
                    self.gs.claim(
                        str(uuid.uuid4()),
                        report.state.host,
                        report.state.node,
                        report.state.free,
                    )
            return view

        recorder.CALLS.clear()
        with mock.patch.object(gs, "view", side_effect=view_then_fill):
            [[selection]] = self.select_objects(
                fakes.request_spec(fakes.flavor(1, 1024, 10)),
                [str(uuid.uuid4())],
            )
        self.assertEqual("d", selection.service_host)
        self.assertGreater(gs.counters.conflicts, 0)
        filtered = [
            f["host"] for kind, _, f in recorder.CALLS if kind == "filter"
        ]
        self.assertEqual(["a", "b", "c", "d"], sorted(filtered))
