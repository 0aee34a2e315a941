"""The driver as the release's real SchedulerManager loads and calls it.

The scheduler service of the release's functional framework builds its
``SchedulerManager``, which loads ``[scheduler] driver = grant_scheduler``
through stevedore from the installed wheel's entry point.  The conductor
calls it as that release does (Selection objects with alternates); an
older conductor's call (``return_objects=False``) gets dicts; and where
the release's HostManager still has ``get_all_host_states`` (18), the
driver's own view reads Nova's HostStates through it.
"""

import uuid

from nova import context as nova_context
from nova import objects
from nova.scheduler import host_manager as nova_host_manager
from nova.scheduler import manager as scheduler_manager

from grant_scheduler.nova import driver as gs_driver
from tests.nova18_21 import base


class TestSchedulerManager(base.GrantsTestBase):
    def record_calls(self):
        calls = []
        real = self.driver.select_destinations

        def recorded(*args, **kwargs):
            answer = real(*args, **kwargs)
            calls.append((args, kwargs, answer))
            return answer

        self.driver.select_destinations = recorded
        self.addCleanup(setattr, self.driver, "select_destinations", real)
        return calls

    def test_loaded_from_the_entry_point_by_the_release_manager(self):
        manager = self.scheduler.manager
        self.assertIsInstance(manager, scheduler_manager.SchedulerManager)
        self.assertIs(type(manager.driver), gs_driver.GrantSchedulerDriver)
        self.assertEqual("grant_scheduler", base.CONF.scheduler.driver)
        # Nova's own HostManager underneath, of this release.
        self.assertIsInstance(
            manager.driver.host_manager, nova_host_manager.HostManager
        )
        # 17 and later: claims in placement, as the stock scheduler; from
        # 18 on the driver finds the candidates itself, so the manager is
        # told not to.
        self.assertTrue(manager.driver.claims_in_placement)
        self.assertFalse(manager.driver.USES_ALLOCATION_CANDIDATES)

    def test_answers_selections_with_alternates(self):
        calls = self.record_calls()
        server = self.boot()
        [(args, kwargs, answer)] = calls
        [selections] = answer
        self.assertTrue(
            all(isinstance(s, objects.Selection) for s in selections)
        )
        chosen, *alternates = selections
        self.assertEqual(server["OS-EXT-SRV-ATTR:host"], chosen.service_host)
        # max_attempts 3, two hosts: the other host is the one alternate.
        self.assertEqual(
            sorted(set(self.HOSTS) - {chosen.service_host}),
            [a.service_host for a in alternates],
        )
        for selection in selections:
            self.assertIsNotNone(selection.allocation_request)
            self.assertIsNotNone(selection.compute_node_uuid)

    def test_answers_dicts_to_a_caller_that_asks_for_them(self):
        calls = self.record_calls()
        self.boot()
        spec = calls[0][0][1]
        instance_uuid = str(uuid.uuid4())
        spec.instance_uuid = instance_uuid
        spec.num_instances = 1
        # The consumer placement records the allocation under.
        ctxt = nova_context.RequestContext(
            user_id=spec.user_id or "fake-user",
            project_id=spec.project_id or "fake-project",
            is_admin=True,
        )
        answer = self.scheduler.manager.select_destinations(
            ctxt,
            spec_obj=spec,
            instance_uuids=[instance_uuid],
        )
        [chosen] = answer
        self.assertIsInstance(chosen, dict)
        self.assertIn(chosen["host"], self.HOSTS)
        self.assertEqual(chosen["host"], chosen["nodename"])
        self.assertIn("limits", chosen)
        [grant] = self.live_grants()
        self.assertEqual(instance_uuid, grant.instance_uuid)
        self.assertEqual(chosen["host"], grant.host)

    def test_reads_host_states_the_way_the_release_offers(self):
        hm = self.driver.host_manager
        ctxt = nova_context.get_admin_context()
        states = hm.host_states(ctxt)
        self.assertEqual(sorted(self.HOSTS), sorted(s.host for s in states))
        if base.RELEASE >= 19:
            # 19 removed get_all_host_states.
            self.assertFalse(hasattr(hm, "get_all_host_states"))
            return
        # 18 has both: the driver's view through the older one, by hiding
        # the newer one, placing servers through the API.
        self.assertTrue(hasattr(hm, "get_all_host_states"))
        calls = []
        real = hm.get_all_host_states

        def all_states(context):
            calls.append(context)
            return real(context)

        hm.get_host_states_by_uuids = None
        hm.get_all_host_states = all_states
        self.addCleanup(vars(hm).pop, "get_host_states_by_uuids", None)
        self.addCleanup(vars(hm).pop, "get_all_host_states", None)
        self.driver.USES_ALLOCATION_CANDIDATES = False
        self.addCleanup(
            setattr, self.driver, "USES_ALLOCATION_CANDIDATES", True
        )
        slots = base.SLOTS_PER_HOST * len(self.HOSTS)
        servers = [self.boot() for _ in range(slots)]
        self.assertTrue(calls)
        self.assertEqual(
            sorted(self.HOSTS * base.SLOTS_PER_HOST),
            sorted(s["OS-EXT-SRV-ATTR:host"] for s in servers),
        )
        self.boot(expected_state="ERROR")
        self.assertEqual([], self.live_grants())
        self.assertEqual([], self.gs.check())
        self.assertEqual([], self.nova_over_capacity())
