"""Request shapes decided by a release's stock FilterScheduler and by
grant_scheduler, side by side (``tests/nova22/in_nova/decisions.py`` on
Nova 22, ``tests/nova18_21/decisions.py`` on 18-21).

Each scenario is written once and run twice: by a ``TestStock*`` class
with Nova's own ``filter_scheduler`` and by a ``TestGrants*`` class with
``[scheduler] driver = grant_scheduler``, every option at its default.
The assertions are what the stock scheduler does (its class passing
shows it), so grant_scheduler passing the same assertions is deciding as
stock decides: the same servers ACTIVE, on the same hosts, the same
NoValidHost, the same allocations in placement.

The inventory a node offers is placement's in every scenario (an
allocation ratio or a reserved amount set through placement's API, as an
operator sets them since Stein), and a flavour's amounts are its
allocation in placement (``resources:<CLASS>=N`` overrides).

A test class mixes one of these with a base of its release that starts
one compute per name in ``HOSTS`` (``compute_driver``, by default
``in_nova.DiskFakeDriver``: 2 vCPU, 2,560 MB, 20 GB), and gives
``placement_client``, ``scheduler`` and ``computes``.
"""

import sys
import time
import types
import uuid

import eventlet
from nova import conf as nova_conf
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova.scheduler import weights
from nova.virt import hardware

from grant_scheduler.nova import compat
from tests.nova18_22 import in_nova

CONF = nova_conf.CONF
RELEASE = compat.release()
# Whether an allocation ratio or reserved amount an operator sets in
# placement decides (Nova 19 and later); on 18 the stock scheduler keeps
# to the compute's own (the compute node record's and the options').
PLACEMENT_RATIOS = RELEASE is None or RELEASE >= 19
# The fake image service's first image, in every release.
IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"


class Decisions:
    """The scenarios' helpers; mixed into a test base that starts one
    compute per name in ``HOSTS`` with ``compute_driver`` (by default
    ``in_nova.DiskFakeDriver``: 2 vCPU, 2,560 MB, 20 GB)."""

    HOSTS = ("host1",)

    def setUp(self):
        # NOTE: the computes' first report puts these ratios into
        # placement and their compute node records (Nova's own initial
        # ratios are 16.0 and 1.5): one vCPU, one MB, one GB each.  Nova
        # 18 has no initial ratios: its computes report the ratios.
        for name in ("cpu", "ram", "disk"):
            option = "initial_%s_allocation_ratio" % name
            if option not in CONF:
                option = "%s_allocation_ratio" % name
            self.flags(**{option: 1.0})
        super().setUp()

    # -- helpers -----------------------------------------------------------

    def make_flavor(self, vcpus, ram, disk, extra_specs=None):
        flavor_id = str(uuid.uuid4())
        self.admin.post_flavor(
            {
                "flavor": {
                    "name": "decide-" + flavor_id[:8],
                    "id": flavor_id,
                    "ram": ram,
                    "vcpus": vcpus,
                    "disk": disk,
                }
            }
        )
        if extra_specs:
            self.admin.post_extra_spec(flavor_id, {"extra_specs": extra_specs})
        return flavor_id

    @property
    def admin(self):
        """The release's admin API client."""
        return getattr(self, "admin_api", None) or self.api

    def server_body(self, flavor_id, **extra):
        body = {
            "name": "decide-" + uuid.uuid4().hex[:8],
            "imageRef": IMAGE,
            "flavorRef": flavor_id,
            "networks": "none",
        }
        body.update(extra)
        return body

    def boot_flavor(self, flavor_id, expected_state="ACTIVE", **extra):
        server = self.admin.post_server(
            {"server": self.server_body(flavor_id, **extra)}
        )
        server = self._wait_until_built(server)
        self.assertEqual(expected_state, server["status"], server.get("fault"))
        return server

    def boot_until_no_valid_host(self, flavor_id, most, books=True):
        """Boot ``flavor_id`` servers one after another until one ends in
        ERROR (at most ``most``), the books checked after each (unless
        ``books`` is false); the ACTIVE ones and the failed one."""
        active = []
        for _ in range(most):
            server = self.admin.post_server(
                {"server": self.server_body(flavor_id)}
            )
            server = self._wait_until_built(server)
            if books:
                self.check_books()
            if server["status"] != "ACTIVE":
                return active, server
            active.append(server)
        self.fail("%d servers booted, none refused" % most)

    def _wait_until_built(self, server, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            server = self.admin.get_server(server["id"])
            if server["status"] in ("ACTIVE", "ERROR") and (
                server.get("OS-EXT-STS:task_state") is None
            ):
                return server
            self._sleep()
        self.fail("server %s never left BUILD: %s" % (server["id"], server))

    @staticmethod
    def _sleep():
        eventlet.sleep(0.05)

    def check_books(self):
        """After a boot: what the scheduler's own records must say (the
        stock scheduler has none)."""

    def run_periodic_tasks(self):
        """The scheduler service's periodic tasks, as it runs them every
        ``[scheduler] periodic_task_interval``."""
        self.scheduler.manager.periodic_tasks(nova_context.get_admin_context())
        stop = getattr(self.scheduler.manager.driver, "stop", None)
        if stop is not None:
            self.addCleanup(stop)

    def delete_and_wait(self, server):
        """Delete ``server`` and wait until it and its allocation in
        placement are gone."""
        self.admin.delete_server(server["id"])
        deadline = time.monotonic() + 60
        while server["id"] in [s["id"] for s in self.admin.get_servers()] or (
            self._get_allocations_by_server_uuid(server["id"])
        ):
            self.assertLess(time.monotonic(), deadline, "never deleted")
            self._sleep()

    def provider(self, host):
        return in_nova.provider_uuid(self.placement_client, host)

    def set_inventory(self, host, resource_class, **fields):
        """Change ``host``'s inventory of one class in placement, as an
        operator does through placement's API."""
        rp = self.provider(host)
        url = "/resource_providers/%s/inventories/%s" % (rp, resource_class)
        inventory = self.placement_client.get(url).body
        inventory.update(fields)
        inventory["resource_provider_generation"] = self.placement_client.get(
            "/resource_providers/%s" % rp
        ).body["generation"]
        # NOTE(placement): 1.26 is the first to take a reserved amount
        # equal to the total (all of a class reserved).
        response = self.placement_client.put(url, inventory, version="1.26")
        self.assertEqual(200, response.status)

    def allocated(self, server):
        """``{class: amount}`` placement holds for ``server`` on its host's
        provider."""
        allocations = self._get_allocations_by_server_uuid(server["id"])
        provider = self.provider(server["OS-EXT-SRV-ATTR:host"])
        return allocations[provider]["resources"]

    def refuse_forced_onto_disabled_host1(self):
        """Disable host1's compute service and force a server onto host1:
        NoValidHost.  Returns the service and the flavour."""
        [service] = self.admin.get_services(
            binary="nova-compute", host="host1"
        )
        self.admin.put_service(service["id"], {"status": "disabled"})
        flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
        server = self.boot_flavor(
            flavor, expected_state="ERROR", availability_zone="nova:host1"
        )
        self.assert_no_valid_host(server)
        return service, flavor

    def assert_no_valid_host(self, server):
        self.assertEqual("ERROR", server["status"])
        self.assertIn("No valid host", server["fault"]["message"])
        self.assertEqual(
            {}, self._get_allocations_by_server_uuid(server["id"])
        )


class OneNodeDecisions(Decisions):
    """Scenarios on one node."""

    def test_allocation_ratio_set_in_placement(self):
        """Placement's VCPU allocation ratio 2.0 decides, not the compute
        node record's 1.0: a 2-vCPU node takes four 1-vCPU servers."""
        flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
        first = self.boot_flavor(flavor)
        # Raised once the node is known and holds a server.
        self.set_inventory("host1", "VCPU", allocation_ratio=2.0)
        node = objects.ComputeNode.get_first_node_by_host_for_old_compat(
            nova_context.get_admin_context(), "host1"
        )
        self.assertEqual(1.0, node.cpu_allocation_ratio)
        active, refused = self.boot_until_no_valid_host(flavor, 6)
        self.assertEqual(4 if PLACEMENT_RATIOS else 2, len([first] + active))
        self.assert_no_valid_host(refused)

    def test_reserved_memory_set_in_placement(self):
        """Placement's MEMORY_MB reserved amount decides, not the
        scheduler's own ``reserved_host_memory_mb``: with nothing reserved
        a 2,560 MB node takes two 1,280 MB servers."""
        self.set_inventory("host1", "MEMORY_MB", reserved=0)
        flavor = self.make_flavor(vcpus=1, ram=1280, disk=1)
        active, refused = self.boot_until_no_valid_host(flavor, 4)
        self.assertEqual(2 if PLACEMENT_RATIOS else 1, len(active))
        self.assert_no_valid_host(refused)

    def test_reserved_memory_raised_in_placement(self):
        """A reserved amount raised in placement once the node holds a
        server: the 2,560 MB node keeps its one 1,280 MB server and takes
        no second."""
        flavor = self.make_flavor(vcpus=1, ram=1280, disk=1)
        self.set_inventory("host1", "MEMORY_MB", reserved=0)
        self.boot_flavor(flavor)
        self.set_inventory("host1", "MEMORY_MB", reserved=1024)
        refused = self.boot_flavor(flavor, expected_state="ERROR")
        self.assert_no_valid_host(refused)

    def test_a_resources_override_is_what_is_taken(self):
        """``resources:VCPU=1`` on a 2-vCPU flavour allocates one VCPU, so
        a 2-vCPU node takes two of them."""
        flavor = self.make_flavor(
            vcpus=2, ram=128, disk=1, extra_specs={"resources:VCPU": "1"}
        )
        active, refused = self.boot_until_no_valid_host(flavor, 4)
        self.assertEqual(2, len(active))
        for server in active:
            self.assertEqual(1, self.allocated(server)["VCPU"])
        self.assert_no_valid_host(refused)

    def test_swap_is_disk_in_placement(self):
        """A flavour's swap is part of its DISK_GB allocation: 20 GB of
        disk takes one server of 7 GB root and 7,168 MB swap, not two."""
        flavor_id = str(uuid.uuid4())
        self.admin.post_flavor(
            {
                "flavor": {
                    "name": "swap-" + flavor_id[:8],
                    "id": flavor_id,
                    "ram": 128,
                    "vcpus": 1,
                    "disk": 7,
                    "swap": 7168,
                }
            }
        )
        active, refused = self.boot_until_no_valid_host(flavor_id, 3)
        self.assertEqual(1, len(active))
        self.assertEqual(14, self.allocated(active[0])["DISK_GB"])
        self.assert_no_valid_host(refused)

    def test_a_forced_host_whose_service_is_disabled(self):
        """A server forced onto a host whose compute service is disabled
        is refused from Nova 20 on (placement leaves a disabled compute
        out); Nova 18 and 19 build it there (no filter runs for a forced
        host)."""
        if RELEASE is not None and RELEASE < 20:
            [service] = self.admin.get_services(
                binary="nova-compute", host="host1"
            )
            self.admin.put_service(service["id"], {"status": "disabled"})
            flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
            server = self.boot_flavor(flavor, availability_zone="nova:host1")
            self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])
            return
        self.refuse_forced_onto_disabled_host1()


class GroupDecisions(Decisions):
    """Server groups on two hosts of one node each.

    An anti-affinity group's second server scheduled while the first is
    still on its way: the compute has not told the scheduler about the
    first yet.  Nova's FilterScheduler records the instance it placed as a
    stub in the chosen HostState's ``instances``
    (``_consume_selected_host``), and ``ServerGroupAntiAffinityFilter``
    reads only those keys.  Where the host's instance info is flowing
    (Nova's HostManager marks it ``updated`` once a compute's instance
    info has reached it twice), ``instances`` is the very dict the
    HostManager keeps for the host, so the stub keeps the next request
    off the host until the compute's next instance info replaces it;
    otherwise the instances are read from the cell's database for each
    request, where the first appears once the compute's claim has set its
    host.

    The layout makes host1 the weighers' choice for both servers (host2
    runs a larger server: less free RAM and disk), so only an in-flight
    record keeps the second off host1; one vCPU stays free on each, so
    room does not decide.  ``[scheduler] max_attempts = 1``: the compute's
    late check of the group policy ends a server it catches in ERROR.
    """

    HOSTS = ("host1", "host2")

    def hold_build(self, name):
        """The build of the server named ``name`` waits (as a build on
        its way to a compute does) until the returned event is sent: its
        instance has no host in Nova's records until then."""
        release = eventlet.event.Event()
        self.addCleanup(lambda: release.ready() or release.send())
        for compute in self.computes.values():
            real = compute.manager.build_and_run_instance

            def delayed(*args, _real=real, **kwargs):
                instance = kwargs.get("instance")
                if getattr(instance, "display_name", None) != name:
                    return _real(*args, **kwargs)

                def later():
                    release.wait()
                    _real(*args, **kwargs)

                eventlet.spawn_n(later)

            compute.manager.build_and_run_instance = delayed
        return release

    def hold_spawn(self, name):
        """The spawn of the server named ``name`` waits until the first
        returned event is sent; the second is sent once it waits (the
        compute's claim has set the instance's host by then)."""
        release = eventlet.event.Event()
        spawning = eventlet.event.Event()
        self.addCleanup(lambda: release.ready() or release.send())

        def at_spawn(instance):
            if instance.display_name == name:
                spawning.send()
                release.wait()

        in_nova.DiskFakeDriver.at_spawn = at_spawn
        self.addCleanup(setattr, in_nova.DiskFakeDriver, "at_spawn", None)
        return release, spawning

    def instance_info_flows(self):
        """Each compute's periodic instance sync, twice (every
        ``scheduler_instance_sync_interval`` seconds in a cloud): the
        first makes the scheduler's HostManager record the host's
        instances, the second, matching, marks them ``updated``."""
        context = nova_context.get_admin_context()
        for _ in range(2):
            for compute in self.computes.values():
                compute.manager._sync_scheduler_instance_info(context)
        known = self.scheduler.manager.driver.host_manager._instance_info
        self.assertEqual(
            dict.fromkeys(self.HOSTS, True),
            {host: known[host]["updated"] for host in self.HOSTS},
        )

    def two_apart(self, flowing, hold):
        """Boot the layout, then two servers of one anti-affinity group,
        the second while the first is held (``hold``: "compute", before
        the compute has it; "spawn", in its spawn); ``flowing``: the
        computes' instance info has reached the scheduler first.  The two
        servers as built, the first released once the second is."""
        self.flags(max_attempts=1, group="scheduler")
        group = self.api.post_server_groups(
            {"name": "apart", "policy": "anti-affinity"}
        )
        larger = self.make_flavor(vcpus=1, ram=1024, disk=10)
        self.boot_flavor(larger, availability_zone="nova:host2")
        if flowing:
            self.instance_info_flows()
        flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
        first_body = self.server_body(flavor)
        if hold == "spawn":
            release, spawning = self.hold_spawn(first_body["name"])
        else:
            release, spawning = self.hold_build(first_body["name"]), None
        servers = []
        for body in (first_body, self.server_body(flavor)):
            servers.append(
                self.admin.post_server(
                    {
                        "server": body,
                        "os:scheduler_hints": {"group": group["id"]},
                    }
                )
            )
            if spawning is not None and len(servers) == 1:
                with eventlet.Timeout(60):
                    spawning.wait()
        second = self._wait_until_built(servers[1])
        release.send()
        first = self._wait_until_built(servers[0])
        return first, second

    def assert_apart(self, first, second):
        self.assertEqual(
            ("ACTIVE", "host1", "ACTIVE", "host2"),
            (
                first["status"],
                first["OS-EXT-SRV-ATTR:host"],
                second["status"],
                second["OS-EXT-SRV-ATTR:host"],
            ),
            (first.get("fault"), second.get("fault")),
        )

    def test_anti_affinity_while_the_first_spawns_info_not_flowing(self):
        """No instance info yet from host1: its instances are read from
        the database, where the spawning first is on host1."""
        self.assert_apart(*self.two_apart(flowing=False, hold="spawn"))

    def test_no_in_flight_record_when_info_is_not_flowing(self):
        """No instance info yet from host1, the first on its way there:
        the request that chose host1 recorded the first in a dict of its
        own, so the second goes to host1 too and builds; the first then
        fails the compute's late check."""
        first, second = self.two_apart(flowing=False, hold="compute")
        self.assertEqual(
            ("ERROR", "ACTIVE", "host1"),
            (
                first["status"],
                second["status"],
                second["OS-EXT-SRV-ATTR:host"],
            ),
            (first.get("fault"), second.get("fault")),
        )
        self.assertIn(
            "Anti-affinity instance group policy was violated",
            first["fault"]["message"],
        )


class FlowingGroupDecisions(GroupDecisions):
    """The same with the computes' instance information flowing (the
    scheduler's HostManager marks each host ``updated``), where Nova keeps
    a request's in-flight record of the first server between requests.
    Nova 22's framework only: in 18-21's the syncs do not reach the
    HostManager the test reads (``instance_info_flows``)."""

    def test_anti_affinity_while_the_first_spawns(self):
        """The first is spawning on host1 (claimed there, not yet reported
        to the scheduler): the second goes to host2."""
        self.assert_apart(*self.two_apart(flowing=True, hold="spawn"))

    def test_anti_affinity_before_the_first_is_on_its_host(self):
        """The first is on its way to host1's compute: the second goes to
        host2."""
        self.assert_apart(*self.two_apart(flowing=True, hold="compute"))


class HostNameWeigher(weights.BaseHostWeigher):
    """host1 first, then host2, then host3: a repeatable ranking."""

    def _weigh_object(self, host_state, weight_properties):
        return -int(host_state.host[len("host") :])


class AlternateDecisions(Decisions):
    """Alternates for a reschedule, on three hosts ranked by name."""

    HOSTS = ("host1", "host2", "host3")

    def setUp(self):
        self.flags(
            weight_classes=[__name__ + ".HostNameWeigher"],
            group="filter_scheduler",
        )
        self.flags(max_attempts=2, group="scheduler")
        super().setUp()

    def hold_in_placement(self, host, resources):
        """Allocate ``resources`` of ``host`` to a consumer that is not a
        Nova instance."""
        response = in_nova.allocate_new_consumer(
            self.placement_client,
            str(uuid.uuid4()),
            {self.provider(host): resources},
            str(uuid.uuid4()),
            str(uuid.uuid4()),
        )
        self.assertEqual(204, response.status)

    def test_one_placement_result_leaves_no_alternate(self):
        """With ``[scheduler] max_placement_results = 1`` a request sees
        one host and has no alternate: a failed build is not
        rescheduled."""
        self.flags(max_placement_results=1, group="scheduler")
        self.fail_first_build()
        flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
        server = self.boot_flavor(flavor, expected_state="ERROR")
        self.assertIsNone(server["OS-EXT-SRV-ATTR:host"])

    def fail_first_build(self):
        """The first spawn fails as a compute out of room fails it; the
        hosts it failed on."""
        failed = []

        def fail_first(instance):
            if not failed:
                failed.append(instance.host)
                raise nova_exception.ComputeResourcesUnavailable(
                    reason="the first build fails"
                )

        in_nova.DiskFakeDriver.at_spawn = fail_first
        self.addCleanup(setattr, in_nova.DiskFakeDriver, "at_spawn", None)
        return failed

    def test_the_alternate_is_a_host_placement_has_room_on(self):
        self.hold_in_placement("host2", {"VCPU": 2})
        self.run_periodic_tasks()
        failed = self.fail_first_build()
        flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
        server = self.boot_flavor(flavor)
        self.assertEqual(["host1"], failed)
        self.assertEqual("host3", server["OS-EXT-SRV-ATTR:host"])

    def test_the_alternate_is_a_host_placement_has_room_on_now(self):
        """The same with host2 held after the scheduler's last look at
        placement (a server booted and deleted, the periodic tasks run,
        then the hold; no periodic task since): placement's candidates of
        the request itself leave host2 out, so the alternate is host3."""
        flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
        self.delete_and_wait(self.boot_flavor(flavor))
        self.run_periodic_tasks()
        self.hold_in_placement("host2", {"VCPU": 2})
        failed = self.fail_first_build()
        server = self.boot_flavor(flavor)
        self.assertEqual(["host1"], failed)
        self.assertEqual("host3", server["OS-EXT-SRV-ATTR:host"])

    def test_the_alternate_is_a_host_placement_has_room_on_now_inventory(self):
        """The same with host2's vCPUs reserved in placement after the
        scheduler's last look (as an operator reserves them through
        placement's API): placement's candidates leave host2 out, so the
        alternate is host3."""
        flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
        self.delete_and_wait(self.boot_flavor(flavor))
        self.run_periodic_tasks()
        self.set_inventory("host2", "VCPU", reserved=2)
        failed = self.fail_first_build()
        server = self.boot_flavor(flavor)
        self.assertEqual(["host1"], failed)
        self.assertEqual("host3", server["OS-EXT-SRV-ATTR:host"])


class Host1Weigher(weights.BaseHostWeigher):
    """host1 1, every other host 0, at 0.38 of RAMWeigher's weight."""

    def weight_multiplier(self, *args, **kwargs):
        return 0.38

    def _weigh_object(self, host_state, weight_properties):
        return 1.0 if host_state.host == "host1" else 0.0


class WeighingDecisions(Decisions):
    """Nova's weighers normalise over the hosts they are given: a host
    placement leaves out (no room) must not be among them."""

    HOSTS = ("host1", "host2", "host3")

    def setUp(self):
        self.flags(
            weight_classes=[
                "nova.scheduler.weights.ram.RAMWeigher",
                __name__ + ".Host1Weigher",
            ],
            group="filter_scheduler",
        )
        super().setUp()

    def test_a_full_host_does_not_shift_the_weights(self):
        # Free RAM: host1 512 MB, host2 1,024 MB, host3 1,920 MB but no
        # vCPU left, so placement leaves host3 out.  RAMWeigher divides by
        # the largest free RAM it is given: over host1 and host2 it gives
        # 0.5 and 1.0, and with Host1Weigher's 0.38 host2 wins (1.0 to
        # 0.88); were host3 weighed too, host1 would (0.65 to 0.53).
        for host, ram, count in (
            ("host1", 1536, 1),
            ("host2", 1024, 1),
            ("host3", 64, 2),
        ):
            flavor = self.make_flavor(vcpus=1, ram=ram, disk=1)
            for _ in range(count):
                self.boot_flavor(flavor, availability_zone="nova:" + host)
        flavor = self.make_flavor(vcpus=1, ram=128, disk=1)
        server = self.boot_flavor(flavor)
        self.assertEqual("host2", server["OS-EXT-SRV-ATTR:host"])


PCPU_REPORTED = RELEASE is None or RELEASE >= 20
"""Whether a compute can report PCPU (``[compute] cpu_dedicated_set``)
and Nova asks placement for PCPU for dedicated CPUs: Nova 20 and later."""


class PinnedFakeDriver(in_nova.DiskFakeDriver):
    """``DiskFakeDriver`` that reports, as Nova's libvirt driver does from
    Nova 20 on, a PCPU inventory of the host CPUs in ``[compute]
    cpu_dedicated_set`` beside its VCPU (Nova's fake driver reports no
    PCPU).  Like the fake driver it reports no NUMA topology, so a
    compute's claim of a pinned instance does not refuse it: placement's
    allocation alone decides."""

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        super().update_provider_tree(provider_tree, nodename, allocations)
        # NOTE: the option is Nova 20's; 18 and 19 report no PCPU.
        dedicated = getattr(CONF.compute, "cpu_dedicated_set", None)
        if not dedicated:
            return
        pcpus = len(hardware.parse_cpu_spec(dedicated))
        inventory = dict(provider_tree.data(nodename).inventory)
        inventory["PCPU"] = {
            "total": pcpus,
            "reserved": 0,
            "min_unit": 1,
            "max_unit": pcpus,
            "step_size": 1,
            "allocation_ratio": 1.0,
        }
        provider_tree.update_inventory(nodename, inventory)


_DRIVERS = types.ModuleType("nova.virt.gs_shared_decisions")
_DRIVERS.PinnedFakeDriver = PinnedFakeDriver
sys.modules[_DRIVERS.__name__] = _DRIVERS

# One pinned server of ``PinnedDecisions``' flavours as placement
# allocates it, on its host's PCPU or (Nova's fallback query) VCPU.
ON_PCPU = {"PCPU": 1, "MEMORY_MB": 128, "DISK_GB": 1}
ON_VCPU = {"VCPU": 1, "MEMORY_MB": 128, "DISK_GB": 1}


class PinnedDecisions(Decisions):
    """Dedicated CPUs, Nova 20 and later: two hosts whose computes set two
    host CPUs aside for pinned servers (``[compute] cpu_dedicated_set``)
    and share two (``cpu_shared_set``), so that each reports 2 PCPU
    beside 2 VCPU.  Nova 18 and 19 have no PCPU to report or ask for:
    there each scenario asserts only that."""

    HOSTS = ("host1", "host2")
    compute_driver = "gs_shared_decisions.PinnedFakeDriver"

    def setUp(self):
        if PCPU_REPORTED:
            self.flags(
                cpu_shared_set="0-1", cpu_dedicated_set="2-3", group="compute"
            )
        super().setUp()

    def inventories(self, host):
        return self.placement_client.get(
            "/resource_providers/%s/inventories" % self.provider(host)
        ).body["inventories"]

    def reports_pcpu(self):
        """Whether the computes report PCPU: each host's 2 beside its 2
        VCPU from Nova 20 on; none on 18 and 19, which have no
        ``cpu_dedicated_set``."""
        for host in self.HOSTS:
            inventories = self.inventories(host)
            self.assertEqual(2, inventories["VCPU"]["total"])
            if PCPU_REPORTED:
                self.assertEqual(2, inventories["PCPU"]["total"])
            else:
                self.assertNotIn("PCPU", inventories)
        if not PCPU_REPORTED:
            self.assertNotIn("cpu_dedicated_set", CONF.compute)
        return PCPU_REPORTED

    def dedicated_flavor(self):
        return self.make_flavor(
            vcpus=1,
            ram=128,
            disk=1,
            extra_specs={"hw:cpu_policy": "dedicated"},
        )

    @staticmethod
    def by_host(pairs):
        """``(host, {class: amount})`` pairs, sorted."""
        return sorted(pairs, key=lambda pair: (pair[0], sorted(pair[1])))

    def placed(self, servers):
        """``(host, {class: amount})`` of each server, sorted."""
        return self.by_host(
            (s["OS-EXT-SRV-ATTR:host"], self.allocated(s)) for s in servers
        )

    def test_a_pcpu_override_is_what_is_taken(self):
        """``resources:PCPU=1`` on a 1-vCPU flavour allocates one PCPU and
        no VCPU (and asks no fallback): two servers a host."""
        if not self.reports_pcpu():
            return
        flavor = self.make_flavor(
            vcpus=1, ram=128, disk=1, extra_specs={"resources:PCPU": "1"}
        )
        active, refused = self.boot_until_no_valid_host(flavor, 6)
        self.assertEqual(
            [("host1", ON_PCPU)] * 2 + [("host2", ON_PCPU)] * 2,
            self.placed(active),
        )
        self.assert_no_valid_host(refused)

    def fill_with_dedicated(self):
        """Boot dedicated servers until NoValidHost, with Nova's default
        fallback query (for computes that report no PCPU yet: VCPU asked
        too): each host takes two on its PCPU, then two on its VCPU.  The
        flavour and the ACTIVE servers."""
        flavor = self.dedicated_flavor()
        active, refused = self.boot_until_no_valid_host(flavor, 10)
        self.assertEqual(
            self.by_host(
                [("host1", ON_PCPU), ("host2", ON_PCPU)] * 2
                + [("host1", ON_VCPU), ("host2", ON_VCPU)] * 2
            ),
            self.placed(active),
        )
        self.assert_no_valid_host(refused)
        return flavor, active

    def delete_one_on_pcpu(self, active, host):
        """Delete one of ``host``'s servers held on its PCPU; once it and
        its allocation are gone, placement's usage of ``host``."""
        [server] = [
            s
            for s in active
            if s["OS-EXT-SRV-ATTR:host"] == host
            and "PCPU" in self.allocated(s)
        ][:1]
        self.delete_and_wait(server)
        return self.usages(host)

    def usages(self, host):
        """``{class: amount}`` placement holds on ``host``'s provider."""
        return self.placement_client.get(
            "/resource_providers/%s/usages" % self.provider(host)
        ).body["usages"]

    def test_dedicated_cpus_past_the_pcpu_take_vcpu(self):
        """Nova's fallback query offers VCPU too: each host takes two
        dedicated servers on its PCPU, then two on its VCPU (the compute's
        claim does not refuse them, as no NUMA topology is reported).  The
        scheduler's periodic tasks run, and one of host1's PCPU servers is
        deleted: the next dedicated server takes that PCPU."""
        if not self.reports_pcpu():
            return
        flavor, active = self.fill_with_dedicated()
        self.run_periodic_tasks()
        self.assertEqual(
            {"VCPU": 2, "PCPU": 1, "MEMORY_MB": 384, "DISK_GB": 3},
            self.delete_one_on_pcpu(active, "host1"),
        )
        server = self.boot_flavor(flavor)
        self.assertEqual(
            ("host1", ON_PCPU),
            (server["OS-EXT-SRV-ATTR:host"], self.allocated(server)),
        )
        self.check_books()


class GrantsBooks:
    """Mixed into a ``TestGrants*`` class: the books checked after each
    boot."""

    def check_books(self):
        """The books, once reconciled with Nova's records as every
        scheduler does periodically, hold on each node what placement
        holds there, every class, each class's capacity is its
        provider's in placement, and no node is over its limit."""
        self.reconcile()
        books = {r.state.host: r.state for r in self.gs.hosts()}
        for host in self.HOSTS:
            self.assertEqual(self.placement_held(host), books[host].used)
            self.assertEqual(self.placement_limits(host), books[host].limit)
        self.assertEqual([], self.over_limit())
