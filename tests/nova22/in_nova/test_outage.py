"""Nova 22 keeps scheduling while grant_scheduler's own database is down.

grant_scheduler's database is reached through a TCP forwarder the test
cuts the way a server crash cuts it (open connections dropped, the port
refusing new ones), and restores.  Product defaults, but for
``database_failure`` in the class that tries ``refuse``.
"""

import time

from oslo_config import cfg

from grant_scheduler import conf as gs_conf
from grant_scheduler.db import sa_compat
from grant_scheduler.nova import outage as outage_module
from tests import proxy
from tests.nova22.in_nova import base

CONF = cfg.CONF


class _OutageTestBase(base.GrantsTestBase):
    def database_url(self):
        url = sa_compat.make_url(self.gs_db.url)
        self._forwarder = proxy.TcpProxy(url.host, url.port or 3306).start()
        self.addCleanup(self._forwarder.stop)
        forwarded = sa_compat.url_with(url, port=self._forwarder.port)
        return sa_compat.render_url(forwarded, hide_password=False)

    def cut(self):
        self._forwarder.stop()

    def restore(self):
        self._forwarder.start()

    @property
    def outage(self):
        return self.driver.filter_scheduler.grants.outage

    def let_a_probe_through(self):
        """Time enough has passed for a request to try the database."""
        self.outage._tried_at -= outage_module.PROBE_EVERY

    def server_host(self, server):
        return server["OS-EXT-SRV-ATTR:host"]


class TestBootsGoOn(_OutageTestBase):
    def test_placement_decides_meanwhile_and_the_books_catch_up(self):
        first = self.boot()
        self.assertEqual(1, len(self.gs.grants()))
        self.cut()
        during = [self.boot(), self.boot()]
        # Placement's claims alone decided: ACTIVE, each allocated.
        for server in during:
            self.assertEqual("ACTIVE", server["status"])
            self.assertTrue(self._get_allocations_by_server_uuid(server["id"]))
        self.assertTrue(self.outage.down)
        self.assertEqual(2, self.outage.decided_without)
        self.restore()
        self.let_a_probe_through()
        after = self.boot()
        self.assertFalse(self.outage.down)
        # The books caught up before the grant of the next boot: the
        # servers placed meanwhile are claimed where they run, and every
        # node's usage is placement's.  (The next boot's own claim comes
        # with its compute's instance-info cast, which may still be on its
        # way when the API shows the server ACTIVE.)
        for _ in range(100):
            claimed = {c.instance_uuid: c.host for c in self.gs.claims()}
            if after["id"] in claimed:
                break
            time.sleep(0.1)
        for server in [first] + during + [after]:
            self.assertEqual(self.server_host(server), claimed[server["id"]])
        grants = {g.instance_uuid for g in self.gs.grants()}
        self.assertIn(after["id"], grants)
        self.assertFalse(grants & {s["id"] for s in during})
        self.reconcile()
        for host in self.HOSTS:
            self.assertEqual(self.placement_held(host), self.usage().get(host))
        self.assertEqual([], self.gs.check())


class TestRefuse(_OutageTestBase):
    def _setup_services(self):
        gs_conf.register_opts(CONF)
        self.flags(database_failure="refuse", group="grant_scheduler")
        super()._setup_services()

    def test_no_valid_host_names_the_cause(self):
        self.boot()
        self.cut()
        refused = self.boot(expected_state="ERROR")
        fault = self.api.get_server(refused["id"])["fault"]
        self.assertIn("No valid host", fault["message"])
        self.assertIn(
            "grant_scheduler's database is unavailable", fault["message"]
        )
        self.assertFalse(self._get_allocations_by_server_uuid(refused["id"]))
        self.assertTrue(self.outage.refuses)
        self.assertEqual(0, self.outage.decided_without)
