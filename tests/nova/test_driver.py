"""The scheduler driver inside Nova: loaded and called as Nova does it."""

import uuid
from unittest import mock

from nova import exception as nova_exception
from nova import objects
from stevedore import driver as stevedore_driver

from grant_scheduler import api
from grant_scheduler import exception
from grant_scheduler.nova import driver as gs_driver
from grant_scheduler.nova.scheduler import host_manager as gs_host_manager
from tests import base
from tests.nova import base as nova_base
from tests.nova import fakes
from tests.nova import recorder

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


class TestNovaFiltersAndWeighers(DriverTestCase, base.TestCase):
    def test_new_nodes_registered_with_reserved_and_claimed_instances(self):
        self.cloud.add("cmp1", 16, 32768, 500, used=(4, 8192, 100))
        running = self.cloud.add_instance(
            fakes.instance(
                str(uuid.uuid4()), fakes.flavor(4, 8192, 100), "cmp1"
            )
        )
        self.select(fakes.request_spec(fakes.flavor(1, 1024, 10)))
        report = self.report("cmp1")
        self.assertEqual(self.cloud.nodes["cmp1"].uuid, report.state.node_uuid)
        conf = nova_base.CONF
        self.assertEqual(
            api.Capacity(
                api.Resources(16, 32768, 500),
                reserved=api.Resources(
                    conf.reserved_host_cpus,
                    conf.reserved_host_memory_mb,
                    -(-conf.reserved_host_disk_mb // 1024),
                ),
            ),
            report.state.capacity,
        )
        # Usage is the instance Nova already placed there, claimed.
        self.assertEqual(api.Resources(4, 8192, 100), report.state.used)
        self.assertEqual(report.state.used, report.claimed)
        self.assertEqual(api.Resources(), report.external)
        self.assertIn(
            running.uuid,
            self.driver.host_manager.instance_claims.claimed("cmp1"),
        )
        self.assertEqual([], self.gs.check())

    def test_fresh_host_has_no_usage_and_no_violation(self):
        self.cloud.add("cmp1", 8, 8192, 100)
        self.assertEqual(512, nova_base.CONF.reserved_host_memory_mb)
        self.assertEqual(512, self.cloud.nodes["cmp1"].memory_mb_used)
        self.select(fakes.request_spec(fakes.flavor(1, 1024, 10)))
        report = self.report("cmp1")
        self.assertEqual(api.Resources(), report.state.used)
        self.assertEqual(512, report.state.capacity.reserved.memory_mb)
        self.assertEqual(8192 - 512, report.state.limit.memory_mb)
        self.assertEqual([], self.gs.check())

    def test_reserved_memory_is_not_granted(self):
        self.cloud.add("cmp1", 8, 8192, 100)
        with self.assertRaises(nova_exception.NoValidHost):
            self.select(fakes.request_spec(fakes.flavor(1, 8192 - 511, 1)))
        self.select(fakes.request_spec(fakes.flavor(1, 8192 - 512, 1)))

    def test_registration_only_for_nodes_the_view_does_not_know(self):
        for name in ("cmp1", "cmp2"):
            self.cloud.add(name, 8, 8192, 100)
        spec = fakes.request_spec(fakes.flavor(1, 512, 1))
        with mock.patch.object(
            api.GrantScheduler,
            "register_host",
            autospec=True,
            side_effect=api.GrantScheduler.register_host,
        ) as register:
            self.select(spec)
            self.assertEqual(2, register.call_count)
            self.select(fakes.request_spec(fakes.flavor(1, 512, 1)))
            self.assertEqual(2, register.call_count)
            self.cloud.add("cmp3", 8, 8192, 100)
            self.select(fakes.request_spec(fakes.flavor(1, 512, 1)))
            self.assertEqual(3, register.call_count)
            self.assertEqual("cmp3", register.call_args[0][1])

    def test_capacity_changes_reported_from_the_periodic_task(self):
        self.cloud.add("cmp1", 8, 8192, 100)
        self.select(fakes.request_spec(fakes.flavor(1, 512, 1)))
        self.cloud.nodes["cmp1"].ram_allocation_ratio = 1.5
        self.select(fakes.request_spec(fakes.flavor(1, 512, 1)))
        self.assertEqual(
            1.0, self.report("cmp1").state.capacity.ram_allocation_ratio
        )
        self.driver.run_periodic_tasks(self.context)
        report = self.report("cmp1")
        self.assertEqual(1.5, report.state.capacity.ram_allocation_ratio)
        self.assertEqual(
            api.Resources(2, 1024, 2), report.state.used + report.state.granted
        )

    def test_periodic_task_registers_before_any_request(self):
        for name in ("cmp1", "cmp2"):
            self.cloud.add(name, 8, 8192, 100)
        self.driver.run_periodic_tasks(self.context)
        self.assertEqual(
            ["cmp1", "cmp2"], [r.state.host for r in self.gs.hosts()]
        )

    def test_compute_filter_drops_disabled_services(self):
        self.cloud.add("disabled", 64, 262144, 1000, disabled=True)
        self.cloud.add("enabled", 8, 8192, 100)
        spec = fakes.request_spec(fakes.flavor(1, 1024, 1))
        self.assertEqual("enabled", self.select(spec)[0]["host"])
        spec = fakes.request_spec(fakes.flavor(16, 1024, 1))
        with self.assertRaises(nova_exception.NoValidHost) as refused:
            self.select(spec)
        # The one host with room is disabled: Nova's filter is named in
        # the details, and the fault users see is the stock scheduler's.
        self.assertIn("ComputeFilter rejected", str(refused.exception))
        self.assertEqual(
            "No valid host was found. There are not enough hosts available.",
            refused.exception.format_message(),
        )
        self.assertEqual(["enabled"], [g.host for g in self.live_grants()])

    def test_the_rejecting_filter_is_looked_for_once(self):
        self.cloud.add("disabled", 64, 262144, 1000, disabled=True)
        self.cloud.add("enabled", 8, 8192, 100)
        spec = fakes.request_spec(fakes.flavor(16, 1024, 1))
        with mock.patch.object(
            gs_host_manager,
            "_rejecting_filter",
            wraps=gs_host_manager._rejecting_filter,
        ) as looked:
            with self.assertRaises(nova_exception.NoValidHost):
                self.select(spec)
        self.assertEqual(1, looked.call_count)

    def test_no_room_is_not_blamed_on_a_filter(self):
        self.cloud.add("cmp1", 8, 8192, 100)
        with self.assertRaises(nova_exception.NoValidHost) as refused:
            self.select(fakes.request_spec(fakes.flavor(16, 1024, 1)))
        self.assertNotIn("rejected", str(refused.exception))

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
        driver.host_manager = fakes.HostManager(self.cloud, driver)
        self.cloud.add("crowded", 64, 262144, 1000, stats={"num_instances": 2})
        self.cloud.add("busy", 64, 262144, 1000, stats={"io_workload": 4})
        self.cloud.add("quiet", 4, 8192, 100)
        spec = fakes.request_spec(fakes.flavor(1, 1024, 1))
        [answer] = driver.select_destinations(self.context, spec)
        self.assertEqual("quiet", answer["host"])

    def test_unknown_enabled_filter_is_novas_error(self):
        self.useFixture(
            nova_base.ConfFixture(
                self.db_fixture.url,
                filter_scheduler={"enabled_filters": ["NoSuchFilter"]},
            )
        )
        with self.assertRaises(
            nova_exception.SchedulerHostFilterNotFound
        ) as caught:
            fakes.HostManager(self.cloud, load_driver())
        self.assertIn("NoSuchFilter", str(caught.exception))

    def test_multi_instance_fills_and_consumes_in_memory(self):
        self.cloud.add("a", 4, 8192 + 512, 100)
        self.cloud.add("b", 4, 8192 + 512, 100)
        spec = fakes.request_spec(fakes.flavor(2, 4096, 10), num_instances=4)
        answer = self.select(spec)
        hosts = sorted(a["host"] for a in answer)
        self.assertEqual(["a", "a", "b", "b"], hosts)

    def test_volume_backed_server_is_not_charged_root_disk(self):
        self.cloud.add("cmp1", 8, 8192, 50)
        flavor = fakes.flavor(1, 1024, 100, ephemeral_gb=5)
        with self.assertRaises(nova_exception.NoValidHost):
            self.select(fakes.request_spec(flavor))
        spec = fakes.request_spec(flavor, is_bfv=True)
        [answer] = self.select_objects(spec, [spec.instance_uuid])
        self.assertEqual("cmp1", answer[0].service_host)
        [grant] = self.live_grants()
        self.assertEqual(api.Resources(1, 1024, 5), grant.resources)

    def test_older_host_manager_without_states_by_uuids(self):
        class OlderHostManager(fakes.HostManager):
            """Nova 13-19: get_all_host_states only."""

            get_host_states_by_uuids = None

            def get_all_host_states(self, context):
                return self._get_host_states(
                    context, *self._get_computes_for_cells(context, None)
                )

        self.cloud.add("cmp1", 8, 8192, 100)
        self.driver.host_manager = OlderHostManager(self.cloud, self.driver)
        [answer] = self.select(fakes.request_spec(fakes.flavor(1, 1024, 1)))
        self.assertEqual("cmp1", answer["host"])


class TestPlacementRules(DriverTestCase, base.TestCase):
    """Nova's own get_filtered_hosts decides where a request may go."""

    def setUp(self):
        super().setUp()
        self.cloud.add("big", 16, 32768 + 512, 500)
        self.cloud.add("small", 8, 8192 + 512, 100)
        self.cloud.add("off", 16, 65536, 500, disabled=True)
        self.flavor = fakes.flavor(1, 1024, 1)

    def test_ignore_hosts(self):
        spec = fakes.request_spec(self.flavor, ignore_hosts=["big"])
        self.assertEqual("small", self.select(spec)[0]["host"])

    def test_ignore_hosts_ignores_case_like_nova(self):
        spec = fakes.request_spec(self.flavor, ignore_hosts=["BIG"])
        self.assertEqual("small", self.select(spec)[0]["host"])

    def test_force_hosts_skips_filters_like_nova(self):
        spec = fakes.request_spec(self.flavor, force_hosts=["off"])
        self.assertEqual("off", self.select(spec)[0]["host"])

    def test_check_type_hint_filters_a_forced_host(self):
        spec = fakes.request_spec(
            self.flavor,
            force_hosts=["off"],
            scheduler_hints={"_nova_check_type": ["resize"]},
        )
        with self.assertRaises(nova_exception.NoValidHost):
            self.select(spec)
        self.assertEqual([], self.live_grants())

    def test_force_nodes(self):
        spec = fakes.request_spec(self.flavor, force_nodes=["small"])
        self.assertEqual("small", self.select(spec)[0]["nodename"])

    def test_requested_destination(self):
        for host in ("small", "big"):
            spec = fakes.request_spec(
                self.flavor,
                requested_destination=objects.Destination(
                    host=host, node=None
                ),
            )
            [[selection]] = self.select_objects(spec, [spec.instance_uuid])
            self.assertEqual(host, selection.service_host)
        spec = fakes.request_spec(
            self.flavor,
            requested_destination=objects.Destination(
                host="big", node="small"
            ),
        )
        with self.assertRaises(nova_exception.NoValidHost):
            self.select_objects(spec, [spec.instance_uuid])

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
        self.assertEqual([], self.gs.grants())
        spec = fakes.request_spec(flavor, num_instances=3)
        answer = self.select(spec, [str(uuid.uuid4()) for _ in range(3)])
        self.assertEqual(
            ["big", "big", "small"], sorted(a["host"] for a in answer)
        )


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


class TestNovaSubsetSize(DriverTestCase, base.TestCase):
    """Inside Nova, Nova's [filter_scheduler] host_subset_size chooses
    among the hosts Nova's weighers ranked, not grant_scheduler's option."""

    def setUp(self):
        super().setUp()
        # The RAM weigher puts "roomy" first for every request below.
        self.cloud.add("roomy", 64, 262144, 1000)
        self.cloud.add("small1", 8, 16384, 200)
        self.cloud.add("small2", 8, 16384, 200)

    def hosts_chosen(self, count):
        flavor = fakes.flavor(1, 1024, 10)
        return [
            self.select_objects(
                fakes.request_spec(flavor), [str(uuid.uuid4())]
            )[0][0].service_host
            for _ in range(count)
        ]

    def test_nova_default_takes_the_weighers_best(self):
        self.assertEqual(1, nova_base.CONF.filter_scheduler.host_subset_size)
        self.assertEqual(3, self.gs.settings.host_subset_size)
        self.assertEqual(["roomy"] * 12, self.hosts_chosen(12))

    def test_nova_option_spreads_when_raised(self):
        nova_base.CONF.set_override("host_subset_size", 3, "filter_scheduler")
        self.addCleanup(
            nova_base.CONF.clear_override,
            "host_subset_size",
            "filter_scheduler",
        )
        self.assertEqual(
            {"roomy", "small1", "small2"}, set(self.hosts_chosen(40))
        )
