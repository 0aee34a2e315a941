"""Nova 22's real services, run inside the bullseye root, for the
services environment (``tools/nova22-services.py`` drives it from the
host).

``python3 -m tests.nova22.services COMMAND SPEC ...``:

``setup SPEC``
    writes the cloud's configuration files and makes its databases:
    Nova's API database, cell0 and cell1 (``nova-manage``), placement's
    (``placement-manage db sync``) and grant_scheduler's
    (``grant-scheduler-manage db sync``), as an operator does.
``serve ROLE SPEC [NODE,...] -- NOVA ARGS``
    runs Nova's own ``nova.cmd.<ROLE>.main()`` (``api``, ``conductor``,
    ``compute``, ``scheduler``) with ``NOVA ARGS`` as its command line.
    The API, conductor and computes get Nova's own Glance and Neutron
    stand-ins (``nova.tests.fixtures.GlanceFixture`` and
    ``NeutronFixture``, as Nova's functional tests use them; neither
    service is available here); a compute's fake virt driver reports the
    given nodes.  The schedulers get nothing: they are the binary.
``manage SPEC ARGS``
    ``nova-manage`` with the cloud's configuration.
``check SPEC SCHEDULER``
    reads Nova's cell database, placement's and grant_scheduler's books
    and prints them as JSON (the host side judges them).
"""

import importlib
import json
import os
import subprocess
import sys

from tests.nova22 import cloud

NOVA_CONF = """
[DEFAULT]
transport_url = {transport_url}
state_path = {directory}/state
debug = False
use_stderr = False
graceful_shutdown_timeout = 5
compute_driver = fake.SmallFakeDriver
# Every node holds exactly two servers of the test flavour (two VCPUs).
cpu_allocation_ratio = 1.0
ram_allocation_ratio = 1.0
disk_allocation_ratio = 1.0
initial_cpu_allocation_ratio = 1.0
initial_ram_allocation_ratio = 1.0
initial_disk_allocation_ratio = 1.0
vif_plugging_timeout = 0
vif_plugging_is_fatal = False
enabled_apis = osapi_compute
osapi_compute_listen = 127.0.0.1
osapi_compute_listen_port = {api_port}
osapi_compute_workers = 1
instance_usage_audit = False
heal_instance_info_cache_interval = -1
[api]
auth_strategy = noauth2
[wsgi]
api_paste_config = /etc/nova/api-paste.ini
[api_database]
connection = {nova_url}{prefix}api
[database]
connection = {nova_url}{prefix}cell1
[conductor]
workers = 1
[oslo_messaging_notifications]
driver = noop
[oslo_messaging_rabbit]
# Queues and messages that outlive a broker restart (False: Nova's
# default, under which a cast published while a consumer's queue is gone
# is dropped and its server stays in BUILD).
amqp_durable_queues = {durable_queues}
[oslo_concurrency]
lock_path = {directory}/locks
[placement]
auth_type = admin_token
token = admin
endpoint = http://127.0.0.1:{placement_port}
[glance]
api_servers = http://localhost:9292
[quota]
driver = nova.quota.NoopQuotaDriver
[scheduler]
driver = {driver}
workers = 2
discover_hosts_in_cells_interval = -1
[grant_scheduler_database]
connection = {gs_url}
"""


DRIVERS = {"stock": "filter_scheduler", "grants": "grant_scheduler"}


def conf_path(spec, scheduler):
    return os.path.join(spec["directory"], "nova-%s.conf" % scheduler)


def _run(*args):
    proc = subprocess.run(
        list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    if proc.returncode:
        sys.stderr.write(proc.stdout.decode(errors="replace"))
        raise SystemExit("failed: %s" % " ".join(args))
    return proc.stdout.decode(errors="replace")


def setup(spec):
    directory = spec["directory"]
    for sub in ("state", "locks", "logs"):
        os.makedirs(os.path.join(directory, sub), exist_ok=True)
    for scheduler, driver in DRIVERS.items():
        with open(conf_path(spec, scheduler), "w") as f:
            f.write(NOVA_CONF.format(driver=driver, **spec))
    conf = conf_path(spec, "grants")
    url = "%s%s" % (spec["nova_url"], spec["prefix"])
    cloud.make_databases(
        _run,
        directory,
        url + "placement",
        conf,
        (url + "cell0", url + "cell1"),
        spec["transport_url"],
    )
    # grant_scheduler's schema, as the admin guide tells an operator to make
    # it.
    _run(
        sys.executable,
        "-c",
        "import sys; from grant_scheduler.cmd.manage import main; "
        "sys.exit(main())",
        "--config-file",
        conf,
        "db",
        "sync",
    )


# -- the services ----------------------------------------------------------


def _stub_glance_and_neutron():
    """Nova's own stand-ins for Glance and Neutron, for the life of the
    process, as Nova's functional tests install them."""
    import fixtures
    from nova import conf as nova_conf
    from nova.tests import fixtures as nova_fixtures

    conf = nova_conf.CONF

    class _Host(fixtures.Fixture):
        def stub_out(self, old, new):
            self.useFixture(fixtures.MonkeyPatch(old, new))

        def flags(self, **kw):
            group = kw.pop("group", None)
            for key, value in kw.items():
                conf.set_override(key, value, group)

    host = _Host()
    host.setUp()
    host.useFixture(nova_fixtures.GlanceFixture(host))
    host.useFixture(nova_fixtures.NeutronFixture(host))
    return host


def serve(role, nodes, argv):
    import nova.monkey_patch  # noqa: F401 - first, as in every Nova service
    from nova import config

    if role in ("api", "conductor", "compute"):
        parse_args = config.parse_args

        def parse_and_stub(*args, **kwargs):
            parse_args(*args, **kwargs)
            _stub_glance_and_neutron()

        config.parse_args = parse_and_stub
    if role == "compute":
        from nova.virt import fake

        init_host = fake.FakeDriver.init_host

        def init_host_with_nodes(self, host):
            init_host(self, host)
            self._set_nodes(list(nodes))

        fake.FakeDriver.init_host = init_host_with_nodes
    module = importlib.import_module("nova.cmd.%s" % role)
    sys.argv = ["nova-%s" % role] + list(argv)
    return module.main()


# -- what the checks read ------------------------------------------------


def _rows(url, sql):
    import sqlalchemy as sa

    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return [dict(row.items()) for row in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


def read_allocations(conn):
    """Every allocation of placement's database: its consumer's UUID, its
    provider's name, its resource class's id and amount.

    ``allocations.consumer_id`` holds the consumer's UUID itself, not the
    ``consumers`` row's integer id (a join on that id matches no row for
    most UUIDs, and on MySQL a wrong consumer for those whose UUID starts
    with the digits of an id).
    """
    import sqlalchemy as sa

    return [
        dict(row.items())
        for row in conn.execute(
            sa.text(
                "SELECT a.consumer_id AS consumer, p.name AS node,"
                " a.resource_class_id AS rc, a.used"
                " FROM allocations a"
                " JOIN resource_providers p"
                " ON p.id = a.resource_provider_id"
            )
        )
    ]


def check(spec, scheduler):
    """Everything the host side judges, as one JSON document."""
    import sqlalchemy as sa

    from grant_scheduler_bench import placement_api

    cell = "%s%scell1" % (spec["nova_url"], spec["prefix"])
    out = {
        "instances": _rows(
            cell,
            "SELECT uuid, host, node, vm_state, task_state, vcpus,"
            " memory_mb, root_gb FROM instances WHERE deleted = 0",
        ),
        "compute_nodes": _rows(
            cell,
            "SELECT host, hypervisor_hostname AS node, uuid, vcpus,"
            " vcpus_used, memory_mb, memory_mb_used, local_gb,"
            " local_gb_used, running_vms FROM compute_nodes"
            " WHERE deleted = 0",
        ),
    }
    engine = sa.create_engine(
        "%s%splacement" % (spec["nova_url"], spec["prefix"]),
        poolclass=sa.pool.NullPool,
    )
    try:
        with engine.connect() as conn:
            usage = placement_api.read_usage(conn)
            names = {
                row.id: row.name
                for row in conn.execute(
                    sa.text("SELECT id, name FROM resource_classes")
                )
            }
            consumers = read_allocations(conn)
    finally:
        engine.dispose()
    standard = {0: "VCPU", 1: "MEMORY_MB", 2: "DISK_GB"}
    out["placement"] = {
        node: {
            standard.get(rc, names.get(rc, str(rc))): list(pair)
            for rc, pair in classes.items()
        }
        for node, classes in usage.items()
    }
    out["allocations"] = [
        dict(a, rc=standard.get(a["rc"], names.get(a["rc"], a["rc"])))
        for a in consumers
    ]
    if scheduler == "grants":
        from grant_scheduler import api

        gs = api.GrantScheduler.from_url(spec["gs_url"])
        try:
            out["books"] = {
                r.state.node: {
                    "host": r.state.host,
                    "used": r.state.used.as_dict(),
                    "granted": r.state.granted.as_dict(),
                    "limit": r.state.limit.as_dict(),
                    "claimed": r.claimed.as_dict(),
                    "external": r.external.as_dict(),
                }
                for r in gs.hosts()
            }
            out["claims"] = [
                {"instance": c.instance_uuid, "host": c.host, "node": c.node}
                for c in gs.claims()
            ]
            out["live_grants"] = [
                {"instance": g.instance_uuid, "node": g.node, "state": g.state}
                for g in gs.grants()
            ]
            out["violations"] = [str(v) for v in gs.check()]
        finally:
            gs.database.dispose()
    json.dump(out, sys.stdout, default=str)
    sys.stdout.write("\n")


def main(argv):
    command = argv[1]
    with open(argv[2]) as f:
        spec = json.load(f)
    if command == "setup":
        setup(spec)
    elif command == "serve":
        role = argv[3]
        rest = argv[4:]
        split = rest.index("--")
        nodes = rest[0].split(",") if split and rest[0] else []
        return serve(role, nodes, rest[split + 1 :])
    elif command == "manage":
        os.execvp(
            "nova-manage",
            ["nova-manage", "--config-file", conf_path(spec, "grants")]
            + argv[3:],
        )
    elif command == "check":
        check(spec, argv[3])
    else:
        raise SystemExit("usage: setup|serve|manage|check SPEC ...")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
