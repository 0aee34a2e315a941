"""The books against what the release runs, after moves, restarts and lost
casts: each scenario written once, run in Nova 18-21
(``tests/nova18_21/lifecycle.py``) and in Nova 22
(``tests/nova22/in_nova/lifecycle.py``).

After each step the scheduler's periodic reconciliation runs (what every
scheduler process does every ``reconcile_interval``) and ``step`` compares
the books, identically in every release, with placement's allocations on
each host, consumer by consumer (the release keeps them for every instance
and, while a move waits, for its migration), with what the release's API
says runs there (the flavours of the servers on the host); no host may be
over its limit in the books, the books must pass their own check, and no
node may be over its capacity in Nova's own records.

No release needs a hook of its own so far: where the release's records
differ from what runs (placement keeps an evacuated instance's
allocation on its source until that compute comes back, in every release
18-22), the test says so, and that the books follow what runs.  Should a
release come to differ, the binding sets a named class attribute for it
(with a comment naming the release and why), not a copy of the scenario.

A test class mixes one of these scenario classes with the binding's
``BooksTestBase`` (``Books`` on the release's ``GrantsTestBase``, which
mixes in ``tests.nova18_22.in_nova.GrantsHelpers``).
"""

import contextlib
import time
from unittest import mock

from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects

from grant_scheduler import api
from tests.nova18_22 import in_nova

BIGGER = {"vcpu": 2, "memory_mb": 1024, "disk": 10, "ephemeral": 0}
# ``(vCPU, MB, GB)`` of in_nova.FLAVOR and of BIGGER.
SMALL = (1, 1024, 10)
CAST_WAIT = 10
"""Seconds the books are given to receive the casts of a step's last
instance info (``books_settle``)."""
BIG = (2, 1024, 10)
# The fake image service's third image, in every release.
OTHER_IMAGE = "76fa36fc-c930-4bf3-8c8a-ea2a2420deb6"


def _amounts(resources):
    return (resources.vcpus, resources.memory_mb, resources.disk_gb)


class Books:
    """The helpers and the one check of the lifecycle scenarios; mixed
    before a release's ``GrantsTestBase``."""

    # -- the books against the release -----------------------------------

    def books_by_consumer(self, host):
        """``{consumer: (vCPU, MB, GB)}`` the books claim on ``host``."""
        return {
            consumer: _amounts(amount)
            for consumer, amount in self.claimed(host).items()
        }

    def placement_by_consumer(self, host):
        """``{consumer: (VCPU, MEMORY_MB, DISK_GB)}`` placement allocates
        on ``host``."""
        allocations = self.placement_client.get(
            "/resource_providers/%s/allocations"
            % self.placement_provider(host)
        ).body["allocations"]
        return {
            consumer: tuple(
                found["resources"].get(name, 0)
                for name in ("VCPU", "MEMORY_MB", "DISK_GB")
            )
            for consumer, found in allocations.items()
        }

    def assert_books_agree(self, hosts=None):
        """On ``hosts`` (every host by default): the books equal
        placement, consumer by consumer and in total, and what the API
        says runs; no host over its limit in the books, the books' own
        check clean; with every host, no node over its capacity in Nova's
        records (which runs every compute's periodic task: a compute that
        is down is left out by naming the others).

        A boot's claim reaches the books by the compute's instance-info
        cast, which may still be on its way when the API shows the server
        ACTIVE: the books are given up to ``CAST_WAIT`` seconds to agree
        consumer by consumer before they are compared."""
        self.books_settle(hosts)
        for host in hosts or self.HOSTS:
            books = self.books_by_consumer(host)
            self.assertEqual(self.placement_by_consumer(host), books, host)
            self.assertEqual(
                self.placement_usage(host), self.books_usage(host), host
            )
            nova = self.nova_usage(host)
            if nova is not None:
                self.assertEqual(nova, self.books_usage(host), host)
        self.assertEqual([], self.over_limit())
        self.assertEqual([], self.gs.check())
        if hosts is None:
            self.assertEqual([], self.nova_over_capacity())

    def books_settle(self, hosts=None):
        """Wait (green sleeps) until the books hold placement's consumers
        on ``hosts``, at most ``CAST_WAIT`` seconds; the comparison that
        follows says what still differs."""
        deadline = time.monotonic() + CAST_WAIT
        while time.monotonic() < deadline and any(
            self.placement_by_consumer(host) != self.books_by_consumer(host)
            for host in hosts or self.HOSTS
        ):
            time.sleep(0.1)

    def step(self, hosts=None):
        """The reconciliation, then the books against the release."""
        self.reconcile()
        self.assert_books_agree(hosts)

    def boot_and_agree(self):
        server = self.boot()
        self.step()
        return server

    # -- the driver's own loop -------------------------------------------

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

    # -- server actions through the API ----------------------------------

    def action(self, server, body, status, host=in_nova.ANY_HOST):
        self.api.post_server_action(server["id"], body)
        return self.wait_for(server, status, host=host)

    def resize(self, server, flavor_id):
        return self.action(
            server, {"resize": {"flavorRef": flavor_id}}, "VERIFY_RESIZE"
        )

    def migrate(self, server):
        return self.action(server, {"migrate": None}, "VERIFY_RESIZE")

    def confirm(self, server):
        server = self.action(server, {"confirmResize": None}, "ACTIVE")
        self._wait_for_migration_status(server, ["confirmed"])
        return server

    def revert(self, server):
        server = self.action(server, {"revertResize": None}, "ACTIVE")
        self._wait_for_migration_status(server, ["reverted"])
        return server

    def live_migrate(self, server):
        self.api.post_server_action(
            server["id"],
            {"os-migrateLive": {"host": None, "block_migration": "auto"}},
        )
        self._wait_for_migration_status(server, ["completed"])
        return self.wait_for(server, "ACTIVE")

    def shelve_offload(self, server):
        self.api.post_server_action(server["id"], {"shelve": None})
        # 18 reports SHELVED_OFFLOADED (task state None) before its compute
        # has removed the instance from its resource tracker and placement
        # and cleared its host: the offload is over once the host is gone.
        return self.wait_for(server, "SHELVED_OFFLOADED", host=None)

    @contextlib.contextmanager
    def delete_unreported(self):
        """Deletes in this block reach no books: the compute's cast to the
        schedulers is lost (as around a RabbitMQ restart), and on 18-21
        the compute's delete hook does not release either (a compute
        without grant_scheduler's hooks).  Nova 22 has no ``nova.hooks``:
        there the second patch changes nothing."""
        with (
            mock.patch.object(
                self.driver.host_manager, "delete_instance_info"
            ) as lost,
            mock.patch(
                "grant_scheduler.nova.compute.hooks.release_for_delete"
            ),
        ):
            yield
            # NOTE(nova): the compute casts the delete to the schedulers
            # after the instance has left the API's list (``delete``
            # returns then): the block lasts until that cast is lost
            # here, or it could reach the books after the block.
            for _ in range(60):
                if lost.called:
                    break
                time.sleep(0.25)

    def migration_uuid(self, server):
        """The uuid of the server's newest migration."""
        migrations = objects.MigrationList.get_by_filters(
            nova_context.get_admin_context(), {"instance_uuid": server["id"]}
        )
        return max(migrations, key=lambda m: m.id).uuid

    def assert_move_waits(self, server, source, old, new):
        """During VERIFY_RESIZE to another host: the old flavour held on
        the source for the migration, the new one on the target for the
        instance, as placement holds them.  The target."""
        target = server["OS-EXT-SRV-ATTR:host"]
        self.assertNotEqual(source, target)
        self.assertEqual(
            {self.migration_uuid(server): old}, self.books_by_consumer(source)
        )
        self.assertEqual({server["id"]: new}, self.books_by_consumer(target))
        return target


class LostDelete(Books):
    def test_a_delete_whose_cast_never_came(self):
        # Nothing reported the delete: only the reconciliation releases.
        servers = [self.boot() for _ in range(2)]
        host = servers[0]["OS-EXT-SRV-ATTR:host"]
        with self.delete_unreported():
            self.delete(servers[0])
        self.assertIn(servers[0]["id"], self.claimed(host))
        self.step()
        self.assertNotIn(servers[0]["id"], self.claimed(host))
        self.assertIn(
            servers[1]["id"], self.claimed(servers[1]["OS-EXT-SRV-ATTR:host"])
        )

    def test_the_room_of_a_lost_delete_is_granted_before_reconciling(self):
        # A full cloud; one delete is lost: the books still claim the
        # server, placement and Nova have its room.  The next boot goes
        # there, as with the stock scheduler, without waiting for the
        # periodic reconciliation.
        servers = [
            self.boot()
            for _ in range(in_nova.SLOTS_PER_HOST * len(self.HOSTS))
        ]
        self.boot(expected_state="ERROR")
        with self.delete_unreported():
            self.delete(servers[0])
        host = servers[0]["OS-EXT-SRV-ATTR:host"]
        self.assertIn(servers[0]["id"], self.claimed(host))
        server = self.boot()
        self.assertEqual(host, server["OS-EXT-SRV-ATTR:host"])
        self.assertNotIn(servers[0]["id"], self.claimed(host))
        self.assertIn(server["id"], self.claimed(host))
        self.assert_books_agree()


class ResizeToAnotherHost(Books):
    def setUp(self):
        super().setUp()
        self.bigger = self.create_flavor(**BIGGER)

    def resized_away(self):
        """A server booted, then resized to the bigger flavour on another
        host and waiting there: ``(server, source, target)``, the books
        checked at each step."""
        server = self.boot_and_agree()
        source = server["OS-EXT-SRV-ATTR:host"]
        server = self.resize(server, self.bigger)
        self.reconcile()
        target = self.assert_move_waits(server, source, SMALL, BIG)
        self.assert_books_agree()
        return server, source, target

    def test_resize_confirm_and_revert(self):
        server, source, target = self.resized_away()
        server = self.confirm(server)
        self.step()
        self.assertEqual({}, self.claimed(source))
        self.assertEqual({server["id"]: BIG}, self.books_by_consumer(target))
        # Back to the small flavour, then reverted: the big one stays.
        server = self.resize(server, self.flavor_id)
        self.reconcile()
        self.assert_move_waits(server, target, BIG, SMALL)
        self.assert_books_agree()
        server = self.revert(server)
        self.step()
        self.assertEqual(target, server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual(
            {server["id"]: api.Resources(2, 1024, 10)},
            self.claimed(target),
        )
        self.assertEqual({}, self.claimed(source))

    def test_resize_to_another_host_and_revert(self):
        server, source, target = self.resized_away()
        server = self.revert(server)
        self.step()
        self.assertEqual(source, server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual({server["id"]: SMALL}, self.books_by_consumer(source))
        self.assertEqual({}, self.claimed(target))


class ResizeOnTheSameHost(Books):
    HOSTS = ("host1",)

    def setUp(self):
        super().setUp()
        self.flags(allow_resize_to_same_host=True)
        self.bigger = self.create_flavor(**BIGGER)

    def assert_move_waits_here(self, server, old, new):
        """During VERIFY_RESIZE on host1: as placement, the old flavour
        held for the migration, the new one for the instance."""
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual(
            {self.migration_uuid(server): old, server["id"]: new},
            self.books_by_consumer("host1"),
        )

    def test_resize_confirm_and_revert(self):
        server = self.boot_and_agree()
        server = self.resize(server, self.bigger)
        self.reconcile()
        self.assert_move_waits_here(server, SMALL, BIG)
        self.assert_books_agree()
        server = self.confirm(server)
        self.step()
        self.assertEqual({server["id"]: BIG}, self.books_by_consumer("host1"))
        server = self.resize(server, self.flavor_id)
        self.reconcile()
        self.assert_move_waits_here(server, BIG, SMALL)
        self.assert_books_agree()
        server = self.revert(server)
        self.step()
        self.assertEqual({server["id"]: BIG}, self.books_by_consumer("host1"))


class ColdMigrate(Books):
    def migrate_and_agree(self):
        server = self.boot_and_agree()
        source = server["OS-EXT-SRV-ATTR:host"]
        server = self.migrate(server)
        self.reconcile()
        self.assert_move_waits(server, source, SMALL, SMALL)
        self.assert_books_agree()
        return server, source

    def test_migrate_and_confirm(self):
        server, source = self.migrate_and_agree()
        target = server["OS-EXT-SRV-ATTR:host"]
        server = self.confirm(server)
        self.step()
        self.assertEqual({}, self.claimed(source))
        self.assertEqual({server["id"]: SMALL}, self.books_by_consumer(target))

    def test_migrate_and_revert(self):
        server, source = self.migrate_and_agree()
        target = server["OS-EXT-SRV-ATTR:host"]
        server = self.revert(server)
        self.step()
        self.assertEqual(source, server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual({server["id"]: SMALL}, self.books_by_consumer(source))
        self.assertEqual({}, self.claimed(target))


class LiveMigrate(Books):
    def test_live_migration(self):
        server = self.boot_and_agree()
        source = server["OS-EXT-SRV-ATTR:host"]
        [target] = set(self.HOSTS) - {source}
        server = self.live_migrate(server)
        self.assertEqual(target, server["OS-EXT-SRV-ATTR:host"])
        self.step()
        self.assertEqual({}, self.claimed(source))
        self.assertEqual({server["id"]: SMALL}, self.books_by_consumer(target))

    def test_live_migration_after_a_reverted_resize(self):
        # The instance keeps the reverted flavour in new_flavor; while it
        # is live-migrated, the target holds its current flavour.
        bigger = self.create_flavor(**BIGGER)
        server = self.boot_and_agree()
        server = self.resize(server, bigger)
        server = self.revert(server)
        self.step()
        during = []
        real = in_nova.DiskFakeDriver.live_migration

        def reconciled_midway(driver, context, instance, dest, *args, **kw):
            self.reconcile()
            during.append(
                {
                    h: (
                        self.books_by_consumer(h),
                        self.placement_by_consumer(h),
                    )
                    for h in self.HOSTS
                }
            )
            return real(driver, context, instance, dest, *args, **kw)

        with mock.patch.object(
            in_nova.DiskFakeDriver, "live_migration", reconciled_midway
        ):
            server = self.live_migrate(server)
        [usages] = during
        for host, (books, placement) in usages.items():
            self.assertEqual(placement, books, host)
        self.step()
        host = server["OS-EXT-SRV-ATTR:host"]
        self.assertEqual({server["id"]: SMALL}, self.books_by_consumer(host))


class Shelve(Books):
    def test_shelve_offload_and_unshelve(self):
        self.flags(shelved_offload_time=0)
        server = self.boot_and_agree()
        server = self.shelve_offload(server)
        self.step()
        self.assertEqual([], self.gs.claims())
        # NOTE: at the latest microversion a body names the zone; none
        # lets the scheduler choose.
        server = self.action(server, {"unshelve": None}, "ACTIVE")
        host = server["OS-EXT-SRV-ATTR:host"]
        self.step()
        self.assertEqual(1, len(self.gs.claims()))
        self.assertEqual({server["id"]: SMALL}, self.books_by_consumer(host))
        # Its grant was consumed (by the reconciliation on 18-21, where
        # unshelving is no build and the build hook does not run).
        self.assertEqual([], self.live_grants())


class Evacuate(Books):
    def test_evacuate_then_the_source_comes_back(self):
        server = self.boot_and_agree()
        source = server["OS-EXT-SRV-ATTR:host"]
        [target] = set(self.HOSTS) - {source}
        [service] = self.api.get_services(binary="nova-compute", host=source)
        self.computes[source].stop()
        self.api.put_service_force_down(service["id"], True)
        with self.allocation_requests() as calls:
            self.api.post_server_action(server["id"], {"evacuate": {}})
            self._wait_for_migration_status(server, ["done"])
            server = self.wait_for(server, "ACTIVE", host=target)
        # The scheduler's claim is Nova's own, as for the stock scheduler:
        # the consumer's allocation on the source read, then both hosts'
        # written (an evacuation ignores its source host).
        self.assertEqual(
            [("GET", server["id"], 200), ("PUT", server["id"], 204)], calls
        )
        # The source is down: its periodic tasks do not run.
        self.step(hosts=[target])
        self.assertEqual({server["id"]: SMALL}, self.books_by_consumer(target))
        # Every release (18-22) keeps the instance's allocation on the
        # source in placement until that compute comes back; the books
        # count it where it runs.
        self.assertEqual(
            {server["id"]: SMALL}, self.placement_by_consumer(source)
        )
        self.assertEqual({}, self.claimed(source))
        self.assertEqual((0, 0, 0), self.nova_usage(source))
        # The source cleans up the evacuated instance when it restarts.
        self.restart_compute_service(self.computes[source])
        self.api.put_service_force_down(service["id"], False)
        self.step()
        self.assertEqual({}, self.placement_by_consumer(source))
        self.assertEqual({server["id"]: SMALL}, self.books_by_consumer(target))


class RestartsAndReschedules(Books):
    def test_a_scheduler_restarted_between_boots(self):
        self.boot()
        self.scheduler.stop()
        self.scheduler = self.start_service("scheduler")
        slots = in_nova.SLOTS_PER_HOST * len(self.HOSTS)
        servers = [self.boot() for _ in range(slots - 1)]
        self.assertEqual(3, len(servers))
        self.boot(expected_state="ERROR")
        self.step()

    def test_a_delete_while_every_scheduler_is_down(self):
        slots = in_nova.SLOTS_PER_HOST * len(self.HOSTS)
        servers = [self.boot() for _ in range(slots)]
        # No scheduler listens: the compute's fan-out cast of the delete is
        # dropped (Nova's test transport would wait for an answer instead).
        with self.delete_unreported():
            self.delete(servers[0])
        self.scheduler.stop()
        host = servers[0]["OS-EXT-SRV-ATTR:host"]
        self.scheduler = self.start_service("scheduler")
        # The new scheduler's periodic tasks find the room.
        self.assertIn(servers[0]["id"], self.claimed(host))
        self.start_periodic_tasks()
        self.assertNotIn(servers[0]["id"], self.claimed(host))
        self.assertEqual(host, self.boot()["OS-EXT-SRV-ATTR:host"])
        self.assert_books_agree()


class RebuildAndFailedRelease(Books):
    def test_rebuild_keeps_the_books(self):
        server = self.boot()
        host = server["OS-EXT-SRV-ATTR:host"]
        before = self.claimed(host)
        server = self.action(
            server, {"rebuild": {"imageRef": OTHER_IMAGE}}, "ACTIVE"
        )
        self.assertEqual(OTHER_IMAGE, server["image"]["id"])
        self.assertEqual(host, server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual(before, self.claimed(host))
        self.step()
        self.assertEqual(before, self.claimed(host))

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
            self.delete(server)
        # The release was lost with the blip; the books still hold it.
        self.assertIn(server["id"], self.claimed(host))
        self.step()
        self.assertEqual({}, self.claimed(host))


class RescheduleToAnAlternate(Books):
    """A build that fails on its first host goes to an alternate, which
    holds no grant.  Placement protects the alternate's capacity (the
    conductor claims there, against every grant's allocation); the
    driver's loop counts the instance where it builds and withdraws the
    first host's grant, so that room comes back in seconds."""

    def test_the_first_hosts_grant_comes_back(self):
        self.start_periodic_tasks()
        spawn = in_nova.DiskFakeDriver.spawn
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

        with mock.patch.object(in_nova.DiskFakeDriver, "spawn", fails_once):
            server = self.boot()
        [first] = failed
        alternate = server["OS-EXT-SRV-ATTR:host"]
        self.assertNotEqual(first, alternate)
        self.assertLess(seen["after_claim"], 4)
        # The first host's room is back: the cloud fills as stock Nova's
        # would, with no NoValidHost while a host has room.
        slots = in_nova.SLOTS_PER_HOST * len(self.HOSTS)
        others = [self.boot() for _ in range(slots - 1)]
        self.assertEqual(
            sorted(self.HOSTS * in_nova.SLOTS_PER_HOST),
            sorted(s["OS-EXT-SRV-ATTR:host"] for s in [server] + others),
        )
        self.assertEqual([], self.placement_over_capacity())
        self.step()
