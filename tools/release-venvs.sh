#!/usr/bin/env bash
# Each supported Nova release's own libraries, pinned, in a Python 3.9
# venv inside the Debian bullseye root of tools/nova22-root.sh: where the
# plugin is installed and its tests run as it runs in that release's Nova.
#
#   tools/release-venvs.sh build [RELEASE...]    make (or reuse) the venvs
#   tools/release-venvs.sh install [RELEASE...]  install a wheel of this
#                                                checkout into them, as an
#                                                operator would, and show
#                                                that pip changed nothing
#                                                else (tests/release_pins)
#   tools/release-venvs.sh test [RELEASE...]     tests/unit and
#                                                tests/functional there,
#                                                on SQLite, MariaDB and
#                                                PostgreSQL
#   tools/release-venvs.sh run RELEASE CMD...    CMD in the root with that
#                                                venv first on PATH, cwd
#                                                /src (this checkout)
#   tools/release-venvs.sh check                 what CI runs: build,
#                                                install, and the tests
#                                                on CI_SERVERS below
#
# RELEASE is 18, 19, 20, 21 or 22; none means all five.  Run as root,
# after "tools/nova22-root.sh build".
#
# A venv (/opt/release-venvs/RELEASE in the root) is "python3 -m venv"
# with no system site-packages, and pip installs into it, with the
# release's pins of tools/pins/ (tools/release-pins.py) as constraints,
# every library the plugin imports (LIBRARIES below); then the test
# tools, newest that the pins allow.  pip builds what has no wheel for
# Python 3.9 with the root's compilers.  A venv is rebuilt only when its
# inputs change (a stamp written last, so an interrupted build is redone).
#
# The database suites: tests/unit on SQLite; tests/functional on SQLite,
# MariaDB and PostgreSQL by hand ("test"), in CI ("check") on one server
# in four releases (CI_SERVERS below).
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOT=${GRANT_SCHEDULER_NOVA22_ROOT:-/var/cache/grant_scheduler/nova22-root}
ROOT=${ROOT%/}
ROOT_TOOL="$SRC/tools/nova22-root.sh"
VENVS=/opt/release-venvs
LOCK="$ROOT.release-venvs.lock"

ALL=(18 19 20 21 22)
declare -A NAME=([18]=rocky [19]=stein [20]=train [21]=ussuri [22]=victoria)

# What the plugin imports (with SQLAlchemy's drivers and the eventlet the
# Nova adapters run under), each at the release's pin.
LIBRARIES=(
    pbr SQLAlchemy alembic oslo.db oslo.config oslo.log oslo.service
    oslo.utils oslo.concurrency stevedore PyMySQL psycopg2 eventlet
)
# The tests' own tools and the benchmark's extra (the functional tests
# import its strategies): newest that the pins allow.
TEST_TOOLS=(pytest testscenarios fixtures testtools tabulate tqdm)

log() { printf '[release-venvs] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

releases() {
    if [ "$#" -eq 0 ]; then
        echo "${ALL[@]}"
        return
    fi
    local r
    for r in "$@"; do
        [ -n "${NAME[$r]:-}" ] || die "unknown release '$r' (one of ${ALL[*]})"
    done
    echo "$@"
}

pins_of() { echo "tools/pins/$1-${NAME[$1]}.txt"; }

in_root() { bash "$ROOT_TOOL" run "$@"; }

stamp_of() {
    local r=$1
    {
        echo "${LIBRARIES[*]} / ${TEST_TOOLS[*]}"
        cat "$SRC/$(pins_of "$r")"
        declare -f build_one
        cat "$ROOT/var/lib/grant-scheduler-nova22/packages.sha256"
    } | sha256sum | cut -d' ' -f1
}

build_one() {
    local r=$1 venv="$VENVS/$1" want have
    want=$(stamp_of "$r")
    have=$(cat "$ROOT$venv/.stamp" 2>/dev/null || true)
    if [ "$want" = "$have" ]; then
        log "Nova $r (${NAME[$r]}): venv up to date"
        return 0
    fi
    local start=$SECONDS
    log "Nova $r (${NAME[$r]}): building $venv"
    rm -rf --one-file-system "${ROOT:?}$venv"
    mkdir -p "$ROOT$VENVS"
    # pip in the root reaches the package index as the host's pip does:
    # the host's certificate bundle and index, read at run time (nothing
    # of this machine is written into the repository).
    local cert=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt} index
    index=$(python3 -m pip config get global.index-url 2>/dev/null || true)
    cp "$cert" "$ROOT/tmp/release-venvs-ca.crt"
    in_root env PIP_CERT=/tmp/release-venvs-ca.crt \
        ${index:+PIP_INDEX_URL="$index"} /bin/sh -c '
        set -e
        venv=$1 pins=$2
        shift 2
        python3 -m venv "$venv"
        pip="$venv/bin/python -m pip --quiet --disable-pip-version-check --no-cache-dir"
        libs= tools= seen=
        for a in "$@"; do
            if [ "$a" = -- ]; then seen=1; continue; fi
            if [ -z "$seen" ]; then libs="$libs $a"; else tools="$tools $a"; fi
        done
        # shellcheck disable=SC2086
        $pip install -c "$pins" $libs
        # shellcheck disable=SC2086
        $pip install -c "$pins" $tools
        $venv/bin/python -m pip check
        # Byte-compiled as an installer leaves a deployment (the runs here
        # set PYTHONDONTWRITEBYTECODE): old libraries warn when compiled
        # on Python 3.9, and the tests read what the commands print.
        $venv/bin/python -W ignore -m compileall -q "$venv/lib" >/dev/null
    ' sh "$venv" "/src/$(pins_of "$r")" "${LIBRARIES[@]}" -- "${TEST_TOOLS[@]}"
    check_pins "$r"
    echo "$want" >"$ROOT$venv/.stamp"
    log "Nova $r: built in $((SECONDS - start)) s"
}

# Every library of LIBRARIES is at the release's pin in the venv.
check_pins() {
    local r=$1
    in_root "$VENVS/$r/bin/python" - "/src/$(pins_of "$r")" "${LIBRARIES[@]}" <<'EOF'
import re
import sys

try:
    from importlib import metadata
except ImportError:  # pragma: no cover - Python < 3.8
    import importlib_metadata as metadata

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

pins = {}
with open(sys.argv[1]) as f:
    for line in f:
        if line.strip() and not line.startswith("#"):
            name, version = line.strip().split("===")
            pins[norm(name)] = version
wrong = []
for name in sys.argv[2:]:
    have = metadata.version(name)
    if pins.get(norm(name)) != have:
        wrong.append("%s %s (pinned %s)" % (name, have, pins.get(norm(name))))
if wrong:
    sys.exit("not at the release's pins: " + ", ".join(wrong))
print("[release-venvs] at the pins: " + ", ".join(
    "%s %s" % (n, metadata.version(n)) for n in sys.argv[2:]), file=sys.stderr)
EOF
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
# honoured), built on the host from a copy so the build writes nothing
# here; its path inside the root is printed.
build_wheel() {
    local out copy version
    mkdir -p "$ROOT/tmp"
    out=$(mktemp -d "$ROOT/tmp/release-venvs-wheel.XXXXXX")
    copy=$(mktemp -d)
    (cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -C "$copy" -xf -
    version="0.0.1.dev$(git -C "$SRC" rev-list --count HEAD)"
    PBR_VERSION=$version python3 -m pip wheel --quiet --no-deps -w "$out" \
        "$copy" >&2
    rm -rf "$copy"
    local wheels=("$out"/grant_scheduler-*.whl)
    [ -f "${wheels[0]}" ] || die "no wheel in $out"
    echo "/tmp/${out##*/}/${wheels[0]##*/}"
}

WHEEL=
# The wheel, built once per run; removed on exit.
ensure_wheel() {
    if [ -z "$WHEEL" ]; then
        WHEEL=$(build_wheel)
        trap 'rm -rf "$ROOT$(dirname "$WHEEL")"' EXIT
    fi
}

cmd_install() {
    local r
    ensure_wheel
    for r in "$@"; do
        [ -f "$ROOT$VENVS/$r/.stamp" ] || die "build Nova $r's venv first"
        log "Nova $r: installing $(basename "$WHEEL")"
        in_root env GRANT_SCHEDULER_WHEEL="$WHEEL" "$VENVS/$r/bin/python" \
            -m pytest -p no:cacheprovider -p no:warnings -q tests/release_pins
    done
}

# The unit tests (unless NO_UNIT is set), then the functional tests on
# the given backends (of sqlite, mysql and postgresql; the tests without
# a backend of their own always run), in release R's venv.
test_one() {
    local r=$1 start=$SECONDS b not=()
    shift
    for b in sqlite mysql postgresql; do
        case " $* " in
            *" $b "*) ;;
            *) not+=("not $b") ;;
        esac
    done
    # EXTRA_K: more tests left out (cmd_ci_tests).
    [ -z "${EXTRA_K:-}" ] || not+=("$EXTRA_K")
    local only
    only=$(IFS=,; echo "${not[*]}" | sed 's/,/ and /g')
    log "Nova $r: ${NO_UNIT:+no }tests/unit; tests/functional on: $*"
    local pytest=(in_root env GRANT_SCHEDULER_WHEEL="$WHEEL"
        "$VENVS/$r/bin/python" -m pytest -p no:cacheprovider -p no:warnings -q)
    local rc=0
    # NOTE: the sample-file tests compare etc/grant_scheduler.conf.sample
    # with what the newest oslo.db and oslo.log generate (py3 runs them);
    # older releases list other library options by design.  The
    # benchmark's own tests run in py3 and functional.
    [ -n "${NO_UNIT:-}" ] || "${pytest[@]}" tests/unit \
        --deselect tests/unit/test_config.py::TestOptions::test_committed_sample_is_current \
        --deselect tests/unit/test_config.py::TestOptions::test_sample_lists_every_option || rc=1
    "${pytest[@]}" tests/functional ${only:+-k "$only"} \
        --ignore-glob='tests/*/test_bench*.py' || rc=1
    log "Nova $r: $([ "$rc" = 0 ] && echo passed || echo FAILED) in $((SECONDS - start)) s"
    return "$rc"
}

# By hand: every release, every backend.
cmd_test() {
    local r rc=0
    ensure_wheel
    for r in "$@"; do
        test_one "$r" sqlite mysql postgresql || rc=1
    done
    return "$rc"
}

# What CI runs: the unit tests at the ends and in 20 (CI_UNIT: 19 and 21
# sit between releases that run them, on libraries between theirs, and
# run the functional tests on a server; 75 s each saved); the functional
# tests on one database server in four releases (SQLite is the unit
# tests' own):
# each driver meets SQLAlchemy 1.2 (18 MySQL, 19 PostgreSQL) and 1.3 (21
# PostgreSQL, 22 MySQL), and both ends; 20 (Train, SQLAlchemy 1.3 like 21
# and 22) runs its functional tests without a server of their own only,
# and every server by hand ("test 20").  Four lanes at once (the tests
# wait on databases and child processes); each lane's output is printed
# when it ends.  Every release runs even when an earlier failed.
declare -A CI_SERVERS=(
    [18]="mysql" [19]="postgresql" [20]=""
    [21]="postgresql" [22]="mysql"
)
# The passwords of every special character through every command (about
# 2.5 minutes, the same on every server): at the two ends only, SQLAlchemy
# 1.2.10's URLs and 1.3.19's.
CI_EVERY_CHARACTER=" 18 22 "
CI_UNIT=" 18 20 22 "
CI_LANES=("18" "19 20" "21" "22")
cmd_ci_tests() {
    local rc=0 start=$SECONDS lane r dir i=0
    ensure_wheel
    dir=$(mktemp -d)
    for lane in "${CI_LANES[@]}"; do
        (
            lane_rc=0
            for r in $lane; do
                extra="not TestSpecialCharacters" no_unit=1
                case "$CI_EVERY_CHARACTER" in *" $r "*) extra= ;; esac
                case "$CI_UNIT" in *" $r "*) no_unit= ;; esac
                # shellcheck disable=SC2086 # the servers, one a word
                EXTRA_K=$extra NO_UNIT=$no_unit \
                    test_one "$r" ${CI_SERVERS[$r]} || lane_rc=1
            done
            exit "$lane_rc"
        ) >"$dir/$i.log" 2>&1 &
        echo $! >"$dir/$i.pid"
        i=$((i + 1))
    done
    for ((j = 0; j < i; j++)); do
        wait "$(cat "$dir/$j.pid")" || rc=1
        cat "$dir/$j.log"
    done
    rm -rf "$dir"
    log "tests: $((SECONDS - start)) s, $([ "$rc" = 0 ] && echo passed || echo FAILED)"
    return "$rc"
}

cmd_run() {
    local r=$1
    shift
    [ -f "$ROOT$VENVS/$r/.stamp" ] || die "build Nova $r's venv first"
    in_root env PATH="$VENVS/$r/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        VIRTUAL_ENV="$VENVS/$r" "$@"
}

[ "$(id -u)" = 0 ] || die "run as root (the root's chroot needs it)"
command=${1:-check}
[ "$#" -eq 0 ] || shift
exec 8>"$LOCK"
case "$command" in
    build | install | test)
        flock 8
        # shellcheck disable=SC2046
        "cmd_$command" $(releases "$@")
        ;;
    run)
        flock --shared 8
        [ "$#" -ge 2 ] || die "usage: $0 run RELEASE CMD..."
        releases "$1" >/dev/null
        cmd_run "$@"
        ;;
    check)
        flock 8
        # shellcheck disable=SC2046
        cmd_build $(releases)
        # shellcheck disable=SC2046
        cmd_install $(releases)
        cmd_ci_tests
        ;;
    *) die "unknown command '$command' (build, install, test, run or check)" ;;
esac
