"""Resource amounts and host capacity: arithmetic with no storage in it."""

import dataclasses
import math

DIMENSIONS = ("vcpus", "memory_mb", "disk_gb")

# NOTE: an amount above this is a typo or an attack, not a flavour; it also
# keeps every sum inside the 64-bit columns.
MAX_AMOUNT = 2**40


@dataclasses.dataclass(frozen=True)
class Resources:
    """An amount of vCPU, RAM (MB) and disk (GB)."""

    vcpus: int = 0
    memory_mb: int = 0
    disk_gb: int = 0

    def __add__(self, other):
        return Resources(
            self.vcpus + other.vcpus,
            self.memory_mb + other.memory_mb,
            self.disk_gb + other.disk_gb,
        )

    def __sub__(self, other):
        return Resources(
            self.vcpus - other.vcpus,
            self.memory_mb - other.memory_mb,
            self.disk_gb - other.disk_gb,
        )

    def fits_within(self, limit):
        """True when every dimension is at most ``limit``'s."""
        return (
            self.vcpus <= limit.vcpus
            and self.memory_mb <= limit.memory_mb
            and self.disk_gb <= limit.disk_gb
        )

    def exceeded(self, limit):
        """The dimensions in which this amount is above ``limit``."""
        return [
            name
            for name in DIMENSIONS
            if getattr(self, name) > getattr(limit, name)
        ]

    def negative(self):
        """The dimensions in which this amount is below zero."""
        return [name for name in DIMENSIONS if getattr(self, name) < 0]

    def as_dict(self):
        return dataclasses.asdict(self)

    def __str__(self):
        return "%d vCPU, %d MB RAM, %d GB disk" % (
            self.vcpus,
            self.memory_mb,
            self.disk_gb,
        )


NOTHING = Resources()


@dataclasses.dataclass(frozen=True)
class Capacity:
    """What a host offers: totals, reserved amounts and allocation ratios."""

    total: Resources
    reserved: Resources = Resources()
    cpu_allocation_ratio: float = 1.0
    ram_allocation_ratio: float = 1.0
    disk_allocation_ratio: float = 1.0

    def limit(self):
        """``(total - reserved) x ratio`` per dimension, rounded down (I1)."""
        usable = self.total - self.reserved
        return Resources(
            _scaled(usable.vcpus, self.cpu_allocation_ratio),
            _scaled(usable.memory_mb, self.ram_allocation_ratio),
            _scaled(usable.disk_gb, self.disk_allocation_ratio),
        )


def _scaled(amount, ratio):
    # NOTE: the small epsilon keeps 16 x 1.5 from becoming 23.999999.
    return max(0, math.floor(amount * ratio + 1e-9))


@dataclasses.dataclass
class HostState:
    """One node as a scheduler sees it: capacity, usage and promises.

    ``limit`` is stored with the row (``Capacity.limit`` of its capacity),
    so the database can compare against it in the grant's own ``UPDATE``.
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
        """Within the limit with usage and live grants, and one instance
        no larger than the node's physical amount (placement's
        ``max_unit``: overcommitment shares a CPU, it does not widen one
        instance beyond the node)."""
        return request.fits_within(self.capacity.total) and (
            self.used + self.granted + request
        ).fits_within(self.limit)
