"""A Nova 22 cloud without compute services, scheduled by several
scheduler processes at once.

``Cloud`` (in the caller's process, which imports no Nova) builds it:

* Nova's API database, cell0 and cell1 made by ``nova-manage`` (SQLite
  files: the schedulers only read them), a service and a compute node
  record for every node, mapped by ``cell_v2 discover_hosts``;
* Debian's placement service (``placement_wsgi``: several worker
  processes) on its own MariaDB database made by ``placement-manage db
  sync``, with a resource provider per node as its compute would report
  it;
* grant_scheduler's database (migrated by the caller).

``Cloud.schedule`` then starts ``processes`` scheduler processes (``python3
-m tests.nova22.cloud schedule ...``), each Nova 22's own
``SchedulerManager`` with ``[scheduler] driver`` set to the system under
test, and each with ``callers`` green threads calling
``select_destinations`` as Nova's RPC server calls it for the conductor;
after each answer the process runs the compute-side step production runs
(grant_scheduler: the claim that consumes the grant; the stock scheduler:
none, placement's allocation being its only record).  They start together
and write what each call did.
"""

import json
import os
import socket
import subprocess
import sys
import time
import uuid

NAMESPACE = uuid.UUID("5b9c8f4e-3a52-4d1b-9d4e-2f6c1a7d0e11")

NOVA_CONF = """
[DEFAULT]
transport_url = fake://
state_path = {directory}
# The records are written once and never heartbeat.
service_down_time = 864000
[api_database]
connection = sqlite:///{directory}/api.sqlite
[database]
connection = sqlite:///{directory}/cell1.sqlite
[oslo_messaging_notifications]
driver = noop
[placement]
auth_type = admin_token
token = admin
endpoint = http://127.0.0.1:{port}
[scheduler]
driver = {driver}
[grant_scheduler_database]
connection = {gs_url}
"""

PLACEMENT_CONF = """
[DEFAULT]
debug = False
log_file = {directory}/placement.log
[api]
auth_strategy = noauth2
[placement_database]
connection = {placement_url}
"""

SYSTEMS = {"stock": "filter_scheduler", "grants": "grant_scheduler"}


def node_name(index):
    return "node%04d" % index


def node_uuid(name):
    return str(uuid.uuid5(NAMESPACE, name))


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _python(*args, **kwargs):
    return [sys.executable, "-W", "ignore", "-m", __name__] + list(args)


class Cloud:
    """The cloud's pieces, started and stopped from a process without
    Nova imported."""

    def __init__(self, directory, nodes, node, flavor, gs_url, placement_url):
        """
        :param node: ``{"vcpus", "memory_mb", "local_gb", "reserved_mb"}``
            of every node; with ``"resource_class"``, a node as Nova 22's
            Ironic driver reports one: one unit of that class in
            placement and nothing else, a compute node record of zeros.
        :param flavor: ``{"vcpus", "memory_mb", "root_gb"}`` requested,
            and optionally ``"extra_specs"`` (``resources:<CLASS>=N``).
        """
        self.directory = directory
        self.spec = {
            "directory": directory,
            "nodes": nodes,
            "node": node,
            "flavor": flavor,
            "gs_url": gs_url,
            "placement_url": placement_url,
            "port": _free_port(),
        }
        self.spec_file = os.path.join(directory, "cloud.json")
        with open(self.spec_file, "w") as f:
            json.dump(self.spec, f)
        self._placement = None

    def start(self, placement_workers=2):
        subprocess.run(_python("setup", self.spec_file), check=True)
        env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=self.directory)
        self._placement = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.nova22.placement_wsgi",
                str(self.spec["port"]),
                str(placement_workers),
            ],
            env=env,
        )
        self._wait_for_placement()
        self._create_providers()

    def stop(self):
        if self._placement is not None:
            self._placement.terminate()
            self._placement.wait(timeout=30)
            self._placement = None

    def placement(self):
        from grant_scheduler_bench import placement_api

        return placement_api.Client("http://127.0.0.1:%d" % self.spec["port"])

    def _wait_for_placement(self, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            try:
                status, _ = self.placement().request("GET", "/")
                if status == 200:
                    return
            except OSError:
                pass
            if self._placement.poll() is not None:
                raise AssertionError("placement exited at start")
            if time.monotonic() > deadline:
                raise AssertionError("placement did not answer")
            time.sleep(0.2)

    def _create_providers(self):
        client = self.placement()
        node = self.spec["node"]
        if node.get("resource_class"):
            # NOTE(placement): a custom class exists before an inventory
            # names it, as Nova's report client creates it (1.7 and on).
            status, body = client.request(
                "PUT", "/resource_classes/%s" % node["resource_class"]
            )
            assert status in (201, 204), body
        for index in range(self.spec["nodes"]):
            name = node_name(index)
            rp = node_uuid(name)
            status, body = client.request(
                "POST", "/resource_providers", {"uuid": rp, "name": name}
            )
            assert status in (200, 201), body
            status, body = client.request(
                "PUT",
                "/resource_providers/%s/inventories" % rp,
                {
                    "resource_provider_generation": 0,
                    "inventories": inventories(node),
                },
            )
            assert status == 200, body

    def schedule(
        self, system, processes, callers, requests, timeout=1800, profile=False
    ):
        """Run ``requests`` boots through ``processes`` scheduler
        processes of ``system`` (``SYSTEMS``), ``callers`` at a time in
        each; returns ``{"wall_s", "calls": [...]}``, one call per
        request (``ms``, ``host`` and ``node``, or ``nvh`` with ``room``:
        the providers that had room when NoValidHost was answered).  Each
        placed instance then gets its host and node in the cell database,
        as the compute's resource tracker sets them, before grant_scheduler
        claims it.  ``profile``: each process runs its calls under
        cProfile and the result's ``profiles`` names the files of their
        stats."""
        run = os.path.join(self.directory, "run-%s" % uuid.uuid4().hex[:8])
        os.mkdir(run)
        go = os.path.join(run, "go")
        shares = [
            requests // processes + (i < requests % processes)
            for i in range(processes)
        ]
        subprocess.run(
            _python("prepare", self.spec_file, run, json.dumps(shares)),
            check=True,
        )
        procs = [
            subprocess.Popen(
                _python(
                    "schedule",
                    self.spec_file,
                    system,
                    run,
                    str(i),
                    str(share),
                    str(callers),
                    *(["--profile"] if profile else []),
                )
            )
            for i, share in enumerate(shares)
        ]
        try:
            ready = [
                os.path.join(run, "%d.ready" % i) for i in range(processes)
            ]
            deadline = time.monotonic() + 600
            while not all(os.path.exists(r) for r in ready):
                if any(p.poll() not in (None, 0) for p in procs):
                    raise AssertionError("a scheduler process failed to start")
                if time.monotonic() > deadline:
                    raise AssertionError("scheduler processes not ready")
                time.sleep(0.1)
            started = time.monotonic()
            open(go, "w").close()
            for proc in procs:
                proc.wait(timeout=timeout)
            wall = time.monotonic() - started
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        assert all(p.returncode == 0 for p in procs), [
            p.returncode for p in procs
        ]
        result = {"wall_s": wall, "calls": [], "counts": [], "profiles": []}
        if profile:
            result["profiles"] = [
                os.path.join(run, "%d.prof" % i) for i in range(processes)
            ]
        for i in range(processes):
            with open(os.path.join(run, "%d.json" % i)) as f:
                done = json.load(f)
            result["calls"].extend(done["calls"])
            result["counts"].append(done["counts"])
        return result

    def placement_usage(self):
        """``{provider name: {class id: (used, capacity)}}``."""
        import sqlalchemy as sa

        from grant_scheduler_bench import placement_api

        engine = sa.create_engine(
            self.spec["placement_url"], poolclass=sa.pool.NullPool
        )
        try:
            with engine.connect() as conn:
                return placement_api.read_usage(conn)
        finally:
            engine.dispose()

    def reset_placement(self):
        """Remove every allocation, and the instances earlier runs placed
        (between two runs on one cloud): each run starts from empty nodes
        in placement and in Nova's cell, whose instances on a host the
        schedulers' host manager compares with what each compute says it
        runs (nothing, in ``schedule``)."""
        import sqlite3

        import sqlalchemy as sa

        cell = sqlite3.connect(os.path.join(self.directory, "cell1.sqlite"))
        try:
            with cell:
                # NOTE(nova): soft-deleted, as Nova deletes an instance.
                cell.execute(
                    "UPDATE instances SET deleted = id, "
                    "deleted_at = CURRENT_TIMESTAMP WHERE deleted = 0"
                )
        finally:
            cell.close()

        engine = sa.create_engine(
            self.spec["placement_url"], poolclass=sa.pool.NullPool
        )
        try:
            with engine.begin() as conn:
                conn.execute(sa.text("DELETE FROM allocations"))
                conn.execute(sa.text("DELETE FROM consumers"))
        finally:
            engine.dispose()


# -- in the cloud's own processes (Nova imported, monkey-patched) ---------


def _nova_conf(spec, system):
    path = os.path.join(spec["directory"], "nova-%s.conf" % system)
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(
                NOVA_CONF.format(
                    directory=spec["directory"],
                    port=spec["port"],
                    driver=SYSTEMS[system],
                    gs_url=spec["gs_url"],
                )
            )
    return path


def _run(*args):
    subprocess.run(
        list(args),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def make_databases(run, directory, placement_url, conf, cells, transport):
    """Placement's schema, then Nova's API database, cell0 and cell1, as
    an operator makes them (``placement-manage`` and ``nova-manage``).

    :param run: ``f(*command)`` running one command, raising if it fails.
    :param conf: the nova.conf ``nova-manage`` reads.
    :param cells: ``(cell0 URL, cell1 URL)``.
    :param transport: cell1's transport URL.
    """
    placement_conf = os.path.join(directory, "placement.conf")
    with open(placement_conf, "w") as f:
        f.write(
            PLACEMENT_CONF.format(
                directory=directory, placement_url=placement_url
            )
        )
    run("placement-manage", "--config-file", placement_conf, "db", "sync")
    manage = ["nova-manage", "--config-file", conf]
    run(*manage, "api_db", "sync")
    run(*manage, "cell_v2", "map_cell0", "--database_connection", cells[0])
    run(
        *manage,
        "cell_v2",
        "create_cell",
        "--name",
        "cell1",
        "--database_connection",
        cells[1],
        "--transport-url",
        transport,
    )
    run(*manage, "db", "sync")


def setup(spec):
    """Nova's databases and records, placement's schema."""
    directory = spec["directory"]
    conf = _nova_conf(spec, "stock")
    _nova_conf(spec, "grants")
    make_databases(
        _run,
        directory,
        spec["placement_url"],
        conf,
        (
            "sqlite:///%s/cell0.sqlite" % directory,
            "sqlite:///%s/cell1.sqlite" % directory,
        ),
        "fake://",
    )
    _write_records(spec, conf)
    _run("nova-manage", "--config-file", conf, "cell_v2", "discover_hosts")


def _cell1(conf):
    from nova import config as nova_config
    from nova import context as nova_context
    from nova import objects

    nova_config.parse_args(["setup", "--config-file", conf])
    objects.register_all()
    admin = nova_context.get_admin_context()
    [cell] = [
        c for c in objects.CellMappingList.get_all(admin) if c.name == "cell1"
    ]
    return admin, cell


def _instance_uuid(run, index, number):
    return str(uuid.uuid5(NAMESPACE, "%s-%s-%s" % (run, index, number)))


def inventories(node):
    """A node's provider inventory, as its compute reports it."""
    if node.get("resource_class"):
        return {node["resource_class"]: {"total": 1, "max_unit": 1}}
    return {
        "VCPU": {"total": node["vcpus"]},
        "MEMORY_MB": {
            "total": node["memory_mb"],
            "reserved": node["reserved_mb"],
        },
        "DISK_GB": {"total": node["local_gb"]},
    }


def flavor_amount(flavor):
    """``{class: amount}`` placement allocates for one instance of a
    ``flavor`` spec: its three amounts, each ``resources:<CLASS>=N`` extra
    spec in place of the flavour's amount of that class."""
    amounts = {
        "VCPU": flavor["vcpus"],
        "MEMORY_MB": flavor["memory_mb"],
        "DISK_GB": flavor["root_gb"],
    }
    for key, value in (flavor.get("extra_specs") or {}).items():
        if key.startswith("resources:"):
            amounts[key.partition(":")[2]] = int(value)
    return {name: value for name, value in amounts.items() if value}


def _flavor(spec):
    from nova import objects

    fields = dict(spec["flavor"])
    return objects.Flavor(
        name="bench",
        flavorid="bench",
        swap=0,
        ephemeral_gb=0,
        extra_specs=fields.pop("extra_specs", {}),
        **fields,
    )


def prepare(spec, run, shares):
    """What Nova's API and conductor have written when the conductor asks
    for a host: each instance (building, no host yet) and its mapping."""
    from nova import context as nova_context
    from nova import objects

    admin, cell = _cell1(_nova_conf(spec, "stock"))
    flavor = _flavor(spec)
    with nova_context.target_cell(admin, cell) as cctxt:
        for index, share in enumerate(shares):
            for number in range(share):
                instance_uuid = _instance_uuid(run, index, number)
                objects.Instance(
                    cctxt,
                    uuid=instance_uuid,
                    project_id="project",
                    user_id="user",
                    vm_state="building",
                    image_ref=str(uuid.uuid4()),
                    flavor=flavor,
                    vcpus=flavor.vcpus,
                    memory_mb=flavor.memory_mb,
                    root_gb=flavor.root_gb,
                    ephemeral_gb=0,
                ).create()
                objects.InstanceMapping(
                    admin,
                    instance_uuid=instance_uuid,
                    cell_mapping=cell,
                    project_id="project",
                    user_id="user",
                ).create()


def _write_records(spec, conf):
    from nova import context as nova_context
    from nova import objects

    admin, cell = _cell1(conf)
    node = spec["node"]
    with nova_context.target_cell(admin, cell) as cctxt:
        for index in range(spec["nodes"]):
            name = node_name(index)
            service = objects.Service(
                cctxt, host=name, binary="nova-compute", topic="compute"
            )
            service.create()
            compute_node(cctxt, name, node, service.id).create()


def compute_node(context, name, node, service_id=None):
    """The compute node record a compute writes for an empty node of
    ``node``'s size (``{"vcpus", "memory_mb", "local_gb",
    "reserved_mb"}``); not yet created."""
    from nova import objects

    return objects.ComputeNode(
        context,
        uuid=node_uuid(name),
        host=name,
        hypervisor_hostname=name,
        service_id=service_id,
        vcpus=node["vcpus"],
        memory_mb=node["memory_mb"],
        local_gb=node["local_gb"],
        vcpus_used=0,
        memory_mb_used=node["reserved_mb"],
        local_gb_used=0,
        free_ram_mb=node["memory_mb"] - node["reserved_mb"],
        free_disk_gb=node["local_gb"],
        disk_available_least=node["local_gb"],
        hypervisor_type="fake",
        hypervisor_version=1000,
        cpu_info="{}",
        running_vms=0,
        current_workload=0,
        host_ip="127.0.0.1",
        supported_hv_specs=[],
        stats={},
        metrics="[]",
        pci_device_pools=None,
        numa_topology=None,
        cpu_allocation_ratio=1.0,
        ram_allocation_ratio=1.0,
        disk_allocation_ratio=1.0,
    )


def request_spec(flavor, instance_uuid, **fields):
    """The RequestSpec Nova's conductor sends for one plain boot."""
    from nova import objects

    values = dict(
        flavor=flavor,
        num_instances=1,
        instance_uuid=instance_uuid,
        project_id="project",
        user_id="user",
        image=objects.ImageMeta.from_dict({"properties": {}}),
        scheduler_hints={},
        ignore_hosts=None,
        force_hosts=None,
        force_nodes=None,
        pci_requests=objects.InstancePCIRequests(requests=[]),
        numa_topology=None,
        requested_destination=None,
        requested_resources=[],
        is_bfv=False,
        instance_group=None,
        availability_zone=None,
        security_groups=objects.SecurityGroupList(),
    )
    values.update(fields)
    return objects.RequestSpec(**values)


def _set_host(admin, cell, instance_uuid, chosen):
    """What the compute's resource tracker writes when it claims: the
    instance's host and node.  (The cell database is a SQLite file that
    every scheduler process writes: a write that finds it locked waits
    and tries again.)"""
    import eventlet
    import sqlalchemy as sa
    from nova import context as nova_context
    from nova import objects
    from oslo_db import exception as db_exception

    for attempt in range(200):
        try:
            with nova_context.target_cell(admin, cell) as cctxt:
                instance = objects.Instance.get_by_uuid(
                    cctxt, instance_uuid, expected_attrs=[]
                )
                instance.host = chosen.service_host
                instance.node = chosen.nodename
                instance.save()
            return
        except (sa.exc.OperationalError, db_exception.DBError) as exc:
            if "locked" not in str(exc) or attempt == 199:
                raise
            eventlet.sleep(0.02)


class _Counts:
    """SQL statements by database name, and placement's HTTP requests,
    made in this process while counting is on."""

    def __init__(self):
        import sqlalchemy as sa
        from keystoneauth1 import session

        self.on = False
        self.statements = {}
        self.http = 0
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", self._sql)
        request = session.Session.request
        counts = self

        def counted(self, *args, **kwargs):
            if counts.on:
                counts.http += 1
            return request(self, *args, **kwargs)

        session.Session.request = counted

    def _sql(self, conn, *args):
        if self.on:
            name = os.path.basename(conn.engine.url.database or "?")
            self.statements[name] = self.statements.get(name, 0) + 1

    def as_dict(self, uncounted):
        statements = dict(self.statements)
        statements.pop(uncounted, None)
        return {"statements": statements, "http": self.http}


def schedule(spec, system, run, index, count, callers, profile=False):
    """One scheduler process: see the module's docstring."""
    import eventlet
    import oslo_messaging as messaging
    from nova import config as nova_config
    from nova import context as nova_context
    from nova import exception as nova_exception
    from nova import objects
    from nova.scheduler import manager as scheduler_manager

    from grant_scheduler import api
    from grant_scheduler import conf as gs_conf
    from grant_scheduler.nova.books import claims as nova_claims
    from grant_scheduler_bench import placement_api

    nova_config.parse_args(
        ["scheduler", "--config-file", _nova_conf(spec, system)]
    )
    gs_conf.register_opts(nova_config.CONF)
    objects.register_all()
    counts = _Counts()
    manager = scheduler_manager.SchedulerManager()
    admin = nova_context.get_admin_context()
    [cell] = [
        c for c in objects.CellMappingList.get_all(admin) if c.name == "cell1"
    ]
    # Nova's service runs the manager's periodic tasks at start.
    manager.periodic_tasks(admin)
    # Every compute tells every scheduler what it runs, at its start and
    # every scheduler_instance_sync_interval; two syncs that agree and
    # Nova's host manager uses what it was told instead of reading each
    # host's instances for every request.  (It reads the instances of
    # every host on a green thread of its own at start, which starts its
    # record again: sync until every host is marked.)
    host_manager = manager.driver.host_manager

    def synced():
        records = getattr(host_manager, "_instance_info", {})
        return all(
            records.get(node_name(n), {}).get("updated")
            for n in range(spec["nodes"])
        )

    while not synced():
        for number in range(spec["nodes"]):
            manager.sync_instance_info(admin, node_name(number), [])
        time.sleep(0.1)
    amount = api.Resources.of(flavor_amount(spec["flavor"]))
    placement_room = placement_api.RoomCheck(spec["placement_url"])

    def room(amount):
        """The nodes that fitted ``amount`` when NoValidHost was answered:
        placement's records, and for grant_scheduler its books (usage
        plus live grants: a granted node whose placement claim is still
        on its way has no room)."""
        if system != "grants":
            return placement_room(amount)
        return {
            r.state.host
            for r in manager.driver.grant_scheduler.hosts()
            if r.state.fits(amount)
        }

    open(os.path.join(run, "%s.ready" % index), "w").close()
    while not os.path.exists(os.path.join(run, "go")):
        time.sleep(0.01)
    calls = []

    def one(number):
        instance_uuid = _instance_uuid(run, index, number)
        spec_obj = request_spec(_flavor(spec), instance_uuid)
        started = time.monotonic()
        try:
            answer = manager.select_destinations(
                admin,
                spec_obj=spec_obj,
                instance_uuids=[instance_uuid],
                return_objects=True,
                return_alternates=True,
            )
        except messaging.ExpectedException as exc:
            if not isinstance(exc.exc_info[1], nova_exception.NoValidHost):
                raise
            ms = (time.monotonic() - started) * 1000
            # NOTE: the check reads placement's database, which the
            # schedulers never do: its statements are not counted.
            calls.append({"ms": ms, "nvh": True, "room": sorted(room(amount))})
            return
        ms = (time.monotonic() - started) * 1000
        chosen = answer[0][0]
        # The compute's resource tracker sets the instance's host and node
        # when it claims, before its instance information (the books'
        # claim) reaches the schedulers.
        _set_host(admin, cell, instance_uuid, chosen)
        if system == "grants":
            nova_claims.claim(
                manager.driver.grant_scheduler,
                instance_uuid,
                chosen.service_host,
                chosen.nodename,
                lambda: amount,
            )
        calls.append(
            {"ms": ms, "host": chosen.service_host, "node": chosen.nodename}
        )

    def recorded(number):
        try:
            one(number)
        except Exception as exc:  # noqa: BLE001 - reported to the caller
            calls.append({"error": repr(exc)})

    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    pool = eventlet.GreenPool(callers)
    counts.on = True
    for number in range(count):
        pool.spawn(recorded, number)
    pool.waitall()
    counts.on = False
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(os.path.join(run, "%s.prof" % index))
    if system == "grants":
        manager.driver.stop()
    with open(os.path.join(run, "%s.json" % index), "w") as f:
        json.dump(
            {
                "calls": calls,
                "counts": counts.as_dict(
                    os.path.basename(placement_room.engine.url.database)
                ),
            },
            f,
        )


def main(argv):
    # NOTE: first, as in every Nova service.
    import nova.monkey_patch  # noqa: F401

    with open(argv[2]) as f:
        spec = json.load(f)
    if argv[1] == "setup":
        setup(spec)
    elif argv[1] == "prepare":
        prepare(spec, argv[3], json.loads(argv[4]))
    elif argv[1] == "schedule":
        system, run, index, count, callers = argv[3:8]
        schedule(
            spec,
            system,
            run,
            index,
            int(count),
            int(callers),
            profile="--profile" in argv[8:],
        )
    else:
        raise SystemExit("usage: setup|schedule SPEC ...")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
