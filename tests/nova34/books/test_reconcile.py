"""One node reconciled when the books refuse a grant placement offered
(``reconcile.NodeReconciler``).

Nova's records are given here (``Records``); Nova 22's framework reads
them from its cell database in ``tests/nova22/in_nova/lifecycle.py``
(``test_the_room_of_a_lost_delete_is_granted_before_reconciling``).
"""

import uuid

from nova import objects

from grant_scheduler import api
from grant_scheduler.nova.books import reconcile
from tests import base
from tests.nova34 import fakes
from tests.nova34 import test_driver

SIZE = api.Resources(2, 4096, 40)


class Records:
    """What Nova runs on each node, as ``NovaRecords.by_node`` answers."""

    def __init__(self):
        self.running = {}
        self.reads = []
        self.building = set()
        """Instances Nova builds on no host yet."""

    def by_node(self, hosts):
        self.reads.append(sorted(hosts))
        return {
            key: dict(consumers)
            for key, consumers in self.running.items()
            if key[0] in hosts
        }

    def unplaced(self, uuids):
        return self.building & set(uuids)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class TestNodeReconciler(test_driver.DriverTestCase, base.TestCase):
    def setUp(self):
        super().setUp()
        self.cloud.add("cmp1", 4, 8192 + 512, 100)
        self.cloud.add("cmp2", 4, 8192 + 512, 100)
        self.driver.sync_hosts(self.context)
        self.records = Records()
        self.clock = Clock()
        self.reconcile = reconcile.NodeReconciler(
            lambda: self.gs, self.records, clock=self.clock
        )
        # Each node claims two servers, as Nova ran them.
        self.servers = {}
        for host in ("cmp1", "cmp2"):
            amounts = {str(uuid.uuid4()): SIZE for _ in range(2)}
            self.gs.correct_claims(host, host, amounts)
            self.records.running[(host, host)] = dict(amounts)
            self.servers[host] = sorted(amounts)

    def claimed(self, host):
        return sorted(c.instance_uuid for c in self.gs.claims(host=host))

    def delete_unseen(self, host):
        """A server deleted whose instance-info cast never came."""
        gone = self.servers[host][0]
        del self.records.running[(host, host)][gone]
        return gone

    def test_the_nodes_stale_claim_is_released_and_no_other(self):
        gone = self.delete_unseen("cmp1")
        other = self.delete_unseen("cmp2")
        self.assertTrue(self.reconcile("cmp1", "cmp1"))
        self.assertNotIn(gone, self.claimed("cmp1"))
        self.assertEqual([["cmp1"]], self.records.reads)
        # The other node waits for its own refusal, or the periodic run.
        self.assertIn(other, self.claimed("cmp2"))

    def test_a_build_not_yet_on_its_host_keeps_its_claim(self):
        # A build hook claimed it; the resource tracker has not set the
        # instance's host yet: not stale.
        building = str(uuid.uuid4())
        self.gs.correct_claims("cmp1", "cmp1", {building: SIZE})
        self.records.building.add(building)
        gone = self.delete_unseen("cmp1")
        self.assertTrue(self.reconcile("cmp1", "cmp1"))
        self.assertIn(building, self.claimed("cmp1"))
        self.assertNotIn(gone, self.claimed("cmp1"))

    def test_nothing_to_correct_is_no_retry(self):
        self.assertFalse(self.reconcile("cmp1", "cmp1"))
        self.assertEqual(self.servers["cmp1"], self.claimed("cmp1"))

    def test_a_node_is_looked_at_again_only_after_a_while(self):
        self.assertFalse(self.reconcile("cmp1", "cmp1"))
        gone = self.delete_unseen("cmp1")
        self.clock.now += reconcile.NodeReconciler.EVERY - 1
        self.assertFalse(self.reconcile("cmp1", "cmp1"))
        self.assertEqual(1, len(self.records.reads))
        self.assertIn(gone, self.claimed("cmp1"))
        # Another node is not held back by this one's last look.
        self.assertFalse(self.reconcile("cmp2", "cmp2"))
        self.assertEqual(2, len(self.records.reads))
        self.clock.now += 1
        self.assertTrue(self.reconcile("cmp1", "cmp1"))
        self.assertNotIn(gone, self.claimed("cmp1"))

    def test_nova_records_unreadable_leave_the_books_as_they_are(self):
        gone = self.delete_unseen("cmp1")

        def unreadable(hosts):
            raise RuntimeError("the cell database is away")

        self.records.by_node = unreadable
        self.assertFalse(self.reconcile("cmp1", "cmp1"))
        self.assertIn(gone, self.claimed("cmp1"))

    def test_a_node_the_books_do_not_know(self):
        self.assertFalse(self.reconcile("cmp9", "cmp9"))
        self.assertEqual(self.servers["cmp1"], self.claimed("cmp1"))


class TestMovingFlavors(base.TestCase):
    """A move's flavours as Nova's resource tracker counts them."""

    def setUp(self):
        super().setUp()
        self.small, self.big = (
            fakes.flavor(1, 512, 1),
            fakes.flavor(4, 8192, 80),
        )

    def instance(self, flavor, old=None, new=None):
        instance = fakes.instance(str(uuid.uuid4()), flavor, "cmp1")
        instance.old_flavor = old
        instance.new_flavor = new
        return instance

    def test_a_resize_holds_the_old_flavour_at_the_source(self):
        instance = self.instance(self.big, old=self.small, new=self.big)
        migration = objects.Migration(migration_type="resize")
        self.assertEqual(
            (self.small, self.big),
            reconcile._flavors(instance, migration),
        )

    def test_other_moves_after_a_reverted_resize_hold_the_flavour(self):
        # A reverted resize can leave its flavours stashed: a live
        # migration or an evacuation after it moves the instance as it is.
        instance = self.instance(self.small, old=self.small, new=self.big)
        for kind in ("live-migration", "evacuation", "migration"):
            migration = objects.Migration(migration_type=kind)
            self.assertEqual(
                (self.small, self.small),
                reconcile._flavors(instance, migration),
                kind,
            )
