"""Built allocation requests in Nova 22's services and placement
(``tests/nova_shared/candidates.py``)."""

from tests.nova22.in_nova import base
from tests.nova_shared import candidates


class TestBuiltRequests(candidates.BuiltRequestsTests, base.GrantsTestBase):
    pass
