"""The SQL store on MySQL and PostgreSQL and the memory store do the same
thing, step by step, in every scenario of ``tests.store_conformance``
(SQLite: ``tests/unit/test_store_conformance.py``).  A missing server
fails these tests."""

from grant_scheduler.db import store as gs_store
from tests import base
from tests import store_conformance


@base.with_scenarios(base.SERVERS)
class Conformance(store_conformance.Conformance, base.DatabaseTestCase):
    def make_sql_store(self):
        return gs_store.Store(self.db)
