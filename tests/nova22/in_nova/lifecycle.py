"""The lifecycle scenarios of ``tests/nova18_22/lifecycle.py`` in Nova
22's functional framework, with the default compute side (Nova 22 has no
``nova.hooks``: the instance information casts and the driver's periodic
reconciliation with Nova's records keep the books), and the scenario only
Nova 22 runs: a build that found no room.

``BooksTestBase`` is also the base of the books' own tests
(``books/test_follow.py``, ``books/test_reconcile.py``).
"""

from tests.nova18_22 import lifecycle
from tests.nova22.in_nova import base


class BooksTestBase(lifecycle.Books, base.GrantsTestBase):
    """Nova 22's services with grant_scheduler, and the lifecycle's
    check (``assert_books_agree``, ``step``)."""


class TestLateBuild(BooksTestBase):
    """Nova 22 only: a build reaching its host with no grant and no room
    in the books is counted where Nova runs it.  On 18-21 the build hook
    claims as the build starts and refuses it (``tests/nova18_21/
    build_hook.py``)."""

    HOSTS = ("host1",)

    def test_a_build_that_found_no_room_is_counted(self):
        # Its grant expired and was reaped, and the room went to another
        # claim before the build reported: Nova runs it all the same.
        self.steal_after_scheduling()
        server = self.boot()
        # NOTE: the driver counts it as the build ends, which may be just
        # after the API shows the server ACTIVE.
        self.wait_until(lambda: server["id"] in self.claimed("host1"))
        self.assertEqual(["host1"], self.over_limit())
        [stranger] = set(self.claimed("host1")) - {server["id"]}
        # The other claim is nothing Nova runs.  The next boot, which
        # placement has room for there, is refused by the books at first;
        # that node is then reconciled with Nova's records, which releases
        # the stranger, and the grant is taken, as the stock scheduler
        # places it.
        del self.driver.select_destinations  # no more stealing
        again = self.boot()
        self.assertEqual("host1", again["OS-EXT-SRV-ATTR:host"])
        self.assertEqual(
            sorted([server["id"], again["id"]]), sorted(self.claimed("host1"))
        )
        self.assertNotIn(stranger, self.claimed("host1"))
        self.assert_books_agree()


class TestLostDelete(lifecycle.LostDelete, BooksTestBase):
    pass


class TestResizeToAnotherHost(lifecycle.ResizeToAnotherHost, BooksTestBase):
    pass


class TestResizeOnTheSameHost(lifecycle.ResizeOnTheSameHost, BooksTestBase):
    pass


class TestColdMigrate(lifecycle.ColdMigrate, BooksTestBase):
    pass


class TestLiveMigrate(lifecycle.LiveMigrate, BooksTestBase):
    pass


class TestShelve(lifecycle.Shelve, BooksTestBase):
    pass


class TestEvacuate(lifecycle.Evacuate, BooksTestBase):
    pass


class TestRestartsAndReschedules(
    lifecycle.RestartsAndReschedules, BooksTestBase
):
    pass


class TestRebuildAndFailedRelease(
    lifecycle.RebuildAndFailedRelease, BooksTestBase
):
    pass


class TestRescheduleToAnAlternate(
    lifecycle.RescheduleToAnAlternate, BooksTestBase
):
    pass
