"""TEMPORARY probe (not collected): anti-affinity, second server while the
first is held, stock vs grants."""

import eventlet
from nova import context as nova_context

from tests.nova22.in_nova import base
from tests.nova_shared import decisions
from tests.nova_shared import in_nova


class Probe(decisions.Decisions):
    HOSTS = ("host1", "host2")

    def info(self, label):
        manager = self.scheduler.manager.driver.host_manager
        out = {}
        for host, hi in sorted(getattr(manager, "_instance_info", {}).items()):
            out[host] = (hi.get("updated"), sorted(hi.get("instances", {})))
        print("\n[probe] %s %s: instance_info %s" % (type(self).__name__, label, out))

    def sync(self):
        ctx = nova_context.get_admin_context()
        for compute in self.computes.values():
            compute.manager._sync_scheduler_instance_info(ctx)

    def hold_spawn(self, name):
        release = eventlet.event.Event()
        reached = eventlet.event.Event()

        def at_spawn(instance):
            if instance.display_name == name:
                reached.send()
                release.wait()

        in_nova.DiskFakeDriver.at_spawn = at_spawn
        self.addCleanup(setattr, in_nova.DiskFakeDriver, "at_spawn", None)
        return release, reached

    def scenario(self, synced, hold):
        self.flags(max_attempts=1, group="scheduler")
        group = self.api.post_server_groups(
            {"name": "apart", "policy": "anti-affinity"}
        )
        big = self.make_flavor(vcpus=1, ram=1024, disk=10)
        self.boot_flavor(big, availability_zone="nova:host2")
        flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
        self.info("after preboot")
        if synced:
            self.sync()
            self.sync()
            self.info("after sync")
        first_body = self.server_body(flavor)
        if hold == "claim":
            release = decisions.GroupDecisions.hold_build(
                self, first_body["name"]
            )
            reached = None
        else:
            release, reached = self.hold_spawn(first_body["name"])
        servers = [
            self.admin.post_server(
                {
                    "server": first_body,
                    "os:scheduler_hints": {"group": group["id"]},
                }
            )
        ]
        if reached is not None:
            reached.wait()
        self.info("after first")
        servers.append(
            self.admin.post_server(
                {
                    "server": self.server_body(flavor),
                    "os:scheduler_hints": {"group": group["id"]},
                }
            )
        )
        self.info("after second posted")
        second = self._wait_until_built(servers[1])
        release.send()
        first = self._wait_until_built(servers[0])
        print(
            "\n[probe] %s synced=%s hold=%s: first %s %s %s; second %s %s %s"
            % (
                type(self).__name__,
                synced,
                hold,
                first["status"],
                first["OS-EXT-SRV-ATTR:host"],
                (first.get("fault") or {}).get("message"),
                second["status"],
                second["OS-EXT-SRV-ATTR:host"],
                (second.get("fault") or {}).get("message"),
            )
        )

    def test_synced_claim(self):
        self.scenario(True, "claim")

    def test_synced_spawn(self):
        self.scenario(True, "spawn")

    def test_unsynced_claim(self):
        self.scenario(False, "claim")

    def test_unsynced_spawn(self):
        self.scenario(False, "spawn")


class TestStockProbe(Probe, base.NovaTestBase):
    pass


class TestGrantsProbe(Probe, base.GrantsTestBase):
    pass
