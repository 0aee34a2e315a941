"""The SQL store on SQLite and the memory store do the same thing, step
by step, in every scenario of ``tests.store_conformance``; and a memory
store that drifts from the SQL store's behaviour fails them."""

import dataclasses

from grant_scheduler.db import store as gs_store
from grant_scheduler.resources import NOTHING
from tests import base
from tests import memory_store
from tests import store_conformance


class SQLite(store_conformance.Conformance, base.DatabaseTestCase):
    def make_sql_store(self):
        return gs_store.Store(self.db)


class TestConformance_sqlite(SQLite, base.TestCase):
    pass


class StrictFit(memory_store.MemoryStore):
    """Drifted: refuses a grant that fills a node exactly."""

    def grant(self, host_ids, ask, taken, before_commit=None):
        host_ids = [
            h
            for h in host_ids
            if h not in self._nodes
            or self._nodes[h].state.free != ask.resources
        ]
        return super().grant(host_ids, ask, taken, before_commit)


class KeepsDuplicates(memory_store.MemoryStore):
    """Drifted: a claim leaves the instance's other live grants."""

    def _withdraw_live(self, instance_uuid):
        return 0


class NeverExpires(memory_store.MemoryStore):
    """Drifted: the reaper finds no expired grant."""

    def _expire(self, limit):
        return 0, 0


class ResyncKeepsClaims(memory_store.MemoryStore):
    """Drifted: a report with ``used`` keeps the node's claims."""

    def _claims_on(self, host_id):
        return list(super()._claims_on(host_id))

    def report_host(self, host, node, capacity, used=None, node_uuid=None):
        return super().report_host(host, node, capacity, None, node_uuid)


class ReadsEverything(memory_store.MemoryStore):
    """Drifted: ``read_hosts`` ignores ``since`` and ``known``."""

    def read_hosts(self, since=None, known=None):
        return super().read_hosts()


class UnstampedStates(memory_store.MemoryStore):
    """Drifted: a withdrawal returns the grant's own amount, whatever
    ``ask`` says, and a node's state leaves out its node uuid."""

    def host_state(self, host_id):
        state = super().host_state(host_id)
        return state and dataclasses.replace(state, node_uuid=None)


class OverReleases(memory_store.MemoryStore):
    """Drifted: a release takes the node's usage down to nothing."""

    def release(self, instance_uuid, host, node):
        host_id = self._named(host, node)
        released = super().release(instance_uuid, host, node)
        if released:
            self._move(host_id, used=NOTHING - self._nodes[host_id].state.used)
        return released


class AsksEveryTime(memory_store.MemoryStore):
    """Drifted: a claim that trusts its grant asks its amount anyway."""

    def claim(self, build, before_commit=None):
        if build.resources_of is not None:
            build.resources_of()
        return super().claim(build, before_commit)


class TestDrift(SQLite, base.TestCase):
    """The conformance scenarios catch a memory store that drifts."""

    def assert_caught(self, scenario, drifted):
        self.run_both(scenario)
        self.assertRaises(
            AssertionError, self.run_both, scenario, memory_cls=drifted
        )

    def test_a_different_fit_rule(self):
        self.assert_caught("grants_and_fall_over", StrictFit)

    def test_a_claim_that_keeps_duplicate_grants(self):
        self.assert_caught("claims", KeepsDuplicates)

    def test_grants_that_never_expire(self):
        self.assert_caught("reaping", NeverExpires)

    def test_a_resync_that_keeps_claims(self):
        self.assert_caught("claims", ResyncKeepsClaims)

    def test_reads_that_ignore_what_the_reader_holds(self):
        self.assert_caught("reads_since", ReadsEverything)

    def test_a_state_without_its_node_uuid(self):
        self.assert_caught("registration", UnstampedStates)

    def test_a_release_of_too_much(self):
        self.assert_caught("claims", OverReleases)

    def test_an_amount_asked_where_the_grant_decides(self):
        self.assert_caught("claims", AsksEveryTime)
