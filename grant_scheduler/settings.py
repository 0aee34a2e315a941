"""The protocol's settings, read once from ``[grant_scheduler]``."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Settings:
    grant_ttl: int = 600
    host_subset_size: int = 3
    max_fallovers: int = 10
    reap_batch_size: int = 500
    view_resync_interval: float = 60.0
    view_overlap: float = 2.0

    @classmethod
    def from_conf(cls, conf):
        group = conf.grant_scheduler
        return cls(
            grant_ttl=group.grant_ttl,
            host_subset_size=group.host_subset_size,
            max_fallovers=group.max_fallovers,
            reap_batch_size=group.reap_batch_size,
            view_resync_interval=group.view_resync_interval,
            view_overlap=group.view_overlap,
        )
