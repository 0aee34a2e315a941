"""Nova's side of grant_scheduler: adapters over the public API.

This package is the only place that imports Nova, and it does so lazily.
Its folders follow the Nova process each part runs in:

* ``scheduler/``: the scheduler process (the engines, candidates, the
  host manager);
* ``books/``: keeping the books equal to what Nova runs (claim rules,
  inventory, registration, instance information, the grant follower,
  the reconciliation), used by both processes;
* ``compute/``: the compute process (the build hook, the claiming virt
  drivers).

Beside them, the doors Nova and operators name, whose paths stay:

* ``driver.GrantSchedulerDriver``: the ``grant_scheduler`` scheduler
  driver (``nova.scheduler.driver`` entry point, Nova 13-22);
* ``filters.GrantsFilter``: a host filter that subtracts live grants, for
  Nova's stock scheduler on any release;
* ``virt``: where ``compute_driver = grant_scheduler.<name>`` is found,
  and ``python3 -m grant_scheduler.nova.virt install``;

and what every process shares: ``service`` (one ``GrantScheduler`` per
process, built on first use from Nova's configuration, never at import or
construction, H9), ``outage`` (grant_scheduler's database failing under
Nova), ``compat`` (what differs between Nova releases: every release
check is there) and ``amounts`` (what Nova's objects hold, in
grant_scheduler's amounts).
"""
