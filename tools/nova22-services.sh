#!/usr/bin/env bash
# Nova 22's real services (API, conductor, computes with the fake virt
# driver, two nova-scheduler services of two workers each, placement) in
# the bullseye root of tools/nova22-root.sh, over the RabbitMQ of
# 127.0.0.1:5672 and the MariaDB of 127.0.0.1:3306, booting and deleting
# in bursts through Nova's REST API with faults in between, once with the
# stock scheduler and once with grant_scheduler (see
# tools/nova22-services.py).
#
#   tools/nova22-services.sh [OPTIONS]   e.g. --schedulers grants --bursts 2
#
# Run as root, after tools/nova22-root.sh build and install.  Writes
# doc/source/admin/nova22-services.json; exits 1 when a check fails.
# RabbitMQ is restarted once per scheduler (stop_app/start_app) and left
# running; grant_scheduler's database is a private mariadbd under /tmp,
# restarted once per scheduler; the 3306 server is never restarted (only its
# gs_services_* databases are made, and dropped on the next run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$SECONDS
rc=0
python3 tools/nova22-services.py "$@" || rc=$?
echo "[nova22-services] $((SECONDS - start)) s, exit $rc" >&2
exit "$rc"
