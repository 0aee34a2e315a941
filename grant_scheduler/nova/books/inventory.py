"""What a compute node offers, as placement has it (Nova 17-22).

From Nova 17 on placement decides what a node offers: its provider's
inventory of each resource class (``total``, ``reserved``,
``allocation_ratio``, ``min_unit``, ``max_unit``, ``step_size``), whoever
set it: the standard classes, PCPU, and custom ones such as an Ironic
node's one unit of ``CUSTOM_BAREMETAL_<X>``.  Each compute writes
its own ``reserved_host_*`` options there (not the scheduler's), and
since Stein an operator may set allocation ratios and reserved amounts
through placement's API while the compute node record keeps the initial
ratios.  So on these releases grant_scheduler's capacity of a node is
read from placement, never from the compute node record or the
scheduler's own options, and a node placement has no inventory for is
not registered (``PlacementInventory.capacity`` answers None).

How current it is kept (``NodeRegistry.sync``, every
``[scheduler] periodic_task_interval``): one ``GET /resource_providers``
lists every provider's generation; only the providers whose generation
moved since the last sync (an inventory or an allocation changed there)
are read again, one ``GET .../inventories`` and one ``GET .../usages``
each.  The usages tell what placement holds on a node beyond the books'
claims and live grants (consumers that are not Nova instances the books
follow): the driver counts it, in memory, when it decides which nodes
have room (``PlacementCapacities.others``).  A node whose grant is
refused has its inventory read again (``NodeRegistry.refresh``, at most
every ten seconds: most refusals are lost races), so a capacity raised
in placement is seen by the next request that meets it.
"""

from oslo_log import log as logging

from grant_scheduler import api

LOG = logging.getLogger(__name__)

# ``PlacementInventory.look``'s capacity of a provider without inventory.
NO_INVENTORY = api.Capacity.of({})

# The first microversion of GET /resource_providers that lists every
# provider without a filter (1.0 does too) and the inventories' format.
_VERSION = "1.0"


def _int(inventory, name, default):
    value = inventory.get(name)
    return default if value is None else int(value)


def capacity_from(inventories):
    """The ``Capacity`` of placement's ``{class: inventory}`` of one
    provider, every class as placement has it (``total``, ``reserved``,
    ``allocation_ratio``, ``min_unit``, ``max_unit``, ``step_size``);
    None when it has no inventory (a provider not reported yet, an Ironic
    node not available).  A class it lacks (DISK_GB from a sharing
    provider) is not offered there."""
    if not inventories:
        return None
    found = {}
    for name, inventory in inventories.items():
        total = _int(inventory, "total", 0)
        found[name] = api.Inventory(
            total=total,
            # NOTE(placement): a reserved amount above the total (Ironic's
            # reserved node) leaves nothing, as in placement.
            reserved=min(_int(inventory, "reserved", 0), total),
            allocation_ratio=float(inventory.get("allocation_ratio") or 1.0),
            min_unit=max(1, _int(inventory, "min_unit", 1)),
            max_unit=_int(inventory, "max_unit", total),
            step_size=max(1, _int(inventory, "step_size", 1)),
        )
    return api.Capacity.of(found)


class PlacementInventory:
    """Reads nodes' inventories from placement for one scheduler process."""

    def __init__(self, client):
        """
        :param client: ``f()`` giving Nova's placement client
            (``SchedulerReportClient``).
        """
        self._client = client
        self._generations = {}

    def _get(self, context, url):
        response = self._client().get(
            url,
            version=_VERSION,
            global_request_id=getattr(context, "global_id", None),
        )
        if response is None or response.status_code != 200:
            return None
        return response.json()

    def _read(self, context, node_uuid, what):
        """``GET /resource_providers/{node_uuid}/{what}``'s body, or None
        (no such provider, or placement did not answer: the next look
        asks again)."""
        try:
            return self._get(
                context, "/resource_providers/%s/%s" % (node_uuid, what)
            )
        except Exception:  # noqa: BLE001 - logged; the caller goes on
            LOG.warning(
                "Could not read the %s of provider %s from placement",
                what,
                node_uuid,
                exc_info=True,
            )
            return None

    def capacity(self, context, node_uuid):
        """The node's ``Capacity`` in placement now, or None (no provider,
        no inventory, or placement did not answer)."""
        found = self._read(context, node_uuid, "inventories")
        if found is None:
            return None
        return capacity_from(found.get("inventories") or {})

    def usage(self, context, node_uuid):
        """What placement holds on the node's provider now, every class,
        as ``Resources``, or None."""
        found = self._read(context, node_uuid, "usages")
        if found is None:
            return None
        usages = found.get("usages") or {}
        return api.Resources.of({n: int(v) for n, v in usages.items()})

    def look(self, context, node_uuid):
        """What placement has for the node now: ``(usage, capacity)``.

        ``usage`` is what placement holds on the node's provider, every
        class, as ``Resources`` (None when placement did not answer).
        ``capacity`` is the provider's inventory read now when its
        generation, which the usages' answer carries, moved since the
        last ``changed`` (an allocation or an inventory changed there):
        ``NO_INVENTORY`` when it has none, None when it did not move (the
        inventory the last sync read is current) or placement did not
        answer.  One read, two where the provider moved."""
        found = self._read(context, node_uuid, "usages")
        if found is None:
            return None, None
        usage = api.Resources.of(
            {n: int(v) for n, v in (found.get("usages") or {}).items()}
        )
        generation = found.get("resource_provider_generation")
        if generation is not None and (
            generation == self._generations.get(node_uuid)
        ):
            return usage, None
        inventories = self._read(context, node_uuid, "inventories")
        if inventories is None:
            return usage, None
        capacity = capacity_from(inventories.get("inventories") or {})
        return usage, NO_INVENTORY if capacity is None else capacity

    def allocations(self, context, node_uuid):
        """``{consumer uuid: Resources}`` placement holds on the node's
        provider now, or None."""
        found = self._read(context, node_uuid, "allocations")
        if found is None:
            return None
        return {
            consumer: api.Resources.of(
                {n: int(v) for n, v in (held.get("resources") or {}).items()}
            )
            for consumer, held in (found.get("allocations") or {}).items()
        }

    def changed(self, context):
        """The uuids of the providers whose generation moved since the
        last call (all of them at the first), or None when placement did
        not answer."""
        try:
            found = self._get(context, "/resource_providers")
        except Exception:  # noqa: BLE001 - the next sync asks again
            LOG.warning(
                "Could not list resource providers from placement",
                exc_info=True,
            )
            return None
        if found is None:
            return None
        generations = {
            rp["uuid"]: rp.get("generation")
            for rp in found.get("resource_providers") or ()
        }
        moved = {
            uuid
            for uuid, generation in generations.items()
            if self._generations.get(uuid) != generation
        }
        self._generations = generations
        return moved

    def forget(self, node_uuid):
        """Read ``node_uuid`` again at the next ``changed``."""
        self._generations.pop(node_uuid, None)
