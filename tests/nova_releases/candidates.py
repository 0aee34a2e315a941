"""Built allocation requests in the release's services and placement
(``tests/nova_shared/candidates.py``)."""

from tests.nova_releases import base
from tests.nova_shared import candidates


class TestBuiltRequests(candidates.BuiltRequestsTests, base.GrantsTestBase):
    pass
