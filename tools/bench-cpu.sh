#!/usr/bin/env bash
# Where the cores went during a benchmark run: wall time, CPU seconds of
# the benchmark's own processes (schedulers, computes, checker, placement
# workers) and of the database servers (MariaDB and PostgreSQL), and the
# share of the machine's cores they used together.  A run that keeps every
# core busy is bound by CPU, not by the database's commit rate or by round
# trips.  The servers' CPU is read from the processes that exist before
# and after the command: MariaDB's threads are all counted, PostgreSQL's
# per-connection backends that exit during the command are not.
#
#   tools/bench-cpu.sh grant-scheduler-bench --db mysql+pymysql://... ...
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

server_cpu() {
    # utime + stime of every mariadbd/mysqld/postgres process, in ticks.
    local total=0 pid fields
    for pid in $(pgrep -x 'mariadbd|mysqld|postgres' || true); do
        fields=$(cut -d' ' -f14,15 "/proc/$pid/stat" 2>/dev/null) || continue
        total=$((total + ${fields% *} + ${fields#* }))
    done
    echo "$total"
}

ticks=$(getconf CLK_TCK)
cores=$(nproc)
before=$(server_cpu)
start=$(date +%s.%N)
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
# bash's `times` after the command: the children's user and system time.
( "$@"; times > "$times_file" )
end=$(date +%s.%N)
after=$(server_cpu)
python3 - "$start" "$end" "$before" "$after" "$ticks" "$cores" \
    "$times_file" <<'PY'
import re
import sys

start, end, before, after, ticks, cores = map(float, sys.argv[1:7])
# `times` prints the shell's own line, then its children's.
children = open(sys.argv[7]).read().split("\n")[1]
seconds = [
    float(m) * 60 + float(s)
    for m, s in re.findall(r"(\d+)m([\d.]+)s", children)
]
wall = end - start
bench = sum(seconds)
server = (after - before) / ticks
print(
    "wall %.1f s; CPU: benchmark processes %.1f s, database servers %.1f s; "
    "%.0f%% of %d cores busy"
    % (wall, bench, server, 100 * (bench + server) / (wall * cores), cores)
)
PY
