"""Resource amounts and node inventories, by resource class: arithmetic
with no storage in it.

A resource class is placement's: ``VCPU``, ``MEMORY_MB``, ``DISK_GB``,
``PCPU``, or any other name of capital letters, digits and underscores
(``CUSTOM_BAREMETAL_GOLD``).  ``Resources`` is an amount of each class;
``Inventory`` is what a node offers of one class, as placement keeps it
(``total``, ``reserved``, ``allocation_ratio``, ``min_unit``,
``max_unit``, ``step_size``); ``Capacity`` is a node's inventories.
"""

import dataclasses
import math
import re

VCPU = "VCPU"
MEMORY_MB = "MEMORY_MB"
DISK_GB = "DISK_GB"

STANDARD = {"vcpus": VCPU, "memory_mb": MEMORY_MB, "disk_gb": DISK_GB}
"""The three amounts every Nova release knows, by their Nova names."""

DIMENSIONS = tuple(STANDARD)

CLASS_NAME = re.compile(r"^[A-Z0-9_]{1,255}$")
"""Placement's pattern for a resource class name."""

# NOTE: an amount above this is a typo or an attack, not a flavour; it also
# keeps every sum inside the 64-bit columns.
MAX_AMOUNT = 2**40


def _order(name):
    """Standard classes first, in Nova's order, then the others by name."""
    standard = list(STANDARD.values())
    if name in standard:
        return (0, standard.index(name), "")
    return (1, 0, name)


def _kept(value):
    """Any amount but an integer zero (what is not an integer is kept for
    validation to name)."""
    return not (type(value) is int and value == 0)


class Resources:
    """An amount of each resource class (immutable).

    ``Resources(vcpus, memory_mb, disk_gb, **classes)``: the three standard
    amounts by Nova's names, and any class by its placement name
    (``Resources(CUSTOM_BAREMETAL_GOLD=1)``, ``Resources(PCPU=2)``).
    Classes of amount zero are not kept: ``Resources(0, 0, 0)`` is
    ``NOTHING``, and iterating gives only the classes asked for.
    """

    __slots__ = ("_amounts", "_hash")

    def __init__(self, vcpus=0, memory_mb=0, disk_gb=0, **classes):
        amounts = dict(classes)
        for nova_name, value in (
            ("vcpus", vcpus),
            ("memory_mb", memory_mb),
            ("disk_gb", disk_gb),
        ):
            name = STANDARD[nova_name]
            if _kept(value) and _kept(amounts.get(name, 0)):
                raise TypeError(
                    "%s given twice (as %s and %s)" % (name, nova_name, name)
                )
            if _kept(value):
                amounts[name] = value
        self._amounts = {
            name: amounts[name]
            for name in sorted(amounts, key=_order)
            if _kept(amounts[name])
        }
        self._hash = None

    @classmethod
    def of(cls, amounts):
        """``Resources`` from ``{class name: amount}``."""
        return cls(**dict(amounts))

    # -- the standard amounts by Nova's names ------------------------------

    @property
    def vcpus(self):
        return self._amounts.get(VCPU, 0)

    @property
    def memory_mb(self):
        return self._amounts.get(MEMORY_MB, 0)

    @property
    def disk_gb(self):
        return self._amounts.get(DISK_GB, 0)

    # -- a mapping of class to amount --------------------------------------

    def get(self, name, default=0):
        return self._amounts.get(name, default)

    def __getitem__(self, name):
        return self._amounts.get(name, 0)

    def __iter__(self):
        return iter(self._amounts)

    def __len__(self):
        return len(self._amounts)

    def __bool__(self):
        return bool(self._amounts)

    def items(self):
        return self._amounts.items()

    def classes(self):
        """The classes of non-zero amount, standard ones first."""
        return list(self._amounts)

    def as_dict(self):
        """``{class name: amount}`` of the non-zero amounts."""
        return dict(self._amounts)

    def __eq__(self, other):
        if not isinstance(other, Resources):
            return NotImplemented
        return self._amounts == other._amounts

    def __hash__(self):
        if self._hash is None:
            self._hash = hash(frozenset(self._amounts.items()))
        return self._hash

    def _combined(self, other, sign):
        amounts = dict(self._amounts)
        for name, value in other._amounts.items():
            amounts[name] = amounts.get(name, 0) + sign * value
        return Resources.of(amounts)

    def __add__(self, other):
        return self._combined(other, 1)

    def __sub__(self, other):
        return self._combined(other, -1)

    def __neg__(self):
        return Resources.of({n: -v for n, v in self._amounts.items()})

    def map(self, function):
        """``function(class, amount)`` applied to every class."""
        return Resources.of(
            {n: function(n, v) for n, v in self._amounts.items()}
        )

    def fits_within(self, limit):
        """True when every class is at most ``limit``'s."""
        return not self.exceeded(limit)

    def exceeded(self, limit):
        """The classes in which this amount is above ``limit``."""
        return [n for n, v in self._amounts.items() if v > limit[n]]

    def negative(self):
        """The classes in which this amount is below zero."""
        return [n for n, v in self._amounts.items() if v < 0]

    def __repr__(self):
        return "Resources(%s)" % ", ".join(
            "%s=%d" % item for item in self._amounts.items()
        )

    def __str__(self):
        text = "%d vCPU, %d MB RAM, %d GB disk" % (
            self.vcpus,
            self.memory_mb,
            self.disk_gb,
        )
        others = [
            "%d %s" % (v, n)
            for n, v in self._amounts.items()
            if n not in STANDARD.values()
        ]
        return ", ".join([text] + others)


NOTHING = Resources()


def _scaled(amount, ratio):
    # NOTE: the small epsilon keeps 16 x 1.5 from becoming 23.999999.
    return max(0, math.floor(amount * ratio + 1e-9))


@dataclasses.dataclass(frozen=True)
class Inventory:
    """What a node offers of one resource class, as placement keeps it.

    ``max_unit`` defaults to ``total``: overcommitment shares a CPU, it
    does not widen one instance beyond the node.
    """

    total: int
    reserved: int = 0
    allocation_ratio: float = 1.0
    min_unit: int = 1
    max_unit: int = None
    step_size: int = 1

    def __post_init__(self):
        if self.max_unit is None:
            object.__setattr__(self, "max_unit", self.total)

    @property
    def capacity(self):
        """``(total - reserved) x allocation_ratio``, rounded down (I1)."""
        return _scaled(self.total - self.reserved, self.allocation_ratio)

    def admits(self, amount):
        """One allocation of ``amount`` within the units (placement's
        ``min_unit``, ``max_unit`` and ``step_size``)."""
        return (
            self.min_unit <= amount <= self.max_unit
            and amount % self.step_size == 0
        )


_RATIO_NAMES = {
    VCPU: "cpu_allocation_ratio",
    MEMORY_MB: "ram_allocation_ratio",
    DISK_GB: "disk_allocation_ratio",
}


class Capacity:
    """A node's inventories, by resource class (immutable).

    ``Capacity(total, reserved, cpu_allocation_ratio, ram_allocation_ratio,
    disk_allocation_ratio)`` is the three standard classes as Nova's
    compute node record has them; ``Capacity.of({class: Inventory})`` is
    any inventory, placement's for one.
    """

    __slots__ = ("inventories",)

    def __init__(
        self,
        total=None,
        reserved=None,
        cpu_allocation_ratio=1.0,
        ram_allocation_ratio=1.0,
        disk_allocation_ratio=1.0,
        inventories=None,
    ):
        if inventories is None:
            total = total or NOTHING
            reserved = reserved or NOTHING
            ratios = {
                VCPU: cpu_allocation_ratio,
                MEMORY_MB: ram_allocation_ratio,
                DISK_GB: disk_allocation_ratio,
            }
            inventories = {
                name: Inventory(
                    total=total[name],
                    reserved=reserved[name],
                    allocation_ratio=ratios.get(name, 1.0),
                )
                for name in list(STANDARD.values())
                + [n for n in total if n not in ratios]
            }
        elif total is not None or reserved is not None:
            raise TypeError("give totals or inventories, not both")
        self.inventories = {
            name: inventories[name] for name in sorted(inventories, key=_order)
        }

    @classmethod
    def of(cls, inventories):
        return cls(inventories=dict(inventories))

    def __eq__(self, other):
        if not isinstance(other, Capacity):
            return NotImplemented
        return self.inventories == other.inventories

    def __hash__(self):
        return hash(frozenset(self.inventories.items()))

    def __repr__(self):
        return "Capacity.of(%r)" % (self.inventories,)

    def classes(self):
        return list(self.inventories)

    def _each(self, attribute):
        return Resources.of(
            {n: getattr(i, attribute) for n, i in self.inventories.items()}
        )

    @property
    def total(self):
        return self._each("total")

    @property
    def reserved(self):
        return self._each("reserved")

    @property
    def max_unit(self):
        return self._each("max_unit")

    def limit(self):
        """Each class's capacity, ``(total - reserved) x ratio`` (I1)."""
        return self._each("capacity")

    def ratio(self, name):
        inventory = self.inventories.get(name)
        return 1.0 if inventory is None else inventory.allocation_ratio

    @property
    def cpu_allocation_ratio(self):
        return self.ratio(VCPU)

    @property
    def ram_allocation_ratio(self):
        return self.ratio(MEMORY_MB)

    @property
    def disk_allocation_ratio(self):
        return self.ratio(DISK_GB)

    def admits(self, request):
        """Every class of ``request`` is offered, within its units."""
        return all(
            name in self.inventories and self.inventories[name].admits(value)
            for name, value in request.items()
        )

    def refused(self, request):
        """The classes of ``request`` the node does not offer, or not in
        that unit."""
        return [
            name
            for name, value in request.items()
            if name not in self.inventories
            or not self.inventories[name].admits(value)
        ]


@dataclasses.dataclass
class HostState:
    """One node as a scheduler sees it: capacity, usage and promises.

    ``limit`` is stored with the node (``Capacity.limit`` of its capacity),
    so the database can compare against it in the grant's own write.
    """

    host_id: int
    host: str
    node: str
    capacity: Capacity
    used: Resources
    granted: Resources = NOTHING
    """Live grants on the node (won, not yet consumed)."""
    node_uuid: str = None
    limit: Resources = None

    def __post_init__(self):
        if self.limit is None:
            self.limit = self.capacity.limit()

    @property
    def free(self):
        return self.limit - self.used - self.granted

    def fits(self, request):
        """Every class of ``request`` offered, within its units
        (placement's ``min_unit``, ``max_unit``, ``step_size``), and
        within its limit with usage and live grants.

        As placement (and Nova's filters before it) decide, only the
        classes the request asks are compared: a node over its limit in
        one class (a correction counted what runs there) takes no grant
        of that class until it is back within it, and may take others.
        """
        if not self.capacity.admits(request):
            return False
        used, granted, limit = self.used, self.granted, self.limit
        return all(
            used[name] + granted[name] + value <= limit[name]
            for name, value in request.items()
        )
