"""The books against what Nova 22 runs, after each step, with the default
compute side (the instance information casts) and the driver's periodic
reconciliation with Nova's records.

After each scenario the books are compared with Nova's own records (and
placement's usage, which Nova keeps for every instance): the claims per
node are the flavours Nova runs there.
"""

import time
from unittest import mock

from nova import context as nova_context
from nova import exception as nova_exception

from grant_scheduler import api
from tests.nova22.in_nova import base
from tests.nova22.in_nova.scheduler import test_filter_scheduler as citizen

BIGGER = {"vcpu": 2, "memory_mb": 1024, "disk": 10, "ephemeral": 0}


class BooksTestBase(base.GrantsTestBase):
    def start_periodic_tasks(self):
        """What Nova's service does at start ([DEFAULT] periodic_enable,
        which Nova's test framework turns off): the scheduler manager's
        periodic tasks, the driver's among them, which start its loop
        following live grants."""
        self.scheduler.manager.periodic_tasks(nova_context.get_admin_context())
        self.addCleanup(self.driver.stop)

    def wait_until(self, condition, timeout=60):
        """Seconds until ``condition()`` held (green sleeps, so Nova's
        services and the driver's loop run meanwhile)."""
        start = time.monotonic()
        while not condition():
            if time.monotonic() - start > timeout:
                self.fail("still not true after %s s" % timeout)
            time.sleep(0.1)
        return time.monotonic() - start

    def assert_books_agree(self):
        for host in self.HOSTS:
            books = self.books_usage(host)
            self.assertEqual(self.placement_usage(host), books, host)
            nova = self.nova_usage(host)
            if nova is not None:
                self.assertEqual(nova, books, host)
        self.assertEqual([], self.over_limit())
        self.assertEqual([], self.gs.check())


class TestLateBuild(BooksTestBase):
    HOSTS = ("host1",)

    def test_a_build_that_found_no_room_is_counted(self):
        # Its grant expired and was reaped, and the room went to another
        # claim before the build reported: Nova runs it all the same.
        self.steal_after_scheduling()
        server = self.boot()
        # NOTE: the build hook counts it as the build ends, which may be
        # just after the API shows the server ACTIVE.
        self.wait_until(lambda: server["id"] in self.claimed("host1"))
        self.assertEqual(["host1"], self.over_limit())
        [stranger] = set(self.claimed("host1")) - {server["id"]}
        # The other claim is nothing Nova runs.  The next boot, which
        # placement has room for there, is refused by the books at first;
        # that node is then reconciled with Nova's records, which releases
        # the stranger, and the grant is taken, as the stock scheduler
        # places it.
        del self.driver.select_destinations  # no more stealing
        again = self.boot()
        self.assertEqual("host1", again["OS-EXT-SRV-ATTR:host"])
        self.assertEqual(
            sorted([server["id"], again["id"]]), sorted(self.claimed("host1"))
        )
        self.assertNotIn(stranger, self.claimed("host1"))
        self.assert_books_agree()


class TestLostDelete(BooksTestBase):
    def test_a_delete_whose_cast_never_came(self):
        servers = [self.boot() for _ in range(2)]
        manager = self.driver.host_manager
        with mock.patch.object(manager, "delete_instance_info"):
            self._delete_server(servers[0])
        host = servers[0]["OS-EXT-SRV-ATTR:host"]
        self.assertIn(servers[0]["id"], self.claimed(host))
        self.reconcile()
        self.assertNotIn(servers[0]["id"], self.claimed(host))
        self.assert_books_agree()

    def test_the_room_of_a_lost_delete_is_granted_before_reconciling(self):
        # A full cloud; one delete's cast is lost (as around a RabbitMQ
        # restart): the books still claim the server, placement and Nova
        # have its room.  The next boot goes there, as with the stock
        # scheduler, without waiting for the periodic reconciliation.
        servers = [self.boot() for _ in range(base.SLOTS_PER_HOST * 2)]
        self.boot(expected_state="ERROR")
        with mock.patch.object(
            self.driver.host_manager, "delete_instance_info"
        ):
            self._delete_server(servers[0])
        host = servers[0]["OS-EXT-SRV-ATTR:host"]
        self.assertIn(servers[0]["id"], self.claimed(host))
        server = self.boot()
        self.assertEqual(host, server["OS-EXT-SRV-ATTR:host"])
        self.assertNotIn(servers[0]["id"], self.claimed(host))
        self.assertIn(server["id"], self.claimed(host))
        self.assert_books_agree()


class TestResizeOnTheSameHost(BooksTestBase):
    HOSTS = ("host1",)

    def setUp(self):
        super().setUp()
        self.flags(allow_resize_to_same_host=True)
        self.bigger = self._create_flavor(**BIGGER)

    def test_resize_confirm_and_revert(self):
        server = self.boot()
        self.reconcile()
        self.assert_books_agree()
        server = self._resize_server(server, self.bigger)
        self.reconcile()
        # As placement: the old flavour held for the migration, the new
        # one for the instance.
        self.assertEqual(2, len(self.claimed("host1")))
        self.assert_books_agree()
        self._confirm_resize(server)
        self.reconcile()
        [amount] = self.claimed("host1").values()
        self.assertEqual(BIGGER["vcpu"], amount.vcpus)
        self.assert_books_agree()
        server = self._resize_server(server, self.flavor_id)
        self._revert_resize(server)
        self.reconcile()
        [amount] = self.claimed("host1").values()
        self.assertEqual(BIGGER["vcpu"], amount.vcpus)
        self.assert_books_agree()


class TestColdMigrate(BooksTestBase):
    def test_migrate_and_confirm(self):
        server = self.boot()
        source = server["OS-EXT-SRV-ATTR:host"]
        server = self._migrate_server(server)
        self.assertNotEqual(source, server["OS-EXT-SRV-ATTR:host"])
        self.reconcile()
        self.assert_books_agree()
        self._confirm_resize(server)
        self.reconcile()
        self.assertEqual({}, self.claimed(source))
        self.assert_books_agree()


class TestMoves(BooksTestBase):
    def boot_and_agree(self):
        server = self.boot()
        self.reconcile()
        self.assert_books_agree()
        return server

    def test_resize_to_another_host_and_revert(self):
        bigger = self._create_flavor(**BIGGER)
        server = self.boot_and_agree()
        source = server["OS-EXT-SRV-ATTR:host"]
        server = self._resize_server(server, bigger)
        self.assertNotEqual(source, server["OS-EXT-SRV-ATTR:host"])
        self.reconcile()
        self.assert_books_agree()
        self._revert_resize(server)
        self.reconcile()
        self.assertEqual([server["id"]], list(self.claimed(source)))
        self.assert_books_agree()

    def test_resize_to_another_host_and_confirm(self):
        bigger = self._create_flavor(**BIGGER)
        server = self.boot_and_agree()
        source = server["OS-EXT-SRV-ATTR:host"]
        server = self._resize_server(server, bigger)
        self.reconcile()
        self.assert_books_agree()
        self._confirm_resize(server)
        self.reconcile()
        self.assertEqual({}, self.claimed(source))
        [amount] = self.claimed(server["OS-EXT-SRV-ATTR:host"]).values()
        self.assertEqual(BIGGER["vcpu"], amount.vcpus)
        self.assert_books_agree()

    def test_live_migration(self):
        server = self.boot_and_agree()
        source = server["OS-EXT-SRV-ATTR:host"]
        self._live_migrate(server)
        server = self.api.get_server(server["id"])
        self.assertNotEqual(source, server["OS-EXT-SRV-ATTR:host"])
        self.reconcile()
        self.assertEqual({}, self.claimed(source))
        self.assert_books_agree()

    def test_live_migration_after_a_reverted_resize(self):
        # The instance keeps the reverted flavour in new_flavor; while it
        # is live-migrated, the target holds its current flavour.
        bigger = self._create_flavor(**BIGGER)
        server = self.boot_and_agree()
        server = self._resize_server(server, bigger)
        server = self._revert_resize(server)
        self.reconcile()
        self.assert_books_agree()
        during = []
        real = base.DiskFakeDriver.live_migration

        def reconciled_midway(driver, context, instance, dest, *args, **kw):
            self.reconcile()
            during.append(
                {
                    h: (self.books_usage(h), self.placement_usage(h))
                    for h in self.HOSTS
                }
            )
            return real(driver, context, instance, dest, *args, **kw)

        with mock.patch.object(
            base.DiskFakeDriver, "live_migration", reconciled_midway
        ):
            self._live_migrate(server)
        [usages] = during
        for host, (books, placement) in usages.items():
            self.assertEqual(placement, books, host)
        self.reconcile()
        self.assert_books_agree()

    def test_shelve_offload_and_unshelve(self):
        self.flags(shelved_offload_time=0)
        server = self.boot_and_agree()
        self._shelve_server(server)
        self.reconcile()
        self.assertEqual([], self.gs.claims())
        self.assert_books_agree()
        # NOTE: at the latest microversion a body names the zone; none
        # lets the scheduler choose.
        self.api.post_server_action(server["id"], {"unshelve": None})
        self._wait_for_state_change(server, "ACTIVE")
        self.reconcile()
        self.assertEqual(1, len(self.gs.claims()))
        self.assert_books_agree()

    def test_evacuate_then_the_source_comes_back(self):
        server = self.boot_and_agree()
        source = server["OS-EXT-SRV-ATTR:host"]
        [dest] = set(self.HOSTS) - {source}
        [service] = self.api.get_services(binary="nova-compute", host=source)
        self.computes[source].stop()
        self.api.put_service_force_down(service["id"], True)
        self.api.post_server_action(server["id"], {"evacuate": {}})
        self._wait_for_server_parameter(
            server, {"OS-EXT-SRV-ATTR:host": dest, "status": "ACTIVE"}
        )
        self.reconcile()
        self.assertIn(server["id"], self.claimed(dest))
        self.assertEqual(self.placement_usage(dest), self.books_usage(dest))
        # The source cleans up the evacuated instance when it restarts.
        self.restart_compute_service(self.computes[source])
        self.api.put_service_force_down(service["id"], False)
        self.reconcile()
        self.assert_books_agree()


class TestRestartsAndReschedules(BooksTestBase):
    def test_a_scheduler_restarted_between_boots(self):
        self.boot()
        self.scheduler.stop()
        self.scheduler = self.start_service("scheduler")
        servers = [self.boot() for _ in range(base.SLOTS_PER_HOST * 2 - 1)]
        self.assertEqual(3, len(servers))
        self.boot(expected_state="ERROR")
        self.reconcile()
        self.assert_books_agree()

    def test_a_delete_while_every_scheduler_is_down(self):
        servers = [self.boot() for _ in range(base.SLOTS_PER_HOST * 2)]
        # No scheduler listens: the compute's fan-out cast of the delete is
        # dropped (Nova's test transport would wait for an answer instead).
        with mock.patch.object(
            self.driver.host_manager, "delete_instance_info"
        ):
            self._delete_server(servers[0])
        self.scheduler.stop()
        host = servers[0]["OS-EXT-SRV-ATTR:host"]
        self.scheduler = self.start_service("scheduler")
        # The new scheduler's periodic tasks find the room.
        self.assertIn(servers[0]["id"], self.claimed(host))
        self.scheduler.manager.periodic_tasks(nova_context.get_admin_context())
        self.addCleanup(self.driver.stop)
        self.assertNotIn(servers[0]["id"], self.claimed(host))
        self.assertEqual(host, self.boot()["OS-EXT-SRV-ATTR:host"])
        self.assert_books_agree()


class TestRescheduleToAnAlternate(BooksTestBase):
    """A build that fails on its first host goes to an alternate, which
    holds no grant.  Placement protects the alternate's capacity (the
    conductor claims there, against every grant's allocation); the
    driver's loop counts the instance where it builds and withdraws the
    first host's grant, so that room comes back in seconds."""

    def test_the_first_hosts_grant_comes_back(self):
        self.start_periodic_tasks()
        spawn = base.DiskFakeDriver.spawn
        failed = []
        seen = {}

        def fails_once(driver, context, instance, *args, **kwargs):
            if not failed:
                failed.append(instance.host)
                raise nova_exception.ComputeResourcesUnavailable(
                    reason="the hypervisor failed this build"
                )
            # On the alternate, before its spawn: counted here, and the
            # first host's grant gone.
            seen["after_claim"] = self.wait_until(
                lambda: (
                    not self.live_grants()
                    and instance.uuid in self.claimed(instance.host)
                )
            )
            return spawn(driver, context, instance, *args, **kwargs)

        with mock.patch.object(base.DiskFakeDriver, "spawn", fails_once):
            server = self.boot()
        [first] = failed
        alternate = server["OS-EXT-SRV-ATTR:host"]
        self.assertNotEqual(first, alternate)
        self.assertLess(seen["after_claim"], 4)
        # The first host's room is back: the cloud fills as stock Nova's
        # would, with no NoValidHost while a host has room.
        others = [self.boot() for _ in range(base.SLOTS_PER_HOST * 2 - 1)]
        self.assertEqual(
            sorted(self.HOSTS * base.SLOTS_PER_HOST),
            sorted(s["OS-EXT-SRV-ATTR:host"] for s in [server] + others),
        )
        self.assertEqual([], self.placement_over_capacity())
        self.reconcile()
        self.assert_books_agree()


class TestRebuildAndFailedRelease(BooksTestBase):
    def test_rebuild_keeps_the_books(self):
        server = self.boot()
        host = server["OS-EXT-SRV-ATTR:host"]
        before = self.claimed(host)
        server = self._rebuild_server(server, citizen.OTHER_IMAGE)
        self.assertEqual(host, server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual(before, self.claimed(host))
        self.reconcile()
        self.assertEqual(before, self.claimed(host))
        self.assert_books_agree()

    def test_a_release_that_failed_once(self):
        server = self.boot()
        host = server["OS-EXT-SRV-ATTR:host"]
        with mock.patch.object(
            type(self.gs),
            "release",
            side_effect=api.DatabaseUnavailable(
                url="mysql://", reason="the database blinked"
            ),
        ):
            self._delete_server(server)
        # The release was lost with the blip; the books still hold it.
        self.assertIn(server["id"], self.claimed(host))
        self.reconcile()
        self.assertEqual({}, self.claimed(host))
        self.assert_books_agree()
