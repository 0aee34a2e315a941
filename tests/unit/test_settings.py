"""Settings: one field per [grant_scheduler] option, checked like it."""

import dataclasses
import subprocess
import sys

from oslo_config import cfg

from grant_scheduler import conf as gs_conf
from grant_scheduler import exception
from grant_scheduler.conf import scheduler as scheduler_conf
from grant_scheduler.settings import Settings
from tests import base

OPTIONS = {opt.dest: opt for opt in scheduler_conf.scheduler_opts}


class TestSettings(base.TestCase):
    def test_fields_are_the_options(self):
        self.assertEqual(
            list(OPTIONS), [f.name for f in dataclasses.fields(Settings)]
        )
        self.assertIn("reap_interval", OPTIONS)

    def test_defaults_are_the_option_defaults(self):
        settings = Settings()
        for name, opt in OPTIONS.items():
            with self.subTest(name=name):
                self.assertEqual(opt.default, getattr(settings, name))
                self.assertIs(type(opt.default), type(getattr(settings, name)))

    def test_from_conf_reads_the_group(self):
        conf = cfg.ConfigOpts()
        gs_conf.register_opts(conf)
        conf([], default_config_files=[])
        self.addCleanup(conf.reset)
        self.assertEqual(Settings(), Settings.from_conf(conf))
        conf.set_override("reap_interval", 7, "grant_scheduler")
        conf.set_override("view_overlap", 0.5, "grant_scheduler")
        settings = Settings.from_conf(conf)
        self.assertEqual(7, settings.reap_interval)
        self.assertEqual(0.5, settings.view_overlap)

    def test_frozen_and_replace(self):
        settings = Settings()
        with self.assertRaises(dataclasses.FrozenInstanceError):
            settings.grant_ttl = 1
        changed = settings.replace(grant_ttl=30, view_overlap=0)
        self.assertEqual(30, changed.grant_ttl)
        self.assertEqual(0.0, changed.view_overlap)
        self.assertIsInstance(changed.view_overlap, float)
        self.assertEqual(600, settings.grant_ttl)
        self.assertEqual(changed, dataclasses.replace(changed))
        with self.assertRaises(exception.InvalidSettings):
            settings.replace(grant_ttl=0)

    def test_switches_take_only_booleans(self):
        switches = [
            name
            for name, opt in OPTIONS.items()
            if isinstance(opt, cfg.BoolOpt)
        ]
        self.assertIn("build_allocation_requests", switches)
        for name in switches:
            with self.subTest(name=name):
                self.assertIs(False, getattr(Settings(**{name: False}), name))
                self.assertIs(True, getattr(Settings(**{name: True}), name))
                for bad in (1, "yes", None):
                    with self.assertRaises(exception.InvalidSettings):
                        Settings(**{name: bad})

    def test_bounds_are_the_options(self):
        for name, opt in OPTIONS.items():
            if isinstance(opt, (cfg.BoolOpt, cfg.StrOpt)):
                continue  # test_switches_take_only_booleans, _choices_
            low, high = opt.type.min, opt.type.max
            with self.subTest(name=name):
                self.assertEqual(low, getattr(Settings(**{name: low}), name))
                self.assertEqual(high, getattr(Settings(**{name: high}), name))
                for bad in (low - 1, high + 1):
                    with self.assertRaises(
                        exception.InvalidSettings
                    ) as caught:
                        Settings(**{name: bad})
                    message = str(caught.exception)
                    self.assertIn("%s=%r" % (name, bad), message)
                    self.assertIn("from %s to %s" % (low, high), message)

    def test_choices_are_the_options(self):
        opt = OPTIONS["database_failure"]
        for choice in ("schedule", "refuse"):
            settings = Settings(database_failure=choice)
            self.assertEqual(choice, settings.database_failure)
        for bad in ("ignore", "", None, 1):
            with self.assertRaises(exception.InvalidSettings) as caught:
                Settings(database_failure=bad)
            self.assertIn("among 'schedule', 'refuse'", str(caught.exception))
        self.assertEqual("schedule", opt.default)

    def test_bad_values_are_refused(self):
        cases = [
            ("grant_ttl", -5),
            ("grant_ttl", True),
            ("grant_ttl", "3"),
            ("grant_ttl", 3.0),
            ("grant_ttl", None),
            ("host_subset_size", 0),
            ("max_fallovers", 10**9),
            ("reap_interval", 0),
            ("reap_batch_size", False),
            ("view_overlap", float("nan")),
            ("view_overlap", float("inf")),
            ("view_resync_interval", float("-inf")),
            ("view_overlap", "2"),
            ("view_overlap", True),
            ("view_overlap", -0.5),
        ]
        for name, value in cases:
            with self.subTest(name=name, value=value):
                with self.assertRaises(exception.InvalidSettings) as caught:
                    Settings(**{name: value})
                self.assertIsInstance(caught.exception, ValueError)
                self.assertIsInstance(
                    caught.exception, exception.GrantSchedulerError
                )
                self.assertIn(
                    "Invalid setting %s=%r" % (name, value),
                    str(caught.exception),
                )

    def test_an_added_option_is_a_field(self):
        # A fresh interpreter, so the module-level class is built again.
        code = (
            "from oslo_config import cfg\n"
            "from grant_scheduler.conf import scheduler\n"
            "scheduler.scheduler_opts.append(cfg.IntOpt("
            "'new_knob', default=4, min=2, max=9, help='x'))\n"
            "from grant_scheduler.settings import Settings\n"
            "assert Settings().new_knob == 4\n"
            "assert Settings(new_knob=9).new_knob == 9\n"
            "try:\n"
            "    Settings(new_knob=1)\n"
            "except ValueError as e:\n"
            "    print(e)\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn(
            "Invalid setting new_knob=1: must be an integer from 2 to 9",
            result.stdout,
        )
