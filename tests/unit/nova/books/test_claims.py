"""What an instance holds on its node's own provider
(``grant_scheduler.nova.books.claims``); no Nova needed."""

import unittest
from unittest import mock

from grant_scheduler import api
from grant_scheduler.nova import compat
from grant_scheduler.nova.books import claims as nova_claims
from grant_scheduler.nova.books import inventory
from tests.unit.nova.books.test_inventory import _inventory


class TestOnProvider(unittest.TestCase):
    """What placement holds for an instance on its node's own provider:
    the classes the node's inventory lacks are another provider's."""

    def state(self, capacity):
        return api.HostState(1, "cmp1", "cmp1", capacity, api.NOTHING)

    def test_a_sharing_providers_disk_is_not_the_nodes(self):
        no_disk = self.state(
            inventory.capacity_from(
                {"VCPU": _inventory(4), "MEMORY_MB": _inventory(1024)}
            )
        )
        amounts = {"u1": api.Resources(1, 512, 10)}
        with mock.patch.object(compat, "claims_in_placement", lambda: True):
            self.assertEqual(
                {"u1": api.Resources(1, 512, 0)},
                nova_claims.on_provider(no_disk, amounts),
            )
            # A node the books do not know: unchanged.
            self.assertEqual(amounts, nova_claims.on_provider(None, amounts))
        # Pinned vCPUs on a node that reports no PCPU yet are VCPU there
        # (Nova's fallback query); on a node with PCPU, PCPU.
        pinned = {"u2": api.Resources(0, 512, 0, PCPU=2)}
        vcpu_only = self.state(
            inventory.capacity_from(
                {"VCPU": _inventory(4), "MEMORY_MB": _inventory(1024)}
            )
        )
        with_pcpu = self.state(
            inventory.capacity_from(
                {"PCPU": _inventory(4), "MEMORY_MB": _inventory(1024)}
            )
        )
        with mock.patch.object(compat, "claims_in_placement", lambda: True):
            self.assertEqual(
                {"u2": api.Resources(2, 512, 0)},
                nova_claims.on_provider(vcpu_only, pinned),
            )
            self.assertEqual(
                pinned, nova_claims.on_provider(with_pcpu, pinned)
            )
        # Before placement the record's three classes are the node's.
        with mock.patch.object(compat, "claims_in_placement", lambda: False):
            self.assertEqual(
                amounts, nova_claims.on_provider(no_disk, amounts)
            )

    def test_dedicated_cpus_are_what_placement_allocated(self):
        # Nova's fallback query put u3 on VCPU although the node has PCPU:
        # placement's allocation decides; the others are never asked.
        both = api.HostState(
            1,
            "cmp1",
            "cmp1",
            inventory.capacity_from(
                {
                    "VCPU": _inventory(4),
                    "PCPU": _inventory(2),
                    "MEMORY_MB": _inventory(1024),
                }
            ),
            api.NOTHING,
            node_uuid="rp1",
        )
        amounts = {
            "u1": api.Resources(1, 128, 0),
            "u2": api.Resources(0, 128, 0, PCPU=2),
            "u3": api.Resources(0, 128, 0, PCPU=2),
        }
        asked = []

        def allocations(node_uuid):
            asked.append(node_uuid)
            return {
                "u2": api.Resources(0, 128, 0, PCPU=2),
                "u3": api.Resources(2, 128, 0),
                "elsewhere": api.Resources(1, 1, 1),
            }

        with mock.patch.object(compat, "claims_in_placement", lambda: True):
            self.assertEqual(
                {
                    "u1": api.Resources(1, 128, 0),
                    "u2": api.Resources(0, 128, 0, PCPU=2),
                    "u3": api.Resources(2, 128, 0),
                },
                nova_claims.on_provider(both, amounts, allocations),
            )
            self.assertEqual(["rp1"], asked)
            # Nothing pinned: placement is not asked.
            nova_claims.on_provider(both, {"u1": amounts["u1"]}, allocations)
            self.assertEqual(["rp1"], asked)
            # Placement not answering: Nova's records as they are.
            self.assertEqual(
                amounts,
                nova_claims.on_provider(both, amounts, lambda uuid: None),
            )
