"""What runs in Nova's scheduler process when the driver is enabled.

* ``filter_scheduler``: Nova 17-22's engine, Nova's own FilterScheduler
  with a grant written before each placement claim (``NodeGrants``);
* ``candidates``: the allocation candidates the driver finds itself
  (18-22), a built request for one unnumbered group of resources;
* ``host_manager``: Nova's HostManager, consuming grants from the
  instance information computes send and keeping HostStates between
  requests;
* ``ranker``: Nova 13-16's engine, Nova's filters and weighers ranking
  the hosts the protocol then grants (``NovaRanker``);
* ``stock``: Nova 13-16's choice while grant_scheduler's database is down.
"""
