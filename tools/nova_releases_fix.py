"""Make an installed Nova 18-21 from PyPI run on Python 3.9.

``python nova_releases_fix.py SITE/nova`` edits the installed copy of Nova
(never grant_scheduler) in place, and is safe to run again.  Each fix names
its file, the text the release ships and the text that replaces it; a file
that has neither fails the run, so a fix that no longer fits is noticed
rather than skipped.  Used by ``tools/nova-releases.sh build``.
"""

import os
import sys

# (file under nova/, text as shipped, replacement)
FIXES = [
    # oslo.service's eventlet hub clock on Python 3.9 is time.monotonic
    # under another object, so Nova's identity check refuses to start
    # every service: compare the functions by name.
    (
        "service.py",
        "if hub.clock is not monotonic.monotonic:",
        "if getattr(hub.clock, '__name__', None) != "
        "monotonic.monotonic.__name__:",
    ),
]

# Nova 18 predates Python 3.7 (``async`` became a keyword) and 3.9
# (``base64.decodestring`` and ``fractions.gcd`` are gone).
FIXES_18 = [
    (
        "db/sqlalchemy/api.py",
        "get_context_manager(context).async\n",
        "get_context_manager(context).async_\n",
    ),
    (
        "api/validation/validators.py",
        "base64.decodestring(instance)",
        "base64.decodebytes(instance)",
    ),
    (
        "virt/hardware.py",
        "return fractions.gcd(",
        "return __import__('math').gcd(",
    ),
]


# eventlet before 0.26 leaves queue.SimpleQueue, C code since Python 3.7,
# unpatched (eventlet issue 508): a green thread waiting in
# concurrent.futures.ThreadPoolExecutor's SimpleQueue.get blocks the whole
# process.  Nova 18's live migrations run in such an executor, so the
# first live migration hangs every service for good.  Where the venv's
# eventlet is one of those, each eventlet.monkey_patch() of Nova's that
# greens threads is followed by what eventlet 0.26 does there.
GREEN_SIMPLE_QUEUE = (
    "__import__('queue').SimpleQueue = __import__('queue')._PySimpleQueue"
    "  # eventlet < 0.26 on Python >= 3.7\n"
)


def _after(relative, line, indent=""):
    return (relative, line, line + indent + GREEN_SIMPLE_QUEUE)


FIXES_SIMPLE_QUEUE_18 = [
    # The functional tests' monkey-patching, and the services'.
    _after(
        "tests/functional/__init__.py", "\neventlet.monkey_patch(os=False)\n"
    ),
    _after("test.py", "\neventlet.monkey_patch(os=False)\n"),
    _after(
        "cmd/__init__.py",
        "else:\n    eventlet.monkey_patch(os=False)\n",
        "    ",
    ),
]
FIXES_SIMPLE_QUEUE = [
    # Nova 19 on: one place, nova/monkey_patch.py, for tests and services.
    _after(
        "monkey_patch.py",
        "    else:\n        eventlet.monkey_patch()\n",
        "        ",
    ),
]


def eventlet_greens_simple_queue():
    """Whether this Python's eventlet patches queue.SimpleQueue itself."""
    import eventlet.patcher

    with open(eventlet.patcher.__file__) as f:
        return "_PySimpleQueue" in f.read()


def release(nova_dir):
    for name in os.listdir(os.path.dirname(nova_dir)):
        if name.startswith("nova-") and name.endswith(".dist-info"):
            return int(name[len("nova-") :].split(".")[0])
    raise SystemExit("no nova-*.dist-info beside %s" % nova_dir)


def apply(nova_dir, fixes):
    for relative, shipped, fixed in fixes:
        path = os.path.join(nova_dir, relative)
        with open(path) as f:
            text = f.read()
        if fixed in text:
            continue
        if shipped in text:
            text = text.replace(shipped, fixed)
            with open(path, "w") as f:
                f.write(text)
            print("fixed nova/%s" % relative)
        else:
            raise SystemExit(
                "nova/%s has neither %r nor its fix" % (relative, shipped)
            )


def main(argv):
    if len(argv) != 2:
        raise SystemExit("usage: nova_releases_fix.py SITE-PACKAGES/nova")
    nova_dir = os.path.abspath(argv[1])
    fixes = list(FIXES)
    number = release(nova_dir)
    if number <= 18:
        fixes += FIXES_18
    if not eventlet_greens_simple_queue():
        fixes += FIXES_SIMPLE_QUEUE_18 if number <= 18 else FIXES_SIMPLE_QUEUE
    apply(nova_dir, fixes)
    # Every module must compile on this Python (a release's syntax that
    # this one refuses would otherwise surface only when imported).
    import compileall

    if not compileall.compile_dir(nova_dir, quiet=2, workers=2):
        raise SystemExit(
            "Nova in %s does not compile on this Python" % nova_dir
        )


if __name__ == "__main__":
    main(sys.argv)
