"""Every test class of ``tests.nova18_21`` in this venv's Nova.

``python3 -m tests.nova18_21.run [MODULE[.CLASS]...]`` (inside a
release's venv: ``tools/nova-releases.sh run RELEASE ...``) runs the
classes in one process of their own (``tests.nova18_21.inside``:
Nova's services want a process monkey-patched from its start), prints the
outcome, the time, the slowest tests and each failed test, with the
output when one failed;
exits 1 if any test failed or was skipped.
"""

import ast
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "tests.nova18_21"
MODULES = (
    "manager",
    "boot",
    "build_hook",
    "books",
    "lifecycle",
    "candidates",
    "decisions",
)
# A guard against a hung process, not a measure of speed: the 26 classes
# of 21 took 220 s alone here, and over 900 s in CI beside the other
# chain's four lanes of tests/functional (pins) and the classes of 18.
TIMEOUT = 1800
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
    names = []
    for module, cls in classes(argv[1:]):
        names += ["%s.%s" % (PACKAGE, module), cls]
    if not names:
        print("no test class matches %s" % argv[1:])
        return 1
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-W", "ignore", "-m", PACKAGE + ".inside"]
            + names,
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
    failed = [
        line.split(" ", 1)[1]
        for line in output.splitlines()
        if line.startswith(("FAIL: ", "ERROR: "))
    ]
    if code != 0:
        print(output[-TAIL:], flush=True)
    elif "Slowest tests:" in output:
        # inside.TimedResult's last lines: where a passing run's time went.
        print(output[output.rfind("Slowest tests:") :].strip(), flush=True)
    ran = [line for line in output.splitlines() if line.startswith("Ran ")]
    print(
        "[nova %s] %d classes, %s: %s in %.0f s"
        % (
            release,
            len(names) // 2,
            ran[-1] if ran else "nothing ran",
            "ok" if code == 0 else "FAILED (%s)" % code,
            time.monotonic() - start,
        ),
        flush=True,
    )
    for name in failed:
        print("[nova %s] failed: %s" % (release, name), flush=True)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
