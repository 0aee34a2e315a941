"""The driver's periodic tasks (``grant_scheduler.nova.scheduler.parts``):
what they are and how often they run; no Nova needed."""

from oslo_config import cfg

from grant_scheduler import conf as gs_conf
from grant_scheduler.nova.scheduler import parts as gs_parts
from tests import base


class TestPeriodicTasks(base.TestCase):
    """What the driver's periodic tasks are, and how often they run."""

    def periodic(self, **overrides):
        conf = cfg.ConfigOpts()
        gs_conf.register_opts(conf)
        conf([], default_config_files=[])
        # NOTE: the option group object is shared by every ConfigOpts it is
        # registered with, overrides included: undo them.
        self.addCleanup(conf.reset)
        for name, value in overrides.items():
            conf.set_override(name, value, "grant_scheduler")
        return gs_parts._Periodic(conf, parts=None)

    def test_by_default_the_claims_are_reconciled_every_minute(self):
        periodic = self.periodic()
        names = {name for name, _ in periodic._periodic_tasks}
        self.assertEqual(
            {
                "reap_grants",
                "sync_hosts",
                "follow_grants",
                "reconcile_claims",
                "refresh_views",
            },
            names,
        )
        # Last: at the start, the reads the others made fall due from
        # their end.
        self.assertEqual(
            "refresh_views", [name for name, _ in periodic._periodic_tasks][-1]
        )
        self.assertEqual(60, periodic._periodic_spacing["reconcile_claims"])

    def test_the_interval_is_the_option_and_zero_turns_it_off(self):
        self.assertEqual(
            15,
            self.periodic(reconcile_interval=15)._periodic_spacing[
                "reconcile_claims"
            ],
        )
        off = self.periodic(reconcile_interval=0)
        self.assertNotIn(
            "reconcile_claims", {name for name, _ in off._periodic_tasks}
        )
