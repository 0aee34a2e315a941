"""placement-api: the real openstack-placement service as a benchmark peer.

``placement`` in ``strategies`` is a model of Nova's placement answer; this
strategy runs the real thing.  For each run the parent starts the
openstack-placement WSGI application under gunicorn on a loopback port,
with several worker processes, over a database of its own on the server
the benchmark uses (``<database>_placement``, or ``<file>.placement`` next
to a SQLite file), created afresh and migrated with ``placement-manage db
sync``, with ``[api] auth_strategy = noauth2``; then it creates one resource
provider with VCPU, MEMORY_MB and DISK_GB inventory per workload host.

Each scheduler process then does per request what Nova's scheduler does
(``nova.scheduler.manager`` and ``SchedulerReportClient.claim_resources``):

1. ``GET /allocation_candidates?resources=VCPU:v,MEMORY_MB:m,DISK_GB:d
   &limit=1000``; none is NoValidHost.
2. Weigh the candidates by free RAM from the provider summaries (spread)
   and choose randomly among the best ``host_subset_size``; the chosen one
   first, then the rest in weight order.
3. For each in that order, claim: ``GET /allocations/{instance}`` then
   ``PUT /allocations/{instance}`` with the candidate's allocation request,
   ``project_id``, ``user_id`` and ``consumer_generation: null``.  A 409
   for capacity moves on to the next candidate of the same list; a 409
   ``placement.concurrent_update`` (a provider generation conflict) is
   retried as Nova's ``retries`` decorator does: up to four tries, each
   after a random sleep of 0 to 2 x retry seconds.  NoValidHost once every
   candidate failed.

The compute side claims nothing (placement already holds the allocation);
with churn it deletes the allocation.  Overcommit is read from placement's
own tables (``SUM(used)`` per provider and class against ``(total -
reserved) x allocation_ratio``) at every checkpoint and, at the end, also
from ``GET /resource_providers/{uuid}/usages``, never from what the
scheduler processes counted.

openstack-placement and gunicorn are an optional extra: ``pip install
'.[placement]'``.  The client side here needs only the standard library;
the service side (``placement_server``) runs where placement installs.
"""

import http.client
import importlib.util
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
import urllib.parse
import uuid

import sqlalchemy as sa

from grant_scheduler import api
from grant_scheduler_bench import sqla

NAME = "placement-api"
INSTALL_HINT = (
    "the placement-api strategy needs openstack-placement and gunicorn: "
    "pip install '.[placement]'"
)
API_VERSION = "placement 1.36"
CANDIDATE_LIMIT = 1000
CONCURRENT_UPDATE = "placement.concurrent_update"
# Nova's ``retries`` decorator: four tries, random sleep 0..2*retry s.
CLAIM_TRIES = 4
PROJECT_ID = "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5"
USER_ID = "f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0"
START_TIMEOUT = 120
STOP_TIMEOUT = 30
PROVIDER_NAMESPACE = uuid.UUID("6f1c3f8e-1d6a-4c55-9a37-3d2b0c1f5e11")

CLASSES = (
    ("VCPU", "vcpus"),
    ("MEMORY_MB", "memory_mb"),
    ("DISK_GB", "disk_gb"),
)
# NOTE: placement keeps no rows for the standard resource classes; their
# ids in inventories and allocations are fixed (os-resource-classes order).
CLASS_IDS = {"VCPU": 0, "MEMORY_MB": 1, "DISK_GB": 2}


def missing():
    """None when placement-api can run here, else the line that says how
    to make it run."""
    for module in ("placement", "gunicorn"):
        if importlib.util.find_spec(module) is None:
            return INSTALL_HINT
    return None


def provider_uuid(host):
    return str(uuid.uuid5(PROVIDER_NAMESPACE, host))


def placement_db_url(bench_url):
    """The database placement gets next to the benchmark's own."""
    url = sqla.make_url(bench_url)
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            raise api.GrantSchedulerError(
                "placement-api needs a SQLite file or a database server, "
                "not %s" % bench_url
            )
        return sqla.url_with_database(url, url.database + ".placement")
    return sqla.url_with_database(
        url, "%s_placement" % (url.database or "gs_bench")
    )


# -- reading placement's tables ------------------------------------------


_USAGE_SQL = sa.text(
    "SELECT rp.name AS name, i.resource_class_id AS rc, i.total AS total,"
    " i.reserved AS reserved, i.allocation_ratio AS ratio,"
    " COALESCE(u.used, 0) AS used"
    " FROM inventories i"
    " JOIN resource_providers rp ON rp.id = i.resource_provider_id"
    " LEFT JOIN (SELECT resource_provider_id, resource_class_id,"
    " SUM(used) AS used FROM allocations"
    " GROUP BY resource_provider_id, resource_class_id) u"
    " ON u.resource_provider_id = i.resource_provider_id"
    " AND u.resource_class_id = i.resource_class_id"
)


def capacity(total, reserved, ratio):
    """Placement's usable amount: ``(total - reserved) x ratio``."""
    return (total - reserved) * ratio


def read_usage(conn):
    """``{provider name: {resource class id: (used, capacity)}}`` in one
    statement, from placement's inventories and allocations."""
    usage = {}
    for row in conn.execute(_USAGE_SQL):
        usage.setdefault(row.name, {})[row.rc] = (
            int(row.used),
            capacity(row.total, row.reserved, row.ratio),
        )
    return usage


def overcommitted_in(usage):
    return {
        name
        for name, classes in usage.items()
        if any(used > limit for used, limit in classes.values())
    }


class RoomCheck:
    """``nvh_with_room`` for placement-api: the providers that fit
    ``amount`` in a fresh read of placement's tables."""

    def __init__(self, db_url):
        self.engine = sa.create_engine(db_url, poolclass=sa.pool.NullPool)

    def __call__(self, amount):
        with self.engine.connect() as conn:
            usage = read_usage(conn)
            custom = {
                row.name: row.id
                for row in conn.execute(
                    sa.text("SELECT id, name FROM resource_classes")
                )
            }
        # NOTE: a class placement has no id for is on no provider.
        wanted = {
            CLASS_IDS.get(name, custom.get(name, name)): value
            for name, value in amount.items()
        }
        return {
            name
            for name, classes in usage.items()
            if all(
                rc in classes and classes[rc][0] + want <= classes[rc][1]
                for rc, want in wanted.items()
            )
        }


# -- HTTP ----------------------------------------------------------------


class Client:
    """A few JSON requests to placement as an admin under noauth2."""

    def __init__(self, endpoint, timeout=120):
        parts = urllib.parse.urlsplit(endpoint)
        self.host = parts.hostname
        self.port = parts.port
        self.timeout = timeout

    def request(self, method, path, body=None):
        """``(status, decoded JSON body or None)``."""
        headers = {
            "x-auth-token": "admin",
            "OpenStack-API-Version": API_VERSION,
            "Accept": "application/json",
        }
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        # NOTE: gunicorn's sync workers close every connection after one
        # response, so each request opens its own.
        conn = http.client.HTTPConnection(
            self.host, self.port, timeout=self.timeout
        )
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        decoded = None
        if raw:
            try:
                decoded = json.loads(raw)
            except ValueError:
                decoded = {"text": raw.decode(errors="replace")}
        return response.status, decoded


def _error_code(body):
    try:
        return body["errors"][0].get("code"), body["errors"][0]["detail"]
    except (KeyError, IndexError, TypeError):
        return None, ""


# -- the strategy's sides ------------------------------------------------


class _Uncounted:
    """``side.gs.database`` for the runner's statement counter: this side
    runs no SQL itself; the service's workers count theirs."""

    def get_engine(self):
        return sa.create_engine("sqlite://")


class _Handle:
    """What the runner reaches through ``side.gs``: the seeded rng, the
    (empty) statement counter and ``release``."""

    def __init__(self, client):
        self.client = client
        self.database = _Uncounted()
        self.scheduler = types.SimpleNamespace(rng=random.Random())

    def release(self, instance_uuid, host, node):
        status, _ = self.client.request(
            "DELETE", "/allocations/%s" % instance_uuid
        )
        return status == 204


class _Side:
    def __init__(self, endpoint, settings):
        self.gs = _Handle(Client(endpoint))
        self.settings = settings
        self.attempts = 0
        self.conflicts = 0
        self.generation_conflicts = 0


class Scheduler(_Side):
    """Nova's scheduler against the real service (see the module doc)."""

    def __init__(self, endpoint, settings):
        super().__init__(endpoint, settings)
        # NOTE: read once, before the run's clock starts: the runner routes
        # builds by host name and candidates carry only provider uuids.
        status, body = self.gs.client.request("GET", "/resource_providers")
        if status != 200:
            raise RuntimeError(
                "GET /resource_providers: HTTP %s %s" % (status, body)
            )
        self.names = {
            rp["uuid"]: rp["name"] for rp in body["resource_providers"]
        }

    def place(self, amount, instance_uuid):
        query = "resources=VCPU:%d,MEMORY_MB:%d,DISK_GB:%d&limit=%d" % (
            amount.vcpus,
            amount.memory_mb,
            amount.disk_gb,
            CANDIDATE_LIMIT,
        )
        status, body = self.gs.client.request(
            "GET", "/allocation_candidates?" + query
        )
        if status != 200:
            raise RuntimeError(
                "GET /allocation_candidates: HTTP %s %s" % (status, body)
            )
        for provider, request in self._ordered(body):
            if self._claim(instance_uuid, request):
                return provider, provider
        return None

    def _ordered(self, body):
        summaries = body["provider_summaries"]
        candidates = []
        for request in body["allocation_requests"]:
            [rp_uuid] = request["allocations"]
            memory = summaries[rp_uuid]["resources"]["MEMORY_MB"]
            candidates.append(
                (memory["capacity"] - memory["used"], rp_uuid, request)
            )
        # NOTE: Nova's _get_sorted_hosts: weigh (a stable sort, most free
        # RAM first), pick one of the best host_subset_size at random, put
        # it first and keep the rest in weight order.
        candidates.sort(key=lambda c: c[0], reverse=True)
        size = min(max(1, self.settings.host_subset_size), len(candidates))
        if size:
            chosen = candidates.pop(self.gs.scheduler.rng.randrange(size))
            candidates.insert(0, chosen)
        return [(self.names[c[1]], c[2]) for c in candidates]

    def _claim(self, instance_uuid, request):
        """SchedulerReportClient.claim_resources under @retries."""
        path = "/allocations/%s" % instance_uuid
        payload = dict(
            request,
            project_id=PROJECT_ID,
            user_id=USER_ID,
            consumer_generation=None,
        )
        rng = self.gs.scheduler.rng
        for retry in range(CLAIM_TRIES):
            time.sleep(rng.uniform(0, retry * 2))
            self.attempts += 1
            # NOTE: Nova reads the consumer's allocations first (a move
            # would double them up); for a new instance they are empty.
            self.gs.client.request("GET", path)
            status, body = self.gs.client.request("PUT", path, payload)
            if status == 204:
                return True
            if status == 409:
                self.conflicts += 1
            code, detail = _error_code(body)
            if status == 409 and code == CONCURRENT_UPDATE:
                if "consumer generation conflict" in detail:
                    return False
                self.generation_conflicts += 1
                continue
            if status == 409:
                return False
            raise RuntimeError("PUT %s: HTTP %s %s" % (path, status, body))
        return False


class Compute(_Side):
    def claim(self, instance_uuid, host, node, amount):
        return True


# -- the service ---------------------------------------------------------


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _admin_execute(db_url, statements):
    """Run ``statements`` outside a transaction on the server of
    ``db_url`` (CREATE/DROP DATABASE), connected to the bench database."""
    engine = sa.create_engine(
        db_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool
    )
    try:
        with engine.connect() as conn:
            for statement in statements:
                sqla.execute_text(conn, statement)
    finally:
        engine.dispose()


def _recreate_database(bench_url, url):
    backend = url.get_backend_name()
    if backend == "sqlite":
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.unlink(url.database + suffix)
            except FileNotFoundError:
                pass
        return
    name = url.database
    if backend == "postgresql":
        drop = 'DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name
        create = 'CREATE DATABASE "%s"' % name
    else:
        drop = "DROP DATABASE IF EXISTS `%s`" % name
        create = "CREATE DATABASE `%s` CHARACTER SET utf8mb4" % name
    _admin_execute(bench_url, [drop, create])


CONF_TEMPLATE = """[DEFAULT]
debug = False
log_file = {log}
[api]
auth_strategy = noauth2
[placement_database]
connection = {connection}
[placement]
{retries}
"""


class PlacementService:
    """The real service for one run: database, gunicorn, providers."""

    def __init__(self, workload, options):
        self.workload = workload
        self.bench_url = options["url"]
        self.db_url = placement_db_url(self.bench_url)
        self.workers = options.get("placement_workers") or 4
        if self.db_url.get_backend_name() == "sqlite":
            # NOTE: SQLite admits one writer; placement's workers would
            # fail each other's writes with "database is locked".
            self.workers = 1
        self.conflict_retries = options.get("placement_conflict_retries")
        self.latency_s = options.get("latency_s") or 0.0
        self.scratch = None
        self.process = None
        self.log_tail = ""
        self.endpoint = None
        self.engine = None
        self.log = None
        self.client = None
        self.inventory = {}
        self.worker_counts = []

    @property
    def options(self):
        """What the run's processes need: the sides connect to the
        service instead of the benchmark database."""
        return {
            "url": self.endpoint,
            "placement_db_url": self.db_url.render_as_string(
                hide_password=False
            ),
        }

    def start(self):
        self.scratch = tempfile.mkdtemp(prefix="gs-bench-placement-")
        try:
            self._start()
        except BaseException:
            self._shut_down()
            raise
        return self

    def _start(self):
        _recreate_database(self.bench_url, self.db_url)
        connection = self.db_url.render_as_string(hide_password=False)
        retries = ""
        if self.conflict_retries is not None:
            retries = "allocation_conflict_retry_count = %d" % (
                self.conflict_retries
            )
        conf = os.path.join(self.scratch, "placement.conf")
        log = os.path.join(self.scratch, "placement.log")
        with open(conf, "w") as f:
            f.write(
                CONF_TEMPLATE.format(
                    log=log, connection=connection, retries=retries
                )
            )
        self._sync(conf)
        counts = os.path.join(self.scratch, "counts")
        os.mkdir(counts)
        port = _free_port()
        self.endpoint = "http://127.0.0.1:%d" % port
        env = dict(
            os.environ,
            OS_PLACEMENT_CONFIG_DIR=self.scratch,
            GS_BENCH_PLACEMENT_BIND="127.0.0.1:%d" % port,
            GS_BENCH_PLACEMENT_WORKERS=str(self.workers),
            GS_BENCH_PLACEMENT_COUNTS=counts,
            GS_BENCH_PLACEMENT_LATENCY_S=repr(self.latency_s),
        )
        self.log = open(os.path.join(self.scratch, "gunicorn.log"), "w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "python:grant_scheduler_bench.placement_server",
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.client = Client(self.endpoint)
        self._wait_ready()
        self.engine = sa.create_engine(self.db_url, poolclass=sa.pool.NullPool)
        self._create_providers()

    def _sync(self, conf):
        command = [
            sys.executable,
            "-c",
            "import sys; from placement.cmd.manage import main; "
            "sys.exit(main())",
            "--config-file",
            conf,
            "db",
            "sync",
        ]
        # NOTE: no capture_output: Python 3.6.
        done = subprocess.run(  # noqa: UP022
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,  # noqa: UP021 - no text= in 3.6
            timeout=START_TIMEOUT,
        )
        if done.returncode != 0:
            raise api.GrantSchedulerError(
                "placement-manage db sync failed (%d): %s"
                % (done.returncode, (done.stderr or done.stdout)[-2000:])
            )

    def _tail(self):
        lines = []
        for name in ("gunicorn.log", "placement.log"):
            path = os.path.join(self.scratch, name)
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    lines.extend(f.read().splitlines()[-15:])
        return "\n".join(lines)

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise api.GrantSchedulerError(
                    "the placement service exited (%s) while starting:\n%s"
                    % (self.process.returncode, self._tail())
                )
            try:
                status, _ = self.client.request("GET", "/")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise api.GrantSchedulerError(
            "the placement service did not answer within %d s:\n%s"
            % (START_TIMEOUT, self._tail())
        )

    def _create_providers(self):
        capacity = self.workload.capacity
        inventories = {
            name: {
                "total": getattr(capacity, field),
                "reserved": 0,
                "min_unit": 1,
                "max_unit": getattr(capacity, field),
                "step_size": 1,
                "allocation_ratio": 1.0,
            }
            for name, field in CLASSES
        }
        for host in self.workload.host_names():
            rp_uuid = provider_uuid(host)
            status, body = self.client.request(
                "POST", "/resource_providers", {"name": host, "uuid": rp_uuid}
            )
            if status != 200:
                raise api.GrantSchedulerError(
                    "placement: creating provider %s: HTTP %s %s"
                    % (host, status, body)
                )
            status, body = self.client.request(
                "PUT",
                "/resource_providers/%s/inventories" % rp_uuid,
                {
                    "resource_provider_generation": body["generation"],
                    "inventories": inventories,
                },
            )
            if status != 200:
                raise api.GrantSchedulerError(
                    "placement: inventory of %s: HTTP %s %s"
                    % (host, status, body)
                )
            self.inventory[host] = inventories

    # -- the checker -------------------------------------------------------

    def overcommitted(self, final=False):
        """Providers over capacity now, from placement's tables (and, when
        ``final``, from its usages API too)."""
        with self.engine.connect() as conn:
            found = overcommitted_in(read_usage(conn))
        if final:
            found |= self._overcommitted_by_api()
        return found

    def _overcommitted_by_api(self):
        found = set()
        for host, inventories in self.inventory.items():
            status, body = self.client.request(
                "GET", "/resource_providers/%s/usages" % provider_uuid(host)
            )
            if status != 200:
                raise RuntimeError(
                    "GET usages of %s: HTTP %s %s" % (host, status, body)
                )
            for name, inv in inventories.items():
                limit = capacity(
                    inv["total"], inv["reserved"], inv["allocation_ratio"]
                )
                if body["usages"].get(name, 0) > limit:
                    found.add(host)
        return found

    def consumers(self):
        """Consumers holding allocations, from placement's tables."""
        with self.engine.connect() as conn:
            return conn.execute(
                sa.text("SELECT COUNT(DISTINCT consumer_id) FROM allocations")
            ).scalar()

    def stop(self):
        """Stop the service; returns the workers' counts for the run and
        the consumers placement holds allocations for.  The database stays
        for inspection until the next run recreates it."""
        result = {}
        try:
            if self.engine is not None:
                result["service_consumers"] = self.consumers()
        finally:
            self._shut_down()
        counts = {"statements": 0, "commits": 0, "requests": 0}
        for worker in self.worker_counts:
            for key in counts:
                counts[key] += worker.get(key, 0)
        result.update(
            service_statements=counts["statements"],
            service_commits=counts["commits"],
            service_requests=counts["requests"],
        )
        return result

    def _shut_down(self):
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None
        if self.process is not None:
            self._stop_process()
        if self.log is not None:
            self.log.close()
            self.log = None
        if self.scratch:
            directory = os.path.join(self.scratch, "counts")
            names = os.listdir(directory) if os.path.isdir(directory) else []
            for name in names:
                with open(os.path.join(directory, name)) as f:
                    self.worker_counts.append(json.load(f))
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def _stop_process(self):
        process, self.process = self.process, None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(STOP_TIMEOUT)


class Strategy:
    """The ``placement-api`` entry of ``strategies.STRATEGIES``."""

    name = NAME
    label = NAME
    unsafe = False
    retries_on_reject = False

    @staticmethod
    def missing():
        return missing()

    def start_service(self, workload, options):
        problem = missing()
        if problem:
            raise api.GrantSchedulerError(problem)
        return PlacementService(workload, options).start()

    def room_check(self, options):
        return RoomCheck(options["placement_db_url"])

    def scheduler_side(self, url, settings, hooks=None, rng=None):
        side = Scheduler(url, settings)
        if rng is not None:
            side.gs.scheduler.rng = rng
        return side

    def compute_side(self, url, settings):
        return Compute(url, settings)


STRATEGY = Strategy()
