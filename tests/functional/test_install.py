"""A non-editable install carries its migrations: build, install, db sync."""

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

from grant_scheduler.db import migration
from tests import base

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


class TestWheelInstall(base.TestCase):
    def test_manage_db_sync_from_installed_wheel(self):
        work = self.useFixture(base.fixtures.TempDir()).path
        wheels = os.path.join(work, "wheels")
        env = dict(os.environ)
        if shutil.which("git") is None:
            # NOTE: pbr takes the version from git; where there is none (the
            # Nova 22 root has no git), it is given, as packagers give it.
            env["PBR_VERSION"] = importlib.metadata.version("grant_scheduler")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--wheel-dir",
                wheels,
                REPO_ROOT,
            ],
            check=True,
            timeout=600,
            env=env,
        )
        (wheel,) = os.listdir(wheels)
        with zipfile.ZipFile(os.path.join(wheels, wheel)) as archive:
            names = archive.namelist()
        self.assertIn("grant_scheduler/db/migrations/env.py", names)
        self.assertIn(
            "grant_scheduler/db/migrations/versions/0001_initial_schema.py",
            names,
        )

        target = os.path.join(work, "site")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                target,
                os.path.join(wheels, wheel),
            ],
            check=True,
            timeout=600,
        )
        conf = os.path.join(work, "gs.conf")
        with open(conf, "w") as f:
            f.write(
                "[grant_scheduler_database]\nconnection = sqlite:///%s\n"
                % os.path.join(work, "gs.sqlite")
            )
        # NOTE: run from a directory outside the checkout, with only the
        # installed copy importable, so nothing comes from the source tree.
        env = dict(os.environ, PYTHONPATH=target)
        script = os.path.join(target, "bin", "grant-scheduler-manage")
        outside = tempfile.mkdtemp(dir=work)
        for command in (["db", "sync"], ["db", "version"]):
            result = subprocess.run(
                [sys.executable, script, "--config-file", conf, *command],
                cwd=outside,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual(migration.head_revision(), result.stdout.strip())
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                "import grant_scheduler; print(grant_scheduler.__file__)",
            ],
            cwd=outside,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertTrue(result.stdout.startswith(target), result.stdout)
