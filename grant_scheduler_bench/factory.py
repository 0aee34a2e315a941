"""The benchmark's own way to build a ``GrantScheduler``.

The public constructor uses the product's store unless given another
(``store=``).  The benchmark also runs the unsafe and idealised baselines
(``grant_scheduler_bench.baselines``) behind the same object, so that every
strategy is driven, counted and checked the same way; it puts them there
through this module.
"""

from grant_scheduler import api


def grant_scheduler(url, settings=None, hooks=None, rng=None, store_cls=None):
    """A ``GrantScheduler`` over ``store_cls`` (default: the product's)."""
    database = api.Database(url)
    store = (store_cls or api.SQLStore)(database)
    return api.GrantScheduler(
        database, settings, hooks=hooks, rng=rng, store=store
    )


def store_of(gs):
    """The store behind a ``GrantScheduler`` built here."""
    return gs.store
