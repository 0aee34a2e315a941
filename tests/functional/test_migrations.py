"""Migrations on SQLite, MySQL and PostgreSQL: walk, sync and the CLIs."""

import os
import subprocess
import sys

import sqlalchemy as sa
from oslo_db.sqlalchemy import test_migrations

from grant_scheduler import api
from grant_scheduler import exception
from grant_scheduler.db import api as db_api
from grant_scheduler.db import migration
from grant_scheduler.db import models
from tests import base

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
                engines = conn.exec_driver_sql(
                    "SELECT table_name, engine "
                    "FROM information_schema.tables "
                    "WHERE table_schema = DATABASE() "
                    "AND table_name LIKE 'gs\\_%%'"
                ).all()
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
            conn.exec_driver_sql(
                "UPDATE alembic_version SET version_num = '9999_future'"
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
                        created_at=db_api.utcnow(),
                    )
                )
        with self.db.reader() as conn:
            for (created_at,) in conn.execute(
                sa.select(models.hosts.c.created_at)
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
            [sys.executable, "-m", "alembic", "upgrade", "head"],
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


@base.with_scenarios(base.ALL_BACKENDS)
class ModelsMigrationsSync(
    base.DatabaseTestCase, test_migrations.ModelsMigrationsSync
):
    """The models and the migrations describe the same schema."""

    migrate = False

    def db_sync(self, engine):
        migration.upgrade(self.db)

    def get_engine(self):
        return self.db.get_engine()

    def get_metadata(self):
        return models.Base.metadata

    def include_object(self, object_, name, type_, reflected, compare_to):
        return not (type_ == "table" and name == "alembic_version")


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
        gs.claim("seeded-won", "seeded", "seeded-node")
        self.assertEqual([], gs.check())

    def _seed_0001_initial_schema(self):
        now = sa.func.current_timestamp()
        with self.db.connect() as conn:
            host_id = conn.execute(
                models.hosts.insert().values(
                    host="seeded",
                    node="seeded-node",
                    vcpus=16,
                    memory_mb=32768,
                    disk_gb=500,
                    vcpus_used=2,
                    memory_mb_used=4096,
                    disk_gb_used=40,
                    ticket=2,
                    last_grant_ticket=1,
                    created_at=now,
                )
            ).inserted_primary_key[0]
            for ticket, state, uuid in (
                (1, "consumed", "seeded-claimed"),
                (2, "won", "seeded-won"),
            ):
                conn.execute(
                    models.grants.insert().values(
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
                    instance_uuid="seeded-claimed",
                    host_id=host_id,
                    vcpus=2,
                    memory_mb=4096,
                    disk_gb=40,
                    grant_ticket=1,
                    created_at=now,
                )
            )
            conn.commit()

    def _seed_0002_hosts_updated_at_index(self):
        with self.db.connect() as conn:
            conn.execute(
                models.hosts.insert().values(
                    host="seeded2",
                    node="seeded2-node",
                    vcpus=1,
                    memory_mb=1,
                    disk_gb=0,
                    created_at=sa.func.current_timestamp(),
                    updated_at=sa.func.current_timestamp(),
                )
            )
            conn.commit()

    def _verify_0002_hosts_updated_at_index(self):
        with self.db.connect() as conn:
            self.assertEqual(
                1,
                conn.execute(
                    sa.select(sa.func.count()).where(
                        models.hosts.c.host == "seeded2"
                    )
                ).scalar(),
            )

    def _verify_0001_initial_schema(self):
        with self.db.connect() as conn:
            host = conn.execute(
                sa.select(models.hosts).where(models.hosts.c.host == "seeded")
            ).one()
            self.assertEqual(
                (16, 2, 2), (host.vcpus, host.vcpus_used, host.ticket)
            )
            revision = migration.current_revision(self.db)
            if revision != "0001_initial_schema":
                # 0002 stamped the row that had no updated_at.
                self.assertEqual(host.created_at, host.updated_at)
            grants = conn.execute(
                sa.select(models.grants.c.instance_uuid, models.grants.c.state)
                .where(models.grants.c.scheduler == "seed")
                .order_by(models.grants.c.ticket)
            ).all()
            self.assertEqual(
                [("seeded-claimed", "consumed"), ("seeded-won", "won")],
                [tuple(g) for g in grants],
            )
            self.assertEqual(
                "seeded-claimed",
                conn.execute(
                    sa.select(models.claims.c.instance_uuid)
                ).scalar_one(),
            )
