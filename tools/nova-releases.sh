#!/usr/bin/env bash
# Nova 18 (Rocky), 19 (Stein), 20 (Train) and 21 (Ussuri) from PyPI, each
# in a virtualenv inside the Debian bullseye root that tools/nova22-root.sh
# builds (for its Python 3.9), on that release's own pinned libraries.
#
#   tools/nova-releases.sh build [RELEASE...]    make (or reuse) the venvs
#   tools/nova-releases.sh install [RELEASE...]  install a wheel of this
#                                                checkout into them
#   tools/nova-releases.sh build|install --for COMMAND [ARG...]
#                                                only the releases COMMAND
#                                                runs in (check: 18, 19 and
#                                                21; tox -e nova-old)
#   tools/nova-releases.sh run RELEASE CMD...    run CMD in the root with
#                                                that venv first on PATH,
#                                                cwd /src (this checkout)
#   tools/nova-releases.sh test [RELEASE...]     tests/nova18_21 in
#                                                each release, one after
#                                                the other
#   tools/nova-releases.sh own [RELEASE...]      the release's own functional
#                                                tests of tests/nova18_21/
#                                                own_tests.txt with ours,
#                                                compared with the stock
#                                                scheduler's recorded run
#                                                (OWN_BOTH=1: run stock too
#                                                and rewrite the record;
#                                                OWN_TESTS="MODULE...": only
#                                                those modules, and only
#                                                their part of the record)
#   tools/nova-releases.sh check                 what CI runs: every class
#                                                of tests/nova18_21 in 18
#                                                and 21, side by side,
#                                                then the own
#                                                tests tests/nova18_21/
#                                                own_tests_ci.txt assigns
#                                                to each release, with ours
#
# RELEASE is 18, 19, 20 or 21; none means all four.  Run as root, after
# "tools/nova22-root.sh build".
#
# Each venv (/opt/nova-pins/RELEASE in the root) is "python3 -m venv"
# with no system site-packages: that release's Nova from PyPI, every
# requirement it declares, and what its functional tests import
# (TEST_LIBS; for 19-21 the placement of the same cycle, PLACEMENT), all
# installed by pip with the release's pins of tools/pins/ (its
# upper-constraints, tools/release-pins.py) as constraints, so the
# release runs on its own libraries, not the root's Victoria stack.  The
# pins that do not install on Python 3.9 are replaced by the nearest
# version that does (SUBSTITUTES below, each with its reason).  Of the
# test and build tooling the pins files leave out, what Nova's libraries
# import at run time is pinned at the release's upper-constraints
# (RUNTIME_TOOLING), the rest (fixtures, testtools, testscenarios,
# testresources, extras) is the newest that the pins allow, as in
# tools/release-venvs.sh.  The fixes the installed Nova needs on Python
# 3.9 are made by tools/nova_releases_fix.py in the venv's copy of Nova,
# never in grant_scheduler.  A venv is rebuilt only when its inputs
# change: the release, its pins file and the substitutions, the fix
# script, this script's build steps, and the root's package set (a stamp
# in the venv, written last, so an interrupted build is redone).  After
# the build, every installed library that the constraints name is
# checked to be at its (substituted) pin, and the venv's Nova to be its
# release's.
#
# The plugin goes in unpatched: a wheel built on the host from a copy of
# this checkout (PBR_VERSION set, the copy has no git), installed with
# --no-deps (the release's libraries provide its requirements).
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOT=${GRANT_SCHEDULER_NOVA22_ROOT:-/var/cache/grant_scheduler/nova22-root}
ROOT=${ROOT%/}
ROOT_TOOL="$SRC/tools/nova22-root.sh"
# Paths inside the root.
VENVS=/opt/nova-pins
LOCK="$ROOT.releases.lock"

ALL=(18 19 20 21)
declare -A NOVA=([18]=18.3.0 [19]=19.3.2 [20]=20.6.1 [21]=21.2.4)
declare -A NAME=([18]=rocky [19]=stein [20]=train [21]=ussuri)

# What Nova's functional tests (and tests/nova18_21, through them)
# import beyond the requirements Nova declares: its test-requirements'
# libraries, at the release's pins (oslotest.moxstubout and mox3 for
# nova.test, mock, requests-mock, wsgi-intercept for the API and
# placement fixtures, osprofiler, ddt, the database drivers) and the test
# tooling the pins leave out (newest).
TEST_LIBS=(
    oslotest mox3 mock requests-mock wsgi-intercept osprofiler ddt
    PyMySQL psycopg2 fixtures testtools testscenarios testresources
)
# From Stein on, Nova's functional tests run placement from its own
# package (nova/tests/functional/fixtures.py imports
# placement.tests.functional.fixtures), which upper-constraints does not
# pin: the last release of the same cycle.
declare -A PLACEMENT=(
    [18]="" [19]="openstack-placement==1.1.0"
    [20]="openstack-placement==2.0.1" [21]="openstack-placement==3.0.1"
)

# What the pins files leave out as test and build tooling
# (tools/release-pins.py's TOOLING) but Nova's own libraries import at run
# time, at the release's upper-constraints (at the commit its pins file
# names): kombu 4.6 reads entry points through importlib-metadata (whose
# 5.0 dropped the API it uses), which needs zipp; jsonschema 3 needs
# attrs; deprecation (openstacksdk's) needs packaging.  Newest, these
# break the release (kombu: "'EntryPoints' object has no attribute
# 'get'").  The tooling that only the tests use (fixtures, testtools, ...)
# stays the newest, as in tools/release-venvs.sh.  One substitution:
# Train's importlib-metadata 0.20 fails on import on Python 3.8 and later
# ("AttributeError: 'str' object has no attribute 'name'", from the
# standard library's finder it calls the old way); 0.21 is the nearest
# that works (tried in the root).
declare -A RUNTIME_TOOLING=(
    [18]="attrs===18.1.0 packaging===17.1"
    [19]="attrs===19.1.0 packaging===19.0"
    [20]="attrs===19.1.0 importlib-metadata===0.21 packaging===19.1 zipp===0.6.0"
    [21]="attrs===19.3.0 importlib-metadata===1.6.0 packaging===20.3 zipp===3.1.0"
)

# Pins that do not install on Python 3.9, and the nearest version that
# does: "RELEASE:NAME" -> VERSION.  Each was tried in the root; the
# reasons:
#   lxml 4.2.3/4.3.2/4.4.1/4.5.0 -> 4.5.2: no wheel for Python 3.9 (4.5.2
#       is the oldest with one), and the sdist needs libxml2 and libxslt
#       headers the root does not have.
#   numpy 1.14.5/1.16.2/1.17.2/1.18.2 -> 1.19.3: no wheel for Python 3.9
#       (1.19.3 is the oldest with one); 1.14.5's sdist does not compile
#       on 3.9 (the later sdists were not tried: a numpy build takes
#       minutes, for a library nothing here runs).  Only websockify
#       requires it, and imports it optionally; Nova never imports it.
#   tooz 1.64.3 -> 1.66.0: 1.64.x requires grpcio<1.16, which has no
#       wheel for Python 3.9 and whose sdist needs a C++ compiler the
#       root does not have; 1.65.0 requires grpcio>=1.18 (no wheel for
#       3.9 either); 1.66.0 makes grpcio an extra (its etcd3 driver) and
#       otherwise requires what 1.64.3 does.  Only nova.virt.ironic
#       imports tooz (its hash ring, no grpc), which the functional tests
#       never load.
#   zVMCloudConnector 1.2.2 -> 1.2.3: 1.2.2's setup.py refuses Python
#       newer than 3.6; 1.2.3 dropped that check.  Only nova.virt.zvm
#       imports it, which the functional tests never load.
declare -A SUBSTITUTES=(
    [18:lxml]=4.5.2 [19:lxml]=4.5.2 [20:lxml]=4.5.2 [21:lxml]=4.5.2
    [18:numpy]=1.19.3 [19:numpy]=1.19.3 [20:numpy]=1.19.3 [21:numpy]=1.19.3
    [18:zVMCloudConnector]=1.2.3
    [19:tooz]=1.66.0
)

log() { printf '[nova-releases] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

releases() {
    if [ "$#" -eq 0 ]; then
        echo "${ALL[@]}"
        return
    fi
    local r
    for r in "$@"; do
        [ -n "${NOVA[$r]:-}" ] || die "unknown release '$r' (one of ${ALL[*]})"
    done
    echo "$@"
}

# The releases "COMMAND ARG..." runs in: "check" those of CI_PAIRS and
# CI_OWN, "run" its first, "test" and "own" theirs (none: all).
releases_for() {
    local command=${1:-check}
    [ "$#" -eq 0 ] || shift
    case "$command" in
        check)
            # shellcheck disable=SC2068 # each pair's releases, a word each
            printf '%s\n' ${CI_PAIRS[@]} \
                $(awk '!/^#/ && NF { print $1 }' "$SRC/$CI_OWN") | sort -un |
                tr '\n' ' '
            ;;
        run) releases "${1:?usage: run RELEASE COMMAND [ARG...]}" ;;
        test | own) releases "$@" ;;
        *) die "unknown command '$command'" ;;
    esac
}

in_root() { bash "$ROOT_TOOL" run "$@"; }

pins_of() { echo "tools/pins/$1-${NAME[$1]}.txt"; }

# The release's pins with its substitutions and its RUNTIME_TOOLING:
# pip's constraints.
constraints_of() {
    local r=$1 key name sed=(-e '') extra=()
    for key in "${!SUBSTITUTES[@]}"; do
        [ "${key%%:*}" = "$r" ] || continue
        name=${key#*:}
        grep -qix "$name===.*" "$SRC/$(pins_of "$r")" ||
            die "substitute for $name, which $(pins_of "$r") does not pin"
        sed+=(-e "/^${name//./\\.}===/Id")
        extra+=("$name===${SUBSTITUTES[$key]}")
    done
    sed "${sed[@]}" "$SRC/$(pins_of "$r")"
    if [ "${#extra[@]}" -gt 0 ]; then
        echo "# Substituted by tools/nova-releases.sh (SUBSTITUTES):"
        printf '%s\n' "${extra[@]}" | sort
    fi
    echo "# Left out of the pins as tooling (RUNTIME_TOOLING):"
    for key in ${RUNTIME_TOOLING[$r]}; do
        ! grep -qix "${key%%===*}===.*" "$SRC/$(pins_of "$r")" ||
            die "RUNTIME_TOOLING pins ${key%%===*}, which $(pins_of "$r") pins"
        echo "$key"
    done
}

# What a venv is made of: its release, its constraints (the pins file,
# the substitutions and RUNTIME_TOOLING), what else it installs, the fixes, the steps that
# build it, and the root's package set.
stamp_of() {
    local r=$1
    {
        echo "nova==${NOVA[$r]} ${TEST_LIBS[*]} ${PLACEMENT[$r]}"
        cat "$SRC/$(pins_of "$r")"
        constraints_of "$r"
        cat "$SRC/tools/nova_releases_fix.py"
        declare -f build_one check_venv constraints_of
        echo "$REQUIRES $CHECK_NOVA $CHECK_PINS"
        cat "$ROOT/var/lib/grant-scheduler-nova22/packages.sha256"
    } | sha256sum | cut -d' ' -f1
}

# The requirements distribution $1 declares (markers evaluated, extras
# left out), one a line: Nova's, installed with the pins after Nova
# itself.
REQUIRES='
import sys
from importlib import metadata
from pip._vendor.packaging.requirements import Requirement
for line in metadata.requires(sys.argv[1]) or []:
    req = Requirement(line)
    if req.marker is None or req.marker.evaluate({"extra": ""}):
        req.marker = None
        print(req)
'

build_one() {
    local r=$1 venv="$VENVS/$1" want have
    want=$(stamp_of "$r")
    have=$(cat "$ROOT$venv/.stamp" 2>/dev/null || true)
    if [ "$want" = "$have" ]; then
        log "Nova $r (${NOVA[$r]}): venv up to date"
        return 0
    fi
    local start=$SECONDS
    log "Nova $r (${NOVA[$r]}): building $venv with $(pins_of "$r")"
    rm -rf --one-file-system "${ROOT:?}$venv"
    mkdir -p "$ROOT$venv"
    constraints_of "$r" >"$ROOT$venv/constraints.txt"
    # pip in the root reaches the package index as the host's pip does:
    # the host's certificate bundle and index, read at run time (nothing
    # of this machine is written into the repository).
    local cert=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt} index
    index=$(python3 -m pip config get global.index-url 2>/dev/null || true)
    mkdir -p "$ROOT/tmp"
    cp "$cert" "$ROOT/tmp/nova-releases-ca.crt"
    # shellcheck disable=SC2086 # PLACEMENT: none or one requirement
    in_root env PIP_CERT=/tmp/nova-releases-ca.crt \
        ${index:+PIP_INDEX_URL="$index"} /bin/sh -c '
        set -ef
        venv=$1 nova=$2 requires=$3
        shift 3
        python3 -m venv "$venv"
        pip="$venv/bin/python -m pip --quiet --disable-pip-version-check --no-cache-dir"
        c="$venv/constraints.txt"
        # Nova first, alone, to read what it requires; then all of that
        # and the test libraries in one resolution, each at its pin
        # where the constraints name it.
        $pip install --no-deps -c "$c" "$nova"
        reqs=$("$venv/bin/python" -c "$requires" nova)
        # shellcheck disable=SC2086 # one requirement a line
        $pip install -c "$c" $reqs "$@"
        $venv/bin/python -m pip check
        site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()[\"purelib\"])")
        # Nova looks for etc/nova/api-paste.ini beside site-packages; the
        # wheel put it in the venv.
        ln -sfn "$venv/etc" "$site/etc"
        "$venv/bin/python" /src/tools/nova_releases_fix.py "$site/nova"
        # Byte-compiled as an installer leaves a deployment (the runs
        # here set PYTHONDONTWRITEBYTECODE): old libraries warn when
        # compiled on Python 3.9.
        "$venv/bin/python" -W ignore -m compileall -q "$venv/lib" >/dev/null
    ' sh "$venv" "nova==${NOVA[$r]}" "$REQUIRES" "${TEST_LIBS[@]}" \
        ${PLACEMENT[$r]}
    check_venv "$r"
    echo "$want" >"$ROOT$venv/.stamp"
    log "Nova $r: built in $((SECONDS - start)) s"
}

# The venv imports its own Nova, of its release, not the root's Nova 22.
CHECK_NOVA='
import os
import sys
venv, want = sys.argv[1], sys.argv[2]
import nova.tests.functional  # noqa: F401 - first, as the tests do
import nova
from nova import version
import nova.hooks, nova.scheduler.manager, nova.compute.manager  # noqa
got = version.version_info.release_string()
if not nova.__file__.startswith(venv + "/") or got != want:
    sys.exit("wrong Nova in %s: %s from %s" % (venv, got, nova.__file__))
site = os.path.dirname(os.path.dirname(nova.__file__))
if not os.path.exists(os.path.join(site, "etc/nova/api-paste.ini")):
    sys.exit("no etc/nova/api-paste.ini in %s" % site)
print("[nova-releases] Nova %s from %s" % (got, nova.__file__),
      file=sys.stderr)
'
# Every installed library the constraints name is at its pin.  (In a
# process of its own: once Nova 19 has monkey-patched os, Stein's eventlet
# 0.24.1 breaks pathlib's open on Python 3.9, and importlib.metadata reads
# through pathlib.)
CHECK_PINS='
import os
import re
import sys
from importlib import metadata
def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()
pins = {}
with open(os.path.join(sys.argv[1], "constraints.txt")) as f:
    for line in f:
        if line.strip() and not line.startswith("#"):
            name, version = line.strip().split("===")
            pins[norm(name)] = version
wrong, unpinned = [], []
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    pin = pins.get(norm(name))
    if pin is None:
        unpinned.append("%s %s" % (name, dist.version))
    elif pin != dist.version:
        wrong.append("%s %s (pinned %s)" % (name, dist.version, pin))
if wrong:
    sys.exit("not at the pins: " + ", ".join(sorted(wrong)))
print("[nova-releases] every pinned library at its pin; not pinned: "
      + ", ".join(sorted(unpinned)), file=sys.stderr)
'
check_venv() {
    local r=$1 venv="$VENVS/$1"
    in_root "$venv/bin/python" -c "$CHECK_PINS" "$venv"
    in_root "$venv/bin/python" -c "$CHECK_NOVA" "$venv" "${NOVA[$r]}"
}

cmd_build() {
    [ -f "$ROOT/var/lib/grant-scheduler-nova22/packages.sha256" ] ||
        die "build the root first: tools/nova22-root.sh build"
    local r
    for r in "$@"; do
        build_one "$r"
    done
}

# A wheel of the working tree (tracked and untracked files, .gitignore
# honoured), built from a copy so the build writes nothing here.
build_wheel() {
    local out=$1 copy version
    copy=$(mktemp -d)
    (cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -C "$copy" -xf -
    version="0.0.1.dev$(git -C "$SRC" rev-list --count HEAD)"
    PBR_VERSION=$version python3 -m pip wheel --quiet --no-deps -w "$out" \
        "$copy"
    rm -rf "$copy"
}

cmd_install() {
    local r start=$SECONDS dir
    mkdir -p "$ROOT/tmp"
    dir=$(mktemp -d "$ROOT/tmp/nova-releases-wheel.XXXXXX")
    build_wheel "$dir"
    local wheels=("$dir"/grant_scheduler-*.whl)
    [ -f "${wheels[0]}" ] || die "no wheel in $dir"
    local wheel=/tmp/${dir##*/}/${wheels[0]##*/}
    for r in "$@"; do
        [ -f "$ROOT$VENVS/$r/.stamp" ] || die "build Nova $r first"
        in_root "$VENVS/$r/bin/python" -m pip install --quiet --no-index \
            --no-deps --force-reinstall --no-cache-dir \
            --disable-pip-version-check "$wheel"
        in_root "$VENVS/$r/bin/python" -c '
import sys
sys.path = [p for p in sys.path if p not in ("", "/src")]
import grant_scheduler
if not grant_scheduler.__file__.startswith(sys.argv[1] + "/"):
    sys.exit("grant_scheduler from %s, not the venv" % grant_scheduler.__file__)
' "$VENVS/$r"
    done
    rm -rf "$dir"
    log "installed $(basename "$wheel") into Nova $* in $((SECONDS - start)) s"
}

cmd_run() {
    local r=$1
    shift
    [ "$#" -gt 0 ] || die "usage: $0 run RELEASE COMMAND [ARG...]"
    [ -n "${NOVA[$r]:-}" ] || die "unknown release '$r'"
    [ -f "$ROOT$VENVS/$r/.stamp" ] || die "build Nova $r first: $0 build $r"
    in_root /usr/bin/env \
        PATH="$VENVS/$r/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        VIRTUAL_ENV="$VENVS/$r" GRANT_SCHEDULER_NOVA_RELEASE="$r" "$@"
}

# tests/nova18_21 in release $1 (the modules or classes after it, or
# all of them).
run_tests() {
    local r=$1 start=$SECONDS
    shift
    if cmd_run "$r" python3 -W ignore -m tests.nova18_21.run "$@"; then
        log "Nova $r: passed in $((SECONDS - start)) s"
    else
        log "Nova $r: FAILED in $((SECONDS - start)) s"
        return 1
    fi
}

cmd_test() {
    local r failed=()
    for r in "$@"; do
        run_tests "$r" || failed+=("$r")
    done
    [ "${#failed[@]}" = 0 ] || { log "failed on Nova ${failed[*]}"; return 1; }
}

# Nova's own tests in release $1 with ours, compared with the stock
# scheduler's recorded run: the modules after it, or every module of
# own_tests.txt that release runs.  OWN_BOTH=1: run the stock scheduler
# too, and rewrite its record (of the modules run).
own_one() {
    local r=$1 start=$SECONDS rc=0 both=()
    shift
    [ "$#" -gt 0 ] || set -- @tests/nova18_21/own_tests.txt
    [ -z "${OWN_BOTH:-}" ] || both=(--both)
    cmd_run "$r" python3 -W ignore -m tests.nova18_21.own_tests \
        --workers 2 --out /src/.nova-own-tests \
        --allowed tests/nova18_21/own_tests_allowed.txt \
        --record "tests/nova18_21/own_tests_stock_$r.json" \
        "${both[@]}" "$@" || rc=1
    log "Nova $r own tests: $((SECONDS - start)) s"
    return "$rc"
}

cmd_own() {
    local r rc=0
    for r in "$@"; do
        # shellcheck disable=SC2086 # OWN_TESTS holds several modules
        own_one "$r" ${OWN_TESTS:-} || rc=1
    done
    return "$rc"
}

# What CI runs: every class of tests/nova18_21 in the two ends, 18 and
# 21, side by side (each class runs in one process, which leaves a core
# mostly idle; each one's output is printed when it ends; 19 and 20, in
# between, by hand: "test 19 20"); then, with ours only, the own tests that
# own_tests_ci.txt assigns to each release, 19 among them (the stock
# scheduler's runs are the records).  Every part runs even when an
# earlier one failed.
CI_PAIRS=("18 21")
CI_OWN=tests/nova18_21/own_tests_ci.txt
cmd_check() {
    local rc=0 start=$SECONDS pair r dir names
    dir=$(mktemp -d)
    for pair in "${CI_PAIRS[@]}"; do
        for r in $pair; do
            run_tests "$r" >"$dir/$r.log" 2>&1 &
            echo $! >"$dir/$r.pid"
        done
        for r in $pair; do
            wait "$(cat "$dir/$r.pid")" || rc=1
            cat "$dir/$r.log"
        done
    done
    rm -rf "$dir"
    log "check: the classes in $((SECONDS - start)) s"
    for r in "${ALL[@]}"; do
        names=$(awk -v r="$r" '$1 == r { print $2 }' "$SRC/$CI_OWN")
        [ -n "$names" ] || continue
        # shellcheck disable=SC2086 # one module a word
        own_one "$r" $names || rc=1
    done
    log "check: $((SECONDS - start)) s, $([ "$rc" = 0 ] && echo passed || echo FAILED)"
    return "$rc"
}

main() {
    [ "$(id -u)" = 0 ] || die "run as root (chroot and mount need it)"
    command=${1:-}
    [ "$#" -eq 0 ] || shift
    mkdir -p "$(dirname "$ROOT")"
    exec 8>"$LOCK"
    case "$command" in
        build | install)
            flock 8
            local which
            if [ "${1:-}" = --for ]; then
                shift
                which=$(releases_for "$@")
            else
                which=$(releases "$@")
            fi
            # shellcheck disable=SC2086 # a release a word
            "cmd_$command" $which
            ;;
        run)
            flock --shared 8
            [ "$#" -gt 0 ] || die "usage: $0 run RELEASE COMMAND [ARG...]"
            cmd_run "$@"
            ;;
        test)
            flock --shared 8
            # shellcheck disable=SC2046
            cmd_test $(releases "$@")
            ;;
        check)
            flock --shared 8
            cmd_check
            ;;
        own)
            flock --shared 8
            # shellcheck disable=SC2046
            cmd_own $(releases "$@")
            ;;
        *) die "usage: $0 build|install|run|test|own|check [RELEASE...]" ;;
    esac
}

# One line: bash reads a script as it runs it, and an edit of this file
# must not change a run in progress.
main "$@"; exit $?
