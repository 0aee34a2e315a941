"""A non-editable install carries its migrations: build, install, db sync.

And the plugin stays the plugin: its requirements are none of the
benchmark's, nothing in ``grant_scheduler`` imports ``grant_scheduler_bench``
or what only the benchmark needs, and the benchmark without its extra says
how to install it.
"""

import atexit
import email.parser
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

from grant_scheduler.db import migration
from tests import base

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))

# What only the benchmark needs (its extras: bench, plot, placement).
BENCH_ONLY = (
    "tabulate",
    "tqdm",
    "matplotlib",
    "openstack-placement",
    "gunicorn",
)

_WHEEL = []


def built_wheel():
    """A wheel of this checkout, built once per test process."""
    if _WHEEL:
        return _WHEEL[0]
    given = os.environ.get("GRANT_SCHEDULER_WHEEL")
    if given:
        # tools/release-venvs.sh: built on the host, as a release's pinned
        # venv holds a pbr too old to build this project.
        _WHEEL.append(given)
        return given
    wheels = tempfile.mkdtemp(prefix="gs-wheel-")
    atexit.register(shutil.rmtree, wheels, True)
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
    _WHEEL.append(os.path.join(wheels, wheel))
    return _WHEEL[0]


def _dist_info(archive, name):
    (path,) = [
        n for n in archive.namelist() if n.endswith(".dist-info/" + name)
    ]
    return archive.read(path).decode()


def _requirement_name(line):
    name = line.split(";")[0].strip()
    for stop in "<>=!~[ (":
        name = name.split(stop)[0]
    return name.strip().lower().replace("_", "-")


class TestWheelInstall(base.TestCase):
    def test_manage_db_sync_from_installed_wheel(self):
        work = self.useFixture(base.fixtures.TempDir()).path
        wheel = built_wheel()
        with zipfile.ZipFile(wheel) as archive:
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
                wheel,
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


class TestThePluginAlone(base.TestCase):
    """``pip install .`` is the plugin: the benchmark beside it brings
    nothing into Nova's environment unless its extra is asked for."""

    def test_requirements_are_none_of_the_benchmarks(self):
        with zipfile.ZipFile(built_wheel()) as archive:
            names = archive.namelist()
            meta = email.parser.Parser().parsestr(
                _dist_info(archive, "METADATA")
            )
            entry_points = _dist_info(archive, "entry_points.txt")
        required = meta.get_all("Requires-Dist") or []
        plugin = {_requirement_name(r) for r in required if "extra" not in r}
        bench = {
            _requirement_name(r)
            for r in required
            if "extra ==" in r.replace("'", '"')
            and '"bench"' in r.replace("'", '"')
        }
        self.assertIn("sqlalchemy", plugin)
        self.assertEqual(set(), plugin & set(BENCH_ONLY))
        self.assertEqual({"tabulate", "tqdm"}, bench)
        self.assertIn("bench", meta.get_all("Provides-Extra"))
        # The benchmark ships beside the plugin, in the same wheel.
        self.assertIn("grant_scheduler_bench/cli.py", names)
        self.assertIn("grant_scheduler_bench/__main__.py", names)
        self.assertFalse(
            [n for n in names if n.startswith("grant_scheduler/bench")]
        )
        self.assertNotIn("grant_scheduler/cmd/bench.py", names)
        self.assertIn(
            "grant-scheduler-bench = grant_scheduler_bench.cli:main",
            entry_points,
        )

    def test_the_plugin_never_imports_the_benchmark(self):
        # Every module of grant_scheduler, imported with the benchmark's
        # dependencies blocked: one that imported them would fail here.
        # Nova's adapters need Nova, which only the Nova environments have.
        script = """
import importlib, json, pkgutil, sys
BENCH = ("grant_scheduler_bench", "tabulate", "tqdm", "matplotlib")
for name in BENCH:
    sys.modules[name] = None
import grant_scheduler
imported, skipped, wrong = [], [], []
PREFIX = "grant_scheduler."
for info in pkgutil.walk_packages(grant_scheduler.__path__, PREFIX):
    if info.name.startswith(PREFIX + "db.migrations."):
        continue  # alembic's scripts, run by alembic only
    try:
        importlib.import_module(info.name)
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in BENCH:
            wrong.append("%s: %s" % (info.name, exc))
        elif (exc.name or "").split(".")[0] == "nova":
            skipped.append(info.name)
        else:
            raise
    else:
        imported.append(info.name)
for name in BENCH:
    del sys.modules[name]
loaded = sorted(
    m for m in sys.modules if m.split(".")[0] in BENCH
)
found = dict(imported=imported, skipped=skipped, wrong=wrong, loaded=loaded)
print(json.dumps(found))
"""
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        self.assertEqual(0, done.returncode, done.stderr)
        found = json.loads(done.stdout.splitlines()[-1])
        self.assertEqual([], found["wrong"])
        self.assertEqual([], found["loaded"])
        for module in (
            "grant_scheduler.api",
            "grant_scheduler.cmd.manage",
            "grant_scheduler.cmd.audit",
            "grant_scheduler.db.store",
            "grant_scheduler.db.migration",
        ):
            self.assertIn(module, found["imported"])
        self.assertGreater(len(found["imported"]), 30)
        self.assertEqual([], [m for m in found["skipped"] if "nova" not in m])

    def run_bench(self, *prelude, args=("--help",)):
        script = "; ".join(
            ["import runpy, sys", *prelude]
            + [
                "sys.argv = ['grant-scheduler-bench'] + %r" % (list(args),),
                "runpy.run_module('grant_scheduler_bench', "
                "run_name='__main__', alter_sys=True)",
            ]
        )
        return subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def test_python_m_runs_the_benchmark(self):
        done = self.run_bench()
        self.assertEqual(0, done.returncode, done.stderr)
        self.assertTrue(
            done.stdout.startswith("usage: grant-scheduler-bench"),
            done.stdout,
        )
        self.assertIn("--strategies", done.stdout)

    def test_without_its_extra_the_benchmark_says_how_to_install_it(self):
        for blocked in ("tabulate", "tqdm"):
            with self.subTest(blocked=blocked):
                done = self.run_bench(
                    "sys.modules[%r] = None" % blocked, args=[]
                )
                self.assertEqual(2, done.returncode, done.stderr)
                self.assertEqual("", done.stdout)
                [line] = done.stderr.splitlines()
                self.assertIn(blocked, line)
                self.assertIn("pip install 'grant_scheduler[bench]'", line)
