"""Several Nova 22 scheduler processes with the grant_scheduler driver,
against Debian's placement service on MariaDB, fill a cloud at once.

``cloud.Cloud``: Nova's databases made by nova-manage with a record per
node, placement with a provider per node (two worker processes),
grant_scheduler's database on MariaDB; eight scheduler processes, each
Nova's own SchedulerManager with ``[scheduler] driver = grant_scheduler``
and every option at its default, ask for more boots than the cloud
holds, all at once.  Placement's own records are the judge, beside the
books.
"""

import unittest

import fixtures

from grant_scheduler import api
from grant_scheduler_bench import placement_api
from tests import base as gs_base
from tests.nova22 import cloud

NODES = 20
NODE = {
    "vcpus": 2,
    "memory_mb": 2048 + 512,
    "local_gb": 20,
    "reserved_mb": 512,
}
FLAVOR = {"vcpus": 1, "memory_mb": 1024, "root_gb": 10}
SLOTS = 2 * NODES
PROCESSES = 8
EXTRA = 8


# The seed's race: Ironic nodes, each one unit of a custom class, and a
# bare-metal flavour that asks for that unit and nothing else.
BARE_METAL = "CUSTOM_BAREMETAL_GOLD"
IRONIC_NODE = {
    "vcpus": 0,
    "memory_mb": 0,
    "local_gb": 0,
    "reserved_mb": 0,
    "resource_class": BARE_METAL,
}
IRONIC_FLAVOR = {
    "vcpus": 8,
    "memory_mb": 65536,
    "root_gb": 400,
    "extra_specs": {
        "resources:%s" % BARE_METAL: "1",
        "resources:VCPU": "0",
        "resources:MEMORY_MB": "0",
        "resources:DISK_GB": "0",
    },
}


class _CloudTestCase(gs_base.TestCase):
    node = NODE
    flavor = FLAVOR

    def setUp(self):
        super().setUp()
        self.gs_db = self.useFixture(gs_base.DatabaseFixture("mysql"))
        placement_db = self.useFixture(
            gs_base.DatabaseFixture("mysql", migrate=False)
        )
        directory = self.useFixture(fixtures.TempDir()).path
        self.cloud = cloud.Cloud(
            directory,
            NODES,
            self.node,
            self.flavor,
            self.gs_db.url,
            placement_db.url,
        )
        self.cloud.start()
        self.addCleanup(self.cloud.stop)


class TestSchedulerProcessesWithPlacement(_CloudTestCase):
    def test_the_last_slots_are_never_given_twice(self):
        result = self.cloud.schedule("grants", PROCESSES, 1, SLOTS + EXTRA)
        # The computes' heartbeats are written meanwhile, as in a cloud.
        self.assertGreater(self.cloud.service_reports(), 0)
        calls = result["calls"]
        self.assertEqual([], [c for c in calls if "error" in c])
        placed = [c for c in calls if "host" in c]
        refused = [c for c in calls if c.get("nvh")]
        # Every slot taken, and NoValidHost only once nothing fitted.
        self.assertEqual(SLOTS, len(placed))
        self.assertEqual(EXTRA, len(refused))
        self.assertEqual([], [c["room"] for c in refused if c["room"]])
        # Placement's records: no provider over its inventory, every node
        # full, each as the answers said.
        usage = self.cloud.placement_usage()
        self.assertEqual(set(), placement_api.overcommitted_in(usage))
        answered = {}
        for call in placed:
            answered[call["host"]] = answered.get(call["host"], 0) + 1
        self.assertEqual(
            {cloud.node_name(i): 2 for i in range(NODES)}, answered
        )
        # The books: each node's usage is placement's, nothing over.
        gs = api.GrantScheduler.from_url(self.gs_db.url)
        self.addCleanup(gs.database.dispose)
        for report in gs.hosts():
            self.assertEqual(
                api.Resources(2, 2048, 20), report.state.used, report.state
            )
            self.assertEqual(api.Resources(), report.state.granted)
        self.assertEqual([], gs.check())
        # Each boot's instance information reached all the processes: the
        # one that granted it claimed it (six statements with oslo.db's
        # ping), the others only look, at most once per consume_interval
        # (two statements for all they deferred), where each of them
        # would else repeat the claim (three statements per boot).
        info = sum(
            counts["statements"].get("gs", {}).get("records: instance info", 0)
            for counts in result["counts"]
        )
        claimed_once = len(placed) * 6
        self.assertLess(info, claimed_once + len(placed) * (PROCESSES - 1))


class TestIronicSchedulerProcesses(_CloudTestCase):
    """Eight scheduler processes race for the last Ironic nodes."""

    node = IRONIC_NODE
    flavor = IRONIC_FLAVOR

    def test_no_node_is_taken_twice(self):
        result = self.cloud.schedule("grants", PROCESSES, 1, NODES + EXTRA)
        calls = result["calls"]
        self.assertEqual([], [c for c in calls if "error" in c])
        placed = [c for c in calls if "host" in c]
        refused = [c for c in calls if c.get("nvh")]
        # Every node taken once, and NoValidHost only once none was left.
        self.assertEqual(
            sorted(cloud.node_name(i) for i in range(NODES)),
            sorted(c["host"] for c in placed),
        )
        self.assertEqual(EXTRA, len(refused))
        self.assertEqual([], [c["room"] for c in refused if c["room"]])
        # Placement's records: one bare-metal unit allocated on each node,
        # nothing else anywhere.
        usage = self.cloud.placement_usage()
        self.assertEqual(set(), placement_api.overcommitted_in(usage))
        self.assertEqual(
            {cloud.node_name(i): [(1, 1)] for i in range(NODES)},
            {name: list(classes.values()) for name, classes in usage.items()},
        )
        # The books: the unit of each node used, by its claim, and
        # granted to no one.
        gs = api.GrantScheduler.from_url(self.gs_db.url)
        self.addCleanup(gs.database.dispose)
        reports = gs.hosts()
        self.assertEqual(NODES, len(reports))
        for report in reports:
            self.assertEqual(
                api.Resources(**{BARE_METAL: 1}),
                report.state.used,
                report.state,
            )
            self.assertEqual(report.state.used, report.claimed)
            self.assertEqual(api.Resources(), report.state.granted)
        self.assertEqual(NODES, len(gs.claims()))
        self.assertEqual([], gs.check())


if __name__ == "__main__":
    unittest.main()
