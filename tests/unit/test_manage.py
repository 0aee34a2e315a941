"""grant-scheduler-manage as an operator runs it: a real subprocess.

Every refusal is checked the same way (``assertOneLineError``): exit status
1, exactly one line on standard error starting with ``ERROR:``, no
traceback, and no secret anywhere in the output.
"""

import os
import subprocess
import sys

import sqlalchemy as sa

from grant_scheduler.db import migration
from grant_scheduler.db import sa_compat
from tests import base

SECRET = "s3cr3t-pa55word"
INSTANCE_1 = "6f4c1f0e-1111-4a3b-9c1d-0123456789ab"
INSTANCE_2 = "6f4c1f0e-2222-4a3b-9c1d-0123456789ab"
INSTANCE_3 = "6f4c1f0e-3333-4a3b-9c1d-0123456789ab"
GOLD = "CUSTOM_BAREMETAL_GOLD"
HOSTS_HEADER = (
    "host node class total reserved ratio min/max/step capacity used "
    "won grants free last ticket last grant at (UTC)"
).split()


def run_manage(args, cwd=None, env=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "grant_scheduler.cmd.manage", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


class ManageTestCase(base.TestCase):
    def manage(self, connection, *args, extra_conf=""):
        path = base.temp_config_file(
            self,
            "[grant_scheduler_database]\nconnection = %s\n%s"
            % (connection, extra_conf),
        )
        return run_manage(["--config-file", path, *args])

    def manage_with(self, text, *args, cwd=None):
        """Run with a configuration file holding exactly ``text``."""
        path = base.temp_config_file(self, text)
        return run_manage(["--config-file", path, *args], cwd=cwd)

    def assertOneLineError(self, result, *fragments, secrets=(SECRET,)):
        self.assertEqual(1, result.returncode, result)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertTrue(lines[0].startswith("ERROR: "), lines[0])
        self.assertNotIn("Traceback", result.stderr + result.stdout)
        for secret in secrets:
            self.assertNotIn(secret, result.stderr + result.stdout)
        for fragment in fragments:
            self.assertIn(fragment, lines[0])
        return lines[0]

    def sqlite_url(self, name="gs.sqlite"):
        directory = self.useFixture(base.fixtures.TempDir()).path
        return "sqlite:///%s" % os.path.join(directory, name)


class TestDbCommands(ManageTestCase):
    def setUp(self):
        super().setUp()
        self.url = self.sqlite_url()
        self.path = self.url[len("sqlite:///") :]

    def test_sync_then_version_prints_head(self):
        result = self.manage(self.url, "db", "sync")
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn(migration.head_revision(), result.stdout)
        result = self.manage(self.url, "db", "version")
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual(migration.head_revision(), result.stdout.strip())

    def test_sync_and_version_say_which_database(self):
        result = self.manage(self.url, "db", "sync")
        self.assertIn("Database %s (set in " % self.url, result.stdout)
        result = self.manage(self.url, "db", "version")
        self.assertIn("Database: %s (set in " % self.url, result.stderr)

    def test_sync_is_idempotent(self):
        for _ in range(2):
            result = self.manage(self.url, "db", "sync")
            self.assertEqual(0, result.returncode, result.stderr)

    def test_version_of_missing_database_says_run_sync(self):
        result = self.manage(self.url, "db", "version")
        self.assertOneLineError(result, "db sync", "does not exist")
        self.assertFalse(os.path.exists(self.path), "the file was created")

    def test_read_commands_do_not_create_the_file(self):
        for command in (
            ("hosts",),
            ("grants",),
            ("claims",),
            ("reap",),
            ("check",),
        ):
            with self.subTest(command=command):
                result = self.manage(self.url, *command)
                self.assertOneLineError(result, "db sync", "does not exist")
                self.assertFalse(os.path.exists(self.path))

    def test_version_of_unmigrated_database_says_no_tables(self):
        sa.create_engine(self.url).connect().close()  # an empty file
        result = self.manage(self.url, "db", "version")
        self.assertOneLineError(result, "db sync", "no tables")

    def test_unknown_or_relative_revisions_are_refused(self):
        for revision in ("nosuchrev", "-1", "+1", "head-1", "base", "0"):
            with self.subTest(revision=revision):
                result = self.manage(self.url, "db", "sync", revision)
                self.assertOneLineError(
                    result,
                    "Unknown schema revision %r" % revision,
                    migration.head_revision(),
                )
                self.assertFalse(os.path.exists(self.path))

    def test_revision_by_unique_prefix(self):
        result = self.manage(self.url, "db", "sync", "0001")
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn("0001_initial_schema", result.stdout)

    def test_interrupted_first_migration_is_explained(self):
        self.assertEqual(0, self.manage(self.url, "db", "sync").returncode)
        engine = sa.create_engine(self.url)
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE alembic_version"))
        engine.dispose()
        for command in (("db", "sync"), ("db", "version"), ("hosts",)):
            with self.subTest(command=command):
                result = self.manage(self.url, *command)
                self.assertOneLineError(
                    result,
                    "gs_claims, gs_grants, gs_hosts",
                    "no schema revision",
                    "alembic stamp",
                )


class TestBadDatabaseUrls(ManageTestCase):
    def test_malformed_url(self):
        result = self.manage("not a url at all", "db", "version")
        self.assertOneLineError(result, "not usable", "connection")

    def test_unknown_driver(self):
        result = self.manage(
            "nosuchdb+nodriver://admin:%s@127.0.0.1/gs" % SECRET, "db", "sync"
        )
        self.assertOneLineError(result, "not usable")

    def test_unreachable_server(self):
        # NOTE: port 9 (discard) is closed on the test machines, so the
        # connection is refused at once.
        result = self.manage(
            "mysql+pymysql://admin:%s@127.0.0.1:9/gs" % SECRET,
            "db",
            "sync",
            extra_conf="max_retries = 0\n",
        )
        self.assertOneLineError(result, "Cannot connect", "127.0.0.1:9")

    def test_unreachable_server_with_retries_is_still_one_line(self):
        # oslo.db logs a warning per failed attempt; it is not printed.
        result = self.manage(
            "mysql+pymysql://admin:%s@127.0.0.1:9/gs" % SECRET,
            "db",
            "version",
            extra_conf="max_retries = 2\nretry_interval = 0\n",
        )
        self.assertOneLineError(result, "Cannot connect", "127.0.0.1:9")

    def test_missing_sqlite_directory(self):
        for command in (("db", "version"), ("db", "sync"), ("hosts",)):
            with self.subTest(command=command):
                result = self.manage(
                    "sqlite:////nonexistent/dir/gs.sqlite", *command
                )
                self.assertOneLineError(result, "nonexistent")

    def test_port_that_is_not_a_number(self):
        for port in ("abc", "33o6", "3306x", " 3306"):
            with self.subTest(port=port):
                result = self.manage(
                    "mysql+pymysql://u:%s@127.0.0.1:%s/gs" % (SECRET, port),
                    "db",
                    "sync",
                )
                line = self.assertOneLineError(result, "port is not a number")
                self.assertNotIn(port.strip(), line)

    def test_raw_special_characters_in_the_password(self):
        # NOTE: each password has distinctive halves around the character,
        # so that no fragment of it may be printed either.
        def url(char):
            return "mysql+pymysql://gs:Left1xq%sRight2zw@127.0.0.1/gs" % char

        runs = [
            (char, ("db", "sync"), debug)
            for char in ("@", "/", "?", "#", "%", "@:", ":@", "/:")
            for debug in ((), ("--debug",))
        ]
        runs += [
            ("@", command, ())
            for command in (
                ("db", "version"),
                ("hosts",),
                ("grants",),
                ("claims",),
                ("reap",),
                ("check",),
            )
        ]
        for char, command, debug in runs:
            with self.subTest(char=char, command=command, debug=debug):
                result = self.manage(url(char), *debug, *command)
                self.assertOneLineError(
                    result,
                    "percent-encoded",
                    "%40",
                    secrets=("Left1xq", "Right2zw"),
                )

    def test_dollar_in_the_password(self):
        for password in ("Left1xq$Right2zw", "Left1xq${Right2zw}", "Rx$debug"):
            url = "mysql+pymysql://gs:%s@127.0.0.1:3306/gs" % password
            for command in (("db", "sync"), ("hosts",)):
                with self.subTest(password=password, command=command):
                    result = self.manage(url, *command)
                    self.assertOneLineError(
                        result,
                        "'$$'",
                        "[grant_scheduler_database] connection",
                        secrets=("Right2zw", "Rx$"),
                    )

    def test_escaped_dollar_is_taken_literally(self):
        # "$$" is one "$": the URL reaches the driver (which finds nothing
        # listening on port 9) instead of being refused.
        result = self.manage(
            "mysql+pymysql://gs:Left1xq$$Right2zw@127.0.0.1:9/gs",
            "db",
            "version",
            extra_conf="max_retries = 0\n",
        )
        self.assertOneLineError(
            result, "Cannot connect", secrets=("Right2zw", "Left1xq")
        )

    def test_password_in_the_query_is_masked(self):
        result = self.manage(
            "mysql+pymysql://gs@127.0.0.1:9/gs?password=%s&charset=utf8"
            % SECRET,
            "db",
            "version",
            extra_conf="max_retries = 0\n",
        )
        self.assertOneLineError(result, "Cannot connect", "password=***")


class TestConfigurationFiles(ManageTestCase):
    def setUp(self):
        super().setUp()
        self.cwd = self.useFixture(base.fixtures.TempDir()).path

    def assertNothingCreated(self):
        self.assertEqual([], os.listdir(self.cwd))

    def test_misspelt_group_is_refused(self):
        text = "[grant_scheduler_db]\nconnection = %s\n" % self.sqlite_url()
        for command in (("db", "sync"), ("db", "version"), ("hosts",)):
            with self.subTest(command=command):
                result = self.manage_with(text, *command, cwd=self.cwd)
                self.assertOneLineError(
                    result,
                    "[grant_scheduler_database] connection is not set in",
                    "[grant_scheduler_db]",
                    "misspelt",
                )
                self.assertNothingCreated()

    def test_empty_file_is_refused(self):
        for text in ("", "# nothing\n", "[grant_scheduler]\n"):
            with self.subTest(text=text):
                result = self.manage_with(text, "db", "sync", cwd=self.cwd)
                self.assertOneLineError(
                    result, "[grant_scheduler_database] connection is not set"
                )
                self.assertNothingCreated()

    def test_no_file_at_all_keeps_the_default_and_says_so(self):
        env = dict(os.environ, HOME=self.cwd)
        result = run_manage(["db", "version"], cwd=self.cwd, env=env)
        self.assertOneLineError(
            result, "does not exist", "the built-in default"
        )
        self.assertNothingCreated()
        result = run_manage(["db", "sync"], cwd=self.cwd, env=env)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn("the built-in default", result.stdout)
        self.assertIn("no configuration file was found", result.stdout)
        self.assertEqual(
            ["grant_scheduler.sqlite"],
            [
                name
                for name in os.listdir(self.cwd)
                if not name.endswith("-lock")
                and "-wal" not in name
                and "-shm" not in name
            ],
        )

    def test_missing_file(self):
        result = run_manage(
            ["--config-file", "/nonexistent/gs.conf", "db", "sync"]
        )
        self.assertOneLineError(result, "/nonexistent/gs.conf")

    def test_directory_instead_of_file(self):
        result = run_manage(
            ["--config-file", self.cwd, "db", "sync"], cwd=self.cwd
        )
        self.assertOneLineError(result, self.cwd, "is a directory")

    def test_binary_file(self):
        path = os.path.join(self.cwd, "binary.conf")
        with open(path, "wb") as f:
            f.write(bytes(range(256)) * 4)
        result = run_manage(["--config-file", path, "db", "sync"])
        self.assertOneLineError(result, path, "not a text file")

    def test_binary_file_in_config_dir(self):
        directory = os.path.join(self.cwd, "conf.d")
        os.mkdir(directory)
        with open(os.path.join(directory, "x.conf"), "wb") as f:
            f.write(b"\xff\xfe\x00garbage")
        result = run_manage(["--config-dir", directory, "db", "sync"])
        self.assertOneLineError(result, "x.conf", "not a text file")

    def test_syntax_error_does_not_quote_the_line(self):
        text = "[grant_scheduler_database\nconnection = mysql://u:%s@h/gs\n"
        result = self.manage_with(text % SECRET, "db", "sync")
        self.assertOneLineError(result, "cannot parse", ":1")
        text = "connection = mysql://u:%s@h/gs\n"
        result = self.manage_with(text % SECRET, "db", "sync")
        self.assertOneLineError(result, "cannot parse")

    def test_option_values_out_of_range_or_of_the_wrong_type(self):
        cases = [
            ("grant_scheduler", "grant_ttl", "-5", "from 1 to"),
            ("grant_scheduler", "grant_ttl", "abc", "invalid literal"),
            ("grant_scheduler", "host_subset_size", "0", "from 1 to"),
            ("grant_scheduler", "host_subset_size", "", "empty"),
            ("grant_scheduler", "max_fallovers", "1e9", "invalid literal"),
            ("grant_scheduler", "max_fallovers", "1000000000", "0 to 10000"),
            ("grant_scheduler", "reap_interval", "0", "from 1 to"),
            ("grant_scheduler", "reap_batch_size", "-1", "from 1 to"),
            ("grant_scheduler", "view_overlap", "abc", "could not convert"),
            ("grant_scheduler", "view_overlap", "nan", "finite"),
            ("grant_scheduler", "view_overlap", "inf", "finite"),
            ("grant_scheduler", "view_overlap", "-inf", "finite"),
            ("grant_scheduler", "view_resync_interval", "-1", "0.0 to"),
            ("grant_scheduler_database", "max_pool_size", "abc", "invalid"),
            ("grant_scheduler_database", "max_pool_size", "-3", "0 to"),
            ("grant_scheduler_database", "db_max_retries", "x", "invalid"),
            ("grant_scheduler_database", "db_retry_interval", "nan", "finite"),
            ("grant_scheduler_database", "db_inc_retry_interval", "maybe", ""),
        ]
        connection = self.sqlite_url()
        for group, name, value, reason in cases:
            if group == "grant_scheduler_database":
                text = "[%s]\nconnection = %s\n%s = %s\n" % (
                    group,
                    connection,
                    name,
                    value,
                )
            else:
                text = (
                    "[%s]\n%s = %s\n[grant_scheduler_database]\n"
                    "connection = %s\n" % (group, name, value, connection)
                )
            # Every command checks every value before it starts.
            command = ("hosts",) if name == "grant_ttl" else ("db", "sync")
            with self.subTest(name=name, value=value, command=command):
                result = self.manage_with(text, *command)
                line = self.assertOneLineError(
                    result,
                    "Invalid configuration: [%s] %s" % (group, name),
                    reason,
                )
                if value:
                    self.assertIn("= %s in " % value, line)

    def test_command_line_option_with_a_bad_value_in_a_file(self):
        text = "[DEFAULT]\ndebug = maybe\n[grant_scheduler_database]\n"
        text += "connection = %s\n" % self.sqlite_url()
        result = self.manage_with(text, "db", "sync")
        self.assertOneLineError(result, "debug", "maybe")

    def test_dollar_in_another_option(self):
        text = (
            "[grant_scheduler_database]\nconnection = %s\n"
            "mysql_sql_mode = TRADITIONAL$secretbit\n" % self.sqlite_url()
        )
        result = self.manage_with(text, "db", "sync")
        self.assertOneLineError(
            result, "mysql_sql_mode", "'$$'", secrets=("secretbit",)
        )


class TestInspectionCommands(ManageTestCase):
    def setUp(self):
        super().setUp()
        from grant_scheduler import api

        self.url = self.sqlite_url()
        self.assertEqual(0, self.manage(self.url, "db", "sync").returncode)
        self.gs = api.GrantScheduler.from_url(self.url)
        self.addCleanup(self.gs.database.dispose)
        self.gs.report_host(
            "cmp1", "cmp1", api.Capacity(api.Resources(2, 2048, 20))
        )
        [self.sel] = self.gs.schedule(1, 1024, 10, instance_uuids=[INSTANCE_1])

    def hosts(self):
        """``hosts``' lines: ``{(host, node, class): [cells]}`` (the cells
        from total on), and its legend."""
        result = self.manage(self.url, "hosts")
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn("Database: %s" % self.url, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(HOSTS_HEADER, lines[0].split())
        self.assertEqual(set("- "), set(lines[1]))
        rows = {}
        for line in lines[2:-2]:
            cells = line.split()
            rows[tuple(cells[:3])] = cells[3:]
        return rows, lines[-2:]

    def table_rows(self, *command):
        """The rows of a table command, split on spaces, after its header
        (checked to name ``resources``) and rule."""
        result = self.manage(self.url, *command)
        self.assertEqual(0, result.returncode, result.stderr)
        lines = result.stdout.splitlines()
        self.assertIn("resources", lines[0].split())
        self.assertNotIn("cpu/ram/disk", lines[0])
        if lines[2:] == ["(none)"]:
            return []
        return [line.split() for line in lines[2:]]

    def test_hosts_table_is_one_line_per_node_and_class(self):
        rows, legend = self.hosts()
        # total reserved ratio units capacity used granted free, then the
        # node's last ticket and last grant at (never yet: no claim).
        self.assertEqual(
            {
                ("cmp1", "cmp1", "VCPU"): "2 0 1.0 1/2/1 2 0 1 1 0 -",
                ("cmp1", "cmp1", "MEMORY_MB"): (
                    "2048 0 1.0 1/2048/1 2048 0 1024 1024"
                ),
                ("cmp1", "cmp1", "DISK_GB"): "20 0 1.0 1/20/1 20 0 10 10",
            },
            {key: " ".join(cells) for key, cells in rows.items()},
        )
        self.assertIn("free: capacity - used - won grants", legend[0])
        self.assertIn("min_unit/max_unit/step_size", legend[1])

    def test_hosts_table_after_a_claim(self):
        self.gs.claim(INSTANCE_1, "cmp1", "cmp1")
        rows, _legend = self.hosts()
        vcpu = rows["cmp1", "cmp1", "VCPU"]
        self.assertEqual("2 0 1.0 1/2/1 2 1 0 1 1".split(), vcpu[:9])
        self.assertRegex(" ".join(vcpu[9:]), r"^\d{4}-\d\d-\d\d \d")
        # the node's ticket and time are on its first line only
        self.assertEqual(
            "2048 0 1.0 1/2048/1 2048 1024 0 1024".split(),
            rows["cmp1", "cmp1", "MEMORY_MB"],
        )

    def test_grants_and_claims_tables(self):
        [row] = self.table_rows("grants")
        self.assertIn(INSTANCE_1, row)
        self.assertIn("won", row)
        self.assertEqual(["VCPU=1", "MEMORY_MB=1024", "DISK_GB=10"], row[5:8])
        self.assertEqual([], self.table_rows("claims"))
        self.gs.claim(INSTANCE_1, "cmp1", "cmp1")
        [row] = self.table_rows("claims")
        self.assertEqual(
            [
                INSTANCE_1,
                "cmp1",
                "cmp1",
                "VCPU=1",
                "MEMORY_MB=1024",
                "DISK_GB=10",
                str(self.sel.ticket),
            ],
            row[:7],
        )
        self.assertEqual([], self.table_rows("claims", "--host", "cmp2"))

    def test_a_custom_class_is_shown_in_every_table(self):
        from grant_scheduler import api

        # An Ironic node: one unit of its custom class and nothing else.
        self.gs.report_host(
            "ironic",
            "node-1",
            api.Capacity.of({GOLD: api.Inventory(1)}),
        )
        # NOTE: granted on the node chosen, as Nova's FilterScheduler
        # does (schedule() of custom classes alone raises ValueError in
        # View.room for now).
        self.gs.grant_on(
            INSTANCE_2,
            "ironic",
            "node-1",
            api.Resources(CUSTOM_BAREMETAL_GOLD=1),
        )
        rows, _legend = self.hosts()
        self.assertEqual(
            "1 0 1.0 1/1/1 1 0 1 0 0 -".split(),
            rows["ironic", "node-1", GOLD],
        )
        self.assertEqual(
            ["ironic"],
            sorted({host for host, _, name in rows if name == GOLD}),
        )
        self.assertEqual(
            {"VCPU", "MEMORY_MB", "DISK_GB", GOLD},
            {name for _, _, name in rows},
        )
        [row] = self.table_rows("grants", "--host", "ironic")
        self.assertEqual(["ironic", "node-1"], row[1:3])
        self.assertEqual("%s=1" % GOLD, row[5])
        self.assertEqual(INSTANCE_2, row[6])
        self.gs.claim(INSTANCE_2, "ironic", "node-1")
        [row] = self.table_rows("claims", "--host", "ironic")
        self.assertEqual(
            [INSTANCE_2, "ironic", "node-1", "%s=1" % GOLD], row[:4]
        )
        rows, _legend = self.hosts()
        self.assertEqual(
            "1 0 1.0 1/1/1 1 1 0 0 1".split(),
            rows["ironic", "node-1", GOLD][:9],
        )

    def test_pcpu_and_inventory_fields_are_shown(self):
        from grant_scheduler import api

        self.gs.report_host(
            "dedicated",
            "dedicated",
            api.Capacity.of(
                {
                    "MEMORY_MB": api.Inventory(
                        4096,
                        allocation_ratio=1.5,
                        min_unit=256,
                        max_unit=2048,
                        step_size=256,
                    ),
                    "PCPU": api.Inventory(8, reserved=2),
                }
            ),
        )
        self.gs.schedule(
            resources=api.Resources(PCPU=2, MEMORY_MB=512),
            instance_uuids=[INSTANCE_3],
            force_hosts=["dedicated"],
        )
        rows, _legend = self.hosts()
        self.assertEqual(
            "4096 0 1.5 256/2048/256 6144 0 512 5632 0 -".split(),
            rows["dedicated", "dedicated", "MEMORY_MB"],
        )
        self.assertEqual(
            "8 2 1.0 1/8/1 6 0 2 4".split(),
            rows["dedicated", "dedicated", "PCPU"],
        )
        self.assertNotIn(("dedicated", "dedicated", "VCPU"), rows)
        [row] = self.table_rows("grants", "--host", "dedicated")
        self.assertEqual(["MEMORY_MB=512", "PCPU=2"], row[5:7])
        self.assertEqual(INSTANCE_3, row[7])

    def test_a_class_no_longer_offered_keeps_its_line(self):
        from grant_scheduler import api

        self.gs.report_host(
            "ironic", "node-1", api.Capacity.of({GOLD: api.Inventory(1)})
        )
        self.gs.grant_on(
            INSTANCE_2,
            "ironic",
            "node-1",
            api.Resources(CUSTOM_BAREMETAL_GOLD=1),
        )
        self.gs.claim(INSTANCE_2, "ironic", "node-1")
        self.gs.report_host(
            "ironic",
            "node-1",
            api.Capacity.of({"CUSTOM_BAREMETAL_SILVER": api.Inventory(1)}),
        )
        rows, _legend = self.hosts()
        # The books keep the class the claim holds, offered at zero.
        self.assertEqual(
            "0 0 1.0 1/0/1 0 1 0 -1".split(),
            rows["ironic", "node-1", GOLD][:8],
        )
        self.assertEqual(
            "1 0 1.0 1/1/1 1 0 0 1".split(),
            rows["ironic", "node-1", "CUSTOM_BAREMETAL_SILVER"],
        )

    def test_reap_prints_counts(self):
        self.gs.claim(INSTANCE_1, "cmp1", "cmp1")
        result = self.manage(self.url, "reap")
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertRegex(result.stdout, r"superseded\s+1")

    def test_check_ok_then_violation(self):
        result = self.manage(self.url, "check")
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn("OK", result.stdout)
        result = self.manage(self.url, "check", "--quiescent")
        self.assertEqual(1, result.returncode)
        self.assertIn("remains after quiescence", result.stdout)
        self.assertOneLineError(result, "invariant violation")

    def test_unmigrated_database_is_refused(self):
        empty = self.sqlite_url("empty.sqlite")
        sa.create_engine(empty).connect().close()
        result = self.manage(empty, "hosts")
        self.assertOneLineError(result, "db sync")

    def test_schema_newer_than_code_is_refused(self):
        with self.gs.database.writer() as conn:
            sa_compat.execute_text(
                conn, "UPDATE alembic_version SET version_num = 'f00dfeed0099'"
            )
        for command in (("hosts",), ("reap",), ("db", "sync")):
            result = self.manage(self.url, *command)
            self.assertOneLineError(result, "f00dfeed0099")

    def test_control_characters_in_names_are_escaped(self):
        from grant_scheduler import api

        # NOTE: written as rows (the API may refuse such names; rows written
        # by another release or by hand are printed all the same).
        self.gs.report_host(
            "cmp2", "cmp2", api.Capacity(api.Resources(2, 2048, 20))
        )
        self.gs.schedule(
            1, 512, 1, instance_uuids=[INSTANCE_2], force_hosts=["cmp2"]
        )
        evil_host = "evil\nhost\x1b[2J\x9b31m\u202e"
        evil_node = "node\x1b]0;title\x07"
        engine = sa.create_engine(self.url)
        self.addCleanup(engine.dispose)
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "UPDATE gs_hosts SET host = :host, node = :node "
                    "WHERE host = 'cmp2'"
                ),
                {"host": evil_host, "node": evil_node},
            )
            conn.execute(
                sa.text(
                    "UPDATE gs_grants SET scheduler = :scheduler, "
                    "instance_uuid = :uuid WHERE instance_uuid = :old"
                ),
                {
                    "scheduler": "sched\r\x1b[31m",
                    "uuid": "uuid\x1b[1A",
                    "old": INSTANCE_2,
                },
            )
        for command in ("hosts", "grants"):
            with self.subTest(command=command):
                result = self.manage(self.url, command)
                self.assertEqual(0, result.returncode, result.stderr)
                for char in "\x1b\x07\r\x9b\u202e":
                    self.assertNotIn(char, result.stdout)
                self.assertIn(
                    "evil\\nhost\\x1b[2J\\x9b31m\\u202e", result.stdout
                )
                self.assertIn("node\\x1b]0;title\\x07", result.stdout)
                rows = result.stdout.splitlines()
                # header, rule, a row per node and class or per grant (and
                # the two lines of the legend)
                self.assertEqual(
                    10 if command == "hosts" else 4, len(rows), rows
                )
        result = self.manage(self.url, "grants")
        self.assertIn("uuid\\x1b[1A", result.stdout)
        self.assertIn("sched\\r\\x1b[31m", result.stdout)


class TestTable(base.TestCase):
    def test_escape(self):
        from grant_scheduler.cmd import table

        cases = {
            "plain-host.example.org": "plain-host.example.org",
            "a\nb": "a\\nb",
            "a\\nb": "a\\\\nb",
            "\x1b[31mred": "\\x1b[31mred",
            "tab\there": "tab\\there",
            "\u202eevil": "\\u202eevil",
            "zero\u200bwidth": "zero\\u200bwidth",
            "caf\u00e9 \u4e2d": "caf\u00e9 \u4e2d",
            42: "42",
        }
        for value, shown in cases.items():
            with self.subTest(value=value):
                self.assertEqual(shown, table.escape(value))
        self.assertEqual("a\\b\\n", table.escape("a\\b\n", backslash=False))

    def test_render_keeps_one_line_per_row(self):
        from grant_scheduler.cmd import table

        text = table.render(("host", "n"), [("a\nb", 1), ("c", 22)])
        self.assertEqual(
            ["host   n", "----  --", "a\\nb   1", "c     22"],
            text.splitlines(),
        )

    def test_render_keeps_numbers_right_aligned_past_blank_cells(self):
        from grant_scheduler.cmd import table

        text = table.render(
            ("node", "ticket"), [("a", 12), ("a", ""), ("b", 3)]
        )
        self.assertEqual(
            [
                "node  ticket",
                "----  ------",
                "a         12",
                "a",
                "b          3",
            ],
            text.splitlines(),
        )

    def test_amounts_name_every_class(self):
        from grant_scheduler import api
        from grant_scheduler.cmd import table

        cases = [
            (api.Resources(1, 512, 10), "VCPU=1 MEMORY_MB=512 DISK_GB=10"),
            (
                api.Resources(CUSTOM_BAREMETAL_GOLD=1),
                "CUSTOM_BAREMETAL_GOLD=1",
            ),
            (api.Resources(0, 512, PCPU=2), "MEMORY_MB=512 PCPU=2"),
            (api.Resources(), "-"),
        ]
        for resources, shown in cases:
            with self.subTest(resources=resources):
                self.assertEqual(shown, table.amounts(resources))


class TestHostLines(base.TestCase):
    def test_a_class_used_but_not_in_the_inventory(self):
        from grant_scheduler import api
        from grant_scheduler.cmd import manage

        state = api.HostState(
            host_id=1,
            host="ironic",
            node="node-1",
            capacity=api.Capacity.of({"PCPU": api.Inventory(4)}),
            used=api.Resources(CUSTOM_BAREMETAL_GOLD=1),
        )
        self.assertEqual(["PCPU", GOLD], manage._classes(state))
        self.assertEqual(
            ("-", "-", "-", "-", 0, 1, 0, -1),
            manage._class_cells(state, GOLD),
        )
        self.assertEqual(
            (4, 0, 1.0, "1/4/1", 4, 0, 0, 4),
            manage._class_cells(state, "PCPU"),
        )


class TestAuditLine(base.TestCase):
    """``grant-scheduler-audit``'s line for a node that differs (the rest
    of the command needs Nova: tests/nova22)."""

    def test_every_class_each_side_holds(self):
        import types

        from grant_scheduler import api
        from grant_scheduler.cmd import audit

        divergence = types.SimpleNamespace(
            host="ironic",
            node="node-1",
            nova={
                INSTANCE_2: api.Resources(CUSTOM_BAREMETAL_GOLD=1),
                INSTANCE_1: api.Resources(0, 512, PCPU=2),
            },
            books={},
        )
        self.assertEqual(
            "ironic/node-1: Nova runs 2 (MEMORY_MB=512 "
            "CUSTOM_BAREMETAL_GOLD=1 PCPU=2: %s, %s); the books claim nothing"
            % (INSTANCE_1, INSTANCE_2),
            audit.line(divergence),
        )
        divergence.books = {INSTANCE_1: api.Resources(1, 512, 10)}
        self.assertIn(
            "the books claim 1 (VCPU=1 MEMORY_MB=512 DISK_GB=10: %s)"
            % INSTANCE_1,
            audit.line(divergence),
        )
