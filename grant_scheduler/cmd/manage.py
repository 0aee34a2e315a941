"""grant-scheduler-manage: the operator's command line.

    grant-scheduler-manage --config-file grant_scheduler.conf db sync
    grant-scheduler-manage --config-file grant_scheduler.conf db version
    grant-scheduler-manage --config-file F hosts
    grant-scheduler-manage --config-file F grants [--host H]
    grant-scheduler-manage --config-file F reap
    grant-scheduler-manage --config-file F check [--quiescent]

Errors a person can act on print one line on standard error and exit 1;
nothing prints a traceback unless ``--debug`` is given.
"""

import sys

from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_log import log as logging

from grant_scheduler import conf as gs_conf
from grant_scheduler import exception
from grant_scheduler.cmd import table
from grant_scheduler.db import api as db_api
from grant_scheduler.db import migration

LOG = logging.getLogger(__name__)

EXIT_ERROR = 1


def _database(conf):
    return db_api.Database.from_conf(conf)


def db_sync(conf):
    database = _database(conf)
    revision = conf.command.revision
    migration.upgrade(database, revision)
    print(
        "Database %s is at revision %s."
        % (database.safe_url, migration.current_revision(database))
    )


def db_version(conf):
    database = _database(conf)
    current = migration.current_revision(database)
    if current is None:
        migration.check_schema(database)
    print(current)


def _api(conf):
    from grant_scheduler import api

    gs = api.GrantScheduler.from_conf(conf)
    gs.check_schema()
    return gs


def _limit_text(state, name):
    return "%d/%d" % (
        getattr(state.used, name) + getattr(state.granted, name),
        getattr(state.limit, name),
    )


def list_hosts(conf):
    rows = []
    for report in _api(conf).hosts():
        state = report.state
        rows.append(
            (
                state.host,
                state.node,
                _limit_text(state, "vcpus"),
                _limit_text(state, "memory_mb"),
                _limit_text(state, "disk_gb"),
                "%d/%d/%d"
                % (
                    state.granted.vcpus,
                    state.granted.memory_mb,
                    state.granted.disk_gb,
                ),
                report.last_grant_ticket,
                report.last_grant_at or "-",
            )
        )
    print(
        table.render(
            (
                "host",
                "node",
                "vcpus",
                "ram_mb",
                "disk_gb",
                "won grants",
                "last ticket",
                "last grant at (UTC)",
            ),
            rows,
        )
    )
    print(
        "vcpus, ram_mb, disk_gb: used + won grants / limit; "
        "won grants: vcpus/ram_mb/disk_gb"
    )


def list_grants(conf):
    rows = [
        (
            row.id,
            row.host or "(gone)",
            row.node or "-",
            row.ticket,
            row.state,
            "%d/%d/%d"
            % (
                row.resources.vcpus,
                row.resources.memory_mb,
                row.resources.disk_gb,
            ),
            row.instance_uuid or "-",
            row.scheduler,
            row.created_at,
        )
        for row in _api(conf).grants(host=conf.command.host)
    ]
    print(
        table.render(
            (
                "id",
                "host",
                "node",
                "ticket",
                "state",
                "cpu/ram/disk",
                "instance",
                "scheduler",
                "created at (UTC)",
            ),
            rows,
        )
    )


def reap(conf):
    counts = _api(conf).reap()
    print(table.render(("reason", "grants deleted"), sorted(counts.items())))


def check(conf):
    violations = _api(conf).check(quiescent=conf.command.quiescent)
    if not violations:
        print("OK: I1 and I4 hold on every host.")
        return
    print(
        table.render(
            ("invariant", "host", "node", "detail"),
            [(v.invariant, v.host, v.node, v.detail) for v in violations],
        )
    )
    raise exception.InvariantViolated(count=len(violations))


def _add_db_parsers(subparsers):
    db = subparsers.add_parser("db", help="Database schema commands.")
    db_commands = db.add_subparsers(dest="db_command", required=True)

    sync = db_commands.add_parser(
        "sync", help="Create or upgrade the tables to the newest revision."
    )
    sync.add_argument(
        "revision",
        nargs="?",
        default="head",
        help="Revision to upgrade to (default: head).",
    )
    sync.set_defaults(handler=db_sync)

    version = db_commands.add_parser(
        "version", help="Print the database's current schema revision."
    )
    version.set_defaults(handler=db_version)


def add_command_parsers(subparsers):
    _add_db_parsers(subparsers)
    hosts = subparsers.add_parser(
        "hosts", help="Per-host capacity, usage and won grants."
    )
    hosts.set_defaults(handler=list_hosts)
    grants = subparsers.add_parser("grants", help="List grant rows.")
    grants.add_argument("--host", help="Only grants on this host.")
    grants.set_defaults(handler=list_grants)
    reaper = subparsers.add_parser(
        "reap", help="Delete superseded, withdrawn, orphaned, expired grants."
    )
    reaper.set_defaults(handler=reap)
    checker = subparsers.add_parser(
        "check", help="Check invariants I1 and I4; exit 1 on a violation."
    )
    checker.add_argument(
        "--quiescent",
        action="store_true",
        help="Also report any remaining grant as a leak (run when no build "
        "is in flight and one TTL plus one reap have passed).",
    )
    checker.set_defaults(handler=check)


command_opt = cfg.SubCommandOpt(
    "command",
    title="Commands",
    help="Available commands",
    handler=add_command_parsers,
)


def _parse(argv, conf):
    gs_conf.register_opts(conf)
    logging.register_options(conf)
    logging.set_defaults(
        default_log_levels=logging.get_default_log_levels()
        + ["alembic.runtime.migration=WARN"]
    )
    conf.register_cli_opt(command_opt)
    conf(argv, project="grant_scheduler", prog="grant-scheduler-manage")
    logging.setup(conf, "grant_scheduler")


def _one_line(exc):
    if isinstance(exc, db_exc.DBError):
        inner = exc.inner_exception or exc
        text = str(getattr(inner, "orig", None) or inner)
        return "database error: %s" % (text.strip().splitlines() or ["?"])[0]
    return str(exc)


def main(argv=None, conf=None):
    conf = conf if conf is not None else cfg.CONF
    argv = sys.argv[1:] if argv is None else argv
    try:
        _parse(argv, conf)
    except cfg.Error as exc:
        print("ERROR: %s" % exc, file=sys.stderr)
        return EXIT_ERROR
    try:
        conf.command.handler(conf)
    except (exception.GrantSchedulerError, db_exc.DBError) as exc:
        if conf.debug:
            LOG.exception("Command failed")
        print("ERROR: %s" % _one_line(exc), file=sys.stderr)
        return EXIT_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
