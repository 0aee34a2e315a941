#!/usr/bin/env bash
# Nova 18 (Rocky), 19 (Stein), 20 (Train) and 21 (Ussuri) from PyPI, each
# in a virtualenv inside the Debian bullseye root that tools/nova22-root.sh
# builds (Python 3.9 and Debian's Victoria oslo libraries).
#
#   tools/nova-releases.sh build [RELEASE...]    make (or reuse) the venvs
#   tools/nova-releases.sh install [RELEASE...]  install a wheel of this
#                                                checkout into them
#   tools/nova-releases.sh run RELEASE CMD...    run CMD in the root with
#                                                that venv first on PATH,
#                                                cwd /src (this checkout)
#   tools/nova-releases.sh test [RELEASE...]     tests/nova_releases in
#                                                each release, one after
#                                                the other
#   tools/nova-releases.sh own [RELEASE...]      the release's own functional
#                                                tests of tests/nova_releases/
#                                                own_tests.txt with ours,
#                                                compared with the stock
#                                                scheduler's recorded run
#                                                (OWN_BOTH=1: run stock too
#                                                and rewrite the record;
#                                                OWN_TESTS="MODULE...": only
#                                                those modules, and only
#                                                their part of the record)
#   tools/nova-releases.sh check                 what CI runs: every class
#                                                of tests/nova_releases in
#                                                each release, two releases
#                                                at a time, then the own
#                                                tests tests/nova_releases/
#                                                own_tests_ci.txt assigns
#                                                to each release, with ours
#
# RELEASE is 18, 19, 20 or 21; none means all four.  Run as root, after
# "tools/nova22-root.sh build".
#
# Each venv is "python3 -m venv --system-site-packages" plus
# "pip install --no-deps nova==X" (and, for 18-20, the oslotest and mox3
# of that release's upper-constraints, whose tests need
# oslotest.moxstubout), so it runs that release's Nova on the root's
# libraries.  The venv's own nova shadows the root's Nova 22 (checked
# after the build: nova.__file__ and nova's version).  The fixes the
# installed Nova needs on Python 3.9 are made by tools/nova_releases_fix.py
# in the venv's copy of Nova, never in grant_scheduler.  A venv is rebuilt
# only when its inputs change: the release and its pins, the fix script,
# this script, and the root's package set (a stamp in the venv, written
# last, so an interrupted build is redone).
#
# The plugin goes in unpatched: a wheel built on the host from a copy of
# this checkout (PBR_VERSION set, the copy has no git), installed with
# --no-deps (the root provides its requirements).
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOT=${GRANT_SCHEDULER_NOVA22_ROOT:-/var/cache/grant_scheduler/nova22-root}
ROOT=${ROOT%/}
ROOT_TOOL="$SRC/tools/nova22-root.sh"
# Paths inside the root.
VENVS=/opt/nova-releases
WHEELS=/var/cache/nova-releases/wheels
LOCK="$ROOT.releases.lock"

ALL=(18 19 20 21)
declare -A NOVA=([18]=18.3.0 [19]=19.3.2 [20]=20.6.1 [21]=21.2.4)
# From each release's upper-constraints: its tests import
# oslotest.moxstubout (gone from the root's oslotest 4.4).
declare -A PINS=(
    [18]="oslotest==3.6.0 mox3==0.26.0"
    [19]="oslotest==3.7.2 mox3==0.27.0"
    [20]="oslotest==3.8.1 mox3==0.28.0"
    [21]=""
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

in_root() { bash "$ROOT_TOOL" run "$@"; }

# What a venv is made of: its release and pins, the fixes, the steps that
# build it, and the root's package set.
stamp_of() {
    local r=$1
    {
        echo "nova==${NOVA[$r]} ${PINS[$r]}"
        cat "$SRC/tools/nova_releases_fix.py"
        declare -f build_one check_nova
        cat "$ROOT/var/lib/grant-scheduler-nova22/packages.sha256"
    } | sha256sum | cut -d' ' -f1
}

build_one() {
    local r=$1 venv="$VENVS/$1" want have
    want=$(stamp_of "$r")
    have=$(cat "$ROOT$venv/.stamp" 2>/dev/null || true)
    if [ "$want" = "$have" ]; then
        log "Nova $r (${NOVA[$r]}): venv up to date"
        return 0
    fi
    local start=$SECONDS
    log "Nova $r (${NOVA[$r]}): building $venv"
    # The wheels are fetched on the host, with its pip and its settings.
    mkdir -p "$ROOT$WHEELS"
    # shellcheck disable=SC2086 # PINS holds several requirements
    python3 -m pip download --quiet --no-deps -d "$ROOT$WHEELS" \
        "nova==${NOVA[$r]}" ${PINS[$r]}
    rm -rf --one-file-system "${ROOT:?}$venv"
    mkdir -p "$ROOT$VENVS"
    # No ensurepip in the root: the venv uses the root's pip (visible
    # through --system-site-packages), which installs into the venv.
    # shellcheck disable=SC2086
    in_root /bin/sh -c '
        set -e
        python3 -m venv --without-pip --system-site-packages "$1"
        "$1/bin/python" -m pip install --quiet --no-index --no-deps \
            --no-cache-dir --disable-pip-version-check \
            --find-links "$2" "$3" $4
        site=$("$1/bin/python" -c "import sysconfig; print(sysconfig.get_paths()[\"purelib\"])")
        # Nova looks for etc/nova/api-paste.ini beside site-packages; the
        # wheel put it in the venv.
        ln -sfn "$1/etc" "$site/etc"
        "$1/bin/python" /src/tools/nova_releases_fix.py "$site/nova"
    ' sh "$venv" "$WHEELS" "nova==${NOVA[$r]}" "${PINS[$r]}"
    check_nova "$r"
    echo "$want" >"$ROOT$venv/.stamp"
    log "Nova $r: built in $((SECONDS - start)) s"
}

# The venv imports its own Nova, of its release, not the root's Nova 22.
check_nova() {
    local r=$1 venv="$VENVS/$1"
    in_root "$venv/bin/python" -c '
import sys
venv, want = sys.argv[1], sys.argv[2]
import nova.tests.functional  # noqa: F401 - first, as the tests do
import nova
from nova import version
import nova.hooks, nova.scheduler.manager, nova.compute.manager  # noqa
got = version.version_info.release_string()
if not nova.__file__.startswith(venv + "/") or got != want:
    sys.exit("wrong Nova in %s: %s from %s" % (venv, got, nova.__file__))
import os
site = os.path.dirname(os.path.dirname(nova.__file__))
if not os.path.exists(os.path.join(site, "etc/nova/api-paste.ini")):
    sys.exit("no etc/nova/api-paste.ini in %s" % site)
print("[nova-releases] Nova %s from %s" % (got, nova.__file__), file=sys.stderr)
' "$venv" "${NOVA[$r]}"
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

# tests/nova_releases in release $1 (the modules or classes after it, or
# all of them).
run_tests() {
    local r=$1 start=$SECONDS
    shift
    if cmd_run "$r" python3 -W ignore -m tests.nova_releases.run "$@"; then
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
    [ "$#" -gt 0 ] || set -- @tests/nova_releases/own_tests.txt
    [ -z "${OWN_BOTH:-}" ] || both=(--both)
    cmd_run "$r" python3 -W ignore -m tests.nova_releases.own_tests \
        --workers 2 --out /src/.nova-own-tests \
        --allowed tests/nova_releases/own_tests_allowed.txt \
        --record "tests/nova_releases/own_tests_stock_$r.json" \
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

# What CI runs: every class of tests/nova_releases in every release, two
# releases at a time (each class runs in one process, which leaves a core
# mostly idle; each pair's output is printed when it ends); then, with
# ours only, the own tests that own_tests_ci.txt assigns to each release
# (the stock scheduler's runs are the records).  Every part runs even
# when an earlier one failed.
CI_PAIRS=("18 20" "19 21")
CI_OWN=tests/nova_releases/own_tests_ci.txt
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
        build)
            flock 8
            # shellcheck disable=SC2046
            cmd_build $(releases "$@")
            ;;
        install)
            flock 8
            # shellcheck disable=SC2046
            cmd_install $(releases "$@")
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
