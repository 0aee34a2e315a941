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
from grant_scheduler.db import api as db_api
from grant_scheduler.db import migration
from grant_scheduler.db import models
from grant_scheduler.db import sa_compat
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
        [selection] = gs.schedule(1, 1024, 10)
        self.assertEqual("seeded", selection.host)
        gs.claim(SEEDED_WON, "seeded", "seeded-node")
        gs.claim(SEEDED_PENDING, "seeded", "seeded-node")
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
                models.claims.insert().values(
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
                    models.grants.insert().values(
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
        """Nothing new to seed: the verification reads what 0004 made."""

    def _verify_0004_grant_states_written(self):
        with self.db.connect() as conn:
            states = dict(
                conn.execute(
                    sa_compat.select(
                        models.grants.c.instance_uuid, models.grants.c.state
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

    def _verify_0003_grants_in_write(self):
        with self.db.connect() as conn:
            host = conn.execute(
                sa_compat.select(models.hosts).where(
                    models.hosts.c.host == "seeded"
                )
            ).fetchone()
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
        self.assertEqual(
            (16, 32768, 500),
            (host.limit_vcpus, host.limit_memory_mb, host.limit_disk_gb),
        )
        # The won grant and the undecided one are live; the lost one went.
        self.assertEqual(
            (4, 8192, 80),
            (host.granted_vcpus, host.granted_memory_mb, host.granted_disk_gb),
        )
        self.assertEqual(
            (0, 0, 0),
            (
                host.external_vcpus,
                host.external_memory_mb,
                host.external_disk_gb,
            ),
        )
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

    def _verify_0001_initial_schema(self):
        with self.db.connect() as conn:
            host = conn.execute(
                sa_compat.select(
                    *(
                        _OLD_HOSTS.c[name]
                        for name in (
                            "vcpus",
                            "vcpus_used",
                            "ticket",
                            "created_at",
                            "updated_at",
                        )
                    )
                ).where(_OLD_HOSTS.c.host == "seeded")
            ).fetchone()
            self.assertEqual(
                (16, 2, 4), (host.vcpus, host.vcpus_used, host.ticket)
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
                        sa_compat.select(models.claims.c.instance_uuid)
                    )
                ],
            )


SEEDED_CLAIMED = "0f0e0d0c-0b0a-4909-8807-060504030201"
SEEDED_WON = "1f1e1d1c-1b1a-4919-8817-161514131211"
SEEDED_PENDING = "2f2e2d2c-2b2a-4929-8827-262524232221"
SEEDED_LOST = "3f3e3d3c-3b3a-4939-8837-363534333231"
SEEDED_UNWRITTEN = {
    "pending": "4f4e4d4c-4b4a-4949-8847-464544434241",
    "lost": "5f5e5d5c-5b5a-4959-8857-565554535251",
}


def _assert_only_written_states(test, database):
    """The state check admits the states the product writes, no other."""
    grants = models.grants
    values = dict(
        host_id=999999,
        scheduler="check",
        vcpus=1,
        memory_mb=1,
        disk_gb=1,
        created_at=database.now(),
        expires_at=database.now(600),
    )
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


# The tables as revisions 0001 and 0002 had them, for the seeds.
_OLD_HOSTS = sa.Table(
    "gs_hosts",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True),
    *(
        sa.Column(name)
        for name in (
            "host node vcpus memory_mb disk_gb reserved_vcpus "
            "reserved_memory_mb reserved_disk_gb cpu_allocation_ratio "
            "ram_allocation_ratio disk_allocation_ratio vcpus_used "
            "memory_mb_used disk_gb_used ticket last_grant_ticket generation "
            "created_at updated_at"
        ).split()
    ),
)
_OLD_GRANTS = sa.Table(
    "gs_grants",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True),
    *(
        sa.Column(name)
        for name in (
            "host_id ticket instance_uuid scheduler vcpus memory_mb disk_gb "
            "state created_at"
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
