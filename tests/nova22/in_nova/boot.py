"""Servers booted through Nova 22's API with the grant_scheduler driver.

The computes run Nova's fake virt driver and nothing of grant_scheduler's:
their instance info (``update_instance_info`` after each spawn, casts
that ``CastAsCall`` turns into calls) reaches the driver's host manager,
which consumes the grants.
"""

import eventlet

from tests.nova22.in_nova import base


class TestFill(base.GrantsTestBase):
    def test_fill_exactly_then_no_valid_host(self):
        slots = base.SLOTS_PER_HOST * len(self.HOSTS)
        servers = [self.boot() for _ in range(slots)]
        hosts = sorted(s["OS-EXT-SRV-ATTR:host"] for s in servers)
        self.assertEqual(sorted(self.HOSTS * base.SLOTS_PER_HOST), hosts)
        # Every grant was consumed by the instance info after its spawn.
        self.assertEqual([], self.live_grants())
        full = self.flavor_resources(base.SLOTS_PER_HOST)
        self.assertEqual(dict.fromkeys(self.HOSTS, full), self.usage())
        self.assertEqual([], self.gs.check())
        server = self.boot(expected_state="ERROR")
        self.assertIn("No valid host", server["fault"]["message"])
        self.assertEqual([], self.live_grants())
        self.assertEqual([], self.over_limit())

    def test_deleted_servers_free_their_room(self):
        servers = [self.boot() for _ in range(base.SLOTS_PER_HOST * 2)]
        for server in servers[:2]:
            self._delete_server(server)
        self.assertEqual(
            self.flavor_resources(base.SLOTS_PER_HOST * 2 - 2),
            sum(self.usage().values(), self.flavor_resources(0)),
        )
        for _ in range(2):
            self.boot()
        self.boot(expected_state="ERROR")
        self.assertEqual([], self.gs.check())


class TestMultiCreate(base.GrantsTestBase):
    def test_multi_create_that_does_not_fit_leaves_no_grants(self):
        slots = base.SLOTS_PER_HOST * len(self.HOSTS)
        self.post_server(min_count=slots + 1, max_count=slots + 1)
        servers = self._wait_for_all("ERROR", slots + 1)
        self.assertEqual(slots + 1, len(servers))
        self.assertEqual([], self.gs.grants())
        self.assertEqual(
            dict.fromkeys(self.HOSTS, self.flavor_resources(0)), self.usage()
        )

    def test_multi_create_that_fits_fills_every_slot(self):
        slots = base.SLOTS_PER_HOST * len(self.HOSTS)
        self.post_server(min_count=slots, max_count=slots)
        servers = self._wait_for_all("ACTIVE", slots)
        self.assertEqual(
            sorted(self.HOSTS * base.SLOTS_PER_HOST),
            sorted(s["OS-EXT-SRV-ATTR:host"] for s in servers),
        )
        self.assertEqual([], self.live_grants())
        self.assertEqual([], self.gs.check())

    def _wait_for_all(self, status, count):
        for _ in range(40):
            servers = self.api.get_servers()
            if len(servers) == count and all(
                s["status"] == status for s in servers
            ):
                return servers
            eventlet.sleep(0.5)
        self.fail("servers did not reach %s: %s" % (status, servers))


class TestConcurrentBoots(base.GrantsTestBase):
    HOSTS = ("host1", "host2", "host3")
    CLIENTS = 4
    PER_CLIENT = 3

    def test_concurrent_api_requests(self):
        slots = base.SLOTS_PER_HOST * len(self.HOSTS)
        self.assertGreater(self.CLIENTS * self.PER_CLIENT, slots)
        # Twelve servers, those in ERROR included, are more than the
        # project's default quota of ten instances.
        self.flags(instances=-1, cores=-1, ram=-1, group="quota")
        final, most_in_flight = self.boot_concurrently(
            self.CLIENTS, self.PER_CLIENT, polls=60, pause=0.5
        )
        self.assert_concurrent_boots_placed(final, most_in_flight)
