"""placement-api: a small fill through the real openstack-placement service.

Needs ``pip install '.[placement]'`` (``tox -e placement`` installs it and
runs this directory alone; without the install every test fails, saying
how to install it).  The service runs on a loopback port
over a database next to the test's own; what the test checks it reads from
placement's tables itself, with its own SQL.
"""

import sqlalchemy as sa

from grant_scheduler_bench import metrics
from grant_scheduler_bench import placement_api
from grant_scheduler_bench import runner
from grant_scheduler_bench import strategies
from grant_scheduler_bench import workloads
from tests import base

HOSTS = 4
# fill: 2 vCPU / 4096 MB / 40 GB on 16 / 32768 / 500 hosts, 8 a host.
FITS = HOSTS * 8


def _read_tables(url):
    """Per provider: ``{class id: (used, usable)}``, and the consumers."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            inventory = conn.execute(
                sa.text(
                    "SELECT rp.name, i.resource_class_id, i.total,"
                    " i.reserved, i.allocation_ratio FROM inventories i"
                    " JOIN resource_providers rp"
                    " ON rp.id = i.resource_provider_id"
                )
            ).fetchall()
            used = dict(
                ((row[0], row[1]), int(row[2]))
                for row in conn.execute(
                    sa.text(
                        "SELECT rp.name, a.resource_class_id, SUM(a.used)"
                        " FROM allocations a JOIN resource_providers rp"
                        " ON rp.id = a.resource_provider_id"
                        " GROUP BY rp.name, a.resource_class_id"
                    )
                )
            )
            consumers = conn.execute(
                sa.text("SELECT COUNT(DISTINCT consumer_id) FROM allocations")
            ).scalar()
    finally:
        engine.dispose()
    usage = {}
    for name, rc, total, reserved, ratio in inventory:
        usage.setdefault(name, {})[rc] = (
            used.get((name, rc), 0),
            (total - reserved) * ratio,
        )
    return usage, consumers


@base.with_scenarios(base.SQLITE + [("mysql", {"backend": "mysql"})])
class PlacementApiFill(base.DatabaseTestCase):
    def setUp(self):
        problem = placement_api.missing()
        if problem:
            self.fail(problem)
        super().setUp()
        self.placement_url = placement_api.placement_db_url(
            self.db_fixture.url
        )
        if self.backend != "sqlite":
            self.addCleanup(self._drop_placement_database)

    def _drop_placement_database(self):
        admin = sa.create_engine(
            self.db_fixture.url,
            isolation_level="AUTOCOMMIT",
            poolclass=sa.pool.NullPool,
        )
        try:
            with admin.connect() as conn:
                conn.exec_driver_sql(
                    "DROP DATABASE IF EXISTS `%s`"
                    % self.placement_url.database
                )
        finally:
            admin.dispose()

    def fill(self, schedulers, conflict_retries=None):
        workload = workloads.make("fill", HOSTS)
        options = {
            "url": self.db_fixture.url,
            "host_subset_size": 3,
            "max_fallovers": 50,
            "seed": 1,
            "latency_s": 0.0,
            "commit_delay_ms": 0,
            "build_delay_ms": 0,
            "churn": 0.0,
            "placement_workers": 2,
            "placement_conflict_retries": conflict_retries,
        }
        raw = runner.run(placement_api.NAME, workload, schedulers, options)
        self.assertEqual([], metrics.errors(raw, workload))
        row = metrics.summarise(
            strategies.STRATEGIES[placement_api.NAME],
            workload,
            schedulers,
            raw,
            None,
            1.0,
        )
        usage, consumers = _read_tables(
            self.placement_url.render_as_string(hide_password=False)
        )
        self.assertEqual(HOSTS, len(usage))
        return row, usage, consumers

    def test_fill_with_two_schedulers_is_exact_with_one_server_retry(self):
        row, usage, consumers = self.fill(2, conflict_retries=1)
        self.assertEqual(FITS, row["placed"])
        self.assertEqual(FITS, consumers)
        memory = placement_api.CLASS_IDS["MEMORY_MB"]
        self.assertEqual(
            FITS * 4096, sum(classes[memory][0] for classes in usage.values())
        )
        for name, classes in usage.items():
            for used, usable in classes.values():
                self.assertLessEqual(used, usable, name)
        self.assertEqual(0, row["overcommitted_hosts"])
        self.assertEqual(0, row["nvh_with_room"])
        # The statements are the service's, counted in its workers.
        self.assertGreater(row["db_statements_per_placement"], 10)

    def test_overcommit_is_what_placements_tables_show(self):
        row, usage, consumers = self.fill(2)
        over = [
            name
            for name, classes in usage.items()
            if any(used > usable for used, usable in classes.values())
        ]
        self.assertEqual(consumers, row["placed"])
        self.assertEqual(len(over), row["overcommitted_hosts"])
        self.assertGreaterEqual(row["placed"], FITS)
        if row["placed"] > FITS:
            self.assertTrue(over)
