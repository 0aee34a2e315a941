"""Which process wrote a grant, and whether it has ended.

A grant names the scheduler that wrote it (``Scheduler.name``).  By
default the name is ``host:pid:start:ns``: the host's name, the process
id, the process's start time (clock ticks since the host booted) and the
inode of its pid namespace, the last two read from ``/proc``.  A grant
whose writer was killed between the grant and its answer (a scheduler
worker SIGKILLed, OOM-killed) holds its room until Nova gives its
instance up; a process on the same host and in the same pid namespace can
tell sooner that the writer has ended (``ended``): no process has its id
any more, or the one that has it started at another time (the id was
reused).

Nothing else is ever judged ended: a name of another host or another pid
namespace (a scheduler in another container), one in another form (an
earlier release's ``host:pid``, a name the caller chose), or any name
where ``/proc`` cannot be read.  A live writer is therefore never taken
for an ended one on the same host and namespace, and elsewhere nothing
is decided.
"""

import os
import re
import socket

_PROC = "/proc"
_NAME = re.compile(
    r"^(?P<host>[^:]+):(?P<pid>\d+):(?P<start>\d+):(?P<ns>\d+)$"
)
_ZOMBIE = -1


def _start(pid, proc=_PROC):
    """The start time of process ``pid`` in clock ticks since boot;
    ``_ZOMBIE`` for one that has ended but is not reaped yet (a killed
    worker its parent has not waited for); None when ``/proc`` shows no
    such process."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), "rb") as stat:
            fields = stat.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # NOTE: the command name (the second field) is in parentheses and
    # may hold spaces and parentheses itself; the fields after its last
    # ")" are the state (third) onwards, the start time the 22nd.
    after = fields[fields.rindex(")") + 2 :].split()
    if after[0] in ("Z", "X"):
        return _ZOMBIE
    return int(after[19])


def _exists(pid):
    """Whether a process ``pid`` exists, as the kernel answers a signal 0
    (which ``/proc`` mounted with ``hidepid`` does not hide)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's
    return True


def _namespace(proc=_PROC):
    return os.stat(os.path.join(proc, "self", "ns", "pid")).st_ino


def name(pid=None, proc=_PROC):
    """The name of process ``pid`` (this process when None) on this host:
    ``host:pid:start:ns``, or ``host:pid`` when ``/proc`` cannot say."""
    pid = os.getpid() if pid is None else pid
    host = socket.gethostname()
    try:
        start = _start(pid, proc)
        namespace = _namespace(proc)
    except (OSError, ValueError, IndexError):
        start = None
    if start is None or start == _ZOMBIE:
        return "%s:%d" % (host, pid)
    return "%s:%d:%d:%d" % (host, pid, start, namespace)


def ended(scheduler, proc=_PROC):
    """True only when the process named ``scheduler`` (a grant's
    ``scheduler``) ran on this host, in this pid namespace, and has
    ended; False when it runs, or when that cannot be told here."""
    match = _NAME.match(scheduler or "")
    if match is None or match.group("host") != socket.gethostname():
        return False
    pid = int(match.group("pid"))
    try:
        if int(match.group("ns")) != _namespace(proc):
            return False
        start = _start(pid, proc)
    except (OSError, ValueError, IndexError):
        return False
    if start is None:
        # NOTE: /proc may hide other users' processes (hidepid).
        return not _exists(pid)
    return start != int(match.group("start"))
