"""The services environment's reading of placement's records
(``tests/nova22/services.py``), on placement's own schema (Debian's
placement, the release Nova 22 ships with) in MariaDB."""

import uuid

import sqlalchemy as sa
import testtools

from tests import base as gs_base
from tests.nova22 import services


class TestReadAllocations(testtools.TestCase):
    def setUp(self):
        super().setUp()
        from placement.db.sqlalchemy import models

        database = self.useFixture(
            gs_base.DatabaseFixture("mysql", migrate=False)
        )
        self.engine = sa.create_engine(database.url)
        self.addCleanup(self.engine.dispose)
        models.BASE.metadata.create_all(self.engine)
        self.models = models

    def _insert(self, conn, table, **values):
        conn.execute(
            self.models.BASE.metadata.tables[table].insert().values(**values)
        )

    def test_each_allocation_is_its_consumers(self):
        # Consumers whose UUIDs start with a letter and with the digits of
        # another consumer's row id: both read as their own.
        first = "6b217724-e442-4f65-8814-f70310fccbdb"
        second = "ab" + uuid.uuid4().hex[2:8] + "-e442-4f65-8814-f70310fccbdb"
        owner = {"project_id": 1, "user_id": 1, "generation": 0}
        with self.engine.begin() as conn:
            for table in ("projects", "users"):
                self._insert(conn, table, id=1, external_id="x")
            for row_id in range(1, 8):
                self._insert(
                    conn,
                    "consumers",
                    id=row_id,
                    uuid=str(uuid.uuid4()),
                    **owner,
                )
            for consumer in (first, second):
                self._insert(conn, "consumers", uuid=consumer, **owner)
            for provider_id, consumer in ((1, first), (2, second)):
                self._insert(
                    conn,
                    "resource_providers",
                    id=provider_id,
                    uuid=str(uuid.uuid4()),
                    name="n%d" % provider_id,
                    generation=0,
                )
                self._insert(
                    conn,
                    "allocations",
                    resource_provider_id=provider_id,
                    consumer_id=consumer,
                    resource_class_id=0,
                    used=provider_id,
                )
        with self.engine.connect() as conn:
            read = services.read_allocations(conn)
        self.assertEqual(
            [
                {"consumer": first, "node": "n1", "rc": 0, "used": 1},
                {"consumer": second, "node": "n2", "rc": 0, "used": 2},
            ],
            sorted(read, key=lambda a: a["node"]),
        )
