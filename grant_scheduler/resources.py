"""Resource amounts and host capacity: arithmetic with no storage in it."""

import dataclasses
import math

from grant_scheduler import exception

DIMENSIONS = ("vcpus", "memory_mb", "disk_gb")

# NOTE: an amount above this is a typo or an attack, not a flavour; it also
# keeps every sum inside a 64-bit column.
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

    def as_dict(self):
        return dataclasses.asdict(self)


def validated(vcpus, memory_mb, disk_gb, allow_zero=False):
    """Resources from user input, or ``InvalidResources`` naming the value.

    Amounts must be integers (``bool`` is not one), at least 1 for vCPU and
    RAM unless ``allow_zero``, at least 0 for disk, and at most
    ``MAX_AMOUNT``.
    """
    values = {"vcpus": vcpus, "memory_mb": memory_mb, "disk_gb": disk_gb}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise exception.InvalidResources(
                name=name, value=value, reason="it must be an integer"
            )
        minimum = 0 if (allow_zero or name == "disk_gb") else 1
        if value < minimum:
            raise exception.InvalidResources(
                name=name,
                value=value,
                reason="it must be at least %d" % minimum,
            )
        if value > MAX_AMOUNT:
            raise exception.InvalidResources(
                name=name,
                value=value,
                reason="it must be at most %d" % MAX_AMOUNT,
            )
    return Resources(**values)


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
    """One host as a scheduler sees it: capacity, usage and promises."""

    host_id: int
    host: str
    node: str
    capacity: Capacity
    used: Resources
    granted: Resources = Resources()
    """Live grants on the host, won or undecided."""
    pending: Resources = Resources()
    """The undecided part of ``granted``."""
    node_uuid: str = None
    generation: int = 0

    @property
    def limit(self):
        return self.capacity.limit()

    @property
    def free(self):
        return self.limit - self.used - self.granted

    def fits(self, request):
        return (self.used + self.granted + request).fits_within(self.limit)

    def fits_if_undecided_lose(self, request):
        """Would ``request`` fit were every undecided grant to lose?"""
        committed = self.used + self.granted - self.pending
        return (committed + request).fits_within(self.limit)
