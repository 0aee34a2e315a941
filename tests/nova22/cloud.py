"""A Nova 22 cloud without compute services, scheduled by several
scheduler processes at once.

``Cloud`` (in the caller's process, which imports no Nova) builds it:

* Nova's API database, cell0 and cell1, each a throw-away MariaDB
  database, made by ``nova-manage``; a service, a compute node and a host
  mapping for every node, written in batches (what ``cell_v2
  discover_hosts`` would map one by one is mapped already);
* Debian's placement service (``placement_wsgi``: several worker
  processes) on its own MariaDB database made by ``placement-manage db
  sync``, with a resource provider per node as its compute would report
  it (through placement's HTTP API, several requests at a time);
* grant_scheduler's database (migrated by the caller);
* every compute service's heartbeat, as the database servicegroup driver
  writes it every ``report_interval`` (``Heartbeats``), from the start
  of placement to the cloud's end.

``Cloud.schedule`` then starts ``processes`` scheduler processes (``python3
-m tests.nova22.cloud schedule ...``), each Nova 22's own
``SchedulerManager`` with ``[scheduler] driver`` set to the system under
test, and each with ``callers`` green threads booting instances.  Each
boot writes Nova's records in the scheduler process, for both systems
alike (``Boot``): the API's request spec, build request and instance
mapping; ``select_destinations`` as Nova's RPC server calls it for the
conductor; the conductor's instance in cell1, mapping and build request;
the compute's claim (the instance's host and node, the compute node's
usage) and the instance information the compute sends the schedulers,
cast to every scheduler process as Nova's fanout cast reaches every
worker (``Fanout``), from which grant_scheduler's host manager claims
the instance, consuming its grant (in the process that granted it; the
others look later whether it is claimed), as on Nova 22 by default
(``compute_claim``: with the opt-in claiming virt driver the compute
claims it first).  They start
together and write what each call did, with the CPU time each phase of a
boot took (``Phases``).
"""

import concurrent.futures
import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import time
import uuid

NAMESPACE = uuid.UUID("5b9c8f4e-3a52-4d1b-9d4e-2f6c1a7d0e11")

NOVA_CONF = """
[DEFAULT]
transport_url = fake://
state_path = {directory}
# The services' rows heartbeat (``Heartbeats``) while the cloud runs, and
# not while it is built: a long build does not take them down.
service_down_time = 864000
[api_database]
connection = {api_url}
[database]
connection = {cell1_url}
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

# Where grant_scheduler's claim of a boot is made.  HOST_MANAGER: as on
# Nova 22 with nothing of grant_scheduler on the computes (the default),
# by the scheduler's host manager when the compute's instance information
# arrives.  VIRT_DRIVER: as with the opt-in claiming virt driver, by the
# compute before the spawn, and then repeated by the host manager.
HOST_MANAGER = "host-manager"
VIRT_DRIVER = "virt-driver"
COMPUTE_CLAIMS = (HOST_MANAGER, VIRT_DRIVER)

# The names of the MariaDB server's process (``Cloud.database_cpu``).
DATABASE_SERVERS = ("mariadbd", "mysqld")

# Nova's databases, each a throw-away MariaDB database of its own.
NOVA_DATABASES = ("api", "cell0", "cell1")

# The compute node columns a claim moves (``Boot.compute``), and the
# values of an empty node of ``node``'s size (``Cloud.reset_placement``).
USAGE_COLUMNS = (
    "vcpus_used",
    "memory_mb_used",
    "local_gb_used",
    "free_ram_mb",
    "free_disk_gb",
    "disk_available_least",
    "running_vms",
)


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


def empty_usage(node):
    """``{column: value}`` of ``USAGE_COLUMNS`` on an empty node of
    ``node``'s size, as ``compute_node`` writes them."""
    return {
        "vcpus_used": 0,
        "memory_mb_used": node["reserved_mb"],
        "local_gb_used": 0,
        "free_ram_mb": node["memory_mb"] - node["reserved_mb"],
        "free_disk_gb": node["local_gb"],
        "disk_available_least": node["local_gb"],
        "running_vms": 0,
    }


def _process_cpu(pid):
    """Seconds of CPU (user and system) process ``pid`` has used, or 0
    once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    # NOTE: after the name: state is field 3, utime and stime 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _descendants(pid):
    """``pid`` and every live process under it."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                parent = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found = []
    pending = [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(children.get(current, ()))
    return found


@contextlib.contextmanager
def _engine(url):
    """An engine on the database at ``url`` that keeps no connection,
    disposed of on leaving."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        yield engine
    finally:
        engine.dispose()


class Heartbeats:
    """Every compute service's heartbeat, as Nova's database servicegroup
    driver writes it (``report_count`` up by one, ``last_seen_up`` and
    ``updated_at`` now) every ``interval`` seconds (``[DEFAULT]
    report_interval``): a tenth of the services each tenth of the
    interval, in one statement, as computes started at different times
    spread theirs."""

    SLICES = 10

    def __init__(self, cell_url, interval=10.0):
        import threading

        self._url = cell_url
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.beats = 0
        """Statements written so far."""

    def start(self):
        self._thread.start()

    def stop(self):
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)

    def _run(self):
        import sqlalchemy as sa

        beat = sa.text(
            "UPDATE services SET report_count = report_count + 1, "
            "last_seen_up = UTC_TIMESTAMP(), updated_at = UTC_TIMESTAMP() "
            "WHERE `binary` = 'nova-compute' AND deleted = 0 "
            "AND MOD(id, :slices) = :slice"
        )
        pause = self._interval / self.SLICES
        with _engine(self._url) as engine:
            while not self._stopped.wait(pause):
                with engine.begin() as conn:
                    slice_ = self.beats % self.SLICES
                    conn.execute(
                        beat, {"slices": self.SLICES, "slice": slice_}
                    )
                self.beats += 1


class Cloud:
    """The cloud's pieces, started and stopped from a process without
    Nova imported."""

    def __init__(
        self,
        directory,
        nodes,
        node,
        flavor,
        gs_url,
        placement_url,
        heartbeats=True,
        compute_claim=HOST_MANAGER,
    ):
        """
        :param heartbeats: whether the services' rows heartbeat
            (``Heartbeats``) while the cloud runs.
        :param compute_claim: where grant_scheduler's claim of a boot is
            made (``COMPUTE_CLAIMS``).
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
            "compute_claim": compute_claim,
        }
        self.spec_file = os.path.join(directory, "cloud.json")
        self._placement = None
        self._heartbeats = None
        self._beating = heartbeats
        self._databases = []
        self.build_s = {}
        """Seconds each part of ``start`` took: ``schemas`` (placement's
        and Nova's, by placement-manage and nova-manage), ``nova records``
        (the services, compute nodes and host mappings), ``placement``
        (its service up) and ``providers``."""

    def start(self, placement_workers=2):
        """Nova's databases made and filled, placement started with a
        provider per node; everything started is stopped again if a step
        fails."""
        try:
            self._start(placement_workers)
        except BaseException:
            self.stop()
            raise

    def _start(self, placement_workers):
        from tests import base as gs_base

        for name in NOVA_DATABASES:
            database = gs_base.DatabaseFixture("mysql", migrate=False)
            database.setUp()
            self._databases.append(database)
            self.spec["%s_url" % name] = database.url
        with open(self.spec_file, "w") as f:
            json.dump(self.spec, f)
        subprocess.run(_python("setup", self.spec_file), check=True)
        with open(os.path.join(self.directory, "setup.json")) as f:
            self.build_s.update(json.load(f))
        started = time.monotonic()
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
        self.build_s["placement"] = time.monotonic() - started
        if self._beating:
            self._heartbeats = Heartbeats(self.spec["cell1_url"])
            self._heartbeats.start()
        started = time.monotonic()
        self._create_providers(concurrency=2 * placement_workers)
        self.build_s["providers"] = time.monotonic() - started

    def stop(self):
        """Placement and the heartbeats stopped, Nova's databases
        dropped."""
        heartbeats, self._heartbeats = self._heartbeats, None
        if heartbeats is not None:
            heartbeats.stop()
        if self._placement is not None:
            self._placement.terminate()
            self._placement.wait(timeout=30)
            self._placement = None
        while self._databases:
            self._databases.pop().cleanUp()

    def placement(self):
        from grant_scheduler_bench import placement_api

        return placement_api.Client("http://127.0.0.1:%d" % self.spec["port"])

    def placement_cpu(self):
        """Seconds of CPU placement's service has used so far: its parent
        process and every worker under it."""
        return sum(map(_process_cpu, _descendants(self._placement.pid)))

    def database_cpu(self):
        """Seconds of CPU the database servers on this machine (MariaDB's,
        which holds every database of a run) have used so far, or None
        where none is seen (a server on another machine)."""
        servers = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/%s/comm" % entry) as f:
                    name = f.read().strip()
            except OSError:
                continue
            if name in DATABASE_SERVERS:
                servers.append(int(entry))
        if not servers:
            return None
        return sum(map(_process_cpu, servers))

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

    def _create_providers(self, concurrency):
        """A provider per node with its inventory, as each compute
        reports its node: ``concurrency`` nodes at a time (computes report
        side by side), through placement's own API."""
        client = self.placement()
        node = self.spec["node"]
        if node.get("resource_class"):
            # NOTE(placement): a custom class exists before an inventory
            # names it, as Nova's report client creates it (1.7 and on).
            status, body = client.request(
                "PUT", "/resource_classes/%s" % node["resource_class"]
            )
            assert status in (201, 204), body

        def create(index):
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

        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            # NOTE: list() so that the first failure is raised here.
            list(pool.map(create, range(self.spec["nodes"])))

    def schedule(
        self, system, processes, callers, requests, timeout=1800, profile=False
    ):
        """Run ``requests`` boots through ``processes`` scheduler
        processes of ``system`` (``SYSTEMS``), ``callers`` at a time in
        each; returns ``{"wall_s", "calls": [...], "counts": [...], "cpu":
        [...]}``: one call per request (``ms`` of select_destinations,
        ``rec_ms`` writing Nova's records, ``rec_steps_ms`` the same by
        step (``api``, ``conductor``, ``compute``, for grant_scheduler
        with ``VIRT_DRIVER`` ``claim``, ``instance info``), ``instance``
        (its uuid), and ``host`` and ``node``, or
        ``nvh`` with ``room``: the providers that had room when NoValidHost
        was answered), and per process its statements and HTTP requests
        (``_Counts``) and its CPU seconds by phase (``Phases``);
        ``span_s``, the seconds from the start signal to the end of the
        last process's last boot (its records and casts done: the
        processes' exit aside); ``placement_cpu_s``, the CPU seconds
        placement's service used
        from the start signal to the last process's end;
        ``database_cpu_s``, the same of the MariaDB server's process (every
        database's statements, the heartbeats' among them; None where the
        server is not on this machine); ``start_s``, the
        seconds the processes took to be ready, and ``start_steps_s``, per
        process, the seconds its start's steps took (``periodic tasks``:
        Nova's manager's, the driver's among them; ``instance info``: the
        computes' first sync of what they run).  ``timeout`` bounds
        both the start and the run.
        ``profile``: each process runs its calls under cProfile and the
        result's ``profiles`` names the files of their stats."""
        run = os.path.join(self.directory, "run-%s" % uuid.uuid4().hex[:8])
        os.mkdir(run)
        go = os.path.join(run, "go")
        shares = [
            requests // processes + (i < requests % processes)
            for i in range(processes)
        ]
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
                    "--processes=%d" % processes,
                    *(["--profile"] if profile else []),
                )
            )
            for i, share in enumerate(shares)
        ]
        spawned = time.monotonic()
        try:
            ready = [
                os.path.join(run, "%d.ready" % i) for i in range(processes)
            ]
            # NOTE: a process is ready once its driver has read the cloud
            # (grant_scheduler registers every node in its books at its
            # first start): it takes minutes at 10,000 nodes.
            deadline = spawned + timeout
            while not all(os.path.exists(r) for r in ready):
                if any(p.poll() not in (None, 0) for p in procs):
                    raise AssertionError("a scheduler process failed to start")
                if time.monotonic() > deadline:
                    raise AssertionError("scheduler processes not ready")
                time.sleep(0.1)
            placement_cpu = self.placement_cpu()
            database_cpu = self.database_cpu()
            started = time.monotonic()
            start = started - spawned
            open(go, "w").close()
            for proc in procs:
                proc.wait(timeout=timeout)
            wall = time.monotonic() - started
            placement_cpu = self.placement_cpu() - placement_cpu
            if database_cpu is not None:
                database_cpu = self.database_cpu() - database_cpu
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        assert all(p.returncode == 0 for p in procs), [
            p.returncode for p in procs
        ]
        result = {
            "start_s": start,
            "wall_s": wall,
            "placement_cpu_s": placement_cpu,
            "database_cpu_s": database_cpu,
            "calls": [],
            "counts": [],
            "cpu": [],
            "profiles": [],
        }
        if profile:
            result["profiles"] = [
                os.path.join(run, "%d.prof" % i) for i in range(processes)
            ]
        for i in range(processes):
            with open(os.path.join(run, "%d.json" % i)) as f:
                done = json.load(f)
            result["calls"].extend(done["calls"])
            result["counts"].append(done["counts"])
            result["cpu"].append(done["cpu"])
            result["run_s"] = max(result.get("run_s", 0.0), done["run_s"])
            # NOTE: time.monotonic() is the system's CLOCK_MONOTONIC, one
            # clock for every process of the machine.
            result["span_s"] = max(
                result.get("span_s", 0.0), done["ended"] - started
            )
            result.setdefault("start_steps_s", []).append(
                done["start_steps_s"]
            )
        return result

    def placement_usage(self):
        """``{provider name: {class id: (used, capacity)}}``."""
        from grant_scheduler_bench import placement_api

        with _engine(self.spec["placement_url"]) as engine:
            with engine.connect() as conn:
                return placement_api.read_usage(conn)

    def service_reports(self):
        """Heartbeats the compute services' rows record so far (the sum of
        their ``report_count``)."""
        import sqlalchemy as sa

        with _engine(self.spec["cell1_url"]) as engine:
            with engine.connect() as conn:
                total = conn.execute(
                    sa.text("SELECT SUM(report_count) FROM services")
                ).scalar()
        return int(total or 0)

    def _execute(self, url, *statements):
        """Run ``statements`` (``(SQL, parameters)``) in one transaction
        on the database at ``url``."""
        import sqlalchemy as sa

        with _engine(url) as engine:
            with engine.begin() as conn:
                for statement, parameters in statements:
                    conn.execute(sa.text(statement), parameters)

    def reset_placement(self):
        """Remove every allocation, and the instances earlier runs placed
        (between two runs on one cloud): each run starts from empty nodes
        in placement and in Nova's cells.  The schedulers' host manager
        compares a host's instances in the cell with what its compute
        says it runs (nothing, in ``schedule``), and the stock weighers
        read the compute nodes' usage, which the computes' claims moved:
        each node moved is written back to an empty node's values, its
        ``updated_at`` touched as Nova's save of the record does."""
        for cell in ("cell0", "cell1"):
            # NOTE(nova): soft-deleted, as Nova deletes an instance.
            self._execute(
                self.spec["%s_url" % cell],
                (
                    "UPDATE instances SET deleted = id, "
                    "deleted_at = UTC_TIMESTAMP() WHERE deleted = 0",
                    {},
                ),
            )
        empty = empty_usage(self.spec["node"])
        self._execute(
            self.spec["cell1_url"],
            (
                "UPDATE compute_nodes SET %s, updated_at = UTC_TIMESTAMP() "
                "WHERE deleted = 0 AND NOT (%s)"
                % (
                    ", ".join("%s = :%s" % (c, c) for c in USAGE_COLUMNS),
                    " AND ".join("%s <=> :%s" % (c, c) for c in USAGE_COLUMNS),
                ),
                empty,
            ),
        )
        self._execute(
            self.spec["placement_url"],
            ("DELETE FROM allocations", {}),
            ("DELETE FROM consumers", {}),
        )


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
                    api_url=spec["api_url"],
                    cell1_url=spec["cell1_url"],
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
    """Nova's databases and records, placement's schema; the seconds each
    took in ``setup.json`` (``Cloud.build_s``)."""
    directory = spec["directory"]
    timings = {}
    started = time.monotonic()
    conf = _nova_conf(spec, "stock")
    _nova_conf(spec, "grants")
    make_databases(
        _run,
        directory,
        spec["placement_url"],
        conf,
        (spec["cell0_url"], spec["cell1_url"]),
        "fake://",
    )
    timings["schemas"] = time.monotonic() - started
    started = time.monotonic()
    _write_records(spec, conf)
    # NOTE: every node is mapped already; as an operator would, to be sure.
    _run("nova-manage", "--config-file", conf, "cell_v2", "discover_hosts")
    timings["nova records"] = time.monotonic() - started
    with open(os.path.join(directory, "setup.json"), "w") as f:
        json.dump(timings, f)


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


def _write_records(spec, conf, batch=1000):
    """A compute service, its compute node and its host mapping for every
    node, as each compute writes its records at its start and ``cell_v2
    discover_hosts`` maps it (the node marked mapped): Nova's own objects,
    ``batch`` nodes a transaction in each database."""
    from nova import context as nova_context
    from nova import objects
    from nova.db.sqlalchemy import api as db_api

    admin, cell = _cell1(conf)
    node = spec["node"]
    names = [node_name(index) for index in range(spec["nodes"])]
    for first in range(0, len(names), batch):
        chunk = names[first : first + batch]
        with nova_context.target_cell(admin, cell) as cctxt:
            with db_api.get_context_manager(cctxt).writer.using(cctxt):
                for name in chunk:
                    service = objects.Service(
                        cctxt,
                        host=name,
                        binary="nova-compute",
                        topic="compute",
                    )
                    service.create()
                    record = compute_node(cctxt, name, node, service.id)
                    record.mapped = 1
                    record.create()
        with db_api.api_context_manager.writer.using(admin):
            for name in chunk:
                objects.HostMapping(
                    admin, host=name, cell_mapping=cell
                ).create()


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


class Phases:
    """CPU seconds of this process by phase: ``with phases("scheduler"):``
    marks the green thread running it as in that phase until the block
    ends, with every green thread it spawns meanwhile, by eventlet
    (Nova's host manager reads each cell's compute nodes on a green
    thread of its own, ``scatter_gather_cells``) or by ``threading``,
    which eventlet patches (the driver reads a request's alternates from
    placement on threads of their own); the process's CPU time is charged, at
    every switch between green threads, to the phase of the one switched
    out (``"other"`` where none is marked: eventlet's hub, the driver's
    own loops, the calls' bookkeeping).  Several callers interleave in
    one OS thread, so a phase's time is what its own green threads spent,
    not the wall time between its start and its end."""

    OTHER = "other"

    def __init__(self):
        import weakref

        self.cpu = {}
        self._phase = weakref.WeakKeyDictionary()
        self._last = None
        self._previous = None
        self._spawned = None
        self._thread_start = None

    def start(self):
        import threading

        import greenlet
        from eventlet import greenthread

        phase = self._phase
        init = greenthread.GreenThread.__init__

        def spawned(thread, *args, **kwargs):
            init(thread, *args, **kwargs)
            parent = phase.get(greenlet.getcurrent())
            if parent is not None:
                phase[thread] = parent

        self._spawned = init
        greenthread.GreenThread.__init__ = spawned
        # NOTE(eventlet): a patched threading.Thread runs on a bare
        # greenlet (spawn_n), which GreenThread.__init__ never sees.
        thread_start = threading.Thread.start

        def start(thread):
            parent = phase.get(greenlet.getcurrent())
            if parent is not None:
                run = thread.run

                def marked():
                    phase[greenlet.getcurrent()] = parent
                    return run()

                thread.run = marked
            return thread_start(thread)

        self._thread_start = thread_start
        threading.Thread.start = start
        self._last = time.process_time()
        self._previous = greenlet.settrace(self._switched)

    def stop(self):
        import threading

        import greenlet
        from eventlet import greenthread

        self._charge(greenlet.getcurrent())
        greenlet.settrace(self._previous)
        greenthread.GreenThread.__init__ = self._spawned
        threading.Thread.start = self._thread_start
        self._last = None

    def current(self):
        """The phase of the running green thread."""
        import greenlet

        return self._phase.get(greenlet.getcurrent(), self.OTHER)

    def _charge(self, which):
        now = time.process_time()
        phase = self._phase.get(which, self.OTHER)
        self.cpu[phase] = self.cpu.get(phase, 0.0) + now - self._last
        self._last = now

    def _switched(self, event, args):
        if event in ("switch", "throw"):
            self._charge(args[0])
        if self._previous is not None:
            self._previous(event, args)

    @contextlib.contextmanager
    def __call__(self, phase):
        import greenlet

        current = greenlet.getcurrent()
        if self._last is not None:
            self._charge(current)
        outer = self._phase.get(current)
        self._phase[current] = phase
        try:
            yield
        finally:
            if self._last is not None:
                self._charge(current)
            if outer is None:
                del self._phase[current]
            else:
                self._phase[current] = outer


def _phase_loops(phases):
    """Each pass of grant_scheduler's own loops (``nova.loop.Loop``)
    charged to a phase of its own, ``loop: WHAT``, rather than to
    ``other``."""
    from grant_scheduler.nova import loop

    tick = loop.Loop._tick

    def marked(self):
        with phases("loop: %s" % self._what):
            return tick(self)

    loop.Loop._tick = marked


class Boot:
    """Nova's records of one boot, written as Nova 22's services write
    them, around the scheduler's answer:

    * ``api``: what ``nova.compute.api.API._provision_instances`` writes
      before casting to the conductor, in one transaction of the API
      database: the request spec, the build request carrying the
      instance (not yet in a cell) and its instance mapping (no cell);
    * ``conductor``: what ``schedule_and_build_instances`` writes once
      the scheduler answered: the instance created in the chosen host's
      cell (found by its host mapping, its availability zone the host's),
      its instance mapping pointed at that cell, the build request
      destroyed; ``bury`` for a NoValidHost (``_bury_in_cell0``): the
      instance created in cell0 in ERROR, mapped there, its build request
      destroyed;
    * ``compute``: what the resource tracker's ``instance_claim`` writes
      on the chosen compute: the instance's host, node and launched_on
      saved, and the compute node's usage moved by the flavour.  A real
      compute reads its node, adds the flavour and saves the node under
      its lock; here several scheduler processes claim on the same node,
      so the usage moves in one UPDATE of the row, relative to what it
      holds, and no claim is lost.

    Not written: the instance action, the block device mappings and the
    tags the conductor writes, and everything the compute writes while
    it builds (Nova's notifications are off, ``noop``).
    """

    def __init__(self, context, flavor):
        """
        :param context: the user's context (Nova's API passes it on to
            the conductor, and the conductor to the compute).
        :param flavor: the ``objects.Flavor`` of every boot.
        """
        from nova import objects

        self.context = context
        self.flavor = flavor
        self.cell0 = objects.CellMapping.get_by_uuid(
            context, objects.CellMapping.CELL0_UUID
        )

    def _instance(self, instance_uuid):
        """The instance the API builds (``_validate_and_build_base_options``
        and ``_populate_instance_for_create``), not yet created."""
        from nova import objects
        from nova.network import model as network_model

        flavor = self.flavor
        image_ref = str(uuid.uuid4())
        return objects.Instance(
            self.context,
            uuid=instance_uuid,
            reservation_id="r-%s" % uuid.uuid4().hex[:8],
            image_ref=image_ref,
            kernel_id="",
            ramdisk_id="",
            power_state=0,
            vm_state="building",
            task_state="scheduling",
            config_drive="",
            user_id=self.context.user_id,
            project_id=self.context.project_id,
            memory_mb=flavor.memory_mb,
            vcpus=flavor.vcpus,
            root_gb=flavor.root_gb,
            ephemeral_gb=flavor.ephemeral_gb,
            display_name="server-%s" % instance_uuid[:8],
            hostname="server-%s" % instance_uuid[:8],
            display_description=None,
            user_data=None,
            key_name=None,
            key_data=None,
            locked=False,
            metadata={},
            access_ip_v4=None,
            access_ip_v6=None,
            availability_zone=None,
            root_device_name=None,
            progress=0,
            pci_requests=objects.InstancePCIRequests(requests=[]),
            numa_topology=None,
            system_metadata={
                "image_base_image_ref": image_ref,
                "image_min_disk": str(flavor.root_gb),
                "image_min_ram": "0",
                "owner_project_name": self.context.project_id,
                "owner_user_name": self.context.user_id,
            },
            keypairs=objects.KeyPairList(objects=[]),
            trusted_certs=None,
            launch_index=0,
            info_cache=objects.InstanceInfoCache(
                instance_uuid=instance_uuid,
                network_info=network_model.NetworkInfo(),
            ),
            flavor=flavor,
            old_flavor=None,
            new_flavor=None,
            ephemeral_key_uuid=None,
            security_groups=objects.SecurityGroupList(),
            shutdown_terminate=False,
        )

    def api(self, spec_obj):
        """The request spec ``spec_obj`` created with its build request
        and instance mapping; returns the build request."""
        from nova import objects
        from nova.db.sqlalchemy import api as db_api

        # NOTE(nova): the API's request spec is made with its context
        # (``RequestSpec.from_components``).
        spec_obj._context = self.context
        instance = self._instance(spec_obj.instance_uuid)
        build_request = objects.BuildRequest(
            self.context,
            instance=instance,
            instance_uuid=instance.uuid,
            project_id=instance.project_id,
            block_device_mappings=objects.BlockDeviceMappingList(objects=[]),
            tags=objects.TagList(),
        )
        mapping = objects.InstanceMapping(
            self.context,
            instance_uuid=instance.uuid,
            project_id=self.context.project_id,
            user_id=self.context.user_id,
            cell_mapping=None,
        )

        @db_api.api_context_manager.writer
        def create(context):
            spec_obj.create()
            build_request.create()
            mapping.create()

        create(self.context)
        return build_request

    def _create(self, instance, cell):
        from nova import context as nova_context

        with nova_context.target_cell(self.context, cell) as cctxt:
            with instance.obj_alternate_context(cctxt):
                instance.create()

    def _map(self, instance, cell, build_request):
        from nova import objects

        mapping = objects.InstanceMapping.get_by_instance_uuid(
            self.context, instance.uuid
        )
        mapping.cell_mapping = cell
        mapping.save()
        build_request.destroy()

    def conductor(self, build_request, selection):
        """The instance created where ``selection`` (the scheduler's
        first ``Selection``) is; returns ``(instance, its cell)``."""
        from nova import availability_zones
        from nova import objects

        instance = build_request.get_new_instance(self.context)
        host = selection.service_host
        cell = objects.HostMapping.get_by_host(self.context, host).cell_mapping
        instance.availability_zone = (
            availability_zones.get_host_availability_zone(self.context, host)
        )
        self._create(instance, cell)
        self._map(instance, cell, build_request)
        return instance, cell

    def bury(self, build_request):
        """No host: the instance in cell0, in ERROR."""
        instance = build_request.get_new_instance(self.context)
        instance.vm_state = "error"
        instance.task_state = None
        self._create(instance, self.cell0)
        self._map(instance, self.cell0, build_request)

    def compute(self, instance, cell, selection):
        """The resource tracker's claim on the chosen node."""
        from nova import context as nova_context
        from nova.db.sqlalchemy import api as db_api
        from nova.db.sqlalchemy import models
        from oslo_utils import timeutils

        flavor = instance.flavor
        memory = flavor.memory_mb
        disk = flavor.root_gb + flavor.ephemeral_gb + flavor.swap / 1024
        node = models.ComputeNode
        with nova_context.target_cell(self.context, cell) as cctxt:
            with instance.obj_alternate_context(cctxt):
                instance.host = selection.service_host
                instance.launched_on = selection.service_host
                instance.node = selection.nodename
                instance.save()
            with db_api.get_context_manager(cctxt).writer.using(
                cctxt
            ) as session:
                session.query(node).filter_by(
                    uuid=selection.compute_node_uuid, deleted=0
                ).update(
                    {
                        node.vcpus_used: node.vcpus_used + flavor.vcpus,
                        node.memory_mb_used: node.memory_mb_used + memory,
                        node.local_gb_used: node.local_gb_used + disk,
                        node.free_ram_mb: node.free_ram_mb - memory,
                        node.free_disk_gb: node.free_disk_gb - disk,
                        node.disk_available_least: (
                            node.disk_available_least - disk
                        ),
                        node.running_vms: node.running_vms + 1,
                        node.updated_at: timeutils.utcnow(),
                    },
                    synchronize_session=False,
                )


class _Counts:
    """SQL statements by database and phase (``Phases``), and placement's
    HTTP requests by phase, made in this process while counting is on."""

    def __init__(self, databases, phase):
        """
        :param databases: ``{database name: label}``; statements on any
            other are not counted.
        :param phase: ``f()`` giving the running green thread's phase.
        """
        import sqlalchemy as sa
        from keystoneauth1 import session

        self.on = False
        self._databases = databases
        self._phase = phase
        self.statements = {}
        self.http = {}
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", self._sql)
        request = session.Session.request
        counts = self

        def counted(self, *args, **kwargs):
            if counts.on:
                phase = counts._phase()
                counts.http[phase] = counts.http.get(phase, 0) + 1
            return request(self, *args, **kwargs)

        session.Session.request = counted

    def _sql(self, conn, *args):
        if not self.on:
            return
        label = self._databases.get(conn.engine.url.database)
        if label is not None:
            phases = self.statements.setdefault(label, {})
            phase = self._phase()
            phases[phase] = phases.get(phase, 0) + 1

    def as_dict(self):
        """``{"statements": {label: {phase: n}}, "http": {phase: n}}``."""
        return {"statements": self.statements, "http": self.http}


@contextlib.contextmanager
def _timed(steps, name):
    """``steps[name]``: the milliseconds (wall clock) the block took."""
    started = time.monotonic()
    try:
        yield
    finally:
        steps[name] = (time.monotonic() - started) * 1000


def _database_name(url):
    import sqlalchemy as sa

    return sa.engine.url.make_url(url).database


class Fanout:
    """The compute's instance information cast to every scheduler process
    of a run, as Nova's fanout cast of ``update_instance_info`` reaches
    every scheduler worker.

    Each process listens on a socket of the run's directory; a cast is a
    frame (its length, then JSON) sent on one connection to each other
    process, and a last frame says a process sent its last.  Frames of
    one connection arrive in order, so once every other process has
    said so, every cast it sent has been handed to ``deliver``.
    """

    _LENGTH = struct.Struct(">I")

    def __init__(self, run, index, processes, deliver):
        """
        :param run: the run's directory.
        :param index: this process's number, of ``processes``.
        :param deliver: ``f(host, primitive)``, for each cast received
            (the InstanceList's primitive, as oslo.messaging carries it).
        """
        import eventlet

        self._run = run
        self._deliver = deliver
        self.others = [i for i in range(processes) if i != index]
        self._connections = {}
        self._said_done = eventlet.semaphore.Semaphore(0)
        self._server = None
        self._lost = []
        if self.others:
            self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._server.bind(self._path(index))
            self._server.listen(len(self.others))
            eventlet.spawn(self._accept)

    def _accept(self):
        import eventlet

        for _ in self.others:
            eventlet.spawn(self._receive, self._server.accept()[0])

    def _path(self, index):
        return os.path.join(self._run, "casts-%d.sock" % index)

    def _receive(self, connection):
        frames = connection.makefile("rb")
        while True:
            head = frames.read(self._LENGTH.size)
            if len(head) < self._LENGTH.size:
                self._lost.append(connection)
                self._said_done.release()
                return
            (length,) = self._LENGTH.unpack(head)
            frame = json.loads(frames.read(length))
            if frame.get("done"):
                self._said_done.release()
                return
            self._deliver(frame["host"], frame["instance"])

    def _send(self, frame):
        import eventlet

        data = json.dumps(frame).encode()
        data = self._LENGTH.pack(len(data)) + data
        for index in self.others:
            entry = self._connections.get(index)
            if entry is None:
                connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                connection.connect(self._path(index))
                entry = (connection, eventlet.semaphore.Semaphore())
                self._connections[index] = entry
            connection, lock = entry
            with lock:
                connection.sendall(data)

    def send(self, host, primitive):
        """Cast ``primitive`` (an InstanceList's) of ``host`` to every
        other process."""
        self._send({"host": host, "instance": primitive})

    def finish(self, timeout):
        """Say this process sent its last, and wait until every other
        process has said so."""
        if not self.others:
            return
        self._send({"done": True})
        deadline = time.monotonic() + timeout
        for _ in self.others:
            left = deadline - time.monotonic()
            if left <= 0 or not self._said_done.acquire(timeout=left):
                raise AssertionError("scheduler processes never finished")
        if self._lost:
            raise AssertionError("a scheduler process left unannounced")


def schedule(
    spec, system, run, index, count, callers, profile=False, processes=1
):
    """One scheduler process of ``processes``: see the module's docstring.

    Each boot runs as Nova's services run it, in this process: the API's
    records (``Boot.api``), ``select_destinations`` as Nova's RPC server
    calls it for the conductor, the conductor's records, the compute's
    claim (``Boot.compute``; for grant_scheduler with ``VIRT_DRIVER``,
    the claim that consumes the grant in its books), and then the
    compute's instance information (``update_instance_info``), cast (the
    boot does not wait for it) to this process's scheduler manager and,
    as Nova's fanout cast does, to every other scheduler process of the
    run (``Fanout``), from which grant_scheduler's host manager claims
    the instance: the process that granted it consumes its grant, the
    others look a ``consume_interval`` later whether it is claimed.  The
    process ends once every other process has said it sent its last
    boot's, and every cast it was sent is handled.
    """
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
    phases = Phases()
    # NOTE: placement's database is read for the NoValidHost check alone,
    # which the schedulers never do: its statements are not counted.
    databases = {_database_name(spec["gs_url"]): "gs"}
    for name in NOVA_DATABASES:
        databases[_database_name(spec["%s_url" % name])] = "nova"
    counts = _Counts(databases, phases.current)
    if system == "grants":
        _phase_loops(phases)
    manager = scheduler_manager.SchedulerManager()
    admin = nova_context.get_admin_context()
    started = time.monotonic()
    # Nova's service runs the manager's periodic tasks at start.
    manager.periodic_tasks(admin)
    start_steps = {"periodic tasks": time.monotonic() - started}
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

    started = time.monotonic()
    while not synced():
        for number in range(spec["nodes"]):
            manager.sync_instance_info(admin, node_name(number), [])
        time.sleep(0.1)
    start_steps["instance info"] = time.monotonic() - started
    amount = api.Resources.of(flavor_amount(spec["flavor"]))
    placement_room = placement_api.RoomCheck(spec["placement_url"])
    user = nova_context.RequestContext(
        user_id="user", project_id="project", is_admin=False
    )
    boot = Boot(user, _flavor(spec))

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

    calls = []
    # oslo.messaging's executor_thread_pool_size, by default.
    casts = eventlet.GreenPool(64)

    def told_by_another(host, primitive):
        """Another process's boot's instance information, as Nova's RPC
        server gets it: deserialised, then handed to the manager."""
        try:
            with phases("records: instance info"):
                manager.update_instance_info(
                    admin,
                    host,
                    objects.InstanceList.obj_from_primitive(primitive),
                )
        except Exception as exc:  # noqa: BLE001 - reported to the caller
            calls.append({"error": repr(exc)})

    fanout = Fanout(
        run,
        int(index),
        processes,
        lambda host, primitive: casts.spawn(told_by_another, host, primitive),
    )
    open(os.path.join(run, "%s.ready" % index), "w").close()
    while not os.path.exists(os.path.join(run, "go")):
        time.sleep(0.01)

    def one(number):
        instance_uuid = _instance_uuid(run, index, number)
        spec_obj = request_spec(_flavor(spec), instance_uuid)
        steps = {}
        with phases("records"), _timed(steps, "api"):
            build_request = boot.api(spec_obj)
        started = time.monotonic()
        try:
            with phases("scheduler"):
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
            with phases("records"), _timed(steps, "conductor"):
                boot.bury(build_request)
            calls.append({"ms": ms, "nvh": True, "room": sorted(room(amount))})
            return
        ms = (time.monotonic() - started) * 1000
        chosen = answer[0][0]
        with phases("records"):
            with _timed(steps, "conductor"):
                instance, cell = boot.conductor(build_request, chosen)
            with _timed(steps, "compute"):
                boot.compute(instance, cell, chosen)
            if system == "grants" and spec["compute_claim"] == VIRT_DRIVER:
                with phases("records: claim"), _timed(steps, "claim"):
                    nova_claims.claim(
                        manager.driver.grant_scheduler,
                        instance_uuid,
                        chosen.service_host,
                        chosen.nodename,
                        lambda: amount,
                    )
        # NOTE(nova): the compute casts its instance information and goes
        # on; the boot waits no longer.  Its time is in rec_steps_ms.
        casts.spawn(told, chosen.service_host, instance, steps)
        if fanout.others:
            casts.spawn(fanned, chosen.service_host, instance)
        calls.append(
            {
                "instance": instance_uuid,
                "ms": ms,
                "rec_ms": sum(steps.values()),
                "rec_steps_ms": steps,
                "host": chosen.service_host,
                "node": chosen.nodename,
            }
        )

    def told(host, instance, steps):
        """The compute's instance information, cast to the scheduler:
        Nova's RPC server runs it on a green thread of its own
        (oslo.messaging's eventlet executor), beside the requests."""
        try:
            with (
                phases("records: instance info"),
                _timed(steps, "instance info"),
            ):
                manager.update_instance_info(
                    admin, host, objects.InstanceList(objects=[instance])
                )
        except Exception as exc:  # noqa: BLE001 - reported to the caller
            calls.append({"error": repr(exc)})

    def fanned(host, instance):
        """The same cast to every other scheduler process: serialised
        once, as oslo.messaging serialises a cast (the compute's work,
        charged to the records)."""
        try:
            with phases("records"):
                fanout.send(
                    host,
                    objects.InstanceList(
                        objects=[instance]
                    ).obj_to_primitive(),
                )
        except Exception as exc:  # noqa: BLE001 - reported to the caller
            calls.append({"error": repr(exc)})

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
    phases.start()
    began = time.monotonic()
    for number in range(count):
        pool.spawn(recorded, number)
    pool.waitall()
    casts.waitall()
    # NOTE: every cast to the others is sent by now; once each of them has
    # said so too, every cast this process was sent is spawned.
    fanout.finish(timeout=600)
    casts.waitall()
    ran = time.monotonic() - began
    phases.stop()
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
                "counts": counts.as_dict(),
                "cpu": phases.cpu,
                "run_s": ran,
                "ended": began + ran,
                "start_steps_s": start_steps,
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
    elif argv[1] == "schedule":
        system, run, index, count, callers = argv[3:8]
        flags = argv[8:]
        processes = [f for f in flags if f.startswith("--processes=")]
        schedule(
            spec,
            system,
            run,
            index,
            int(count),
            int(callers),
            profile="--profile" in flags,
            processes=int(processes[-1].split("=", 1)[1]) if processes else 1,
        )
    else:
        raise SystemExit("usage: setup|schedule SPEC ...")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
