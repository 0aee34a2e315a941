"""Servers booted through the release's API with the grant_scheduler driver.

Each build runs through the release's conductor, the driver (loaded by the
release's SchedulerManager), the compute's own ``ComputeManager`` with the
build hook (``nova.hooks``) and the fake virt driver; the instance info
computes cast reaches the driver's host manager.
"""

import eventlet
import fixtures

from tests.nova18_21 import base


class TestFill(base.GrantsTestBase):
    def test_fill_exactly_then_no_valid_host(self):
        # Every grant consumed, by the build hook before the spawn.
        self.fill_every_slot_then_no_valid_host()
        self.assertEqual([], self.nova_over_capacity())
        self.assertEqual([], self.placement_over_capacity())

    def test_deleted_servers_free_their_room(self):
        servers = [self.boot() for _ in range(base.SLOTS_PER_HOST * 2)]
        for server in servers[:2]:
            self.delete(server)
        self.eventually(
            self.flavor_resources(base.SLOTS_PER_HOST * 2 - 2),
            lambda: sum(self.usage().values(), self.flavor_resources(0)),
        )
        for _ in range(2):
            self.boot()
        self.boot(expected_state="ERROR")
        self.assertEqual([], self.gs.check())
        self.assertEqual([], self.nova_over_capacity())


class TestMultiCreate(base.GrantsTestBase):
    def test_multi_create_that_does_not_fit_leaves_no_grants(self):
        self.multi_create_one_too_many(polls=80, pause=0.25)
        # All or nothing: room for the whole cloud is still there.
        slots = base.SLOTS_PER_HOST * len(self.HOSTS)
        self.post_server(min_count=slots, max_count=slots)
        self.wait_for_all_with("ACTIVE", slots)

    def test_multi_create_that_fits_fills_every_slot(self):
        self.multi_create_every_slot(polls=80, pause=0.25)
        self.assertEqual([], self.nova_over_capacity())

    def wait_for_all_with(self, status, count):
        for _ in range(80):
            found = [
                s for s in self.api.get_servers() if s["status"] == status
            ]
            if len(found) == count:
                return found
            eventlet.sleep(0.25)
        self.fail("not %d servers %s: %s" % (count, status, found))


class TestConcurrentBoots(base.GrantsTestBase):
    HOSTS = ("host1", "host2", "host3")
    CLIENTS = 4
    PER_CLIENT = 3

    def test_concurrent_api_requests(self):
        slots = base.SLOTS_PER_HOST * len(self.HOSTS)
        self.assertGreater(self.CLIENTS * self.PER_CLIENT, slots)
        final, most_in_flight = self.boot_concurrently(
            self.CLIENTS, self.PER_CLIENT, polls=120, pause=0.25
        )
        self.assertEqual([], self.nova_over_capacity())
        self.assert_concurrent_boots_placed(final, most_in_flight)


class TestTtlAndReap(base.GrantsTestBase):
    HOSTS = ("host1",)

    def test_a_build_that_never_arrives_is_reaped_after_the_ttl(self):
        # The conductor's cast to the compute is lost: the grant stays.
        self.useFixture(
            fixtures.MockPatch(
                "nova.compute.rpcapi.ComputeAPI.build_and_run_instance"
            )
        )
        server = self.post_server()
        for _ in range(60):
            if self.live_grants():
                break
            eventlet.sleep(0.25)
        [grant] = self.live_grants()
        self.assertEqual(server["id"], grant.instance_uuid)
        self.assertEqual("BUILD", self.api.get_server(server["id"])["status"])
        self.assertEqual(
            self.flavor_resources(), self.gs.granted_by_node()[("host1",) * 2]
        )
        self.assertEqual({"host1": self.flavor_resources(0)}, self.usage())
        # Before the TTL the reaper leaves a live grant alone (H3).
        self.assertEqual(0, self.gs.reap()["expired"])
        self.assertEqual(1, len(self.live_grants()))
        self.assertEqual(1, self.expire_and_reap()["expired"])
        self.assertEqual([], self.gs.grants())
        self.assertEqual({}, self.gs.granted_by_node())
        self.assertEqual([], self.gs.check(quiescent=True))
