"""Helpers of the test classes that run grant_scheduler's driver in a
release's functional framework, shared by ``tests.nova22.in_nova``
(Nova 22) and ``tests.nova18_21`` (Nova 18-21).

``GrantsHelpers`` is mixed into each one's ``GrantsTestBase`` (which
starts the release's services): grant_scheduler's books, the room taken
from under a chosen host, placement's records and the concurrent API
clients.  ``placement_client`` names the release's placement API client.
"""

import contextlib
import sys
import types
import uuid
from unittest import mock

import eventlet
from nova import context as nova_context
from nova.virt import fake as fake_virt

from grant_scheduler import api

FLAVOR = {"vcpu": 1, "memory_mb": 1024, "disk": 10, "ephemeral": 0}
SLOTS_PER_HOST = 2
# wait_for's default: the server's host does not matter.
ANY_HOST = object()


class DiskFakeDriver(fake_virt.FakeDriver):
    """Nova's fake driver with a small capacity and real free disk.

    The fake driver reports ``disk_available_least = 0``, which Nova takes
    as free disk, so every host would look full of disk.  Two
    ``FLAVOR``-sized servers fill a host exactly (with Nova's default
    ``reserved_host_memory_mb`` of 512).  ``at_spawn``, when a test sets
    it, is called with the instance first thing in the spawn.
    """

    vcpus = 2
    memory_mb = 2048 + 512
    local_gb = 20
    at_spawn = None

    def get_available_resource(self, nodename):
        resources = super().get_available_resource(nodename)
        if resources:
            resources["disk_available_least"] = (
                resources["local_gb"] - resources["local_gb_used"]
            )
        return resources

    def spawn(self, context, instance, *args, **kwargs):
        if DiskFakeDriver.at_spawn is not None:
            DiskFakeDriver.at_spawn(instance)
        return super().spawn(context, instance, *args, **kwargs)


def register_test_drivers(name):
    """Make ``DiskFakeDriver`` loadable as ``compute_driver =
    NAME.DiskFakeDriver`` (Nova loads ``"nova.virt." + compute_driver``);
    returns that value."""
    module = types.ModuleType("nova.virt." + name)
    module.DiskFakeDriver = DiskFakeDriver
    sys.modules[module.__name__] = module
    return name + ".DiskFakeDriver"


def provider_uuid(placement_client, host):
    """The uuid of ``host``'s provider in placement."""
    [provider] = placement_client.get(
        "/resource_providers?name=%s" % host
    ).body["resource_providers"]
    return provider["uuid"]


def allocate_new_consumer(
    placement_client, consumer, allocations, project_id, user_id
):
    """Allocate ``allocations`` (``{provider uuid: resources}``) to
    ``consumer`` as a new consumer's, through placement's API as an
    operator or another service does; placement's response."""
    return placement_client.put(
        "/allocations/%s" % consumer,
        {
            "allocations": {
                rp: {"resources": resources}
                for rp, resources in allocations.items()
            },
            "project_id": project_id,
            "user_id": user_id,
            "consumer_generation": None,
        },
        version="1.28",
    )


class GrantsHelpers:
    """Mixed into a ``GrantsTestBase`` with ``scheduler`` (the scheduler
    service), ``HOSTS``, ``post_server``, ``api`` (an admin's in every
    release: Nova 22's ``ADMIN_API``, which then sets no ``admin_api``;
    ``ProviderUsageBaseTestCase``'s in 18-21) and ``_run_periodics``
    (Nova 22's own; 18-21's base has its own)."""

    HOSTS = ("host1", "host2")

    @property
    def placement_client(self):
        raise NotImplementedError

    @property
    def driver(self):
        return self.scheduler.manager.driver

    @property
    def gs(self):
        """The scheduler driver's own GrantScheduler."""
        return self.driver.grant_scheduler

    # -- grant_scheduler's books ------------------------------------------

    def usage(self):
        """``{host: used Resources}`` in grant_scheduler's books."""
        return {r.state.host: r.state.used for r in self.gs.hosts()}

    @contextlib.contextmanager
    def allocation_requests(self):
        """``(method, consumer, status)`` of each request the scheduler's
        placement client makes of ``/allocations/{consumer}`` in the
        block."""
        client = self.driver.filter_scheduler.placement_client._client
        calls = []

        def recording(method, real):
            def call(url, *args, **kwargs):
                answer = real(url, *args, **kwargs)
                if url.startswith("/allocations/"):
                    consumer = url.split("/")[2]
                    calls.append((method, consumer, answer.status_code))
                return answer

            return call

        with (
            mock.patch.object(client, "get", recording("GET", client.get)),
            mock.patch.object(client, "put", recording("PUT", client.put)),
        ):
            yield calls

    def live_grants(self):
        return [g for g in self.gs.grants() if g.state == "won"]

    def flavor_resources(self, count=1):
        return api.Resources(
            FLAVOR["vcpu"] * count,
            FLAVOR["memory_mb"] * count,
            FLAVOR["disk"] * count,
        )

    def over_limit(self):
        """Hosts over their limit in grant_scheduler's books (I1)."""
        return [
            r.state.host
            for r in self.gs.hosts()
            if not (r.state.used + r.state.granted).fits_within(r.state.limit)
        ]

    def expire_and_reap(self):
        """Move the database clock past every grant's TTL and reap."""
        self.gs.database.clock_offset = self.gs.settings.grant_ttl + 1
        self.addCleanup(setattr, self.gs.database, "clock_offset", 0)
        return self.gs.reap()

    def fill(self, host, node, take=None):
        """Claim all the room left on ``host``/``node`` for strangers, each
        at most the node's total (one instance's largest size).

        :param take: ``f(host, node, amount)`` taking one stranger's room
            (a claim of an instance Nova does not run, by default).
        """
        if take is None:

            def take(host, node, amount):
                self.gs.claim(str(uuid.uuid4()), host, node, amount)

        filled = api.Resources()
        while True:
            [report] = [
                r
                for r in self.gs.hosts()
                if (r.state.host, r.state.node) == (host, node)
            ]
            free, total = report.state.free, report.state.capacity.total
            each = api.Resources(
                min(free.vcpus, total.vcpus),
                min(free.memory_mb, total.memory_mb),
                min(free.disk_gb, total.disk_gb),
            )
            if min(each.vcpus, each.memory_mb, each.disk_gb) < 1:
                return filled
            take(host, node, each)
            filled += each

    def hold(self, host, node, grant_on=None):
        """Grant all the room left on ``host``/``node`` to servers Nova is
        building, not yet on a host (another scheduler's answers on their
        way): placement has no allocation of theirs yet, and neither Nova's
        records nor the follower give their room back.  Their uuids.

        :param grant_on: ``f(instance_uuid, host, node, amount)`` taking
            each grant (the test's own ``GrantScheduler.grant_on``, a
            live process's, by default).
        """
        held = []
        grant_on = grant_on or self.gs.grant_on

        def take(host, node, amount):
            held.append(self.in_flight())
            grant_on(held[-1], host, node, amount)

        self.fill(host, node, take)
        return held

    def in_flight(self):
        """A server as Nova's API and conductor have written it before the
        scheduler answers: an instance in its cell, building, on no host,
        and its mapping.  Its uuid."""
        from nova import objects

        context = nova_context.get_admin_context()
        [cell] = [
            c
            for c in objects.CellMappingList.get_all(context)
            if not c.is_cell0()
        ]
        instance_uuid = str(uuid.uuid4())
        with nova_context.target_cell(context, cell) as cctxt:
            objects.Instance(
                cctxt,
                uuid=instance_uuid,
                project_id="project",
                user_id="user",
                vm_state="building",
            ).create()
        objects.InstanceMapping(
            context,
            instance_uuid=instance_uuid,
            cell_mapping=cell,
            project_id="project",
        ).create()
        return instance_uuid

    def steal_after_scheduling(self, everywhere=False):
        """After the driver answers, take the chosen host's room away
        (``everywhere``: every host's).

        The grant expires and is reaped (the database clock moved past
        its TTL), then another instance claims all the room there is: the
        build reaching that host finds no grant and no room.
        """
        select = self.driver.select_destinations
        stolen = []

        def select_then_steal(*args, **kwargs):
            answer = select(*args, **kwargs)
            for selections in answer:
                chosen = selections[0]
                self.expire_and_reap()
                self.gs.database.clock_offset = 0
                for selection in selections if everywhere else [chosen]:
                    self.fill(selection.service_host, selection.nodename)
                    stolen.append(selection.service_host)
            return answer

        self.driver.select_destinations = select_then_steal
        self.addCleanup(setattr, self.driver, "select_destinations", select)
        return stolen

    def assert_rejected_in_error(self, server, stolen):
        """``server`` in ERROR with the rejected claim on the one stolen
        host as its fault, on no host, no task running."""
        [host] = stolen
        fault = server["fault"]["message"]
        self.assertIn("rejected", fault)
        self.assertIn(host, fault)
        self.assertIsNone(server["OS-EXT-SRV-ATTR:host"])
        self.assertIsNone(server["OS-EXT-STS:task_state"])

    # -- servers through the API -----------------------------------------

    def create_flavor(self, vcpu, memory_mb, disk, ephemeral):
        flavor_id = str(uuid.uuid4())
        self.api.post_flavor(
            {
                "flavor": {
                    "name": "gs-" + flavor_id[:8],
                    "id": flavor_id,
                    "ram": memory_mb,
                    "vcpus": vcpu,
                    "disk": disk,
                    "OS-FLV-EXT-DATA:ephemeral": ephemeral,
                }
            }
        )
        return flavor_id

    def wait_for(self, server, states, tries=60, host=ANY_HOST):
        """``server`` once its status is one of ``states`` (and its task
        state is None, and its host is ``host`` when one is given), else
        fail."""
        states = (states,) if isinstance(states, str) else states
        for _ in range(tries):
            found = self.api.get_server(server["id"])
            if (
                found["status"] in states
                and found.get("OS-EXT-STS:task_state") is None
                and host in (ANY_HOST, found.get("OS-EXT-SRV-ATTR:host"))
            ):
                return found
            eventlet.sleep(0.25)
        self.fail(
            "server %s did not reach %s: %s" % (server["id"], states, found)
        )

    def delete(self, server):
        self.api.delete_server(server["id"])
        for _ in range(60):
            if server["id"] not in [s["id"] for s in self.api.get_servers()]:
                return
            eventlet.sleep(0.25)
        self.fail("server %s was not deleted" % server["id"])

    def wait_for_all(self, status, count, polls=80, pause=0.25):
        """Every server, once there are ``count`` and all are ``status``."""
        for _ in range(polls):
            servers = self.api.get_servers()
            if len(servers) == count and all(
                s["status"] == status for s in servers
            ):
                return servers
            eventlet.sleep(pause)
        self.fail("servers did not reach %s: %s" % (status, servers))

    def fill_every_slot_then_no_valid_host(self):
        """Boot one server per slot, each host filled exactly and every
        grant consumed, then one more: NoValidHost."""
        slots = SLOTS_PER_HOST * len(self.HOSTS)
        servers = [self.boot() for _ in range(slots)]
        hosts = sorted(s["OS-EXT-SRV-ATTR:host"] for s in servers)
        self.assertEqual(sorted(self.HOSTS * SLOTS_PER_HOST), hosts)
        self.assertEqual([], self.live_grants())
        full = self.flavor_resources(SLOTS_PER_HOST)
        self.assertEqual(dict.fromkeys(self.HOSTS, full), self.usage())
        self.assertEqual([], self.gs.check())
        server = self.boot(expected_state="ERROR")
        self.assertIn("No valid host", server["fault"]["message"])
        self.assertEqual([], self.live_grants())
        self.assertEqual([], self.over_limit())

    def boot_claimed_by_its_grant(self):
        """Boot a server: its grant consumed by a claim on its host (the
        log says so), the host's usage its flavour."""
        server = self.boot()
        host = server["OS-EXT-SRV-ATTR:host"]
        self.assertIn(
            "claimed on %s/%s (grant)" % (host, host),
            self.stdlog.logger.output,
        )
        self.assertEqual(self.flavor_resources(), self.usage()[host])
        self.assertEqual([], self.live_grants())
        return server, host

    def multi_create_one_too_many(self, polls, pause):
        """One request for one server more than there are slots: every
        server ERROR, no grant left, no usage."""
        slots = SLOTS_PER_HOST * len(self.HOSTS)
        self.post_server(min_count=slots + 1, max_count=slots + 1)
        servers = self.wait_for_all("ERROR", slots + 1, polls, pause)
        self.assertEqual(slots + 1, len(servers))
        self.assertEqual([], self.gs.grants())
        self.assertEqual(
            dict.fromkeys(self.HOSTS, self.flavor_resources(0)), self.usage()
        )

    def multi_create_every_slot(self, polls, pause):
        """One request for every slot: each filled, every grant consumed."""
        slots = SLOTS_PER_HOST * len(self.HOSTS)
        self.post_server(min_count=slots, max_count=slots)
        servers = self.wait_for_all("ACTIVE", slots, polls, pause)
        self.assertEqual(
            sorted(self.HOSTS * SLOTS_PER_HOST),
            sorted(s["OS-EXT-SRV-ATTR:host"] for s in servers),
        )
        self.assertEqual([], self.live_grants())
        self.assertEqual([], self.gs.check())

    # -- the books against Nova's records ---------------------------------

    def reconcile(self):
        """What every scheduler's periodic tasks do: the capacities of the
        nodes whose provider changed read again, and the claims made what
        Nova's records say."""
        context = nova_context.get_admin_context()
        self.driver.sync_hosts(context)
        self.driver.reconcile_claims(context)

    def claimed(self, host):
        return {c.instance_uuid: c.resources for c in self.gs.claims(host)}

    def books_usage(self, host):
        total = sum(self.claimed(host).values(), self.flavor_resources(0))
        return (total.vcpus, total.memory_mb, total.disk_gb)

    def nova_usage(self, host):
        """What the release's API says runs on ``host``: the flavours of
        its servers (2.47 and later), or None while a move waits for its
        confirmation (the source then holds the old flavour too, as
        placement says)."""
        servers = self.api.get_servers(detail=True)
        if any(s["status"] == "VERIFY_RESIZE" for s in servers):
            return None
        total = [0, 0, 0]
        for server in servers:
            if server["OS-EXT-SRV-ATTR:host"] == host:
                flavor = server["flavor"]
                total[0] += flavor["vcpus"]
                total[1] += flavor["ram"]
                total[2] += flavor["disk"] + flavor["ephemeral"]
        return tuple(total)

    def nova_over_capacity(self):
        """Compute nodes whose usage in Nova's own records (the resource
        tracker's compute node rows, refreshed first by its periodic task
        on every compute: the base's ``_run_periodics``) exceeds ``total
        x allocation ratio`` (RAM and disk after the reserved part, which
        the tracker counts as used)."""
        from nova import objects

        self._run_periodics()
        ctxt = nova_context.get_admin_context()
        over = []
        for cell in objects.CellMappingList.get_all(ctxt):
            if cell.uuid == objects.CellMapping.CELL0_UUID:
                continue
            with nova_context.target_cell(ctxt, cell) as cctxt:
                for node in objects.ComputeNodeList.get_all(cctxt):
                    checks = (
                        (
                            "vcpus",
                            node.vcpus_used,
                            node.vcpus,
                            node.cpu_allocation_ratio,
                        ),
                        (
                            "memory_mb",
                            node.memory_mb_used,
                            node.memory_mb,
                            node.ram_allocation_ratio,
                        ),
                        (
                            "local_gb",
                            node.local_gb_used,
                            node.local_gb,
                            node.disk_allocation_ratio,
                        ),
                    )
                    for name, used, total, ratio in checks:
                        if used > total * (ratio or 1.0):
                            over.append(
                                (node.hypervisor_hostname, name, used, total)
                            )
        return over

    # -- placement's records ----------------------------------------------

    def placement_provider(self, host):
        return provider_uuid(self.placement_client, host)

    def placement_usage(self, host):
        """``(VCPU, MEMORY_MB, DISK_GB)`` placement records on ``host``."""
        usages = self.placement_client.get(
            "/resource_providers/%s/usages" % self.placement_provider(host)
        ).body["usages"]
        return (usages["VCPU"], usages["MEMORY_MB"], usages["DISK_GB"])

    def placement_held(self, host):
        """``Resources`` of every class placement holds on ``host``'s
        provider."""
        usages = self.placement_client.get(
            "/resource_providers/%s/usages" % self.placement_provider(host)
        ).body["usages"]
        return api.Resources.of(usages)

    def placement_limits(self, host):
        """``Resources``: each class's ``(total - reserved) x
        allocation_ratio`` in ``host``'s provider inventory."""
        inventories = self.placement_client.get(
            "/resource_providers/%s/inventories"
            % self.placement_provider(host)
        ).body["inventories"]
        return api.Resources.of(
            {
                name: int(
                    (inventory["total"] - inventory["reserved"])
                    * inventory["allocation_ratio"]
                )
                for name, inventory in inventories.items()
            }
        )

    def placement_over_capacity(self):
        """Hosts whose placement usage exceeds their inventory's
        capacity, ``(total - reserved) x allocation_ratio``."""
        over = []
        for host in self.HOSTS:
            provider = self.placement_provider(host)
            inventories = self.placement_client.get(
                "/resource_providers/%s/inventories" % provider
            ).body["inventories"]
            usages = self.placement_client.get(
                "/resource_providers/%s/usages" % provider
            ).body["usages"]
            for name, inventory in inventories.items():
                capacity = (inventory["total"] - inventory["reserved"]) * (
                    inventory["allocation_ratio"]
                )
                if usages.get(name, 0) > capacity:
                    over.append((host, name))
        return over

    # -- concurrent API clients -------------------------------------------

    def boot_concurrently(self, clients, per_client, polls, pause):
        """``clients`` API clients post ``per_client`` servers each, at
        once; returns ``{id: server}`` once every one is ACTIVE or ERROR
        (polled ``polls`` times, ``pause`` seconds apart) and the most
        requests that were inside the driver at one time."""
        in_flight = [0, 0]  # now, most
        select = self.driver.select_destinations

        def counted(*args, **kwargs):
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
            try:
                return select(*args, **kwargs)
            finally:
                in_flight[0] -= 1

        self.driver.select_destinations = counted

        def client():
            return [self.post_server()["id"] for _ in range(per_client)]

        pool = eventlet.GreenPool(clients)
        ids = [
            i
            for batch in pool.imap(lambda _: client(), range(clients))
            for i in batch
        ]
        final = {}
        for _ in range(polls):
            for server in self.api.get_servers():
                if server["status"] in ("ACTIVE", "ERROR"):
                    final[server["id"]] = server
            if len(final) == len(ids):
                break
            eventlet.sleep(pause)
        self.assertEqual(sorted(ids), sorted(final))
        return final, in_flight[1]

    def assert_concurrent_boots_placed(self, final, most_in_flight):
        """The concurrent boots' outcome: the requests overlapped in the
        driver, every slot ACTIVE, the rest NoValidHost, no host over its
        limit or its inventory, the books equal to placement's usage,
        and, one TTL and one reap later, nothing left over."""
        slots = SLOTS_PER_HOST * len(self.HOSTS)
        self.assertGreater(most_in_flight, 1)
        active = [s for s in final.values() if s["status"] == "ACTIVE"]
        errors = [s for s in final.values() if s["status"] == "ERROR"]
        self.assertEqual(slots, len(active))
        for server in errors:
            fault = self.api.get_server(server["id"])["fault"]
            self.assertIn("No valid host", fault["message"])
        self.assertEqual([], self.over_limit())
        self.assertEqual([], self.gs.check())
        self.assertEqual([], self.placement_over_capacity())
        for host in self.HOSTS:
            used = self.usage()[host]
            self.assertEqual(
                (used.vcpus, used.memory_mb, used.disk_gb),
                self.placement_usage(host),
            )
        self.expire_and_reap()
        self.assertEqual([], self.gs.check(quiescent=True))
        self.assertEqual([], self.over_limit())
        full = self.flavor_resources(SLOTS_PER_HOST)
        self.assertEqual(dict.fromkeys(self.HOSTS, full), self.usage())
