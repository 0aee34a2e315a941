"""Entry point for oslo-config-generator (namespace ``grant_scheduler``)."""

from grant_scheduler.conf import database
from grant_scheduler.conf import scheduler


def list_opts():
    """Return ``[(group, [opts])]`` for every grant_scheduler option."""
    groups = {}
    for module in (database, scheduler):
        groups.update(module.list_opts())
    return [(group, opts) for group, opts in groups.items()]
