"""What the tests inside Nova 22 (``tests/nova22``) and inside Nova 18-21
(``tests/nova18_21``) share: the runner of a release's own functional
tests (``own_tests``) and the helpers of the test classes that run in a
release's functional framework (``in_nova``).  Imported only inside a
Nova process, after that process's monkey-patching.
"""
