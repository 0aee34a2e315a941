"""The benchmark's own way to build a ``GrantScheduler``.

The public constructor always uses the product's store.  The benchmark
also runs the unsafe and idealised baselines (``db.baselines``) behind the
same object, so that every strategy is driven, counted and checked the same
way; only this module can put such a store behind it.
"""

from grant_scheduler import api
from grant_scheduler.db import api as db_api
from grant_scheduler.db import store as gs_store


def grant_scheduler(url, settings=None, hooks=None, rng=None, store_cls=None):
    """A ``GrantScheduler`` over ``store_cls`` (default: the product's)."""
    database = db_api.Database(url)
    gs = api.GrantScheduler.__new__(api.GrantScheduler)
    gs._assemble(
        database,
        (store_cls or gs_store.Store)(database),
        settings,
        None,
        hooks,
        rng,
        None,
    )
    return gs


def store_of(gs):
    """The store behind a ``GrantScheduler`` built here."""
    return gs._store
