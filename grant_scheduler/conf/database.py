"""The ``[grant_scheduler_database]`` option group.

The plugin keeps its tables in a database of its own choosing and never reads
Nova's ``[database]`` group: an enginefacade that is not configured falls back
to ``cfg.CONF.database``, which inside Nova is Nova's own database (DESIGN
H10).  The options are oslo.db's, copied so that changing their defaults here
does not change them for any other group registered in the same process.
"""

import copy

from oslo_config import cfg
from oslo_db import options as oslo_db_options

GROUP_NAME = "grant_scheduler_database"

DEFAULT_CONNECTION = "sqlite:///grant_scheduler.sqlite"

group = cfg.OptGroup(
    GROUP_NAME,
    title="grant_scheduler database options",
    help="""
The database that holds grant_scheduler's hosts, grants and claims tables.

It may be the same server, or even the same database, as Nova's: the tables
are prefixed ``gs_`` so they do not clash with Nova's own.  On a Galera
cluster set ``mysql_wsrep_sync_wait = 1`` so that a verification read sees
what another node committed.
""",
)

# NOTE: these defaults differ from oslo.db's on purpose.  The engine starts
# lazily on the first request, so retrying the first connection for minutes
# only hides a wrong URL; request-level retries (wrap_db_retry) cover a
# database that goes away later.
CONNECT_RETRIES = {"max_retries": 3, "retry_interval": 1}
_DEFAULT_OVERRIDES = {"connection": DEFAULT_CONNECTION, **CONNECT_RETRIES}


# NOTE: options with no meaning for a synchronous, single-backend plugin.
_NOT_APPLICABLE = {
    "backend",
    "asyncio_connection",
    "asyncio_slave_connection",
}


def _database_opts():
    opts = []
    for opt in oslo_db_options.database_opts:
        if opt.dest in _NOT_APPLICABLE:
            continue
        opt = copy.deepcopy(opt)
        # NOTE: oslo.db's options carry deprecated names in [DEFAULT] and
        # [DATABASE] (sql_connection, ...).  Inherited here they would read
        # Nova's database settings into this group.
        opt.deprecated_opts = []
        if opt.dest in _DEFAULT_OVERRIDES:
            opt.default = _DEFAULT_OVERRIDES[opt.dest]
        if opt.dest == "connection":
            opt.help = (
                "The SQLAlchemy URL of grant_scheduler's database, for "
                "example mysql+pymysql://user:password@host/grant_scheduler "
                "or postgresql+psycopg2://user:password@host/grant_scheduler. "
                "The default is a SQLite file in the working directory, "
                "which suits a single machine and the benchmark only."
            )
            opt.secret = True
        opts.append(opt)
    return opts


database_opts = _database_opts()


def register_opts(conf):
    conf.register_group(group)
    conf.register_opts(database_opts, group=group)


def list_opts():
    return {group: database_opts}
