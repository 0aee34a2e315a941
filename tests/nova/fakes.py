"""Nova's own objects for the adapter tests, with no Nova database.

``NovaCloud`` stands in for Nova's database behind a HostManager: it keeps
real ``ComputeNode`` and ``Service`` records and builds Nova's real
``HostState`` objects from them on every ``get_all_host_states`` call, the
way Nova 13-22's HostManager does.  The records are never updated by
scheduling: Nova's view stays as stale as it can be, so only the grants
protocol stands between concurrent schedulers and overcommit.
"""

import datetime
import uuid

from nova import context as nova_context
from nova import objects
from nova.scheduler import host_manager

objects.register_all()

CELL_UUID = str(uuid.UUID(int=1))


def compute_node(host, vcpus, memory_mb, disk_gb, used=(0, 0, 0), **extra):
    used_vcpus, used_ram, used_disk = used
    values = dict(
        uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, host)),
        host=host,
        hypervisor_hostname=host,
        vcpus=vcpus,
        memory_mb=memory_mb,
        local_gb=disk_gb,
        vcpus_used=used_vcpus,
        memory_mb_used=used_ram,
        local_gb_used=used_disk,
        free_ram_mb=memory_mb - used_ram,
        free_disk_gb=disk_gb - used_disk,
        disk_available_least=None,
        hypervisor_type="fake",
        hypervisor_version=1,
        cpu_info="{}",
        host_ip="127.0.0.1",
        supported_hv_specs=[],
        pci_device_pools=None,
        numa_topology=None,
        stats={},
        metrics="[]",
        cpu_allocation_ratio=1.0,
        ram_allocation_ratio=1.0,
        disk_allocation_ratio=1.0,
        updated_at=None,
    )
    values.update(extra)
    return objects.ComputeNode(**values)


def service(host, disabled=False):
    now = datetime.datetime.now(datetime.UTC)
    return {
        "host": host,
        "binary": "nova-compute",
        "topic": "compute",
        "disabled": disabled,
        "disabled_reason": "testing" if disabled else None,
        "forced_down": False,
        "created_at": now,
        "updated_at": now,
        "last_seen_up": now,
        "id": abs(hash(host)) % 100000,
        "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, host)),
        "version": 60,
        "report_count": 1,
    }


class NovaCloud:
    """A HostManager's data source: compute nodes and services."""

    def __init__(self):
        self.nodes = {}
        self.services = {}

    def add(self, host, vcpus, memory_mb, disk_gb, disabled=False, **kw):
        self.nodes[host] = compute_node(host, vcpus, memory_mb, disk_gb, **kw)
        self.services[host] = service(host, disabled=disabled)
        return self.nodes[host]

    def host_states(self):
        states = []
        for host, node in sorted(self.nodes.items()):
            state = host_manager.HostState(host, host, CELL_UUID)
            state.update(compute=node, service=self.services[host])
            states.append(state)
        return states


class HostManager:
    """The part of Nova's HostManager the driver uses (Nova's own needs
    Nova's database)."""

    def __init__(self, cloud):
        self.cloud = cloud

    def get_all_host_states(self, context):
        return iter(self.cloud.host_states())


def context():
    return nova_context.RequestContext("user", "project")


def flavor(vcpus, memory_mb, root_gb, ephemeral_gb=0):
    return objects.Flavor(
        name="f%d-%d-%d" % (vcpus, memory_mb, root_gb),
        flavorid="f%d" % vcpus,
        vcpus=vcpus,
        memory_mb=memory_mb,
        root_gb=root_gb,
        ephemeral_gb=ephemeral_gb,
        swap=0,
        extra_specs={},
    )


def request_spec(flavor, num_instances=1, **fields):
    spec = objects.RequestSpec(
        flavor=flavor,
        num_instances=num_instances,
        instance_uuid=str(uuid.uuid4()),
        project_id="project",
        user_id="user",
        scheduler_hints={},
        ignore_hosts=None,
        force_hosts=None,
        force_nodes=None,
        pci_requests=objects.InstancePCIRequests(requests=[]),
        numa_topology=None,
        image=objects.ImageMeta.from_dict({"properties": {}}),
        requested_resources=[],
        is_bfv=False,
        instance_group=None,
    )
    for name, value in fields.items():
        setattr(spec, name, value)
    return spec


def instance(instance_uuid, flavor, host, node=None):
    return objects.Instance(
        uuid=instance_uuid, flavor=flavor, host=host, node=node or host
    )
