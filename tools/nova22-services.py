#!/usr/bin/env python3
"""Nova 22's real services with grant_scheduler and with the stock
scheduler, side by side, under bursts of boots and deletes and faults.

Run on the host as root (``tools/nova22-services.sh``; the standard
library only): it starts, in the bullseye root of tools/nova22-root.sh,

* Debian's placement (``tests/nova22/placement_wsgi.py``, 2 workers);
* Nova's API (``nova.cmd.api``: osapi_compute, noauth2), one conductor
  and COMPUTES compute services (fake virt driver, NODES_PER_COMPUTE
  nodes each, two servers of the test flavour fill a node), all over
  RabbitMQ (127.0.0.1:5672, a vhost of its own), Nova's databases on the
  MariaDB of 127.0.0.1:3306 (``gs_services_*``);
* two ``nova-scheduler`` services, each the binary's own
  ``nova.cmd.scheduler.main()`` (oslo.service forking ``[scheduler]
  workers = 2``), with ``[scheduler] driver = filter_scheduler`` and then
  ``grant_scheduler`` (its database on a private mariadbd of its own, on
  another port, under /tmp);

and, for each scheduler, drives BURSTS bursts of BURST boots from
CLIENTS clients through Nova's REST API, deleting servers between them,
with one fault in each of the first three: a scheduler worker SIGKILLed
while requests are in flight, grant_scheduler's MariaDB restarted,
RabbitMQ restarted.  After each burst every server must be ACTIVE or in
ERROR with NoValidHost while the cloud was full, nothing may stay in
BUILD, no node may be over capacity in Nova's records or placement; at
the end, after one reconciliation interval, grant_scheduler's books must
equal placement's usage and what Nova runs on each node, and both
scheduler services must still run both workers.  Writes
doc/source/admin/nova22-services.json and prints a table; exits 1 on a
failed check.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(SRC, ".services-run")
IN_ROOT = "/src/.services-run"
SPEC = IN_ROOT + "/spec.json"
PREFIX = "gs_services_"
VHOST = "gs_services"
IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"  # GlanceFixture's image1
FLAVOR = "gs1"
SLOTS_PER_NODE = 2
# Nova's own [grant_scheduler] reconcile_interval default; read, never set.
RECONCILE_INTERVAL = 60
# Failures spelled out at the end of the output.
SHOWN_FAILURES = 8
# Nova 22's default log levels, and its placement client's debug lines in
# the schedulers (``DOUBLED_UP``).
SCHEDULER_LOG_LEVELS = ",".join(
    [
        "amqp=WARN",
        "amqplib=WARN",
        "boto=WARN",
        "qpid=WARN",
        "sqlalchemy=WARN",
        "suds=INFO",
        "oslo.messaging=INFO",
        "oslo_messaging=INFO",
        "iso8601=WARN",
        "requests.packages.urllib3.connectionpool=WARN",
        "urllib3.connectionpool=WARN",
        "websocket=WARN",
        "requests.packages.urllib3.util.retry=WARN",
        "urllib3.util.retry=WARN",
        "keystonemiddleware=WARN",
        "routes.middleware=WARN",
        "stevedore=WARN",
        "taskflow=WARN",
        "keystoneauth=WARN",
        "oslo.cache=INFO",
        "oslo_policy=INFO",
        "dogpile.core.dogpile=INFO",
        "glanceclient=WARN",
        "oslo.privsep.daemon=INFO",
        "nova.scheduler.client.report=DEBUG",
    ]
)


def log(msg, *args):
    sys.stderr.write(
        "[nova22-services %s] %s\n" % (time.strftime("%H:%M:%S"), msg % args)
    )
    sys.stderr.flush()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def root_cmd(*args):
    return ["bash", os.path.join(SRC, "tools/nova22-run.sh")] + list(args)


def in_root(*args, check=True, capture=False):
    with open(os.path.join(RUN, "logs", "commands.out"), "ab") as err:
        proc = subprocess.run(
            root_cmd("python3", "-W", "ignore", "-m", "tests.nova22.services")
            + list(args),
            stdout=subprocess.PIPE if capture else err,
            stderr=err,
            check=check,
        )
    return proc.stdout.decode() if capture else proc.returncode


def mysql(sql, port=3306):
    subprocess.run(
        ["mysql", "--protocol=tcp", "-h127.0.0.1", "-P%d" % port, "-uroot"],
        input=sql.encode(),
        check=True,
    )


# -- processes --------------------------------------------------------------


class Proc:
    """A process group of our own, stopped by its id only."""

    def __init__(self, name, argv, env=None):
        self.name = name
        self.log_path = os.path.join(RUN, "logs", "%s.out" % name)
        self.log = open(self.log_path, "ab")
        self.popen = subprocess.Popen(
            argv,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )

    def alive(self):
        return self.popen.poll() is None

    def terminate(self):
        if self.alive():
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, timeout=20):
        if self.alive():
            self.terminate()
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.popen.wait()
        self.log.close()


def _proc_table():
    table = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read()
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = (
                    f.read().replace(b"\0", b" ").decode(errors="replace")
                )
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        table[int(pid)] = (ppid, cmdline)
    return table


def descendants(pid, table=None):
    table = table or _proc_table()
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for child, (ppid, _) in table.items():
            if ppid == parent:
                found.append(child)
                todo.append(child)
    return found


def scheduler_processes(proc):
    """``(parent, [workers])`` of one nova-scheduler service: the python
    of the service and its forked children."""
    table = _proc_table()
    pythons = [
        p
        for p in descendants(proc.popen.pid, table)
        if "tests.nova22.services serve " in table[p][1]
        and " scheduler -- " in table[p][1]
    ]
    parents = [p for p in pythons if table[p][0] not in pythons]
    if len(parents) != 1:
        return None, []
    parent = parents[0]
    return parent, sorted(p for p in pythons if table[p][0] == parent)


class PrivateMariaDB:
    """grant_scheduler's own mariadbd, on a port and datadir of its own."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gs-services-mariadb-")
        self.port = free_port()
        self.proc = None
        shutil.chown(self.dir, "mysql", "mysql")
        subprocess.run(
            [
                "mariadb-install-db",
                "--user=mysql",
                "--datadir=%s/data" % self.dir,
                "--auth-root-authentication-method=normal",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )

    def start(self):
        log_file = open(os.path.join(RUN, "logs", "gs-mariadb.out"), "ab")
        self.proc = subprocess.Popen(
            [
                "/usr/sbin/mariadbd",
                "--no-defaults",
                "--user=mysql",
                "--datadir=%s/data" % self.dir,
                "--socket=%s/mysqld.sock" % self.dir,
                "--pid-file=%s/mysqld.pid" % self.dir,
                "--bind-address=127.0.0.1",
                "--port=%d" % self.port,
                "--log-error=%s/error.log" % self.dir,
                "--skip-log-bin",
                "--innodb-buffer-pool-size=64M",
                "--innodb-flush-log-at-trx-commit=2",
                "--max-connections=500",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            ok = subprocess.run(
                [
                    "mysql",
                    "--protocol=tcp",
                    "-h127.0.0.1",
                    "-P%d" % self.port,
                    "-uroot",
                    "-e",
                    "SELECT 1",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if ok.returncode == 0:
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("private mariadbd did not start")
            time.sleep(0.2)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)

    def restart(self, down_s=3):
        self.stop()
        time.sleep(down_s)
        self.start()

    def remove(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def rabbitmqctl(*args, check=True):
    return subprocess.run(
        ["rabbitmqctl", "-q"] + list(args),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=check,
    )


def restart_rabbitmq(down_s=3):
    rabbitmqctl("stop_app")
    time.sleep(down_s)
    rabbitmqctl("start_app")
    rabbitmqctl("await_startup", check=False)


# -- Nova's REST API -------------------------------------------------------


class Api:
    def __init__(self, port):
        self.base = "http://127.0.0.1:%d/v2.1" % port

    def request(self, method, path, body=None, timeout=120):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={
                "X-Auth-Token": "admin:admin",
                "X-OpenStack-Nova-API-Version": "2.79",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw)
            except ValueError:
                return exc.code, raw.decode(errors="replace")

    def servers(self):
        status, body = self.request(
            "GET", "/servers/detail?all_tenants=1&limit=1000"
        )
        if status != 200:
            raise RuntimeError("GET /servers/detail: %s %s" % (status, body))
        return {s["id"]: s for s in body["servers"]}

    def services(self):
        status, body = self.request("GET", "/os-services")
        return body["services"] if status == 200 else []


def iso_to_epoch(text):
    import datetime

    text = text.replace("Z", "")
    if "." not in text:
        text += ".0"
    return (
        datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f")
        .replace(tzinfo=datetime.timezone.utc)
        .timestamp()
    )


def percentile(ordered, p):
    """The ``p`` quantile of a sorted list (nearest rank), or None."""
    if not ordered:
        return None
    if p == 0.5:
        return round(statistics.median(ordered), 2)
    return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 2)


# Nova's placement client, claiming for a consumer that already holds
# allocations (no move runs here: a request claimed twice).
DOUBLED_UP = "Doubling-up allocation_request"


def _log_lines(prefix=""):
    """The lines of the run's service logs whose file name starts with
    ``prefix``."""
    logs = os.path.join(RUN, "logs")
    for name in sorted(os.listdir(logs)):
        if name.endswith(".log") and name.startswith(prefix):
            with open(os.path.join(logs, name), errors="replace") as f:
                yield from f


def log_evidence(scheduler):
    """What the scheduler services' logs say about the faults: the
    driver's outage warnings, RPC requests dropped at the broker restart,
    workers their launchers saw die, grants of the killed worker another
    one withdrew, claims Nova's placement client doubled up; and the
    replies the conductor had no call waiting for (a request answered
    twice, or after its call gave up)."""
    counts = {
        "gs_database_failed": "grant_scheduler's database failed",
        "gs_database_back": "grant_scheduler's database is back",
        "rpc_discarded": "Discarding RPC request",
        "worker_killed": "killed by signal 9",
        "ended_workers_grants_withdrawn": (
            "has ended before it claimed in placement"
        ),
        "claims_doubled_up": DOUBLED_UP,
    }
    found = dict.fromkeys(counts, 0)
    for line in _log_lines("sched-%s-" % scheduler):
        for key, text in counts.items():
            if text in line:
                found[key] += 1
    found["replies_to_no_caller"] = sum(
        "No calling threads waiting for msg_id" in line
        for line in _log_lines("conductor.")
    )
    return found


_REQUEST = re.compile(r"\[(req-[0-9a-f-]+) ")
_INSTANCE = re.compile(r"\[instance: ([0-9a-f-]{36})\]")


def delivered_twice():
    """The servers whose request Nova handled twice: RPC messages are
    delivered at least once, and after RabbitMQ's restart a message whose
    acknowledgement the broker lost comes again (durable queues keep it),
    to the conductor (its second bury in cell0: "already mapped to cell")
    or to a scheduler (Nova's placement client then doubles the claim up
    with the first one's: ``DOUBLED_UP``).  Nova's own outcome, whatever
    the driver; the request of a log line found by its request id where
    no instance is named."""
    instances, doubled = set(), set()
    of_request = {}
    for line in _log_lines():
        request = _REQUEST.search(line)
        instance = _INSTANCE.search(line)
        if request and instance:
            of_request[request.group(1)] = instance.group(1)
        if "already mapped to cell" in line and instance:
            instances.add(instance.group(1))
        if DOUBLED_UP in line and request:
            doubled.add(request.group(1))
    return instances | {of_request[r] for r in doubled if r in of_request}


def placement_claims(since, until):
    """Placement's answers to claims (``PUT /allocations/...``) logged
    between two ``YYYY-mm-dd HH:MM:SS`` times: ``{"ok", "conflict"}``; a
    conflict is a claim placement refused (the node filled meanwhile, or
    its generation moved), after which Nova's scheduler tries the next
    host."""
    found = {"ok": 0, "conflict": 0}
    try:
        with open(os.path.join(RUN, "placement.log"), errors="replace") as f:
            for line in f:
                if '"PUT /allocations/' not in line:
                    continue
                if not since <= line[:19] <= until:
                    continue
                found["conflict" if "status: 409" in line else "ok"] += 1
    except OSError:
        pass
    return found


def now_stamp():
    return time.strftime("%Y-%m-%d %H:%M:%S")


# -- the cloud ---------------------------------------------------------------


class Cloud:
    def __init__(self, args):
        self.args = args
        self.procs = {}
        self.schedulers = []
        self.gs_db = None
        self.checks = 0  # the checks made, each kept in the run's logs

    def nodes(self):
        return [
            "cmp%d-n%02d" % (c, n)
            for c in range(1, self.args.computes + 1)
            for n in range(1, self.args.nodes_per_compute + 1)
        ]

    def capacity(self):
        return SLOTS_PER_NODE * len(self.nodes())

    def setup(self):
        if os.path.isdir(RUN):
            shutil.rmtree(RUN)
        os.makedirs(os.path.join(RUN, "logs"))
        rabbitmqctl("delete_vhost", VHOST, check=False)
        rabbitmqctl("add_vhost", VHOST)
        rabbitmqctl("set_permissions", "-p", VHOST, "guest", ".*", ".*", ".*")
        mysql(
            "".join(
                "DROP DATABASE IF EXISTS %s%s; CREATE DATABASE %s%s;"
                % (PREFIX, name, PREFIX, name)
                for name in ("api", "cell0", "cell1", "placement")
            )
        )
        self.gs_db = PrivateMariaDB()
        self.gs_db.start()
        mysql("CREATE DATABASE grant_scheduler;", port=self.gs_db.port)
        self.spec = {
            "directory": IN_ROOT,
            "prefix": PREFIX,
            "nova_url": "mysql+pymysql://root@127.0.0.1:3306/",
            "gs_url": "mysql+pymysql://root@127.0.0.1:%d/grant_scheduler"
            % self.gs_db.port,
            "transport_url": "rabbit://guest:guest@127.0.0.1:5672/%s" % VHOST,
            "durable_queues": self.args.durable_queues,
            "api_port": free_port(),
            "placement_port": free_port(),
        }
        with open(os.path.join(RUN, "spec.json"), "w") as f:
            json.dump(self.spec, f)
        started = time.monotonic()
        in_root("setup", SPEC)
        log("databases made in %.0f s", time.monotonic() - started)
        self.api = Api(self.spec["api_port"])

    def conf_args(self, scheduler, role, extra=None):
        args = ["--config-file", "%s/nova-%s.conf" % (IN_ROOT, scheduler)]
        if extra:
            path = os.path.join(RUN, "%s.conf" % role)
            with open(path, "w") as f:
                f.write(extra)
            args += ["--config-file", "%s/%s.conf" % (IN_ROOT, role)]
        return args + ["--log-file", "%s/logs/%s.log" % (IN_ROOT, role)]

    def serve(self, role, name, args, nodes=""):
        argv = root_cmd(
            "python3",
            "-W",
            "ignore",
            "-m",
            "tests.nova22.services",
            "serve",
            SPEC,
            role,
            *([nodes] if nodes else []),
            "--",
            *args,
        )
        self.procs[name] = Proc(name, argv)
        return self.procs[name]

    def start(self):
        started = time.monotonic()
        self.procs["placement"] = Proc(
            "placement",
            root_cmd(
                "env",
                "OS_PLACEMENT_CONFIG_DIR=%s" % IN_ROOT,
                "python3",
                "-W",
                "ignore",
                "-m",
                "tests.nova22.placement_wsgi",
                str(self.spec["placement_port"]),
                "2",
            ),
        )
        self.serve(
            "conductor", "conductor", self.conf_args("grants", "conductor")
        )
        self.serve("api", "api", self.conf_args("grants", "api"))
        for c in range(1, self.args.computes + 1):
            host = "cmp%d" % c
            nodes = [n for n in self.nodes() if n.startswith(host + "-")]
            self.serve(
                "compute",
                host,
                self.conf_args(
                    "grants", host, "[DEFAULT]\nhost = %s\n" % host
                ),
                nodes=",".join(nodes),
            )
        self.wait("the API", self._api_up, 180)
        self.wait("every node in placement", self._nodes_reported, 300)
        in_root("manage", SPEC, "cell_v2", "discover_hosts")
        status, body = self.api.request(
            "POST",
            "/flavors",
            {
                "flavor": {
                    "name": FLAVOR,
                    "id": FLAVOR,
                    "vcpus": 1,
                    "ram": 256,
                    "disk": 1,
                }
            },
        )
        assert status == 200, (status, body)
        log("cloud up in %.0f s", time.monotonic() - started)

    def _api_up(self):
        try:
            return self.api.request("GET", "/flavors", timeout=5)[0] == 200
        except OSError:
            return False

    def _nodes_reported(self):
        req = urllib.request.Request(
            "http://127.0.0.1:%d/resource_providers"
            % self.spec["placement_port"],
            headers={
                "X-Auth-Token": "admin",
                "OpenStack-API-Version": "placement 1.14",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                rps = json.loads(resp.read())["resource_providers"]
        except OSError:
            return False
        return {r["name"] for r in rps} >= set(self.nodes())

    def wait(self, what, predicate, timeout):
        deadline = time.monotonic() + timeout
        while not predicate():
            for proc in self.procs.values():
                if not proc.alive():
                    raise RuntimeError(
                        "%s exited (see %s)" % (proc.name, proc.log_path)
                    )
            if time.monotonic() > deadline:
                raise RuntimeError("timed out waiting for %s" % what)
            time.sleep(0.5)

    def start_schedulers(self, scheduler):
        names = []
        for n in (1, 2):
            name = "sched-%s-%d" % (scheduler, n)
            self.serve(
                "scheduler",
                name,
                self.conf_args(
                    scheduler,
                    name,
                    "[DEFAULT]\nhost = %s\ndefault_log_levels = %s\n"
                    % (name, SCHEDULER_LOG_LEVELS),
                ),
            )
            names.append(name)
        self.schedulers = [self.procs[n] for n in names]

        def up():
            services = {
                s["host"]: s
                for s in self.api.services()
                if s["binary"] == "nova-scheduler"
            }
            if not all(
                services.get(n, {}).get("state") == "up" for n in names
            ):
                return False
            return all(
                len(scheduler_processes(p)[1]) == 2 for p in self.schedulers
            )

        self.wait("the %s schedulers" % scheduler, up, 180)
        # Each worker starts its RPC server after writing its record.
        time.sleep(3)

    def stop_schedulers(self):
        for proc in self.schedulers:
            proc.terminate()
        for proc in self.schedulers:
            proc.stop()
            del self.procs[proc.name]
        self.schedulers = []

    def check(self, scheduler):
        out = in_root("check", SPEC, scheduler, capture=True)
        state = json.loads(out.strip().splitlines()[-1])
        self.checks += 1
        path = os.path.join(
            RUN, "logs", "check-%s-%d.json" % (scheduler, self.checks)
        )
        with open(path, "w") as f:
            json.dump(state, f, indent=1, sort_keys=True)
        return state

    def stop(self):
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            proc.stop()
        if self.gs_db:
            self.gs_db.remove()


# -- the bursts --------------------------------------------------------------


class Run:
    """One scheduler's run: the servers it booted and what became of
    them."""

    def __init__(self, cloud, scheduler):
        self.cloud = cloud
        self.api = cloud.api
        self.scheduler = scheduler
        self.servers = {}  # id -> record
        self.failures = []
        self.faults = []
        self.bursts = []
        self.warm_up = []
        self.held_by_lost = {}
        self.orphan_consumers = []

    def fail(self, msg, *args):
        text = msg % args
        log("FAIL (%s): %s", self.scheduler, text)
        self.failures.append(text)

    def boot_burst(self, index, size, clients, fault=None):
        ids = []
        lock = threading.Lock()
        posted = [0]

        def client(number, share):
            for k in range(share):
                name = "%s-b%d-c%d-%d" % (self.scheduler, index, number, k)
                started = time.time()
                status, body = self.api.request(
                    "POST",
                    "/servers",
                    {
                        "server": {
                            "name": name,
                            "imageRef": IMAGE,
                            "flavorRef": FLAVOR,
                            "networks": "none",
                        }
                    },
                )
                if status != 202:
                    with lock:
                        self.fail(
                            "POST /servers %s: %s %s", name, status, body
                        )
                    continue
                sid = body["server"]["id"]
                with lock:
                    self.servers[sid] = {
                        "id": sid,
                        "burst": index,
                        "posted": started,
                    }
                    ids.append(sid)
                    posted[0] += 1

        shares = [
            size // clients + (i < size % clients) for i in range(clients)
        ]
        threads = [
            threading.Thread(target=client, args=(i, s))
            for i, s in enumerate(shares)
        ]
        started = time.monotonic()
        for t in threads:
            t.start()
        fault_thread = None
        if fault is not None:
            fault_thread = threading.Thread(
                target=self._fault, args=(fault, posted, size)
            )
            fault_thread.start()
        for t in threads:
            t.join()
        self.wait_settled(ids, timeout=self.cloud.args.settle_timeout)
        if fault_thread is not None:
            fault_thread.join()
        wall = time.monotonic() - started
        boot = sorted(
            self.servers[i]["boot_s"]
            for i in ids
            if "boot_s" in self.servers[i]
        )
        self.bursts.append(
            {
                "burst": index,
                "size": size,
                "wall_s": round(wall, 1),
                "active": len(boot),
                "p50_s": percentile(boot, 0.5),
                "p99_s": percentile(boot, 0.99),
            }
        )
        log(
            "%s burst %d: %d boots in %.0f s",
            self.scheduler,
            index,
            size,
            wall,
        )
        return ids

    def _fault(self, kind, posted, size):
        # Wait until a third of the burst is posted: requests in flight.
        deadline = time.monotonic() + 60
        while posted[0] < size // 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        record = {"fault": kind, "at": time.time()}
        try:
            listing = self.api.servers()
            record["scheduling_at_fault"] = sum(
                1
                for s in listing.values()
                if s.get("OS-EXT-STS:task_state") == "scheduling"
            )
        except Exception as exc:  # noqa: BLE001 - recorded
            record["scheduling_at_fault"] = repr(exc)
        if kind == "kill-scheduler-worker":
            proc = self.cloud.schedulers[0]
            parent, workers = scheduler_processes(proc)
            victim = workers[0]
            os.kill(victim, signal.SIGKILL)
            record.update(service=proc.name, parent=parent, killed=victim)
            # oslo.service's launcher forks a new worker in its place.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                _, now = scheduler_processes(proc)
                if len(now) == 2 and victim not in now:
                    record["workers_after"] = now
                    record["respawned_after_s"] = round(
                        time.time() - record["at"], 1
                    )
                    break
                time.sleep(0.2)
            else:
                self.fail(
                    "%s: no worker forked in place of %d", proc.name, victim
                )
        elif kind == "restart-gs-mariadb":
            # Down longer than the driver's own retries last on the
            # defaults (db_max_retries 30, up to 0.5 s apart: about 12 s),
            # so that requests in flight meet the outage itself.
            self.cloud.gs_db.restart(down_s=self.cloud.args.db_down)
        elif kind == "restart-rabbitmq":
            restart_rabbitmq()
        record["done"] = time.time()
        log("%s fault %s: %s", self.scheduler, kind, record)
        self.faults.append(record)

    def wait_settled(self, ids, timeout):
        """Until every server of ``ids`` is ACTIVE or ERROR with no task."""
        pending = set(ids)
        deadline = time.monotonic() + timeout
        while pending:
            try:
                listing = self.api.servers()
            except Exception as exc:  # noqa: BLE001 - the API may be busy
                log("listing failed: %r", exc)
                time.sleep(1)
                continue
            now = time.time()
            for sid in list(pending):
                server = listing.get(sid)
                if server is None:
                    continue
                status = server["status"]
                task = server.get("OS-EXT-STS:task_state")
                record = self.servers[sid]
                if status in ("ACTIVE", "ERROR") and task is None:
                    record["status"] = status
                    record["seen"] = now
                    record["node"] = server.get(
                        "OS-EXT-SRV-ATTR:hypervisor_hostname"
                    )
                    # Boot to ACTIVE: from the POST to launched_at, which
                    # the compute sets with the ACTIVE state (MariaDB keeps
                    # whole seconds: up to 1 s short); seen_s, to this
                    # listing (0.5 s polls: late by up to a poll).
                    launched = server.get("OS-SRV-USG:launched_at")
                    if status == "ACTIVE":
                        record["seen_s"] = now - record["posted"]
                        record["boot_s"] = (
                            iso_to_epoch(launched) - record["posted"]
                            if launched
                            else record["seen_s"]
                        )
                    if status == "ERROR":
                        fault = server.get("fault")
                        if not fault:
                            # The listing leaves out faults of cell0's
                            # servers; the server itself shows it.
                            code, body = self.api.request(
                                "GET", "/servers/%s" % sid
                            )
                            if code == 200:
                                fault = body["server"].get("fault")
                        fault = fault or {}
                        record["fault"] = fault.get("message", "")
                        record["fault_code"] = fault.get("code")
                    pending.discard(sid)
            if not pending:
                return
            if time.monotonic() > deadline:
                for sid in pending:
                    server = listing.get(sid, {})
                    self.servers[sid]["status"] = "STUCK %s/%s" % (
                        server.get("status"),
                        server.get("OS-EXT-STS:task_state"),
                    )
                self.fail(
                    "%d servers not settled after %d s: %s",
                    len(pending),
                    timeout,
                    sorted(pending)[:5],
                )
                return
            time.sleep(0.5)

    def delete(self, ids, timeout=180):
        for sid in ids:
            status, body = self.api.request("DELETE", "/servers/%s" % sid)
            if status == 404 and self.servers[sid].get("delivered_twice"):
                # Nova's API no longer finds a server whose build request
                # its conductor handled twice: nothing of it to delete.
                log("DELETE %s: 404 (its request delivered twice)", sid)
            elif status != 204:
                self.fail("DELETE %s: %s %s", sid, status, body)
            self.servers[sid]["deleted"] = True
        deadline = time.monotonic() + timeout
        pending = set(ids)
        while pending:
            listing = self.api.servers()
            pending &= set(listing)
            if not pending:
                return
            if time.monotonic() > deadline:
                self.fail(
                    "%d servers not deleted after %d s", len(pending), timeout
                )
                return
            time.sleep(0.5)

    # -- judging ---------------------------------------------------------

    def judge_burst(self, ids, state, fault=None):
        """Every server ACTIVE or ERROR: NoValidHost, and only when the
        cloud was full at the burst's end."""
        nvh = [
            sid
            for sid in ids
            if self.servers[sid].get("status") == "ERROR"
            and "No valid host" in self.servers[sid].get("fault", "")
        ]
        # A request the killed worker held is lost with it: Nova's conductor
        # waits for the answer until its call monitor gives up
        # (rpc_response_timeout, 60 s) and buries the server in cell0 with
        # MessagingTimeout.  So is a request whose answer was on its way
        # when RabbitMQ stopped (reply queues do not outlive the broker's
        # restart).  Nova's own outcome, whatever the driver (a server
        # placement had already allocated keeps its allocation until it
        # is deleted): counted, not failed, in the burst of such a fault
        # only.
        lost = [
            sid
            for sid in ids
            if fault in ("kill-scheduler-worker", "restart-rabbitmq")
            and self.servers[sid].get("status") == "ERROR"
            and self.servers[sid]
            .get("fault", "")
            .startswith("MessagingTimeout")
        ]
        for sid in lost:
            self.servers[sid]["lost_in_fault"] = True
        # A request delivered twice after the broker's restart (see
        # ``delivered_twice``): whatever became of the server (Nova can
        # leave it in ERROR and then not find it), Nova's outcome, counted
        # apart in that burst only.
        twice = (
            delivered_twice() & set(ids)
            if fault == "restart-rabbitmq"
            else set()
        )
        for sid in twice:
            self.servers[sid]["delivered_twice"] = True
        other = [
            sid
            for sid in ids
            if self.servers[sid].get("status") != "ACTIVE"
            and sid not in nvh
            and sid not in lost
            and sid not in twice
        ]
        for sid in other:
            rec = self.servers[sid]
            self.fail(
                "server %s (burst %d) ended %s: %s",
                sid,
                rec["burst"],
                rec.get("status"),
                rec.get("fault", "")[:300],
            )
        # The slots left at the burst's end, by placement's records (a
        # server that holds an allocation without running, lost in a fault,
        # fills its slot for every scheduler as well).
        room = sum(
            max(0, int(classes["VCPU"][1]) - classes["VCPU"][0])
            for node, classes in state["placement"].items()
            if node in set(self.cloud.nodes()) and "VCPU" in classes
        )
        if nvh and room > 0:
            self.fail(
                "%d NoValidHost in burst %d, %d slots free at its end",
                len(nvh),
                self.servers[ids[0]]["burst"],
                room,
            )
        return {
            "nvh": len(nvh),
            "lost_in_fault": len(lost),
            "delivered_twice": len(twice),
            "other_errors": len(other),
            "room": room,
        }

    def judge_records(self, state, books):
        nodes = set(self.cloud.nodes())
        # Nova's records: instances per node, compute node usage.
        running = {}
        for inst in state["instances"]:
            if inst["task_state"] is not None or inst["vm_state"] not in (
                "active",
                "error",
            ):
                self.fail(
                    "instance %s left %s/%s",
                    inst["uuid"],
                    inst["vm_state"],
                    inst["task_state"],
                )
            if inst["node"]:
                running.setdefault(inst["node"], []).append(inst["uuid"])
        for node, uuids in running.items():
            if len(uuids) > SLOTS_PER_NODE:
                self.fail("Nova runs %d servers on %s", len(uuids), node)
        # The compute node records' usage is the resource tracker's, made
        # exact by its periodic update (every 60 s); between two updates
        # it also counts servers deleted since: judged after one.
        for cn in state["compute_nodes"] if books is not None else []:
            if cn["vcpus_used"] > cn["vcpus"]:
                self.fail(
                    "compute node %s: vcpus_used %s > %s",
                    cn["node"],
                    cn["vcpus_used"],
                    cn["vcpus"],
                )
        # Placement: no provider over its capacity; each node's usage is
        # what Nova runs there, but for the allocations servers lost in a
        # fault still hold (Nova's, counted apart).
        lost = {
            sid for sid, r in self.servers.items() if r.get("lost_in_fault")
        }
        # An allocation whose consumer is no instance of the cell (nor a
        # migration's: none run here) is one Nova itself left behind: a
        # placement claim made by the worker killed before it answered,
        # whose server was deleted meanwhile ("has allocations against
        # this compute host but is not found in the database", the
        # compute logs).  Seen with either driver: counted apart too.
        in_cell = {inst["uuid"] for inst in state["instances"]}
        orphans = {
            alloc["consumer"]
            for alloc in state["allocations"]
            if alloc["consumer"] not in in_cell
        }
        if books is not None:
            self.orphan_consumers = sorted(orphans)
        # A server whose request was delivered twice holds, beside its
        # node's allocation, the one its first claim made elsewhere
        # (Nova's placement client doubled them up): that one is Nova's
        # too.
        twice = {
            sid for sid, r in self.servers.items() if r.get("delivered_twice")
        }
        runs_on = {inst["uuid"]: inst["node"] for inst in state["instances"]}
        held = {}
        for alloc in state["allocations"]:
            consumer = alloc["consumer"]
            if consumer in lost | orphans or (
                consumer in twice and alloc["node"] != runs_on.get(consumer)
            ):
                node_held = held.setdefault(alloc["node"], {})
                node_held[alloc["rc"]] = (
                    node_held.get(alloc["rc"], 0) + alloc["used"]
                )
        if books is not None:
            self.held_by_lost = held
        for node, classes in state["placement"].items():
            classes = {
                rc: (used - held.get(node, {}).get(rc, 0), cap)
                for rc, (used, cap) in classes.items()
            }
            for rc, (used, cap) in classes.items():
                if used > cap:
                    self.fail(
                        "placement: %s %s used %s > %s", node, rc, used, cap
                    )
            vcpu_used = classes.get("VCPU", [0, 0])[0]
            if books is None:
                continue
            if node in nodes and vcpu_used != len(running.get(node, [])):
                self.fail(
                    "placement: %s VCPU used %s, Nova runs %d (%s); "
                    "placement's consumers there: %s",
                    node,
                    vcpu_used,
                    len(running.get(node, [])),
                    ", ".join(sorted(running.get(node, []))),
                    ", ".join(
                        "%s (%s)" % (a["consumer"], _whereabouts(a, state))
                        for a in state["allocations"]
                        if a["node"] == node and a["rc"] == "VCPU"
                    ),
                )
        if not books:
            return
        # The books: each node's usage is placement's and what Nova runs,
        # no live grants left, the tables consistent.
        for node in nodes:
            book = state["books"].get(node)
            placement = {
                rc: pair[0] - held.get(node, {}).get(rc, 0)
                for rc, pair in state["placement"].get(node, {}).items()
                if pair[0] - held.get(node, {}).get(rc, 0)
            }
            if book is None:
                self.fail("books: no row for %s", node)
                continue
            if book["used"] != placement:
                self.fail(
                    "books: %s used %s, placement %s",
                    node,
                    book["used"],
                    placement,
                )
            if book["granted"]:
                self.fail("books: %s still granted %s", node, book["granted"])
        claimed = {}
        for claim in state["claims"]:
            claimed.setdefault(claim["node"], []).append(claim["instance"])
        for node in nodes:
            if sorted(claimed.get(node, [])) != sorted(running.get(node, [])):
                self.fail(
                    "books: %s claims %s, Nova runs %s",
                    node,
                    sorted(claimed.get(node, [])),
                    sorted(running.get(node, [])),
                )
        for v in state["violations"]:
            self.fail("books: check: %s", v)

    def judge_schedulers(self):
        for proc in self.cloud.schedulers:
            parent, workers = scheduler_processes(proc)
            if not proc.alive() or parent is None or len(workers) != 2:
                self.fail(
                    "%s: alive=%s, %s workers",
                    proc.name,
                    proc.alive(),
                    len(workers),
                )
        services = [
            s
            for s in self.api.services()
            if s["binary"] == "nova-scheduler"
            and s["host"].startswith("sched-%s-" % self.scheduler)
        ]
        for s in services:
            if s["state"] != "up":
                self.fail("service %s is %s", s["host"], s["state"])

    def summary(self):
        done = [r for r in self.servers.values() if "status" in r]
        boot = sorted(r["boot_s"] for r in done if "boot_s" in r)
        seen = sorted(r["seen_s"] for r in done if "seen_s" in r)
        nvh = sum(1 for r in done if "No valid host" in r.get("fault", ""))
        lost = sum(1 for r in done if r.get("lost_in_fault"))
        twice = sum(1 for r in done if r.get("delivered_twice"))
        errors = sum(
            1
            for r in done
            if r["status"] != "ACTIVE"
            and "No valid host" not in r.get("fault", "")
            and not r.get("lost_in_fault")
            and not r.get("delivered_twice")
        )

        def pct(p):
            return percentile(boot, p)

        return {
            "scheduler": self.scheduler,
            "boots": len(self.servers),
            "active": len(boot),
            "p50_s": round(statistics.median(boot), 2) if boot else None,
            "p99_s": pct(0.99),
            "max_s": round(boot[-1], 2) if boot else None,
            "seen_p50_s": percentile(seen, 0.5),
            "seen_p99_s": percentile(seen, 0.99),
            "no_valid_host": nvh,
            "lost_in_fault": lost,
            "delivered_twice": twice,
            "other_errors": errors,
            "warm_up_boot_s": self.warm_up,
            "placement_held_by_lost": self.held_by_lost,
            "placement_orphan_consumers": self.orphan_consumers,
            "faults": self.faults,
            "bursts": self.bursts,
            "failures": self.failures,
            "error_messages": sorted(
                {
                    r.get("fault", "")[:200]
                    for r in done
                    if r["status"] != "ACTIVE"
                    and "No valid host" not in r.get("fault", "")
                }
            ),
        }


FAULTS = ["kill-scheduler-worker", "restart-gs-mariadb", "restart-rabbitmq"]


def _whereabouts(allocation, state):
    """What Nova's cell records of an allocation's consumer: its state and
    node, or that it has no live instance there."""
    for inst in state["instances"]:
        if inst["uuid"] == allocation["consumer"]:
            return "%s on %s" % (inst["vm_state"], inst["node"])
    return "no live instance in the cell"


def run_scheduler(cloud, scheduler, args):
    started = time.monotonic()
    since = now_stamp()
    cloud.start_schedulers(scheduler)
    run = Run(cloud, scheduler)
    if args.warm_up:
        warm = Run(cloud, scheduler)
        ids = warm.boot_burst(-1, args.warm_up, args.warm_up)
        run.warm_up = [warm.servers[i].get("boot_s") for i in ids]
        warm.delete(ids)
        run.failures += warm.failures
    live = []
    for index in range(args.bursts):
        fault = FAULTS[index] if index < len(FAULTS) and args.faults else None
        ids = run.boot_burst(index, args.burst, args.clients, fault=fault)
        last_settled = time.monotonic()
        state = cloud.check(scheduler)
        verdict = run.judge_burst(ids, state, fault=fault)
        run.bursts[-1].update(verdict, fault=fault)
        log("%s burst %d: %s", scheduler, index, verdict)
        live += [i for i in ids if run.servers[i].get("status") == "ACTIVE"]
        errored = [i for i in ids if run.servers[i].get("status") != "ACTIVE"]
        run.judge_records(state, books=None)
        # Make room for the next burst: the failed ones, and some running.
        victims = errored + live[: args.delete]
        live = live[args.delete :]
        if index < args.bursts - 1:
            run.delete(victims)
    # One reconciliation interval (Nova's periodic tasks run them; the
    # option keeps its default), then the books.
    # From the end of the last burst (the deletes between bursts count).
    wait = max(0, args.reconcile_wait - (time.monotonic() - last_settled))
    log("%s: waiting %.0f s (one reconciliation interval)", scheduler, wait)
    time.sleep(wait)
    run.judge_records(cloud.check(scheduler), books=(scheduler == "grants"))
    run.judge_schedulers()
    # Clean the cloud for the next scheduler.
    run.delete([sid for sid, r in run.servers.items() if not r.get("deleted")])
    cloud.stop_schedulers()
    summary = run.summary()
    summary["wall_s"] = round(time.monotonic() - started, 1)
    summary["logs"] = log_evidence(scheduler)
    summary["placement_claims"] = placement_claims(since, now_stamp())
    return summary


def _interrupted(signum, frame):
    raise KeyboardInterrupt("signal %d" % signum)


def main():
    signal.signal(signal.SIGTERM, _interrupted)
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedulers", default="stock,grants")
    parser.add_argument("--computes", type=int, default=3)
    parser.add_argument("--nodes-per-compute", type=int, default=8)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--burst", type=int, default=50)
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--delete", type=int, default=40)
    parser.add_argument("--no-faults", dest="faults", action="store_false")
    parser.add_argument(
        "--db-down",
        type=float,
        default=20,
        help="seconds grant_scheduler's MariaDB stays down in its restart",
    )
    parser.add_argument(
        "--warm-up",
        type=int,
        default=2,
        help="boots (and deletes) before the bursts, not counted: the "
        "first requests of a scheduler service pay its start",
    )
    parser.add_argument(
        "--transient-queues",
        dest="durable_queues",
        action="store_false",
        help="Nova's default [oslo_messaging_rabbit] amqp_durable_queues "
        "= False (casts sent during the RabbitMQ restart can be lost)",
    )
    parser.add_argument("--settle-timeout", type=int, default=240)
    parser.add_argument(
        "--reconcile-wait",
        type=int,
        default=RECONCILE_INTERVAL + 15,
        help="seconds from the last burst to the books' check",
    )
    parser.add_argument(
        "--json",
        default=os.path.join(SRC, "doc/source/admin/nova22-services.json"),
    )
    parser.add_argument(
        "--keep", action="store_true", help="leave the cloud up (debugging)"
    )
    args = parser.parse_args()
    started = time.monotonic()
    cloud = Cloud(args)
    results = []
    try:
        cloud.setup()
        cloud.start()
        for scheduler in args.schedulers.split(","):
            results.append(run_scheduler(cloud, scheduler, args))
    finally:
        if args.keep:
            log("left running; stop the process groups by hand")
        else:
            cloud.stop()
        # RabbitMQ must be left running for everyone else.
        rabbitmqctl("start_app", check=False)
    wall = time.monotonic() - started
    # A run of one scheduler keeps the other's recorded result beside it
    # (as tools/nova22-own-tests.sh compares with a recorded stock run).
    ran = {r["scheduler"] for r in results}
    try:
        with open(args.json) as f:
            recorded = [
                dict(r, recorded=True)
                for r in json.load(f).get("results", [])
                if r["scheduler"] not in ran
            ]
    except (OSError, ValueError):
        recorded = []
    results = recorded + results
    report = {
        "nodes": len(cloud.nodes()),
        "capacity": cloud.capacity(),
        "clients": args.clients,
        "burst": args.burst,
        "bursts": args.bursts,
        "durable_queues": args.durable_queues,
        "wall_s": round(wall, 1),
        "results": results,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
        f.write("\n")
    columns = "%-8s %6s %6s %7s %7s %7s %5s %5s %6s %8s"
    print(
        columns
        % (
            "sched",
            "boots",
            "active",
            "p50_s",
            "p99_s",
            "max_s",
            "NVH",
            "lost",
            "errors",
            "failures",
        )
    )
    for r in results:
        print(
            columns
            % (
                r["scheduler"] + ("*" if r.get("recorded") else ""),
                r["boots"],
                r["active"],
                r["p50_s"],
                r["p99_s"],
                r["max_s"],
                r["no_valid_host"],
                r.get("lost_in_fault", 0),
                r["other_errors"],
                len(r["failures"]),
            )
        )
    if recorded:
        print("* recorded in %s by an earlier run" % args.json)
    print("wall: %.0f s" % wall)
    for r in results:
        if not r.get("recorded"):
            print("logs (%s): %s" % (r["scheduler"], r.get("logs")))
    failed = [
        f for r in results if not r.get("recorded") for f in r["failures"]
    ]
    # NOTE: the first few only, so that the end of a long output (CI keeps
    # its head and tail) still shows them; the JSON has every one.
    for f in failed[:SHOWN_FAILURES]:
        print("FAILED: %s" % f)
    if len(failed) > SHOWN_FAILURES:
        print(
            "FAILED: and %d more (every one in %s)"
            % (len(failed) - SHOWN_FAILURES, args.json)
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
