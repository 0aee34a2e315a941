"""Database passwords never reach output, errors or logs.

A MariaDB user with a distinctive password is created for the test; every
failing command is run with and without ``--debug`` and its whole output
searched for the password.

``TestSpecialCharacters`` creates one MariaDB user per character that has a
meaning somewhere between a configuration file and the driver (``@ : / % #
$ ? &``, a space, quotes), each password made of two distinctive pieces
around that character so that no fragment may be shown either.  Each
character's password runs percent-encoded (it must work), wrong (it must
fail in one line), in the URL's query, and written raw (refused, for the
characters a URL cannot hold), with and without ``--debug`` and with
``--log-file``; the commands rotate over the characters (``rotation``), so
that every command meets every output variant and every character meets
every variant and every way of writing the password, without running the
whole product of the three.  The Python API is checked the same way.
"""

import concurrent.futures
import logging
import os
import subprocess
import sys
import urllib.parse
import uuid

import fixtures
import sqlalchemy as sa

from grant_scheduler import api
from grant_scheduler import exception
from grant_scheduler.db import sa_compat
from tests import base

PASSWORD = "Pw-%s" % uuid.uuid4().hex[:12]


class TestSecrets(base.DatabaseTestCase, base.TestCase):
    backend = "mysql"
    migrate = False

    def setUp(self):
        super().setUp()
        self.user = "gs_secret_%s" % uuid.uuid4().hex[:6]
        url = sa_compat.make_url(self.db_fixture.url)
        admin = sa.create_engine(
            base.ADMIN_URLS["mysql"], isolation_level="AUTOCOMMIT"
        )
        self.addCleanup(admin.dispose)
        with admin.connect() as conn:
            for host in ("%", "localhost"):
                conn.execute(
                    sa.text("CREATE USER :user@:host IDENTIFIED BY :password"),
                    {"user": self.user, "host": host, "password": PASSWORD},
                )
                conn.execute(
                    sa.text("GRANT ALL ON %s.* TO :user@:host" % url.database),
                    {"user": self.user, "host": host},
                )
        self.addCleanup(self._drop_user, admin)
        self.secret_url = sa_compat.render_url(
            sa_compat.url_with(url, username=self.user, password=PASSWORD),
            hide_password=False,
        )

    def _drop_user(self, admin):
        with admin.connect() as conn:
            for host in ("%", "localhost"):
                conn.execute(
                    sa.text("DROP USER IF EXISTS :user@:host"),
                    {"user": self.user, "host": host},
                )

    def run_command(self, *argv):
        result = subprocess.run(
            [sys.executable, "-m", *argv],
            capture_output=True,
            text=True,
            timeout=300,
        )
        return result.returncode, result.stdout + result.stderr

    def manage(self, connection, *args):
        path = base.temp_config_file(
            self, "[grant_scheduler_database]\nconnection = %s\n" % connection
        )
        return self.run_command(
            "grant_scheduler.cmd.manage", "--config-file", path, *args
        )

    def failing_urls(self):
        url = sa_compat.make_url(self.secret_url)
        return {
            "unmigrated": self.secret_url,
            "no such database": sa_compat.render_url(
                sa_compat.url_with(url, database="gs_missing"),
                hide_password=False,
            ),
            "wrong password": sa_compat.render_url(
                sa_compat.url_with(url, password=PASSWORD + "x"),
                hide_password=False,
            ),
            "unreachable": sa_compat.render_url(
                sa_compat.url_with(url, port=9), hide_password=False
            ),
            "malformed": "%s:%s@127.0.0.1/gs" % (self.user, PASSWORD),
        }

    def test_failing_manage_commands(self):
        # Each case with and without --debug, the commands taking turns:
        # every command runs with and without --debug.
        commands = [("db", "version"), ("hosts",), ("reap",)]
        ran = set()
        for i, (case, url) in enumerate(self.failing_urls().items()):
            for d, debug in enumerate(((), ("--debug",))):
                command = commands[(2 * i + d) % len(commands)]
                with self.subTest(case=case, command=command, debug=debug):
                    code, output = self.manage(url, *debug, *command)
                    self.assertNotEqual(0, code, output)
                    self.assertIn("ERROR", output)
                    self.assertNotIn(PASSWORD, output)
                    ran.add((command, debug))
        self.assertEqual(len(commands) * 2, len(ran))

    def test_failing_benchmark(self):
        urls = self.failing_urls()
        del urls["unmigrated"]  # the benchmark migrates its database
        for case, url in urls.items():
            with self.subTest(case=case):
                code, output = self.run_command(
                    "grant_scheduler_bench",
                    "--db",
                    url,
                    "--requests",
                    "4",
                    "--schedulers",
                    "1",
                )
                self.assertNotEqual(0, code, output)
                self.assertNotIn(PASSWORD, output)

    def test_api_errors_and_logs(self):
        logger = self.useFixture(
            fixtures.FakeLogger(level=logging.DEBUG, format="%(message)s")
        )
        for case, url in self.failing_urls().items():
            with self.subTest(case=case):
                with self.assertRaises(
                    exception.GrantSchedulerError
                ) as caught:
                    api.GrantScheduler.from_url(url).hosts()
                self.assertNotIn(PASSWORD, str(caught.exception))
                self.assertNotIn(PASSWORD, repr(caught.exception))
        self.assertNotIn(PASSWORD, logger.output)


SPECIALS = ["@", ":", "/", "%", "#", "$", "?", "&", " ", "'", '"']
# Characters a URL cannot hold raw in a password: refused, not guessed at.
MUST_ENCODE = {"@", "/", "%", "#", "?"}
COMMANDS = [
    ("db", "sync"),
    ("db", "version"),
    ("hosts",),
    ("grants",),
    ("reap",),
    ("check",),
]


def rotation(chars, variants, per=2):
    """``(char, variant, command)``: for each character and variant,
    ``per`` commands.  A variant's commands move on by ``per`` from one
    character to the next, and a character's from one variant to the next,
    so that every command runs in every variant (given ``len(COMMANDS) /
    per`` characters) and a character runs different commands in each."""
    for i, char in enumerate(chars):
        for v, variant in enumerate(variants):
            for j in range(per):
                yield (
                    char,
                    variant,
                    COMMANDS[((i + v) * per + j) % len(COMMANDS)],
                )


class TestRotation(base.TestCase):
    def test_every_command_meets_every_variant_and_character(self):
        variants = ("plain", "debug", "log-file")
        for chars in (SPECIALS, sorted(MUST_ENCODE)):
            runs = list(rotation(chars, variants))
            self.assertEqual(
                {(v, c) for v in variants for c in COMMANDS},
                {(v, c) for _, v, c in runs},
            )
            for char in chars:
                mine = [c for ch, _, c in runs if ch == char]
                self.assertEqual(len(mine), len(set(mine)), char)


class TestSpecialCharacters(base.DatabaseTestCase, base.TestCase):
    backend = "mysql"
    migrate = False

    def setUp(self):
        super().setUp()
        self.url = sa_compat.make_url(self.db_fixture.url)
        self.admin = sa.create_engine(
            base.ADMIN_URLS["mysql"], isolation_level="AUTOCOMMIT"
        )
        self.addCleanup(self.admin.dispose)
        self.work = self.useFixture(fixtures.TempDir()).path
        self.users = {}
        for number, char in enumerate(SPECIALS):
            left = "Lq%s" % uuid.uuid4().hex[:8]
            right = "Rz%s" % uuid.uuid4().hex[:8]
            user = "gs_sc%d_%s" % (number, uuid.uuid4().hex[:6])
            self._create_user(user, left + char + right)
            self.users[char] = (user, left + char + right, (left, right))

    def _create_user(self, user, password):
        with self.admin.connect() as conn:
            for host in ("%", "localhost"):
                conn.execute(
                    sa.text("CREATE USER :user@:host IDENTIFIED BY :password"),
                    {"user": user, "host": host, "password": password},
                )
                conn.execute(
                    sa.text(
                        "GRANT ALL ON %s.* TO :user@:host" % self.url.database
                    ),
                    {"user": user, "host": host},
                )
        self.addCleanup(self._drop_user, user)

    def _drop_user(self, user):
        with self.admin.connect() as conn:
            for host in ("%", "localhost"):
                conn.execute(
                    sa.text("DROP USER IF EXISTS :user@:host"),
                    {"user": user, "host": host},
                )

    def connection(self, user, password, how="encoded"):
        """The URL as a configuration file holds it."""
        host = "%s:%d" % (self.url.host, self.url.port or 3306)
        encoded = urllib.parse.quote(password, safe="")
        if how == "encoded":
            return "mysql+pymysql://%s:%s@%s/%s" % (
                user,
                encoded,
                host,
                self.url.database,
            )
        if how == "query":
            return "mysql+pymysql://%s@%s/%s?password=%s" % (
                user,
                host,
                self.url.database,
                encoded,
            )
        # raw: only oslo.config's own "$" is escaped.
        return "mysql+pymysql://%s:%s@%s/%s" % (
            user,
            password.replace("$", "$$"),
            host,
            self.url.database,
        )

    def manage(self, connection, variant, command, extra=""):
        name = uuid.uuid4().hex
        path = os.path.join(self.work, name + ".conf")
        with open(path, "w") as f:
            f.write(
                "[grant_scheduler_database]\nconnection = %s\n%s"
                % (connection, extra)
            )
        args = ["--config-file", path]
        log_file = None
        if variant == "debug":
            args.append("--debug")
        elif variant == "log-file":
            log_file = os.path.join(self.work, name + ".log")
            args += ["--debug", "--log-file", log_file]
        result = subprocess.run(
            [sys.executable, "-m", "grant_scheduler.cmd.manage", *args]
            + list(command),
            capture_output=True,
            text=True,
            timeout=300,
        )
        output = result.stdout + result.stderr
        if log_file is not None:
            self.assertTrue(os.path.exists(log_file), "no log file written")
            with open(log_file) as f:
                output += f.read()
        return result, output

    def run_many(self, runs, extra=""):
        """Run ``(label, connection, variant, command)`` runs, 4 at a time;
        return ``[(label, variant, command, result, output)]``."""
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            futures = [
                (
                    label,
                    variant,
                    command,
                    pool.submit(self.manage, url, variant, command, extra),
                )
                for label, url, variant, command in runs
            ]
            return [
                (label, variant, command, *future.result())
                for label, variant, command, future in futures
            ]

    def assertNoSecret(self, char, output, label):
        user, password, pieces = self.users[char]
        for secret in (password, urllib.parse.quote(password, safe="")):
            self.assertNotIn(secret, output, label)
        for piece in pieces:
            self.assertNotIn(piece, output, label)

    def assertOneLineError(self, result, output, label, *fragments):
        """Exit 1 and one ERROR line; with --debug on standard error (no log
        file) the traceback comes first, so only the last line counts."""
        self.assertEqual(1, result.returncode, "%s\n%s" % (label, output))
        lines = result.stderr.strip().splitlines()
        if "--debug" not in result.args or "--log-file" in result.args:
            self.assertEqual(1, len(lines), "%s\n%s" % (label, result.stderr))
            self.assertNotIn("Traceback", result.stdout + result.stderr)
        self.assertTrue(lines[-1].startswith("ERROR: "), lines[-1])
        for fragment in fragments:
            self.assertIn(fragment, lines[-1], label)

    def test_encoded_passwords_work_in_every_command(self):
        # db sync first (the others need the tables), then the rest at once.
        user, password, _ = self.users["@"]
        [(_, _, _, result, output)] = self.run_many(
            [("@", self.connection(user, password), "plain", COMMANDS[0])]
        )
        self.assertEqual(0, result.returncode, output)
        runs = [
            (
                (char, "encoded"),
                self.connection(*self.users[char][:2]),
                variant,
                command,
            )
            for char, variant, command in rotation(
                self.users, ("plain", "log-file")
            )
        ]
        for char, (user, password, _) in self.users.items():
            url = self.connection(user, password, "query")
            for command in (("db", "version"), ("hosts",)):
                runs.append(((char, "query"), url, "log-file", command))
            if char not in MUST_ENCODE:
                url = self.connection(user, password, "raw")
                for command in (("db", "sync"), ("hosts",)):
                    runs.append(((char, "raw"), url, "log-file", command))
        for (char, how), variant, command, result, output in self.run_many(
            runs
        ):
            label = "char %r, %s, %s, %s" % (char, how, variant, command)
            with self.subTest(
                char=char, how=how, variant=variant, command=command
            ):
                self.assertEqual(
                    0, result.returncode, "%s\n%s" % (label, output)
                )
                self.assertNoSecret(char, output, label)
                self.assertIn(self.url.database, output, label)

    def test_wrong_passwords_fail_in_one_line(self):
        def wrong(char, how="encoded"):
            user, password, _ = self.users[char]
            return self.connection(user, password + "x", how)

        # "debug": the traceback --debug prints on standard error has no
        # secret either.
        variants = ("plain", "debug", "log-file")
        runs = [
            ((char, "encoded"), wrong(char), variant, command)
            for char, variant, command in rotation(self.users, variants)
        ]
        runs += [
            ((char, "query"), wrong(char, "query"), variant, command)
            for char, variant, command in rotation(
                self.users, ("plain", "debug"), per=1
            )
        ]
        # NOTE: no retries of the first connection, so each run fails at once.
        results = self.run_many(runs, extra="max_retries = 0\n")
        for (char, how), variant, command, result, output in results:
            label = "char %r, %s, %s, %s" % (char, how, variant, command)
            with self.subTest(
                char=char, how=how, variant=variant, command=command
            ):
                self.assertOneLineError(
                    result, output, label, "Cannot connect", "Access denied"
                )
                self.assertNoSecret(char, output, label)

    def test_raw_passwords_are_refused(self):
        runs = [
            (
                char,
                self.connection(*self.users[char][:2], how="raw"),
                variant,
                command,
            )
            for char, variant, command in rotation(
                sorted(MUST_ENCODE), ("plain", "debug", "log-file")
            )
        ]
        for char, variant, command, result, output in self.run_many(runs):
            label = "char %r, %s, %s" % (char, variant, command)
            with self.subTest(char=char, variant=variant, command=command):
                self.assertOneLineError(
                    result, output, label, "percent-encoded"
                )
                self.assertNoSecret(char, output, label)

    def test_unescaped_dollar_is_refused(self):
        user, password, _ = self.users["$"]
        url = self.connection(user, password, "raw").replace("$$", "$")
        runs = [
            ("$", url, variant, command)
            for variant in ("plain", "debug", "log-file")
            for command in COMMANDS
        ]
        for _, variant, command, result, output in self.run_many(runs):
            label = "%s, %s" % (variant, command)
            with self.subTest(variant=variant, command=command):
                self.assertOneLineError(result, output, label, "'$$'")
                self.assertNoSecret("$", output, label)

    def test_python_api(self):
        logger = self.useFixture(
            fixtures.FakeLogger(level=logging.DEBUG, format="%(message)s")
        )
        for char, (user, password, _) in self.users.items():
            with self.subTest(char=char):
                for how in ("encoded", "query"):
                    good = self.connection(user, password, how)
                    gs = api.GrantScheduler.from_url(good)
                    self.addCleanup(gs.database.dispose)
                    self.assertNoSecret(char, gs.database.safe_url, how)
                    with self.assertRaises(exception.SchemaNotMigrated) as c:
                        gs.hosts()
                    self.assertNoSecret(char, str(c.exception), how)
                    wrong = self.connection(user, password + "x", how)
                    for call in ("hosts", "grants", "reap", "check"):
                        gs = api.GrantScheduler.from_url(wrong)
                        with self.assertRaises(
                            exception.DatabaseUnavailable
                        ) as caught:
                            getattr(gs, call)()
                        self.assertNoSecret(char, str(caught.exception), how)
                        self.assertNoSecret(char, repr(caught.exception), how)
                        self.assertNoSecret(
                            char, str(caught.exception.__cause__), how
                        )
                if char in MUST_ENCODE:
                    with self.assertRaises(
                        exception.DatabaseConfigError
                    ) as caught:
                        api.GrantScheduler.from_url(
                            self.connection(user, password, "raw")
                        )
                    self.assertIn("percent-encoded", str(caught.exception))
                    self.assertNoSecret(char, str(caught.exception), "raw")
        for char in self.users:
            self.assertNoSecret(char, logger.output, "log")
