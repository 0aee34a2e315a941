"""The ``[grant_scheduler_database]`` option group.

The plugin keeps its tables in a database of its own choosing and never reads
Nova's ``[database]`` group: an enginefacade that is not configured falls back
to ``cfg.CONF.database``, which inside Nova is Nova's own database
(H10).  The options are oslo.db's, copied so that changing their defaults here
does not change them for any other group registered in the same process;
whichever of them the installed oslo.db lacks are simply absent.

The module also holds the rules for reading ``connection``: a URL whose
password is not percent-encoded, or that oslo.config would rewrite (a raw
``$``), is refused without quoting it, and ``require_connection`` refuses the
built-in SQLite default where it would be silently wrong.
"""

import copy
import difflib
import os

from oslo_config import cfg
from oslo_config import types as cfg_types
from oslo_db import options as oslo_db_options

from grant_scheduler import exception
from grant_scheduler import urls
from grant_scheduler.conf import types

GROUP_NAME = "grant_scheduler_database"

DEFAULT_CONNECTION = "sqlite:///grant_scheduler.sqlite"

group = cfg.OptGroup(
    GROUP_NAME,
    title="grant_scheduler database options",
    help="""
The database that holds grant_scheduler's hosts, grants and claims tables.

It may be the same server, or even the same database, as Nova's: the tables
are prefixed ``gs_`` so they do not clash with Nova's own.  On a Galera
cluster set ``mysql_wsrep_sync_wait = 1`` (where the installed oslo.db has
that option) so that a read sees what another node committed.
""",
)

# NOTE: these defaults differ from oslo.db's on purpose.  The engine starts
# lazily on the first request, so retrying the first connection for minutes
# only hides a wrong URL; request-level retries (retry_policy) cover a
# database that goes away later.
CONNECT_RETRIES = {"max_retries": 3, "retry_interval": 1}
_DEFAULT_OVERRIDES = {"connection": DEFAULT_CONNECTION, **CONNECT_RETRIES}

# NOTE: options with no meaning for a synchronous, single-backend plugin.
# use_db_reconnect: a transaction is always retried after a lost connection
# (within retry_policy), so there is nothing to switch on.
# min_pool_size: oslo.db before 8.x (Nova 18-20) lists it, deprecated, and
# SQLAlchemy ignores it.
_NOT_APPLICABLE = {
    "min_pool_size",
    "backend",
    "asyncio_connection",
    "asyncio_slave_connection",
    "use_db_reconnect",
}

# NOTE: bounds for oslo.db's integer options, which have none of their own
# (-1 means "no limit" or "forever" where oslo.db or SQLAlchemy say so).
_INTEGER_BOUNDS = {
    "max_pool_size": (0, 10000),
    "max_overflow": (-1, 10000),
    "pool_timeout": (1, 3600),
    "max_retries": (-1, 1000),
    "retry_interval": (0, 3600),
    "connection_recycle_time": (-1, 7 * 24 * 3600),
    "idle_timeout": (-1, 7 * 24 * 3600),
    "connection_debug": (0, 100),
    "mysql_wsrep_sync_wait": (0, 15),
}

_RETRY_HELP = (
    " They bound the retries of one transaction after a deadlock, a Galera "
    "certification conflict or a lost connection: each transaction is "
    "retried in a fresh transaction at most db_max_retries times, waiting "
    "db_retry_interval seconds at first (doubled after each try when "
    "db_inc_retry_interval is true, up to db_max_retry_interval), before "
    "the caller gets DatabaseUnavailable or the database's error."
)

retry_opts = [
    cfg.IntOpt(
        "db_max_retries",
        default=30,
        min=0,
        max=1000,
        help="Most retries of one database transaction." + _RETRY_HELP,
    ),
    types.FiniteFloatOpt(
        "db_retry_interval",
        default=0.005,
        min=0.0,
        max=60.0,
        help="Seconds before the first retry of a database transaction."
        + _RETRY_HELP,
    ),
    cfg.BoolOpt(
        "db_inc_retry_interval",
        default=True,
        help="Double the wait after each retry of a database transaction."
        + _RETRY_HELP,
    ),
    types.FiniteFloatOpt(
        "db_max_retry_interval",
        default=0.5,
        min=0.0,
        max=3600.0,
        help="Longest wait, in seconds, between two retries of a database "
        "transaction." + _RETRY_HELP,
    ),
]

# retry_policy's keys (oslo_db.api.wrap_db_retry's arguments) by option.
_RETRY_KEYS = {
    "db_max_retries": "max_retries",
    "db_retry_interval": "retry_interval",
    "db_inc_retry_interval": "inc_retry_interval",
    "db_max_retry_interval": "max_retry_interval",
}


def _database_opts():
    own = {opt.dest for opt in retry_opts}
    opts = []
    for opt in oslo_db_options.database_opts:
        if opt.dest in _NOT_APPLICABLE or opt.dest in own:
            continue
        opt = copy.deepcopy(opt)
        # NOTE: oslo.db's options carry deprecated names in [DEFAULT] and
        # [DATABASE] (sql_connection, ...).  Inherited here they would read
        # Nova's database settings into this group.
        opt.deprecated_opts = []
        if opt.dest in _DEFAULT_OVERRIDES:
            opt.default = _DEFAULT_OVERRIDES[opt.dest]
        bounds = _INTEGER_BOUNDS.get(opt.dest)
        if bounds is not None and isinstance(opt.type, cfg_types.Integer):
            opt.type = cfg_types.Integer(min=bounds[0], max=bounds[1])
        if opt.dest == "connection":
            opt.help = (
                "The SQLAlchemy URL of grant_scheduler's database, for "
                "example mysql+pymysql://user:password@host/grant_scheduler "
                "or postgresql+psycopg2://user:password@host/grant_scheduler. "
                "Percent-encode any of @ : / ? # % in the user name or "
                "password (%40 %3A %2F %3F %23 %25), and write a $ as $$. "
                "The default is a SQLite file in the working directory, "
                "which suits a single machine and the benchmark only; "
                "grant-scheduler-manage refuses it when a configuration file "
                "was read, and Nova's services always do."
            )
            opt.secret = True
        if opt.dest == "slave_connection":
            opt.secret = True
        opts.append(opt)
    return opts + [copy.deepcopy(opt) for opt in retry_opts]


database_opts = _database_opts()


def register_opts(conf):
    conf.register_group(group)
    conf.register_opts(database_opts, group=group)


def list_opts():
    return {group: database_opts}


def retry_policy(conf_group=None):
    """How often, and how fast, a database transaction is retried.

    :param conf_group: ``conf.grant_scheduler_database`` (or a
        ``ConfigOpts`` with the group registered); None for the defaults.
    :returns: ``{"max_retries", "retry_interval", "inc_retry_interval",
        "max_retry_interval"}``, ready for ``oslo_db.api.wrap_db_retry``.
    """
    if isinstance(conf_group, cfg.ConfigOpts):
        conf_group = conf_group[GROUP_NAME]
    policy = {}
    for opt in retry_opts:
        value = opt.default if conf_group is None else conf_group[opt.dest]
        policy[_RETRY_KEYS[opt.dest]] = value
    return policy


# -- reading the connection ------------------------------------------------

# What oslo.config raises when a "$" in a value names nothing it knows.
SUBSTITUTION_ERRORS = (
    cfg.NoSuchOptError,
    cfg.NoSuchGroupError,
    cfg.TemplateSubstitutionError,
)

DOLLAR_REASON = (
    "it holds a '$', which oslo.config reads as a reference to another "
    "option; write each '$' of the value as '$$' (or percent-encode it in "
    "the password as %24)"
)


def check_url(url):
    """Raise ``DatabaseConfigError`` when ``url`` cannot be read safely.

    An empty URL passes (``Database`` reports it); so does anything that
    names its user, password and port unambiguously.
    """
    if not url:
        return
    problem = urls.problem(url)
    if problem is not None:
        raise exception.DatabaseConfigError(url=urls.mask(url), reason=problem)


def config_files(conf):
    """The configuration files ``conf`` read, in the order it read them."""
    files = list(getattr(conf, "config_file", None) or [])
    for directory in getattr(conf, "config_dir", None) or []:
        if isinstance(directory, str) and os.path.isdir(directory):
            files.extend(
                os.path.join(directory, name)
                for name in sorted(os.listdir(directory))
                if name.endswith(".conf")
            )
    return files


def raw_file_value(path, group_name, name):
    """The text of ``[group_name] name`` in ``path`` before substitution.

    None when the file does not set it or cannot be read.
    """
    sections = {}
    try:
        cfg.ConfigParser(path, sections).parse()
    except Exception:  # noqa: BLE001 - unreadable: oslo.config reports it
        return None
    values = sections.get(group_name, {}).get(name)
    if not values:
        return None
    return values[-1]


def has_substitution(raw):
    """True when oslo.config would substitute part of ``raw``."""
    unescaped = raw.replace("\\$", "").replace("$$", "")
    return "$" in unescaped


# NOTE(oslo.config): values from the environment (OS_<GROUP>__<NAME>)
# are not in Nova 18's 6.4 (they are in Nova 19's 6.8): no such location there.
_ENVIRONMENT = getattr(cfg.Locations, "environment", None)
_SET_BY_THE_OPERATOR = tuple(
    where
    for where in (cfg.Locations.user, cfg.Locations.command_line, _ENVIRONMENT)
    if where is not None
)


def _location(conf, name):
    get_location = getattr(conf, "get_location", None)
    if get_location is None:  # NOTE(oslo.config): before 5.3
        return None
    try:
        return get_location(name, GROUP_NAME)
    except AttributeError:
        # NOTE(oslo.config): in Nova 18's 6.4 the group must be
        # given as an OptGroup, not by its name.
        return get_location(name, cfg.OptGroup(GROUP_NAME))


def read_connection(conf):
    """``[grant_scheduler_database] connection``, checked.

    :raises DatabaseConfigError: oslo.config would substitute a ``$`` in
        it, or its user name, password or port cannot be read (see
        ``check_url``); the message never quotes the value.
    """
    try:
        connection = conf[GROUP_NAME].connection
    except SUBSTITUTION_ERRORS:
        # NOTE: the error names the text after the "$": part of a password.
        raise exception.DatabaseConfigError(
            url="(not shown)",
            reason="[%s] connection: %s" % (GROUP_NAME, DOLLAR_REASON),
        ) from None
    location = _location(conf, "connection")
    if location is not None and location.location == cfg.Locations.user:
        raw = raw_file_value(location.detail, GROUP_NAME, "connection")
        if raw is not None and has_substitution(raw):
            # Substituted without an error ("$host" is an option too).
            raise exception.DatabaseConfigError(
                url="(not shown)",
                reason="[%s] connection in %s: %s"
                % (GROUP_NAME, location.detail, DOLLAR_REASON),
            )
    check_url(connection)
    return connection


def connection_is_set(conf):
    """True unless ``connection`` is the built-in default, never set.

    A value from a file, the command line or the environment counts as set
    whatever it is.  A value set by the program (``set_override``,
    ``set_default``) counts unless it equals the default: oslo.config keeps
    reporting that location after ``clear_override``.
    """
    location = _location(conf, "connection")
    if location is not None:
        if location.location in _SET_BY_THE_OPERATOR:
            return True
        if location.location == cfg.Locations.opt_default:
            return False
    return conf[GROUP_NAME].connection not in (None, DEFAULT_CONNECTION)


def connection_source(conf):
    """Where ``connection`` was set, in words (for messages)."""
    location = _location(conf, "connection")
    if location is None or location.location == cfg.Locations.opt_default:
        return "the built-in default"
    if location.location == cfg.Locations.user:
        return "set in %s" % location.detail
    if location.location == cfg.Locations.command_line:
        return "set on the command line"
    if _ENVIRONMENT is not None and location.location == _ENVIRONMENT:
        return "set in the environment (%s)" % location.detail
    return "set by the program"


def _misspelt_groups(conf):
    try:
        sections = conf.list_all_sections()
    except Exception:  # noqa: BLE001 - before parsing, or an old oslo.config
        return []
    # NOTE: iterating a ConfigOpts yields its group (and [DEFAULT] option)
    # names without reading any value.
    known = {"DEFAULT", *conf}
    return difflib.get_close_matches(
        GROUP_NAME,
        [section for section in sections if section not in known],
        n=3,
        cutoff=0.6,
    )


def require_connection(conf, where=None):
    """Return ``connection``, refusing the built-in SQLite default.

    Every scheduler and compute host must share one database; a SQLite
    file in each working directory would silently grant the same capacity
    on every host, and a misspelt group in a configuration file would make
    ``db sync`` create that file.  An explicitly configured URL, SQLite
    included, is taken as meant.

    :param where: what to call the configuration in the message (for
        example "Nova's configuration"); default: the files read.
    :raises DatabaseConfigError: naming the option, where it was looked
        for and any section whose name looks like a misspelling of it.
    """
    connection = read_connection(conf)
    if connection_is_set(conf):
        return connection
    if where is None:
        files = config_files(conf)
        where = ", ".join(files) if files else "any configuration file"
    reason = "[%s] connection is not set in %s" % (GROUP_NAME, where)
    misspelt = _misspelt_groups(conf)
    if misspelt:
        reason += " (%s %s: a misspelt group name?)" % (
            "there is a section" if len(misspelt) == 1 else "there are",
            ", ".join("[%s]" % name for name in misspelt),
        )
    raise exception.DatabaseConfigError(
        url="(unset)",
        reason=reason + "; point it at the database every scheduler and "
        "compute host shares (the built-in default, a SQLite file in the "
        "working directory, is refused here)",
    )
