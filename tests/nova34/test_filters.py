"""``GrantsFilter`` run by Nova's own filter handler, as Nova 34 would."""

from unittest import mock

from nova.scheduler import filters

from grant_scheduler import api
from grant_scheduler.nova import amounts as nova_amounts
from grant_scheduler.nova import filters as gs_filters
from tests import base
from tests.nova34 import base as nova_base
from tests.nova34 import fakes

FILTER_PATH = "grant_scheduler.nova.filters.GrantsFilter"
RESERVED_MB = 512


class TestGrantsFilter(nova_base.NovaTestCase, base.TestCase):
    def setUp(self):
        super().setUp()
        self.assertEqual(RESERVED_MB, nova_base.CONF.reserved_host_memory_mb)
        handler = filters.HostFilterHandler()
        [cls] = handler.get_matching_classes([FILTER_PATH])
        self.assertIs(gs_filters.GrantsFilter, cls)
        self.handler = handler
        self.grants_filter = cls()
        for name, ram in (("a", 8192), ("b", 8192), ("c", 4096)):
            self.cloud.add(name, 4, ram + RESERVED_MB, 100)
            self.gs.report_host(
                name, name, api.Capacity(api.Resources(4, ram, 100))
            )
        self.manager = fakes.HostManager(self.cloud, mock.Mock())

    def host_states(self):
        return self.manager.host_states(fakes.context())

    def passing(self, spec_or_flavor, host_states=None):
        spec = spec_or_flavor
        if not hasattr(spec, "flavor"):
            spec = fakes.request_spec(spec_or_flavor)
        hosts = self.handler.get_filtered_objects(
            [self.grants_filter], host_states or self.host_states(), spec, 0
        )
        return sorted(h.host for h in hosts)

    def test_promised_capacity_is_taken(self):
        flavor = fakes.flavor(1, 4096, 10)
        self.assertEqual(["a", "b", "c"], self.passing(flavor))
        # Other schedulers promise 6 GB on "a" and all of "c": Nova's own
        # records still show them empty.
        self.gs.schedule(1, 6144, 10, force_hosts=["a"])
        self.gs.schedule(1, 4096, 10, force_hosts=["c"])
        self.assertEqual(["b"], self.passing(flavor))
        self.assertEqual(["a", "b"], self.passing(fakes.flavor(1, 2048, 10)))

    def test_reserved_memory_is_not_free(self):
        self.assertEqual(
            ["a", "b", "c"], self.passing(fakes.flavor(1, 4096, 1))
        )
        self.assertEqual(["a", "b"], self.passing(fakes.flavor(1, 4097, 1)))

    def test_allocation_ratio_counts(self):
        self.cloud.nodes["c"].ram_allocation_ratio = 2.0
        self.gs.schedule(1, 4096, 10, force_hosts=["c"])
        self.assertIn("c", self.passing(fakes.flavor(1, 4096, 10)))
        self.assertNotIn("c", self.passing(fakes.flavor(1, 4097, 10)))

    def test_what_novas_scheduler_consumed_counts(self):
        # Nova's own FilterScheduler consumes each chosen host in memory
        # for the next instance of a multi-create.
        flavor = fakes.flavor(1, 4096, 10)
        spec = fakes.request_spec(flavor, num_instances=2)
        states = self.host_states()
        [c] = [s for s in states if s.host == "c"]
        c.consume_from_request(spec)
        self.assertEqual(["a", "b"], self.passing(spec, states))

    def test_volume_backed_root_disk_is_not_local(self):
        flavor = fakes.flavor(1, 1024, 500)
        self.assertEqual([], self.passing(flavor))
        spec = fakes.request_spec(flavor, is_bfv=True)
        self.assertEqual(["a", "b", "c"], self.passing(spec))

    def test_grants_read_once_per_request(self):
        gs = self.grants_filter._lazy.get()
        with mock.patch.object(
            gs, "granted_by_node", wraps=gs.granted_by_node
        ) as read:
            self.passing(fakes.flavor(1, 1024, 1))
            self.assertEqual(1, read.call_count)
            self.passing(fakes.flavor(1, 1024, 1))
            self.assertEqual(2, read.call_count)

    def test_free_after_grants(self):
        [state] = [s for s in self.host_states() if s.host == "a"]
        reserved = nova_amounts.reserved_from_conf(nova_base.CONF)
        free = gs_filters.free_after_grants(
            state, api.Resources(1, 1000, 10), reserved
        )
        self.assertEqual(api.Resources(3, 7192, 90), free)
