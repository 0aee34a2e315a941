"""The driver's own allocation candidates (``nova.candidates``).

What Nova's FilterScheduler does with ``alloc_reqs_by_rp_uuid`` (``in``,
``[uuid][0]``, ``get(uuid)[0]`` for the chosen hosts), and which requests
are built rather than asked of placement.  The same module runs in real
Nova 18-22 services in ``tests/nova18_22/candidates.py``.
"""

import json
import threading
import unittest

from nova.scheduler.filters import compute_filter

from grant_scheduler import api
from grant_scheduler.nova.scheduler import candidates

AMOUNTS = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 10}


class FakeResources:
    """A ResourceRequest as far as the driver reads it."""

    def __init__(self, query):
        self.query = query

    def to_querystring(self):
        return self.query


class FakeHostManager:
    def __init__(self, filters=("compute",)):
        self.enabled_filters = [
            compute_filter.ComputeFilter() for f in filters if f == "compute"
        ]


class TestBuiltRequests(unittest.TestCase):
    def setUp(self):
        self.fetches = []
        self.fetched = {"rp-b": [{"allocations": {"rp-b": {}}}]}

        def fetch():
            self.fetches.append(1)
            return self.fetched, {rp: {} for rp in self.fetched}

        self.requests = candidates.BuiltRequests(AMOUNTS, fetch)

    def test_every_node_has_its_own_request_until_refused(self):
        self.assertTrue(self.requests)
        self.assertIn("rp-a", self.requests)
        self.assertIn("rp-z", self.requests)
        [built] = self.requests["rp-a"]
        self.assertEqual(
            {"allocations": {"rp-a": {"resources": AMOUNTS}}}, built.plain()
        )
        # Nova JSON-encodes the request into its Selection.
        self.assertEqual(built.plain(), json.loads(json.dumps(built)))
        self.assertIs(built.owner, self.requests)
        self.assertEqual([], self.fetches)

    def test_the_amounts_of_one_request_are_not_shared(self):
        [one] = self.requests["rp-a"]
        one["allocations"]["rp-a"]["resources"]["VCPU"] = 99
        [two] = self.requests["rp-b"]
        self.assertEqual(1, two["allocations"]["rp-b"]["resources"]["VCPU"])

    def test_once_refused_placement_candidates_decide(self):
        [claimed] = self.requests["rp-a"]
        self.requests.refuse("rp-c")
        self.assertTrue(self.requests.refused)
        self.assertNotIn("rp-a", self.requests)
        self.assertIn("rp-b", self.requests)
        self.assertEqual(self.fetched["rp-b"], self.requests["rp-b"])
        # Fetched once per request, however often asked.
        self.assertNotIn("rp-c", self.requests)
        self.assertEqual([1], self.fetches)
        # A host claimed before the refusal keeps the request it was
        # claimed with; one of placement's wins where there is one.
        self.assertEqual([claimed], self.requests.get("rp-a"))
        self.assertEqual(self.fetched["rp-b"], self.requests.get("rp-b"))
        self.assertIsNone(self.requests.get("rp-unknown"))

    def test_placements_summaries_once_fetched_and_none_before(self):
        # The stock scheduler's host manager reads the nodes placement's
        # summaries name; so does the driver's once they are fetched.
        self.assertIsNone(self.requests.summaries)
        self.assertEqual([], self.fetches)
        self.requests.refuse("rp-a")
        self.assertEqual({"rp-b": {}}, self.requests.summaries)
        self.assertEqual([1], self.fetches)

    def test_a_node_not_admitted_has_no_request(self):
        requests = candidates.BuiltRequests(
            AMOUNTS, self.fail, admits=lambda rp_uuid: rp_uuid != "rp-full"
        )
        self.assertNotIn("rp-full", requests)
        self.assertIn("rp-a", requests)

    def test_a_class_the_nodes_provider_lacks_is_placements_to_place(self):
        # CUSTOM_MAGIC on a child provider of the node (Nova's nested
        # resource requests): a request built on the node's own provider
        # would be refused, and its order of hosts lost; placement's
        # candidates decide the request from the first node on.
        requests = candidates.BuiltRequests(
            AMOUNTS,
            lambda: self.fetches.append(1) or (self.fetched, {}),
            admits=lambda rp_uuid: None,
        )
        self.assertNotIn("rp-a", requests)
        self.assertIn("rp-b", requests)
        self.assertEqual([1], self.fetches)
        self.assertEqual(self.fetched["rp-b"], requests["rp-b"])

    def test_the_room_asked_is_one_instance_of_the_request(self):
        asked = []
        found = candidates.Candidates(
            conf=None,
            client=None,
            host_manager=lambda: FakeHostManager(),
            room=lambda rp_uuid, amount: (
                asked.append((rp_uuid, amount)) or False
            ),
        )
        requests = BuiltRequestsOf(found, AMOUNTS)
        self.assertNotIn("rp-a", requests)
        self.assertEqual([("rp-a", api.Resources(1, 512, 10))], asked)

    def test_an_alternate_is_offered_only_if_placement_has_room_now(self):
        asked = []
        requests = candidates.BuiltRequests(
            AMOUNTS,
            self.fail,
            admits=lambda rp_uuid: rp_uuid != "rp-full",
            now=lambda rp_uuid: asked.append(rp_uuid) or rp_uuid != "rp-held",
        )
        # The chosen host is claimed: placement's claim decides there.
        self.assertIn("rp-held", requests)
        self.assertEqual([], asked)
        requests.choosing_alternates()
        self.assertNotIn("rp-held", requests)
        self.assertIn("rp-a", requests)
        # A node the books leave out is not asked about; each node is
        # asked once per request (Nova asks each alternate of each
        # instance of a multi-create).
        self.assertNotIn("rp-full", requests)
        self.assertNotIn("rp-held", requests)
        self.assertIn("rp-a", requests)
        self.assertEqual(["rp-held", "rp-a"], asked)

    def full_and_held(self, now):
        """Requests where the books leave rp-full out and ``now`` says
        whether placement has room."""
        return candidates.BuiltRequests(
            AMOUNTS,
            self.fail,
            admits=lambda rp_uuid: rp_uuid != "rp-full",
            now=now,
        )

    def assert_only_a_has_room(self, requests):
        self.assertNotIn("rp-full", requests)
        self.assertIn("rp-a", requests)
        self.assertNotIn("rp-held", requests)

    def test_the_likely_alternates_are_asked_side_by_side(self):
        # NOTE: the two reads meet at the barrier only if both run at once;
        # one after the other, the first waits out its timeout.
        barrier = threading.Barrier(2, timeout=10)
        asked = []

        def now(rp_uuid):
            asked.append(rp_uuid)
            barrier.wait()
            return rp_uuid != "rp-held"

        requests = self.full_and_held(now)
        requests.choosing_alternates(["rp-full", "rp-a", "rp-held", None])
        self.assertEqual({"rp-a", "rp-held"}, set(asked))
        # Nova then asks as it comes to them: nothing is read again.
        self.assert_only_a_has_room(requests)
        self.assertEqual(2, len(asked))

    def test_one_likely_alternate_is_asked_when_nova_comes_to_it(self):
        asked = []
        requests = candidates.BuiltRequests(
            AMOUNTS,
            self.fail,
            now=lambda rp_uuid: asked.append(rp_uuid) or True,
        )
        requests.choosing_alternates(["rp-a"])
        self.assertEqual([], asked)
        self.assertIn("rp-a", requests)
        self.assertEqual(["rp-a"], asked)

    def test_a_read_that_fails_is_made_again_when_nova_comes_to_it(self):
        asked = []

        def now(rp_uuid):
            asked.append(rp_uuid)
            if len(asked) <= 2 and rp_uuid == "rp-b":
                raise OSError("placement did not answer")
            return True

        requests = candidates.BuiltRequests(AMOUNTS, self.fail, now=now)
        requests.choosing_alternates(["rp-a", "rp-b"])
        self.assertIn("rp-a", requests)
        self.assertIn("rp-b", requests)
        self.assertEqual(["rp-a", "rp-b", "rp-b"], sorted(asked))

    def test_the_alternates_are_read_ahead_while_the_claim_runs(self):
        # The reads wait for the claim's end (``claimed``): read ahead,
        # they have started before it and answer after it; read when
        # the alternates are chosen, they would start only after it.
        claimed = threading.Event()
        started = threading.Semaphore(0)
        asked = []
        waited = []

        def now(rp_uuid):
            asked.append(rp_uuid)
            started.release()
            waited.append(claimed.wait(10))
            return rp_uuid != "rp-held"

        requests = self.full_and_held(now)
        requests.reading_ahead(["rp-full", "rp-a", "rp-held", None])
        # The claim: the chosen node is offered without a read.
        self.assertIn("rp-z", requests)
        for _ in range(2):
            self.assertTrue(started.acquire(timeout=10))
        self.assertFalse(claimed.is_set())
        claimed.set()
        requests.choosing_alternates(["rp-full", "rp-a", "rp-held", None])
        self.assert_only_a_has_room(requests)
        self.assertEqual({"rp-a", "rp-held"}, set(asked))
        self.assertEqual([True, True], waited)

    def test_alternates_not_read_ahead_are_asked_when_chosen(self):
        # The claim fell over to the second host: the alternates Nova
        # comes to are the third and fourth, one of them not read yet.
        asked = []
        requests = candidates.BuiltRequests(
            AMOUNTS,
            self.fail,
            now=lambda rp_uuid: asked.append(rp_uuid) or True,
        )
        requests.reading_ahead(["rp-b", "rp-c"])
        requests.choosing_alternates(["rp-c", "rp-d"])
        self.assertIn("rp-c", requests)
        self.assertIn("rp-d", requests)
        self.assertEqual(["rp-b", "rp-c", "rp-d"], sorted(asked))

    def test_a_read_ahead_that_fails_is_made_again_when_nova_comes(self):
        asked = []

        def now(rp_uuid):
            asked.append(rp_uuid)
            if len(asked) == 1:
                raise OSError("placement did not answer")
            return True

        requests = candidates.BuiltRequests(AMOUNTS, self.fail, now=now)
        requests.reading_ahead(["rp-a"])
        requests.choosing_alternates(["rp-a"])
        self.assertEqual(["rp-a"], asked)
        self.assertIn("rp-a", requests)
        self.assertEqual(["rp-a", "rp-a"], asked)

    def test_reads_ahead_are_left_once_placement_decides(self):
        # Placement refused a built request: its candidates name the
        # alternates, and what was read ahead is not used.
        requests = candidates.BuiltRequests(
            AMOUNTS,
            lambda: (self.fetched, {}),
            now=lambda rp_uuid: rp_uuid == "rp-c",
        )
        requests.reading_ahead(["rp-c"])
        requests.refuse("rp-a")
        requests.choosing_alternates(["rp-c"])
        self.assertIn("rp-b", requests)
        self.assertNotIn("rp-c", requests)

    def test_alternates_from_placements_candidates_ask_nothing_more(self):
        requests = candidates.BuiltRequests(
            AMOUNTS, lambda: (self.fetched, {}), now=self.fail
        )
        requests.refuse("rp-a")
        requests.choosing_alternates()
        self.assertIn("rp-b", requests)
        self.assertNotIn("rp-c", requests)

    def test_the_room_asked_now_is_one_instance_of_the_request(self):
        asked = []
        found = candidates.Candidates(
            conf=None,
            client=None,
            host_manager=lambda: FakeHostManager(),
            room_now=lambda context, rp_uuid, amount, since: (
                asked.append((context, rp_uuid, amount, since)) or False
            ),
        )
        requests = candidates.BuiltRequests(
            AMOUNTS, self.fail, now=found._now("ctx", AMOUNTS, 12.5)
        )
        requests.choosing_alternates()
        self.assertNotIn("rp-a", requests)
        self.assertEqual(
            [("ctx", "rp-a", api.Resources(1, 512, 10), 12.5)], asked
        )

    def test_a_node_without_a_uuid_is_never_offered(self):
        # A compute node record without a uuid has no provider: placement
        # never offers it, and a Selection refuses a null uuid.
        self.assertNotIn(None, self.requests)
        self.assertFalse(self.requests.offers(None))
        self.requests.refuse("rp-a")
        self.assertNotIn(None, self.requests)

    def test_no_candidates_after_a_refusal_leaves_no_host(self):
        self.fetched = {}
        self.requests.refuse("rp-a")
        self.assertNotIn("rp-a", self.requests)
        self.assertNotIn("rp-b", self.requests)


def BuiltRequestsOf(found, amounts):
    """The ``BuiltRequests`` ``found`` makes for ``amounts``."""
    return candidates.BuiltRequests(
        amounts, lambda: ({}, {}), found._admits(amounts)
    )


class TestWhatIsBuilt(unittest.TestCase):
    def amounts(self, query, filters=("compute",), build=True):
        found = candidates.Candidates(
            conf=None,
            client=None,
            host_manager=lambda: FakeHostManager(filters),
            build=build,
        )
        return found._built_amounts(FakeResources(query))

    def test_standard_resources_are_built(self):
        self.assertEqual(
            AMOUNTS,
            self.amounts(
                "limit=1000&resources=DISK_GB%3A10%2CMEMORY_MB%3A512%2CVCPU%3A1"
            ),
        )
        # A volume-backed server takes no DISK_GB.
        self.assertEqual(
            {"VCPU": 1, "MEMORY_MB": 512},
            self.amounts("resources=MEMORY_MB%3A512%2CVCPU%3A1"),
        )

    def test_the_disabled_compute_trait_needs_the_compute_filter(self):
        query = (
            "limit=1000&required=%21COMPUTE_STATUS_DISABLED"
            "&resources=MEMORY_MB%3A512%2CVCPU%3A1"
        )
        self.assertEqual({"VCPU": 1, "MEMORY_MB": 512}, self.amounts(query))
        # Without Nova's ComputeFilter placement alone keeps disabled
        # computes out: ask it.
        self.assertIsNone(self.amounts(query, filters=()))

    def test_anything_placement_must_decide_is_asked(self):
        resources = "resources=MEMORY_MB%3A512%2CVCPU%3A1"
        for extra in (
            "required=CUSTOM_FAST",
            "required=%21CUSTOM_SLOW",
            "required=%21COMPUTE_STATUS_DISABLED%2CCUSTOM_FAST",
            "member_of=in%3Aagg",
            "in_tree=rp-a",
            "root_required=CUSTOM_FAST",
            "group_policy=none&resources1=CUSTOM_PORT%3A1",
            "resources_accel=FPGA%3A1",
        ):
            with self.subTest(extra=extra):
                self.assertIsNone(self.amounts(resources + "&" + extra))
        self.assertIsNone(self.amounts("limit=1000"))

    def test_any_class_of_the_unnumbered_group_is_built(self):
        # PCPU, a child provider's VGPU (its refusal then asks placement)
        # and an Ironic flavour's custom class alone.
        for query, amounts in (
            (
                "resources=MEMORY_MB%3A512%2CPCPU%3A2",
                {"MEMORY_MB": 512, "PCPU": 2},
            ),
            (
                "resources=MEMORY_MB%3A512%2CVGPU%3A1",
                {"MEMORY_MB": 512, "VGPU": 1},
            ),
            (
                "resources=CUSTOM_BAREMETAL_GOLD%3A1",
                {"CUSTOM_BAREMETAL_GOLD": 1},
            ),
        ):
            with self.subTest(query=query):
                self.assertEqual(amounts, self.amounts(query))

    def test_turned_off_nothing_is_built(self):
        self.assertIsNone(
            self.amounts("resources=MEMORY_MB%3A512%2CVCPU%3A1", build=False)
        )
