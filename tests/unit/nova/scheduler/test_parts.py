"""The driver's periodic tasks (``grant_scheduler.nova.scheduler.parts``):
what they are and how often they run; no Nova needed."""

import fixtures
from oslo_config import cfg

from grant_scheduler import conf as gs_conf
from grant_scheduler.nova.scheduler import parts as gs_parts
from tests import base


def _conf(test, **overrides):
    """grant_scheduler's options with ``overrides`` in ``[grant_scheduler]``
    for ``test``."""
    conf = cfg.ConfigOpts()
    gs_conf.register_opts(conf)
    conf([], default_config_files=[])
    # NOTE: the option group object is shared by every ConfigOpts it is
    # registered with, overrides included: undo them.
    test.addCleanup(conf.reset)
    for name, value in overrides.items():
        conf.set_override(name, value, "grant_scheduler")
    return conf


class TestPeriodicTasks(base.TestCase):
    """What the driver's periodic tasks are, and how often they run."""

    def periodic(self, **overrides):
        return gs_parts._Periodic(_conf(self, **overrides), parts=None)

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


class TestLoopsFirst(base.TestCase):
    """The process's loops start before its periodic tasks run."""

    def parts(self, **overrides):
        parts = gs_parts.SchedulerParts(conf=_conf(self, **overrides))
        self.addCleanup(parts.stop)
        self.useFixture(
            fixtures.MockPatch(
                "grant_scheduler.nova.compat.have_nova", return_value=True
            )
        )
        seen = []

        class Tasks:
            """The periodic tasks, the first sync among them: which loops
            run while they do."""

            def __init__(self, conf, parts):
                self.parts = parts

            def run_periodic_tasks(self, context):
                seen.append(
                    (
                        self.parts._follower_loop().running,
                        self.parts._refresher_loop().running,
                    )
                )

        self.useFixture(fixtures.MockPatchObject(gs_parts, "_Periodic", Tasks))
        return parts, seen

    def test_the_loops_run_while_the_first_sync_does(self):
        parts, seen = self.parts()
        parts.run_periodic_tasks(context=None)
        self.assertEqual([(True, True)], seen)

    def test_a_loop_turned_off_is_not_started(self):
        parts, seen = self.parts(view_refresh_interval=0, consume_interval=0)
        parts.run_periodic_tasks(context=None)
        self.assertEqual([(False, False)], seen)
