"""Nova's compute node and service rows read as they change
(``computes.CellComputes``), on Nova's own tables and objects.

Each test writes the rows as Nova's processes do (each stamping with its
own clock, whole seconds on MySQL, soft deletes that leave ``updated_at``
alone) and compares what the reader keeps with a read of every row.  The
clocks are the test's: a write "stamped before the previous read and
committed after it" is a row written after that read with an earlier
stamp, which is what the reader sees of it.
"""

import datetime
import random
import unittest
import uuid

import sqlalchemy as sa
from nova import context as nova_context
from nova.db.main import models
from sqlalchemy import pool

from grant_scheduler.nova.scheduler import computes
from tests.nova34 import base

EPOCH = datetime.datetime(2026, 1, 1, 12, 0, 0)
RESYNC = 60.0
OVERLAP = 2.0
REPORT = 10.0
SECOND = datetime.timedelta(seconds=1)


class Cell:
    """A cell database with Nova's two tables, written as Nova writes
    them, and a clock shared by its writers and the reader."""

    def __init__(self):
        self.engine = sa.create_engine(
            "sqlite://",
            poolclass=pool.StaticPool,
            connect_args={"check_same_thread": False},
        )
        models.Service.__table__.create(self.engine)
        models.ComputeNode.__table__.create(self.engine)
        self.elapsed = 0.0
        self._ids = 0

    # -- the clocks -------------------------------------------------------

    def utcnow(self):
        return EPOCH + datetime.timedelta(seconds=self.elapsed)

    def monotonic(self):
        return self.elapsed

    def tick(self, seconds):
        self.elapsed += seconds

    def stamp(self, behind=0.0, whole=False):
        """A writer's stamp: its clock ``behind`` seconds behind, in
        whole seconds as MySQL keeps them when ``whole``."""
        stamp = self.utcnow() - datetime.timedelta(seconds=behind)
        return stamp.replace(microsecond=0) if whole else stamp

    # -- Nova's writes ----------------------------------------------------

    def _run(self, statement):
        with self.engine.begin() as conn:
            return conn.execute(statement)

    def add_service(self, host, stamp=None):
        stamp = stamp or self.stamp()
        self._ids += 1
        table = models.Service.__table__
        self._run(
            table.insert().values(
                id=self._ids,
                uuid=str(uuid.uuid4()),
                host=host,
                binary="nova-compute",
                topic="compute",
                report_count=0,
                disabled=False,
                forced_down=False,
                version=61,
                created_at=stamp,
                last_seen_up=stamp,
                deleted=0,
            )
        )
        return self._ids

    def add_node(self, host, stamp=None, service_id=None):
        stamp = stamp or self.stamp()
        self._ids += 1
        table = models.ComputeNode.__table__
        self._run(
            table.insert().values(
                id=self._ids,
                uuid=str(uuid.uuid4()),
                service_id=service_id,
                host=host,
                hypervisor_hostname=host,
                vcpus=16,
                memory_mb=32768,
                local_gb=400,
                vcpus_used=0,
                memory_mb_used=512,
                local_gb_used=0,
                free_ram_mb=32256,
                free_disk_gb=400,
                hypervisor_type="fake",
                hypervisor_version=1,
                cpu_info="{}",
                running_vms=0,
                cpu_allocation_ratio=4.0,
                ram_allocation_ratio=1.0,
                disk_allocation_ratio=1.0,
                created_at=stamp,
                deleted=0,
            )
        )
        return self._ids

    def use(self, node_id, vcpus, stamp):
        """The resource tracker saves a node's usage."""
        table = models.ComputeNode.__table__
        self._run(
            table.update()
            .where(table.c.id == node_id)
            .values(vcpus_used=vcpus, updated_at=stamp)
        )

    def soft_delete(self, table, row_id, stamp):
        """As oslo.db's soft_delete: ``updated_at`` left as it was."""
        self._run(
            table.update()
            .where(table.c.id == row_id)
            .values(deleted=row_id, deleted_at=stamp)
        )

    def hard_delete(self, table, row_id):
        self._run(table.delete().where(table.c.id == row_id))

    def heartbeat(self, service_id, stamp):
        table = models.Service.__table__
        self._run(
            table.update()
            .where(table.c.id == service_id)
            .values(
                report_count=table.c.report_count + 1,
                last_seen_up=stamp,
                updated_at=stamp,
            )
        )

    def set_service(self, service_id, stamp, **values):
        """The API disables, enables or forces down a service."""
        table = models.Service.__table__
        self._run(
            table.update()
            .where(table.c.id == service_id)
            .values(updated_at=stamp, **values)
        )

    # -- the truth --------------------------------------------------------

    def rows(self, table):
        """``{id: row}`` of every row not deleted, as Nova reads them."""
        with self.engine.connect() as conn:
            query = table.select().where(table.c.deleted == 0)
            if table is models.Service.__table__:
                query = query.where(table.c.binary == "nova-compute")
            return {
                r._mapping["id"]: dict(r._mapping) for r in conn.execute(query)
            }


def _naive(value):
    """Nova's objects give stamps in UTC; its rows naive."""
    if isinstance(value, datetime.datetime):
        return value.replace(tzinfo=None)
    return value


NODES = models.ComputeNode.__table__
SERVICES = models.Service.__table__


class ReaderTestCase(unittest.TestCase):
    def setUp(self):
        base.parse_nova_conf()
        self.cell = Cell()
        self.context = nova_context.RequestContext("user", "project")
        self.reader = self.make_reader()

    def make_reader(self, overlap=OVERLAP, resync=RESYNC):
        return computes.CellComputes(
            computes.Timing(resync, overlap, REPORT),
            engine=lambda cctxt: self.cell.engine,
            clock=self.cell.monotonic,
            utcnow=self.cell.utcnow,
        )

    def read(self, reader=None):
        reader = self.reader if reader is None else reader
        nodes, services = reader.read(self.context)
        return {n.id: n for n in nodes}, {s.id: s for s in services.values()}

    def missed(self, reader=None):
        """What the reader's nodes and services' states differ in from
        every row read now: ``[(table, id, field)]``."""
        nodes, services = self.read(reader)
        wrong = []
        truth = self.cell.rows(NODES)
        if set(truth) != set(nodes):
            wrong.append(("nodes", sorted(set(truth) ^ set(nodes)), "rows"))
        for node_id in set(truth) & set(nodes):
            for field in ("vcpus_used", "updated_at"):
                if truth[node_id][field] != _naive(
                    getattr(nodes[node_id], field)
                ):
                    wrong.append(("nodes", node_id, field))
        truth = self.cell.rows(SERVICES)
        if set(truth) != set(services):
            wrong.append(("services", sorted(set(truth) ^ set(services)), ""))
        for service_id in set(truth) & set(services):
            for field in ("disabled", "forced_down"):
                if truth[service_id][field] != getattr(
                    services[service_id], field
                ):
                    wrong.append(("services", service_id, field))
        return wrong


class TestWhatIsRead(ReaderTestCase):
    def setUp(self):
        super().setUp()
        self.services = [self.cell.add_service("h%d" % i) for i in range(20)]
        self.nodes = [
            self.cell.add_node("h%d" % i, service_id=s)
            for i, s in enumerate(self.services)
        ]
        # Half a minute on, each service has heartbeat (with the database
        # servicegroup driver, Nova's default).
        self.cell.tick(30)
        for service in self.services:
            self.cell.heartbeat(service, self.cell.stamp())
        self.cell.use(self.nodes[0], 0, self.cell.stamp())
        self.first = self.read()
        self.cell.tick(5)

    def test_the_first_read_reads_every_row(self):
        nodes, services = self.first
        self.assertEqual(set(self.nodes), set(nodes))
        self.assertEqual(set(self.services), set(services))
        self.assertEqual((1, 1), self.reader.full_reads)
        self.assertEqual(40, self.reader.rows_read)

    def test_then_only_the_rows_that_changed(self):
        self.read()
        read, stamps = self.reader.rows_read, self.reader.stamps_read
        self.cell.use(self.nodes[3], 5, self.cell.stamp())
        self.cell.tick(3)
        nodes, _services = self.read()
        self.assertEqual(5, nodes[self.nodes[3]].vcpus_used)
        # The stamps of the row that changed and of node 0's (the newest
        # stamp the last read found, and so within the overlap of the
        # mark); node 0 is settled and stamped alike: only the row that
        # changed is read whole.
        self.assertEqual(2, self.reader.stamps_read - stamps)
        self.assertEqual(1, self.reader.rows_read - read)
        self.assertEqual((1, 1), self.reader.full_reads)

    def test_a_table_whose_stamps_stop_moving_is_not_read_again(self):
        # Every row written in the same second, and nothing since (a
        # cloud's computes deployed at once whose services report
        # through memcache): the mark stays at that second, so every
        # read selects every row; once settled, they are read for their
        # stamps alone.
        cell = self.cell = Cell()
        stamp = cell.stamp(whole=True)
        services = [
            cell.add_service("h%d" % i, stamp=stamp) for i in range(30)
        ]
        for i, service in enumerate(services):
            cell.add_node("h%d" % i, stamp=stamp, service_id=service)
        reader = self.make_reader()
        self.read(reader)
        cell.tick(0.5)
        self.read(reader)
        cell.tick(OVERLAP + 1)
        self.read(reader)
        read = reader.rows_read
        for _ in range(5):
            cell.tick(0.5)
            nodes, services_read = self.read(reader)
        self.assertEqual(read, reader.rows_read)
        self.assertEqual(30, len(nodes))
        self.assertEqual(30, len(services_read))
        self.assertEqual([], self.missed(reader))
        self.assertEqual((1, 1), reader.full_reads)

    def test_a_row_rewritten_within_its_second_is_seen(self):
        # Read while its stamp's second is still open (not settled), then
        # written again in that same second: the stamps alone do not
        # tell, so it is read whole again.
        self.cell.tick(0.6 - self.cell.elapsed % 1)
        stamp = self.cell.stamp(whole=True)
        self.cell.use(self.nodes[5], 2, stamp)
        self.cell.tick(0.1)
        nodes, _services = self.read()
        self.assertEqual(2, nodes[self.nodes[5]].vcpus_used)
        self.cell.tick(0.1)
        self.cell.use(self.nodes[5], 6, stamp)
        self.cell.tick(OVERLAP + 1)
        nodes, _services = self.read()
        self.assertEqual(6, nodes[self.nodes[5]].vcpus_used)
        self.assertEqual([], self.missed())

    def test_the_loop_reads_a_table_whole_before_it_falls_due(self):
        # setUp's read (at 30 s) read every row: the services' next such
        # read falls due at 40 s (report_interval), the nodes' at 90 s.
        self.cell.tick(39.5 - self.cell.elapsed)
        self.assertEqual(1, self.reader.read_due(self.context, 1.0))
        self.assertEqual((1, 2), self.reader.full_reads)
        # At 40.1 s a request would have read every service itself.
        self.cell.tick(0.6)
        self.assertEqual(0, self.reader.read_due(self.context, 1.0))
        self.read()
        self.assertEqual((1, 2), self.reader.full_reads)
        self.cell.use(self.nodes[2], 7, self.cell.stamp())
        self.cell.tick(89.2 - self.cell.elapsed)
        self.assertEqual(2, self.reader.read_due(self.context, 1.0))
        self.assertEqual((2, 3), self.reader.full_reads)
        self.cell.tick(1.0)
        self.assertEqual([], self.missed())
        self.assertEqual((2, 3), self.reader.full_reads)

    def test_a_request_builds_nothing_per_node_while_nothing_changes(self):
        # At 10,000 nodes a list and a map of every row made per request
        # cost more than reading what changed: they are kept until a row
        # changes.
        nodes, services = self.reader.read(self.context)
        again, services_again = self.reader.read(self.context)
        self.assertIs(nodes, again)
        self.assertIs(services, services_again)
        self.assertEqual({"h%d" % i for i in range(20)}, set(services_again))
        self.cell.use(self.nodes[3], 5, self.cell.stamp())
        changed, services_again = self.reader.read(self.context)
        self.assertIsNot(nodes, changed)
        self.assertEqual(
            5, {n.id: n for n in changed}[self.nodes[3]].vcpus_used
        )
        self.assertIs(services, services_again)
        # A heartbeat alone is set on the kept service: same map.
        self.cell.heartbeat(self.services[2], self.cell.stamp())
        self.cell.tick(REPORT)
        _nodes, services_again = self.reader.read(self.context)
        self.assertEqual((1, 2), self.reader.full_reads)
        self.assertIs(services, services_again)
        self.cell.set_service(
            self.services[2], self.cell.stamp(), disabled=True
        )
        _nodes, services_again = self.reader.read(self.context)
        self.assertIsNot(services, services_again)
        self.assertTrue(services_again["h2"].disabled)

    def test_an_unchanged_row_keeps_its_object(self):
        nodes, services = self.read()
        self.cell.use(self.nodes[3], 5, self.cell.stamp())
        again, services_again = self.read()
        self.assertIs(nodes[self.nodes[0]], again[self.nodes[0]])
        self.assertIsNot(nodes[self.nodes[3]], again[self.nodes[3]])
        self.assertIs(
            services[self.services[0]], services_again[self.services[0]]
        )

    def test_a_heartbeat_alone_waits_for_the_read_of_every_service(self):
        nodes, services = self.read()
        self.cell.heartbeat(self.services[0], self.cell.stamp())
        _nodes, again = self.read()
        self.assertIs(services[self.services[0]], again[self.services[0]])
        self.cell.tick(REPORT)
        _nodes, again = self.read()
        self.assertEqual(
            self.cell.rows(SERVICES)[self.services[0]]["last_seen_up"],
            _naive(again[self.services[0]].last_seen_up),
        )
        self.assertEqual((1, 2), self.reader.full_reads)

    def test_a_heartbeat_alone_is_set_on_the_kept_object(self):
        # What every compute writes every report_interval: at the next
        # read of every service row, the kept object takes it in place
        # and the host's beat moves (the HostState's copy is made again).
        _nodes, services = self.read()
        kept = services[self.services[0]]
        beats = dict(self.reader.beats)
        self.cell.heartbeat(self.services[0], self.cell.stamp())
        self.cell.tick(REPORT)
        _nodes, again = self.read()
        self.assertEqual((1, 2), self.reader.full_reads)
        self.assertIs(kept, again[self.services[0]])
        row = self.cell.rows(SERVICES)[self.services[0]]
        self.assertEqual(row["last_seen_up"], _naive(kept.last_seen_up))
        self.assertEqual(row["updated_at"], _naive(kept.updated_at))
        self.assertEqual(row["report_count"], kept.report_count)
        self.assertEqual({}, kept.obj_get_changes())
        self.assertNotEqual(beats.get("h0"), self.reader.beats.get("h0"))
        self.assertEqual(beats.get("h1"), self.reader.beats.get("h1"))
        # A change beyond the heartbeat makes a new object.
        self.cell.tick(1)
        self.cell.set_service(
            self.services[0], self.cell.stamp(), disabled=True
        )
        _nodes, again = self.read()
        self.assertIsNot(kept, again[self.services[0]])
        self.assertTrue(again[self.services[0]].disabled)

    def test_a_disabled_service_is_seen_by_the_next_read_and_enabled_too(
        self,
    ):
        self.read()
        self.cell.set_service(
            self.services[1], self.cell.stamp(), disabled=True
        )
        _nodes, services = self.read()
        self.assertTrue(services[self.services[1]].disabled)
        self.cell.tick(3)
        self.cell.set_service(
            self.services[1], self.cell.stamp(), disabled=False
        )
        self.cell.set_service(
            self.services[2], self.cell.stamp(), forced_down=True
        )
        _nodes, services = self.read()
        self.assertFalse(services[self.services[1]].disabled)
        self.assertTrue(services[self.services[2]].forced_down)
        self.assertEqual((1, 1), self.reader.full_reads)

    def test_new_and_soft_deleted_rows(self):
        self.read()
        added = self.cell.add_node("h-new", service_id=self.services[0])
        self.cell.soft_delete(NODES, self.nodes[4], self.cell.stamp())
        self.cell.soft_delete(SERVICES, self.services[5], self.cell.stamp())
        nodes, services = self.read()
        self.assertIn(added, nodes)
        self.assertNotIn(self.nodes[4], nodes)
        self.assertNotIn(self.services[5], services)
        self.assertEqual((1, 1), self.reader.full_reads)

    def test_a_late_commit_within_the_overlap_is_seen(self):
        # Stamped by the writer before the last read began, committed
        # after it (and in whole seconds, as on MySQL).
        self.read()
        began = self.cell.elapsed
        self.cell.tick(0.4)
        self.read()
        self.cell.tick(0.3)
        self.cell.use(
            self.nodes[2],
            7,
            EPOCH.replace(microsecond=0)
            + datetime.timedelta(seconds=int(began) - 1),
        )
        nodes, _services = self.read()
        self.assertEqual(7, nodes[self.nodes[2]].vcpus_used)
        self.assertEqual([], self.missed())

    def test_beyond_the_overlap_a_change_waits_for_the_full_read(self):
        # A writer whose clock is 10 s behind: the bound is the full read
        # every view_resync_interval, not the next request.
        self.read()
        self.cell.tick(1)
        self.cell.use(self.nodes[2], 9, self.cell.stamp(behind=10))
        nodes, _services = self.read()
        self.assertEqual(0, nodes[self.nodes[2]].vcpus_used)
        self.cell.tick(RESYNC)
        nodes, _services = self.read()
        self.assertEqual(9, nodes[self.nodes[2]].vcpus_used)
        self.assertEqual([], self.missed())

    def test_a_row_deleted_outright_goes_at_the_full_read(self):
        self.read()
        self.cell.hard_delete(NODES, self.nodes[6])
        self.assertIn(self.nodes[6], self.read()[0])
        self.cell.tick(RESYNC)
        self.assertNotIn(self.nodes[6], self.read()[0])

    def test_a_writer_clock_ahead_does_not_move_the_mark_past_others(self):
        self.read()
        self.cell.use(self.nodes[0], 3, self.cell.stamp(behind=-3600))
        self.read()
        self.cell.tick(1)
        self.cell.use(self.nodes[1], 4, self.cell.stamp())
        nodes, _services = self.read()
        self.assertEqual(4, nodes[self.nodes[1]].vcpus_used)

    def test_this_clock_ahead_does_not_move_the_mark_past_the_writers(self):
        # The scheduler's clock is 30 s ahead of every writer: the mark is
        # the newest stamp the last read found, not its own clock.
        self.cell.use(self.nodes[0], 3, self.cell.stamp(behind=30))
        reader = self.make_reader()
        self.read(reader)
        self.cell.tick(1)
        self.cell.use(self.nodes[1], 4, self.cell.stamp(behind=30))
        nodes, _services = self.read(reader)
        self.assertEqual(4, nodes[self.nodes[1]].vcpus_used)
        self.assertEqual((1, 1), reader.full_reads)

    def test_an_interval_of_zero_leaves_every_read_to_the_requests(self):
        reader = self.make_reader(resync=0)
        self.assertEqual(0, reader.read_due(self.context, 1.0))
        self.assertEqual((0, 0), reader.full_reads)
        self.read(reader)
        self.assertEqual((1, 1), reader.full_reads)

    def test_a_resync_interval_of_zero_reads_every_row_every_time(self):
        reader = self.make_reader(resync=0)
        self.read(reader)
        self.read(reader)
        self.assertEqual((2, 2), reader.full_reads)
        self.assertEqual(80, reader.rows_read)


class TestNoChangeIsMissed(ReaderTestCase):
    """Random histories of Nova's writes, each stamped by a writer whose
    clock is up to half a second behind and whose transaction commits up
    to half a second after its stamp, in whole seconds: after every read,
    the reader's rows are every row as Nova would read them now."""

    STEPS = 400

    def history(self, seed, reader=None, skew=0.5, ahead=None):
        """:param ahead: the loop's ``read_due(ahead)`` also runs, at
        random steps."""
        rng = random.Random(seed)
        loop = random.Random(-seed)
        cell = self.cell
        services = [cell.add_service("h%d" % i) for i in range(8)]
        nodes = [
            cell.add_node("h%d" % i, service_id=s)
            for i, s in enumerate(services)
        ]
        misses = []
        for step in range(self.STEPS):
            cell.tick(rng.choice([0.05, 0.2, 0.7, 1.5, 4.0]))
            stamp = cell.stamp(behind=rng.uniform(0, skew), whole=True)
            action = rng.random()
            if action < 0.45 and nodes:
                cell.use(rng.choice(nodes), rng.randrange(16), stamp)
            elif action < 0.55:
                nodes.append(cell.add_node("h-%d" % step, stamp=stamp))
            elif action < 0.6 and nodes:
                node = nodes.pop(rng.randrange(len(nodes)))
                cell.soft_delete(NODES, node, stamp)
            elif action < 0.75 and services:
                service = rng.choice(services)
                cell.set_service(
                    service,
                    stamp,
                    **{
                        rng.choice(["disabled", "forced_down"]): rng.random()
                        < 0.5
                    },
                )
            elif action < 0.9 and services:
                cell.heartbeat(rng.choice(services), stamp)
            elif action < 0.95:
                services.append(cell.add_service("h-%d" % step, stamp=stamp))
            elif services:
                service = services.pop(rng.randrange(len(services)))
                cell.soft_delete(SERVICES, service, stamp)
            if ahead is not None and loop.random() < 0.3:
                (reader or self.reader).read_due(self.context, ahead)
            if rng.random() < 0.5:
                misses.extend((step,) + miss for miss in self.missed(reader))
        return misses

    def test_no_change_is_missed(self):
        for seed in range(5):
            with self.subTest(seed=seed):
                self.cell = Cell()
                self.reader = self.make_reader()
                self.assertEqual([], self.history(seed))
                # Most reads were of what changed.
                self.assertLess(self.reader.full_reads[0], 20)

    def test_no_change_is_missed_with_the_loop_reading_ahead(self):
        for seed in range(5):
            with self.subTest(seed=seed):
                self.cell = Cell()
                self.reader = self.make_reader()
                self.assertEqual([], self.history(seed, ahead=1.0))
                self.assertLess(self.reader.full_reads[0], 20)

    def test_the_check_catches_a_reader_that_trusts_stamps_alone(self):
        # The same histories, read by a reader that takes every row stamped
        # as it kept it for the row kept, settled or not: a row written
        # again within the second of its stamp is lost (until the full
        # read), and the check says so.
        misses = []
        for seed in range(5):
            self.cell = Cell()
            reader = self.make_reader()
            for table in (reader._nodes, reader._services):
                table.unchanged = _stamped_alike(table)
            misses.extend(self.history(seed, reader))
        self.assertNotEqual([], misses)

    def test_the_check_catches_a_reader_that_misses_a_change(self):
        # The same histories, read by a reader without the overlap: writes
        # committed after a read with an earlier stamp are lost (until the
        # full read), and the check says so.
        reader = self.make_reader()
        reader._timing.overlap = datetime.timedelta(0)
        self.assertNotEqual([], self.history(0, reader))


def _stamped_alike(table):
    """``_Table.unchanged`` without its test of settled rows."""

    def unchanged(stamps):
        kept = table.kept.get(stamps["id"])
        return kept is not None and all(
            kept[0].get(column) == stamps.get(column)
            for column in computes.STAMPS
        )

    return unchanged
