"""The books against what the release runs, after moves and lost casts.

After each step the scheduler's periodic reconciliation runs (what every
scheduler process does every ``reconcile_interval``) and the books are
compared with placement's usage, which the release keeps for every
instance and migration: the claims per node are what Nova runs there.
"""

import fixtures
from nova import context as nova_context

from grant_scheduler import api
from tests.nova_releases import base

BIGGER = {"vcpu": 2, "memory_mb": 1024, "disk": 10, "ephemeral": 0}


class BooksTestBase(base.GrantsTestBase):
    def reconcile(self):
        self.driver.reconcile_claims(nova_context.get_admin_context())

    def claimed(self, host):
        return {c.instance_uuid: c.resources for c in self.gs.claims(host)}

    def books_usage(self, host):
        total = sum(self.claimed(host).values(), self.flavor_resources(0))
        return (total.vcpus, total.memory_mb, total.disk_gb)

    def assert_books_agree(self):
        for host in self.HOSTS:
            self.assertEqual(
                self.placement_usage(host), self.books_usage(host), host
            )
        self.assertEqual([], self.over_limit())
        self.assertEqual([], self.gs.check())
        self.assertEqual([], self.nova_over_capacity())

    def action(self, server, body, status):
        self.api.post_server_action(server["id"], body)
        return self.wait_for(server, status)


class TestLostDelete(BooksTestBase):
    def test_a_delete_nothing_reported(self):
        # A compute without grant_scheduler's hooks, and its cast to the
        # schedulers lost: only the reconciliation can release.
        servers = [self.boot() for _ in range(2)]
        host = servers[0]["OS-EXT-SRV-ATTR:host"]
        self.useFixture(
            fixtures.MockPatch("grant_scheduler.nova.hooks.release_for_delete")
        )
        self.useFixture(
            fixtures.MockPatchObject(
                self.driver.host_manager, "delete_instance_info"
            )
        )
        self.delete(servers[0])
        self.assertIn(servers[0]["id"], self.claimed(host))
        self.reconcile()
        self.assertNotIn(servers[0]["id"], self.claimed(host))
        self.assert_books_agree()


class TestResizeToAnotherHost(BooksTestBase):
    def setUp(self):
        super().setUp()
        self.bigger = self.create_flavor(**BIGGER)

    def test_resize_confirm_and_revert(self):
        server = self.boot()
        source = server["OS-EXT-SRV-ATTR:host"]
        self.reconcile()
        self.assert_books_agree()
        server = self.action(
            server, {"resize": {"flavorRef": self.bigger}}, "VERIFY_RESIZE"
        )
        target = server["OS-EXT-SRV-ATTR:host"]
        self.assertNotEqual(source, target)
        self.reconcile()
        # As placement: the old flavour held on the source for the
        # migration, the new one on the target for the instance.
        self.assertEqual(1, len(self.claimed(source)))
        self.assertEqual(
            BIGGER["vcpu"], self.claimed(target)[server["id"]].vcpus
        )
        self.assert_books_agree()
        server = self.action(server, {"confirmResize": None}, "ACTIVE")
        self.reconcile()
        self.assertEqual({}, self.claimed(source))
        self.assert_books_agree()
        # Back to the small flavour, then reverted: the big one stays.
        server = self.action(
            server, {"resize": {"flavorRef": self.flavor_id}}, "VERIFY_RESIZE"
        )
        self.reconcile()
        self.assert_books_agree()
        server = self.action(server, {"revertResize": None}, "ACTIVE")
        self.reconcile()
        self.assertEqual(target, server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual(
            {server["id"]: api.Resources(2, 1024, 10)},
            self.claimed(target),
        )
        self.assert_books_agree()
