"""The build hook at its real place on Nova 22's real ComputeManager.

Nova 13-21 decorate ``ComputeManager._do_build_and_run_instance`` with
``@hooks.add_hook('build_instance')`` outermost, above
``@wrap_exception``, ``@reverts_task_state``, ``@wrap_instance_event`` and
``@wrap_instance_fault``.  Nova 22 has no hooks, so the test re-creates
Nova 21's ``add_hook`` (``tests/nova22/nova21_hooks.py``) and applies it
outermost to Nova 22's real, decorated method; the hook itself is found
through the installed ``nova.hooks`` entry points, as those releases
found it.  The compute services are Nova's own, with the fake virt driver.
"""

import eventlet
import fixtures
from nova.compute import manager as compute_manager

from grant_scheduler.nova.compute import hooks
from tests.nova22 import nova21_hooks
from tests.nova22.in_nova import base


class TestBuildHook(base.GrantsTestBase):
    def setUp(self):
        super().setUp()
        nova21_hooks.reset()
        self.addCleanup(nova21_hooks.reset)
        hooks.use(None)  # built from this test's CONF on first use
        self.addCleanup(hooks.use, None)
        self.decorated = compute_manager.ComputeManager.__dict__[
            "_do_build_and_run_instance"
        ]
        for method, name in (
            ("_do_build_and_run_instance", "build_instance"),
            ("_delete_instance", "delete_instance"),
        ):
            original = getattr(compute_manager.ComputeManager, method)
            self.useFixture(
                fixtures.MonkeyPatch(
                    "nova.compute.manager.ComputeManager." + method,
                    nova21_hooks.add_hook(name)(original),
                )
            )

    def test_the_hook_is_outermost(self):
        method = compute_manager.ComputeManager._do_build_and_run_instance
        self.assertIs(self.decorated, method.__wrapped__)
        self.assertEqual("build_instance", self.decorated.__hook_name__)
        # Below the hook, Nova 22's own four decorators (wrap_exception,
        # reverts_task_state, wrap_instance_event, wrap_instance_fault).
        depth, inner = 0, self.decorated
        while hasattr(inner, "__wrapped__"):
            depth, inner = depth + 1, inner.__wrapped__
        self.assertEqual(4, depth)

    def test_build_claims_its_grant_and_delete_releases(self):
        server, host = self.boot_claimed_by_its_grant()
        self._delete_server(server)
        self.assertEqual(self.flavor_resources(0), self.usage()[host])
        self.assertEqual([], self.gs.check())

    def test_rejected_claim_ends_in_error_with_the_reason(self):
        stolen = self.steal_after_scheduling()
        server = self.boot(expected_state="ERROR")
        self.assert_rejected_in_error(server, stolen)
        self.assertEqual([], self.over_limit())

    def test_without_recording_the_fault_the_instance_stays_in_build(self):
        # What the hook did before: raising FatalHookException from pre
        # escapes Nova's reschedule and fault handling entirely.
        self.useFixture(
            fixtures.MockPatchObject(hooks, "fail_build", return_value=False)
        )
        self.steal_after_scheduling()
        server = self.post_server()
        for _ in range(6):
            eventlet.sleep(0.5)
            server = self.api.get_server(server["id"])
            self.assertEqual("BUILD", server["status"])
        self.assertNotIn("fault", server)
        self.assertIn(
            "Fatal Exception running build_instance pre-hook",
            self.stdlog.logger.output,
        )
