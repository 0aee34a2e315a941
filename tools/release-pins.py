#!/usr/bin/env python3
"""Write each supported Nova release's library pins, for the pinned venvs.

    tools/release-pins.py REQUIREMENTS_GIT_DIR

REQUIREMENTS_GIT_DIR is a clone of openstack/requirements (a bare one
will do).  For each release, its ``upper-constraints.txt`` at the tag
that closed the release's stable branch (``<name>-eol``) is read, its
environment markers are evaluated for the newest Python that release
lists, and the result is written to ``tools/pins/<number>-<name>.txt``:
one ``name===version`` line per library, with a header saying where it
came from.  tools/release-venvs.sh installs each release's venv with
that file as pip's constraints.

Two kinds of line are changed, and each is said in the file:

* test tooling is left out (pytest and its helpers, fixtures, testtools,
  testscenarios, the build tools): it never runs in Nova's process, and
  the project's tests need newer versions of it;
* a library whose pinned version does not install on Python 3.9 (a C
  extension or a ``setup.py`` too old for it) is replaced by the nearest
  version that does (``SUBSTITUTES`` below, with the reason).

The files are committed: CI reads them, never the network's copy.
"""

import os
import re
import subprocess
import sys

# Nova's number, openstack/requirements' name, and the newest Python its
# upper-constraints lists (where its markers are evaluated).
RELEASES = (
    (18, "rocky", "3.6"),
    (19, "stein", "3.6"),
    (20, "train", "3.7"),
    (21, "ussuri", "3.8"),
    (22, "victoria", "3.8"),
)

# Test and build tooling: not Nova's libraries, and the tests need newer.
TOOLING = frozenset(
    name.lower()
    for name in (
        "pytest",
        "pluggy",
        "py",
        "iniconfig",
        "tomli",
        "exceptiongroup",
        "attrs",
        "packaging",
        "importlib-metadata",
        "zipp",
        "fixtures",
        "testtools",
        "testscenarios",
        "testresources",
        "extras",
        "python-mimeparse",
        "linecache2",
        "traceback2",
        "unittest2",
        "setuptools",
        "wheel",
        "pip",
    )
)

# (release, name) -> (version, why): the pinned version does not install
# on Python 3.9, the nearest one that does.
# Each tried in the root: the pin fails to compile on Python 3.9, the
# version given is the oldest after it that builds.
_GREENLET = ("0.4.16", "0.4.15 does not compile on Python 3.9")
_CFFI = ("1.12.3", "older cffi does not compile on Python 3.9")
_PSYCOPG2 = ("2.8", "2.7 does not compile on Python 3.9")
SUBSTITUTES = {
    (18, "greenlet"): _GREENLET,
    (19, "greenlet"): _GREENLET,
    (20, "greenlet"): _GREENLET,
    (21, "greenlet"): _GREENLET,
    (18, "cffi"): _CFFI,
    (19, "cffi"): _CFFI,
    (18, "psycopg2"): _PSYCOPG2,
    (19, "psycopg2"): _PSYCOPG2,
}

LINE = re.compile(r"^([A-Za-z0-9_.\-]+)===([^;\s]+)\s*(?:;\s*(.*))?$")
MARKER = re.compile(r"^python_version\s*(==|!=|<=|>=|<|>)\s*'([0-9.]+)'$")


def _version(text):
    return tuple(int(part) for part in text.split("."))


def marker_holds(marker, python):
    """The ``python_version`` markers upper-constraints uses, for
    ``python``; any other marker is an error, not a guess."""
    if not marker:
        return True
    found = MARKER.match(marker.strip())
    if not found:
        raise ValueError("unexpected marker %r" % marker)
    op, value = found.groups()
    left, right = _version(python), _version(value)
    return {
        "==": left == right,
        "!=": left != right,
        "<=": left <= right,
        ">=": left >= right,
        "<": left < right,
        ">": left > right,
    }[op]


def pins(text, python):
    """``{name: version}`` of an upper-constraints text for ``python``."""
    found = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = LINE.match(line)
        if not match:
            raise ValueError("unexpected line %r" % line)
        name, version, marker = match.groups()
        if marker_holds(marker, python):
            found[name] = version
    return found


def render(number, name, python, tag, commit, found):
    lines = [
        "# Nova %d (%s): openstack/requirements upper-constraints.txt at"
        % (number, name.capitalize()),
        "# %s (%s), markers evaluated for Python %s." % (tag, commit, python),
        "# Written by tools/release-pins.py; do not edit by hand.",
        "# Left out, test and build tooling: %s."
        % ", ".join(sorted(n for n in found if n.lower() in TOOLING)),
    ]
    for (release, lib), (version, why) in sorted(SUBSTITUTES.items()):
        if release == number:
            lines.append(
                "# Substituted: %s %s -> %s (%s)."
                % (lib, found.get(lib, "(not pinned)"), version, why)
            )
    for lib in sorted(found, key=str.lower):
        if lib.lower() in TOOLING:
            continue
        version = SUBSTITUTES.get((number, lib), (found[lib], None))[0]
        lines.append("%s===%s" % (lib, version))
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    git_dir = argv[1]
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pins")
    os.makedirs(out, exist_ok=True)

    def git(*args):
        return subprocess.run(
            ["git", "-C", git_dir] + list(args),
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout

    for number, name, python in RELEASES:
        tag = "%s-eol" % name
        commit = git("rev-list", "-n", "1", tag).strip()
        text = git("show", "%s:upper-constraints.txt" % commit)
        path = os.path.join(out, "%d-%s.txt" % (number, name))
        with open(path, "w") as f:
            f.write(
                render(number, name, python, tag, commit, pins(text, python))
            )
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
