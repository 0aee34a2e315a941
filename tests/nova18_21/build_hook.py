"""The build and delete hooks through the release's own ``nova.hooks``.

Nova 18-21 decorate ``ComputeManager._do_build_and_run_instance`` with
``@hooks.add_hook('build_instance')`` and ``_delete_instance`` with
``@hooks.add_hook('delete_instance')``; the hooks are found by stevedore
in the ``nova.hooks`` namespace, where the installed wheel registers
grant_scheduler's.  Nothing here re-creates or patches Nova's hook
machinery.
"""

import eventlet
import fixtures
from eventlet import event
from nova import context as nova_context
from nova import hooks as nova_hooks
from nova.compute import manager as compute_manager

from grant_scheduler.nova.compute import hooks
from tests.nova18_21 import base


class TestBuildHook(base.GrantsTestBase):
    def setUp(self):
        super().setUp()
        nova_hooks.reset()
        self.addCleanup(nova_hooks.reset)

    def test_the_release_registers_and_finds_the_hooks(self):
        method = compute_manager.ComputeManager._do_build_and_run_instance
        self.assertEqual("build_instance", method.__hook_name__)
        delete = compute_manager.ComputeManager._delete_instance
        self.assertEqual("delete_instance", delete.__hook_name__)
        for name, cls in (
            ("build_instance", hooks.BuildInstanceHook),
            ("delete_instance", hooks.DeleteInstanceHook),
        ):
            manager = nova_hooks.HookManager(name)
            found = [type(e.obj) for e in manager.extensions]
            # Once, although the root's site-packages holds a copy too.
            self.assertEqual([cls], found)

    def test_grant_consumed_before_spawn_and_delete_releases(self):
        at_spawn = {}

        def record(instance):
            at_spawn["claims"] = [c.instance_uuid for c in self.gs.claims()]
            at_spawn["grants"] = [g.instance_uuid for g in self.live_grants()]
            at_spawn["uuid"] = instance.uuid

        base.DiskFakeDriver.at_spawn = staticmethod(record)
        server = self.boot()
        host = server["OS-EXT-SRV-ATTR:host"]
        self.assertEqual(server["id"], at_spawn["uuid"])
        self.assertIn(server["id"], at_spawn["claims"])
        self.assertNotIn(server["id"], at_spawn["grants"])
        self.assertIn(
            "claimed on %s/%s (grant)" % (host, host),
            self.stdlog.logger.output,
        )
        self.assertEqual(self.flavor_resources(), self.usage()[host])
        self.assertEqual([], self.live_grants())

        released = []
        real = hooks.release_for_delete

        def spy(*args, **kwargs):
            released.append(real(*args, **kwargs))
            return released[-1]

        self.useFixture(
            fixtures.MonkeyPatch(
                "grant_scheduler.nova.compute.hooks.release_for_delete", spy
            )
        )
        # Only the hook may release here: the scheduler's instance info
        # (which releases too) is kept out.
        self.useFixture(
            fixtures.MockPatchObject(
                self.driver.host_manager.instance_claims, "deleted"
            )
        )
        self.delete(server)
        self.eventually([True], lambda: released)
        self.assertEqual(self.flavor_resources(0), self.usage()[host])
        self.assertEqual([], self.gs.claims())
        self.assertEqual([], self.gs.check())

    def test_rejected_claim_ends_in_error_with_the_reason(self):
        stolen = self.steal_after_scheduling()
        selects = []
        real = self.driver.select_destinations

        def counted(*args, **kwargs):
            selects.append(args)
            return real(*args, **kwargs)

        self.driver.select_destinations = counted
        spawned = []
        base.DiskFakeDriver.at_spawn = staticmethod(spawned.append)
        server = self.boot(expected_state="ERROR")
        self.assert_rejected_in_error(server, stolen)
        # Stopped before the hypervisor, never rescheduled.
        self.assertEqual([], spawned)
        eventlet.sleep(1)
        self.assertEqual(1, len(selects))
        self.assertEqual("ERROR", self.api.get_server(server["id"])["status"])
        # Nothing of it left in the books: no grant, no claim.
        self.assertEqual([], self.live_grants())
        self.assertNotIn(
            server["id"], [c.instance_uuid for c in self.gs.claims()]
        )
        self.assertEqual([], self.over_limit())
        self.assertEqual([], self.gs.check())

    def test_the_hook_waits_for_the_resource_tracker_lock(self):
        # The tracker holds its lock (18-20 a plain lock, 21 a fair one)
        # while it updates the node; the hook's claim must wait for it.
        manager = self.computes["host1"].manager
        tracker = getattr(manager, "rt", None) or (
            manager._get_resource_tracker()
        )
        inside, release = event.Event(), event.Event()

        class Stop(Exception):
            pass

        def held(*args, **kwargs):
            inside.send()
            release.wait()
            raise Stop()

        self.useFixture(
            fixtures.MockPatchObject(tracker, "_init_compute_node", held)
        )
        ctxt = nova_context.get_admin_context()
        holder = eventlet.spawn(tracker._update_available_resource, ctxt, {})
        inside.wait()
        taken = []

        def claim():
            with hooks.rt_lock():
                taken.append(True)

        waiter = eventlet.spawn(claim)
        eventlet.sleep(0.5)
        self.assertEqual([], taken)
        release.send()
        self.assertRaises(Stop, holder.wait)
        waiter.wait()
        self.assertEqual([True], taken)
