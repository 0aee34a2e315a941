"""``grant_scheduler.nova.books.follow`` in Nova 22: the driver's loop
consumes a grant once Nova has set its instance's host, however long the
spawn takes, and runs once per process; a grant whose instance is in no
cell yet stays while its build request does."""

import time
import uuid
from unittest import mock

from nova import context as nova_context
from nova import objects

from tests.nova22.in_nova import base
from tests.nova22.in_nova import lifecycle


class TestGrantConsumedWhenTheBuildStarts(lifecycle.BooksTestBase):
    """The driver's loop (``consume_interval``, 2 s) consumes a grant
    once Nova has set its instance's host, whatever the spawn takes."""

    HOSTS = ("host1",)

    def test_a_spawn_longer_than_the_grant_ttl_keeps_its_room(self):
        self.start_periodic_tasks()
        interval = self.gs_settings_consume_interval()
        select = self.driver.select_destinations
        answered = []

        def timed_select(*args, **kwargs):
            answer = select(*args, **kwargs)
            answered.append(time.monotonic())
            return answer

        self.driver.select_destinations = timed_select
        self.addCleanup(setattr, self.driver, "select_destinations", select)
        seen = {}
        spawn = base.DiskFakeDriver.spawn

        def long_spawn(driver, context, instance, *args, **kwargs):
            # The resource tracker has claimed (and saved the host) just
            # before the spawn: from here the build can take any time.
            seen["after_claim"] = self.wait_until(
                lambda: instance.uuid in self.claimed("host1")
            )
            seen["after_answer"] = time.monotonic() - answered[-1]
            # The spawn outlives the grant's TTL: nothing of it is left to
            # expire.
            seen["reaped"] = self.expire_and_reap()
            self.gs.database.clock_offset = 0
            return spawn(driver, context, instance, *args, **kwargs)

        with mock.patch.object(base.DiskFakeDriver, "spawn", long_spawn):
            self.boot()
        # Measured from the resource tracker's claim, then from the
        # answer; the loop runs every consume_interval seconds.
        self.assertLess(seen["after_claim"], interval + 2)
        self.assertLess(seen["after_answer"], interval + 5)
        self.assertEqual(0, seen["reaped"]["expired"])
        # Its room stayed taken: one more fits, then none.
        self.boot()
        failed = self.boot(expected_state="ERROR")
        self.assertIn("No valid host", failed["fault"]["message"])
        self.assertEqual([], self.live_grants())
        self.assert_books_agree()

    def test_the_loop_runs_once_per_process_and_zero_turns_it_off(self):
        from grant_scheduler.nova import loop as loop_module

        passes = []

        class Owner:
            pass

        owner = Owner()
        loop = loop_module.Loop(owner, passes.append, 0.1, "pass")
        loop.ensure_started()
        loop.ensure_started()
        self.wait_until(lambda: len(passes) >= 3, timeout=5)
        self.assertEqual({owner}, set(passes))
        loop.stop()
        stopped_at = len(passes)
        time.sleep(0.3)
        self.assertEqual(stopped_at, len(passes))
        # It stops by itself once its owner is gone.
        loop = loop_module.Loop(Owner(), passes.append, 0.1, "pass")
        loop.ensure_started()
        time.sleep(0.3)
        self.assertEqual(stopped_at, len(passes))
        off = loop_module.Loop(owner, passes.append, 0, "pass")
        off.ensure_started()
        self.assertFalse(off.running)

    def gs_settings_consume_interval(self):
        interval = self.driver._lazy.conf.grant_scheduler.consume_interval
        self.assertEqual(2.0, interval)  # the product's default
        return interval


class TestGrantBeforeACell(lifecycle.BooksTestBase):
    """A live grant whose instance the conductor has not put in a cell
    yet: kept while its build request is there, withdrawn once it is
    gone, and its build request read without rebuilding the instance
    it carries."""

    HOSTS = ("host1",)

    def build_request(self):
        """What Nova's API writes before it asks the scheduler: a build
        request carrying the instance, and a mapping to no cell."""
        context = nova_context.get_admin_context()
        instance_uuid = str(uuid.uuid4())
        instance = objects.Instance(
            context,
            uuid=instance_uuid,
            project_id="project",
            user_id="user",
            vm_state="building",
        )
        request = objects.BuildRequest(
            context,
            instance=instance,
            instance_uuid=instance_uuid,
            project_id="project",
            block_device_mappings=objects.BlockDeviceMappingList(objects=[]),
            tags=objects.TagList(),
        )
        request.create()
        objects.InstanceMapping(
            context,
            instance_uuid=instance_uuid,
            project_id="project",
            cell_mapping=None,
        ).create()
        return request

    def test_kept_while_its_build_request_is_there(self):
        from grant_scheduler.nova.books import follow

        self.boot()  # the node known to the books, one slot of two left
        request = self.build_request()
        self.gs.grant_on(
            request.instance_uuid, "host1", "host1", self.flavor_resources()
        )
        follower = follow.GrantFollower(lambda: self.gs)
        rebuilt = mock.patch.object(
            objects.BuildRequest,
            "_load_instance",
            side_effect=AssertionError("the instance was rebuilt"),
        )
        with rebuilt:
            outcome = follower.run()
        self.assertFalse(outcome)
        self.assertEqual(
            [request.instance_uuid],
            [g.instance_uuid for g in self.live_grants()],
        )
        # The user deletes the server before the conductor placed it.
        request.destroy()
        with rebuilt:
            outcome = follower.run()
        self.assertEqual([request.instance_uuid], outcome.withdrawn)
        self.assertEqual([], self.live_grants())
