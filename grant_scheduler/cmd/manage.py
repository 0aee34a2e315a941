"""grant-scheduler-manage: the operator's command line.

    grant-scheduler-manage --config-file grant_scheduler.conf db sync
    grant-scheduler-manage --config-file grant_scheduler.conf db version
    grant-scheduler-manage --config-file F hosts
    grant-scheduler-manage --config-file F grants [--host H]
    grant-scheduler-manage --config-file F claims [--host H]
    grant-scheduler-manage --config-file F reap
    grant-scheduler-manage --config-file F check [--quiescent]

Every error prints one line on standard error and exits 1; nothing prints a
traceback unless ``--debug`` is given, and nothing ever prints a password
(URLs are masked, and every log line and error is scrubbed of the
configured one).  Before anything connects, every option value is checked,
the database URL must be readable, and a configuration file that sets no
``[grant_scheduler_database] connection`` is refused rather than falling
back to the built-in SQLite file.  A successful command says on standard
error which database it used.
"""

import logging as std_logging
import os
import sys
import urllib.parse

from oslo_config import cfg
from oslo_log import log as logging

from alembic import util as alembic_util
from grant_scheduler import api
from grant_scheduler import conf as gs_conf
from grant_scheduler import urls
from grant_scheduler.cmd import table
from grant_scheduler.conf import database as db_conf

LOG = logging.getLogger(__name__)

EXIT_ERROR = 1

# Scrubbed secrets shorter than this would garble the text around them.
_MIN_SECRET = 4


class Scrubber:
    """Removes known secrets from text: the last line of defence."""

    def __init__(self):
        self.secrets = set()

    def add_url(self, url):
        """Remember the password and credential query values of ``url``."""
        for candidate in urls.secrets(url):
            for form in (
                candidate,
                urllib.parse.unquote(candidate),
                urllib.parse.unquote_plus(candidate),
            ):
                if len(form) >= _MIN_SECRET and form != "***":
                    self.secrets.add(form)

    def __call__(self, text):
        text = str(text)
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    def install(self):
        """Scrub every line the root logger's handlers write."""
        for handler in std_logging.getLogger().handlers:
            original = handler.format
            handler.format = lambda record, f=original: self(f(record))


class Run:
    """One command's view of the configuration and its database."""

    def __init__(self, conf, connection, from_default):
        self.conf = conf
        self.connection = connection
        self.from_default = from_default

    @property
    def command(self):
        return self.conf.command

    def describe(self):
        """The database in words: masked URL and where it came from."""
        text = urls.mask(self.connection)
        if self.from_default:
            return (
                "%s (the built-in default: no configuration file was found; "
                "a SQLite file in %s)" % (text, os.getcwd())
            )
        return "%s (%s)" % (text, db_conf.connection_source(self.conf))

    def grant_scheduler(self, create=False):
        """A ``GrantScheduler`` over the configured database; without
        ``create`` a missing SQLite file is reported instead of created."""
        gs = api.GrantScheduler.from_conf(self.conf)
        url = gs.database.url
        if (
            not create
            and url.get_backend_name() == "sqlite"
            and url.database
            and url.database != ":memory:"
            and not os.path.exists(url.database)
        ):
            raise api.SchemaNotMigrated(
                url=urls.mask(self.connection),
                current="none (the SQLite file %s does not exist; nothing "
                "was created)" % os.path.abspath(url.database),
                head=api.schema_head(),
            )
        return gs

    def api(self):
        """The ``GrantScheduler``, its schema checked."""
        gs = self.grant_scheduler()
        gs.check_schema()
        return gs

    def done(self):
        print("Database: %s" % _printable(self.describe()), file=sys.stderr)


def db_sync(run):
    gs = run.grant_scheduler(create=True)
    gs.upgrade_schema(run.command.revision)
    print(
        "Database %s is at revision %s."
        % (_printable(run.describe()), gs.schema_revisions().current)
    )


def db_version(run):
    gs = run.grant_scheduler()
    current = gs.schema_revisions().current
    if current is None:
        gs.check_schema()
    print(current)
    run.done()


def _classes(state):
    """The node's classes: those it offers, then any it no longer offers
    that is still used, granted or limited."""
    offered = list(state.capacity.inventories)
    others = [
        name
        for amounts in (state.used, state.granted, state.limit)
        for name in amounts
        if name not in offered
    ]
    return offered + sorted(set(others), key=others.index)


def _class_cells(state, name):
    """One class's inventory and books: total, reserved, ratio, units,
    capacity, used, won grants, free."""
    inventory = state.capacity.inventories.get(name)
    if inventory is None:
        offered = ("-", "-", "-", "-")
    else:
        offered = (
            inventory.total,
            inventory.reserved,
            inventory.allocation_ratio,
            "%d/%d/%d"
            % (inventory.min_unit, inventory.max_unit, inventory.step_size),
        )
    limit, used, granted = (
        state.limit[name],
        state.used[name],
        state.granted[name],
    )
    return offered + (limit, used, granted, limit - used - granted)


def list_hosts(run):
    rows = []
    for report in run.api().hosts():
        state = report.state
        last = (report.last_grant_ticket, report.last_grant_at or "-")
        # NOTE: a node that offers nothing still gets its line.
        for name in _classes(state) or ["-"]:
            rows.append(
                (state.host, state.node, name)
                + _class_cells(state, name)
                + last
            )
            last = ("", "")
    print(
        table.render(
            (
                "host",
                "node",
                "class",
                "total",
                "reserved",
                "ratio",
                "min/max/step",
                "capacity",
                "used",
                "won grants",
                "free",
                "last ticket",
                "last grant at (UTC)",
            ),
            rows,
        )
    )
    print(
        "capacity: (total - reserved) x ratio, rounded down; "
        "free: capacity - used - won grants"
    )
    print(
        "min/max/step: one allocation's min_unit/max_unit/step_size "
        "('-': the class is not offered)"
    )
    run.done()


def list_grants(run):
    rows = [
        (
            row.id,
            row.host or "(gone)",
            row.node or "-",
            row.ticket,
            row.state,
            table.amounts(row.resources),
            row.instance_uuid or "-",
            row.scheduler,
            row.created_at,
        )
        for row in run.api().grants(host=run.command.host)
    ]
    print(
        table.render(
            (
                "id",
                "host",
                "node",
                "ticket",
                "state",
                "resources",
                "instance",
                "scheduler",
                "created at (UTC)",
            ),
            rows,
        )
    )
    run.done()


def list_claims(run):
    rows = [
        (
            row.instance_uuid,
            row.host or "(gone)",
            row.node or "-",
            table.amounts(row.resources),
            "-" if row.grant_ticket is None else row.grant_ticket,
            row.created_at,
        )
        for row in run.api().claims(host=run.command.host)
    ]
    print(
        table.render(
            (
                "instance",
                "host",
                "node",
                "resources",
                "grant ticket",
                "created at (UTC)",
            ),
            rows,
        )
    )
    run.done()


def reap(run):
    counts = run.api().reap()
    print(table.render(("reason", "rows deleted"), sorted(counts.items())))
    run.done()


def check(run):
    violations = run.api().check(quiescent=run.command.quiescent)
    if not violations:
        print("OK: I1 and I4 hold on every host.")
        run.done()
        return
    print(
        table.render(
            ("invariant", "host", "node", "detail"),
            [(v.invariant, v.host, v.node, v.detail) for v in violations],
        )
    )
    raise api.InvariantViolated(count=len(violations))


def _add_db_parsers(subparsers):
    db = subparsers.add_parser("db", help="Database schema commands.")
    db_commands = db.add_subparsers(dest="db_command", required=True)

    sync = db_commands.add_parser(
        "sync",
        help="Create or upgrade the tables to the newest revision (safe to "
        "run from several places at once).",
    )
    sync.add_argument(
        "revision",
        nargs="?",
        default="head",
        help="Revision to upgrade to: 'head' (the default) or one of this "
        "release's revision ids.",
    )
    sync.set_defaults(handler=db_sync)

    version = db_commands.add_parser(
        "version", help="Print the database's current schema revision."
    )
    version.set_defaults(handler=db_version)


def add_command_parsers(subparsers):
    _add_db_parsers(subparsers)
    hosts = subparsers.add_parser(
        "hosts",
        help="Per-host capacity, usage and won grants, by resource class.",
    )
    hosts.set_defaults(handler=list_hosts)
    grants = subparsers.add_parser("grants", help="List grant rows.")
    grants.add_argument("--host", help="Only grants on this host.")
    grants.set_defaults(handler=list_grants)
    claims = subparsers.add_parser("claims", help="List claim rows.")
    claims.add_argument("--host", help="Only claims on this host.")
    claims.set_defaults(handler=list_claims)
    reaper = subparsers.add_parser(
        "reap",
        help="Delete superseded, expired and orphaned grants, and "
        "orphaned claims.",
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


def _load(argv, conf):
    """Parse the command line and files and check every value.

    :raises GrantSchedulerError: any value that cannot be used, in one line.
    """
    gs_conf.register_opts(conf)
    logging.register_options(conf)
    conf.register_cli_opt(command_opt)
    gs_conf.parse(
        conf, argv, project="grant_scheduler", prog="grant-scheduler-manage"
    )
    gs_conf.check_values(conf)
    api.Settings.from_conf(conf)


def _connection_text(conf):
    """The configured URL as written, for the scrubber (None if unreadable)."""
    try:
        return conf[db_conf.GROUP_NAME].connection
    except cfg.Error:
        return None


def _run(conf):
    """The command's ``Run``, its database URL checked.

    :raises DatabaseConfigError: the URL cannot be read safely, or a
        configuration file was read that does not set it.
    """
    if db_conf.config_files(conf):
        connection = db_conf.require_connection(conf)
        from_default = False
    else:
        connection = db_conf.read_connection(conf)
        from_default = not db_conf.connection_is_set(conf)
    return Run(conf, connection, from_default)


def _setup_logging(conf, scrub):
    levels = logging.get_default_log_levels() + [
        "alembic.runtime.migration=WARN"
    ]
    if not conf.debug:
        # NOTE: oslo.db logs each failed connection attempt as a warning;
        # the one-line error says it all.
        levels.append("oslo_db.sqlalchemy.engines=ERROR")
    conf.set_default("default_log_levels", levels)
    logging.setup(conf, "grant_scheduler")
    scrub.install()


def _printable(text):
    """One terminal-safe line."""
    return table.escape(text, backslash=False)


def _error(text, conf=None):
    """Print the one line; with --log-file, log it there too."""
    line = _printable(text)
    print("ERROR: %s" % line, file=sys.stderr)
    if conf is not None and conf.log_file:
        LOG.error("%s", line)
    return EXIT_ERROR


def main(argv=None, conf=None):
    conf = conf if conf is not None else cfg.CONF
    argv = sys.argv[1:] if argv is None else argv
    scrub = Scrubber()
    try:
        _load(argv, conf)
    except (api.GrantSchedulerError, cfg.Error) as exc:
        line = scrub(exc)
        try:
            # NOTE: to write the line to --log-file too, when the files
            # were read and the bad value is not a logging option.
            _setup_logging(conf, scrub)
        except Exception:  # noqa: BLE001 - then standard error only
            return _error(line)
        return _error(line, conf)
    scrub.add_url(_connection_text(conf))
    try:
        _setup_logging(conf, scrub)
    except Exception as exc:  # noqa: BLE001 - e.g. a log_dir that is absent
        return _error(
            scrub("cannot set up logging: %s: %s" % (type(exc).__name__, exc))
        )
    try:
        run = _run(conf)
    except api.GrantSchedulerError as exc:
        return _error(scrub(exc), conf)
    try:
        conf.command.handler(run)
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        if conf.debug:
            LOG.exception("Command failed")
        if isinstance(
            exc,
            (api.GrantSchedulerError, alembic_util.CommandError),
        ):
            line = str(exc)
            if run.from_default:
                line += " [database: %s]" % run.describe()
            return _error(scrub(line), conf)
        text = (str(exc).strip().splitlines() or [""])[0]
        return _error(
            "unexpected %s%s (run with --debug for the traceback)"
            % (type(exc).__name__, ": " + scrub(text) if text else ""),
            conf,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
