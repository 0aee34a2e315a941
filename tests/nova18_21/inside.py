"""Run test classes of ``tests.nova18_21`` in a Nova-like process.

``python3 -m tests.nova18_21.inside MODULE CLASS [MODULE CLASS...]``
(in a release's venv, ``tools/nova-releases.sh run RELEASE ...``):

* puts this checkout behind the installed packages on ``sys.path``, so
  ``grant_scheduler`` is the wheel installed in the venv (the checkout
  still provides ``tests``);
* imports ``nova.tests.functional`` before any other Nova module, as Nova's
  own functional tests do (it monkey-patches; without it a boot fails with
  "SAVEPOINT ... no existing transaction");
* checks that Nova is the venv's release (``GRANT_SCHEDULER_NOVA_RELEASE``),
  not the root's Nova 22, and that grant_scheduler is the installed wheel;
* runs the classes with unittest and exits 0 only if every test passed
  and none was skipped.
"""

import os
import sys

_HERE = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
_CHECKOUT = os.path.abspath(_HERE)
sys.path[:] = [
    p for p in sys.path if os.path.abspath(p or os.curdir) != _CHECKOUT
] + [_CHECKOUT]

import nova.tests.functional  # noqa: E402,F401,I001 - first: it monkey-patches

import importlib  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402

import grant_scheduler  # noqa: E402
import nova  # noqa: E402
from nova import version  # noqa: E402


def check_release():
    """The venv's Nova and the installed grant_scheduler, or exit."""
    want = os.environ.get("GRANT_SCHEDULER_NOVA_RELEASE")
    venv = os.environ.get("VIRTUAL_ENV")
    got = version.version_info.release_string()
    problems = []
    if not want or not venv:
        problems.append("run through tools/nova-releases.sh run RELEASE")
    else:
        if got.split(".")[0] != want:
            problems.append("Nova %s, not %s" % (got, want))
        for module in (nova, grant_scheduler):
            if not module.__file__.startswith(venv + "/"):
                problems.append(
                    "%s from %s, not %s"
                    % (module.__name__, module.__file__, venv)
                )
    if problems:
        sys.exit("wrong environment: " + "; ".join(problems))
    return got


class TimedResult(unittest.TextTestResult):
    """Verbose results with each test's seconds after its outcome, and
    the slowest tests at the end: a run that outgrows its time shows
    where the time went (the output up to the cut is printed)."""

    SLOWEST = 10

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seconds = {}

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        seconds = time.monotonic() - self._started
        self.seconds[test.id()] = seconds
        self.stream.writeln("  (%.1f s)" % seconds)
        self.stream.flush()
        super().stopTest(test)

    def printErrors(self):
        super().printErrors()
        slowest = sorted(self.seconds.items(), key=lambda i: -i[1])
        self.stream.writeln("Slowest tests:")
        for test_id, seconds in slowest[: self.SLOWEST]:
            self.stream.writeln("  %6.1f s  %s" % (seconds, test_id))


def main(argv):
    if len(argv) < 3 or len(argv) % 2 != 1:
        print("usage: python3 -m tests.nova18_21.inside MODULE CLASS...")
        return 2
    release = check_release()
    print("Nova %s (%s)" % (release, os.path.dirname(nova.__file__)))
    suite = unittest.TestSuite()
    for name, cls in zip(argv[1::2], argv[2::2]):
        module = importlib.import_module(name)
        suite.addTests(
            unittest.defaultTestLoader.loadTestsFromTestCase(
                getattr(module, cls)
            )
        )
    runner = unittest.TextTestRunner(
        stream=sys.stdout, verbosity=2, resultclass=TimedResult
    )
    result = runner.run(suite)
    # A skip is a check that did not run: here that is a failure.
    if result.skipped:
        print("FAILED: %d skipped" % len(result.skipped))
        return 1
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
