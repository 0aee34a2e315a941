"""Installing grant_scheduler into a Nova release's libraries changes
nothing but grant_scheduler.

Run by tools/release-venvs.sh in each release's pinned venv (Python 3.9,
that release's upper-constraints), with ``GRANT_SCHEDULER_WHEEL`` naming
a wheel of this checkout.  The wheel is installed as an operator would,
with its requirements resolved against what is there (``--no-index``: an
unmet floor fails instead of fetching a newer library), and the venv's
packages are compared before and after.
"""

import json
import os
import subprocess
import sys
import unittest

PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def installed():
    """``{normalised name: version}`` of the running environment."""
    out = subprocess.run(
        PIP + ["list", "--format=json"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    return {
        p["name"].lower().replace("_", "-"): p["version"]
        for p in json.loads(out)
    }


class TestInstall(unittest.TestCase):
    def test_the_wheel_changes_nothing_but_grant_scheduler(self):
        wheel = os.environ["GRANT_SCHEDULER_WHEEL"]
        subprocess.run(
            PIP + ["uninstall", "--quiet", "--yes", "grant_scheduler"],
            check=True,
        )
        before = installed()
        self.assertNotIn("grant-scheduler", before)
        subprocess.run(
            PIP + ["install", "--no-index", "--no-cache-dir", wheel],
            check=True,
        )
        after = installed()
        changed = {
            name
            for name in set(before) | set(after)
            if before.get(name) != after.get(name)
        }
        self.assertEqual({"grant-scheduler"}, changed)

    def test_pip_check_finds_nothing_broken(self):
        # After the install above (unittest runs the methods in name
        # order): every requirement of every package, ours included, met.
        result = subprocess.run(
            PIP + ["check"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.assertEqual(0, result.returncode, result.stdout)
