"""A piece of a scheduler process's work, run every few seconds.

The driver's periodic tasks run from Nova's scheduler manager, at most
every ``[scheduler] periodic_task_interval`` (a minute by default); the
work that must run more often (following the live grants, keeping the
views' full reads off the requests) runs on loops of its own, on green
threads, as Nova's services run on eventlet.

Only imported when Nova is.
"""

import os
import weakref

from oslo_log import log as logging
from oslo_service import loopingcall

LOG = logging.getLogger(__name__)


class Loop:
    """Runs ``work(owner)`` every ``interval`` seconds in this process, on
    a green thread.

    Started from the scheduler's periodic tasks, so in the worker after
    Nova has forked it; stops by itself once its owner is gone.
    """

    def __init__(self, owner, work, interval, what):
        """
        :param owner: the object whose life bounds the loop (the driver's
            parts).
        :param work: ``f(owner)``, one pass.
        :param interval: seconds between two passes; 0 never starts.
        :param what: what a pass does, for the log ("follow the live
            grants").
        """
        self._owner = weakref.ref(owner)
        self._work = work
        self._interval = interval
        self._what = what
        self._loop = None
        self._pid = None

    @property
    def running(self):
        return self._loop is not None and self._pid == os.getpid()

    def ensure_started(self):
        """Start the loop in this process unless it runs already."""
        if self._interval <= 0 or self.running:
            return
        self._pid = os.getpid()
        self._loop = loopingcall.FixedIntervalLoopingCall(self._tick)
        self._loop.start(interval=self._interval, initial_delay=self._interval)

    def stop(self):
        if self.running:
            self._loop.stop()
        self._loop = None

    def _tick(self):
        owner = self._owner()
        if owner is None:
            raise loopingcall.LoopingCallDone()
        try:
            self._work(owner)
        except Exception:  # noqa: BLE001 - the loop must outlive one pass
            LOG.warning("Could not %s", self._what, exc_info=True)
