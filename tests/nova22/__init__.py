"""Tests that run only inside the Debian bullseye root with Nova 22.

``tox -e nova22`` builds the root (tools/nova22-root.sh) and runs these
together with tests/unit and tests/functional there.  They fail anywhere
else: they check the root's own stack.
"""
