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

        in_flight = [0, 0]  # now, most
        select = self.driver.select_destinations

        def counted(*args, **kwargs):
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
            try:
                return select(*args, **kwargs)
            finally:
                in_flight[0] -= 1

        self.driver.select_destinations = counted

        def client():
            return [self.post_server()["id"] for _ in range(self.PER_CLIENT)]

        pool = eventlet.GreenPool(self.CLIENTS)
        ids = [
            i
            for batch in pool.imap(lambda _: client(), range(self.CLIENTS))
            for i in batch
        ]
        final = {}
        for _ in range(60):
            for server in self.api.get_servers():
                if server["status"] in ("ACTIVE", "ERROR"):
                    final[server["id"]] = server
            if len(final) == len(ids):
                break
            eventlet.sleep(0.5)
        self.assertEqual(sorted(ids), sorted(final))
        # The requests really overlapped inside the scheduler driver.
        self.assertGreater(in_flight[1], 1)
        active = [s for s in final.values() if s["status"] == "ACTIVE"]
        errors = [s for s in final.values() if s["status"] == "ERROR"]
        self.assertEqual(slots, len(active))
        for server in errors:
            fault = self.api.get_server(server["id"])["fault"]
            self.assertIn("No valid host", fault["message"])
        self.assertEqual([], self.over_limit())
        self.assertEqual([], self.gs.check())
        # Placement's records: every ACTIVE server allocated, no provider
        # over its inventory, and the same usage as the books.
        self.assertEqual([], self.placement_over_capacity())
        for host in self.HOSTS:
            used = self.usage()[host]
            self.assertEqual(
                (used.vcpus, used.memory_mb, used.disk_gb),
                self.placement_usage(host),
            )
        # One TTL and one reap later nothing is left over and no host is
        # over its limit.
        self.expire_and_reap()
        self.assertEqual([], self.gs.check(quiescent=True))
        self.assertEqual([], self.over_limit())
        full = self.flavor_resources(base.SLOTS_PER_HOST)
        self.assertEqual(dict.fromkeys(self.HOSTS, full), self.usage())
