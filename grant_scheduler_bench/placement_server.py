"""gunicorn settings and hooks for the benchmark's placement service.

``placement_api.PlacementService`` starts gunicorn with ``-c
python:grant_scheduler_bench.placement_server``; this module is that
configuration, read from the environment the service sets, and runs only
inside gunicorn (where openstack-placement is installed).

Each worker counts the SQL statements and commits its engines run while it
serves ``/allocation_candidates`` and ``/allocations`` (what a scheduler and
a compute host ask for, not the benchmark's own set-up and checks) and
writes them to ``$GS_BENCH_PLACEMENT_COUNTS/<pid>.json`` when it exits, so
the benchmark reports the real service's statements per placement.  With
``$GS_BENCH_PLACEMENT_LATENCY_S`` it sleeps before every statement, like
the benchmark's ``--latency-ms`` does for the other strategies.
"""

import json
import os
import time

import sqlalchemy as sa

bind = os.environ.get("GS_BENCH_PLACEMENT_BIND", "127.0.0.1:0")
workers = int(os.environ.get("GS_BENCH_PLACEMENT_WORKERS", "4"))
wsgi_app = "placement.wsgi:init_application()"
timeout = 120
graceful_timeout = 10
# NOTE: gunicorn 22+ opens a control socket in ~/.gunicorn by default;
# several benchmark services (or engineers) would share it.  Older
# releases ignore the unknown setting.
control_socket_disable = True

_COUNTS_DIR = os.environ.get("GS_BENCH_PLACEMENT_COUNTS")
_LATENCY_S = float(os.environ.get("GS_BENCH_PLACEMENT_LATENCY_S") or 0)
_COUNTED_PATHS = ("/allocation_candidates", "/allocations")

_engine = {"statements": 0, "commits": 0}
_counted = {"statements": 0, "commits": 0, "requests": 0}
_before = {}


def _statement(*args):
    _engine["statements"] += 1
    if _LATENCY_S:
        time.sleep(_LATENCY_S)


def _commit(*args):
    _engine["commits"] += 1


def post_worker_init(worker):
    # NOTE: listeners on the Engine class reach every engine placement's
    # enginefacade creates later in this worker.
    sa.event.listen(sa.engine.Engine, "before_cursor_execute", _statement)
    sa.event.listen(sa.engine.Engine, "commit", _commit)


def pre_request(worker, req):
    _before.update(_engine)


def post_request(worker, req, environ, resp):
    if req.path.startswith(_COUNTED_PATHS):
        _counted["requests"] += 1
        for key in ("statements", "commits"):
            _counted[key] += _engine[key] - _before.get(key, 0)


def worker_exit(server, worker):
    if not _COUNTS_DIR:
        return
    path = os.path.join(_COUNTS_DIR, "%d.json" % os.getpid())
    with open(path, "w") as f:
        json.dump(_counted, f)
