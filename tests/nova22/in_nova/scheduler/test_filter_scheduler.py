"""The driver as a citizen of Nova 22: placement's records, Nova's limits,
rebuilds, and grants of servers Nova has given up.

On Nova 17-22 the driver is Nova's FilterScheduler with each placement
claim granted first (``grant_scheduler.nova.scheduler.filter_scheduler``).
These tests
drive Nova's API and check what Nova and placement record, beside what
grant_scheduler's books say.
"""

import subprocess
import sys
import threading
import time
import types
import unittest
from unittest import mock

from nova import context as nova_context
from nova import exception as nova_exception
from nova.tests.functional.api import client

from grant_scheduler import api
from grant_scheduler.nova.scheduler import filter_scheduler
from tests.nova18_22 import in_nova
from tests.nova22.in_nova import base

# An image of Nova's GlanceFixture other than the one servers boot from.
OTHER_IMAGE = "76fa36fc-c930-4bf3-8c8a-ea2a2420deb6"


class TestPlacementRecords(base.GrantsTestBase):
    def test_the_driver_claims_in_placement(self):
        self.assertTrue(self.driver.claims_in_placement)
        self.assertFalse(self.driver.USES_ALLOCATION_CANDIDATES)
        server = self.boot()
        host = server["OS-EXT-SRV-ATTR:host"]
        allocations = self._get_allocations_by_server_uuid(server["id"])
        provider = self.placement_provider(host)
        self.assertEqual(
            {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 10},
            allocations[provider]["resources"],
        )
        self.assertEqual(self.flavor_resources(1), self.usage()[host])
        self.assertEqual([], self.live_grants())

    def test_the_grant_decides_where_placement_has_room(self):
        first = self.boot()["OS-EXT-SRV-ATTR:host"]
        [emptier] = set(self.HOSTS) - {first}
        # The emptier host, which Nova's weighers prefer, is granted to
        # servers still on their way (other schedulers' answers): full in
        # grant_scheduler's books only.  Placement offers it, the grant is
        # not taken there, the server goes to the other host.
        held = self.hold(emptier, emptier)
        server = self.boot()
        self.assertEqual(first, server["OS-EXT-SRV-ATTR:host"])
        held += self.hold(first, first)
        failed = self.boot(expected_state="ERROR")
        self.assertIn("No valid host", failed["fault"]["message"])
        # Neither a grant nor an allocation is left for the refused one;
        # the servers on their way keep theirs.
        self.assertEqual(
            {}, self._get_allocations_by_server_uuid(failed["id"])
        )
        self.assertEqual(
            sorted(held), sorted(g.instance_uuid for g in self.live_grants())
        )
        self.assertEqual([], self.over_limit())

    def test_a_claim_placement_refuses_gives_back_its_grant(self):
        client = self.driver.filter_scheduler.placement_client
        claim = client._placement_claim
        refused = []

        def refuse_first(context, consumer_uuid, *args, **kwargs):
            if not refused:
                refused.append(consumer_uuid)
                return False
            return claim(context, consumer_uuid, *args, **kwargs)

        with mock.patch.object(client, "_placement_claim", refuse_first):
            server = self.boot()
        self.assertEqual([server["id"]], refused)
        # One grant was written and withdrawn, one consumed.
        states = sorted(g.state for g in self.gs.grants())
        self.assertNotIn("won", states)
        self.assertEqual(
            self.flavor_resources(1),
            sum(self.usage().values(), self.flavor_resources(0)),
        )


# A scheduler process of its own: it takes the grants it is told on its
# standard input, answers each with its name, and ends with its input.
GRANTER = """
import sys
from grant_scheduler import api
gs = api.GrantScheduler.from_url(sys.argv[1])
for line in sys.stdin:
    instance_uuid, host, node, vcpus, memory_mb, disk_gb = line.split()
    amount = api.Resources(int(vcpus), int(memory_mb), int(disk_gb))
    gs.grant_on(instance_uuid, host, node, amount)
    [name] = [
        g.scheduler
        for g in gs.grants(host=host, live=True)
        if g.instance_uuid == instance_uuid
    ]
    print(name, flush=True)
"""


class TestGrantsOfEndedSchedulers(base.GrantsTestBase):
    """A scheduler worker killed between its grant and its answer (a
    SIGKILL, the OOM killer): Nova's conductor gives its request up only
    when its call times out (``rpc_response_timeout``, 60 s).  Its grants
    do not hold, in the meantime, room the stock scheduler would give."""

    def granter(self):
        """A scheduler process of its own: ``f(instance_uuid, host, node,
        amount)`` has it take a grant and answers its name."""
        child = subprocess.Popen(
            [sys.executable, "-c", GRANTER, self.database_url()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            universal_newlines=True,
        )
        self.addCleanup(child.wait)
        self.addCleanup(child.stdin.close)

        def grant_on(instance_uuid, host, node, amount):
            child.stdin.write(
                "%s %s %s %d %d %d\n"
                % (
                    instance_uuid,
                    host,
                    node,
                    amount.vcpus,
                    amount.memory_mb,
                    amount.disk_gb,
                )
            )
            child.stdin.flush()
            return child.stdout.readline().strip()

        grant_on.child = child
        return grant_on

    def end(self, granter):
        """End the granter's process: its grants outlive it."""
        granter.child.stdin.close()
        self.assertEqual(0, granter.child.wait())

    def hold_by_a_process_that_ends(self, host, node):
        granter = self.granter()
        names = set()
        held = self.hold(host, node, lambda *args: names.add(granter(*args)))
        self.end(granter)
        [name] = names
        self.assertTrue(api.scheduler_ended(name))
        return held, name

    def test_an_ended_schedulers_grants_give_way(self):
        first = self.boot()["OS-EXT-SRV-ATTR:host"]
        [emptier] = set(self.HOSTS) - {first}
        # The host Nova's weighers prefer is held by grants of a scheduler
        # process that has ended, the other by a live one's (answers on
        # their way).  Stock Nova places the server on the emptier host,
        # where placement has room; so does the driver.
        ended, name = self.hold_by_a_process_that_ends(emptier, emptier)
        live = self.hold(first, first)
        server = self.boot()
        self.assertEqual(emptier, server["OS-EXT-SRV-ATTR:host"])
        # The ended process's grants are gone, the live process's stay.
        self.assertEqual(
            sorted(live), sorted(g.instance_uuid for g in self.live_grants())
        )
        self.assertIn(
            "the scheduler process %s that took it has ended" % name,
            self.stdlog.logger.output,
        )
        self.assertTrue(ended)
        self.assertEqual([], self.over_limit())

    def test_an_ended_schedulers_claim_in_placement_stands(self):
        first = self.boot()["OS-EXT-SRV-ATTR:host"]
        [emptier] = set(self.HOSTS) - {first}
        slot = self.flavor_resources()
        granter = self.granter()
        # The ended process took both of the emptier host's slots and
        # claimed the first of them in placement before it ended.
        claimed, unclaimed = self.in_flight(), self.in_flight()
        name = granter(claimed, emptier, emptier, slot)
        granter(unclaimed, emptier, emptier, slot)
        self.end(granter)
        put = in_nova.allocate_new_consumer(
            self.placement,
            claimed,
            {self.placement_provider(emptier): dict(slot.items())},
            "project",
            "user",
        )
        self.assertEqual(204, put.status)
        live = self.hold(first, first)
        server = self.boot()
        # Placement had one slot there: the unclaimed grant gave way, the
        # claimed one stands as placement's claim does.
        self.assertEqual(emptier, server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual(
            sorted(live + [claimed]),
            sorted(g.instance_uuid for g in self.live_grants()),
        )
        self.assertIn(
            "Withdrew the grant of %s on %s/%s: the scheduler process %s"
            % (unclaimed, emptier, emptier, name),
            self.stdlog.logger.output,
        )
        self.assertEqual([], self.over_limit())


class TestNovaLimits(base.GrantsTestBase):
    def test_an_instance_larger_than_its_host_is_refused(self):
        # 3 vCPUs on 2-vCPU hosts: within total x cpu_allocation_ratio
        # but over placement's max_unit (the physical total).
        big = self._create_flavor(vcpu=3, memory_mb=512, disk=1)
        server = self.post_server(flavorRef=big)
        failed = self._wait_for_state_change(server, "ERROR")
        self.assertIn("No valid host", failed["fault"]["message"])
        self.assertEqual([], self.gs.grants())


class TestNoValidHostSaysWhy(base.GrantsTestBase):
    def test_the_filter_that_rejected_every_host_is_named(self):
        group = self.api.post_server_groups(
            {"name": "spread", "policy": "anti-affinity"}
        )
        hints = {"group": group["id"]}

        def boot_in_group(expected_state):
            # NOTE: the hints sit beside the server in the request body.
            body = self._build_server(
                flavor_id=self.flavor_id, networks="none"
            )
            server = self.api.post_server(
                {"server": body, "os:scheduler_hints": hints}
            )
            return self._wait_for_state_change(server, expected_state)

        for _ in self.HOSTS:
            boot_in_group("ACTIVE")
        failed = boot_in_group("ERROR")
        # What every user sees is Nova's own text; the details, shown to
        # admins, name the filter.
        self.assertEqual(
            "No valid host was found. There are not enough hosts available.",
            failed["fault"]["message"],
        )
        self.assertIn(
            "ServerGroupAntiAffinityFilter rejected every host that had room",
            failed["fault"]["details"],
        )

    def test_it_reaches_the_conductor_as_novas_own_class(self):
        import sys

        from oslo_messaging._drivers import common as rpc_common

        from grant_scheduler.nova import compat

        try:
            raise compat.no_valid_host("Not enough hosts.", "ComputeFilter")
        except nova_exception.NoValidHost:
            wire = rpc_common.serialize_remote_exception(sys.exc_info())
        rebuilt = rpc_common.deserialize_remote_exception(
            wire, ["nova.exception"]
        )
        self.assertIsInstance(rebuilt, nova_exception.NoValidHost)
        self.assertEqual(
            "No valid host was found. Not enough hosts.",
            rebuilt.format_message(),
        )
        self.assertIn(
            "ComputeFilter rejected every host that had room", str(rebuilt)
        )

    def test_no_filter_is_named_when_no_host_has_room(self):
        for _ in range(base.SLOTS_PER_HOST * len(self.HOSTS)):
            self.boot()
        failed = self.boot(expected_state="ERROR")
        self.assertNotIn("rejected", failed["fault"]["details"])


class TestRebuild(base.GrantsTestBase):
    def test_rebuild_on_a_full_host_takes_no_grant(self):
        servers = [self.boot() for _ in range(base.SLOTS_PER_HOST * 2)]
        before = self.gs.grants()
        image = OTHER_IMAGE
        rebuilt = self._rebuild_server(servers[0], image)
        self.assertEqual(image, rebuilt["image"]["id"])
        self.assertEqual(
            servers[0]["OS-EXT-SRV-ATTR:host"],
            rebuilt["OS-EXT-SRV-ATTR:host"],
        )
        self.assertEqual(before, self.gs.grants())
        self.assertEqual([], self.over_limit())


class TestGivenUpGrants(base.GrantsTestBase):
    """Servers the conductor's quota recheck refuses never reach a
    compute: their grants are withdrawn when Nova says so."""

    def refuse_at_recheck(self):
        from nova.compute import utils as compute_utils

        check = compute_utils.check_num_instances_quota

        def recheck_fails(context, flavor, min_count, max_count, **kw):
            if "orig_num_req" in kw:
                raise nova_exception.TooManyInstances(
                    overs="instances", req=1, used=10, allowed=10
                )
            return check(context, flavor, min_count, max_count, **kw)

        patcher = mock.patch.object(
            compute_utils, "check_num_instances_quota", recheck_fails
        )
        patcher.start()
        return patcher

    def boot_refused(self):
        """A boot the quota recheck refuses: the conductor has set the
        server to ERROR without a host when the API answers."""
        # NOTE: testtools' assertRaises takes a callable and returns the
        # exception.
        refused = self.assertRaises(
            client.OpenStackApiException, self.post_server
        )
        self.assertEqual(403, refused.response.status_code)
        [server] = [
            s
            for s in self.api.get_servers()
            if s["id"] not in self.seen and s["status"] == "ERROR"
        ]
        self.seen.add(server["id"])
        self.assertIsNone(server["OS-EXT-SRV-ATTR:host"])
        return server

    def test_deleted_servers_give_their_room_back_at_once(self):
        slots = base.SLOTS_PER_HOST * len(self.HOSTS)
        self.seen = set()
        patcher = self.refuse_at_recheck()
        refused = [self.boot_refused() for _ in range(slots)]
        patcher.stop()
        # Some of the refused servers still hold grants: placement keeps
        # their allocations, so once a host is full there a grant held by
        # an earlier refused server is withdrawn when it stands in the way
        # of the next (Nova has given that server up), not every one.
        held = {g.instance_uuid for g in self.live_grants()}
        self.assertTrue(held)
        self.assertLessEqual(held, {s["id"] for s in refused})
        for server in refused:
            self._delete_server(server)
        # Stock Nova places every one of these; nothing has to expire first.
        servers = [self.boot() for _ in range(slots)]
        self.assertEqual(
            sorted(self.HOSTS * base.SLOTS_PER_HOST),
            sorted(s["OS-EXT-SRV-ATTR:host"] for s in servers),
        )
        self.assertEqual([], self.live_grants())
        self.assertEqual([], self.over_limit())

    def test_the_periodic_task_withdraws_grants_of_error_servers(self):
        self.seen = set()
        self.addCleanup(self.refuse_at_recheck().stop)
        failed = self.boot_refused()
        [grant] = self.live_grants()
        self.assertEqual(failed["id"], grant.instance_uuid)
        # Nova's scheduler manager runs the driver's periodic tasks.
        self.addCleanup(self.driver.stop)
        self.driver.run_periodic_tasks(nova_context.get_admin_context())
        self.assertEqual([], self.live_grants())


class TestClaimsOnANodeOneAtATime(unittest.TestCase):
    """A process's claims on one node reach placement one after the
    other: two at once on a provider make placement refuse one (its
    generation moved), which Nova's client retries after a random sleep
    of up to two seconds."""

    def setUp(self):
        self.running = {}
        self.most = 0
        self.conflicts = []
        self.lock = threading.Lock()

    def claim_in_placement(self, context, consumer_uuid, alloc_request, *a):
        [provider] = alloc_request["allocations"]
        with self.lock:
            if self.running.get(provider):
                self.conflicts.append(consumer_uuid)
            self.running[provider] = self.running.get(provider, 0) + 1
            self.most = max(self.most, sum(self.running.values()))
        time.sleep(0.05)
        with self.lock:
            self.running[provider] -= 1
        return True

    def client(self):
        grants = types.SimpleNamespace(
            outage=types.SimpleNamespace(usable=lambda: True),
            node_of=lambda request: types.SimpleNamespace(
                node_uuid=next(iter(request["allocations"]))
            ),
            grant=lambda *args: True,
            withdraw=self.fail,
        )
        inner = types.SimpleNamespace(claim_resources=self.claim_in_placement)
        return filter_scheduler.GrantingPlacementClient(inner, grants)

    def test_claims_on_one_node_do_not_meet_in_placement(self):
        client = self.client()
        claims = [("rp-a", "u%d" % n) for n in range(3)] + [("rp-b", "u3")]
        threads = [
            threading.Thread(
                target=client.claim_resources,
                args=(
                    None,
                    uuid,
                    {"allocations": {rp: {"resources": {"VCPU": 1}}}},
                ),
            )
            for rp, uuid in claims
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([], self.conflicts)
        # Another node's claim ran beside them.
        self.assertEqual(2, self.most)
        self.assertEqual({}, client._claiming._locks)


class TestAlternatesWanted(unittest.TestCase):
    """How many alternates Nova's ``_schedule`` will choose, read from its
    arguments (``_alternates_wanted``)."""

    @staticmethod
    def schedule(
        context,
        spec_obj,
        instance_uuids,
        alloc_reqs_by_rp_uuid,
        provider_summaries,
        allocation_request_version=None,
        return_alternates=False,
    ):
        """Nova 22's ``FilterScheduler._schedule``, bound."""

    def wanted(self, *args, **kwargs):
        return filter_scheduler._alternates_wanted(self.schedule, args, kwargs)

    def test_one_instance_with_alternates(self):
        # max_attempts is 3 by default.
        self.assertEqual(
            2, self.wanted("ctx", "spec", ["u"], {}, {}, "1.36", True)
        )
        self.assertEqual(
            2,
            self.wanted("ctx", "spec", ["u"], {}, {}, return_alternates=True),
        )

    def test_none_without_alternates_or_for_more_instances(self):
        self.assertEqual(0, self.wanted("ctx", "spec", ["u"], {}, {}))
        self.assertEqual(
            0, self.wanted("ctx", "spec", ["u", "v"], {}, {}, None, True)
        )
        self.assertEqual(0, self.wanted("ctx", "spec", None, None, None))
        # A signature Nova never had: nothing read ahead.
        self.assertEqual(0, self.wanted("ctx"))


class TestCostPerBoot(base.GrantsTestBase):
    """What the driver adds to a boot, in grant_scheduler's statements."""

    # Measured on MariaDB with oslo.db 8.4, which pings each connection it
    # checks out (a SELECT per transaction): the view's changes read twice
    # (the nodes the request knows; the grant's own view), 2 + 2; the grant,
    # 1 + 2 (UPDATE, INSERT) and a commit; the claim from the instance
    # information after the spawn, 1 + 5 (its node and grant read, UPDATE
    # of both, the read of the instance's other live grants, INSERT of the
    # claim) and a commit.
    MOST_STATEMENTS = 13

    def test_statements_per_boot(self):
        import sqlalchemy as sa

        self.boot()  # registers both nodes
        statements = []

        def count(conn, cursor, statement, *args):
            statements.append(statement.split(None, 1)[0].upper())

        engine = self.gs.database.get_engine()
        sa.event.listen(engine, "before_cursor_execute", count)
        self.addCleanup(
            sa.event.remove, engine, "before_cursor_execute", count
        )
        self.boot()
        print("grant_scheduler statements for one boot: %s" % statements)
        self.assertLessEqual(len(statements), self.MOST_STATEMENTS)
        self.assertIn("INSERT", statements)  # the grant


class TestLikelyAlternates(unittest.TestCase):
    """The hosts Nova's ``_get_alternate_hosts`` comes to first, asked of
    placement side by side (``BuiltRequests.choosing_alternates``)."""

    def host(self, uuid, cell):
        return types.SimpleNamespace(uuid=uuid, cell_uuid=cell)

    def test_the_first_of_the_chosen_hosts_cell_in_nova_order(self):
        chosen = self.host("a", "c1")
        hosts = [
            chosen,
            self.host("b", "c2"),
            self.host("c", "c1"),
            self.host("d", "c1"),
            self.host("e", "c1"),
        ]
        likely = filter_scheduler._likely_alternates
        self.assertEqual(["c", "d"], likely([chosen], None, hosts, 0, 2))
        self.assertEqual(
            ["c"], likely([chosen], None, hosts, 0, 1, {}, "1.29")
        )
        self.assertEqual((), likely([chosen], None, hosts, 0, 0))
        # More instances: Nova sorts the hosts again for each.
        self.assertEqual((), likely([chosen, hosts[2]], None, hosts, 1, 2))
