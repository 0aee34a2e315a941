"""grant_scheduler in Nova 18, 19, 20 and 21 (PyPI releases, each in a venv
inside the Debian bullseye root): run with ``tools/nova-releases.sh test``.
"""
