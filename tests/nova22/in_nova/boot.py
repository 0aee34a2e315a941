"""Servers booted through Nova 22's API with the grant_scheduler driver.

The computes run Nova's fake virt driver and nothing of grant_scheduler's:
their instance info (``update_instance_info`` after each spawn, casts
that ``CastAsCall`` turns into calls) reaches the driver's host manager,
which consumes the grants.
"""

from tests.nova22.in_nova import base


class TestFill(base.GrantsTestBase):
    def test_fill_exactly_then_no_valid_host(self):
        # Every grant consumed by the instance info after its spawn.
        self.fill_every_slot_then_no_valid_host()

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
        self.multi_create_one_too_many(polls=40, pause=0.5)

    def test_multi_create_that_fits_fills_every_slot(self):
        self.multi_create_every_slot(polls=40, pause=0.5)


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
