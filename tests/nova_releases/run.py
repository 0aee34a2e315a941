"""Every test class of ``tests.nova_releases`` in this venv's Nova.

``python3 -m tests.nova_releases.run [MODULE[.CLASS]...]`` (inside a
release's venv: ``tools/nova-releases.sh run RELEASE ...``) runs each
class in a process of its own (``tests.nova_releases.inside``: Nova's
services want a process monkey-patched from its start), one after the
other, prints each class's outcome and time and, for a failure, its
output; exits 1 if any class failed.
"""

import ast
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "tests.nova_releases"
MODULES = ("manager", "boot", "build_hook", "books")
TIMEOUT = 900
TAIL = 30000


def classes(selected=()):
    for module in MODULES:
        with open(os.path.join(HERE, module + ".py")) as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if not (
                isinstance(node, ast.ClassDef) and node.name.startswith("Test")
            ):
                continue
            name = "%s.%s" % (module, node.name)
            if selected and not any(
                name == s or module == s for s in selected
            ):
                continue
            yield module, node.name


def main(argv):
    release = os.environ.get("GRANT_SCHEDULER_NOVA_RELEASE", "?")
    checkout = os.path.dirname(os.path.dirname(HERE))
    failed, started = [], time.monotonic()
    for module, cls in classes(argv[1:]):
        start = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, "-W", "ignore", "-m", PACKAGE + ".inside"]
                + ["%s.%s" % (PACKAGE, module), cls],
                cwd=checkout,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=TIMEOUT,
                text=True,
            )
            output, code = done.stdout, done.returncode
        except subprocess.TimeoutExpired as exc:
            output, code = (
                (exc.stdout or b"").decode(errors="replace"),
                "timeout",
            )
        outcome = "ok" if code == 0 else "FAILED (%s)" % code
        print(
            "[nova %s] %s.%s: %s in %.0f s"
            % (release, module, cls, outcome, time.monotonic() - start),
            flush=True,
        )
        if code != 0:
            failed.append("%s.%s" % (module, cls))
            print(output[-TAIL:], flush=True)
    print(
        "[nova %s] %s in %.0f s"
        % (
            release,
            "failed: " + ", ".join(failed) if failed else "all passed",
            time.monotonic() - started,
        ),
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
