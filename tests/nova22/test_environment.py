"""The root really is Nova 22's stack, and Nova's loader finds our driver.

Run by ``tox -e nova22`` inside the Debian bullseye root
(tools/nova22-root.sh).  If one of these fails, the rest of that run was
not testing what it claims to test.
"""

import importlib.metadata
import sys
import unittest

import sqlalchemy
from stevedore import driver
from stevedore import extension

NAMESPACE = "nova.scheduler.driver"
NAME = "grant_scheduler"
TARGET = "grant_scheduler.nova.driver:GrantSchedulerDriver"


def _raise(manager, entry_point, exc):
    # stevedore logs and drops an extension that fails to import; here the
    # import error itself is the useful failure.
    raise exc


class TestDebianStack(unittest.TestCase):
    def test_python_is_3_9(self):
        self.assertEqual((3, 9), sys.version_info[:2], sys.version)

    def test_sqlalchemy_is_1_3(self):
        self.assertTrue(
            sqlalchemy.__version__.startswith("1.3."), sqlalchemy.__version__
        )

    def test_oslo_db_is_8_4(self):
        version = importlib.metadata.version("oslo.db")
        self.assertTrue(version.startswith("8.4."), version)

    def test_nova_is_22(self):
        version = importlib.metadata.version("nova")
        self.assertTrue(version.startswith("22."), version)


class TestNovaLoadsTheDriver(unittest.TestCase):
    """How Nova 22's scheduler manager loads ``[scheduler] driver``."""

    def test_entry_point_is_installed(self):
        # The installed wheel's metadata, read without importing our code.
        # (The checkout's own egg-info, written by the wheel build, may
        # list the same entry point a second time.)
        targets = {
            ep.value
            for ep in importlib.metadata.entry_points().get(NAMESPACE, ())
            if ep.name == NAME
        }
        self.assertEqual({TARGET}, targets)

    def test_entry_point_is_listed(self):
        manager = extension.ExtensionManager(
            NAMESPACE, on_load_failure_callback=_raise
        )
        self.assertIn(NAME, manager.names())
        self.assertEqual(TARGET, manager[NAME].entry_point_target)

    def test_driver_manager_builds_it(self):
        from grant_scheduler.nova.driver import GrantSchedulerDriver

        manager = driver.DriverManager(NAMESPACE, NAME, invoke_on_load=True)
        self.assertIsInstance(manager.driver, GrantSchedulerDriver)


class TestNova22Facts(unittest.TestCase):
    """What the Nova 22 adapters rely on, checked against the root's Nova."""

    def test_no_hooks_module(self):
        import importlib.util

        self.assertIsNone(importlib.util.find_spec("nova.hooks"))

    def test_virt_drivers_load_only_under_nova_virt(self):
        import inspect

        from nova.virt import driver as virt_driver

        source = inspect.getsource(virt_driver.load_compute_driver)
        self.assertIn("'nova.virt.%s' % compute_driver", source)
        self.assertNotIn("import_object_ns", source)

    def test_host_manager_reads_states_by_uuids(self):
        from nova.scheduler import host_manager

        self.assertTrue(
            hasattr(host_manager.HostManager, "get_host_states_by_uuids")
        )
        self.assertFalse(
            hasattr(host_manager.HostManager, "get_all_host_states")
        )
