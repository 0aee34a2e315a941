"""Injection points: named places in the protocol where a test may act.

Off by default: a component built without ``Hooks`` fires into an empty
registry, which costs one dictionary lookup.  Tests use them to pause one
scheduler between two protocol steps while another runs (the deterministic
interleavings of doc/source/contributor/testing.rst), or to kill a process
at an exact step.

Points fired by the scheduler:

``view_loaded``
    The request's view is read; nothing is written yet.
``grant_inserted``
    The grant is written and holds its node's row lock, not committed.
``grant_verified``
    The grant's write is over: ``won`` says whether it was taken (and
    committed) or fitted no candidate (nothing written).
``grant_committed``
    The grant won and is committed; the answer is not yet returned.
``before_answer``
    Every instance of the request has a grant.

Points fired by the compute side:

``claim_locked``
    The local claim lock is held, the claim transaction not yet begun.
``claim_written``
    The grant's consumption and the usage are written, not yet committed.
"""


class Hooks:
    """A registry of callbacks per injection point."""

    def __init__(self):
        self._callbacks = {}

    def on(self, point, callback):
        """Call ``callback(**info)`` each time ``point`` is reached."""
        self._callbacks.setdefault(point, []).append(callback)
        return self

    def fire(self, point, **info):
        for callback in self._callbacks.get(point, ()):
            callback(**info)


NO_HOOKS = Hooks()
