"""When a scheduler takes grant_scheduler's database as down, and when it
takes it back (``grant_scheduler.nova.outage``)."""

import unittest

import fixtures

from grant_scheduler import api
from grant_scheduler.nova import outage


def unavailable():
    return api.DatabaseUnavailable(
        url="mysql+pymysql://gs@db/gs", reason="connection refused"
    )


def refused():
    return api.DatabaseError(
        url="mysql+pymysql://gs@db/gs", reason="lock wait timeout"
    )


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class TestOutage(unittest.TestCase):
    def setUp(self):
        self.clock = Clock()
        self.recoveries = []
        self.down_for = [0]
        self.logs = self.useFixture(fixtures.FakeLogger(name=outage.__name__))

    def useFixture(self, fixture):
        fixture.setUp()
        self.addCleanup(fixture.cleanUp)
        return fixture

    def recover(self):
        self.recoveries.append(self.clock.now)
        if self.down_for[0] > 0:
            self.down_for[0] -= 1
            raise unavailable()

    def outage(self, mode=outage.SCHEDULE):
        return outage.Outage(mode, self.recover, clock=self.clock)

    def test_up_until_a_failure(self):
        found = self.outage()
        self.assertTrue(found.usable())
        self.assertFalse(found.down)
        self.assertEqual([], self.recoveries)

    def test_down_logged_once_per_interval_then_caught_up(self):
        found = self.outage()
        found.failed(unavailable(), "granting")
        self.assertTrue(found.down)
        self.assertEqual(1, self.logs.output.count("database failed"))
        # Requests within the probe interval do not try the database.
        self.clock.now += outage.PROBE_EVERY - 1
        self.assertFalse(found.usable())
        self.assertEqual([], self.recoveries)
        found.decided_by_placement()
        found.failed(refused(), "granting")
        self.assertNotIn("still failing", self.logs.output)
        self.clock.now += outage.LOG_EVERY
        found.failed(refused(), "granting")
        self.assertIn("still failing after 69 s", self.logs.output)
        self.assertIn("1 instances placed without a grant", self.logs.output)
        # Back: the books catch up first, then grants are made again.
        self.clock.now += outage.PROBE_EVERY
        self.assertTrue(found.usable())
        self.assertEqual([self.clock.now], self.recoveries)
        self.assertFalse(found.down)
        self.assertIn("is back after", self.logs.output)
        self.assertEqual(1, found.outages)

    def test_still_down_while_the_books_cannot_catch_up(self):
        found = self.outage()
        found.failed(unavailable(), "granting")
        self.down_for[0] = 1
        self.clock.now += outage.PROBE_EVERY
        self.assertFalse(found.usable())
        self.assertTrue(found.down)
        # The failed try counts as the last: the next waits again.
        self.clock.now += outage.PROBE_EVERY - 1
        self.assertFalse(found.usable())
        self.assertEqual(1, len(self.recoveries))
        self.clock.now += 1
        self.assertTrue(found.usable())

    def test_refuse_names_the_cause(self):
        found = self.outage(outage.REFUSE)
        self.assertFalse(found.refuses)
        found.failed(unavailable(), "granting")
        self.assertTrue(found.refuses)
        self.assertIn("requests are refused", self.logs.output)
        refusal = found.refusal()
        self.assertIn(
            "grant_scheduler's database is unavailable", str(refusal)
        )
        self.assertIn("database_failure = refuse", str(refusal))
        self.clock.now += outage.PROBE_EVERY
        self.assertTrue(found.usable())
        self.assertFalse(found.refuses)

    def test_only_the_database_failing_counts(self):
        for error in (api.NoValidHost, api.UnknownHost, api.InvalidResources):
            self.assertFalse(issubclass(error, outage.FAILURES))
        for error in (api.DatabaseUnavailable, api.DatabaseError):
            self.assertTrue(issubclass(error, outage.FAILURES))


class TestProbe(unittest.TestCase):
    def setUp(self):
        self.clock = Clock()
        self.calls = []
        self.probe_fails = [True]
        self.logs = fixtures.FakeLogger(name=outage.__name__)
        self.logs.setUp()
        self.addCleanup(self.logs.cleanUp)

    def probe(self):
        self.calls.append("probe")
        if self.probe_fails[0]:
            raise unavailable()

    def recover(self):
        self.calls.append("recover")

    def test_recovery_only_after_the_probe_answers(self):
        found = outage.Outage(
            outage.SCHEDULE, self.recover, clock=self.clock, probe=self.probe
        )
        found.failed(unavailable(), "granting")
        self.clock.now += outage.PROBE_EVERY
        self.assertFalse(found.usable())
        # Still down: the reconciliation (retried transactions) not tried.
        self.assertEqual(["probe"], self.calls)
        self.probe_fails[0] = False
        self.clock.now += outage.PROBE_EVERY
        self.assertTrue(found.usable())
        self.assertEqual(["probe", "probe", "recover"], self.calls)

    def test_compute_side_wording(self):
        found = outage.ComputeOutage(self.probe, clock=self.clock)
        found.failed(unavailable(), "claiming instance x on h/n")
        self.assertFalse(found.refuses)
        self.assertIn("builds and deletes go on", self.logs.output)
        found.skipped()
        self.clock.now += outage.LOG_EVERY
        found.failed(unavailable(), "claiming instance y on h/n")
        self.assertIn(
            "1 claims and releases left to the reconciliation",
            self.logs.output,
        )
