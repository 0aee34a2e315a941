#!/usr/bin/env bash
# Run a command in the Nova 22 root, cwd /src (this checkout, read-write):
#   tools/nova22-run.sh python3 -m pytest tests/nova22
# /src is the checkout this script belongs to, wherever it is run from: to
# run another tree (a worktree of an older commit), use that tree's copy.
# Shorthand for "tools/nova22-root.sh run ..."; see that script.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/nova22-root.sh" run "$@"
