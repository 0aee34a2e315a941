"""Claiming an instance in grant_scheduler from Nova's side.

Every compute-side path shares these rules: the build hook (Nova 13-21),
the claiming virt drivers (opt-in) and the scheduler's host manager, which
claims from the instance info computes send (the default on 22).

An instance is claimed by its grant when it has one: the grant's amount is
what the scheduler promised (without the root disk of a volume-backed
server, say), so the claim consumes exactly that.  Without a grant (it
expired, or the build went to an alternate host that holds none) the
instance's flavour is re-checked against usage plus live grants.
"""

from oslo_log import log as logging

from grant_scheduler import api
from grant_scheduler.nova import amounts as nova_amounts
from grant_scheduler.nova import compat

LOG = logging.getLogger(__name__)


def is_volume_backed(context, instance, bdms=None):
    """Nova's own answer (its root block device is a volume), or False
    where this release cannot tell (``compat.volume_backed_check``)."""
    check = compat.volume_backed_check()
    if check is None or context is None or instance is None:
        return False
    try:
        return bool(check(context, instance, bdms))
    except Exception:  # noqa: BLE001 - a guess must not stop a claim
        LOG.warning(
            "Could not tell whether instance %s is volume-backed; counting "
            "its root disk",
            getattr(instance, "uuid", None),
            exc_info=True,
        )
        return False


def instance_resources(context, instance, bdms=None, is_bfv=None):
    """What ``instance`` uses on its host, by its flavour.

    :param is_bfv: whether it is volume-backed; asked of Nova when None.
    """
    if is_bfv is None:
        is_bfv = is_volume_backed(context, instance, bdms)
    return nova_amounts.instance_amount(
        compat.field(instance, "flavor"), is_bfv=is_bfv, instance=instance
    )


def on_provider(state, amounts, allocations=None):
    """``{uuid: Resources}`` as placement holds them on the node of
    ``state`` (its ``HostState`` in the books), its own provider (Nova
    17-22): the classes the node's inventory lacks (DISK_GB of a sharing
    provider) are held by another provider, not there.  Unchanged before
    placement, and for a node the books do not know (None).

    :param allocations: ``f(node_uuid)`` giving ``{consumer uuid:
        Resources}`` placement holds on the node's provider now, or None
        (``inventory.PlacementInventory.allocations``); asked only when a
        consumer's amount has dedicated CPUs, which Nova asks placement
        for as PCPU and, when no node has PCPU left, as VCPU (its fallback
        query, 20-22): placement's allocation says which it took.
    """
    if state is None or not compat.claims_in_placement():
        return amounts
    offered = state.capacity.inventories
    held = {
        uuid: _held_there(amount, offered) for uuid, amount in amounts.items()
    }
    pinned = [uuid for uuid, amount in held.items() if "PCPU" in amount]
    if pinned and allocations is not None:
        found = allocations(state.node_uuid) or {}
        for uuid in pinned:
            if uuid in found:
                held[uuid] = found[uuid].map(
                    lambda name, value: value if name in offered else 0
                )
    return held


def _held_there(amount, offered):
    # NOTE(nova): a node that reports no PCPU yet takes pinned vCPUs as
    # VCPU (Nova's fallback query, 20-22).
    if "PCPU" in amount and "PCPU" not in offered and "VCPU" in offered:
        amount = (
            amount
            + api.Resources(amount["PCPU"])
            - api.Resources(PCPU=amount["PCPU"])
        )
    return amount.map(lambda name, value: value if name in offered else 0)


def claim(
    gs, instance_uuid, host, node, resources_of, request_id=None, granted=None
):
    """Count an instance on ``host``/``node``.

    :param resources_of: ``f()`` giving the instance's ``Resources``,
        called only when it has no grant there.
    :param request_id: its request's id, for grants written without an
        instance uuid (Nova 13-14 multi-create).
    :param granted: the amount of the grant this process took for it,
        where it did (``GrantScheduler.claim_instance``).
    :returns: the ``ClaimOutcome``.
    :raises ClaimRejected: no grant, and it does not fit.
    :raises UnknownHost: the node never reported.
    """
    return gs.claim_instance(
        instance_uuid,
        host,
        node,
        resources_of,
        request_id=request_id,
        granted=granted,
    )


class Amounts:
    """What instances of one cell use, by flavour, volume-backed root
    disks excluded: one query of their block device mappings."""

    def __init__(self, context, instance_uuids):
        from nova import objects

        self._context = context
        self._bdms = objects.BlockDeviceMappingList.bdms_by_instance_uuid(
            context, sorted(instance_uuids)
        )
        # NOTE: an instance without mappings gets an empty list, which
        # Nova reads as "no root volume" rather than querying it again.
        self._none = objects.BlockDeviceMappingList(objects=[])

    def of(self, instance, flavor=None):
        """``instance``'s amount at ``flavor`` (its current flavour when
        None, or its own columns, which Nova keeps at that flavour, where
        the flavour is not loaded)."""
        is_bfv = is_volume_backed(
            self._context,
            instance,
            self._bdms.get(instance.uuid) or self._none,
        )
        if flavor is None:
            flavor = compat.field(instance, "flavor") or instance
        return nova_amounts.instance_amount(
            flavor, is_bfv=is_bfv, instance=instance
        )
