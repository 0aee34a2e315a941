"""Injection points: named places in the protocol where a test may act.

Off by default: a component built without ``Hooks`` fires into an empty
registry, which costs one dictionary lookup.  Tests use them to pause one
scheduler between two protocol steps while another runs (DESIGN section 6),
or to kill a process at an exact step.

Points fired by the scheduler:

``view_loaded``
    The baseline view is read; nothing is written yet.
``grant_inserted``
    The grant row is inserted and holds its ticket, not yet committed.
``grant_committed``
    The grant is committed, not yet verified.
``grant_verified``
    The verdict is known (``won``), the answer not yet returned.
``before_answer``
    Every instance of the request has a winning grant.

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
