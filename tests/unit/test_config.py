"""Options: help text, the committed sample, and the private database group."""

import os
import subprocess
import sys
import tempfile

from oslo_config import cfg
from oslo_config import types

from grant_scheduler import conf as gs_conf
from grant_scheduler import exception
from grant_scheduler.conf import database as database_conf
from grant_scheduler.conf import opts
from grant_scheduler.conf import types as conf_types
from grant_scheduler.db import api as db_api
from grant_scheduler.db import sa_compat
from tests import base

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
SAMPLE = os.path.join(REPO_ROOT, "etc", "grant_scheduler.conf.sample")
GENERATOR_CONF = os.path.join(
    REPO_ROOT, "etc", "grant-scheduler-config-generator.conf"
)


class TestOptions(base.TestCase):
    def test_every_option_has_help_text(self):
        seen = 0
        for group, group_opts in opts.list_opts():
            for opt in group_opts:
                seen += 1
                self.assertTrue(
                    opt.help and opt.help.strip(),
                    "%s.%s has no help" % (group.name, opt.name),
                )
        self.assertGreater(seen, 10)

    def test_committed_sample_is_current(self):
        with tempfile.TemporaryDirectory() as directory:
            output = os.path.join(directory, "sample.conf")
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "oslo_config.generator",
                    "--config-file",
                    GENERATOR_CONF,
                    "--output-file",
                    output,
                ],
                check=True,
                cwd=REPO_ROOT,
                timeout=120,
            )
            with open(output) as f:
                generated = f.read()
        with open(SAMPLE) as f:
            committed = f.read()
        self.assertEqual(
            generated,
            committed,
            "etc/grant_scheduler.conf.sample is stale: run 'tox -e genconfig'",
        )

    def test_sample_lists_every_option(self):
        with open(SAMPLE) as f:
            sample = f.read()
        for group, group_opts in opts.list_opts():
            self.assertIn("[%s]" % group.name, sample)
            for opt in group_opts:
                self.assertIn("\n#%s =" % opt.name, sample)


class TestPrivateDatabaseGroup(base.TestCase):
    """DESIGN H10: never Nova's [database], never its deprecated names."""

    def _conf(self, text):
        path = base.temp_config_file(self, text)
        conf = cfg.ConfigOpts()
        conf.register_opts(
            [cfg.StrOpt("connection", secret=True)], group="database"
        )
        gs_conf.register_opts(conf)
        conf([], default_config_files=[path])
        return conf

    def test_connection_comes_from_own_group(self):
        conf = self._conf(
            "[database]\nconnection = mysql+pymysql://nova:x@db/nova\n"
            "[grant_scheduler_database]\n"
            "connection = postgresql+psycopg2://gs:y@db/gs\n"
        )
        database = db_api.Database.from_conf(conf)
        self.assertEqual("gs", database.url.database)
        self.assertEqual("postgresql", database.dialect_name)

    def test_novas_database_is_not_inherited(self):
        conf = self._conf(
            "[DEFAULT]\nsql_connection = mysql+pymysql://nova:x@db/nova\n"
            "[database]\nconnection = mysql+pymysql://nova:x@db/nova\n"
        )
        database = db_api.Database.from_conf(conf)
        self.assertEqual("sqlite", database.dialect_name)
        self.assertEqual("grant_scheduler.sqlite", database.url.database)

    def test_connection_is_secret(self):
        (connection,) = [
            opt
            for opt in database_conf.database_opts
            if opt.dest == "connection"
        ]
        self.assertTrue(connection.secret)


def _conf(testcase, text=None, register=True):
    """A parsed ConfigOpts; ``text`` is its one configuration file."""
    conf = cfg.ConfigOpts()
    if register:
        gs_conf.register_opts(conf)
    files = [] if text is None else [base.temp_config_file(testcase, text)]
    conf([], project="grant_scheduler", default_config_files=files)
    testcase.addCleanup(conf.reset)
    return conf


class TestBounds(base.TestCase):
    def test_every_number_has_bounds_and_a_default_within(self):
        checked = 0
        for group, group_opts in opts.list_opts():
            for opt in group_opts:
                if not isinstance(opt.type, (types.Integer, types.Float)):
                    continue
                checked += 1
                label = "%s.%s" % (group.name, opt.name)
                with self.subTest(option=label):
                    self.assertIsNotNone(opt.type.min, label)
                    self.assertIsNotNone(opt.type.max, label)
                    if opt.default is not None:
                        self.assertEqual(opt.default, opt.type(opt.default))
        self.assertGreater(checked, 12)

    def test_floats_are_finite(self):
        for group, group_opts in opts.list_opts():
            for opt in group_opts:
                if not isinstance(opt.type, types.Float):
                    continue
                label = "%s.%s" % (group.name, opt.name)
                with self.subTest(option=label):
                    self.assertIsInstance(opt.type, conf_types.FiniteFloat)
                    for text in ("nan", "inf", "-inf", "NaN", "Infinity"):
                        self.assertRaises(ValueError, opt.type, text)
                        self.assertRaises(ValueError, opt.type, float(text))
                    self.assertEqual(opt.type.min, opt.type(str(opt.type.min)))


class TestRetryPolicy(base.TestCase):
    DEFAULTS = {
        "max_retries": 30,
        "retry_interval": 0.005,
        "inc_retry_interval": True,
        "max_retry_interval": 0.5,
    }

    def test_defaults(self):
        self.assertEqual(self.DEFAULTS, database_conf.retry_policy())
        self.assertEqual(self.DEFAULTS, database_conf.retry_policy(None))

    def test_from_the_group(self):
        conf = _conf(
            self,
            "[grant_scheduler_database]\ndb_max_retries = 3\n"
            "db_retry_interval = 0.25\ndb_inc_retry_interval = false\n"
            "db_max_retry_interval = 2\n",
        )
        expected = {
            "max_retries": 3,
            "retry_interval": 0.25,
            "inc_retry_interval": False,
            "max_retry_interval": 2.0,
        }
        group = conf.grant_scheduler_database
        self.assertEqual(expected, database_conf.retry_policy(group))
        self.assertEqual(expected, database_conf.retry_policy(conf))

    def test_help_says_what_they_bound(self):
        for opt in database_conf.retry_opts:
            with self.subTest(option=opt.name):
                self.assertIn("deadlock", opt.help)
                self.assertIn("lost connection", opt.help)

    def test_use_db_reconnect_is_not_offered(self):
        names = {opt.dest for opt in database_conf.database_opts}
        self.assertNotIn("use_db_reconnect", names)
        self.assertLessEqual(
            {
                "db_max_retries",
                "db_retry_interval",
                "db_inc_retry_interval",
                "db_max_retry_interval",
            },
            names,
        )


class TestOlderOsloDb(base.TestCase):
    def test_options_missing_from_oslo_db(self):
        # oslo.db 8.4 (Nova 22) lacks mysql_wsrep_sync_wait among others;
        # run with those removed from the list the group copies.
        code = (
            "from oslo_db import options\n"
            "missing = {'mysql_wsrep_sync_wait', 'db_retry_interval',\n"
            "           'db_max_retries', 'connection_recycle_time',\n"
            "           'use_db_reconnect', 'synchronous_reader',\n"
            "           'asyncio_connection', 'max_overflow'}\n"
            "options.database_opts[:] = [o for o in options.database_opts\n"
            "                            if o.dest not in missing]\n"
            "from oslo_config import cfg\n"
            "from grant_scheduler import conf as gs_conf\n"
            "from grant_scheduler.conf import database, opts\n"
            "from grant_scheduler.db import api as db_api\n"
            "names = {o.dest for o in database.database_opts}\n"
            "assert 'mysql_wsrep_sync_wait' not in names, names\n"
            "assert 'connection' in names\n"
            "conf = cfg.ConfigOpts()\n"
            "gs_conf.register_opts(conf)\n"
            "conf([], default_config_files=[])\n"
            "gs_conf.check_values(conf)\n"
            "print(database.retry_policy(conf.grant_scheduler_database))\n"
            "db_api.Database.from_conf(conf)\n"
            "opts.list_opts()\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn("'max_retries': 30", result.stdout)


class TestRequireConnection(base.TestCase):
    def test_set_in_a_file(self):
        conf = _conf(
            self,
            "[grant_scheduler_database]\nconnection = sqlite:///gs.sqlite\n",
        )
        self.assertEqual(
            "sqlite:///gs.sqlite", database_conf.require_connection(conf)
        )
        self.assertTrue(database_conf.connection_is_set(conf))
        self.assertIn("set in ", database_conf.connection_source(conf))

    def test_the_default_written_out_is_taken_as_meant(self):
        conf = _conf(
            self,
            "[grant_scheduler_database]\nconnection = %s\n"
            % database_conf.DEFAULT_CONNECTION,
        )
        database_conf.require_connection(conf)

    def test_unset_is_refused(self):
        for text in (None, "", "[grant_scheduler_database]\n"):
            with self.subTest(text=text):
                conf = _conf(self, text)
                self.assertFalse(database_conf.connection_is_set(conf))
                with self.assertRaises(
                    exception.DatabaseConfigError
                ) as caught:
                    database_conf.require_connection(conf)
                self.assertIn(
                    "[grant_scheduler_database] connection is not set",
                    str(caught.exception),
                )

    def test_where_names_the_configuration(self):
        conf = _conf(self)
        with self.assertRaises(exception.DatabaseConfigError) as caught:
            database_conf.require_connection(conf, "Nova's configuration")
        self.assertIn(
            "connection is not set in Nova's configuration;",
            str(caught.exception),
        )

    def test_misspelt_group_is_named(self):
        conf = _conf(
            self, "[grant_scheduler_db]\nconnection = sqlite:///gs.sqlite\n"
        )
        with self.assertRaises(exception.DatabaseConfigError) as caught:
            database_conf.require_connection(conf)
        self.assertIn("[grant_scheduler_db]", str(caught.exception))
        self.assertIn("misspelt", str(caught.exception))

    def test_override_counts_as_set_until_cleared(self):
        conf = _conf(self)
        conf.set_override(
            "connection", "sqlite:///o.sqlite", "grant_scheduler_database"
        )
        self.assertEqual(
            "sqlite:///o.sqlite", database_conf.require_connection(conf)
        )
        conf.clear_override("connection", "grant_scheduler_database")
        self.assertRaises(
            exception.DatabaseConfigError,
            database_conf.require_connection,
            conf,
        )

    def test_environment_counts_as_set(self):
        self.useFixture(
            base.fixtures.EnvironmentVariable(
                "OS_GRANT_SCHEDULER_DATABASE__CONNECTION", "sqlite:///e.sqlite"
            )
        )
        conf = _conf(self)
        if not hasattr(cfg.Locations, "environment"):
            # oslo.config 6.4 (Nova 18's pin) reads no environment: the
            # variable is ignored, and the default is still refused.
            self.assertRaises(
                exception.DatabaseConfigError,
                database_conf.require_connection,
                conf,
            )
            return
        self.assertEqual(
            "sqlite:///e.sqlite", database_conf.require_connection(conf)
        )
        self.assertIn("environment", database_conf.connection_source(conf))

    def test_dollar_is_refused_without_quoting(self):
        for password in ("Left1xq$Right2zw", "Left1xq${a.b}", "Left1xq$host"):
            with self.subTest(password=password):
                conf = _conf(
                    self,
                    "[DEFAULT]\n[grant_scheduler_database]\n"
                    "connection = mysql+pymysql://gs:%s@db/gs\n" % password,
                    register=True,
                )
                conf.register_opt(cfg.StrOpt("host", default="x"))
                with self.assertRaises(
                    exception.DatabaseConfigError
                ) as caught:
                    database_conf.require_connection(conf)
                self.assertIn("'$$'", str(caught.exception))
                self.assertNotIn("Right2zw", str(caught.exception))
                self.assertNotIn("Left1xq", str(caught.exception))

    def test_escaped_dollar_is_one_dollar(self):
        for written in ("Left1xq$$Right2zw", "Left1xq\\$Right2zw"):
            with self.subTest(written=written):
                conf = _conf(
                    self,
                    "[grant_scheduler_database]\n"
                    "connection = mysql+pymysql://gs:%s@db/gs\n" % written,
                )
                url = database_conf.require_connection(conf)
                self.assertEqual(
                    "Left1xq$Right2zw", sa_compat.make_url(url).password
                )

    def test_raw_special_character_is_refused(self):
        conf = _conf(
            self,
            "[grant_scheduler_database]\n"
            "connection = mysql+pymysql://gs:Left1xq@Right2zw@db/gs\n",
        )
        with self.assertRaises(exception.DatabaseConfigError) as caught:
            database_conf.require_connection(conf)
        self.assertIn("percent-encoded", str(caught.exception))
        self.assertNotIn("Right2zw", str(caught.exception))


class TestCheckValues(base.TestCase):
    def test_good_values_pass(self):
        gs_conf.check_values(_conf(self, ""))

    def test_bad_value_names_option_file_and_value(self):
        conf = _conf(self, "[grant_scheduler]\ngrant_ttl = -5\n")
        with self.assertRaises(exception.InvalidConfig) as caught:
            gs_conf.check_values(conf)
        message = str(caught.exception)
        self.assertIn("[grant_scheduler] grant_ttl = -5 in ", message)
        self.assertIn("from 1 to 604800", message)

    def test_secret_values_are_not_shown(self):
        conf = _conf(
            self,
            "[grant_scheduler_database]\n"
            "slave_connection = mysql+pymysql://gs:Left1xq$Right2zw@db/gs\n",
        )
        with self.assertRaises(exception.InvalidConfig) as caught:
            gs_conf.check_values(conf)
        self.assertIn("slave_connection", str(caught.exception))
        self.assertNotIn("Right2zw", str(caught.exception))
        self.assertNotIn("Left1xq", str(caught.exception))
