"""``grant-scheduler-audit``: the books against what Nova runs.

::

    grant-scheduler-audit --config-file /etc/nova/nova.conf [--fix]

Reads Nova's records (every cell's instances with their host, node and
flavour, building ones included, and the migrations in progress) with
Nova's own configuration, which also names grant_scheduler's database
(``[grant_scheduler_database] connection``), and the claims of every node
grant_scheduler knows.  Prints one line per node where they differ (the
node, what Nova runs there, what the books claim, each summed by resource
class: ``VCPU=2 MEMORY_MB=1024 DISK_GB=20``, ``CUSTOM_BAREMETAL_GOLD=1``)
and exits 1 when any does, 0 when none.  ``--fix`` then corrects those
nodes once, as the schedulers' periodic reconciliation does, and exits 0
when the books agree afterwards.

``grant-scheduler-manage check`` is the tables' own consistency (usage,
grants and claims agree with each other); this is the truth: whether they
agree with what runs.  Needs Nova installed (run it where nova-scheduler
runs).
"""

import argparse
import sys

from grant_scheduler import api
from grant_scheduler.cmd import table


def _parse(argv):
    parser = argparse.ArgumentParser(
        prog="grant-scheduler-audit",
        description="Compare grant_scheduler's claims with what Nova runs "
        "on each node; exit 1 on any difference.",
    )
    parser.add_argument(
        "--config-file",
        action="append",
        required=True,
        help="Nova's configuration file (repeatable, as for Nova).",
    )
    parser.add_argument(
        "--fix",
        action="store_true",
        help="Correct the books of every node that differs, once.",
    )
    return parser.parse_args(argv)


def _describe(consumers):
    """``{consumer uuid: Resources}`` in words: how many, their sum by
    resource class, and who."""
    if not consumers:
        return "nothing"
    total = sum(consumers.values(), api.Resources())
    return "%d (%s: %s)" % (
        len(consumers),
        table.amounts(total),
        ", ".join(sorted(consumers)),
    )


def _placement_allocations():
    """``f(node_uuid)`` reading what each consumer holds on a node's
    provider from placement (Nova 17-22: dedicated CPUs may be PCPU or
    VCPU, and placement's allocation says which), or None."""
    from grant_scheduler.nova import compat
    from grant_scheduler.nova.books import inventory

    if not compat.claims_in_placement():
        return None
    clients = []

    def client():
        if not clients:
            clients.append(compat.scheduler_report_client())
        return clients[0]

    placement = inventory.PlacementInventory(client)
    return lambda node_uuid: placement.allocations(None, node_uuid)


def line(divergence):
    """One node where the books differ from what Nova runs (a
    ``reconcile.Divergence``), each side's amounts by resource class."""
    return "%s/%s: Nova runs %s; the books claim %s" % (
        divergence.host,
        divergence.node,
        _describe(divergence.nova),
        _describe(divergence.books),
    )


def main(argv=None):
    args = _parse(sys.argv[1:] if argv is None else argv)
    try:
        from nova import config as nova_config
        from nova import objects
    except ImportError:
        print("grant-scheduler-audit: Nova is not installed here")
        return 2
    from grant_scheduler.nova import service
    from grant_scheduler.nova.books import reconcile

    argv = ["grant-scheduler-audit"]
    for path in args.config_file:
        argv += ["--config-file", path]
    nova_config.parse_args(argv)
    objects.register_all()
    lazy = service.Lazy()
    try:
        reconciler = reconcile.Reconciler(
            lazy.get, allocations=_placement_allocations()
        )
        found = reconciler.divergences()
        for divergence in found:
            print(line(divergence))
        if not found:
            print("OK: the books agree with what Nova runs on every node.")
            return 0
        if not args.fix:
            return 1
        for divergence, done in reconciler.run():
            print(
                "fixed %s/%s: claimed %d, resized %d, released %d"
                % (
                    divergence.host,
                    divergence.node,
                    len(done.claimed),
                    len(done.resized),
                    len(done.released),
                )
            )
        left = reconciler.divergences()
        for divergence in left:
            print("still: " + line(divergence))
        return 1 if left else 0
    except api.GrantSchedulerError as exc:
        print("grant-scheduler-audit: %s" % exc)
        return 2


if __name__ == "__main__":
    sys.exit(main())
