"""Built allocation requests in the release's services and placement
(``tests/nova18_22/candidates.py``)."""

from tests.nova18_21 import base
from tests.nova18_22 import candidates


class TestBuiltRequests(candidates.BuiltRequestsTests, base.GrantsTestBase):
    pass
