"""The cache policies CAVA, section V compares, each as a LocalCluster's
``cache_policy`` and the clients' read caching (:data:`POLICIES`; No-Cache the
baseline every runtime is normalized to)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    """A cache policy as a run sets it up."""

    name: str
    label: str
    cache_policy: str  # LocalCluster's
    read_cache: str = "mem"
    #: Static-CA: each application declares its affinity (annotation).
    declare: bool = False


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("no-cache", "No-Cache", "lru", read_cache="none"),
        Policy("lru", "LRU", "lru"),
        Policy("lfu", "LFU", "lfu"),
        Policy("ca-only", "CA-Only", "ca"),
        Policy("static-ca", "Static-CA", "ca", declare=True),
        Policy("cava", "CAVA", "cava"),
    )
}
BASELINE = "no-cache"
