"""The nova.conf samples, read by Nova 22's own option definitions.

Each sample is parsed in a process of its own (``nova.conf`` registers
Nova's options on the global ``cfg.CONF``, which the other suites in this
pytest process must not see) with grant_scheduler's groups registered as
the driver registers them.
"""

import json
import os
import subprocess
import sys
import unittest

ETC = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "etc", "nova"
)

READ = """
import json, sys
import nova.conf
from grant_scheduler import conf as gs_conf
CONF = nova.conf.CONF
gs_conf.register_opts(CONF)
CONF(["--config-file", sys.argv[1]], project="nova", default_config_files=[])
print(json.dumps({
    "driver": CONF.scheduler.driver,
    "track": CONF.filter_scheduler.track_instance_changes,
    "filters": list(CONF.filter_scheduler.enabled_filters),
    "available": list(CONF.filter_scheduler.available_filters),
    "connection": CONF.grant_scheduler_database.connection,
    "reap_interval": CONF.grant_scheduler.reap_interval,
    "reserved_mb": CONF.reserved_host_memory_mb,
}))
"""


def read(sample):
    done = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            "-c",
            READ,
            os.path.join(ETC, sample),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


class TestSamples(unittest.TestCase):
    def test_15_to_22(self):
        conf = read("nova.conf.15-22.sample")
        self.assertEqual("grant_scheduler", conf["driver"])
        self.assertTrue(conf["track"])
        self.assertIn("ComputeFilter", conf["filters"])
        self.assertTrue(conf["connection"].startswith("mysql+pymysql://"))
        self.assertEqual(512, conf["reserved_mb"])

    def test_13_14_names_still_read_by_22(self):
        conf = read("nova.conf.13-14.sample")
        self.assertEqual("grant_scheduler", conf["driver"])
        self.assertTrue(conf["track"])
        self.assertIn("RetryFilter", conf["filters"])

    def test_23_and_later_enables_grants_filter(self):
        conf = read("nova.conf.23-and-later.sample")
        self.assertIn("GrantsFilter", conf["filters"])
        self.assertIn(
            "grant_scheduler.nova.filters.GrantsFilter", conf["available"]
        )
