"""Nova 13-16's engine (``grant_scheduler.nova.scheduler.protocol_engine``):
Nova's filters and weighers rank, a grant decides; the stock NoValidHost,
Nova's placement rules and ``host_subset_size``."""

import uuid
from unittest import mock

from nova import exception as nova_exception
from nova import objects

from grant_scheduler import api
from grant_scheduler.nova.scheduler import host_manager as gs_host_manager
from tests import base
from tests.nova34 import base as nova_base
from tests.nova34 import fakes
from tests.nova34.test_driver import DriverTestCase
from tests.nova34.test_driver import load_driver


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
