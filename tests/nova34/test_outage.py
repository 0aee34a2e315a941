"""grant_scheduler's database cut under the 13-16 driver path and the
compute-side hooks: Nova goes on as it would with the stock scheduler.

The connection is cut as a server crash cuts it (open connections dropped,
the port refusing) by a forwarder between the adapters and MariaDB.
"""

import datetime
import uuid
from unittest import mock

import fixtures
from nova import exception as nova_exception

from grant_scheduler import api
from grant_scheduler.db import sa_compat
from grant_scheduler.nova import outage
from tests import base
from tests import proxy
from tests.nova34 import base as nova_base
from tests.nova34 import fakes
from tests.nova34 import test_driver
from tests.nova34 import test_virt
from tests.nova34.compute import test_hooks


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class CutMixin:
    """The adapters reach the test's MariaDB database through a forwarder
    the test cuts."""

    backend = "mysql"

    def setUp(self):
        super().setUp()
        self.cut, url = proxy.through(sa_compat.make_url(self.db_fixture.url))
        self.addCleanup(self.cut.stop)
        self.useFixture(nova_base.ConfFixture(url))
        self.logs = self.useFixture(
            fixtures.FakeLogger(name=outage.__name__, level="WARNING")
        )
        self.clock = Clock()


class TestDriverWhileDown(CutMixin, test_driver.DriverTestCase, base.TestCase):
    def setUp(self):
        super().setUp()
        # cmp1 has the most free RAM (the weigher's pick), cmp2 the next.
        self.cloud.add("cmp1", 8, 8192, 100)
        self.cloud.add("cmp2", 8, 6144, 100)
        self.driver = test_driver.load_driver()
        self.driver.host_manager = fakes.HostManager(self.cloud, self.driver)
        self.caught_up = []
        catch_up = mock.patch.object(
            self.driver,
            "_catch_up",
            side_effect=lambda: self.caught_up.append(len(self.gs.grants())),
        )
        catch_up.start()
        self.addCleanup(catch_up.stop)
        self.driver.outage._clock = self.clock
        self.flavor = fakes.flavor(2, 4096, 20)

    def dicts(self):
        """Nova 13-15's call: one host dict per instance."""
        spec = fakes.request_spec(self.flavor)
        return self.select(spec, [spec.instance_uuid])

    def test_stock_choice_meanwhile_then_grants_after_catching_up(self):
        [first] = self.dicts()
        self.assertEqual("cmp1", first["host"])
        self.assertEqual(1, len(self.live_grants()))
        self.cut.stop()
        # Nova's choice, with no grant: the first on cmp1, whose RAM it
        # then counts used (as Nova's kept HostStates do), so the next
        # goes to cmp2; no exception reaches Nova's manager.
        [during] = self.dicts()
        self.assertEqual("cmp1", during["host"])
        self.assertTrue(self.driver.outage.down)
        [second] = self.dicts()
        self.assertEqual("cmp2", second["host"])
        self.assertEqual(1, self.logs.output.count("database failed"))
        self.assertEqual(2, self.driver.outage.decided_without)
        # Back: nothing is granted before the books caught up.
        self.cut.start()
        self.clock.now += outage.PROBE_EVERY
        [after] = self.dicts()
        self.assertEqual([1], self.caught_up)
        self.assertFalse(self.driver.outage.down)
        self.assertEqual(2, len(self.live_grants()))
        self.assertIn(after["host"], ("cmp1", "cmp2"))
        self.assertIn("is back after", self.logs.output)

    def test_periodic_tasks_wait_then_end_the_outage(self):
        self.cut.stop()
        # The first task takes the database as down; no task raises, and
        # none tries it again before a probe is due.
        with mock.patch.object(api.GrantScheduler, "reap") as reap:
            reap.side_effect = api.DatabaseUnavailable(url="x", reason="y")
            self.driver.run_periodic_tasks(self.context)
            self.driver._periodic.reap_grants(self.context)
        self.assertEqual(1, reap.call_count)
        self.assertTrue(self.driver.outage.down)
        # With no request coming, a periodic task's probe ends it: the
        # books catch up, then the task runs.
        self.cut.start()
        self.clock.now += outage.PROBE_EVERY
        with mock.patch.object(api.GrantScheduler, "reap") as reap:
            reap.return_value = {}
            self.driver._periodic.reap_grants(self.context)
        reap.assert_called_once_with()
        self.assertFalse(self.driver.outage.down)
        self.assertEqual([0], self.caught_up)

    def test_a_lost_release_of_instance_info_takes_the_database_as_down(self):
        instance = fakes.instance(str(uuid.uuid4()), self.flavor, "cmp1")
        self.cloud.add_instance(instance)
        self.driver.sync_hosts(self.context)
        manager = self.driver.host_manager
        manager.update_instance_info(
            self.context, "cmp1", fakes.instance_list(instance)
        )
        self.assertEqual(
            [instance.uuid], [c.instance_uuid for c in self.gs.claims()]
        )
        self.cut.stop()
        manager.delete_instance_info(self.context, "cmp1", instance.uuid)
        self.assertTrue(self.driver.outage.down)
        self.assertIn("following instance info", self.logs.output)

    def test_nova_record_update_ends_the_remembered_consumption(self):
        self.cut.stop()
        [during] = self.dicts()
        self.assertEqual("cmp1", during["host"])
        # The compute reported: Nova's record of cmp1 changed (here, an
        # instance deleted meanwhile leaves it as free as before), and
        # Nova's view starts again from it.
        self.cloud.nodes["cmp1"].updated_at = datetime.datetime.now(
            datetime.timezone.utc
        )
        [again] = self.dicts()
        self.assertEqual("cmp1", again["host"])

    def test_no_host_is_novas_no_valid_host(self):
        self.cut.stop()
        self.cloud.services["cmp1"]["disabled"] = True
        self.cloud.services["cmp2"]["disabled"] = True
        with self.assertRaises(nova_exception.NoValidHost):
            self.dicts()

    def test_refuse_names_the_cause(self):
        self.useFixture(
            nova_base.ConfFixture(
                self.cut_url(),
                grant_scheduler={"database_failure": "refuse"},
            )
        )
        driver = test_driver.load_driver()
        driver.host_manager = fakes.HostManager(self.cloud, driver)
        self.cut.stop()
        spec = fakes.request_spec(self.flavor)
        with self.assertRaises(nova_exception.NoValidHost) as caught:
            driver.select_destinations(
                self.context, spec, [spec.instance_uuid]
            )
        self.assertIn("database_failure = refuse", str(caught.exception))

    def cut_url(self):
        return nova_base.CONF.grant_scheduler_database.connection


class TestHooksWhileDown(CutMixin, test_hooks.HookTestCase, base.TestCase):
    def setUp(self):
        super().setUp()
        self.hooks_outage = test_hooks.hooks.outage()
        self.hooks_outage._clock = self.clock

    def test_build_and_delete_go_on_then_claims_resume(self):
        [instance] = self.grant()
        later = fakes.instance(str(uuid.uuid4()), test_hooks.FLAVOR, "cmp1")
        self.cut.stop()
        self.assertEqual(
            "built", test_hooks.build(self.manager, instance, "cmp1")
        )
        self.assertEqual([instance.uuid], self.manager.built)
        self.assertTrue(self.hooks_outage.down)
        self.assertIn("builds and deletes go on", self.logs.output)
        # Meanwhile no build waits for the database: the next is not
        # tried against it at all.
        with mock.patch.object(api.GrantScheduler, "claim") as claim:
            test_hooks.build(self.manager, later, "cmp1")
            self.manager._delete_instance(None, instance, [])
        claim.assert_not_called()
        self.assertEqual([instance.uuid], self.manager.deleted)
        self.assertEqual(2, self.hooks_outage.decided_without)
        # Back: the next build claims its grant again.
        self.cut.start()
        self.clock.now += outage.PROBE_EVERY
        other = fakes.instance(str(uuid.uuid4()), test_hooks.FLAVOR, "cmp1")
        self.gs.schedule(2, 4096, 40, instance_uuids=[other.uuid])
        test_hooks.build(self.manager, other, "cmp1")
        self.assertFalse(self.hooks_outage.down)
        [grant] = [
            g for g in self.gs.grants() if g.instance_uuid == other.uuid
        ]
        self.assertEqual("consumed", grant.state)


class TestVirtWhileDown(CutMixin, test_virt.SpawnCase):
    """The claiming virt driver shares the hooks' claim and release."""

    def setUp(self):
        super().setUp()
        self.hooks_outage = test_hooks.hooks.outage()
        self.hooks_outage._clock = self.clock

    def test_spawn_and_destroy_go_on_then_claims_resume(self):
        [instance] = self.granted()
        later = self.instance()
        self.cut.stop()
        self.spawn(instance)
        self.assertIn(instance.uuid, self.driver.instances)
        self.assertTrue(self.hooks_outage.down)
        with mock.patch.object(api.GrantScheduler, "claim") as claim:
            self.spawn(later)
            self.driver.destroy(self.context, instance, None)
        claim.assert_not_called()
        self.assertIn(later.uuid, self.driver.instances)
        self.assertNotIn(instance.uuid, self.driver.instances)
        # Back: the next spawn claims its grant again.
        self.cut.start()
        self.clock.now += outage.PROBE_EVERY
        [other] = self.granted()
        self.spawn(other)
        self.assertFalse(self.hooks_outage.down)
        [grant] = [
            g for g in self.gs.grants() if g.instance_uuid == other.uuid
        ]
        self.assertEqual("consumed", grant.state)
