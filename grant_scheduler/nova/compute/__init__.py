"""What runs in Nova's compute process (opt-in, or Nova 13-21's hooks).

* ``hooks``: the ``build_instance`` and ``delete_instance`` hooks
  (``nova.hooks`` entry points, 13-21) and the same claim as a Python
  call;
* ``virt``: the claiming virt drivers, which claim in ``spawn`` (found
  by Nova through ``grant_scheduler.nova.virt``).
"""
