"""A grant on a node the caller chose (Nova's FilterScheduler): the
protocol's write on that node alone, no view read, no ranking."""

import random
import uuid

from grant_scheduler import exception
from grant_scheduler import scheduler
from grant_scheduler.resources import Capacity
from grant_scheduler.settings import Settings
from tests import base
from tests.unit import fakes
from tests.unit.test_decision import R
from tests.unit.test_decision import host


class TestGrantOn(base.TestCase):
    def setUp(self):
        super().setUp()
        self.store = fakes.FakeStore([host(1, 2048), host(2, 8192)])
        self.sched = scheduler.Scheduler(
            self.store, Settings(), rng=random.Random(1)
        )
        self.sched.view()  # the scheduler has seen the nodes once

    def grant_on(self, name, memory_mb=1024):
        request = scheduler.Request.build(
            1, memory_mb, 1, instance_uuids=[str(uuid.uuid4())]
        )
        return self.sched.grant_on(request, name, name.replace("host", "node"))

    def test_it_grants_on_the_named_node_even_when_another_is_freer(self):
        reads = len(self.store.reads)
        selection = self.grant_on("host1")
        self.assertEqual(("host1", "node1"), (selection.host, selection.node))
        [row] = self.store.grant_rows()
        self.assertEqual((selection.ticket, "host1"), (row.ticket, row.host))
        self.assertEqual(reads, len(self.store.reads), "no view was read")

    def test_what_does_not_fit_there_is_refused_and_nothing_written(self):
        self.grant_on("host1", memory_mb=2048)
        # The cache still shows host1 empty: the write decides, not the view.
        with self.assertRaises(exception.NoValidHost):
            self.grant_on("host1")
        self.assertEqual(1, len(self.store.grant_rows()))
        self.assertEqual(1, self.sched.counters.conflicts)

    def test_another_schedulers_grant_is_counted_by_the_write(self):
        self.store.take(1, R(1, 1536, 1))
        with self.assertRaises(exception.NoValidHost):
            self.grant_on("host1")
        self.grant_on("host2")

    def test_a_node_registered_after_the_last_read_is_found(self):
        self.store.register_host("host3", "node3", Capacity(R(8, 4096, 100)))
        self.assertEqual("host3", self.grant_on("host3").host)

    def test_an_unknown_node_is_refused(self):
        with self.assertRaises(exception.UnknownHost):
            self.grant_on("host9")
