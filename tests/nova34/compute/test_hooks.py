"""The compute-side hooks, loaded from ``nova.hooks`` and run as Nova ran
them, around methods with the signatures of Nova's ComputeManager."""

import threading
import time
import uuid

import fixtures
from nova import objects
from nova import utils as nova_utils
from nova.compute import resource_tracker
from nova.compute import utils as compute_utils
from nova.compute import vm_states

from grant_scheduler import api
from grant_scheduler.nova import compat
from grant_scheduler.nova.compute import hooks
from tests import base
from tests.nova34 import base as nova_base
from tests.nova34 import fakes
from tests.nova34 import hook_runner

FLAVOR = fakes.flavor(2, 4096, 40)


class ComputeManager:
    """The hooked methods of Nova's ComputeManager, with their signatures."""

    def __init__(self, host):
        self.host = host
        self.built = []
        self.deleted = []

    @hook_runner.add_hook("build_instance")
    def _do_build_and_run_instance(
        self,
        context,
        instance,
        image,
        request_spec,
        filter_properties,
        admin_password,
        injected_files,
        requested_networks,
        security_groups,
        block_device_mapping,
        node=None,
        limits=None,
    ):
        self.built.append(instance.uuid)
        return "built"

    @hook_runner.add_hook("delete_instance")
    def _delete_instance(self, context, instance, bdms):
        self.deleted.append(instance.uuid)


def build(manager, instance, node, positional=False, context=None, bdms=None):
    args = [context, instance, {}, {}, {}, "pw", [], None, [], bdms or []]
    if positional:
        return manager._do_build_and_run_instance(*args, node, {})
    return manager._do_build_and_run_instance(*args, node=node, limits={})


def root_volume(instance_uuid):
    return objects.BlockDeviceMappingList(
        objects=[
            objects.BlockDeviceMapping(
                instance_uuid=instance_uuid,
                boot_index=0,
                source_type="volume",
                destination_type="volume",
                volume_id=str(uuid.uuid4()),
                device_name="/dev/vda",
            )
        ]
    )


class HookTestCase(nova_base.NovaTestCase):
    def setUp(self):
        super().setUp()
        self.gs.report_host(
            "cmp1", "cmp1", api.Capacity(api.Resources(4, 8192, 100))
        )
        self.manager = ComputeManager("cmp1")
        self.logger = self.useFixture(fixtures.FakeLogger(level="DEBUG"))

    def grant(self, count=1):
        uuids = [str(uuid.uuid4()) for _ in range(count)]
        self.gs.schedule(2, 4096, 40, instance_uuids=uuids)
        return [fakes.instance(u, FLAVOR, "cmp1") for u in uuids]

    def used(self):
        return super().used("cmp1")


class TestBuildHook(HookTestCase, base.TestCase):
    def test_build_consumes_the_grant(self):
        [instance] = self.grant()
        self.assertEqual("built", build(self.manager, instance, "cmp1"))
        self.assertEqual([instance.uuid], self.manager.built)
        self.assertEqual(api.Resources(2, 4096, 40), self.used())
        [grant] = self.gs.grants()
        self.assertEqual("consumed", grant.state)
        self.assertIn("claimed on cmp1/cmp1 (grant)", self.logger.output)

    def test_positional_node_as_nova_13_passed_it(self):
        [instance] = self.grant()
        build(self.manager, instance, "cmp1", positional=True)
        self.assertEqual("consumed", self.gs.grants()[0].state)

    def test_node_from_instance_when_not_passed(self):
        [instance] = self.grant()
        build(self.manager, instance, None)
        self.assertEqual(api.Resources(2, 4096, 40), self.used())

    def test_rebuilt_claim_is_idempotent(self):
        [instance] = self.grant()
        build(self.manager, instance, "cmp1")
        build(self.manager, instance, "cmp1")
        self.assertEqual(api.Resources(2, 4096, 40), self.used())

    def test_claim_that_does_not_fit_stops_the_build(self):
        self.grant(2)  # the host is full of promises
        stranger = fakes.instance(str(uuid.uuid4()), FLAVOR, "cmp1")
        with self.assertRaises(compat.FatalHookException) as caught:
            build(self.manager, stranger, "cmp1")
        self.assertIn("rejected", str(caught.exception))
        self.assertEqual([], self.manager.built)
        self.assertEqual(api.Resources(), self.used())

    def test_rejected_build_ends_in_error_with_a_fault(self):
        self.grant(2)
        stranger = fakes.instance(str(uuid.uuid4()), FLAVOR, "cmp1")
        stranger.vm_state = vm_states.BUILDING
        stranger.task_state = "scheduling"
        context = fakes.context()
        fault = self.useFixture(
            fixtures.MockPatchObject(
                compute_utils, "add_instance_fault_from_exc"
            )
        ).mock
        save = self.useFixture(
            fixtures.MockPatchObject(objects.Instance, "save")
        ).mock
        with self.assertRaises(compat.FatalHookException):
            build(self.manager, stranger, "cmp1", context=context)
        [(args, kwargs)] = fault.call_args_list
        self.assertEqual((context, stranger), args[:2])
        self.assertIn("rejected", kwargs["fault_message"])
        self.assertIn(stranger.uuid, kwargs["fault_message"])
        save.assert_called_once_with()
        self.assertEqual(vm_states.ERROR, stranger.vm_state)
        self.assertIsNone(stranger.task_state)
        self.assertIsNone(stranger.host)
        self.assertEqual([], self.manager.built)

    def test_volume_backed_without_grant_claims_no_root_disk(self):
        flavor = fakes.flavor(1, 1024, 500, ephemeral_gb=10)
        instance = fakes.instance(str(uuid.uuid4()), flavor, "cmp1")
        build(
            self.manager,
            instance,
            "cmp1",
            context=fakes.context(),
            bdms=root_volume(instance.uuid),
        )
        self.assertEqual(api.Resources(1, 1024, 10), self.used())
        stranger = fakes.instance(str(uuid.uuid4()), flavor, "cmp1")
        with self.assertRaises(compat.FatalHookException):
            build(self.manager, stranger, "cmp1")

    def test_claim_takes_the_grants_amount(self):
        # A volume-backed server's grant holds no root disk.
        instance_uuid = str(uuid.uuid4())
        self.gs.schedule(2, 4096, 0, instance_uuids=[instance_uuid])
        instance = fakes.instance(instance_uuid, FLAVOR, "cmp1")
        build(self.manager, instance, "cmp1")
        self.assertEqual(api.Resources(2, 4096, 0), self.used())
        self.assertEqual("consumed", self.gs.grants()[0].state)

    def test_unknown_node_stops_the_build(self):
        [instance] = self.grant()
        with self.assertRaises(compat.FatalHookException) as caught:
            build(self.manager, instance, "no-such-node")
        self.assertIn("no-such-node", str(caught.exception))
        self.assertEqual([], self.manager.built)

    def test_other_failures_are_logged_not_silent(self):
        broken = fakes.instance(str(uuid.uuid4()), FLAVOR, "cmp1")
        broken.flavor = fakes.flavor(0, 0, 0)  # asks nothing: invalid
        self.assertEqual("built", build(self.manager, broken, "cmp1"))
        self.assertIn("grant_scheduler could not claim", self.logger.output)
        self.assertIn(
            "at least one amount must be above 0", self.logger.output
        )
        self.assertIn("Exception running build_instance", self.logger.output)

    def test_claim_waits_for_the_resource_tracker_lock(self):
        [instance] = self.grant()
        holding = threading.Event()
        release = threading.Event()

        @nova_utils.synchronized(
            resource_tracker.COMPUTE_RESOURCE_SEMAPHORE, fair=True
        )
        def resource_tracker_claim():
            holding.set()
            release.wait(10)

        holder = threading.Thread(target=resource_tracker_claim)
        holder.start()
        self.assertTrue(holding.wait(10))
        builder = threading.Thread(
            target=build, args=(self.manager, instance, "cmp1")
        )
        builder.start()
        time.sleep(0.5)
        self.assertTrue(builder.is_alive())
        self.assertEqual(api.Resources(), self.used())
        release.set()
        builder.join(10)
        holder.join(10)
        self.assertFalse(builder.is_alive())
        self.assertEqual(api.Resources(2, 4096, 40), self.used())


class TestDeleteHook(HookTestCase, base.TestCase):
    def test_delete_releases(self):
        [instance] = self.grant()
        build(self.manager, instance, "cmp1")
        self.manager._delete_instance(None, instance, [])
        self.assertEqual([instance.uuid], self.manager.deleted)
        self.assertEqual(api.Resources(), self.used())
        # A redelivered delete changes nothing.
        self.manager._delete_instance(None, instance, [])
        self.assertEqual(api.Resources(), self.used())


class TestPythonApi(HookTestCase, base.TestCase):
    """Releases without hooks (22 and later) call the same functions."""

    def test_claim_and_release(self):
        [instance] = self.grant()
        outcome = hooks.claim_for_build("cmp1", instance, "cmp1")
        self.assertEqual("grant", outcome.how)
        self.assertTrue(hooks.release_for_delete("cmp1", instance, "cmp1"))
        self.assertFalse(hooks.release_for_delete("cmp1", instance, "cmp1"))
        self.assertEqual(api.Resources(), self.used())
