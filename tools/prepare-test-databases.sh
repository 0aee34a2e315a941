#!/usr/bin/env bash
# Make sure the local MariaDB and PostgreSQL servers are running and have the
# openstack_citest user the functional tests log in as, and that the local
# RabbitMQ (127.0.0.1:5672, which tox -e nova22-services uses) is running.
# Idempotent; run as root (or a user allowed to start the servers and
# administer them).
set -euo pipefail

MARIADB_PID_FILE=/run/mysqld/mysqld.pid  # pid-file in /etc/mysql/my.cnf
USER_NAME=openstack_citest
PASSWORD=openstack_citest

wait_for() {
    local what=$1; shift
    for _ in $(seq 1 60); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 1
    done
    echo "ERROR: $what did not come up within 60 seconds" >&2
    return 1
}

start_mariadb() {
    if mysqladmin --protocol=tcp -h127.0.0.1 -uroot ping >/dev/null 2>&1; then
        return 0
    fi
    echo "Starting MariaDB"
    install -d -o mysql -g mysql /run/mysqld
    # NOTE: a server that is still shutting down holds its data files;
    # wait for it to exit.  The pid file (not the executable) identifies
    # this server, so other mariadbd processes (the Galera test nodes) do
    # not count as it running.
    for _ in $(seq 1 60); do
        pid=$(cat "$MARIADB_PID_FILE" 2>/dev/null || true)
        if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then break; fi
        sleep 1
    done
    start-stop-daemon --start --oknodo --background \
        --pidfile "$MARIADB_PID_FILE" \
        --exec /usr/sbin/mariadbd -- --user=mysql
    wait_for MariaDB mysqladmin --protocol=tcp -h127.0.0.1 -uroot ping
}

start_postgresql() {
    if pg_isready -h 127.0.0.1 -q; then
        return 0
    fi
    echo "Starting PostgreSQL"
    local version
    version=$(ls /etc/postgresql | head -n 1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
    wait_for PostgreSQL pg_isready -h 127.0.0.1 -q
}

rabbitmq_listening() {
    (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null
}

start_rabbitmq() {
    if rabbitmq_listening; then
        return 0
    fi
    echo "Starting RabbitMQ"
    # NOTE: a node whose application was stopped (rabbitmqctl stop_app, as
    # the services env restarts it) only needs the application started.
    rabbitmqctl -q start_app >/dev/null 2>&1 ||
        /etc/init.d/rabbitmq-server start
    wait_for RabbitMQ rabbitmq_listening
}

prepare_mariadb() {
    mysql --protocol=tcp -h127.0.0.1 -uroot <<SQL
DROP USER IF EXISTS ''@'localhost';
DROP USER IF EXISTS ''@'$(hostname)';
CREATE USER IF NOT EXISTS '$USER_NAME'@'%' IDENTIFIED BY '$PASSWORD';
CREATE USER IF NOT EXISTS '$USER_NAME'@'localhost' IDENTIFIED BY '$PASSWORD';
GRANT ALL PRIVILEGES ON *.* TO '$USER_NAME'@'%' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO '$USER_NAME'@'localhost' WITH GRANT OPTION;
FLUSH PRIVILEGES;
SQL
}

prepare_postgresql() {
    psql -h 127.0.0.1 -U postgres -d postgres -v ON_ERROR_STOP=1 -q <<SQL
DO \$\$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$USER_NAME') THEN
        CREATE ROLE $USER_NAME LOGIN CREATEDB SUPERUSER PASSWORD '$PASSWORD';
    END IF;
END
\$\$;
SQL
}

start_mariadb
start_postgresql
start_rabbitmq
prepare_mariadb
prepare_postgresql
echo "MariaDB and PostgreSQL are ready for the functional tests; RabbitMQ is up."
