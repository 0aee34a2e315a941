"""What differs between Nova releases (``grant_scheduler.nova.compat``),
told apart without Nova: by the shapes each release's interfaces have."""

import unittest
from unittest import mock

from oslo_config import cfg

from grant_scheduler import api
from grant_scheduler.nova import compat


class _Manager17:
    """Nova 17 and later: ``get_host_states_by_uuids`` takes the spec."""

    def get_host_states_by_uuids(self, context, compute_uuids, spec_obj):
        return iter([("by_uuids", compute_uuids, spec_obj)])

    def get_all_host_states(self, context):
        raise AssertionError("17 and later read by uuids")


class _Manager15:
    """Nova 15 and 16: ``get_host_states_by_uuids`` without the spec."""

    def get_host_states_by_uuids(self, context, compute_uuids):
        raise AssertionError("15-16 read every host state")

    def get_all_host_states(self, context):
        return iter([("all",)])


class TestHostStates(unittest.TestCase):
    def test_17_and_later_read_every_node_by_uuids(self):
        self.assertEqual(
            [("by_uuids", None, "spec")],
            compat.host_states(_Manager17(), "ctx", "spec"),
        )

    def test_15_and_16_read_every_host_state(self):
        self.assertEqual(
            [("all",)], compat.host_states(_Manager15(), "ctx", "spec")
        )


class TestNovaOption(unittest.TestCase):
    def conf(self, **defaults):
        conf = cfg.ConfigOpts()
        conf.register_opts(
            [cfg.IntOpt(name, default=v) for name, v in defaults.items()]
        )
        conf([])
        return conf

    def test_13_and_14_names_are_read_from_default(self):
        conf = self.conf(scheduler_max_attempts=5)
        self.assertEqual(5, compat.nova_option(conf, "max_attempts"))

    def test_15_and_later_names_come_first(self):
        conf = self.conf(scheduler_max_attempts=5)
        conf.register_opts(
            [cfg.IntOpt("max_attempts", default=2)], "scheduler"
        )
        self.assertEqual(2, compat.nova_option(conf, "max_attempts"))

    def test_an_option_no_release_has_gives_the_default(self):
        self.assertEqual(
            7, compat.nova_option(self.conf(), "host_subset_size", 7)
        )


class TestNoValidHost(unittest.TestCase):
    def test_without_nova_it_is_ours_with_novas_words(self):
        with mock.patch.object(compat, "nova_module", lambda name: None):
            found = compat.no_valid_host(rejected_by="ComputeFilter")
        self.assertIsInstance(found, api.NoValidHost)
        self.assertEqual(
            "No valid host was found. There are not enough hosts available.",
            str(found),
        )

    def test_with_a_filter_the_details_name_it_and_the_message_stays(self):
        class NovaNoValidHost(Exception):
            def __init__(self, reason):
                super().__init__("No valid host was found. %s" % reason)

        module = mock.Mock(NoValidHost=NovaNoValidHost, __name__="nova.x")
        with mock.patch.object(compat, "nova_module", lambda name: module):
            plain = compat.no_valid_host()
            named = compat.no_valid_host(rejected_by="RamFilter")
        self.assertIs(NovaNoValidHost, type(plain))
        self.assertIsInstance(named, NovaNoValidHost)
        self.assertEqual("nova.x", type(named).__module__)
        self.assertEqual(
            "No valid host was found. There are not enough hosts "
            "available. RamFilter rejected every host that had room.",
            str(named),
        )
