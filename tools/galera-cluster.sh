#!/usr/bin/env bash
# A 3-node MariaDB Galera cluster on loopback ports, for the galera tests.
#
#   tools/galera-cluster.sh start         bootstrap node 1, join nodes 2 and 3
#   tools/galera-cluster.sh stop          stop every node, remove the data
#   tools/galera-cluster.sh kill N        SIGKILL node N (a crash)
#   tools/galera-cluster.sh rejoin N      start node N again; it rejoins
#   tools/galera-cluster.sh status        cluster size as each node sees it
#
# Node N listens for SQL on 127.0.0.1:$((GALERA_BASE_PORT + N)) (4400+N by
# default) and keeps its data under $GALERA_DIR/nodeN.  Installs Debian's
# galera-4 when it is missing.  Run as root (the servers run as mysql).
# The test user is openstack_citest/openstack_citest, as on the local server.
set -euo pipefail

GALERA_DIR=${GALERA_DIR:-/var/tmp/grant-scheduler-galera}
GALERA_BASE_PORT=${GALERA_BASE_PORT:-4400}
PROVIDER=/usr/lib/galera/libgalera_smm.so
NODES="1 2 3"

sql_port() { echo $((GALERA_BASE_PORT + $1)); }
group_port() { echo $((GALERA_BASE_PORT + 160 + 10 * $1)); }
ist_port() { echo $((GALERA_BASE_PORT + 161 + 10 * $1)); }
sst_port() { echo $((GALERA_BASE_PORT + 162 + 10 * $1)); }
node_dir() { echo "$GALERA_DIR/node$1"; }

cluster_address() {
    local list=""
    for n in $NODES; do list="$list,127.0.0.1:$(group_port "$n")"; done
    echo "gcomm://${list#,}"
}

client() {
    mysql --protocol=tcp -h127.0.0.1 -P"$(sql_port "$1")" -uroot "${@:2}"
}

ensure_packages() {
    if [ ! -e "$PROVIDER" ] || ! command -v rsync >/dev/null; then
        apt-get install -y galera-4 rsync >/dev/null
    fi
}

wait_ready() {
    for _ in $(seq 1 120); do
        if [ "$(client "$1" -N -e "SHOW STATUS LIKE 'wsrep_ready'" 2>/dev/null \
                | awk '{print $2}')" = "ON" ]; then
            return 0
        fi
        sleep 0.5
    done
    echo "ERROR: Galera node $1 did not become ready; see $(node_dir "$1")/error.log" >&2
    return 1
}

start_node() {
    local n=$1; shift
    local dir
    dir=$(node_dir "$n")
    if [ ! -d "$dir/data/mysql" ]; then
        install -d -o mysql -g mysql "$dir" "$dir/data"
        mariadb-install-db --user=mysql --datadir="$dir/data" \
            --auth-root-authentication-method=normal >"$dir/install.log" 2>&1
    fi
    start-stop-daemon --start --background --make-pidfile \
        --pidfile "$dir/mariadbd.pid" --exec /usr/sbin/mariadbd -- \
        --no-defaults --user=mysql --datadir="$dir/data" \
        --socket="$dir/mysqld.sock" --pid-file="$dir/data/mysqld.pid" \
        --bind-address=127.0.0.1 --port="$(sql_port "$n")" \
        --log-error="$dir/error.log" \
        --binlog-format=ROW --default-storage-engine=InnoDB \
        --innodb-autoinc-lock-mode=2 --innodb-buffer-pool-size=64M \
        --innodb-flush-log-at-trx-commit=2 \
        --wsrep-on=ON --wsrep-provider="$PROVIDER" \
        --wsrep-cluster-name=grant_scheduler_test \
        --wsrep-cluster-address="$(cluster_address)" \
        --wsrep-node-address="127.0.0.1:$(group_port "$n")" \
        --wsrep-node-name="node$n" \
        --wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:$(group_port "$n");ist.recv_addr=127.0.0.1:$(ist_port "$n");gcache.size=64M" \
        --wsrep-sst-method=rsync \
        --wsrep-sst-receive-address="127.0.0.1:$(sst_port "$n")" \
        "$@"
    wait_ready "$n"
}

create_user() {
    client 1 <<SQL
DROP USER IF EXISTS ''@'localhost';
DROP USER IF EXISTS ''@'$(hostname)';
CREATE USER IF NOT EXISTS 'openstack_citest'@'%' IDENTIFIED BY 'openstack_citest';
GRANT ALL PRIVILEGES ON *.* TO 'openstack_citest'@'%' WITH GRANT OPTION;
SQL
}

case "${1:-}" in
start)
    ensure_packages
    if client 1 -e "SELECT 1" >/dev/null 2>&1; then
        echo "Galera cluster already running"
        exit 0
    fi
    start_node 1 --wsrep-new-cluster
    create_user
    start_node 2
    start_node 3
    echo "Galera cluster up on ports $(sql_port 1), $(sql_port 2), $(sql_port 3)"
    ;;
stop)
    for n in $NODES; do
        client "$n" -e "SHUTDOWN" >/dev/null 2>&1 || true
    done
    for n in $NODES; do
        pidfile="$(node_dir "$n")/mariadbd.pid"
        if [ -f "$pidfile" ]; then
            start-stop-daemon --stop --quiet --retry 30 --pidfile "$pidfile" \
                >/dev/null 2>&1 || true
        fi
    done
    rm -rf "$GALERA_DIR"
    ;;
kill)
    start-stop-daemon --stop --signal KILL --quiet \
        --pidfile "$(node_dir "$2")/mariadbd.pid"
    ;;
rejoin)
    start_node "$2"
    ;;
status)
    for n in $NODES; do
        printf "node%s: " "$n"
        client "$n" -N -e "SHOW STATUS LIKE 'wsrep_cluster_size'" 2>/dev/null \
            | awk '{print "cluster size " $2}' || echo "down"
    done
    ;;
*)
    echo "usage: $0 start|stop|kill N|rejoin N|status" >&2
    exit 2
    ;;
esac
