"""Request streams: the same seeded stream goes through every strategy."""

import dataclasses
import random

from grant_scheduler import api

FLAVOURS = (
    api.Resources(1, 2048, 20),
    api.Resources(2, 4096, 40),
    api.Resources(4, 8192, 80),
    api.Resources(8, 16384, 160),
)
HOST = api.Resources(16, 32768, 500)


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    hosts: int
    capacity: api.Resources
    flavours: tuple
    requests: int
    churn: float = 0.0

    def host_names(self):
        return ["bench%05d" % n for n in range(self.hosts)]

    def stream(self, seed):
        rng = random.Random(seed)
        return [rng.choice(self.flavours) for _ in range(self.requests)]


def _slots(capacity, flavour):
    return min(
        capacity.vcpus // flavour.vcpus,
        capacity.memory_mb // flavour.memory_mb,
        capacity.disk_gb // max(1, flavour.disk_gb),
    )


def make(name, hosts, requests=None):
    """A workload by name: fill, flood, ironic, mixed or churn.

    Without ``requests``, enough to exhaust the hosts and then some, so
    every run also measures how NoValidHost is reached.
    """
    if name == "ironic":
        flavour = api.Resources(32, 131072, 1000)
        default = hosts + hosts // 4 + 1
        return Workload(name, hosts, flavour, (flavour,), requests or default)
    if name in ("fill", "flood"):
        flavour = FLAVOURS[1]
        default = int(hosts * _slots(HOST, flavour) * 1.2) + 1
        return Workload(name, hosts, HOST, (flavour,), requests or default)
    if name in ("mixed", "churn"):
        average = sum(_slots(HOST, f) for f in FLAVOURS) / len(FLAVOURS)
        default = int(hosts * average * 1.2) + 1
        churn = 0.3 if name == "churn" else 0.0
        return Workload(
            name, hosts, HOST, FLAVOURS, requests or default, churn
        )
    raise ValueError(
        "unknown workload %r: choose fill, flood, ironic, mixed or churn"
        % name
    )


NAMES = ("fill", "flood", "ironic", "mixed", "churn")
