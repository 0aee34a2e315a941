"""The books kept equal to what Nova runs, from whichever process.

* ``claims``: the claim rules every path shares (by grant, else by the
  instance's amount re-checked against the node);
* ``inventory``: what a node offers, as placement has it (17-22);
* ``registry``: compute nodes registered and their capacities reported;
* ``instance_info``: claims and releases from the instance information
  computes send to the schedulers;
* ``follow``: live grants followed to their instances in Nova's records;
* ``reconcile``: the claims made what Nova's records say each node runs.
"""
