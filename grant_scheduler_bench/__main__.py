"""``python3 -m grant_scheduler_bench``: the benchmark's command line."""

import sys

from grant_scheduler_bench import cli

if __name__ == "__main__":
    sys.exit(cli.main())
