"""The driver's host manager consumes grants from instance info.

Nova's scheduler manager forwards ``update_instance_info``,
``delete_instance_info`` and ``sync_instance_info`` to
``driver.host_manager`` exactly as called here; the host manager is Nova's
real HostManager (``fakes.HostManager`` answers only its database reads).
"""

import uuid
from unittest import mock

import fixtures
from nova import exception as nova_exception

from grant_scheduler import api
from grant_scheduler import exception
from tests import base
from tests.nova34 import fakes
from tests.nova34 import test_driver

FLAVOR = fakes.flavor(2, 4096, 40)


class InstanceInfoTestCase(test_driver.DriverTestCase):
    def setUp(self):
        super().setUp()
        self.logger = self.useFixture(fixtures.FakeLogger(level="DEBUG"))
        self.cloud.add("cmp1", 4, 8192 + 512, 100)
        self.cloud.add("cmp2", 4, 8192 + 512, 100)
        self.manager = self.driver.host_manager
        self.driver.sync_hosts(self.context)

    def schedule(self, host="cmp1", flavor=FLAVOR):
        """A server scheduled by the driver, as the compute sees it once
        the resource tracker set its host and node."""
        spec = fakes.request_spec(flavor, force_hosts=[host])
        [[selection]] = self.select_objects(spec, [spec.instance_uuid])
        return self.cloud.add_instance(
            fakes.instance(spec.instance_uuid, flavor, selection.service_host)
        )

    def spawned(self, *instances, host="cmp1"):
        self.manager.update_instance_info(
            self.context, host, fakes.instance_list(*instances)
        )

    @staticmethod
    def counting_claims():
        """``GrantScheduler.claim_instance``, its calls counted."""
        return mock.patch.object(
            api.GrantScheduler,
            "claim_instance",
            autospec=True,
            side_effect=api.GrantScheduler.claim_instance,
        )

    def grant_states(self):
        return {g.instance_uuid: g.state for g in self.gs.grants()}


class TestUpdate(InstanceInfoTestCase, base.TestCase):
    def test_spawned_instance_consumes_its_grant(self):
        server = self.schedule()
        self.assertEqual({server.uuid: "won"}, self.grant_states())
        self.spawned(server)
        self.assertEqual({server.uuid: "consumed"}, self.grant_states())
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp1"))
        self.assertEqual([], self.gs.check())
        # Nova's own bookkeeping happened too.
        tracked = self.manager._instance_info["cmp1"]["instances"]
        self.assertIn(server.uuid, tracked)

    def test_the_granting_process_claims_with_its_grants_amount(self):
        # The process that took the grant gives its amount, which MySQL
        # then need not read back.  As the driver's own host manager is
        # wired in a scheduler worker:
        self.manager.instance_claims.defer_others(
            self.driver.granted_here,
            self.driver.conf.grant_scheduler.consume_interval,
        )
        server = self.schedule()
        with self.counting_claims() as claim:
            self.spawned(server)
        self.assertEqual(1, claim.call_count)
        self.assertEqual(
            api.Resources(2, 4096, 40), claim.call_args.kwargs["granted"]
        )
        self.assertEqual({server.uuid: "consumed"}, self.grant_states())
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp1"))

    def test_repeated_update_claims_once(self):
        server = self.schedule()
        with self.counting_claims() as claim:
            self.spawned(server)
            self.spawned(server)
        self.assertEqual(1, claim.call_count)
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp1"))

    def test_every_scheduler_may_claim_the_same_instance(self):
        # The compute's cast is fanned out to every scheduler process.
        server = self.schedule()
        other = test_driver.load_driver()
        other.host_manager = fakes.HostManager(self.cloud, other)
        self.spawned(server)
        other.host_manager.update_instance_info(
            self.context, "cmp1", fakes.instance_list(server)
        )
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp1"))

    def test_instance_without_flavor_is_read_from_its_cell(self):
        instance_uuid = str(uuid.uuid4())
        self.cloud.add_instance(fakes.instance(instance_uuid, FLAVOR, "cmp1"))
        bare = fakes.objects.Instance(
            uuid=instance_uuid, host="cmp1", node="cmp1"
        )
        self.spawned(bare)
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp1"))

    def test_without_grant_the_flavor_is_rechecked(self):
        flavor = fakes.flavor(1, 1024, 500, ephemeral_gb=10)
        ok = fakes.instance(str(uuid.uuid4()), flavor, "cmp1")
        self.cloud.add_instance(ok, volume_backed=True)
        too_big = fakes.instance(str(uuid.uuid4()), flavor, "cmp1")
        self.cloud.add_instance(too_big)
        self.spawned(ok, too_big)
        # The volume-backed one is counted without its root disk; the
        # other did not fit, and is counted all the same (it runs), which
        # puts the node over its limit, and logged.
        self.assertEqual(api.Resources(2, 2048, 520), self.used("cmp1"))
        self.assertIn("no room for it", self.logger.output)
        self.assertIn("over its limit", self.logger.output)
        self.assertEqual({"cmp1"}, {v.host for v in self.gs.check()})

    def test_database_failure_is_logged_not_raised(self):
        server = self.schedule()
        with mock.patch.object(
            api.GrantScheduler,
            "claim_instance",
            side_effect=exception.DatabaseUnavailable(url="db", reason="gone"),
        ):
            self.spawned(server)
        self.assertIn("Could not claim instance", self.logger.output)
        self.assertIn(
            server.uuid, self.manager._instance_info["cmp1"]["instances"]
        )
        # Not remembered as claimed: the next update or sync claims it.
        self.spawned(server)
        self.assertEqual({server.uuid: "consumed"}, self.grant_states())


class TestDelete(InstanceInfoTestCase, base.TestCase):
    def test_delete_releases(self):
        server = self.schedule()
        self.spawned(server)
        self.manager.delete_instance_info(self.context, "cmp1", server.uuid)
        self.assertEqual(api.Resources(), self.used("cmp1"))
        self.manager.delete_instance_info(self.context, "cmp1", server.uuid)
        self.assertEqual(api.Resources(), self.used("cmp1"))

    def test_delete_seen_by_a_process_that_did_not_claim(self):
        server = self.schedule()
        self.spawned(server)
        fresh = fakes.HostManager(self.cloud, self.driver)
        fresh.delete_instance_info(self.context, "cmp1", server.uuid)
        self.assertEqual(api.Resources(), self.used("cmp1"))


class TestSync(InstanceInfoTestCase, base.TestCase):
    def sync(self, *uuids, host="cmp1"):
        self.manager.sync_instance_info(self.context, host, list(uuids))

    def test_sync_claims_what_no_update_claimed(self):
        server = self.schedule()
        self.sync(server.uuid)
        self.assertEqual({server.uuid: "consumed"}, self.grant_states())
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp1"))

    def test_building_instance_not_listed_keeps_its_grant(self):
        server = self.schedule()
        self.cloud.instances[server.uuid].host = None  # not on a host yet
        self.sync()
        self.sync()
        self.assertEqual({server.uuid: "won"}, self.grant_states())
        self.assertEqual(api.Resources(), self.used("cmp1"))

    def test_listed_while_building_is_claimed_early(self):
        server = self.schedule()
        self.sync(server.uuid)
        self.spawned(server)  # the update after spawn changes nothing
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp1"))

    def test_release_only_after_two_syncs_without_it(self):
        server = self.schedule()
        self.spawned(server)
        # A sync whose list was read before the build set the host.
        self.sync()
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp1"))
        self.sync(server.uuid)
        self.sync()
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp1"))
        self.sync()
        self.assertEqual(api.Resources(), self.used("cmp1"))

    def test_other_hosts_are_untouched(self):
        one = self.schedule("cmp1")
        two = self.schedule("cmp2")
        self.spawned(one)
        self.spawned(two, host="cmp2")
        self.sync()
        self.sync()
        self.assertEqual(api.Resources(), self.used("cmp1"))
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp2"))


class TestFill(InstanceInfoTestCase, base.TestCase):
    """Schedule, spawn, delete: usage follows and nothing leaks."""

    def test_fill_to_capacity_and_empty_again(self):
        servers = [self.schedule(host) for host in ("cmp1", "cmp2") * 2]
        for server in servers:
            self.spawned(server, host=server.host)
        self.assertEqual(api.Resources(4, 8192, 80), self.used("cmp1"))
        with self.assertRaises(nova_exception.NoValidHost):
            self.select(fakes.request_spec(FLAVOR))
        self.assertEqual([], self.gs.check())
        for server in servers:
            self.manager.delete_instance_info(
                self.context, server.host, server.uuid
            )
        gs = self.driver.grant_scheduler
        gs.database.clock_offset = gs.settings.grant_ttl + 1
        gs.reap()
        self.assertEqual([], self.gs.check(quiescent=True))
        self.assertEqual(api.Resources(), self.used("cmp1"))
        self.assertEqual(api.Resources(), self.used("cmp2"))
