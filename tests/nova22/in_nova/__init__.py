"""Tests against Nova 22's running services, in a monkey-patched process.

Not collected by pytest (no ``test_`` modules here): ``test_in_nova.py``
runs each class through ``tests.nova22.inside``.
"""
