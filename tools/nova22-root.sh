#!/usr/bin/env bash
# A Debian bullseye root with Debian's own Nova 22 (Victoria) packages, to
# test grant_scheduler against the stack Nova 22 really ships with (Python
# 3.9, SQLAlchemy 1.3, oslo.db 8.4) rather than against PyPI's newest.
#
#   tools/nova22-root.sh build        create the root, or bring it up to date
#   tools/nova22-root.sh install      build a wheel of this checkout on the
#                                     host and install it in the root
#   tools/nova22-root.sh run CMD...   run CMD in the root, cwd /src (this
#                                     checkout, read-write)
#
# Run as root.  The root lives in /var/cache/grant_scheduler/nova22-root
# (override with GRANT_SCHEDULER_NOVA22_ROOT) and is reused between runs:
# debootstrap runs only when the root is missing or was left half built,
# apt only when the package list below changed.
set -euo pipefail

SUITE=bullseye
ROOT=${GRANT_SCHEDULER_NOVA22_ROOT:-/var/cache/grant_scheduler/nova22-root}
ROOT=${ROOT%/}
case "$ROOT" in
    /?*) ;;
    *) echo "GRANT_SCHEDULER_NOVA22_ROOT must be an absolute path, not /" >&2; exit 1 ;;
esac
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SELF="$SRC/tools/nova22-root.sh"
# The lock is beside the root, not in it, so that removing a broken root
# does not remove the lock someone else holds.
LOCK="$ROOT.lock"
# Markers inside the root: written only after the step they stand for has
# finished, so an interrupted step is redone by the next run.
STATE_DIR="$ROOT/var/lib/grant-scheduler-nova22"
DEBOOTSTRAP_DONE="$STATE_DIR/debootstrap.done"
PACKAGES_STAMP="$STATE_DIR/packages.sha256"

# Nova 22 itself, pip (to install our wheel), and what the tests import.
# Changing this list re-runs apt on the next build.
PACKAGES=(
    python3-nova
    nova-scheduler
    python3-pip
    python3-fixtures
    python3-testtools
    python3-oslotest
    python3-wsgi-intercept
    python3-placement
    python3-os-traits
    python3-os-resource-classes
    python3-stestr
    python3-ddt
    python3-mock
    python3-requests-mock
    python3-pytest
    python3-testscenarios
    python3-pymysql
    python3-psycopg2
    # tests/functional/test_install.py builds a wheel with
    # --no-build-isolation: it needs wheel and setuptools in the root.
    python3-wheel
    python3-setuptools
    # the benchmark's plots (tests/functional/test_bench.py)
    python3-matplotlib
    # the benchmark's tables and progress bar (its [bench] extra)
    python3-tabulate
    python3-tqdm
    # tools/release-venvs.sh: venvs of each release's pinned libraries,
    # and what builds the pins that have no wheel for Python 3.9
    # (psycopg2, greenlet, netifaces, ...).
    python3-venv
    python3-dev
    gcc
    libpq-dev
    libffi-dev
)

log() { printf '[nova22-root] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# The archive this machine already uses.  Read at run time so no host name
# is written into the repository; GRANT_SCHEDULER_NOVA22_MIRROR overrides.
find_mirror() {
    if [ -n "${GRANT_SCHEDULER_NOVA22_MIRROR:-}" ]; then
        echo "$GRANT_SCHEDULER_NOVA22_MIRROR"
        return
    fi
    local uri=""
    # deb822 files: one stanza per paragraph; take the first enabled "deb"
    # stanza that is not the security archive (a different layout, and it
    # has no bullseye main suite).
    if compgen -G '/etc/apt/sources.list.d/*.sources' >/dev/null; then
        uri=$(awk '
            BEGIN { RS = ""; FS = "\n" }
            {
                uris = ""; suites = ""; types = ""; enabled = "yes"
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^URIs:/)    { uris = $i;    sub(/^URIs:[ \t]*/, "", uris) }
                    if ($i ~ /^Suites:/)  { suites = $i }
                    if ($i ~ /^Types:/)   { types = $i }
                    if ($i ~ /^Enabled:/) { enabled = tolower($i); sub(/^enabled:[ \t]*/, "", enabled) }
                }
                if (enabled == "no" || uris == "") next
                if (types !~ /[ \t]deb([ \t]|$)/) next
                if (suites ~ /-security/ || uris ~ /-security/) next
                split(uris, u, /[ \t]+/)
                print u[1]
                exit
            }' /etc/apt/sources.list.d/*.sources)
    fi
    # One-line format: "deb [options] URI suite components".
    if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
        uri=$(sed -e 's/#.*//' -e 's/\[[^]]*\]//' /etc/apt/sources.list |
            awk '$1 == "deb" && $3 !~ /-security/ && $2 !~ /-security/ {
                     print $2; exit }')
    fi
    [ -n "$uri" ] || die "no main archive found in the machine's apt sources"
    echo "${uri%/}"
}

# Anything mounted at or below the root (as seen from this namespace).
mounts_under_root() {
    awk -v root="$ROOT" '$5 == root || index($5, root "/") == 1 { print $5 }' \
        /proc/self/mountinfo
}

# --- mounts --------------------------------------------------------------
# Every command that needs the root runs in a private mount namespace (the
# script re-executes itself under unshare), so its mounts are invisible to
# other runs and to the host, and disappear even if this script is killed.
# They are still unmounted on exit, and a mount that is already there (one
# left on the host by hand, inherited into the namespace) is used as is.
MOUNTED=()

mount_once() {
    local target=$1; shift
    mkdir -p "$target"
    if mountpoint -q "$target"; then
        return 0
    fi
    mount "$@" "$target"
    MOUNTED+=("$target")
}

unmount_all() {
    local i
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
        umount "${MOUNTED[i]}" 2>/dev/null || umount -l "${MOUNTED[i]}" ||
            log "could not unmount ${MOUNTED[i]}"
    done
    MOUNTED=()
}

clean_up() {
    unmount_all
    [ -z "${WHEEL_DIR:-}" ] || rm -rf "$WHEEL_DIR"
}

mount_system() {
    # bash runs an EXIT trap on a signal only if the signal is trapped too.
    trap clean_up EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    mount_once "$ROOT/proc" -t proc proc
    mount_once "$ROOT/sys" -t sysfs sysfs
    mount_once "$ROOT/dev" --bind /dev
    mount_once "$ROOT/dev/pts" --bind /dev/pts
    # multiprocessing's semaphores live in /dev/shm; a fresh tmpfs per run
    # keeps runs from seeing each other's.
    mount_once "$ROOT/dev/shm" -t tmpfs -o mode=1777,nosuid,nodev shm
}

# Run a command in the root with a clean environment: nothing from the
# caller (a tox venv's PATH or VIRTUAL_ENV) may leak into Debian's Python.
in_root() {
    chroot "$ROOT" /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 LC_ALL=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive "$@"
}

# --- build ---------------------------------------------------------------
package_hash() {
    printf '%s\n' "$SUITE" "${PACKAGES[@]}" | sha256sum | cut -d' ' -f1
}

debootstrap_root() {
    if [ -f "$DEBOOTSTRAP_DONE" ]; then
        return 0
    fi
    if [ -e "$ROOT" ]; then
        # A root without the marker was interrupted in debootstrap: start
        # over.  Remove only what debootstrap left (its work directory
        # debootstrap/, or a Debian tree), and never through a mount.
        if [ -n "$(ls -A "$ROOT")" ] && [ ! -d "$ROOT/debootstrap" ] &&
            [ ! -f "$ROOT/etc/debian_version" ]; then
            die "$ROOT exists and is not a root this script began; remove it or choose another GRANT_SCHEDULER_NOVA22_ROOT"
        fi
        local mounted
        mounted=$(mounts_under_root)
        [ -z "$mounted" ] || die "not removing $ROOT, still mounted: $mounted"
        log "removing the partially built root $ROOT"
        rm -rf --one-file-system "$ROOT"
    fi
    command -v debootstrap >/dev/null || {
        log "installing debootstrap"
        apt-get install -y --no-install-recommends debootstrap ||
            { apt-get update && apt-get install -y --no-install-recommends debootstrap; }
    }
    local mirror start
    mirror=$(find_mirror)
    log "debootstrap $SUITE from the machine's main archive into $ROOT"
    start=$(now)
    debootstrap --variant=minbase "$SUITE" "$ROOT" "$mirror"
    log "debootstrap took $(elapsed "$start") s"
    mkdir -p "$STATE_DIR"
    touch "$DEBOOTSTRAP_DONE"
}

configure_root() {
    # No package may start a service in the root (nova-scheduler would
    # try to): invoke-rc.d asks policy-rc.d, and 101 means "not allowed".
    printf '#!/bin/sh\n# no services in this root\nexit 101\n' \
        >"$ROOT/usr/sbin/policy-rc.d"
    chmod 755 "$ROOT/usr/sbin/policy-rc.d"
    # The root shares the host's network; resolve names like the host.
    rm -f "$ROOT/etc/resolv.conf"
    cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
}

link_paste_config() {
    # Nova's API fixture (its own functional tests) looks for
    # etc/nova/api-paste.ini beside dist-packages; Debian ships it in
    # /etc/nova.
    ln -sfn /etc "$ROOT/usr/lib/python3/dist-packages/etc"
}

# Everything cmd_build does is done already (read under the shared lock).
built() {
    [ -f "$DEBOOTSTRAP_DONE" ] &&
        [ "$(cat "$PACKAGES_STAMP" 2>/dev/null)" = "$(package_hash)" ] &&
        [ -x "$ROOT/usr/sbin/policy-rc.d" ] &&
        cmp -s /etc/resolv.conf "$ROOT/etc/resolv.conf" &&
        [ -L "$ROOT/usr/lib/python3/dist-packages/etc" ]
}

install_packages() {
    local want
    want=$(package_hash)
    if [ "$(cat "$PACKAGES_STAMP" 2>/dev/null)" = "$want" ]; then
        log "packages up to date (${#PACKAGES[@]} listed)"
        return 0
    fi
    local start
    start=$(now)
    # Finish whatever an interrupted earlier run left half configured.
    in_root dpkg --configure -a
    in_root apt-get update
    in_root apt-get install -y --no-install-recommends "${PACKAGES[@]}"
    # The downloaded .debs are not needed again (about 150 MB).
    in_root apt-get clean
    log "apt took $(elapsed "$start") s"
    echo "$want" >"$PACKAGES_STAMP"
}

cmd_build() {
    debootstrap_root
    configure_root
    mount_system
    install_packages
    link_paste_config
}

# --- install -------------------------------------------------------------
# The wheel is built on the host: the root's pbr (5.5) cannot build this
# project.  In the root, pip first removes the previous copy, then installs
# the wheel with --no-index and WITHOUT --no-deps, so every requirement
# must already be satisfied by what Debian installed; an unmet floor fails
# here instead of pip pulling a newer library in beside Nova's.  (Plain
# --force-reinstall would reinstall the dependencies too, and with
# --no-deps nothing would be checked.)  pip stops at the first unmet
# requirement, so a check run first lists all of them.
WHEEL_DIR=
WHEEL_HASH=
INSTALLED_STAMP="$STATE_DIR/installed-wheel.sha256"

# Before the lock: the wheel, and the hash of its contents (each member's
# name and bytes; a wheel built again from the same tree has the same).
build_wheel() {
    local host_python=${GRANT_SCHEDULER_NOVA22_HOST_PYTHON:-python3}
    local start
    mkdir -p "$ROOT/tmp"
    WHEEL_DIR=$(mktemp -d "$ROOT/tmp/grant_scheduler-wheel.XXXXXX")
    trap clean_up EXIT
    start=$(now)
    "$host_python" -m pip wheel --quiet --no-deps -w "$WHEEL_DIR" "$SRC"
    log "wheel built in $(elapsed "$start") s"
    local wheels=("$WHEEL_DIR"/grant_scheduler-*.whl)
    [ -f "${wheels[0]}" ] || die "no wheel in $WHEEL_DIR"
    WHEEL_HASH=$("$host_python" - "${wheels[0]}" <<'PY'
import hashlib
import sys
import zipfile

digest = hashlib.sha256()
with zipfile.ZipFile(sys.argv[1]) as wheel:
    for name in sorted(wheel.namelist()):
        digest.update(name.encode() + b"\0" + wheel.read(name) + b"\0")
print(digest.hexdigest())
PY
)
}

installed() {
    [ -f "$PACKAGES_STAMP" ] &&
        [ "$(cat "$INSTALLED_STAMP" 2>/dev/null)" = "$WHEEL_HASH" ]
}

cmd_install() {
    local wheels=("$WHEEL_DIR"/grant_scheduler-*.whl)
    local wheel=/tmp/${WHEEL_DIR##*/}/${wheels[0]##*/} start
    mount_system
    start=$(now)
    local rc=0
    rm -f "$INSTALLED_STAMP"
    in_root python3 -c "$CHECK_REQUIREMENTS" "$wheel" &&
        in_root python3 -m pip uninstall --quiet --yes grant_scheduler &&
        in_root python3 -m pip install --no-index --no-cache-dir \
            --disable-pip-version-check "$wheel" || rc=$?
    [ "$rc" = 0 ] || die "the wheel does not install on Debian's packages (see above)"
    echo "$WHEEL_HASH" >"$INSTALLED_STAMP"
    log "installed in the root in $(elapsed "$start") s"
}

# Compare the wheel's Requires-Python and Requires-Dist with the root:
# unmet base requirements fail; unmet ones of extras (the tests' among
# them) are only listed, as pip does not install extras here.
CHECK_REQUIREMENTS='
import email.parser
import platform
import sys
import zipfile

import pkg_resources
from pkg_resources.extern.packaging.specifiers import SpecifierSet

with zipfile.ZipFile(sys.argv[1]) as wheel:
    (name,) = [n for n in wheel.namelist()
               if n.endswith(".dist-info/METADATA")]
    meta = email.parser.Parser().parsestr(wheel.read(name).decode())

failed = False
python = platform.python_version()
requires_python = meta.get("Requires-Python")
if requires_python and python not in SpecifierSet(requires_python):
    print("[nova22-root] UNMET: Requires-Python %s (the root has %s)"
          % (requires_python, python), file=sys.stderr)
    failed = True
for line in meta.get_all("Requires-Dist") or []:
    req = pkg_resources.Requirement.parse(line)
    extra = None
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        extra = str(req.marker)
    bare = pkg_resources.Requirement.parse(
        "%s%s" % (req.project_name, req.specifier))
    try:
        pkg_resources.require(str(bare))
        continue
    except pkg_resources.DistributionNotFound:
        have = "not installed"
    except pkg_resources.VersionConflict as exc:
        have = "the root has %s" % exc.dist.version
    if extra is None:
        print("[nova22-root] UNMET: %s (%s)" % (bare, have), file=sys.stderr)
        failed = True
    else:
        print("[nova22-root] unmet, extra only (%s): %s (%s)"
              % (extra, bare, have), file=sys.stderr)
sys.exit(1 if failed else 0)
'

# --- run -----------------------------------------------------------------
cmd_run() {
    [ "$#" -gt 0 ] || die "usage: $0 run COMMAND [ARG...]"
    mount_system
    # Always this checkout: a /src someone left mounted is covered, not used.
    mkdir -p "$ROOT/src"
    mount --bind "$SRC" "$ROOT/src"
    MOUNTED+=("$ROOT/src")
    # Pass the tests' database URLs and nothing else of the caller's
    # environment.
    local pass=() name
    while IFS= read -r name; do
        pass+=("$name=${!name}")
    done < <(compgen -e | grep '^GRANT_SCHEDULER_TEST_' || true)
    local rc=0
    in_root "${pass[@]}" PYTHONDONTWRITEBYTECODE=1 \
        /bin/sh -c 'cd /src && exec "$@"' sh "$@" || rc=$?
    return "$rc"
}

# --- main ----------------------------------------------------------------
[ "$(id -u)" = 0 ] || die "run as root (debootstrap, mount and chroot need it)"

command=${1:-build}
[ "$#" -eq 0 ] || shift
case "$command" in
    build | install | run) ;;
    *) die "unknown command '$command' (build, install or run)" ;;
esac

# Re-execute in a private mount namespace (see "mounts" above).
if [ -z "${_GRANT_SCHEDULER_NOVA22_NS:-}" ]; then
    export _GRANT_SCHEDULER_NOVA22_NS=1
    exec unshare --mount --propagation private -- bash "$SELF" "$command" "$@"
fi

# Builds and installs change the root: one at a time, and never while a
# command runs in it.  Commands may share it.  A build or install with
# nothing to do says so under the shared lock, so that environments run
# side by side do not wait for each other's commands to end.
mkdir -p "$(dirname "$ROOT")"
[ "$command" != install ] || build_wheel
exec 9>"$LOCK"
flock --shared 9
case "$command" in
    build)
        if built; then
            log "root up to date (${#PACKAGES[@]} packages listed)"
            exit 0
        fi
        ;;
    install)
        [ -f "$PACKAGES_STAMP" ] || die "build the root first: $0 build"
        if installed; then
            log "this wheel is installed in the root already"
            exit 0
        fi
        ;;
esac
# (Not atomic: the shared lock is dropped first; the steps check again.)
[ "$command" = run ] || flock 9

case "$command" in
    build) cmd_build ;;
    install)
        if installed; then
            log "this wheel is installed in the root already"
            exit 0
        fi
        cmd_install
        ;;
    run)
        [ -f "$PACKAGES_STAMP" ] || die "build the root first: $0 build"
        cmd_run "$@"
        ;;
esac
