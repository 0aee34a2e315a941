"""The books against what Nova 22 runs, after each step, with the default
compute side (the instance information casts) and the driver's periodic
reconciliation with Nova's records.

After each scenario the books are compared with Nova's own records (and
placement's usage, which Nova keeps for every instance): the claims per
node are the flavours Nova runs there.
"""

from unittest import mock

from nova import context as nova_context

from tests.nova22.in_nova import base

BIGGER = {"vcpu": 2, "memory_mb": 1024, "disk": 10, "ephemeral": 0}


class BooksTestBase(base.GrantsTestBase):
    def reconcile(self):
        """What every scheduler's periodic task does."""
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


class TestLateBuild(BooksTestBase):
    HOSTS = ("host1",)

    def test_a_build_that_found_no_room_is_counted(self):
        # Its grant expired and was reaped, and the room went to another
        # claim before the build reported: Nova runs it all the same.
        self.steal_after_scheduling()
        server = self.boot()
        self.assertIn(server["id"], self.claimed("host1"))
        self.assertEqual(["host1"], self.over_limit())
        # No grant lands on the overcommitted node.
        failed = self.boot(expected_state="ERROR")
        self.assertIn("No valid host", failed["fault"]["message"])
        # The other claim is nothing Nova runs: the reconciliation
        # releases it, and the books are what runs.
        self.reconcile()
        self.assertEqual([server["id"]], sorted(self.claimed("host1")))
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

    def test_live_migration(self):
        server = self.boot_and_agree()
        source = server["OS-EXT-SRV-ATTR:host"]
        self._live_migrate(server)
        server = self.api.get_server(server["id"])
        self.assertNotEqual(source, server["OS-EXT-SRV-ATTR:host"])
        self.reconcile()
        self.assertEqual({}, self.claimed(source))
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


class TestGrantConsumedBeforeTheSpawnEnds(BooksTestBase):
    HOSTS = ("host1",)

    def test_the_reconciliation_consumes_it_while_the_build_spawns(self):
        seen = {}
        spawn = base.DiskFakeDriver.spawn

        def slow_spawn(driver, context, instance, *args, **kwargs):
            # However long the spawn takes, Nova has set the instance's
            # host before it: the next reconciliation counts it.
            seen["before"] = {g.state for g in self.gs.grants()}
            self.reconcile()
            seen["during"] = {g.state for g in self.gs.grants()}
            seen["claimed"] = instance.uuid in self.claimed("host1")
            return spawn(driver, context, instance, *args, **kwargs)

        with mock.patch.object(base.DiskFakeDriver, "spawn", slow_spawn):
            self.boot()
        self.assertEqual({"won"}, seen["before"])
        self.assertEqual({"consumed"}, seen["during"])
        self.assertTrue(seen["claimed"])
        self.assert_books_agree()
