"""The books against what the release runs, after moves and lost casts.

After each step the scheduler's periodic reconciliation runs (what every
scheduler process does every ``reconcile_interval``) and the books are
compared, consumer by consumer, with placement's allocations on each
host (the release keeps them for every instance and, while a move waits,
for its migration) and with what the release's API says runs there (the
flavours of the servers on the host); no node may be over its capacity in
Nova's own records.  Where the release's placement records differ from
what runs (an evacuated instance's source, until that compute comes
back), the test says so, and that the books follow what runs.
"""

import fixtures
from nova import context as nova_context
from nova import objects

from grant_scheduler import api
from tests.nova18_21 import base

BIGGER = {"vcpu": 2, "memory_mb": 1024, "disk": 10, "ephemeral": 0}


def _amounts(resources):
    return (resources.vcpus, resources.memory_mb, resources.disk_gb)


class BooksTestBase(base.GrantsTestBase):
    def books_by_consumer(self, host):
        """``{consumer: (vCPU, MB, GB)}`` the books claim on ``host``."""
        return {
            consumer: _amounts(amount)
            for consumer, amount in self.claimed(host).items()
        }

    def placement_by_consumer(self, host):
        """``{consumer: (VCPU, MEMORY_MB, DISK_GB)}`` placement allocates
        on ``host``."""
        allocations = self.placement_api.get(
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
        """The books equal placement, consumer by consumer, and what the
        API says runs, on ``hosts`` (every host by default)."""
        for host in hosts or self.HOSTS:
            books = self.books_by_consumer(host)
            self.assertEqual(self.placement_by_consumer(host), books, host)
            nova = self.nova_usage(host)
            if nova is not None:
                self.assertEqual(nova, self.books_usage(host), host)
        self.assertEqual([], self.over_limit())
        self.assertEqual([], self.gs.check())
        if hosts is None:
            self.assertEqual([], self.nova_over_capacity())

    def action(self, server, body, status):
        self.api.post_server_action(server["id"], body)
        return self.wait_for(server, status)

    def step(self, hosts=None):
        """The reconciliation, then the books against the release."""
        self.reconcile()
        self.assert_books_agree(hosts)

    def boot_and_agree(self):
        server = self.boot()
        self.step()
        return server

    def migration_uuid(self, server):
        """The uuid of the server's newest migration."""
        migrations = objects.MigrationList.get_by_filters(
            nova_context.get_admin_context(), {"instance_uuid": server["id"]}
        )
        return max(migrations, key=lambda m: m.id).uuid

    def assert_move_waits(self, server, source, old, new):
        """During VERIFY_RESIZE: the old flavour held on the source for
        the migration, the new one on the target for the instance, as
        placement holds them."""
        target = server["OS-EXT-SRV-ATTR:host"]
        self.assertNotEqual(source, target)
        self.assertEqual(
            {self.migration_uuid(server): old}, self.books_by_consumer(source)
        )
        self.assertEqual({server["id"]: new}, self.books_by_consumer(target))
        return target


SMALL = (1, 1024, 10)
BIG = (2, 1024, 10)


class TestLostDelete(BooksTestBase):
    def test_a_delete_nothing_reported(self):
        # A compute without grant_scheduler's hooks, and its cast to the
        # schedulers lost: only the reconciliation can release.
        servers = [self.boot() for _ in range(2)]
        host = servers[0]["OS-EXT-SRV-ATTR:host"]
        self.useFixture(
            fixtures.MockPatch(
                "grant_scheduler.nova.compute.hooks.release_for_delete"
            )
        )
        self.useFixture(
            fixtures.MockPatchObject(
                self.driver.host_manager, "delete_instance_info"
            )
        )
        self.delete(servers[0])
        self.assertIn(servers[0]["id"], self.claimed(host))
        self.step()
        self.assertNotIn(servers[0]["id"], self.claimed(host))


class TestResizeToAnotherHost(BooksTestBase):
    def setUp(self):
        super().setUp()
        self.bigger = self.create_flavor(**BIGGER)

    def test_resize_confirm_and_revert(self):
        server = self.boot_and_agree()
        source = server["OS-EXT-SRV-ATTR:host"]
        server = self.action(
            server, {"resize": {"flavorRef": self.bigger}}, "VERIFY_RESIZE"
        )
        self.reconcile()
        target = self.assert_move_waits(server, source, SMALL, BIG)
        self.assert_books_agree()
        server = self.action(server, {"confirmResize": None}, "ACTIVE")
        self.step()
        self.assertEqual({}, self.claimed(source))
        # Back to the small flavour, then reverted: the big one stays.
        server = self.action(
            server, {"resize": {"flavorRef": self.flavor_id}}, "VERIFY_RESIZE"
        )
        self.reconcile()
        self.assert_move_waits(server, target, BIG, SMALL)
        self.assert_books_agree()
        server = self.action(server, {"revertResize": None}, "ACTIVE")
        self.step()
        self.assertEqual(target, server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual(
            {server["id"]: api.Resources(2, 1024, 10)},
            self.claimed(target),
        )
        self.assertEqual({}, self.claimed(source))


class TestColdMigrate(BooksTestBase):
    def migrate(self):
        server = self.boot_and_agree()
        source = server["OS-EXT-SRV-ATTR:host"]
        server = self.action(server, {"migrate": None}, "VERIFY_RESIZE")
        self.reconcile()
        self.assert_move_waits(server, source, SMALL, SMALL)
        self.assert_books_agree()
        return server, source

    def test_migrate_and_confirm(self):
        server, source = self.migrate()
        target = server["OS-EXT-SRV-ATTR:host"]
        server = self.action(server, {"confirmResize": None}, "ACTIVE")
        self.step()
        self.assertEqual({}, self.claimed(source))
        self.assertEqual({server["id"]: SMALL}, self.books_by_consumer(target))

    def test_migrate_and_revert(self):
        server, source = self.migrate()
        target = server["OS-EXT-SRV-ATTR:host"]
        server = self.action(server, {"revertResize": None}, "ACTIVE")
        self.step()
        self.assertEqual(source, server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual({server["id"]: SMALL}, self.books_by_consumer(source))
        self.assertEqual({}, self.claimed(target))


class TestLiveMigrate(BooksTestBase):
    def test_live_migration(self):
        server = self.boot_and_agree()
        source = server["OS-EXT-SRV-ATTR:host"]
        [target] = set(self.HOSTS) - {source}
        self.api.post_server_action(
            server["id"],
            {"os-migrateLive": {"host": None, "block_migration": "auto"}},
        )
        self._wait_for_migration_status(server, ["completed"])
        server = self.wait_for(server, "ACTIVE")
        self.assertEqual(target, server["OS-EXT-SRV-ATTR:host"])
        self.step()
        self.assertEqual({}, self.claimed(source))
        self.assertEqual({server["id"]: SMALL}, self.books_by_consumer(target))


class TestShelve(BooksTestBase):
    def test_shelve_offload_and_unshelve(self):
        self.flags(shelved_offload_time=0)
        server = self.boot_and_agree()
        self.api.post_server_action(server["id"], {"shelve": None})
        # 18 reports SHELVED_OFFLOADED (task state None) before its compute
        # has removed the instance from its resource tracker and placement
        # and cleared its host: the offload is over once the host is gone.
        server = self.wait_for(server, "SHELVED_OFFLOADED", host=None)
        self.step()
        self.assertEqual([], self.gs.claims())
        server = self.action(server, {"unshelve": None}, "ACTIVE")
        host = server["OS-EXT-SRV-ATTR:host"]
        self.step()
        self.assertEqual({server["id"]: SMALL}, self.books_by_consumer(host))
        # Its grant was consumed (by the reconciliation: unshelving is no
        # build, so the build hook does not run).
        self.assertEqual([], self.live_grants())


class TestEvacuate(BooksTestBase):
    def test_evacuate_then_the_source_comes_back(self):
        server = self.boot_and_agree()
        source = server["OS-EXT-SRV-ATTR:host"]
        [target] = set(self.HOSTS) - {source}
        [service] = self.admin_api.get_services(
            binary="nova-compute", host=source
        )
        self.computes[source].stop()
        self.admin_api.put_service_force_down(service["id"], True)
        self.api.post_server_action(server["id"], {"evacuate": {}})
        self._wait_for_migration_status(server, ["done"])
        server = self.wait_for(server, "ACTIVE")
        self.assertEqual(target, server["OS-EXT-SRV-ATTR:host"])
        # The source is down: its periodic tasks do not run.
        self.reconcile()
        self.assert_books_agree(hosts=[target])
        self.assertEqual({server["id"]: SMALL}, self.books_by_consumer(target))
        # 18-21: placement keeps the instance's allocation on the source
        # until that compute comes back; the books count it where it runs.
        self.assertEqual(
            {server["id"]: SMALL}, self.placement_by_consumer(source)
        )
        self.assertEqual({}, self.claimed(source))
        self.assertEqual((0, 0, 0), self.nova_usage(source))
        # The source cleans up the evacuated instance when it restarts.
        self.restart_compute_service(self.computes[source])
        self.admin_api.put_service_force_down(service["id"], False)
        self.step()
        self.assertEqual({}, self.placement_by_consumer(source))
