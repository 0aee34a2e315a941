"""Statements and commits per phase of one uncontended placement.

The README's per-phase counts, held by a test: a read of what changed, a
grant in three statements (the node's row locked as its ticket is counted,
one conditional ``UPDATE`` of its inventory rows that decides, and the
``INSERT``), the claim Nova's compute side makes (``claim_instance``: by
the instance's grant, whose amount it does not know) in one statement on
PostgreSQL (the grant consumed, the node's row locked and its mark moved,
its inventory rows and the claim's ``INSERT``, one chain of
data-modifying CTEs) and five on MySQL (the grant consumed, the amount
read back by the ticket, the node's row and mark, its inventory rows, the
claim's ``INSERT``; four when the claiming scheduler process gives the
amount it granted, which is then not read back), one commit each for the
grant and the claim; a claim
without a grant one transaction too (it finds no grant, asks the amount
once, and re-checks the node with it).  SQLite counts its ``BEGIN`` as a
statement and reads the ticket back with a ``SELECT``.
"""

import uuid

from oslo_db.sqlalchemy import engines as oslo_engines

from grant_scheduler import api
from grant_scheduler import injection
from grant_scheduler_bench import factory
from grant_scheduler_bench import runner
from tests import base

ONE = api.Resources(1, 1024, 10)

# (view, grant, claim) statements of the steady state, per backend.
EXPECTED = {"sqlite": (2, 4, 5), "mysql": (1, 3, 5), "postgresql": (1, 3, 1)}
# The same claim made by the scheduler process that took the grant, which
# gives the grant's amount (``granted``): MySQL need not read it back.
GRANTED = {"sqlite": 5, "mysql": 4, "postgresql": 1}
# A repeated claim (every scheduler follows the compute's instance info):
# its grant looked for (consumed: none found), then the node's live grants
# of the instance and its claim, found by one statement, in one
# transaction.
REPEATED = {"sqlite": 2, "mysql": 2, "postgresql": 2}
# oslo.db before 9 (Nova 22's 8.4) pings every connection it checks out
# with a SELECT 1: one statement more per transaction, and not ours.
PINGS = int(hasattr(oslo_engines, "_connect_ping_listener"))


@base.with_scenarios(base.ALL_BACKENDS)
class RoundTrips(base.DatabaseTestCase):
    def setUp(self):
        super().setUp()
        admin = api.GrantScheduler(self.db)
        for n in range(3):
            admin.report_host(
                "h%d" % n, "n%d" % n, api.Capacity(api.Resources(8, 8192, 80))
            )
        self.marks = {}
        hooks = injection.Hooks().on(
            "view_loaded",
            lambda **info: self.marks.update(view=dict(self.sched_counts)),
        )
        self.sched = factory.grant_scheduler(self.db_fixture.url, hooks=hooks)
        self.compute = factory.grant_scheduler(self.db_fixture.url)
        for gs in (self.sched, self.compute):
            self.addCleanup(gs.database.dispose)
        self.sched_counts = runner.count_statements(self.sched.database)
        self.compute_counts = runner.count_statements(self.compute.database)

    def place(self):
        """One placement's (view, grant, claim) counts, each a pair of
        (statements, commits)."""
        before = dict(self.sched_counts)
        [selection] = self.sched.schedule(
            ONE.vcpus,
            ONE.memory_mb,
            ONE.disk_gb,
            instance_uuids=[str(uuid.uuid4())],
        )
        after = dict(self.sched_counts)
        claimed = dict(self.compute_counts)
        self.compute.claim_instance(
            selection.instance_uuid,
            selection.host,
            selection.node,
            lambda: ONE,
        )

        def delta(end, start):
            return (
                end["statements"] - start["statements"],
                end["commits"] - start["commits"],
            )

        view = self.marks["view"]
        return (
            selection.host,
            delta(view, before),
            delta(after, view),
            delta(self.compute_counts, claimed),
        )

    def granted(self):
        """``(instance uuid, selection)`` of an instance the scheduler
        just granted, the schema checked first."""
        self.place()
        instance_uuid = str(uuid.uuid4())
        [selection] = self.sched.schedule(
            ONE.vcpus,
            ONE.memory_mb,
            ONE.disk_gb,
            instance_uuids=[instance_uuid],
        )
        return instance_uuid, selection

    def used_on(self, selection):
        """The usage of ``selection``'s node in the books."""
        [state] = [
            h.state
            for h in self.sched.hosts()
            if (h.state.host, h.state.node) == (selection.host, selection.node)
        ]
        return state.used

    def test_an_uncontended_placement(self):
        # The first calls check the schema; then the steady state.
        seen = set()
        while len(seen) < 3:
            seen.add(self.place()[0])
        view, grant, claim = (
            n + PINGS for n in EXPECTED[self.db.dialect_name]
        )
        for _ in range(3):
            _host, got_view, got_grant, got_claim = self.place()
            self.assertEqual((view, 0), got_view)
            self.assertEqual((grant, 1), got_grant)
            self.assertEqual((claim, 1), got_claim)

    def test_a_schedulers_first_claim_on_a_node_of_its_view(self):
        """The claim a scheduler process makes from a compute's instance
        information (Nova's host manager, on Nova 22 by default) on a node
        it has claimed nothing on: the common claim, the node's id known
        from the process's view of the books."""
        instance_uuid, selection = self.granted()
        before = dict(self.sched_counts)
        outcome = self.sched.claim_instance(
            instance_uuid, selection.host, selection.node, self.fail
        )
        claim = EXPECTED[self.db.dialect_name][2] + PINGS
        self.assertEqual(
            ("grant", claim, 1),
            (
                outcome.how,
                self.sched_counts["statements"] - before["statements"],
                self.sched_counts["commits"] - before["commits"],
            ),
        )

    def test_the_granting_process_claims_without_reading_the_amount(self):
        """The claim a scheduler process makes from the instance
        information of an instance it granted, giving the grant's
        amount."""
        instance_uuid, selection = self.granted()
        before = dict(self.sched_counts)
        outcome = self.sched.claim_instance(
            instance_uuid,
            selection.host,
            selection.node,
            self.fail,
            granted=ONE,
        )
        self.assertEqual(
            ("grant", GRANTED[self.db.dialect_name] + PINGS, 1),
            (
                outcome.how,
                self.sched_counts["statements"] - before["statements"],
                self.sched_counts["commits"] - before["commits"],
            ),
        )
        self.assertEqual(ONE, outcome.resources)
        self.assertEqual([], self.sched.check())

    def test_a_grant_of_another_amount_is_claimed_as_granted(self):
        # The amount given is not the grant's (another grant of the
        # instance since): the grant is found and its own amount counted.
        instance_uuid, selection = self.granted()
        used = self.used_on(selection)
        outcome = self.sched.claim_instance(
            instance_uuid,
            selection.host,
            selection.node,
            self.fail,
            granted=ONE + ONE,
        )
        self.assertEqual(("grant", ONE), (outcome.how, outcome.resources))
        self.assertEqual(used + ONE, self.used_on(selection))
        self.assertEqual(
            {"consumed"},
            {
                g.state
                for g in self.sched.grants()
                if g.instance_uuid == instance_uuid
            },
        )
        self.assertEqual([], self.sched.check())

    def test_a_claim_without_a_grant_asks_its_amount_once(self):
        # The schema checked, and the node's id known to the compute side.
        host = self.place()[0]
        node = "n" + host[1:]
        asked = []

        def resources_of():
            asked.append(1)
            return ONE

        before = dict(self.compute_counts)
        outcome = self.compute.claim_instance(
            str(uuid.uuid4()), host, node, resources_of
        )
        # One transaction: it finds no grant, asks the amount (once) and
        # re-checks the node with it; nothing is rolled back.
        self.assertEqual(
            ("recheck", [1], 1, 0),
            (
                outcome.how,
                asked,
                self.compute_counts["commits"] - before["commits"],
                self.compute_counts["rollbacks"] - before["rollbacks"],
            ),
        )

    def test_a_repeated_claim_without_a_grant_asks_nothing(self):
        host = self.place()[0]
        node = "n" + host[1:]
        instance_uuid = str(uuid.uuid4())
        self.compute.claim_instance(instance_uuid, host, node, lambda: ONE)
        asked = []

        def resources_of():
            asked.append(1)
            return ONE

        outcome = self.compute.claim_instance(
            instance_uuid, host, node, resources_of
        )
        self.assertEqual(("existing", []), (outcome.how, asked))

    def test_a_repeated_claim_is_one_transaction_that_writes_nothing(self):
        host = self.place()[0]
        claim = self.compute.claims(host)[0]
        before = dict(self.compute_counts)
        outcome = self.compute.claim_instance(
            claim.instance_uuid, host, claim.node, self.fail
        )
        self.assertEqual(
            (
                "existing",
                REPEATED[self.db.dialect_name] + PINGS,
                1,
                0,
            ),
            (
                outcome.how,
                self.compute_counts["statements"] - before["statements"],
                self.compute_counts["commits"] - before["commits"],
                self.compute_counts["rollbacks"] - before["rollbacks"],
            ),
        )
