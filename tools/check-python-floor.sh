#!/usr/bin/env bash
# The package's Python floor (3.6, where Nova 18-22 run on RHEL 8 and
# Ubuntu 18.04), checked statically with vermin: no syntax, standard
# library module, member or argument newer than 3.6 in the packages, the
# dataclasses and contextvars backports aside (requirements.txt installs
# them on 3.6).  A line a newer interpreter only runs behind a check ends
# in "# novermin".  The check proves itself first: a file with one
# violation must fail it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
check() {
    vermin -t=3.6- --violations --no-tips --eval-annotations \
        --backport dataclasses --backport contextvars "$@"
}
sample=$(mktemp --suffix=.py)
trap 'rm -f "$sample"' EXIT
printf 'import contextlib\n\nwith contextlib.nullcontext():\n    pass\n' >"$sample"
if check "$sample" >/dev/null 2>&1; then
    echo "check-python-floor: vermin passed a file that needs Python 3.7" >&2
    exit 1
fi
check grant_scheduler grant_scheduler_bench alembic
