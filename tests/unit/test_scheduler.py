"""The scheduler's loop over an in-memory store: fall-over, fresh reads
before NoValidHost, withdrawal on every exit path."""

import random
import uuid

from oslo_db import exception as db_exc

from grant_scheduler import exception
from grant_scheduler import scheduler
from grant_scheduler.settings import Settings
from tests import base
from tests.unit import fakes
from tests.unit.test_decision import R
from tests.unit.test_decision import host


class SchedulerTestCase(base.TestCase):
    def make(self, states):
        store = fakes.FakeStore(states)
        sched = scheduler.Scheduler(store, Settings(), rng=random.Random(1))
        return store, sched

    def request(self, count=1, memory_mb=1024, **kwargs):
        return scheduler.Request.build(
            1,
            memory_mb,
            1,
            instance_uuids=[str(uuid.uuid4()) for _ in range(count)],
            **kwargs,
        )


class TestFallOver(SchedulerTestCase):
    def steal(self, store, limit):
        """Another scheduler takes each node this one tries, ``limit``
        times."""
        stolen = []

        def competitor(host_id):
            if len(stolen) < limit and host_id not in stolen:
                stolen.append(host_id)
                store.take(host_id, R(1, 1024, 1))

        store.before_grant = competitor
        return stolen

    def test_after_a_loss_grants_offer_every_candidate(self):
        # Uncontended, a grant offers its first choice only; once one was
        # lost, the next ones offer every candidate, and a node taken
        # meanwhile costs no fall-over.
        states = [host(i, 1024) for i in range(1, 9)]
        store, sched = self.make(states)
        stolen = self.steal(store, 1)
        [first] = sched.schedule(self.request())
        self.assertEqual(1, sched.counters.conflicts)
        self.assertNotEqual("host%d" % stolen[0], first.host)
        cached = {s.host_id: s for s in sched.view_cache.states()}
        self.assertEqual(1024, cached[stolen[0]].granted.memory_mb)
        stolen = self.steal(store, 1)
        [second] = sched.schedule(self.request())
        self.assertEqual(1, sched.counters.conflicts)
        self.assertNotEqual("host%d" % stolen[0], second.host)

    def test_a_contended_grant_offers_the_spare_nodes_too(self):
        settings = Settings()
        offered = settings.host_subset_size + scheduler.CONTENDED_SPARE
        store, sched = self.make([host(i, 1024) for i in range(1, 41)])
        self.steal(store, 1)
        sched.schedule(self.request())
        first, second = store.offered
        self.assertEqual(1, len(first))
        self.assertEqual(offered, len(second))
        self.assertEqual(offered, len(set(second)))
        self.assertNotIn(first[0], second)

    def test_losing_more_than_max_fallovers_reads_again_not_no_valid_host(
        self,
    ):
        # I2: before each of this scheduler's grants another scheduler takes
        # the nodes it tries, more times than max_fallovers (10).  Room
        # remains, so the request goes on with a fresh read and is placed.
        settings = Settings()
        losses = settings.max_fallovers + 2
        # The first grant offers one node, each after a loss the subset
        # and the spare ones.
        offered = settings.host_subset_size + scheduler.CONTENDED_SPARE
        stealing = 1 + (losses - 1) * offered
        states = [host(i, 1024) for i in range(1, stealing + offered + 1)]
        store, sched = self.make(states)
        stolen = self.steal(store, stealing)
        [selection] = sched.schedule(self.request())
        self.assertNotIn(selection.host, {"host%d" % h for h in stolen})
        self.assertEqual(losses, sched.counters.conflicts)
        # One fresh read of every node after max_fallovers losses in a row.
        self.assertEqual(1, sched.counters.full_reads)

    def test_no_valid_host_rests_on_a_read_after_the_last_loss(self):
        store, sched = self.make([host(1, 1024), host(2, 1024)])
        sched.view_cache.refresh()
        reads_before = len(store.reads)

        def competitor(host_id):
            store.take(host_id, R(1, 1024, 1))

        store.before_grant = competitor
        with self.assertRaises(exception.NoValidHost) as caught:
            sched.schedule(self.request())
        self.assertTrue(caught.exception.contention)
        # The answer came after a full read (since=None) made after the
        # last lost grant.
        self.assertIsNone(store.reads[-1])
        self.assertGreater(len(store.reads), reads_before + 1)

    def test_full_cloud_is_not_contention(self):
        store, sched = self.make([host(1, 512)])
        with self.assertRaises(exception.NoValidHost) as caught:
            sched.schedule(self.request())
        self.assertFalse(caught.exception.contention)
        self.assertIn("no host has room", str(caught.exception))

    def test_unknown_forced_host_is_named(self):
        store, sched = self.make([host(1)])
        with self.assertRaises(exception.NoValidHost) as caught:
            sched.schedule(self.request(force_hosts=["ghost"]))
        self.assertIn("ghost", str(caught.exception))
        self.assertIn("not known", str(caught.exception))


class TestWithdrawal(SchedulerTestCase):
    def test_multi_instance_request_is_all_or_nothing(self):
        # The view holds all three; another scheduler takes the last slot
        # before the third grant.
        store, sched = self.make([host(1, 2048), host(2, 1024)])
        competitor = []

        def compete(host_id):
            if not competitor:
                competitor.append(store.take(2, R(1, 1024, 1)))

        store.before_grant = compete
        with self.assertRaises(exception.NoValidHost):
            sched.schedule(self.request(count=3))
        self.assertEqual(2, len(store.withdrawn))
        self.assertEqual({}, store.grants)
        self.assertEqual(R(), store.states[1].granted)

    def test_request_larger_than_the_room_writes_nothing(self):
        store, sched = self.make([host(1, 2048), host(2, 1024)])
        with self.assertRaises(exception.NoValidHost) as caught:
            sched.schedule(self.request(count=4))
        self.assertFalse(caught.exception.contention)
        self.assertEqual(0, sched.counters.attempts)
        self.assertEqual(({}, []), (store.grants, store.withdrawn))

    def test_instances_of_one_request_see_each_others_grants(self):
        store, sched = self.make([host(1, 2048), host(2, 2048)])
        selections = sched.schedule(self.request(count=4))
        hosts = sorted(s.host for s in selections)
        self.assertEqual(["host1", "host1", "host2", "host2"], hosts)

    def test_grant_in_flight_is_withdrawn_when_its_commit_fails(self):
        # Issue: the database goes away as the grant commits; the grant
        # may have landed.  It is withdrawn before the error leaves, so a
        # retry by the caller finds the one-slot node free.
        store, sched = self.make([host(1, 1024)])
        store.fail_after_write = db_exc.DBConnectionError("gone")
        self.assertRaises(
            db_exc.DBConnectionError, sched.schedule, self.request()
        )
        self.assertEqual([(1, 1)], store.withdrawn)
        self.assertEqual({}, store.grants)
        store.fail_after_write = None
        [selection] = sched.schedule(self.request())
        self.assertEqual("host1", selection.host)

    def test_a_failing_withdrawal_does_not_hide_the_first_error(self):
        store, sched = self.make([host(1, 1024)])
        store.fail_after_write = db_exc.DBConnectionError("gone")

        def broken(*args):
            raise db_exc.DBConnectionError("still gone")

        store.withdraw = broken
        with self.assertRaises(db_exc.DBConnectionError) as caught:
            sched.schedule(self.request())
        self.assertIn("gone", str(caught.exception))
        self.assertNotIn("still", str(caught.exception))


class TestRequestValidation(base.TestCase):
    def test_bad_counts_and_uuids(self):
        build = scheduler.Request.build
        u = str(uuid.uuid4())
        self.assertRaises(
            exception.InvalidRequest, build, 1, 1, 1, num_instances=0
        )
        self.assertRaises(
            exception.InvalidRequest, build, 1, 1, 1, instance_uuids=[]
        )
        self.assertRaises(
            exception.InvalidRequest, build, 1, 1, 1, instance_uuids=[u, u]
        )
        self.assertRaises(
            exception.InvalidRequest, build, 1, 1, 1, instance_uuids="abc"
        )
        self.assertRaises(
            exception.InvalidRequest,
            build,
            1,
            1,
            1,
            num_instances=2,
            instance_uuids=[u],
        )
        self.assertRaises(
            exception.InvalidRequest, build, 1, 1, 1, force_hosts="cmp1"
        )
        self.assertRaises(exception.InvalidResources, build, 0, 0, 0)
        self.assertRaises(exception.InvalidResources, build, -1, 1, 1)
        self.assertEqual(
            3, len(build(1, 1, 1, num_instances=3).instance_uuids)
        )
