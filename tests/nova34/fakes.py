"""Nova's own objects for the adapter tests, with no Nova database.

``NovaCloud`` stands in for Nova's databases: it keeps real
``ComputeNode`` records (their usage written as Nova's resource tracker
writes it: the ``reserved_host_*`` amounts plus the instances), service
records, instances and aggregates.  ``HostManager`` is the driver's real
``GrantsHostManager``, so Nova's real HostManager
(``get_host_states_by_uuids``, ``get_filtered_hosts``,
``get_weighed_hosts``, the instance-info calls), with only its database
reads answered from the cloud.  The records are never
updated by scheduling: Nova's view stays as stale as it can be, so only the
grants protocol stands between concurrent schedulers and overcommit.
"""

import contextlib
import copy
import datetime
import uuid

from nova import conf as nova_conf
from nova import context as nova_context
from nova import objects

from grant_scheduler.nova.scheduler import host_manager as gs_host_manager

objects.register_all()

CONF = nova_conf.CONF
CELL_UUID = str(uuid.UUID(int=1))


def reserved():
    """Nova's reserved_host_* options, as the resource tracker counts them."""
    return (
        CONF.reserved_host_cpus,
        CONF.reserved_host_memory_mb,
        CONF.reserved_host_disk_mb // 1024,
    )


def compute_node(host, vcpus, memory_mb, disk_gb, used=(0, 0, 0), **extra):
    """A compute node record; ``used`` is what its instances use."""
    used_vcpus, used_ram, used_disk = (u + r for u, r in zip(used, reserved()))
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
    now = datetime.datetime.now(datetime.timezone.utc)
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
    """Nova's databases, as a HostManager reads them."""

    def __init__(self):
        self.nodes = {}
        self.services = {}
        self.instances = {}  # uuid -> Instance
        self.volume_backed = set()  # uuids of volume-backed instances
        self.aggregates = []

    def add(self, host, vcpus, memory_mb, disk_gb, disabled=False, **kw):
        self.nodes[host] = compute_node(host, vcpus, memory_mb, disk_gb, **kw)
        self.services[host] = service(host, disabled=disabled)
        return self.nodes[host]

    def add_instance(self, instance, volume_backed=False):
        self.instances[instance.uuid] = instance
        if volume_backed:
            self.volume_backed.add(instance.uuid)
        return instance

    def on_host(self, host, node=None):
        return [
            i
            for i in self.instances.values()
            if i.host == host and (node is None or i.node == node)
        ]

    def cell(self):
        return objects.CellMapping(
            uuid=CELL_UUID,
            name="cell1",
            disabled=False,
            transport_url="fake://",
            database_connection="fake://",
        )


class HostManager(gs_host_manager.GrantsHostManager):
    """The driver's ``GrantsHostManager``, reading ``cloud``."""

    def __init__(self, cloud, driver):
        self.cloud = cloud
        super().__init__(
            lambda: driver.grant_scheduler,
            driver.nodes_of_host,
            outage=lambda: driver.outage,
        )

    # The database reads of Nova's HostManager:

    def refresh_cells_caches(self):
        cell = self.cloud.cell()
        self.cells = {cell.uuid: cell}
        self.enabled_cells = [cell]
        self.host_to_cell_uuid = {}

    def _init_aggregates(self):
        for aggregate in self.cloud.aggregates:
            self.aggs_by_id[aggregate.id] = aggregate
            for host in aggregate.hosts:
                self.host_aggregates_map[host].add(aggregate.id)

    def _init_instance_info(self, computes_by_cell=None):
        pass

    def _read_computes(self, context, cells):
        # NOTE: copies, as each read of Nova's database makes new objects.
        nodes = [
            copy.copy(node) for _, node in sorted(self.cloud.nodes.items())
        ]
        services = {h: copy.copy(s) for h, s in self.cloud.services.items()}
        return {CELL_UUID: nodes}, services

    def _get_instances_by_host(self, context, host_name):
        return {i.uuid: i for i in self.cloud.on_host(host_name)}

    # ... and those of GrantsHostManager:

    def _cell_context(self, context, host):
        return contextlib.nullcontext(context)

    def instances(self, context, host, instance_uuids):
        return [
            i
            for i in self.cloud.on_host(host)
            if i.uuid in set(instance_uuids)
        ]

    def instances_on_node(self, context, host, node):
        return self.cloud.on_host(host, node)

    def is_volume_backed(self, context, instance):
        return instance.uuid in self.cloud.volume_backed


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
        requested_destination=None,
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


def instance_list(*instances):
    return objects.InstanceList(objects=list(instances))
