"""Run one test class of ``tests.nova22.in_nova`` in a process of its own.

``python3 -m tests.nova22.inside MODULE CLASS`` imports
``nova.monkey_patch`` before anything else, as every Nova service does
(``nova/cmd/__init__.py``) and as Nova's functional tests require, then
runs the class with unittest and exits 0 only if every test passed.  The
pytest process that runs tests/unit and tests/functional must not be
monkey-patched by eventlet (their threads would become green threads), so
``test_in_nova.py`` starts this for each class.
"""

import nova.monkey_patch  # noqa: F401,I001 - first, as in nova-scheduler

import importlib
import sys
import unittest


def main(argv):
    if len(argv) != 3:
        print("usage: python3 -m tests.nova22.inside MODULE CLASS")
        return 2
    module = importlib.import_module(argv[1])
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(
        getattr(module, argv[2])
    )
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=2)
    return 0 if runner.run(suite).wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
