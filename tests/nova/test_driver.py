"""The scheduler driver inside Nova: loaded and called as Nova does it."""

import time
import uuid

from nova import exception as nova_exception
from nova import objects
from stevedore import driver as stevedore_driver

from grant_scheduler import api
from grant_scheduler import exception
from grant_scheduler.nova import driver as gs_driver
from tests import base
from tests.nova import base as nova_base
from tests.nova import fakes

RAM_ONLY = ["nova.scheduler.weights.ram.RAMWeigher"]


def load_driver():
    """Exactly how Nova 13-22's SchedulerManager loads its driver."""
    return stevedore_driver.DriverManager(
        "nova.scheduler.driver", "grant_scheduler", invoke_on_load=True
    ).driver


class DriverTestCase(nova_base.NovaTestCase):
    overrides = {
        "grant_scheduler": {"host_subset_size": 1},
        "filter_scheduler": {"weight_classes": RAM_ONLY},
    }

    def setUp(self):
        super().setUp()
        self.driver = load_driver()
        self.driver.host_manager = fakes.HostManager(self.cloud)
        self.context = fakes.context()

    def select(self, spec, *args):
        return self.driver.select_destinations(self.context, spec, *args)

    def select_objects(self, spec, instance_uuids, alternates=False):
        return self.select(spec, instance_uuids, None, None, None, alternates)

    def live_grants(self):
        return [g for g in self.gs.grants() if g.state in ("pending", "won")]


class TestLoading(DriverTestCase, base.TestCase):
    def test_loaded_by_stevedore_without_connecting(self):
        self.assertIsInstance(self.driver, gs_driver.GrantSchedulerDriver)
        self.assertFalse(self.driver.USES_ALLOCATION_CANDIDATES)
        driver = load_driver()
        # DESIGN H9: nothing is built before the first request.
        self.assertIsNone(driver._lazy._built)
        self.assertIsNone(driver._host_manager)
        self.assertIsNone(driver._reaper)

    def test_class_path_is_importable(self):
        from grant_scheduler.nova.driver import GrantSchedulerDriver

        self.assertIs(GrantSchedulerDriver, type(self.driver))

    def test_unset_connection_is_a_clear_error(self):
        nova_base.CONF.clear_override("connection", "grant_scheduler_database")
        self.cloud.add("cmp1", 8, 8192, 100)
        spec = fakes.request_spec(fakes.flavor(1, 512, 1))
        driver = load_driver()
        driver.host_manager = fakes.HostManager(self.cloud)
        with self.assertRaises(exception.DatabaseConfigError) as caught:
            driver.select_destinations(self.context, spec)
        self.assertIn(
            "[grant_scheduler_database] connection", str(caught.exception)
        )


class TestSignatures(DriverTestCase, base.TestCase):
    def setUp(self):
        super().setUp()
        for name in ("cmp1", "cmp2", "cmp3"):
            self.cloud.add(name, 8, 8192, 100)
        self.flavor = fakes.flavor(2, 2048, 20)

    def assert_dicts(self, answer, count):
        self.assertEqual(count, len(answer))
        for item in answer:
            self.assertEqual({"host", "nodename", "limits"}, set(item))
            self.assertIn(item["host"], self.cloud.nodes)
        self.assertEqual(count, len(self.live_grants()))

    def test_mitaka_newton(self):
        spec = fakes.request_spec(self.flavor, num_instances=2)
        self.assert_dicts(self.select(spec), 2)

    def test_ocata(self):
        spec = fakes.request_spec(self.flavor)
        self.assert_dicts(self.select(spec, [spec.instance_uuid]), 1)

    def test_pike(self):
        spec = fakes.request_spec(self.flavor)
        self.assert_dicts(
            self.select(spec, [spec.instance_uuid], None, None), 1
        )

    def test_queens_to_victoria(self):
        uuids = [str(uuid.uuid4()) for _ in range(2)]
        spec = fakes.request_spec(self.flavor, num_instances=2)
        answer = self.select_objects(spec, uuids)
        self.assertEqual(2, len(answer))
        for selections in answer:
            self.assertEqual(1, len(selections))
            self.assertIsInstance(selections[0], objects.Selection)
        grants = {g.instance_uuid: g for g in self.live_grants()}
        self.assertEqual(set(uuids), set(grants))
        for instance_uuid, [selection] in zip(uuids, answer, strict=True):
            self.assertEqual(
                grants[instance_uuid].host, selection.service_host
            )
            self.assertEqual(
                self.cloud.nodes[selection.service_host].uuid,
                selection.compute_node_uuid,
            )
            self.assertEqual(fakes.CELL_UUID, selection.cell_uuid)

    def test_keyword_call(self):
        spec = fakes.request_spec(self.flavor)
        answer = self.driver.select_destinations(
            self.context,
            spec,
            instance_uuids=[spec.instance_uuid],
            return_alternates=True,
        )
        self.assertIsInstance(answer[0][0], objects.Selection)

    def test_alternates_up_to_max_attempts(self):
        spec = fakes.request_spec(self.flavor)
        [selections] = self.select_objects(
            spec, [spec.instance_uuid], alternates=True
        )
        max_attempts = nova_base.CONF.scheduler.max_attempts
        self.assertEqual(min(3, max_attempts), len(selections))
        hosts = [s.service_host for s in selections]
        self.assertEqual(len(hosts), len(set(hosts)))
        # Only the first holds a grant; alternates are re-checked on claim.
        [grant] = self.live_grants()
        self.assertEqual(hosts[0], grant.host)

    def test_too_many_arguments(self):
        spec = fakes.request_spec(self.flavor)
        with self.assertRaises(TypeError):
            self.select(spec, [spec.instance_uuid], None, None, None, 1, 2)


class TestNovaFiltersAndWeighers(DriverTestCase, base.TestCase):
    def test_new_nodes_registered_from_compute_records(self):
        self.cloud.add("cmp1", 16, 32768, 500, used=(4, 8192, 100))
        spec = fakes.request_spec(fakes.flavor(1, 1024, 10))
        self.select(spec)
        [report] = self.gs.hosts()
        self.assertEqual("cmp1", report.state.host)
        self.assertEqual(self.cloud.nodes["cmp1"].uuid, report.state.node_uuid)
        self.assertEqual(api.Resources(4, 8192, 100), report.state.used)
        self.assertEqual(
            api.Capacity(api.Resources(16, 32768, 500)), report.state.capacity
        )

    def test_ram_weigher_sees_live_grants(self):
        self.cloud.add("big", 8, 16384, 100)
        self.cloud.add("medium", 8, 12288, 100)
        small = fakes.flavor(1, 1024, 1)
        [first] = self.select(fakes.request_spec(small))
        self.assertEqual("big", first["host"])
        # Promise 8 GB on "big" away: Nova's own record still shows it
        # empty, but the weigher must now prefer "medium".
        self.gs.schedule(1, 8192, 1, force_hosts=["big"])
        [second] = self.select(fakes.request_spec(small))
        self.assertEqual("medium", second["host"])

    def test_compute_filter_drops_disabled_services(self):
        self.cloud.add("disabled", 64, 262144, 1000, disabled=True)
        self.cloud.add("enabled", 8, 8192, 100)
        spec = fakes.request_spec(fakes.flavor(1, 1024, 1))
        self.assertEqual("enabled", self.select(spec)[0]["host"])
        spec = fakes.request_spec(fakes.flavor(16, 1024, 1))
        with self.assertRaises(nova_exception.NoValidHost):
            self.select(spec)
        self.assertEqual(["enabled"], [g.host for g in self.live_grants()])

    def test_num_instances_and_io_ops_filters(self):
        self.useFixture(
            nova_base.ConfFixture(
                self.db_fixture.url,
                filter_scheduler={
                    "enabled_filters": [
                        "ComputeFilter",
                        "NumInstancesFilter",
                        "IoOpsFilter",
                    ],
                    "max_instances_per_host": 2,
                    "max_io_ops_per_host": 4,
                },
            )
        )
        driver = load_driver()
        driver.host_manager = fakes.HostManager(self.cloud)
        self.cloud.add("crowded", 64, 262144, 1000, stats={"num_instances": 2})
        self.cloud.add("busy", 64, 262144, 1000, stats={"io_workload": 4})
        self.cloud.add("quiet", 4, 8192, 100)
        spec = fakes.request_spec(fakes.flavor(1, 1024, 1))
        [answer] = driver.select_destinations(self.context, spec)
        self.assertEqual("quiet", answer["host"])
        self.assertEqual(
            ["ComputeFilter", "NumInstancesFilter", "IoOpsFilter"],
            [type(f).__name__ for f in driver._pipeline.filters],
        )

    def test_unknown_enabled_filter_is_named(self):
        self.useFixture(
            nova_base.ConfFixture(
                self.db_fixture.url,
                filter_scheduler={"enabled_filters": ["NoSuchFilter"]},
            )
        )
        self.cloud.add("cmp1", 8, 8192, 100)
        driver = load_driver()
        driver.host_manager = fakes.HostManager(self.cloud)
        spec = fakes.request_spec(fakes.flavor(1, 1024, 1))
        with self.assertRaises(exception.GrantSchedulerError) as caught:
            driver.select_destinations(self.context, spec)
        self.assertIn("NoSuchFilter", str(caught.exception))

    def test_multi_instance_fills_and_consumes_in_memory(self):
        self.cloud.add("a", 4, 8192, 100)
        self.cloud.add("b", 4, 8192, 100)
        spec = fakes.request_spec(fakes.flavor(2, 4096, 10), num_instances=4)
        answer = self.select(spec)
        hosts = sorted(a["host"] for a in answer)
        self.assertEqual(["a", "a", "b", "b"], hosts)


class TestPlacementRules(DriverTestCase, base.TestCase):
    def setUp(self):
        super().setUp()
        self.cloud.add("big", 16, 32768, 500)
        self.cloud.add("small", 8, 8192, 100)
        self.cloud.add("off", 16, 65536, 500, disabled=True)
        self.flavor = fakes.flavor(1, 1024, 1)

    def test_ignore_hosts(self):
        spec = fakes.request_spec(self.flavor, ignore_hosts=["big"])
        self.assertEqual("small", self.select(spec)[0]["host"])

    def test_force_hosts_skips_filters_like_nova(self):
        spec = fakes.request_spec(self.flavor, force_hosts=["off"])
        self.assertEqual("off", self.select(spec)[0]["host"])

    def test_force_nodes(self):
        spec = fakes.request_spec(self.flavor, force_nodes=["small"])
        self.assertEqual("small", self.select(spec)[0]["nodename"])

    def test_forced_host_without_room(self):
        spec = fakes.request_spec(
            fakes.flavor(12, 1024, 1), force_hosts=["small"]
        )
        with self.assertRaises(nova_exception.NoValidHost):
            self.select(spec)

    def test_multi_instance_all_or_nothing(self):
        # "big" takes two of these, "small" one, "off" is disabled.
        flavor = fakes.flavor(8, 8192, 100)
        spec = fakes.request_spec(flavor, num_instances=4)
        with self.assertRaises(nova_exception.NoValidHost):
            self.select(spec, [str(uuid.uuid4()) for _ in range(4)])
        self.assertEqual([], self.live_grants())
        spec = fakes.request_spec(flavor, num_instances=3)
        answer = self.select(spec, [str(uuid.uuid4()) for _ in range(3)])
        self.assertEqual(
            ["big", "big", "small"], sorted(a["host"] for a in answer)
        )


class TestPeriodicReaper(DriverTestCase, base.TestCase):
    overrides = {
        "grant_scheduler": {"grant_ttl": 1, "reap_interval": 3600},
        "filter_scheduler": {"weight_classes": RAM_ONLY},
    }

    def test_reaper_runs_when_due(self):
        self.cloud.add("cmp1", 8, 8192, 100)
        self.select(fakes.request_spec(fakes.flavor(1, 1024, 1)))
        time.sleep(1.5)
        self.driver.run_periodic_tasks(self.context)
        self.assertEqual([], self.gs.grants())
        # Not due again for reap_interval seconds: a new expired grant stays.
        self.select(fakes.request_spec(fakes.flavor(1, 1024, 1)))
        time.sleep(1.5)
        self.driver.run_periodic_tasks(self.context)
        self.assertEqual(1, len(self.gs.grants()))
