"""What an instance holds on its node, as each release counts it
(``grant_scheduler.nova.amounts``); no Nova needed."""

import types
import unittest
from unittest import mock

from grant_scheduler import api
from grant_scheduler.nova import amounts as nova_amounts
from grant_scheduler.nova import compat
from tests.unit.nova.books.test_inventory import _flavor


class TestPlacementResources(unittest.TestCase):
    def test_a_plain_flavour(self):
        self.assertEqual(
            api.Resources(2, 512, 11),
            nova_amounts.placement_resources(
                _flavor(2, 512, 10, ephemeral_gb=1)
            ),
        )

    def test_swap_is_disk_in_whole_gb(self):
        self.assertEqual(
            api.Resources(1, 128, 7 + 2),
            nova_amounts.placement_resources(_flavor(1, 128, 7, swap=1025)),
        )

    def test_a_volume_backed_server_takes_no_root_disk(self):
        self.assertEqual(
            api.Resources(1, 128, 1),
            nova_amounts.placement_resources(
                _flavor(1, 128, 10, swap=1024), is_bfv=True
            ),
        )

    def test_an_override_takes_the_flavours_place(self):
        flavor = _flavor(2, 512, 10, **{"resources:VCPU": "1"})
        self.assertEqual(
            api.Resources(1, 512, 10), nova_amounts.placement_resources(flavor)
        )

    def test_an_ironic_flavour_takes_its_class_alone(self):
        flavor = _flavor(
            4,
            4096,
            100,
            **{
                "resources:CUSTOM_BAREMETAL_GOLD": "1",
                "resources:VCPU": "0",
                "resources:MEMORY_MB": "0",
                "resources:DISK_GB": "0",
            },
        )
        self.assertEqual(
            api.Resources(CUSTOM_BAREMETAL_GOLD=1),
            nova_amounts.placement_resources(flavor),
        )

    def test_dedicated_cpus_asked_as_pcpu(self):
        flavor = _flavor(4, 512, 1, **{"resources:PCPU": "4"})
        self.assertEqual(
            api.Resources(0, 512, 1, PCPU=4),
            nova_amounts.placement_resources(flavor),
        )

    def test_dedicated_cpus_by_policy_are_pcpu_from_nova_20(self):
        pinned = _flavor(4, 512, 1, **{"hw:cpu_policy": "dedicated"})
        isolated = _flavor(
            4,
            512,
            1,
            **{
                "hw:cpu_policy": "dedicated",
                "hw:emulator_threads_policy": "isolate",
            },
        )
        with mock.patch.object(compat, "release", lambda: 22):
            self.assertEqual(
                api.Resources(0, 512, 1, PCPU=4),
                nova_amounts.placement_resources(pinned),
            )
            self.assertEqual(
                api.Resources(0, 512, 1, PCPU=5),
                nova_amounts.placement_resources(isolated),
            )
        # Before Train placement had no PCPU: pinned vCPUs are VCPU.
        with mock.patch.object(compat, "release", lambda: 19):
            self.assertEqual(
                api.Resources(4, 512, 1),
                nova_amounts.placement_resources(pinned),
            )

    def test_dedicated_cpus_by_the_images_policy_are_pcpu(self):
        flavor = _flavor(4, 512, 1)
        shared = _flavor(4, 512, 1, **{"hw:cpu_policy": "shared"})
        instance = types.SimpleNamespace(
            system_metadata={"image_hw_cpu_policy": "dedicated"}
        )
        in_placement = mock.patch.object(
            compat, "claims_in_placement", lambda: True
        )
        in_placement.start()
        self.addCleanup(in_placement.stop)
        with mock.patch.object(compat, "release", lambda: 22):
            self.assertEqual(
                api.Resources(0, 512, 1, PCPU=4),
                nova_amounts.instance_amount(flavor, instance=instance),
            )
            # The flavour's own policy comes first.
            self.assertEqual(
                api.Resources(4, 512, 1),
                nova_amounts.instance_amount(shared, instance=instance),
            )
            # Not loaded: never read lazily.
            self.assertEqual(
                api.Resources(4, 512, 1),
                nova_amounts.instance_amount(
                    flavor, instance=types.SimpleNamespace()
                ),
            )
            self.assertIn("system_metadata", nova_amounts.amount_attrs())
        with mock.patch.object(compat, "release", lambda: 19):
            self.assertEqual(
                api.Resources(4, 512, 1),
                nova_amounts.instance_amount(flavor, instance=instance),
            )
            self.assertNotIn("system_metadata", nova_amounts.amount_attrs())

    def test_a_numbered_group_is_not_the_nodes(self):
        flavor = _flavor(2, 512, 1, **{"resources1:VCPU": "1"})
        self.assertEqual(
            api.Resources(2, 512, 1), nova_amounts.placement_resources(flavor)
        )

    def test_before_placement_a_flavour_is_counted_as_its_record(self):
        flavor = _flavor(2, 512, 10, swap=2048, **{"resources:VCPU": "1"})
        with mock.patch.object(compat, "claims_in_placement", lambda: False):
            self.assertEqual(
                api.Resources(2, 512, 10), nova_amounts.instance_amount(flavor)
            )
            self.assertEqual([], nova_amounts.amount_attrs())

    def test_with_placement_a_flavour_is_counted_as_placement_counts_it(self):
        flavor = _flavor(2, 512, 10, swap=2048, **{"resources:VCPU": "1"})
        with mock.patch.object(compat, "claims_in_placement", lambda: True):
            self.assertEqual(
                api.Resources(1, 512, 12), nova_amounts.instance_amount(flavor)
            )
            with mock.patch.object(compat, "release", lambda: 19):
                self.assertEqual(["flavor"], nova_amounts.amount_attrs())
