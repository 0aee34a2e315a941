"""What one reconciliation with Nova's records costs, at N nodes x M instances.

Run in the Nova 22 root, from the checkout (tools/nova22-run.sh python3
tools/reconcile-cost.py [--nodes 1000] [--per-node 20] [--url URL]): builds
Nova's API and cell databases with nova-manage (SQLite files, as the Nova 22
tests do), writes N nodes into grant_scheduler's books (``--url``, SQLite by
default) and N x M instances into the cell (rows written in bulk, each with
its flavour as Nova stores it), then times ``Reconciler.run`` twice: the
first run claims every instance (every node differs), the second finds
nothing to do (the steady state each scheduler pays every
``reconcile_interval``).
"""

import nova.monkey_patch  # noqa: F401,I001 - first, as in nova-scheduler

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
import uuid

import sqlalchemy as sa
from nova import context as nova_context
from nova import objects
from oslo_serialization import jsonutils

from grant_scheduler import api
from grant_scheduler.nova.books import reconcile

# NOTE: the Nova 22 tests' database set-up, from this checkout.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.nova22.in_nova import test_driver as manager  # noqa: E402

FLAVOR = dict(vcpus=2, memory_mb=4096, root_gb=40, ephemeral_gb=0, swap=0)


def make_nova(directory):
    manager.make_nova_databases(directory)
    return "sqlite:///%s/cell1.sqlite" % directory


def write_instances(cell_url, nodes, per_node):
    flavor = objects.Flavor(
        id=1, flavorid="m", name="m", extra_specs={}, **FLAVOR
    )
    extra = jsonutils.dumps(
        {"cur": flavor.obj_to_primitive(), "old": None, "new": None}
    )
    engine = sa.create_engine(cell_url)
    meta = sa.MetaData()
    instances, extras = (
        sa.Table(name, meta, autoload=True, autoload_with=engine)
        for name in ("instances", "instance_extra")
    )
    now = datetime.datetime.utcnow()
    with engine.begin() as conn:
        for node in nodes:
            uuids = [str(uuid.uuid4()) for _ in range(per_node)]
            conn.execute(
                instances.insert(),
                [
                    dict(
                        uuid=u,
                        host=node,
                        node=node,
                        vm_state="active",
                        image_ref=str(uuid.uuid4()),
                        project_id="p",
                        user_id="u",
                        deleted=0,
                        created_at=now,
                        instance_type_id=1,
                        **{k: v for k, v in FLAVOR.items() if k != "swap"},
                    )
                    for u in uuids
                ],
            )
            conn.execute(
                extras.insert(),
                [
                    dict(instance_uuid=u, flavor=extra, deleted=0)
                    for u in uuids
                ],
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--per-node", type=int, default=20)
    parser.add_argument("--url", help="grant_scheduler's database URL")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="reconcile-cost-")
    cell_url = make_nova(directory)
    nodes = ["cmp%04d" % i for i in range(args.nodes)]
    write_instances(cell_url, nodes, args.per_node)
    url = args.url or "sqlite:///%s/gs.sqlite" % directory
    gs_conf = os.path.join(directory, "gs.conf")
    with open(gs_conf, "w") as f:
        f.write("[grant_scheduler_database]\nconnection = %s\n" % url)
    subprocess.run(
        ["grant-scheduler-manage", "--config-file", gs_conf, "db", "sync"],
        check=True,
    )
    gs = api.GrantScheduler.from_url(url)
    capacity = api.Capacity(
        api.Resources(4 * args.per_node, 8192 * args.per_node, 80 * 1000)
    )
    for node in nodes:
        gs.report_host(node, node, capacity)
    records = reconcile.NovaRecords(nova_context.get_admin_context())
    reconciler = reconcile.Reconciler(lambda: gs, records)
    for label in ("first run (claims every instance)", "steady state"):
        start = time.monotonic()
        corrections = reconciler.run()
        elapsed = time.monotonic() - start
        print(
            "%s: %.1f s, %d nodes corrected"
            % (label, elapsed, len(corrections))
        )
    claimed = len(gs.claims())
    print("claims: %d of %d instances" % (claimed, args.nodes * args.per_node))
    return 0 if claimed == args.nodes * args.per_node else 1


if __name__ == "__main__":
    raise SystemExit(main())
