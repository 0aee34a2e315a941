"""Base for tests that run grant_scheduler's adapters inside real Nova.

Every protocol option keeps its default here (``[grant_scheduler]`` is
never overridden): the adapters are tested as they ship.
"""

import fixtures
from nova import conf as nova_conf

from grant_scheduler import api
from grant_scheduler import conf as gs_conf
from grant_scheduler.nova.compute import hooks
from tests import base
from tests.nova34 import fakes

CONF = nova_conf.CONF


def parse_nova_conf():
    """Parse Nova's configuration once per process, from no files."""
    if not CONF._args:
        CONF([], project="nova", default_config_files=[])
    gs_conf.register_opts(CONF)


class ConfFixture(fixtures.Fixture):
    """Overrides on Nova's global CONF, undone at cleanup."""

    def __init__(self, url, **groups):
        super().__init__()
        self.url = url
        self.groups = groups

    def _setUp(self):
        parse_nova_conf()
        self.set("connection", self.url, "grant_scheduler_database")
        for group, values in self.groups.items():
            for name, value in values.items():
                self.set(name, value, group)

    def set(self, name, value, group=None):
        CONF.set_override(name, value, group)
        self.addCleanup(CONF.clear_override, name, group)


class NovaTestCase(base.DatabaseTestCase):
    """A migrated database, Nova's CONF pointing at it, and a cloud."""

    overrides = {}

    def setUp(self):
        super().setUp()
        self.useFixture(ConfFixture(self.db_fixture.url, **self.overrides))
        self.cloud = fakes.NovaCloud()
        self.gs = api.GrantScheduler(self.db)
        # The hooks build their GrantScheduler from CONF on first use; each
        # test gets a fresh one on its own database.
        hooks.use(None)
        self.addCleanup(hooks.use, None)

    def used(self, host):
        [report] = [r for r in self.gs.hosts() if r.state.host == host]
        return report.state.used
