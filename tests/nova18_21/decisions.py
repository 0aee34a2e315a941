"""The request shapes of ``tests/nova18_22/decisions.py`` in the
release's functional framework, with its stock FilterScheduler and with
grant_scheduler, side by side.

The dedicated-CPU shapes (``PinnedDecisions``) run on Nova 22 only so
far: on 20 and 21, which report PCPU too, they have not been run yet."""

from nova.tests.functional import integrated_helpers

from tests.nova18_21 import base
from tests.nova18_22 import decisions


class _StockTestBase(integrated_helpers.ProviderUsageBaseTestCase):
    """The release's services with its stock FilterScheduler and the
    same computes as ``base.GrantsTestBase``."""

    compute_driver = base.COMPUTE_DRIVER
    microversion = "latest"

    def setUp(self):
        # NOTE: as base.GrantsTestBase: servers in ERROR count against
        # the project's quota.
        self.flags(instances=-1, cores=-1, ram=-1, group="quota")
        super().setUp()
        self.scheduler = self.scheduler_service
        self.computes = getattr(self, "computes", {})
        for host in self.HOSTS:
            self._start_compute(host)

    @property
    def placement_client(self):
        return self.placement_api


class TestStockDecisions(decisions.OneNodeDecisions, _StockTestBase):
    pass


class TestGrantsDecisions(
    decisions.GrantsBooks, decisions.OneNodeDecisions, base.GrantsTestBase
):
    pass


class TestStockGroupDecisions(decisions.GroupDecisions, _StockTestBase):
    pass


class TestGrantsGroupDecisions(decisions.GroupDecisions, base.GrantsTestBase):
    pass


class TestStockAlternateDecisions(
    decisions.AlternateDecisions, _StockTestBase
):
    pass


class TestGrantsAlternateDecisions(
    decisions.AlternateDecisions, base.GrantsTestBase
):
    pass


class TestStockWeighingDecisions(decisions.WeighingDecisions, _StockTestBase):
    pass


class TestGrantsWeighingDecisions(
    decisions.WeighingDecisions, base.GrantsTestBase
):
    pass
