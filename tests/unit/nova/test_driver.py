"""The Nova adapters with Nova absent: built-in filters, our own types.

``compat.nova_module`` is patched to find nothing, so these tests take the
same path whether or not Nova happens to be installed.
"""

import types
import uuid
from unittest import mock

import fixtures
from oslo_config import cfg

from grant_scheduler import api
from grant_scheduler import conf as gs_conf
from grant_scheduler import exception
from grant_scheduler.nova import compat
from grant_scheduler.nova import driver as gs_driver
from grant_scheduler.nova import service
from grant_scheduler.nova.compute import hooks
from tests import base


def flavor(vcpus, memory_mb, root_gb, ephemeral_gb=0):
    return types.SimpleNamespace(
        vcpus=vcpus,
        memory_mb=memory_mb,
        root_gb=root_gb,
        ephemeral_gb=ephemeral_gb,
    )


def spec(flavour, num_instances=1, **fields):
    return types.SimpleNamespace(
        flavor=flavour,
        num_instances=num_instances,
        instance_uuid=str(uuid.uuid4()),
        **fields,
    )


class StandaloneTestCase(base.DatabaseTestCase):
    def setUp(self):
        super().setUp()
        self.useFixture(
            fixtures.MockPatchObject(compat, "nova_module", lambda name: None)
        )
        self.conf = cfg.ConfigOpts()
        gs_conf.register_opts(self.conf)
        self.conf([], default_config_files=[])
        # NOTE: option groups are module-level objects whose overrides
        # outlive this ConfigOpts unless reset.
        self.addCleanup(self.conf.reset)
        self.conf.set_override(
            "connection", self.db_fixture.url, "grant_scheduler_database"
        )
        self.gs = api.GrantScheduler(self.db)
        capacity = api.Capacity(api.Resources(8, 16384, 200))
        for name in ("cmp1", "cmp2"):
            self.gs.report_host(name, name, capacity)
        self.driver = gs_driver.GrantSchedulerDriver(conf=self.conf)


class TestStandaloneDriver(StandaloneTestCase, base.TestCase):
    def test_legacy_call_returns_dicts(self):
        answer = self.driver.select_destinations(
            None, spec(flavor(4, 8192, 100), num_instances=2)
        )
        # NOTE: host_subset_size (3 by default) lets both land on either
        # host: each holds two of these.
        self.assertEqual(2, len(answer))
        self.assertLessEqual(
            {item["host"] for item in answer}, {"cmp1", "cmp2"}
        )
        self.assertEqual({"host", "nodename", "limits"}, set(answer[0]))
        self.assertEqual(
            sorted(item["host"] for item in answer),
            sorted(grant.host for grant in self.gs.grants()),
        )

    def test_subset_of_one_spreads_a_request(self):
        self.conf.set_override("host_subset_size", 1, "grant_scheduler")
        driver = gs_driver.GrantSchedulerDriver(conf=self.conf)
        answer = driver.select_destinations(
            None, spec(flavor(4, 8192, 100), num_instances=2)
        )
        self.assertEqual(
            ["cmp1", "cmp2"], sorted(item["host"] for item in answer)
        )

    def test_queens_call_returns_selections_with_alternates(self):
        request = spec(flavor(1, 1024, 10))
        [[chosen, alternate]] = self.driver.select_destinations(
            None, request, [request.instance_uuid], None, None, None, True
        )
        self.assertIsInstance(chosen, compat.StandaloneSelection)
        self.assertEqual(
            {"cmp1", "cmp2"}, {chosen.nodename, alternate.nodename}
        )
        [grant] = self.gs.grants()
        self.assertEqual(chosen.service_host, grant.host)
        self.assertEqual(request.instance_uuid, grant.instance_uuid)

    def test_no_valid_host_and_nothing_left(self):
        with self.assertRaises(exception.NoValidHost):
            self.driver.select_destinations(
                None, spec(flavor(8, 8192, 100), num_instances=3)
            )
        self.assertEqual([], self.gs.grants())

    def test_bad_flavour_is_no_valid_host(self):
        with self.assertRaises(exception.NoValidHost) as caught:
            self.driver.select_destinations(None, spec(flavor(0, 0, 0)))
        self.assertIn("at least one amount", str(caught.exception))

    def test_ignore_and_force(self):
        [item] = self.driver.select_destinations(
            None, spec(flavor(1, 1024, 1), ignore_hosts=["cmp1"])
        )
        self.assertEqual("cmp2", item["host"])
        [item] = self.driver.select_destinations(
            None, spec(flavor(1, 1024, 1), force_nodes=["cmp1"])
        )
        self.assertEqual("cmp1", item["nodename"])

    def test_host_manager_accepts_the_managers_calls(self):
        manager = self.driver.host_manager
        self.assertIsInstance(manager, gs_driver.StandaloneHostManager)
        manager.update_aggregates([])
        manager.sync_instance_info(None, "cmp1", [])
        self.assertFalse(hasattr(manager, "no_such_call"))

    def test_periodic_reaper(self):
        self.driver.select_destinations(None, spec(flavor(1, 1024, 1)))
        self.assertEqual(1, len(self.gs.grants()))
        with mock.patch.object(
            api.GrantScheduler, "reap", autospec=True, return_value={}
        ) as reap:
            self.driver.run_periodic_tasks(None)
            self.driver.run_periodic_tasks(None)
        # Due at once, then not again within reap_interval.
        self.assertEqual(1, reap.call_count)


class TestBind(base.TestCase):
    def test_releases(self):
        cases = [
            ((), False),
            ((["u"],), False),
            ((["u"], None, None), False),
            ((["u"], None, None, None, False), True),
        ]
        for args, objects_style in cases:
            call = gs_driver._bind(args, {})
            self.assertEqual(objects_style, call["selection_objects"], args)
            self.assertEqual(args[:1] or (None,), (call["instance_uuids"],))

    def test_keywords(self):
        call = gs_driver._bind((), {"return_alternates": True})
        self.assertTrue(call["selection_objects"])
        self.assertTrue(call["return_alternates"])

    def test_wrong_arguments(self):
        with self.assertRaises(TypeError):
            gs_driver._bind((), {"filter_properties": {}})
        with self.assertRaises(TypeError):
            gs_driver._bind(tuple(range(6)), {})


class TestStandaloneHooks(StandaloneTestCase, base.TestCase):
    def setUp(self):
        super().setUp()
        hooks.use(api.GrantScheduler(self.db))
        self.addCleanup(hooks.use, None)
        self.manager = types.SimpleNamespace(host="cmp1")

    def instance(self, flavour):
        return types.SimpleNamespace(
            uuid=str(uuid.uuid4()), flavor=flavour, node="cmp1"
        )

    def test_pre_claims_and_post_releases(self):
        instance = self.instance(flavor(2, 2048, 20))
        hooks.BuildInstanceHook().pre(
            self.manager, None, instance, node="cmp1"
        )
        [report] = [r for r in self.gs.hosts() if r.state.host == "cmp1"]
        self.assertEqual(api.Resources(2, 2048, 20), report.state.used)
        hooks.DeleteInstanceHook().post(None, self.manager, None, instance, [])
        [report] = [r for r in self.gs.hosts() if r.state.host == "cmp1"]
        self.assertEqual(api.Resources(), report.state.used)

    def test_does_not_fit_is_fatal(self):
        instance = self.instance(flavor(9, 2048, 20))
        with self.assertRaises(compat.FatalHookException):
            hooks.BuildInstanceHook().pre(self.manager, None, instance)


class TestConnectionRequired(base.TestCase):
    def test_default_sqlite_refused_inside_nova(self):
        conf = cfg.ConfigOpts()
        gs_conf.register_opts(conf)
        conf([], default_config_files=[])
        with self.assertRaises(exception.DatabaseConfigError) as caught:
            service.Lazy(conf=conf).get()
        self.assertIn(
            "[grant_scheduler_database] connection", str(caught.exception)
        )


class TestResourceTrackerLock(base.TestCase):
    """The hook takes the kind of lock the release's resource tracker
    takes: oslo.concurrency keeps a fair and a plain lock of one name
    apart, so the other kind would not exclude the tracker's claims."""

    def release(self, version):
        module = types.SimpleNamespace(
            version_info=types.SimpleNamespace(version_string=lambda: version)
        )
        return mock.patch.object(
            compat,
            "nova_module",
            lambda name: module if name == "version" else None,
        )

    def lock_kind(self, version):
        with (
            self.release(version),
            mock.patch.object(hooks.lockutils, "lock") as lock,
        ):
            hooks.rt_lock()
        return lock.call_args[1].get("fair", False)

    def test_plain_before_21_and_fair_from_21(self):
        self.assertEqual(
            [False, False, False, True, True, True],
            [
                self.lock_kind(v)
                for v in (
                    "18.3.0",
                    "19.3.2",
                    "20.6.1",
                    "21.2.4",
                    "22.0.1",
                    "34.0.0",
                )
            ],
        )

    def test_the_plain_lock_is_taken_with_any_oslo_concurrency(self):
        # Rocky's oslo.concurrency (3.27, the floor) has no ``fair``
        # argument: asked for the plain lock, it must not be given one
        # (run on each release's pins by tox -e pins).
        with self.release("18.3.0"):
            with hooks.rt_lock():
                pass

    def test_fair_without_nova(self):
        with mock.patch.object(compat, "nova_module", lambda name: None):
            self.assertTrue(compat.resource_tracker_lock_is_fair())
