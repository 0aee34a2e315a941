"""One ``GrantScheduler`` per process, built from Nova's configuration.

Nova builds its scheduler driver, filters and hooks before it forks its
workers (H9), so nothing here connects or starts anything until the
first real use, which happens in the worker.  The driver, the filter, the
hooks and the host manager each hold a ``Lazy``; the ``GrantScheduler``s
they build in one process share one ``Database`` (one enginefacade and one
connection pool) per database URL and options (``GrantScheduler.from_conf``
uses ``Database.shared``).  The options live in their own groups
(``[grant_scheduler]``, ``[grant_scheduler_database]``) of Nova's
configuration object; an unset ``connection`` there never falls back to
Nova's own database (H10).
"""

import os
import threading

from oslo_config import cfg

from grant_scheduler import api
from grant_scheduler import conf as gs_conf
from grant_scheduler.conf import database as db_conf


def nova_conf():
    """Nova's configuration object (``nova.conf.CONF`` is ``cfg.CONF``)."""
    return cfg.CONF


class Lazy:
    """Builds a ``GrantScheduler`` on first use, once per process.

    Every ``Lazy`` of a process on the same ``[grant_scheduler_database]``
    gets a ``GrantScheduler`` over the same ``Database``.  A fork after
    first use (a worker inheriting a parent's object) is detected by pid
    and gets a fresh object over the child's own ``Database``, so no
    pooled connection is ever shared across processes.
    """

    def __init__(self, conf=None, **kwargs):
        """:param kwargs: passed to ``GrantScheduler.from_conf``."""
        self._conf = conf
        self._kwargs = kwargs
        self._lock = threading.Lock()
        self._built = None
        self._pid = None

    @property
    def conf(self):
        if self._conf is None:
            self._conf = nova_conf()
        gs_conf.register_opts(self._conf)
        return self._conf

    def get(self):
        with self._lock:
            if self._built is None or self._pid != os.getpid():
                conf = self.conf
                db_conf.require_connection(conf, "Nova's configuration")
                self._built = api.GrantScheduler.from_conf(
                    conf, **self._kwargs
                )
                self._pid = os.getpid()
            return self._built

    def set(self, grant_scheduler):
        """Use ``grant_scheduler`` from now on (tests, embedding)."""
        with self._lock:
            self._built = grant_scheduler
            self._pid = os.getpid()
