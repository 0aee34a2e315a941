"""Each test class of ``tests/nova22/in_nova`` in a Nova-like process.

Nova's services run monkey-patched by eventlet (``nova.monkey_patch``
first, before anything else is imported); its functional framework needs
the same.  The pytest process that also runs tests/unit and
tests/functional must not be patched, so each class runs in a process of
its own (``tests.nova22.inside``); its unittest output is the failure
message.  One test here per class there, named after it.

The selected classes run ``GRANT_SCHEDULER_NOVA22_PARALLEL`` (default 2)
at a time: each class has its own databases and services, and the first
test starts them all (``tests/nova22/conftest.py`` records which pytest
selected); each test then reports its own class's result.
"""

import ast
import concurrent.futures
import os
import subprocess
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "tests.nova22.in_nova"
TIMEOUT = 900
TAIL = 30000
PARALLEL = int(os.environ.get("GRANT_SCHEDULER_NOVA22_PARALLEL", "2"))

SELECTED = []
"""``(module, class)`` of the tests pytest selected, in order (conftest)."""

_started = {}
_lock = threading.Lock()
_pool = None


def _classes():
    """``(module, class)`` of every test class under in_nova, the module
    dotted below it (``books.test_follow``)."""
    directory = os.path.join(HERE, "in_nova")
    for path, dirs, files in sorted(os.walk(directory)):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(".py") or name.startswith("_"):
                continue
            with open(os.path.join(path, name)) as f:
                tree = ast.parse(f.read())
            module = os.path.relpath(os.path.join(path, name[:-3]), directory)
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and node.name.startswith(
                    "Test"
                ):
                    yield module.replace(os.sep, "."), node.name


def _run(module, cls):
    source_root = os.path.dirname(os.path.dirname(HERE))
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "tests.nova22.inside"]
        + [module, cls],
        cwd=source_root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=TIMEOUT,
        text=True,
    )


def _result(module, cls):
    """The finished run of one class; every selected class is started,
    ``PARALLEL`` at a time, when the first result is asked for."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max(1, PARALLEL))
        for key in SELECTED + [(module, cls)]:
            if key not in _started:
                _started[key] = _pool.submit(_run, *key)
        future = _started[(module, cls)]
    return future.result()


def _runner(module, cls):
    def test(self):
        done = _result(module, cls)
        if done.returncode != 0:
            self.fail(
                "%s.%s failed in its Nova process (exit %d):\n%s"
                % (module, cls, done.returncode, done.stdout[-TAIL:])
            )

    test.__name__ = "test_%s" % cls
    test.in_nova = (module, cls)
    return test


class TestInNova(unittest.TestCase):
    """One test per class of tests/nova22/in_nova."""


for _module, _cls in _classes():
    setattr(
        TestInNova,
        "test_%s_%s" % (_module.replace(".", "_"), _cls),
        _runner("%s.%s" % (PACKAGE, _module), _cls),
    )
