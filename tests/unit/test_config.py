"""Options: help text, the committed sample, and the private database group."""

import os
import subprocess
import sys
import tempfile

from oslo_config import cfg

from grant_scheduler import conf as gs_conf
from grant_scheduler.conf import database as database_conf
from grant_scheduler.conf import opts
from grant_scheduler.db import api as db_api
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
