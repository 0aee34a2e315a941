"""nvh_with_room and the other figures metrics derives from a raw run."""

import logging
import multiprocessing
import queue
import threading
import types
import uuid

import fixtures

from grant_scheduler import api
from grant_scheduler_bench import metrics
from grant_scheduler_bench import runner
from grant_scheduler_bench import strategies
from grant_scheduler_bench import workloads
from tests import base

SMALL = api.Resources(2, 4096, 40)


class _AlwaysNoValidHost:
    """A strategy whose scheduler answers NoValidHost to everything."""

    name = "always-nvh"
    unsafe = False
    retries_on_reject = False

    class Side:
        def __init__(self, url):
            # What the runner reaches through ``side.gs``.
            self.gs = types.SimpleNamespace(
                database=api.Database(url),
                scheduler=types.SimpleNamespace(rng=None),
            )
            self.attempts = 0
            self.conflicts = 0

        def place(self, amount, instance_uuid):
            self.attempts += 1
            return None

    def scheduler_side(self, url, settings, hooks=None, rng=None):
        return self.Side(url)


@base.with_scenarios(base.SQLITE + [("mysql", {"backend": "mysql"})])
class RoomAfterNoValidHost(base.DatabaseTestCase):
    def setUp(self):
        super().setUp()
        self.gs = api.GrantScheduler(self.db)
        self.gs.report_host("full", "full", api.Capacity(SMALL))
        self.gs.claim(str(uuid.uuid4()), "full", "full", SMALL)

    def room(self):
        return metrics.GrantTablesRoom(self.db_fixture.url)

    def test_a_full_cloud_has_no_room(self):
        self.assertEqual(set(), self.room()(SMALL))

    def test_a_free_host_is_room(self):
        self.gs.report_host("free", "free", api.Capacity(SMALL))
        self.assertEqual({"free"}, self.room()(SMALL))
        self.assertEqual(set(), self.room()(api.Resources(4, 4096, 40)))

    def test_won_grants_take_room(self):
        self.gs.report_host("free", "free", api.Capacity(SMALL))
        self.gs.schedule(2, 4096, 40, instance_uuids=[str(uuid.uuid4())])
        self.assertEqual(set(), self.room()(SMALL))

    def run_scheduler(self, requests, releases=None):
        fake = _AlwaysNoValidHost()
        self.useFixture(
            fixtures.MockPatchObject(
                strategies,
                "STRATEGIES",
                dict(strategies.STRATEGIES, **{fake.name: fake}),
            )
        )
        results = queue.Queue()
        options = {
            "url": self.db_fixture.url,
            "host_subset_size": None,
            "max_fallovers": None,
            "seed": 1,
            "latency_s": 0.0,
            "commit_delay_ms": 0,
        }
        # NOTE: a process body run in this process: it turns logging off,
        # which must not outlive this test.
        self.addCleanup(logging.disable, logging.NOTSET)
        runner.scheduler_process(
            fake.name,
            options,
            [SMALL] * requests,
            [queue.Queue()],
            {},
            0,
            queue.Queue(),
            results,
            threading.Barrier(1),
            releases or runner.Releases(multiprocessing, ["full", "free"]),
        )
        kind, result = results.get(timeout=5)
        self.assertEqual([], result["errors"])
        return result

    def test_scheduler_counts_answers_given_while_a_host_had_room(self):
        self.gs.report_host("free", "free", api.Capacity(SMALL))
        result = self.run_scheduler(3)
        self.assertEqual(3, result["no_valid_host"])
        self.assertEqual(3, result["nvh_with_room"])
        self.assertGreater(result["nvh_check_s"], 0)
        # The fresh read is on its own connection: not a statement of the
        # strategy's.
        self.assertEqual(0, result["statements"])

    def test_room_a_release_made_during_the_request_is_not_counted(self):
        self.gs.report_host("free", "free", api.Capacity(SMALL))
        releases = runner.Releases(multiprocessing, ["full", "free"])
        self.useFixture(
            fixtures.MockPatchObject(
                _AlwaysNoValidHost.Side,
                "place",
                lambda side, amount, uuid: releases.mark("free"),
            )
        )
        result = self.run_scheduler(3, releases)
        self.assertEqual(3, result["no_valid_host"])
        self.assertEqual(0, result["nvh_with_room"])

    def test_a_release_begun_after_the_answer_is_not_counted(self):
        # A compute process starts releasing on "free" after the answer
        # and commits before the fresh read: the room is new.
        self.gs.report_host("free", "free", api.Capacity(SMALL))
        releases = runner.Releases(multiprocessing, ["full", "free"])
        read = metrics.GrantTablesRoom.__call__

        def release_then_read(room, amount):
            releases.mark("free")
            return read(room, amount)

        self.useFixture(
            fixtures.MockPatchObject(
                metrics.GrantTablesRoom, "__call__", release_then_read
            )
        )
        result = self.run_scheduler(3, releases)
        self.assertEqual(3, result["no_valid_host"])
        self.assertEqual(0, result["nvh_with_room"])

    def test_a_release_before_the_request_began_still_counts(self):
        self.gs.report_host("free", "free", api.Capacity(SMALL))
        releases = runner.Releases(multiprocessing, ["full", "free"])
        releases.mark("free")
        result = self.run_scheduler(3, releases)
        self.assertEqual(3, result["nvh_with_room"])

    def test_conflicts_of_requests_answered_no_valid_host_are_counted(self):
        def lose_twice(side, amount, uuid):
            side.conflicts += 2

        self.useFixture(
            fixtures.MockPatchObject(
                _AlwaysNoValidHost.Side, "place", lose_twice
            )
        )
        result = self.run_scheduler(3)
        self.assertEqual(6, result["nvh_conflicts"])
        self.assertEqual(0, result["placed_vcpus"])

    def test_scheduler_counts_nothing_when_the_cloud_is_full(self):
        result = self.run_scheduler(3)
        self.assertEqual(3, result["no_valid_host"])
        self.assertEqual(0, result["nvh_with_room"])


class Summarise(base.TestCase):
    def raw(self, **extra):
        scheduler = {
            "latencies": [0.01, 0.02],
            "placed": 10,
            "no_valid_host": 2,
            "nvh_with_room": 1,
            "nvh_check_s": 0.5,
            "attempts": 12,
            "conflicts": 3,
            "nvh_conflicts": 1,
            "placed_vcpus": 20,
            "placed_by_vcpus": {2: 10},
            "statements": 100,
            "commits": 20,
            "errors": [],
        }
        other = dict(
            scheduler, nvh_check_s=0.25, placed_by_vcpus={"8": 1, 2: 10}
        )
        compute = {"rejected": 4, "statements": 50, "commits": 10}
        raw = {
            "schedulers": [scheduler, other],
            "computes": [compute, dict(compute, rejected=1)],
            "elapsed_s": 2.5,
            "overcommitted_hosts": 0,
        }
        raw.update(extra)
        return raw

    def test_figures(self):
        workload = workloads.make("fill", 4)
        strategy = strategies.STRATEGIES["grants-naive"]
        row = metrics.summarise(strategy, workload, 2, self.raw(), 3, 100.0)
        self.assertEqual(set(metrics.KEYS), set(row))
        self.assertEqual("grants-naive", row["strategy"])
        self.assertIs(True, row["unsafe"])
        self.assertEqual(2, row["nvh_with_room"])
        self.assertEqual(1, row["spurious_no_valid_host"])
        self.assertEqual(5, row["failed_builds"])
        # 20 placed in 2.5 s less the longest fresh-read pause (0.5 s).
        self.assertEqual(10.0, row["placements_per_s"])
        self.assertEqual(15.0, row["db_statements_per_placement"])
        self.assertEqual(40, row["placed_vcpus"])
        # Summed over the processes, smallest flavour first.
        self.assertEqual(
            [("2", 20), ("8", 1)], list(row["placed_by_vcpus"].items())
        )
        self.assertEqual(2, row["conflicts_ending_no_valid_host"])
        self.assertIsNone(row["cpu_busy_pct"])
        row = metrics.summarise(
            strategy, workload, 2, self.raw(cpu_busy=0.874), 3, 100.0
        )
        self.assertEqual(87, row["cpu_busy_pct"])

    def test_a_service_adds_its_statements(self):
        workload = workloads.make("fill", 4)
        row = metrics.summarise(
            strategies.STRATEGIES["placement"],
            workload,
            2,
            self.raw(service_statements=200, service_commits=40),
            None,
            100.0,
        )
        self.assertEqual(25.0, row["db_statements_per_placement"])
        self.assertEqual(5.0, row["db_commits_per_placement"])
        self.assertIsNone(row["spurious_no_valid_host"])
