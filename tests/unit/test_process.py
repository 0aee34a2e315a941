"""``process``: a grant's scheduler name, and whether that process ended.

The processes are real: children of the test started, killed and reaped.
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from unittest import mock

from grant_scheduler import process
from grant_scheduler import scheduler
from tests import base

CHILD = "import sys; from grant_scheduler import process; " + (
    "print(process.name(), flush=True); sys.stdin.read()"
)


def _child():
    """A Python process that prints its name and waits for its stdin."""
    return subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        universal_newlines=True,
    )


def _ended_child():
    """The name of a child that has exited and been reaped."""
    child = _child()
    name = child.stdout.readline().strip()
    child.stdin.close()
    child.wait()
    return name


def _state(pid):
    with open("/proc/%d/stat" % pid) as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


class TestName(base.TestCase):
    def test_a_scheduler_is_named_after_its_process(self):
        host, pid, start, namespace = scheduler.default_name().split(":")
        self.assertEqual(socket.gethostname(), host)
        self.assertEqual(os.getpid(), int(pid))
        self.assertGreater(int(start), 0)
        self.assertEqual(os.stat("/proc/self/ns/pid").st_ino, int(namespace))

    def test_without_proc_the_name_is_host_and_pid(self):
        with tempfile.TemporaryDirectory() as empty:
            name = process.name(proc=empty)
        self.assertEqual("%s:%d" % (socket.gethostname(), os.getpid()), name)
        self.assertFalse(process.ended(name))


class TestEnded(base.TestCase):
    def test_a_running_process_has_not_ended(self):
        self.assertFalse(process.ended(process.name()))
        child = _child()
        self.addCleanup(child.wait)
        self.addCleanup(child.stdin.close)
        name = child.stdout.readline().strip()
        self.assertEqual(name, process.name(child.pid))
        self.assertFalse(process.ended(name))

    def test_a_process_that_exited_has_ended(self):
        self.assertTrue(process.ended(_ended_child()))

    def test_a_killed_process_not_yet_reaped_has_ended(self):
        child = _child()
        self.addCleanup(child.wait)
        name = child.stdout.readline().strip()
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _state(child.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        # Its parent (this test) has not waited for it: a zombie, whose
        # pid still answers a signal.
        self.assertEqual("Z", _state(child.pid))
        os.kill(child.pid, 0)
        self.assertTrue(process.ended(name))

    def test_a_pid_taken_by_another_process_has_ended(self):
        host, pid, start, namespace = process.name().split(":")
        earlier = ":".join((host, pid, str(int(start) - 1), namespace))
        self.assertTrue(process.ended(earlier))

    def test_what_cannot_be_told_here_never_has_ended(self):
        name = _ended_child()
        host, pid, start, namespace = name.split(":")
        for other in (
            # another host, another pid namespace
            ":".join(("not-" + host, pid, start, namespace)),
            ":".join((host, pid, start, str(int(namespace) + 1))),
            # an earlier release's name, a name of the caller's
            "%s:%s" % (host, pid),
            "scheduler-1",
            "",
            None,
        ):
            self.assertFalse(process.ended(other), other)
        self.assertTrue(process.ended(name))

    def test_a_process_proc_hides_is_asked_of_the_kernel(self):
        # /proc mounted with hidepid shows no other user's process: one
        # that still answers a signal has not ended.
        mine = process.name()
        with mock.patch.object(process, "_start", return_value=None):
            self.assertFalse(process.ended(mine))
        name = _ended_child()
        with mock.patch.object(process, "_start", return_value=None):
            self.assertTrue(process.ended(name))
