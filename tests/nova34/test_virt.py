"""The claiming virt drivers, loaded and called the way Nova does it."""

import io
import os
import uuid
from contextlib import redirect_stdout
from unittest import mock

import fixtures
from nova import exception as nova_exception
from nova.virt import driver as virt_driver
from nova.virt import fake as fake_virt

from grant_scheduler import api
from grant_scheduler.nova import virt
from tests import base
from tests.nova34 import base as nova_base
from tests.nova34 import fakes

FLAVOR = fakes.flavor(2, 4096, 40)


class InstalledModule(fixtures.Fixture):
    """``nova/virt/grant_scheduler.py`` in the Nova this Python imports."""

    def _setUp(self):
        self.path = virt.install()  # replaces a copy of ours left behind
        self.addCleanup(virt.uninstall)


class TestPlacingTheModule(base.TestCase):
    def test_nova_loads_the_driver_by_its_short_name(self):
        installed = self.useFixture(InstalledModule())
        self.assertEqual(
            os.path.join(
                os.path.dirname(fake_virt.__file__), "grant_scheduler.py"
            ),
            installed.path,
        )
        loaded = virt_driver.load_compute_driver(
            fake_virt.FakeVirtAPI(), "grant_scheduler.MediumFakeDriver"
        )
        self.assertIsInstance(loaded, virt.ClaimingDriver)
        self.assertIsInstance(loaded, fake_virt.MediumFakeDriver)
        self.assertEqual("MediumFakeDriver", type(loaded).__name__)

    def test_command_line(self):
        directory = self.useFixture(fixtures.TempDir()).path
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(
                0, virt.main(["install", "--nova-virt-dir", directory])
            )
        path = out.getvalue().strip()
        self.assertEqual(os.path.join(directory, "grant_scheduler.py"), path)
        with open(path) as f:
            text = f.read()
        self.assertIn(virt.MARKER, text)
        compile(text, path, "exec")
        with redirect_stdout(io.StringIO()):
            self.assertEqual(
                0, virt.main(["uninstall", "--nova-virt-dir", directory])
            )
        self.assertFalse(os.path.exists(path))

    def test_someone_elses_file_is_left_alone(self):
        directory = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(directory, "grant_scheduler.py")
        with open(path, "w") as f:
            f.write("# not ours\n")
        with self.assertRaises(FileExistsError):
            virt.install(directory)
        with self.assertRaises(FileExistsError):
            virt.uninstall(directory)
        with mock.patch("sys.stderr", io.StringIO()) as err:
            self.assertEqual(
                1, virt.main(["install", "--nova-virt-dir", directory])
            )
        self.assertIn("not written by grant_scheduler", err.getvalue())

    def test_unknown_name(self):
        with self.assertRaises(AttributeError):
            virt.NoSuchDriver  # noqa: B018


class SpawnCase(nova_base.NovaTestCase, base.TestCase):
    """A node of grant_scheduler's and the claiming fake driver on it."""

    def setUp(self):
        super().setUp()
        self.gs.report_host(
            "cmp1", "cmp1", api.Capacity(api.Resources(4, 8192, 100))
        )
        self.driver = virt.MediumFakeDriver(fake_virt.FakeVirtAPI())
        self.driver.init_host("cmp1")
        self.context = fakes.context()

    def instance(self):
        instance = fakes.instance(str(uuid.uuid4()), FLAVOR, "cmp1")
        instance.id = 1
        return instance

    def spawn(self, instance):
        self.driver.spawn(self.context, instance, None, [], "pw", {})

    def granted(self, count=1):
        instances = [self.instance() for _ in range(count)]
        self.gs.schedule(
            2, 4096, 40, instance_uuids=[i.uuid for i in instances]
        )
        return instances


class TestClaimingSpawn(SpawnCase):
    def test_spawn_consumes_the_grant(self):
        [instance] = self.granted()
        self.spawn(instance)
        self.assertIn(instance.uuid, self.driver.instances)
        self.assertEqual("consumed", self.gs.grants()[0].state)
        self.assertEqual(api.Resources(2, 4096, 40), self.used("cmp1"))

    def test_rejected_claim_is_compute_resources_unavailable(self):
        self.granted(2)
        stranger = self.instance()
        with self.assertRaises(
            nova_exception.ComputeResourcesUnavailable
        ) as caught:
            self.spawn(stranger)
        self.assertIn("rejected", str(caught.exception))
        self.assertNotIn(stranger.uuid, self.driver.instances)
        self.assertEqual(api.Resources(), self.used("cmp1"))

    def test_failed_spawn_releases_the_claim(self):
        [instance] = self.granted()
        with mock.patch.object(
            fake_virt.FakeDriver, "spawn", side_effect=RuntimeError("boom")
        ):
            with self.assertRaises(RuntimeError):
                self.spawn(instance)
        self.assertEqual(api.Resources(), self.used("cmp1"))

    def test_destroy_releases(self):
        [instance] = self.granted()
        self.spawn(instance)
        self.driver.destroy(self.context, instance, None)
        self.assertNotIn(instance.uuid, self.driver.instances)
        self.assertEqual(api.Resources(), self.used("cmp1"))

    def test_database_away_spawns_without_a_claim(self):
        [instance] = self.granted()
        with mock.patch.object(
            api.GrantScheduler,
            "claim",
            side_effect=api.DatabaseUnavailable(url="db", reason="gone"),
        ):
            self.spawn(instance)
        self.assertIn(instance.uuid, self.driver.instances)
