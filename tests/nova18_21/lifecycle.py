"""The lifecycle scenarios of ``tests/nova18_22/lifecycle.py`` in the
release's functional framework (Nova 18-21), with grant_scheduler's
compute hooks installed."""

from tests.nova18_21 import base
from tests.nova18_22 import lifecycle


class BooksTestBase(lifecycle.Books, base.GrantsTestBase):
    """The release's services with grant_scheduler, and the lifecycle's
    check (``assert_books_agree``, ``step``)."""


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
