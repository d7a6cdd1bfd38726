"""The cache policies CAVA, section V compares, each as the Thaw workers'
``--cache-policy`` and the clients' read caching (:data:`POLICIES`; No-Cache the
baseline every runtime is normalized to; :data:`PAPER_POLICIES` the five the
paper's Fig. 5 compares; LFU, and LRU with memory for every input (the bound:
is memory the bottleneck at the chosen size?) extras). With the plugin's placement on, LRU is
the paper's CAVA-LRU (memory-locality placement, LRU replacement)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    """A cache policy as a run sets it up."""

    name: str
    label: str
    cache_policy: str  # the workers' --cache-policy
    read_cache: str = "mem"
    #: Static-CA: each application declares its affinity (annotation).
    declare: bool = False
    #: Memory for every input (no replacement ever needed): the bound on what
    #: any replacement policy can gain at the scale's memory.
    unlimited: bool = False


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("no-cache", "No-Cache", "lru", read_cache="none"),
        Policy("lru", "LRU", "lru"),
        Policy("lfu", "LFU", "lfu"),
        Policy("ca-only", "CA-Only", "ca"),
        Policy("static-ca", "Static-CA", "ca", declare=True),
        Policy("cava", "CAVA", "cava"),
        Policy("unlimited", "LRU, memory for all", "lru", unlimited=True),
    )
}
BASELINE = "no-cache"
#: The configurations of CAVA, Fig. 5 (No-Cache, CAVA-LRU, CA-Only, Static-CA, CAVA).
PAPER_POLICIES = ("no-cache", "lru", "ca-only", "static-ca", "cava")
