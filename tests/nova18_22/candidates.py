"""Built allocation requests (``grant_scheduler.nova.scheduler.candidates``)
in a release's real services and placement.

Mixed into each release's ``GrantsTestBase`` (``tests/nova22/in_nova`` and
``tests/nova18_21``): a boot of standard resources is claimed with
no allocation-candidates query; a request placement must filter (a
required trait) is decided by placement's candidates; a node placement
has no room on, while grant_scheduler's books have, is refused by
placement's claim and the request goes on by placement's candidates; a
node the books show full is not tried.
"""

import contextlib
import uuid
from unittest import mock

from nova.scheduler.client import report

from grant_scheduler.nova import compat
from tests.nova18_22 import in_nova

RELEASE = compat.release()
TRAIT = "CUSTOM_GS_FAST"


class BuiltRequestsTests:
    """Tests for a ``GrantsTestBase`` with ``nova_shared.in_nova``'s
    helpers."""

    @contextlib.contextmanager
    def candidate_queries(self):
        """The query strings of every allocation-candidates request made
        in the block."""
        queries = []
        real = report.SchedulerReportClient.get_allocation_candidates

        def counted(client, context, resources):
            queries.append(resources.to_querystring())
            return real(client, context, resources)

        with mock.patch.object(
            report.SchedulerReportClient, "get_allocation_candidates", counted
        ):
            yield queries

    def allocations_by_host(self, server_id):
        """``{host: (VCPU, MEMORY_MB, DISK_GB)}`` placement allocates to
        ``server_id``."""
        allocations = self.placement_client.get(
            "/allocations/%s" % server_id
        ).body["allocations"]
        hosts = {self.placement_provider(h): h for h in self.HOSTS}
        return {
            hosts[provider]: tuple(
                held["resources"].get(name, 0)
                for name in ("VCPU", "MEMORY_MB", "DISK_GB")
            )
            for provider, held in allocations.items()
        }

    def flavor_amounts(self):
        amount = self.flavor_resources(1)
        return (amount.vcpus, amount.memory_mb, amount.disk_gb)

    def leave_no_memory_in_placement(self, host):
        """Reserve all but 1 MB of ``host``'s memory in placement only:
        grant_scheduler's books still have room there."""
        provider = self.placement_provider(host)
        url = "/resource_providers/%s/inventories/MEMORY_MB" % provider
        inventory = self.placement_client.get(url).body
        inventory["reserved"] = inventory["total"] - 1
        inventory.pop("resource_provider_generation", None)
        inventory["resource_provider_generation"] = self.placement_client.get(
            "/resource_providers/%s" % provider
        ).body["generation"]
        self.placement_client.put(url, inventory)

    def flavor_requiring(self, trait):
        flavor_id = str(uuid.uuid4())
        amount = self.flavor_resources(1)
        admin = getattr(self, "admin_api", None) or self.api
        admin.post_flavor(
            {
                "flavor": {
                    "name": "gs-" + flavor_id[:8],
                    "id": flavor_id,
                    "ram": amount.memory_mb,
                    "vcpus": amount.vcpus,
                    "disk": amount.disk_gb,
                }
            }
        )
        admin.post_extra_spec(
            flavor_id, {"extra_specs": {"trait:%s" % trait: "required"}}
        )
        return flavor_id

    def host_of(self, server):
        return server["OS-EXT-SRV-ATTR:host"]

    @contextlib.contextmanager
    def grants_tried(self):
        """The hosts grants were tried on in the block."""
        tried = []
        real = self.gs.grant_on

        def recorded(instance_uuid, host, *args, **kwargs):
            tried.append(host)
            return real(instance_uuid, host, *args, **kwargs)

        with mock.patch.object(self.gs, "grant_on", recorded):
            yield tried

    # -- the tests ------------------------------------------------------

    def test_a_standard_boot_queries_no_candidates(self):
        with self.candidate_queries() as queries:
            server = self.boot()
        self.assertEqual([], queries)
        host = self.host_of(server)
        self.assertEqual(
            {host: self.flavor_amounts()},
            self.allocations_by_host(server["id"]),
        )
        self.assertEqual(self.flavor_resources(1), self.usage()[host])
        self.assertEqual([], self.placement_over_capacity())

    def test_a_refused_built_request_goes_on_by_candidates(self):
        first = self.host_of(self.boot())
        [emptier] = set(self.HOSTS) - {first}
        # Nova's weighers prefer the emptier host; placement has no room
        # there, grant_scheduler's books have.
        self.leave_no_memory_in_placement(emptier)
        with self.candidate_queries() as queries:
            server = self.boot()
        self.assertEqual(first, self.host_of(server))
        self.assertEqual(1, len(queries))
        self.assertEqual(
            {first: self.flavor_amounts()},
            self.allocations_by_host(server["id"]),
        )
        self.assertEqual([], self.live_grants())
        self.assertEqual(self.flavor_resources(2), self.usage()[first])
        self.assertEqual(self.flavor_resources(0), self.usage()[emptier])

    def test_no_room_in_placement_is_no_valid_host(self):
        for host in self.HOSTS:
            self.leave_no_memory_in_placement(host)
        with self.candidate_queries() as queries:
            failed = self.boot(expected_state="ERROR")
        self.assertIn("No valid host", failed["fault"]["message"])
        self.assertEqual(1, len(queries))
        self.assertEqual({}, self.allocations_by_host(failed["id"]))
        self.assertEqual([], self.live_grants())

    def test_a_required_trait_is_decided_by_candidates(self):
        first = self.host_of(self.boot())
        # The fuller host has the trait: Nova's weighers prefer the other,
        # placement's candidates leave it out.
        provider = self.placement_provider(first)
        generation = self.placement_client.get(
            "/resource_providers/%s" % provider
        ).body["generation"]
        self.placement_client.put("/traits/%s" % TRAIT, None, version="1.6")
        self.placement_client.put(
            "/resource_providers/%s/traits" % provider,
            {"resource_provider_generation": generation, "traits": [TRAIT]},
            version="1.6",
        )
        with self.candidate_queries() as queries:
            server = self.boot(flavorRef=self.flavor_requiring(TRAIT))
        self.assertEqual(first, self.host_of(server))
        self.assertEqual(1, len(queries))
        self.assertIn(TRAIT, queries[0])

    def test_a_node_full_in_the_books_is_not_tried(self):
        first = self.host_of(self.boot())
        [emptier] = set(self.HOSTS) - {first}
        # Nova's weighers prefer the emptier host; its usage in
        # grant_scheduler's books leaves no room (placement has room).
        self.fill(emptier, emptier)
        with self.grants_tried() as tried:
            server = self.boot()
        self.assertEqual(first, self.host_of(server))
        self.assertEqual([first], tried)
        # Full everywhere in the books: placement is asked once, as the
        # stock scheduler asks it (the books' capacity may be behind
        # placement's).  Placement has room, and Nova runs none of the
        # claims that fill the books (a lost delete's, say): the refused
        # grant reconciles its node with Nova's records, which releases
        # them there, and the server is placed as the stock scheduler
        # places it.
        self.fill(first, first)
        strangers = set(self.claimed(first)) | set(self.claimed(emptier))
        with self.grants_tried() as tried, self.candidate_queries() as queries:
            server = self.boot()
        self.assertEqual(1, len(queries))
        host = self.host_of(server)
        self.assertEqual(host, tried[-1])
        self.assertFalse(strangers & set(self.claimed(host)))
        # What every scheduler's periodic tasks then do: the books are
        # what runs.
        self.reconcile()
        self.assertIn(server["id"], self.claimed(host))
        self.assertEqual(self.placement_usage(host), self.books_usage(host))
        self.assertEqual([], self.over_limit())

    def test_a_boot_reads_placement_for_its_alternates_only(self):
        """Each alternate of a built request (the other host: two hosts,
        ``max_attempts - 1`` = 2 alternates asked) is checked against
        placement's usage now, one small read each (and its inventory,
        one more, where its provider moved since the last sync); no
        candidates query, and the chosen host is read nothing
        (placement's claim decides there)."""
        from grant_scheduler.nova.books import inventory

        self.boot()
        read = []
        real = inventory.PlacementInventory._read

        def counted(placement, context, node_uuid, what):
            read.append((what, node_uuid))
            return real(placement, context, node_uuid, what)

        patched = mock.patch.object(
            inventory.PlacementInventory, "_read", counted
        )
        with patched, self.candidate_queries() as queries:
            server = self.boot()
        self.assertEqual([], queries)
        [other] = set(self.HOSTS) - {self.host_of(server)}
        other = self.placement_provider(other)
        self.assertEqual(
            [("usages", other)], [r for r in read if r[0] == "usages"]
        )
        self.assertIn(
            [r for r in read if r[0] != "usages"],
            ([], [("inventories", other)]),
        )

    def test_the_alternate_is_read_before_the_claim_ends(self):
        """The alternate's read starts while the chosen host is claimed
        (``BuiltRequests.reading_ahead``): the claim waits for it, and a
        read made only after the claim would never come."""
        import threading

        from grant_scheduler.nova.books import inventory

        # NOTE: the first boot registers the nodes in the books; a node
        # the books do not know yet is offered as an alternate unread.
        self.boot()
        read = threading.Event()
        seen = []
        real_read = inventory.PlacementInventory._read
        client = self.driver.filter_scheduler.placement_client._client
        real_put = client.put

        def reading(placement, context, node_uuid, what):
            read.set()
            return real_read(placement, context, node_uuid, what)

        def claim_when_read(url, *args, **kwargs):
            if url.startswith("/allocations/"):
                seen.append(read.wait(5))
            return real_put(url, *args, **kwargs)

        with (
            mock.patch.object(inventory.PlacementInventory, "_read", reading),
            mock.patch.object(client, "put", claim_when_read),
        ):
            server = self.boot()
        self.assertEqual([True], seen)
        self.assertIn(self.host_of(server), self.HOSTS)
        self.assertEqual([], self.over_limit())

    def test_a_new_servers_claim_is_one_request(self):
        """Where Nova's claim knows consumer generations (19-22), a new
        server's claim is one ``PUT`` placement takes only for a new
        consumer; on 18, Nova's claim reads the consumer first."""
        with self.allocation_requests() as calls:
            server = self.boot()
        if RELEASE is not None and RELEASE < 19:
            expected = [("GET", server["id"], 200), ("PUT", server["id"], 204)]
        else:
            expected = [("PUT", server["id"], 204)]
        self.assertEqual(expected, calls)
        self.assertEqual(
            {self.host_of(server): self.flavor_amounts()},
            self.allocations_by_host(server["id"]),
        )

    def test_a_consumer_holding_allocations_is_claimed_as_nova_claims(self):
        """A consumer that holds allocations in a request taken for a
        new server's is not new: placement refuses the one request, and
        Nova's claim holds both hosts' allocations, the source's and the
        destination's, as it does for the stock scheduler (an
        evacuation's own request is Nova's claim alone: ``lifecycle``)."""
        from nova import context as nova_context

        self.boot()  # registers the nodes in the books
        source, destination = self.HOSTS
        consumer = str(uuid.uuid4())
        vcpus, memory, disk = self.flavor_amounts()
        resources = {"VCPU": vcpus, "MEMORY_MB": memory, "DISK_GB": disk}
        in_nova.allocate_new_consumer(
            self.placement_client,
            consumer,
            {self.placement_provider(source): resources},
            "project",
            "user",
        )
        version = "1.25" if RELEASE is not None and RELEASE < 19 else "1.28"
        request = {
            "allocations": {
                self.placement_provider(destination): {"resources": resources}
            }
        }
        from grant_scheduler.nova.scheduler import filter_scheduler

        # NOTE: the claim of a request that ignores no host (a new
        # server's, as Nova's evacuations name their source).
        scheduler = self.driver.filter_scheduler
        client = filter_scheduler.GrantingPlacementClient(
            scheduler.placement_client._client,
            scheduler.grants,
            new_consumer=lambda: True,
        )
        with self.allocation_requests() as calls:
            claimed = client.claim_resources(
                nova_context.get_admin_context(),
                consumer,
                request,
                "project",
                "user",
                allocation_request_version=version,
            )
        self.assertTrue(claimed)
        self.assertEqual(
            {
                source: self.flavor_amounts(),
                destination: self.flavor_amounts(),
            },
            self.allocations_by_host(consumer),
        )
        nova_path = [("GET", consumer, 200), ("PUT", consumer, 204)]
        if RELEASE is None or RELEASE >= 19:
            nova_path.insert(0, ("PUT", consumer, 409))
        self.assertEqual(nova_path, calls)
        granted = [
            g for g in self.live_grants() if g.instance_uuid == consumer
        ]
        self.assertEqual([destination], [g.host for g in granted])

    def test_turned_off_every_boot_queries_candidates(self):
        self.flags(build_allocation_requests=False, group="grant_scheduler")
        with self.candidate_queries() as queries:
            self.boot()
            self.boot()
        self.assertEqual(2, len(queries))
