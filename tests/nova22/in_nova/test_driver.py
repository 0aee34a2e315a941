"""Nova 22's real SchedulerManager, over databases nova-manage made.

Once per class: an API database (``nova-manage api_db sync``), cell0
(``cell_v2 map_cell0``), cell1 (``cell_v2 create_cell``, ``db sync``), all
SQLite files, and a ``nova.conf`` with ``[scheduler] driver =
grant_scheduler``; compute services and nodes are written into cell1 with
Nova's objects and mapped with ``cell_v2 discover_hosts``.  Per test,
Nova's placement fixture (the real placement service in-process) with a
resource provider per compute node, as its compute would report it.  Then
Nova's own ``SchedulerManager()`` loads the driver through stevedore, and each
test calls the manager as the conductor's RPC calls do, in every shape
Nova 22's ``select_destinations`` accepts, and the instance-info calls
computes cast.
"""

import os
import subprocess
import sys
import tempfile
import time
import unittest
import uuid
from unittest import mock

import oslo_messaging as messaging
from nova import config as nova_config
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova.scheduler import manager as scheduler_manager
from nova.tests.functional import fixtures as func_fixtures

from grant_scheduler import api
from grant_scheduler import conf as gs_conf
from grant_scheduler.nova import driver as gs_driver
from grant_scheduler.nova.scheduler import host_manager as gs_host_manager
from tests import base as gs_base
from tests.nova22 import cloud

HOSTS = ("cmp1", "cmp2", "cmp3")
RESERVED_MB = 512
NODE = {"vcpus": 4, "memory_mb": 8192 + RESERVED_MB, "local_gb": 100}
FLAVOR = {"vcpus": 2, "memory_mb": 4096, "root_gb": 40, "ephemeral_gb": 0}

NOVA_CONF = """
[DEFAULT]
transport_url = fake://
state_path = {directory}
[api_database]
connection = sqlite:///{directory}/api.sqlite
[database]
connection = sqlite:///{directory}/cell1.sqlite
"""

CONF_TEXT = """
[scheduler]
driver = grant_scheduler
[placement]
# Nova's placement client needs an endpoint to start; the placement fixture
# intercepts every call it makes.
auth_type = none
endpoint_override = http://127.0.0.1:9/placement
[grant_scheduler_database]
connection = {gs_url}
"""


def nova_manage(conf, *args):
    subprocess.run(
        ["nova-manage", "--config-file", conf] + list(args),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def make_nova_databases(directory, more_conf=""):
    """An API database, cell0 and cell1 (SQLite files in ``directory``)
    made by nova-manage, and Nova's configuration read from the
    ``nova.conf`` written there (``more_conf`` appended).

    :returns: the path of that ``nova.conf``.
    """
    conf = os.path.join(directory, "nova.conf")
    with open(conf, "w") as f:
        f.write(NOVA_CONF.format(directory=directory) + more_conf)
    cell0 = "sqlite:///%s/cell0.sqlite" % directory
    cell1 = "sqlite:///%s/cell1.sqlite" % directory
    nova_manage(conf, "api_db", "sync")
    nova_manage(conf, "cell_v2", "map_cell0", "--database_connection", cell0)
    nova_manage(
        conf,
        "cell_v2",
        "create_cell",
        "--name",
        "cell1",
        "--database_connection",
        cell1,
        "--transport-url",
        "fake://",
    )
    nova_manage(conf, "db", "sync")
    nova_config.parse_args(["test", "--config-file", conf])
    gs_conf.register_opts(nova_config.CONF)
    objects.register_all()
    return conf


class ManagerTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="nova22-")
        cls.gs_db = gs_base.DatabaseFixture("sqlite")
        cls.gs_db.setUp()
        conf = make_nova_databases(
            cls.directory, CONF_TEXT.format(gs_url=cls.gs_db.url)
        )
        cls.admin = nova_context.get_admin_context()
        [cls.cell] = [
            c
            for c in objects.CellMappingList.get_all(cls.admin)
            if c.name == "cell1"
        ]
        for host in HOSTS:
            cls.add_compute(host)
        nova_manage(conf, "cell_v2", "discover_hosts")

    @classmethod
    def tearDownClass(cls):
        cls.gs_db.cleanUp()

    @classmethod
    def add_compute(cls, host):
        with nova_context.target_cell(cls.admin, cls.cell) as cctxt:
            objects.Service(
                cctxt, host=host, binary="nova-compute", topic="compute"
            ).create()
            cloud.compute_node(
                cctxt, host, dict(NODE, reserved_mb=RESERVED_MB)
            ).create()

    def setUp(self):
        super().setUp()
        placement = func_fixtures.PlacementFixture()
        placement.setUp()
        self.addCleanup(placement.cleanUp)
        for host in HOSTS:
            self.add_provider(placement.api, host)
        self.manager = scheduler_manager.SchedulerManager()
        self.driver = self.manager.driver
        self.gs = self.driver.grant_scheduler
        self.context = nova_context.RequestContext("user", "project")
        self.addCleanup(self.gs.database.dispose)
        self.addCleanup(self._empty_grant_scheduler)

    @staticmethod
    def add_provider(placement_api, host):
        """The resource provider a compute reports for its node."""
        node_uuid = cloud.node_uuid(host)
        placement_api.post(
            "/resource_providers", {"uuid": node_uuid, "name": host}
        )
        placement_api.put(
            "/resource_providers/%s/inventories" % node_uuid,
            {
                "resource_provider_generation": 0,
                "inventories": {
                    "VCPU": {"total": NODE["vcpus"]},
                    "MEMORY_MB": {
                        "total": NODE["memory_mb"],
                        "reserved": RESERVED_MB,
                    },
                    "DISK_GB": {"total": NODE["local_gb"]},
                },
            },
        )

    def _empty_grant_scheduler(self):
        for report in self.gs.hosts():
            self.gs.delete_host(report.state.host, report.state.node)

    def flavor(self):
        return objects.Flavor(
            name="small",
            flavorid="small",
            swap=0,
            extra_specs={},
            **FLAVOR,
        )

    def spec(self, num_instances=1, **fields):
        return cloud.request_spec(
            self.flavor(),
            str(uuid.uuid4()),
            num_instances=num_instances,
            **fields,
        )

    def instance(self, host, instance_uuid=None):
        with nova_context.target_cell(self.admin, self.cell) as cctxt:
            instance = objects.Instance(
                cctxt,
                uuid=instance_uuid or str(uuid.uuid4()),
                host=host,
                node=host,
                project_id="project",
                user_id="user",
                vm_state="active",
                image_ref=str(uuid.uuid4()),
                flavor=self.flavor(),
                **FLAVOR,
            )
            instance.create()
            return instance

    def granted(self):
        return {g.instance_uuid: g.host for g in self.gs.grants()}

    def scheduled(self, host):
        """A server scheduled onto ``host``, as its compute records it."""
        spec = self.spec(force_hosts=[host])
        self.manager.select_destinations(
            self.context,
            spec_obj=spec,
            instance_uuids=[spec.instance_uuid],
            return_objects=True,
        )
        return self.instance(host, spec.instance_uuid)

    def used(self, host):
        [report] = [r for r in self.gs.hosts() if r.state.host == host]
        return report.state.used


class TestManagerLoadsTheDriver(ManagerTestCase):
    def test_driver_and_host_manager(self):
        self.assertIsInstance(self.driver, gs_driver.GrantSchedulerDriver)
        self.assertIsInstance(
            self.driver.host_manager, gs_host_manager.GrantsHostManager
        )
        self.manager.reset()  # SIGHUP: refresh_cells_caches on it
        self.assertEqual(
            [self.cell.uuid], list(self.driver.host_manager.cells)
        )

    def test_periodic_tasks_register_every_node(self):
        self.manager._run_periodic_tasks(self.admin)
        reports = self.gs.hosts()
        self.assertEqual(list(HOSTS), [r.state.host for r in reports])
        for report in reports:
            self.assertEqual(api.Resources(), report.state.used)
            self.assertEqual(
                RESERVED_MB, report.state.capacity.reserved.memory_mb
            )
        self.assertEqual([], self.gs.check())


class TestGrantsFilter(ManagerTestCase):
    """GrantsFilter run by Nova 22's filter handler over the HostStates
    Nova's HostManager reads from the cell database."""

    def test_promised_capacity_is_taken(self):
        from nova.scheduler import filters

        from grant_scheduler.nova import filters as gs_filters

        self.manager._run_periodic_tasks(self.admin)
        # Two grants fill cmp1; Nova's own record still shows it empty.
        self.gs.schedule(2, 4096, 40, num_instances=2, force_hosts=["cmp1"])
        handler = filters.HostFilterHandler()
        [cls] = handler.get_matching_classes(
            ["grant_scheduler.nova.filters.GrantsFilter"]
        )
        self.assertIs(gs_filters.GrantsFilter, cls)
        passed = handler.get_filtered_objects(
            [cls()],
            self.driver.host_manager.host_states(self.admin),
            self.spec(),
            0,
        )
        self.assertEqual(["cmp2", "cmp3"], sorted(h.host for h in passed))


class TestSelectDestinations(ManagerTestCase):
    """The shapes of Nova 22's SchedulerManager.select_destinations."""

    def test_objects_with_alternates(self):
        spec = self.spec()
        [selections] = self.manager.select_destinations(
            self.context,
            spec_obj=spec,
            instance_uuids=[spec.instance_uuid],
            return_objects=True,
            return_alternates=True,
        )
        self.assertEqual(3, len(selections))  # max_attempts = 3
        for selection in selections:
            self.assertIsInstance(selection, objects.Selection)
            self.assertEqual(self.cell.uuid, selection.cell_uuid)
        self.assertEqual(
            {spec.instance_uuid: selections[0].service_host}, self.granted()
        )

    def test_objects_without_alternates(self):
        uuids = [str(uuid.uuid4()) for _ in range(2)]
        answer = self.manager.select_destinations(
            self.context,
            spec_obj=self.spec(num_instances=2),
            instance_uuids=uuids,
            return_objects=True,
            return_alternates=False,
        )
        self.assertEqual([1, 1], [len(s) for s in answer])
        self.assertEqual(
            {u: s[0].service_host for u, s in zip(uuids, answer)},
            self.granted(),
        )

    def test_dicts_for_old_conductors(self):
        spec = self.spec()
        [answer] = self.manager.select_destinations(
            self.context, spec_obj=spec, instance_uuids=[spec.instance_uuid]
        )
        self.assertEqual({"host", "nodename", "limits"}, set(answer))
        self.assertIn(answer["host"], HOSTS)

    def test_legacy_request_spec_and_filter_properties(self):
        spec = self.spec()
        [answer] = self.manager.select_destinations(
            self.context,
            request_spec=spec.to_legacy_request_spec_dict(),
            filter_properties=spec.to_legacy_filter_properties_dict(),
        )
        self.assertIn(answer["host"], HOSTS)
        self.assertEqual(1, len(self.gs.grants()))

    def test_without_instance_uuids(self):
        answer = self.manager.select_destinations(
            self.context,
            spec_obj=self.spec(num_instances=2),
            return_objects=True,
        )
        self.assertEqual(2, len(answer))
        self.assertEqual(2, len(self.gs.grants()))

    def test_no_valid_host_is_an_expected_exception(self):
        # Three nodes of two slots each; seven instances do not fit.
        uuids = [str(uuid.uuid4()) for _ in range(7)]
        with self.assertRaises(messaging.ExpectedException) as caught:
            self.manager.select_destinations(
                self.context,
                spec_obj=self.spec(num_instances=7),
                instance_uuids=uuids,
                return_objects=True,
                return_alternates=True,
            )
        self.assertIsInstance(
            caught.exception.exc_info[1], nova_exception.NoValidHost
        )
        self.assertEqual([], self.gs.grants())

    def test_requested_destination(self):
        spec = self.spec(
            requested_destination=objects.Destination(host="cmp2", node=None)
        )
        [[selection]] = self.manager.select_destinations(
            self.context,
            spec_obj=spec,
            instance_uuids=[spec.instance_uuid],
            return_objects=True,
        )
        self.assertEqual("cmp2", selection.service_host)


class TestInstanceInfo(ManagerTestCase):
    """The casts every compute sends, through the manager, with instances
    read from the real cell database."""

    def test_update_sync_and_delete(self):
        one = self.scheduled("cmp1")
        two = self.scheduled("cmp1")
        self.manager.update_instance_info(
            self.admin, "cmp1", objects.InstanceList(objects=[one])
        )
        # two's update was lost; the periodic sync claims it from the
        # cell database.
        self.manager.sync_instance_info(
            self.admin, "cmp1", [one.uuid, two.uuid]
        )
        self.assertEqual(
            {one.uuid: "consumed", two.uuid: "consumed"},
            {g.instance_uuid: g.state for g in self.gs.grants()},
        )
        self.assertEqual(api.Resources(4, 8192, 80), self.used("cmp1"))
        self.manager.delete_instance_info(self.admin, "cmp1", one.uuid)
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp1"))
        self.assertEqual([], self.gs.check())

    def test_a_node_first_seen_running_instances_claims_them(self):
        running = self.instance("cmp3")
        self.manager._run_periodic_tasks(self.admin)
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp3"))
        self.assertIn(
            running.uuid,
            self.driver.host_manager.instance_claims.claimed("cmp3"),
        )
        self.assertEqual([], self.gs.check())


class OtherWorkerTestCase(ManagerTestCase):
    """Nova casts each compute's instance information to every scheduler
    worker: the worker that granted an instance claims it at once, the
    others read, a ``consume_interval`` later, whether it is claimed, and
    claim only what no worker did.  Two managers, each with its own
    driver, are two workers here."""

    def setUp(self):
        super().setUp()
        self.driver.sync_hosts(self.admin)
        self.other = scheduler_manager.SchedulerManager()
        self.addCleanup(self.other.driver.grant_scheduler.database.dispose)
        self.addCleanup(self.other.driver.stop)
        self.deferring = self.other.driver.host_manager.instance_claims

    def cast(self, manager, host, instance):
        manager.update_instance_info(
            self.admin, host, objects.InstanceList(objects=[instance])
        )

    @staticmethod
    def counting(method):
        """``GrantScheduler``'s ``method``, its calls counted."""
        return mock.patch.object(
            api.GrantScheduler,
            method,
            autospec=True,
            side_effect=getattr(api.GrantScheduler, method),
        )


class TestInstanceInfoOfOtherWorkers(OtherWorkerTestCase):
    def test_the_granting_worker_claims_the_other_only_looks(self):
        server = self.scheduled("cmp1")
        with self.counting("claim_instance") as claims:
            self.cast(self.other, "cmp1", server)
            self.cast(self.manager, "cmp1", server)
        # One claim, by the worker that granted it, with its grant's
        # amount (MySQL then need not read it back); the other deferred.
        self.assertEqual(1, claims.call_count)
        self.assertIs(self.gs, claims.call_args[0][0])
        self.assertEqual(
            api.Resources(2, 4096, 40), claims.call_args.kwargs["granted"]
        )
        self.assertEqual(
            {server.uuid: "consumed"},
            {g.instance_uuid: g.state for g in self.gs.grants()},
        )
        self.assertEqual([server.uuid], self.deferring.deferred())
        # Not due before consume_interval has passed.
        self.assertEqual(0, self.deferring.claim_deferred())
        self.assertEqual([server.uuid], self.deferring.deferred())
        later = time.monotonic() + 60
        with self.counting("claim_instance") as claims:
            self.assertEqual(0, self.deferring.claim_deferred(now=later))
        self.assertEqual(0, claims.call_count)
        self.assertEqual([], self.deferring.deferred())
        self.assertEqual({server.uuid: "cmp1"}, self.deferring.claimed("cmp1"))
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp1"))
        self.assertEqual([], self.gs.check())

    def test_an_instance_no_worker_granted_is_claimed_later(self):
        before = self.used("cmp2")
        running = self.instance("cmp2")
        self.cast(self.other, "cmp2", running)
        self.assertEqual(before, self.used("cmp2"))
        later = time.monotonic() + 60
        self.assertEqual(1, self.deferring.claim_deferred(now=later))
        self.assertEqual(
            before + api.Resources(2, 4096, 40), self.used("cmp2")
        )
        self.assertEqual([], self.gs.check())

    def test_deleted_before_its_turn_it_is_not_claimed(self):
        before = self.used("cmp2")
        running = self.instance("cmp2")
        self.cast(self.other, "cmp2", running)
        self.other.delete_instance_info(self.admin, "cmp2", running.uuid)
        self.assertEqual([], self.deferring.deferred())
        later = time.monotonic() + 60
        self.assertEqual(0, self.deferring.claim_deferred(now=later))
        self.assertEqual(before, self.used("cmp2"))


class TestReleasesOfOtherWorkers(OtherWorkerTestCase):
    """A delete's cast reaches every worker too: the worker that claimed
    the instance releases it at once, the others look later."""

    def claimed_by_both(self, host):
        """A server the first worker granted and claimed, the other found
        claimed (so each remembers it on its node)."""
        server = self.scheduled(host)
        self.cast(self.other, host, server)
        self.cast(self.manager, host, server)
        self.deferring.claim_deferred(now=time.monotonic() + 60)
        self.assertIn(server.uuid, self.deferring.claimed(host))
        return server

    def test_the_claiming_worker_releases_the_other_only_looks(self):
        before = self.used("cmp1")
        server = self.claimed_by_both("cmp1")
        with self.counting("release") as releases:
            self.other.delete_instance_info(self.admin, "cmp1", server.uuid)
            self.manager.delete_instance_info(self.admin, "cmp1", server.uuid)
        self.assertEqual(1, releases.call_count)
        self.assertIs(self.gs, releases.call_args[0][0])
        self.assertEqual(before, self.used("cmp1"))
        self.assertEqual([server.uuid], self.deferring.deferred_releases())
        with self.counting("release") as releases:
            self.deferring.claim_deferred(now=time.monotonic() + 120)
        self.assertEqual(0, releases.call_count)
        self.assertEqual([], self.deferring.deferred_releases())
        self.assertEqual([], self.gs.check())

    def test_a_release_the_claiming_worker_missed_is_made_later(self):
        before = self.used("cmp2")
        server = self.claimed_by_both("cmp2")
        self.other.delete_instance_info(self.admin, "cmp2", server.uuid)
        self.assertEqual(
            before + api.Resources(2, 4096, 40), self.used("cmp2")
        )
        self.deferring.claim_deferred(now=time.monotonic() + 120)
        self.assertEqual(before, self.used("cmp2"))
        self.assertEqual([], self.gs.check())


class TestDeferredClaimsInTheFollowerLoop(OtherWorkerTestCase):
    """In a class of its own: the worker's loops run on after it."""

    def test_the_follower_loop_claims_them_with_the_defaults(self):
        before = self.used("cmp3")
        running = self.instance("cmp3")
        self.cast(self.other, "cmp3", running)
        # The worker's loops start with its periodic tasks.
        self.other._run_periodic_tasks(self.admin)
        deadline = time.monotonic() + 30
        while self.deferring.deferred() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual([], self.deferring.deferred())
        self.assertEqual(
            before + api.Resources(2, 4096, 40), self.used("cmp3")
        )


class TestAudit(ManagerTestCase):
    """``grant-scheduler-audit`` with the nova.conf these tests made."""

    def audit(self, *args):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "grant_scheduler.cmd.audit",
                "--config-file",
                os.path.join(self.directory, "nova.conf"),
            ]
            + list(args),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        return done.returncode, done.stdout

    def test_an_instance_the_books_miss_is_found_and_fixed(self):
        self.manager._run_periodic_tasks(self.admin)  # registers the nodes
        hidden = self.instance("cmp2")
        code, out = self.audit()
        self.assertEqual(1, code, out)
        [line] = [ln for ln in out.splitlines() if ln.startswith("cmp2/")]
        self.assertIn(hidden.uuid, line)
        self.assertIn("the books claim nothing", line)
        code, out = self.audit("--fix")
        self.assertEqual(0, code, out)
        self.assertEqual(
            [hidden.uuid], [c.instance_uuid for c in self.gs.claims("cmp2")]
        )
        self.assertEqual(0, self.audit()[0])
        self.assertEqual([], self.gs.check())
