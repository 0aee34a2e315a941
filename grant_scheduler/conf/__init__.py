"""Configuration options of grant_scheduler.

One module per option group, as in placement's ``conf`` package; this module
registers them all on a ``ConfigOpts`` object.
"""

from grant_scheduler.conf import database
from grant_scheduler.conf import scheduler


def register_opts(conf):
    """Register every grant_scheduler option group on ``conf``."""
    database.register_opts(conf)
    scheduler.register_opts(conf)
