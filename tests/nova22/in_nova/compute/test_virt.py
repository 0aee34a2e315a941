"""The claiming virt driver, placed under nova.virt and loaded by Nova 22.

``grant_scheduler.nova.virt.install()`` writes ``nova/virt/grant_scheduler.py``
into the root's Nova (what ``python3 -m grant_scheduler.nova.virt install``
does on a compute host); the computes then run with ``compute_driver =
grant_scheduler.MediumFakeDriver``, loaded by Nova's own
``load_compute_driver``.  A claim rejected in ``spawn`` is Nova's
``ComputeResourcesUnavailable``: Nova reschedules to an alternate the
driver returned, and with none left the server ends in ERROR with the
reason.
"""

import unittest

from nova.virt import driver as virt_driver
from nova.virt import fake as fake_virt

from grant_scheduler.nova import virt
from grant_scheduler.nova.compute import hooks
from tests.nova22.in_nova import base


class TestClaimingDriver(base.GrantsTestBase):
    compute_driver = "grant_scheduler.MediumFakeDriver"

    def _setup_services(self):
        path = virt.install()
        self.addCleanup(virt.uninstall)
        self.assertTrue(
            path.startswith("/usr/lib/python3/dist-packages/nova/virt/")
        )
        hooks.use(None)
        self.addCleanup(hooks.use, None)
        super()._setup_services()

    def test_nova_loaded_the_claiming_driver(self):
        for service in self.computes.values():
            loaded = service.manager.driver
            self.assertIsInstance(loaded, virt.ClaimingDriver)
            self.assertIsInstance(loaded, fake_virt.MediumFakeDriver)
            self.assertIsInstance(loaded, virt_driver.ComputeDriver)

    def test_spawn_consumes_the_grant(self):
        server, host = self.boot_claimed_by_its_grant()
        self._delete_server(server)
        self.assertEqual(self.flavor_resources(0), self.usage()[host])

    def test_rejected_claim_reschedules_to_an_alternate(self):
        stolen = self.steal_after_scheduling()
        server = self.boot()
        host = server["OS-EXT-SRV-ATTR:host"]
        self.assertEqual(1, len(stolen))
        self.assertNotEqual(stolen[0], host)
        self.assertIn("rejected", self.stdlog.logger.output)
        self.assertEqual(self.flavor_resources(), self.usage()[host])
        self.assertEqual([], self.over_limit())
        self.assertEqual([], self.gs.check())

    def test_no_alternate_left_is_error_with_the_reason(self):
        stolen = self.steal_after_scheduling(everywhere=True)
        self.assertEqual([], stolen)  # nothing scheduled yet
        server = self.boot(expected_state="ERROR")
        self.assertEqual(sorted(self.HOSTS), sorted(stolen))
        self.assertIn("Exhausted all hosts", server["fault"]["message"])
        # Nova logs each host's reason as it retries the next one.
        log = self.stdlog.logger.output
        for host in self.HOSTS:
            self.assertIn(
                "Error from last host: %s (node %s)" % (host, host), log
            )
        self.assertIn("rejected", log)
        self.assertIsNone(server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual([], self.over_limit())


class TestLibvirtDriverClass(unittest.TestCase):
    """Libvirt cannot run here; its claiming class is Nova's own driver
    with the claiming spawn and destroy first in line."""

    def test_libvirt_driver_claims_in_spawn(self):
        from nova.virt.libvirt import driver as libvirt_driver

        cls = virt.LibvirtDriver
        self.assertTrue(issubclass(cls, libvirt_driver.LibvirtDriver))
        self.assertIs(virt.ClaimingDriver.spawn, cls.spawn)
        self.assertIs(virt.ClaimingDriver.destroy, cls.destroy)
        self.assertEqual("nova.virt.grant_scheduler", cls.__module__)
