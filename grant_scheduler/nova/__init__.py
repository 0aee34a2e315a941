"""Nova's side of grant_scheduler: thin adapters over the public API.

This package is the only place that imports Nova, and it does so lazily:

* ``driver.GrantSchedulerDriver``: the ``grant_scheduler`` scheduler driver
  (``nova.scheduler.driver`` entry point, Nova 13-22);
* ``hooks``: the ``build_instance`` and ``delete_instance`` hooks
  (``nova.hooks`` entry points, Nova 13-21) and the same claim as a Python
  call for releases without hooks;
* ``filters.GrantsFilter``: a host filter that subtracts live grants, for
  Nova's stock scheduler on any release;
* ``service``: one ``GrantScheduler`` per process, built on first use from
  Nova's configuration (never at import or construction, H9).
"""
