"""Books that follow what runs: ``correct_claims`` on every backend.

A node's claims are made equal to what runs there (Nova's records, for the
driver): a claim for each instance at its current size, a release for
each that is gone; never refused, so an instance that runs beyond the
node's limit is counted and the node is reported, not silently short.
"""

import uuid

from grant_scheduler import api
from tests import base

SLOT = api.Resources(1, 1024, 10)
BIG = api.Resources(3, 3072, 30)
ONE_SLOT = api.Capacity(SLOT)
FOUR_SLOTS = api.Capacity(api.Resources(4, 4096, 40))


def new_uuid():
    return str(uuid.uuid4())


@base.with_scenarios(base.ALL_BACKENDS)
class CorrectClaims(base.DatabaseTestCase):
    def setUp(self):
        super().setUp()
        self.gs = api.GrantScheduler(self.db)

    def state(self, host="h1"):
        [report] = [r for r in self.gs.hosts() if r.state.host == host]
        return report.state

    def claimed(self, host="h1"):
        return {c.instance_uuid: c.resources for c in self.gs.claims(host)}

    def test_a_late_build_is_counted_over_the_limit(self):
        # A's grant expired and was reaped; B took the slot; A runs too.
        self.gs.report_host("h1", "h1", ONE_SLOT)
        late, taken = new_uuid(), new_uuid()
        self.gs.claim(taken, "h1", "h1", SLOT)
        with self.assertRaises(api.ClaimRejected):
            self.gs.claim(late, "h1", "h1", SLOT)
        done = self.gs.correct_claims("h1", "h1", {late: SLOT, taken: SLOT})
        self.assertEqual((late,), done.claimed)
        self.assertEqual(SLOT + SLOT, self.state().used)
        self.assertEqual(
            {("I1", "h1")}, {(v.invariant, v.host) for v in self.gs.check()}
        )
        # No grant lands there while it is over its limit ...
        with self.assertRaises(api.NoValidHost):
            self.gs.schedule(1, 1024, 10)
        # ... nor once one of the two is gone, since the other still runs.
        self.gs.correct_claims("h1", "h1", {late: SLOT}, releases=[taken])
        self.assertEqual(SLOT, self.state().used)
        self.assertEqual([], self.gs.check())
        with self.assertRaises(api.NoValidHost):
            self.gs.schedule(1, 1024, 10)

    def test_a_new_claim_consumes_its_grant_and_withdraws_its_others(self):
        self.gs.report_host("h1", "h1", FOUR_SLOTS)
        self.gs.report_host("h2", "h2", FOUR_SLOTS)
        instance = new_uuid()
        self.gs.schedule(
            1, 1024, 10, instance_uuids=[instance], force_hosts=["h1"]
        )
        self.gs.schedule(
            1, 1024, 10, instance_uuids=[instance], force_hosts=["h2"]
        )
        self.gs.correct_claims("h1", "h1", {instance: SLOT})
        states = {g.host: g.state for g in self.gs.grants()}
        self.assertEqual({"h1": "consumed"}, states)
        self.assertEqual(api.Resources(), self.state("h1").granted)
        self.assertEqual(api.Resources(), self.state("h2").granted)
        self.assertEqual(SLOT, self.state("h1").used)
        self.gs.reap()
        self.assertEqual([], self.gs.check(quiescent=True))

    def test_a_resize_in_place_changes_the_claim(self):
        self.gs.report_host("h1", "h1", FOUR_SLOTS)
        instance = new_uuid()
        self.gs.claim(instance, "h1", "h1", SLOT)
        done = self.gs.correct_claims("h1", "h1", {instance: BIG})
        self.assertEqual((instance,), done.resized)
        self.assertEqual({instance: BIG}, self.claimed())
        self.assertEqual(BIG, self.state().used)
        # Three 1-vCPU instances do not fit beside it; one does.
        self.gs.schedule(1, 1024, 10)
        with self.assertRaises(api.NoValidHost):
            self.gs.schedule(1, 1024, 10)

    def test_a_release_of_what_is_gone(self):
        self.gs.report_host("h1", "h1", FOUR_SLOTS)
        gone, stays = new_uuid(), new_uuid()
        self.gs.claim(gone, "h1", "h1", SLOT)
        self.gs.claim(stays, "h1", "h1", SLOT)
        done = self.gs.correct_claims(
            "h1", "h1", {stays: SLOT}, releases=[gone, new_uuid()]
        )
        self.assertEqual(
            ((), (), (gone,)), (done.claimed, done.resized, done.released)
        )
        self.assertEqual({stays: SLOT}, self.claimed())
        self.assertEqual(SLOT, self.state().used)
        # Nothing to do the second time.
        again = self.gs.correct_claims(
            "h1", "h1", {stays: SLOT}, releases=[gone]
        )
        self.assertEqual(
            ((), (), ()), (again.claimed, again.resized, again.released)
        )
        self.assertEqual([], self.gs.check())

    def test_an_unknown_node_and_bad_input_are_refused(self):
        with self.assertRaises(api.UnknownHost):
            self.gs.correct_claims("nowhere", "nowhere", {new_uuid(): SLOT})
        self.gs.report_host("h1", "h1", ONE_SLOT)
        with self.assertRaises(api.InvalidRequest):
            self.gs.correct_claims("h1", "h1", {"not-a-uuid": SLOT})
        with self.assertRaises(api.InvalidResources):
            self.gs.correct_claims("h1", "h1", {new_uuid(): "one slot"})
        self.assertEqual({}, self.claimed())
