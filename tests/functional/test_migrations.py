"""Migrations on SQLite, MySQL and PostgreSQL: walk, sync and the CLIs."""

import contextlib
import logging
import os
import subprocess
import sys

import fixtures
import sqlalchemy as sa
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import test_migrations

from grant_scheduler import api
from grant_scheduler import exception
from grant_scheduler import storage
from grant_scheduler.db import api as db_api
from grant_scheduler.db import migration
from grant_scheduler.db import models
from grant_scheduler.db import sa_compat
from grant_scheduler.resources import Resources
from tests import base

# NOTE: alembic 1.4 (Nova 22's) has no ``python -m alembic``.
ALEMBIC = [
    sys.executable,
    "-c",
    "import sys; from alembic.config import main; sys.exit(main())",
]
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def _revisions_oldest_first():
    from alembic import script as alembic_script

    script = alembic_script.ScriptDirectory(
        migration.MIGRATIONS_DIR, version_locations=[migration.VERSIONS_DIR]
    )
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


@base.with_scenarios(base.ALL_BACKENDS)
class MigrationWalk(base.DatabaseTestCase):
    """Upgrade one revision at a time and check what each one made."""

    migrate = False

    def test_walk_versions(self):
        revisions = _revisions_oldest_first()
        self.assertEqual(migration.head_revision(), revisions[-1])
        for revision in revisions:
            migration.upgrade(self.db, revision)
            self.assertEqual(revision, migration.current_revision(self.db))
            getattr(self, "_check_%s" % revision)()

    def _check_0001_initial_schema(self):
        with self.db.reader() as conn:
            inspector = sa.inspect(conn)
            tables = set(inspector.get_table_names())
            self.assertLessEqual(
                {"gs_hosts", "gs_grants", "gs_claims"}, tables
            )
            uniques = {
                table: {
                    c["name"] for c in inspector.get_unique_constraints(table)
                }
                for table in ("gs_hosts", "gs_grants", "gs_claims")
            }
            self.assertIn("uniq_gs_hosts0host0node", uniques["gs_hosts"])
            self.assertIn(
                "uniq_gs_grants0host_id0ticket", uniques["gs_grants"]
            )
            self.assertIn(
                "uniq_gs_claims0instance_uuid0host_id", uniques["gs_claims"]
            )
            indexes = {i["name"] for i in inspector.get_indexes("gs_grants")}
            self.assertLessEqual(
                {
                    "ix_gs_grants_host_id_state",
                    "ix_gs_grants_instance_uuid",
                    "ix_gs_grants_request_id",
                    "ix_gs_grants_state_created_at",
                },
                indexes,
            )
            if self.backend == "mysql":
                engines = sa_compat.execute_text(
                    conn,
                    "SELECT table_name, engine "
                    "FROM information_schema.tables "
                    "WHERE table_schema = DATABASE() "
                    "AND table_name LIKE 'gs\\_%'",
                ).fetchall()
                self.assertEqual(3, len(engines))
                self.assertEqual({"InnoDB"}, {row[1] for row in engines})

    def test_check_schema_before_and_after(self):
        self.assertRaises(
            exception.SchemaNotMigrated, migration.check_schema, self.db
        )
        migration.upgrade(self.db)
        migration.check_schema(self.db)

    def test_schema_newer_than_code_is_refused(self):
        migration.upgrade(self.db)
        with self.db.writer() as conn:
            sa_compat.execute_text(
                conn, "UPDATE alembic_version SET version_num = '9999_future'"
            )
        with self.assertRaises(exception.SchemaNewerThanCode) as caught:
            migration.check_schema(self.db)
        self.assertIn("9999_future", str(caught.exception))

    def test_database_timestamp_keeps_subsecond_precision(self):
        migration.upgrade(self.db)
        fractions = set()
        for number in range(5):
            with self.db.writer() as conn:
                conn.execute(
                    models.hosts.insert().values(
                        host="h%d" % number,
                        node="n",
                        created_at=self.db.now(),
                    )
                )
        with self.db.reader() as conn:
            for (created_at,) in conn.execute(
                sa_compat.select(models.hosts.c.created_at)
            ):
                fractions.add(created_at.microsecond)
        self.assertNotEqual({0}, fractions)

    def test_alembic_cli_from_checkout_with_url(self):
        self._run_alembic({migration.URL_ENV: self.db_fixture.url})
        self.assertEqual(
            migration.head_revision(), migration.current_revision(self.db)
        )

    def test_alembic_cli_from_checkout_with_config_file(self):
        path = base.temp_config_file(
            self,
            "[grant_scheduler_database]\nconnection = %s\n"
            % self.db_fixture.url,
        )
        self._run_alembic({migration.CONFIG_FILE_ENV: path})
        self.assertEqual(
            migration.head_revision(), migration.current_revision(self.db)
        )

    def _run_alembic(self, extra_env):
        env = dict(os.environ)
        env.pop(migration.URL_ENV, None)
        env.pop(migration.CONFIG_FILE_ENV, None)
        env.update(extra_env)
        result = subprocess.run(
            [*ALEMBIC, "upgrade", "head"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        self.assertEqual(0, result.returncode, result.stderr)

    def _check_0002_hosts_updated_at_index(self):
        with self.db.connect() as conn:
            indexes = {
                i["name"]: i["column_names"]
                for i in sa.inspect(conn).get_indexes("gs_hosts")
            }
        self.assertEqual(["updated_at"], indexes["ix_gs_hosts_updated_at"])

    def _check_0003_grants_in_write(self):
        with self.db.connect() as conn:
            inspector = sa.inspect(conn)
            hosts = {c["name"]: c for c in inspector.get_columns("gs_hosts")}
            grants = {c["name"] for c in inspector.get_columns("gs_grants")}
            indexes = {i["name"] for i in inspector.get_indexes("gs_grants")}
            if self.backend == "sqlite":
                table_sql = sa_compat.execute_text(
                    conn,
                    "SELECT sql FROM sqlite_master WHERE name = 'gs_hosts'",
                ).scalar()
        for prefix in ("limit_", "granted_", "external_"):
            self.assertIn(prefix + "memory_mb", hosts)
        self.assertNotIn("generation", hosts)
        self.assertIn("expires_at", grants)
        self.assertIn("ix_gs_grants_state_expires_at", indexes)
        self.assertNotIn("ix_gs_grants_state_created_at", indexes)
        if self.backend == "sqlite":
            # A deleted host's id is never given to a new one.
            self.assertIn("AUTOINCREMENT", table_sql)
        else:
            self.assertIsInstance(hosts["memory_mb"]["type"], sa.BigInteger)

    def _check_0004_grant_states_written(self):
        with self.db.connect() as conn:
            indexes = {
                i["name"] for i in sa.inspect(conn).get_indexes("gs_grants")
            }
        # A table copy (SQLite) keeps the indexes.
        self.assertLessEqual(
            {
                "ix_gs_grants_host_id_state",
                "ix_gs_grants_instance_uuid",
                "ix_gs_grants_request_id",
                "ix_gs_grants_state_expires_at",
            },
            indexes,
        )
        _assert_only_written_states(self, self.db)

    def _check_0005_books_by_class(self):
        tables = ("gs_hosts", "gs_inventories", "gs_grants", "gs_claims")
        with self.db.connect() as conn:
            inspector = sa.inspect(conn)
            columns = {
                table: {c["name"]: c for c in inspector.get_columns(table)}
                for table in tables
            }
            primary_key = inspector.get_pk_constraint("gs_inventories")
            indexes = {
                table: {i["name"] for i in inspector.get_indexes(table)}
                for table in tables
            }
            uniques = {
                table: {
                    c["name"] for c in inspector.get_unique_constraints(table)
                }
                for table in tables
            }
            if self.backend == "sqlite":
                table_sql = dict(
                    sa_compat.execute_text(
                        conn,
                        "SELECT name, sql FROM sqlite_master "
                        "WHERE type = 'table'",
                    ).fetchall()
                )
            if self.backend == "mysql":
                engines = dict(
                    sa_compat.execute_text(
                        conn,
                        "SELECT table_name, engine "
                        "FROM information_schema.tables "
                        "WHERE table_schema = DATABASE() "
                        "AND table_name LIKE 'gs\\_%'",
                    ).fetchall()
                )
                collations = dict(
                    (tuple(row[:2]), row[2])
                    for row in sa_compat.execute_text(
                        conn,
                        "SELECT table_name, column_name, collation_name "
                        "FROM information_schema.columns "
                        "WHERE table_schema = DATABASE() "
                        "AND column_name IN ('resource_class', 'resources')",
                    ).fetchall()
                )
        amounts = (
            "total reserved min_unit max_unit step_size capacity used "
            "external granted"
        ).split()
        self.assertEqual(
            {"host_id", "resource_class", "allocation_ratio"} | set(amounts),
            set(columns["gs_inventories"]),
        )
        self.assertEqual(
            ["host_id", "resource_class"], primary_key["constrained_columns"]
        )
        self.assertEqual(
            [],
            [c for c in columns["gs_inventories"].values() if c["nullable"]],
        )
        # The amounts left the other tables, for ``resources``.
        self.assertEqual(
            {
                "id",
                "host",
                "node",
                "node_uuid",
                "ticket",
                "last_grant_ticket",
                "last_grant_at",
                "created_at",
                "updated_at",
            },
            set(columns["gs_hosts"]),
        )
        for table in ("gs_grants", "gs_claims"):
            found = columns[table]
            self.assertFalse(found["resources"]["nullable"])
            self.assertEqual(
                set(), {"vcpus", "memory_mb", "disk_gb"} & set(found)
            )
        # The tables copied (SQLite) or altered keep their indexes and
        # unique constraints.
        # NOTE: MySQL lists unique constraints among the indexes too.
        self.assertLessEqual({"ix_gs_hosts_updated_at"}, indexes["gs_hosts"])
        self.assertLessEqual(
            {
                "ix_gs_grants_host_id_state",
                "ix_gs_grants_instance_uuid",
                "ix_gs_grants_request_id",
                "ix_gs_grants_state_expires_at",
            },
            indexes["gs_grants"],
        )
        self.assertLessEqual({"ix_gs_claims_host_id"}, indexes["gs_claims"])
        self.assertEqual(
            {
                "gs_hosts": {"uniq_gs_hosts0host0node"},
                "gs_inventories": set(),
                "gs_grants": {"uniq_gs_grants0host_id0ticket"},
                "gs_claims": {"uniq_gs_claims0instance_uuid0host_id"},
            },
            uniques,
        )
        if self.backend == "sqlite":
            # A deleted host's id is never given to a new one, and the copy
            # of gs_grants kept the state check.
            self.assertIn("AUTOINCREMENT", table_sql["gs_hosts"])
            self.assertIn("ck_gs_grants_state", table_sql["gs_grants"])
        else:
            for name in amounts:
                self.assertIsInstance(
                    columns["gs_inventories"][name]["type"], sa.BigInteger
                )
        if self.backend == "mysql":
            self.assertEqual(
                dict.fromkeys(tables, "InnoDB"),
                {table: engines[table] for table in tables},
            )
            self.assertEqual(
                {
                    ("gs_inventories", "resource_class"): "utf8mb4_bin",
                    ("gs_grants", "resources"): "utf8mb4_bin",
                    ("gs_claims", "resources"): "utf8mb4_bin",
                },
                collations,
            )
        _assert_only_written_states(self, self.db)


@base.with_scenarios(base.ALL_BACKENDS)
class ModelsMigrationsSync(
    base.DatabaseTestCase, test_migrations.ModelsMigrationsSync
):
    """The models and the migrations describe the same schema."""

    migrate = False

    def setUp(self):
        super().setUp()
        # NOTE: the fixture throws the whole database away; oslo.db's own
        # clean-up would drop table by table, and on older oslo.db it tries
        # SQLite's internal sqlite_sequence too.
        self.useFixture(
            fixtures.MonkeyPatch(
                "oslo_db.sqlalchemy.provision.Backend.drop_all_objects",
                lambda backend, engine: None,
            )
        )

    def db_sync(self, engine):
        migration.upgrade(self.db)
        self.reflect_no_check_constraints_where_impossible()

    def get_engine(self):
        return self.db.get_engine()

    def get_metadata(self):
        return models.metadata

    def include_object(self, object_, name, type_, reflected, compare_to):
        # NOTE: SQLite's own table of AUTOINCREMENT counters, which older
        # SQLAlchemy releases reflect as if it were ours.
        return not (
            type_ == "table" and name in ("alembic_version", "sqlite_sequence")
        )


@base.with_scenarios(base.ALL_BACKENDS)
class UpgradeWithData(base.DatabaseTestCase):
    """Each revision is applied to a database holding data of the one
    before it, and the code at head works on what the upgrades kept.

    Every revision has a ``_seed_<revision>`` that writes rows as that
    revision's schema holds them (a new revision without one fails here).
    """

    migrate = False

    def test_upgrade_keeps_data(self):
        seeded = []
        for revision in _revisions_oldest_first():
            migration.upgrade(self.db, revision)
            for earlier in seeded:
                getattr(self, "_verify_%s" % earlier)()
            getattr(self, "_seed_%s" % revision)()
            seeded.append(revision)
        # A repeated sync on a database full of data changes nothing.
        migration.upgrade(self.db)
        for earlier in seeded:
            getattr(self, "_verify_%s" % earlier)()
        gs = api.GrantScheduler(self.db)
        self.assertEqual([], gs.check())
        # The live grants written before 0005 are consumed by claims after
        # it, of exactly their amounts: the one of no instance is found by
        # its request and the text of its resources alone.
        for instance_uuid, amount, request_id, ticket in (
            (SEEDED4["won"], Resources(2, 2048, 20), None, 2),
            (SEEDED4["unnamed"], Resources(1, 512, 0), "req-seeded4", 3),
        ):
            outcome = gs.claim(
                instance_uuid,
                "seeded4",
                "seeded4-node",
                amount,
                request_id=request_id,
            )
            self.assertEqual(
                (storage.CLAIM_BY_GRANT, ticket, amount),
                (outcome.how, outcome.grant_ticket, outcome.resources),
            )
        with self.db.connect() as conn:
            books = _inventories(conn, "seeded4")
            grants = _grant_texts(conn, "seed-0004")
            claims = _claim_texts(conn, "seeded4")
        # Both moved from live grants into usage.
        claimed = _plus(
            SEEDED4_BOOKS, used=(3, 2560, 20), granted=(-3, -2560, -20)
        )
        self.assertEqual(claimed, books)
        self.assertEqual(
            {
                1: ("consumed", SEEDED4["claimed"], None, TEXT_4_4096_40),
                2: ("consumed", SEEDED4["won"], None, TEXT_2_2048_20),
                3: ("consumed", None, "req-seeded4", TEXT_1_512),
            },
            grants,
        )
        self.assertEqual(
            {
                SEEDED4["claimed"]: (1, TEXT_4_4096_40),
                SEEDED4["rechecked"]: (None, TEXT_1_1024),
                SEEDED4["won"]: (2, TEXT_2_2048_20),
                SEEDED4["unnamed"]: (3, TEXT_1_512),
            },
            claims,
        )
        # New grants fit within the capacity 0005 carried over, and no
        # further: of disk's (200 - 10) x 0.75 = 142 (rounded down), the
        # 77 GB not used hold 12 instances of 6 GB, not 13.
        self.assertEqual(12, _grants_until_full(gs, "seeded4", 1, 1024, 6))
        with self.db.connect() as conn:
            books = _inventories(conn, "seeded4")
        self.assertEqual(_plus(claimed, granted=(12, 12288, 72)), books)
        self.assertEqual([], gs.check())
        [selection] = gs.schedule(1, 1024, 10)
        self.assertEqual("seeded", selection.host)
        gs.claim(SEEDED_WON, "seeded", "seeded-node")
        gs.claim(SEEDED_PENDING, "seeded", "seeded-node")
        outcome = gs.claim(SEEDED5_WON, "seeded5", "seeded5-node")
        self.assertEqual(
            (storage.CLAIM_BY_GRANT, Resources(CUSTOM_BAREMETAL_GOLD=1)),
            (outcome.how, outcome.resources),
        )
        self.assertEqual([], gs.check())

    def _seed_0001_initial_schema(self):
        now = sa.func.current_timestamp()
        with self.db.writer() as conn:
            host_id = conn.execute(
                _OLD_HOSTS.insert().values(
                    host="seeded",
                    node="seeded-node",
                    vcpus=16,
                    memory_mb=32768,
                    disk_gb=500,
                    vcpus_used=2,
                    memory_mb_used=4096,
                    disk_gb_used=40,
                    reserved_vcpus=0,
                    reserved_memory_mb=0,
                    reserved_disk_gb=0,
                    cpu_allocation_ratio=1.0,
                    ram_allocation_ratio=1.0,
                    disk_allocation_ratio=1.0,
                    ticket=4,
                    last_grant_ticket=1,
                    generation=0,
                    created_at=now,
                )
            ).inserted_primary_key[0]
            for ticket, state, uuid in (
                (1, "consumed", SEEDED_CLAIMED),
                (2, "won", SEEDED_WON),
                (3, "pending", SEEDED_PENDING),
                (4, "lost", SEEDED_LOST),
            ):
                conn.execute(
                    _OLD_GRANTS.insert().values(
                        host_id=host_id,
                        ticket=ticket,
                        instance_uuid=uuid,
                        scheduler="seed",
                        vcpus=2,
                        memory_mb=4096,
                        disk_gb=40,
                        state=state,
                        created_at=now,
                    )
                )
            conn.execute(
                _OLD_CLAIMS.insert().values(
                    instance_uuid=SEEDED_CLAIMED,
                    host_id=host_id,
                    vcpus=2,
                    memory_mb=4096,
                    disk_gb=40,
                    grant_ticket=1,
                    created_at=now,
                )
            )

    def _seed_0002_hosts_updated_at_index(self):
        with self.db.writer() as conn:
            conn.execute(
                _OLD_HOSTS.insert().values(
                    host="seeded2",
                    node="seeded2-node",
                    vcpus=1,
                    memory_mb=1,
                    disk_gb=0,
                    reserved_vcpus=0,
                    reserved_memory_mb=0,
                    reserved_disk_gb=0,
                    cpu_allocation_ratio=1.0,
                    ram_allocation_ratio=1.0,
                    disk_allocation_ratio=1.0,
                    vcpus_used=0,
                    memory_mb_used=0,
                    disk_gb_used=0,
                    ticket=0,
                    last_grant_ticket=0,
                    generation=0,
                    created_at=sa.func.current_timestamp(),
                    updated_at=sa.func.current_timestamp(),
                )
            )

    def _seed_0003_grants_in_write(self):
        """The two states 0003's check admits and no code of the product
        writes: an unverified grant of the benchmark's naive baseline (not
        counted in its node's row) and a lost one."""
        with self.db.writer() as conn:
            host_id = conn.execute(
                sa_compat.select(models.hosts.c.id).where(
                    models.hosts.c.host == "seeded"
                )
            ).scalar()
            for ticket, state in ((10, "pending"), (11, "lost")):
                conn.execute(
                    _OLD_GRANTS.insert().values(
                        host_id=host_id,
                        ticket=ticket,
                        instance_uuid=SEEDED_UNWRITTEN[state],
                        scheduler="seed-0003",
                        vcpus=2,
                        memory_mb=4096,
                        disk_gb=40,
                        state=state,
                        created_at=self.db.now(),
                        expires_at=self.db.now(600),
                    )
                )

    def _seed_0004_grant_states_written(self):
        """A node with everything 0005 moves to books by class: reserved
        amounts and ratios other than 1.0 (the limits their rounded down
        product), live grants (one of no instance and no disk), a consumed
        grant and its claim, a claim of no grant, and usage no claim
        accounts for; and a node deleted, whose id no later node gets."""
        now = self.db.now()
        with self.db.writer() as conn:
            host_id = conn.execute(
                _OLD_HOSTS.insert().values(
                    host="seeded4",
                    node="seeded4-node",
                    vcpus=8,
                    memory_mb=16384,
                    disk_gb=200,
                    reserved_vcpus=1,
                    reserved_memory_mb=512,
                    reserved_disk_gb=10,
                    cpu_allocation_ratio=4.0,
                    ram_allocation_ratio=1.5,
                    disk_allocation_ratio=0.75,
                    limit_vcpus=28,
                    limit_memory_mb=23808,
                    limit_disk_gb=142,
                    # The two claims below, and the external usage.
                    vcpus_used=6,
                    memory_mb_used=5376,
                    disk_gb_used=45,
                    external_vcpus=1,
                    external_memory_mb=256,
                    external_disk_gb=5,
                    # The two live grants below.
                    granted_vcpus=3,
                    granted_memory_mb=2560,
                    granted_disk_gb=20,
                    ticket=3,
                    last_grant_ticket=1,
                    last_grant_at=now,
                    created_at=now,
                    updated_at=now,
                )
            ).inserted_primary_key[0]
            for ticket, state, uuid, request_id, amounts in (
                (1, "consumed", SEEDED4["claimed"], None, (4, 4096, 40)),
                (2, "won", SEEDED4["won"], None, (2, 2048, 20)),
                (3, "won", None, "req-seeded4", (1, 512, 0)),
            ):
                conn.execute(
                    _OLD_GRANTS.insert().values(
                        host_id=host_id,
                        ticket=ticket,
                        instance_uuid=uuid,
                        request_id=request_id,
                        scheduler="seed-0004",
                        state=state,
                        created_at=now,
                        expires_at=self.db.now(600),
                        consumed_at=now if state == "consumed" else None,
                        **dict(zip(DIMENSIONS, amounts)),
                    )
                )
            for uuid, ticket, amounts in (
                (SEEDED4["claimed"], 1, (4, 4096, 40)),
                (SEEDED4["rechecked"], None, (1, 1024, 0)),
            ):
                conn.execute(
                    _OLD_CLAIMS.insert().values(
                        instance_uuid=uuid,
                        host_id=host_id,
                        grant_ticket=ticket,
                        created_at=now,
                        **dict(zip(DIMENSIONS, amounts)),
                    )
                )
        with self.db.writer() as conn:
            self.deleted_host_id = conn.execute(
                _OLD_HOSTS.insert().values(
                    host="deleted4",
                    node="deleted4-node",
                    cpu_allocation_ratio=1.0,
                    ram_allocation_ratio=1.0,
                    disk_allocation_ratio=1.0,
                    ticket=0,
                    last_grant_ticket=0,
                    created_at=now,
                    **{name: 0 for name in _OLD_HOST_AMOUNTS},
                )
            ).inserted_primary_key[0]
        with self.db.writer() as conn:
            conn.execute(
                _OLD_HOSTS.delete().where(
                    _OLD_HOSTS.c.id == self.deleted_host_id
                )
            )

    def _seed_0005_books_by_class(self):
        """An Ironic node, whose one class is its own (none of the three),
        and a live grant of it."""
        now = self.db.now()
        with self.db.writer() as conn:
            host_id = conn.execute(
                models.hosts.insert().values(
                    host="seeded5",
                    node="seeded5-node",
                    ticket=1,
                    last_grant_ticket=0,
                    created_at=now,
                    updated_at=now,
                )
            ).inserted_primary_key[0]
            conn.execute(
                models.inventories.insert().values(
                    host_id=host_id,
                    resource_class="CUSTOM_BAREMETAL_GOLD",
                    total=1,
                    reserved=0,
                    allocation_ratio=1.0,
                    min_unit=1,
                    max_unit=1,
                    step_size=1,
                    capacity=1,
                    used=0,
                    external=0,
                    granted=1,
                )
            )
            conn.execute(
                models.grants.insert().values(
                    host_id=host_id,
                    ticket=1,
                    instance_uuid=SEEDED5_WON,
                    scheduler="seed-0005",
                    resources=models.encode(
                        Resources(CUSTOM_BAREMETAL_GOLD=1)
                    ),
                    state="won",
                    created_at=now,
                    expires_at=self.db.now(600),
                )
            )

    def _verify_0005_books_by_class(self):
        with self.db.connect() as conn:
            host_id = conn.execute(
                sa_compat.select(models.hosts.c.id).where(
                    models.hosts.c.host == "seeded5"
                )
            ).scalar()
            books = _inventories(conn, "seeded5")
            grants = _grant_texts(conn, "seed-0005")
        # A deleted node's id is not given to a new node (SQLite's copy of
        # gs_hosts in 0005 kept its AUTOINCREMENT counter).
        self.assertGreater(host_id, self.deleted_host_id)
        self.assertEqual(
            {"CUSTOM_BAREMETAL_GOLD": (1, 0, 1.0, 1, 1, 1, 1, 0, 0, 1)},
            books,
        )
        self.assertEqual(
            {1: ("won", SEEDED5_WON, None, '{"CUSTOM_BAREMETAL_GOLD":1}')},
            grants,
        )

    def _verify_0004_grant_states_written(self):
        with self.db.connect() as conn:
            states = dict(
                conn.execute(
                    sa_compat.select(
                        models.grants.c.instance_uuid, models.grants.c.state
                    ).where(
                        models.grants.c.scheduler.in_(("seed", "seed-0003"))
                    )
                ).fetchall()
            )
        # The product's grants stay; the two states it never wrote went.
        self.assertEqual(
            {
                SEEDED_CLAIMED: "consumed",
                SEEDED_WON: "won",
                SEEDED_PENDING: "won",
            },
            states,
        )
        _assert_only_written_states(self, self.db)
        # What 0005 made of the node seeded here (this runs from 0005 on).
        with self.db.connect() as conn:
            books = _inventories(conn, "seeded4")
            host = conn.execute(
                sa_compat.select(
                    models.hosts.c.ticket, models.hosts.c.last_grant_ticket
                ).where(models.hosts.c.host == "seeded4")
            ).fetchone()
            grants = _grant_texts(conn, "seed-0004")
            claims = _claim_texts(conn, "seeded4")
            deleted = conn.execute(
                sa_compat.select(sa.func.count()).where(
                    models.inventories.c.host_id == self.deleted_host_id
                )
            ).scalar()
        self.assertEqual(SEEDED4_BOOKS, books)
        self.assertEqual((3, 1), tuple(host))
        # The amounts of grants and claims, as ``models.encode`` writes
        # them: a class of amount zero is left out.
        self.assertEqual(
            {
                1: ("consumed", SEEDED4["claimed"], None, TEXT_4_4096_40),
                2: ("won", SEEDED4["won"], None, TEXT_2_2048_20),
                3: ("won", None, "req-seeded4", TEXT_1_512),
            },
            grants,
        )
        self.assertEqual(
            {
                SEEDED4["claimed"]: (1, TEXT_4_4096_40),
                SEEDED4["rechecked"]: (None, TEXT_1_1024),
            },
            claims,
        )
        # The deleted node's id went to no later node.
        self.assertEqual(0, deleted)
        if migration.current_revision(self.db) == migration.head_revision():
            # The code at head finds usage and live grants as they were.
            self.assertEqual([], api.GrantScheduler(self.db).check())

    def _verify_0003_grants_in_write(self):
        with self.db.connect() as conn:
            books = _standard_books(conn, self.db, "seeded")
            states = dict(
                conn.execute(
                    sa_compat.select(
                        models.grants.c.instance_uuid, models.grants.c.state
                    ).where(models.grants.c.scheduler == "seed")
                ).fetchall()
            )
            expires = conn.execute(
                sa_compat.select(models.grants.c.expires_at).where(
                    models.grants.c.expires_at.is_(None)
                )
            ).fetchall()
        self.assertEqual((16, 32768, 500), books["capacity"])
        # The won grant and the undecided one are live; the lost one went.
        self.assertEqual((4, 8192, 80), books["granted"])
        self.assertEqual((0, 0, 0), books["external"])
        self.assertEqual(
            {
                SEEDED_CLAIMED: "consumed",
                SEEDED_WON: "won",
                SEEDED_PENDING: "won",
            },
            states,
        )
        self.assertEqual([], expires)

    def _verify_0002_hosts_updated_at_index(self):
        with self.db.connect() as conn:
            self.assertEqual(
                1,
                conn.execute(
                    sa_compat.select(sa.func.count()).where(
                        _OLD_HOSTS.c.host == "seeded2"
                    )
                ).scalar(),
            )
            if _at_or_after(self.db, BOOKS_BY_CLASS):
                self.assertEqual(SEEDED2_BOOKS, _inventories(conn, "seeded2"))

    def _verify_0001_initial_schema(self):
        with self.db.connect() as conn:
            host = conn.execute(
                sa_compat.select(
                    *(
                        _OLD_HOSTS.c[name]
                        for name in ("ticket", "created_at", "updated_at")
                    )
                ).where(_OLD_HOSTS.c.host == "seeded")
            ).fetchone()
            books = _standard_books(conn, self.db, "seeded")
            self.assertEqual(
                (16, 2, 4),
                (books["total"][0], books["used"][0], host.ticket),
            )
            revision = migration.current_revision(self.db)
            if revision != "0001_initial_schema":
                # 0002 stamped the row that had no updated_at.
                self.assertEqual(host.created_at, host.updated_at)
            grants = conn.execute(
                sa_compat.select(
                    models.grants.c.instance_uuid, models.grants.c.state
                )
                .where(models.grants.c.scheduler == "seed")
                .order_by(models.grants.c.ticket)
            ).fetchall()
            self.assertEqual(
                [(SEEDED_CLAIMED, "consumed"), (SEEDED_WON, "won")],
                [tuple(g) for g in grants][:2],
            )
            self.assertEqual(
                [SEEDED_CLAIMED],
                [
                    row[0]
                    for row in conn.execute(
                        sa_compat.select(models.claims.c.instance_uuid).where(
                            models.claims.c.host_id
                            == sa_compat.scalar_subquery(
                                sa_compat.select(_OLD_HOSTS.c.id).where(
                                    _OLD_HOSTS.c.host == "seeded"
                                )
                            )
                        )
                    )
                ],
            )
            if not _at_or_after(self.db, BOOKS_BY_CLASS):
                return
            self.assertEqual(SEEDED_BOOKS, _inventories(conn, "seeded"))
            self.assertEqual(
                {
                    1: ("consumed", SEEDED_CLAIMED, None, TEXT_2_4096_40),
                    2: ("won", SEEDED_WON, None, TEXT_2_4096_40),
                    3: ("won", SEEDED_PENDING, None, TEXT_2_4096_40),
                },
                _grant_texts(conn, "seed"),
            )
            self.assertEqual(
                {SEEDED_CLAIMED: (1, TEXT_2_4096_40)},
                _claim_texts(conn, "seeded"),
            )


SEEDED_CLAIMED = "0f0e0d0c-0b0a-4909-8807-060504030201"
SEEDED_WON = "1f1e1d1c-1b1a-4919-8817-161514131211"
SEEDED_PENDING = "2f2e2d2c-2b2a-4929-8827-262524232221"
SEEDED_LOST = "3f3e3d3c-3b3a-4939-8837-363534333231"
SEEDED_UNWRITTEN = {
    "pending": "4f4e4d4c-4b4a-4949-8847-464544434241",
    "lost": "5f5e5d5c-5b5a-4959-8857-565554535251",
}
SEEDED4 = {
    "claimed": "6f6e6d6c-6b6a-4969-8867-666564636261",
    "won": "7f7e7d7c-7b7a-4979-8877-767574737271",
    "rechecked": "8f8e8d8c-8b8a-4989-8887-868584838281",
    "unnamed": "9f9e9d9c-9b9a-4999-8897-969594939291",
}
SEEDED5_WON = "af0e0d0c-0b0a-4909-8807-0605040302a1"

BOOKS_BY_CLASS = "0005_books_by_class"
DIMENSIONS = ("vcpus", "memory_mb", "disk_gb")
STANDARD_CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB")
INVENTORY_FIELDS = (
    "total",
    "reserved",
    "allocation_ratio",
    "min_unit",
    "max_unit",
    "step_size",
    "capacity",
    "used",
    "external",
    "granted",
)
# The gs_hosts columns before 0005 of what became inventory fields.
_OLD_HOST_FIELDS = {
    "total": "%s",
    "capacity": "limit_%s",
    "used": "%s_used",
    "external": "external_%s",
    "granted": "granted_%s",
}

# The gs_inventories rows 0005 writes for the seeded nodes, every field
# (``_inventories``): each amount, reserved amount and ratio its class's
# inventory, one instance no larger than the node (``max_unit``), and the
# limit, usage, external usage and live grants the class's capacity,
# used, external and granted.
SEEDED_BOOKS = {
    # total, reserved, allocation_ratio, min_unit, max_unit, step_size,
    # capacity, used, external, granted
    "VCPU": (16, 0, 1.0, 1, 16, 1, 16, 2, 0, 4),
    "MEMORY_MB": (32768, 0, 1.0, 1, 32768, 1, 32768, 4096, 0, 8192),
    "DISK_GB": (500, 0, 1.0, 1, 500, 1, 500, 40, 0, 80),
}
# A class of total zero is a row that admits nothing.
SEEDED2_BOOKS = {
    "VCPU": (1, 0, 1.0, 1, 1, 1, 1, 0, 0, 0),
    "MEMORY_MB": (1, 0, 1.0, 1, 1, 1, 1, 0, 0, 0),
    "DISK_GB": (0, 0, 1.0, 1, 0, 1, 0, 0, 0, 0),
}
# Reserved amounts and ratios other than 1.0: the capacity is the limit
# 0004 held, (total - reserved) x ratio rounded down.
SEEDED4_BOOKS = {
    "VCPU": (8, 1, 4.0, 1, 8, 1, 28, 6, 1, 3),
    "MEMORY_MB": (16384, 512, 1.5, 1, 16384, 1, 23808, 5376, 256, 2560),
    "DISK_GB": (200, 10, 0.75, 1, 200, 1, 142, 45, 5, 20),
}

# The canonical text of each amount the seeds wrote (``models.encode``).
TEXT_2_4096_40 = '{"VCPU":2,"MEMORY_MB":4096,"DISK_GB":40}'
TEXT_4_4096_40 = '{"VCPU":4,"MEMORY_MB":4096,"DISK_GB":40}'
TEXT_2_2048_20 = '{"VCPU":2,"MEMORY_MB":2048,"DISK_GB":20}'
TEXT_1_512 = '{"VCPU":1,"MEMORY_MB":512}'
TEXT_1_1024 = '{"VCPU":1,"MEMORY_MB":1024}'


def _at_or_after(database, revision):
    """Whether the schema of ``database`` is at ``revision`` or later."""
    revisions = _revisions_oldest_first()
    current = migration.current_revision(database)
    return revisions.index(current) >= revisions.index(revision)


def _inventories(conn, host):
    """The gs_inventories rows of the node of ``host``: ``{resource
    class: (every field, in the order of INVENTORY_FIELDS)}``."""
    inventories = models.inventories
    found = conn.execute(
        sa_compat.select(
            inventories.c.resource_class,
            *(inventories.c[name] for name in INVENTORY_FIELDS),
        )
        .select_from(
            inventories.join(
                models.hosts, models.hosts.c.id == inventories.c.host_id
            )
        )
        .where(models.hosts.c.host == host)
    ).fetchall()
    return {row[0]: tuple(row[1:]) for row in found}


def _plus(books, **amounts):
    """``books`` (as ``_inventories`` reads them) with amounts added to
    fields, class by class: ``used=(VCPU, MEMORY_MB, DISK_GB)``."""
    added = {}
    for index, name in enumerate(STANDARD_CLASSES):
        row = list(books[name])
        for field, values in amounts.items():
            row[INVENTORY_FIELDS.index(field)] += values[index]
        added[name] = tuple(row)
    return added


def _standard_books(conn, database, host):
    """The node's total, capacity, usage, usage no claim accounts for and
    live grants, each as ``(VCPU, MEMORY_MB, DISK_GB)``, read from the
    schema the database is at: the gs_hosts row's columns before 0005,
    its gs_inventories rows since."""
    if _at_or_after(database, BOOKS_BY_CLASS):
        books = _inventories(conn, host)
        return {
            field: tuple(
                books[name][INVENTORY_FIELDS.index(field)]
                for name in STANDARD_CLASSES
            )
            for field in _OLD_HOST_FIELDS
        }
    columns = {
        field: [pattern % name for name in DIMENSIONS]
        for field, pattern in _OLD_HOST_FIELDS.items()
    }
    if not _at_or_after(database, "0003_grants_in_write"):
        for field in ("capacity", "external", "granted"):
            del columns[field]
    row = conn.execute(
        sa_compat.select(
            *(
                _OLD_HOSTS.c[name]
                for names in columns.values()
                for name in names
            )
        ).where(_OLD_HOSTS.c.host == host)
    ).fetchone()
    row = sa_compat.mapping(row)
    return {
        field: tuple(row[name] for name in names)
        for field, names in columns.items()
    }


def _grant_texts(conn, scheduler):
    """``{ticket: (state, instance uuid, request id, resources)}`` of the
    grants ``scheduler`` wrote."""
    grants = models.grants
    return {
        row[0]: tuple(row[1:])
        for row in conn.execute(
            sa_compat.select(
                grants.c.ticket,
                grants.c.state,
                grants.c.instance_uuid,
                grants.c.request_id,
                grants.c.resources,
            ).where(grants.c.scheduler == scheduler)
        )
    }


def _claim_texts(conn, host):
    """``{instance uuid: (grant ticket, resources)}`` of the claims on
    the node of ``host``."""
    claims, hosts = models.claims, models.hosts
    return {
        row[0]: tuple(row[1:])
        for row in conn.execute(
            sa_compat.select(
                claims.c.instance_uuid,
                claims.c.grant_ticket,
                claims.c.resources,
            )
            .select_from(claims.join(hosts, hosts.c.id == claims.c.host_id))
            .where(hosts.c.host == host)
        )
    }


def _grants_until_full(gs, host, vcpus, memory_mb, disk_gb):
    """How many grants of one size the node of ``host`` takes, one
    request at a time, before NoValidHost."""
    for placed in range(1000):
        try:
            gs.schedule(vcpus, memory_mb, disk_gb, force_hosts=[host])
        except exception.NoValidHost:
            return placed
    raise AssertionError("%s took 1000 grants and more" % host)


def _assert_only_written_states(test, database):
    """The state check admits the states the product writes, no other."""
    values = dict(
        host_id=999999,
        scheduler="check",
        created_at=database.now(),
        expires_at=database.now(600),
    )
    if _at_or_after(database, BOOKS_BY_CLASS):
        grants = models.grants
        values.update(resources=models.encode(Resources(1, 1, 1)))
    else:
        grants = _OLD_GRANTS
        values.update(vcpus=1, memory_mb=1, disk_gb=1)
    for ticket, state in enumerate(("pending", "lost", "granted")):
        with test.subTest(state=state):
            # NOTE: MariaDB's refusal (4025) is not one oslo.db translates.
            with test.assertRaises((db_exc.DBError, sa.exc.DBAPIError)):
                with database.writer() as conn:
                    conn.execute(
                        grants.insert().values(
                            ticket=ticket, state=state, **values
                        )
                    )
    with database.writer() as conn:
        for ticket, state in enumerate(("won", "consumed"), start=10):
            conn.execute(
                grants.insert().values(ticket=ticket, state=state, **values)
            )
        conn.execute(grants.delete().where(grants.c.host_id == 999999))


# The tables as revisions before 0005 had them, for the seeds: the union
# of their columns (a seed names those of its revision).
_OLD_HOST_AMOUNTS = [
    pattern % name
    for pattern in (
        "%s",
        "reserved_%s",
        "%s_used",
        "limit_%s",
        "external_%s",
        "granted_%s",
    )
    for name in DIMENSIONS
]
_OLD_HOSTS = sa.Table(
    "gs_hosts",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True),
    *(
        sa.Column(name)
        for name in (
            "host node cpu_allocation_ratio ram_allocation_ratio "
            "disk_allocation_ratio ticket last_grant_ticket last_grant_at "
            "generation created_at updated_at"
        ).split()
        + _OLD_HOST_AMOUNTS
    ),
)
_OLD_GRANTS = sa.Table(
    "gs_grants",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True),
    *(
        sa.Column(name)
        for name in (
            "host_id ticket instance_uuid request_id scheduler vcpus "
            "memory_mb disk_gb state created_at expires_at consumed_at"
        ).split()
    ),
)
_OLD_CLAIMS = sa.Table(
    "gs_claims",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True),
    *(
        sa.Column(name)
        for name in (
            "instance_uuid host_id vcpus memory_mb disk_gb grant_ticket "
            "created_at"
        ).split()
    ),
)


def _alembic(extra_env, *args):
    env = dict(os.environ)
    env.pop(migration.URL_ENV, None)
    env.pop(migration.CONFIG_FILE_ENV, None)
    env.update(extra_env)
    return subprocess.run(
        [*ALEMBIC, *(args or ("upgrade", "head"))],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _table_names(database):
    with database.connect() as conn:
        return sorted(sa.inspect(conn).get_table_names())


@base.with_scenarios(base.ALL_BACKENDS)
class InterruptedMigration(base.DatabaseTestCase):
    """Tables left without a recorded revision (a first migration cut off,
    or DDL that MySQL and SQLite cannot roll back)."""

    def _lose_revision(self, how):
        with self.db.writer() as conn:
            if how == "no table":
                conn.execute(sa.text("DROP TABLE alembic_version"))
            else:
                conn.execute(sa.text("DELETE FROM alembic_version"))

    def test_upgrade_and_check_explain_the_state(self):
        for how in ("empty table", "no table"):
            with self.subTest(how=how):
                self._lose_revision(how)
                before = _table_names(self.db)
                for call in (migration.upgrade, migration.check_schema):
                    with self.assertRaises(
                        exception.SchemaInterrupted
                    ) as caught:
                        call(self.db)
                    message = str(caught.exception)
                    self.assertIn("gs_claims, gs_grants, gs_hosts", message)
                    self.assertIn("alembic stamp", message)
                self.assertEqual(before, _table_names(self.db))
                self.assertIsNone(migration.current_revision(self.db))
                # What the message says to do works.
                result = _alembic(
                    {migration.URL_ENV: self.db_fixture.url}, "stamp", "head"
                )
                self.assertEqual(0, result.returncode, result.stderr)
                migration.upgrade(self.db)
                migration.check_schema(self.db)

    def test_plain_alembic_says_it_in_one_line(self):
        self._lose_revision("no table")
        result = _alembic({migration.URL_ENV: self.db_fixture.url})
        self.assertNotEqual(0, result.returncode)
        # NOTE: alembic prints its one "FAILED:" line on standard output.
        output = result.stdout + result.stderr
        self.assertNotIn("Traceback", output)
        lines = output.strip().splitlines()
        self.assertEqual(1, len(lines), output)
        self.assertIn("FAILED: ", lines[0])
        self.assertIn("no schema revision", lines[0])


class TestPlainAlembicRefusals(base.TestCase):
    """Bad input to a plain ``alembic upgrade head``: one line, no secret."""

    def assertOneLine(self, result, *fragments, secrets=()):
        self.assertNotEqual(0, result.returncode)
        output = result.stdout + result.stderr
        self.assertNotIn("Traceback", output)
        lines = output.strip().splitlines()
        self.assertEqual(1, len(lines), output)
        self.assertTrue(lines[0].startswith("FAILED: "), lines[0])
        for fragment in fragments:
            self.assertIn(fragment, lines[0])
        for secret in secrets:
            self.assertNotIn(secret, output)

    def test_raw_special_characters_in_the_password(self):
        for char in ("@", "/", "?", "#", "%", "@:"):
            with self.subTest(char=char):
                url = "mysql+pymysql://gs:Left1xq%sRight2zw@127.0.0.1/gs" % (
                    char
                )
                result = _alembic({migration.URL_ENV: url})
                self.assertOneLine(
                    result,
                    "percent-encoded",
                    secrets=("Left1xq", "Right2zw"),
                )

    def test_port_that_is_not_a_number(self):
        result = _alembic(
            {migration.URL_ENV: "mysql+pymysql://gs:pw@127.0.0.1:x1/gs"}
        )
        self.assertOneLine(result, "port is not a number")

    def test_config_file_without_a_connection(self):
        path = base.temp_config_file(
            self, "[grant_scheduler_db]\nconnection = sqlite:///x.sqlite\n"
        )
        result = _alembic({migration.CONFIG_FILE_ENV: path})
        self.assertOneLine(result, "connection is not set", "misspelt")

    def test_config_file_with_a_dollar(self):
        path = base.temp_config_file(
            self,
            "[grant_scheduler_database]\n"
            "connection = mysql+pymysql://gs:Left1xq$Right2zw@127.0.0.1/gs\n",
        )
        result = _alembic({migration.CONFIG_FILE_ENV: path})
        self.assertOneLine(result, "'$$'", secrets=("Right2zw",))

    def test_config_file_with_a_bad_value(self):
        directory = self.useFixture(base.fixtures.TempDir()).path
        path = base.temp_config_file(
            self,
            "[grant_scheduler_database]\nconnection = sqlite:///%s/x.sqlite\n"
            "max_pool_size = abc\n" % directory,
        )
        result = _alembic({migration.CONFIG_FILE_ENV: path})
        self.assertOneLine(result, "max_pool_size")

    def test_binary_config_file(self):
        directory = self.useFixture(base.fixtures.TempDir()).path
        path = os.path.join(directory, "binary.conf")
        with open(path, "wb") as f:
            f.write(bytes(range(256)))
        result = _alembic({migration.CONFIG_FILE_ENV: path})
        self.assertOneLine(result, "not a text file")


@base.with_scenarios(base.ALL_BACKENDS)
class MigrationLock(base.DatabaseTestCase):
    migrate = False

    def other(self):
        other = db_api.Database(self.db_fixture.url)
        self.addCleanup(other.dispose)
        return other

    def test_second_holder_waits_then_gives_up(self):
        with migration.migration_lock(self.db) as held:
            self.assertTrue(held)
            with self.assertRaises(exception.MigrationLocked) as caught:
                with migration.migration_lock(self.other(), timeout=1):
                    self.fail("the lock was taken twice")
            self.assertIn("db sync", str(caught.exception))
        # Released: the next one gets it at once.
        with migration.migration_lock(self.other(), timeout=1) as held:
            self.assertTrue(held)

    def test_upgrade_waits_for_the_holder(self):
        path = base.temp_config_file(
            self,
            "[grant_scheduler_database]\nconnection = %s\n"
            % self.db_fixture.url,
        )
        with migration.migration_lock(self.db):
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "grant_scheduler.cmd.manage",
                    "--config-file",
                    path,
                    "db",
                    "sync",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            self.assertRaises(
                subprocess.TimeoutExpired, process.wait, timeout=5
            )
            # Meanwhile the holder migrates, as a rival db sync would.
            with fixtures.MonkeyPatch(
                "grant_scheduler.db.migration.migration_lock", _no_lock
            ):
                migration.upgrade(self.db)
        output, _ = process.communicate(timeout=120)
        self.assertEqual(0, process.returncode, output)
        self.assertIn("is at revision %s" % migration.head_revision(), output)


@contextlib.contextmanager
def _no_lock(database, timeout=None):
    yield True


class MysqlWithoutLock(base.DatabaseTestCase, base.TestCase):
    """A server that refuses GET_LOCK (Galera before MariaDB 10.11.5)."""

    backend = "mysql"
    migrate = False

    def test_upgrade_goes_on_unlocked(self):
        logger = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        # NOTE: a name longer than MySQL allows makes GET_LOCK fail, as
        # Galera's "not supported" does.
        self.useFixture(
            fixtures.MonkeyPatch(
                "grant_scheduler.db.migration._mysql_lock_name",
                lambda database: "x" * 200,
            )
        )
        with migration.migration_lock(self.db) as held:
            self.assertFalse(held)
        self.assertIn("No migration lock", logger.output)
        migration.upgrade(self.db)
        migration.check_schema(self.db)

    def test_a_failure_after_another_finished_is_success(self):
        migration.upgrade(self.db)
        self.useFixture(
            fixtures.MonkeyPatch(
                "grant_scheduler.db.migration.migration_lock", _unlocked
            )
        )

        def collide(config, revision):
            raise db_exc.DBError("Table 'gs_hosts' already exists")

        self.useFixture(
            fixtures.MonkeyPatch(
                "grant_scheduler.db.migration.alembic_command.upgrade",
                collide,
            )
        )
        migration.upgrade(self.db)  # at head already: nothing to report
        with self.db.writer() as conn:
            conn.execute(
                sa.text(
                    "UPDATE alembic_version SET version_num = "
                    "'0001_initial_schema'"
                )
            )
        self.assertRaises(db_exc.DBError, migration.upgrade, self.db)


@contextlib.contextmanager
def _unlocked(database, timeout=None):
    yield False
