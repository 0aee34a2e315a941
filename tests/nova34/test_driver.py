"""The scheduler driver inside Nova: loaded and called as Nova does it."""

import uuid

from nova import objects
from stevedore import driver as stevedore_driver

from grant_scheduler import exception
from grant_scheduler.nova import driver as gs_driver
from grant_scheduler.nova.scheduler import host_manager as gs_host_manager
from tests import base
from tests.nova34 import base as nova_base
from tests.nova34 import fakes
from tests.nova34 import recorder

RAM_ONLY = ["nova.scheduler.weights.ram.RAMWeigher"]
RECORDED = {
    "filter_scheduler": {
        "available_filters": [
            "nova.scheduler.filters.all_filters",
            recorder.FILTER,
        ],
        "enabled_filters": ["ComputeFilter", "RecordingFilter"],
        "weight_classes": [recorder.WEIGHER],
    }
}


def load_driver():
    """Exactly how Nova 13-22's SchedulerManager loads its driver."""
    return stevedore_driver.DriverManager(
        "nova.scheduler.driver", "grant_scheduler", invoke_on_load=True
    ).driver


def host_state_obj_to_dict(host_state):
    """Nova 16.0.0's nova.scheduler.manager._host_state_obj_to_dict."""
    limits = dict(host_state.limits)
    numa_limit = limits.get("numa_topology")
    if numa_limit is not None:
        limits["numa_topology"] = numa_limit.obj_to_primitive()
    return {
        "host": host_state.host,
        "nodename": host_state.nodename,
        "limits": limits,
    }


class DriverTestCase(nova_base.NovaTestCase):
    overrides = {"filter_scheduler": {"weight_classes": RAM_ONLY}}

    def setUp(self):
        super().setUp()
        self.driver = load_driver()
        self.driver.host_manager = fakes.HostManager(self.cloud, self.driver)
        self.context = fakes.context()
        recorder.CALLS.clear()

    def select(self, spec, *args):
        return self.driver.select_destinations(self.context, spec, *args)

    def select_objects(self, spec, instance_uuids, alternates=False):
        return self.select(spec, instance_uuids, None, None, None, alternates)

    def live_grants(self):
        return [g for g in self.gs.grants() if g.state == "won"]

    def report(self, host):
        [report] = [r for r in self.gs.hosts() if r.state.host == host]
        return report


class TestLoading(DriverTestCase, base.TestCase):
    def test_loaded_by_stevedore_without_connecting(self):
        self.assertIsInstance(self.driver, gs_driver.GrantSchedulerDriver)
        self.assertFalse(self.driver.USES_ALLOCATION_CANDIDATES)
        self.assertFalse(self.driver.claims_in_placement)
        driver = load_driver()
        # DESIGN H9: nothing is built before the first request.
        self.assertIsNone(driver._lazy._built)
        self.assertIsNone(driver._host_manager)
        self.assertIsNone(driver._periodic)

    def test_class_path_is_importable(self):
        from grant_scheduler.nova.driver import GrantSchedulerDriver

        self.assertIs(GrantSchedulerDriver, type(self.driver))

    def test_default_host_manager_is_novas_own(self):
        self.assertTrue(
            issubclass(
                gs_host_manager.GrantsHostManager,
                __import__(
                    "nova.scheduler.host_manager", fromlist=["HostManager"]
                ).HostManager,
            )
        )
        for name in gs_driver.MANAGER_CALLS:
            self.assertTrue(callable(getattr(self.driver.host_manager, name)))

    def test_unset_connection_is_a_clear_error(self):
        nova_base.CONF.clear_override("connection", "grant_scheduler_database")
        self.cloud.add("cmp1", 8, 8192, 100)
        spec = fakes.request_spec(fakes.flavor(1, 512, 1))
        driver = load_driver()
        driver.host_manager = fakes.HostManager(self.cloud, driver)
        with self.assertRaises(exception.DatabaseConfigError) as caught:
            driver.select_destinations(self.context, spec)
        self.assertIn(
            "[grant_scheduler_database] connection", str(caught.exception)
        )


class TestSignatures(DriverTestCase, base.TestCase):
    def setUp(self):
        super().setUp()
        for name in ("cmp1", "cmp2", "cmp3", "cmp4"):
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

    def test_pike_answers_host_state_objects(self):
        uuids = [str(uuid.uuid4()) for _ in range(2)]
        spec = fakes.request_spec(self.flavor, num_instances=2)
        answer = self.select(spec, uuids, None, None)
        self.assertEqual(2, len(answer))
        for item in answer:
            self.assertNotIsInstance(item, dict)
            # What Nova 16's manager does with each item.
            converted = host_state_obj_to_dict(item)
            self.assertIn(converted["host"], self.cloud.nodes)
            self.assertEqual(converted["host"], converted["nodename"])
            self.assertIsInstance(converted["limits"], dict)
        grants = {g.instance_uuid: g.host for g in self.live_grants()}
        self.assertEqual(
            [grants[u] for u in uuids], [item.host for item in answer]
        )

    def test_queens_to_victoria(self):
        uuids = [str(uuid.uuid4()) for _ in range(2)]
        spec = fakes.request_spec(self.flavor, num_instances=2)
        answer = self.select_objects(spec, uuids)
        self.assertEqual(2, len(answer))
        for selections in answer:
            self.assertEqual(1, len(selections))
            self.assertIsInstance(selections[0], objects.Selection)
            # Nova 22's manager answers old callers with to_dict().
            self.assertEqual(
                {"host", "nodename", "limits"}, set(selections[0].to_dict())
            )
        grants = {g.instance_uuid: g for g in self.live_grants()}
        self.assertEqual(set(uuids), set(grants))
        for instance_uuid, [selection] in zip(uuids, answer):
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
        self.assertEqual(min(4, max_attempts), len(selections))
        hosts = [s.service_host for s in selections]
        self.assertEqual(len(hosts), len(set(hosts)))
        # Only the first holds a grant; alternates are re-checked on claim.
        [grant] = self.live_grants()
        self.assertEqual(hosts[0], grant.host)

    def test_alternates_never_name_a_host_of_the_request(self):
        uuids = [str(uuid.uuid4()) for _ in range(3)]
        spec = fakes.request_spec(self.flavor, num_instances=3)
        answer = self.select_objects(spec, uuids, alternates=True)
        chosen = []
        for selections in answer:
            chosen.append(selections[0].service_host)
            alternates = [s.service_host for s in selections[1:]]
            self.assertEqual([], [h for h in alternates if h in chosen])

    def test_reschedule_gives_back_the_earlier_grant(self):
        # Nova schedules a build again after its compute host failed it:
        # the grant of the first answer would hold capacity for a TTL.
        spec = fakes.request_spec(self.flavor)
        [[first]] = self.select_objects(spec, [spec.instance_uuid])
        spec.retry = objects.SchedulerRetries(
            num_attempts=2, hosts=objects.ComputeNodeList(objects=[])
        )
        spec.ignore_hosts = [first.service_host]
        [[second]] = self.select_objects(spec, [spec.instance_uuid])
        self.assertNotEqual(first.service_host, second.service_host)
        [grant] = self.live_grants()
        self.assertEqual(second.service_host, grant.host)
        self.assertEqual([], self.gs.check())

    def test_too_many_arguments(self):
        spec = fakes.request_spec(self.flavor)
        with self.assertRaises(TypeError):
            self.select(spec, [spec.instance_uuid], None, None, None, 1, 2)


class TestPeriodicReaper(DriverTestCase, base.TestCase):
    overrides = {"grant_scheduler": {"reap_interval": 3600}}

    def test_reaper_runs_when_due(self):
        self.cloud.add("cmp1", 8, 8192, 100)
        self.select(fakes.request_spec(fakes.flavor(1, 1024, 1)))
        gs = self.driver.grant_scheduler
        ttl = gs.settings.grant_ttl
        gs.database.clock_offset = ttl + 1
        self.driver.run_periodic_tasks(self.context)
        self.assertEqual([], self.gs.grants())
        # Not due again for reap_interval seconds: a new expired grant stays.
        gs.database.clock_offset = 0
        self.select(fakes.request_spec(fakes.flavor(1, 1024, 1)))
        gs.database.clock_offset = ttl + 1
        self.driver.run_periodic_tasks(self.context)
        self.assertEqual(1, len(self.gs.grants()))
