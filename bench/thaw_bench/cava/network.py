"""CAVA's runs on emulated hosts with a network (``python -m thaw_bench cava
--network SPEC``): each Thaw worker a node of :class:`~thaw_bench.cluster.EmulatedCluster`
on the lab (:mod:`thaw_bench.netlab`), so that a read of a block cached in
another worker's memory crosses the shaped links, where on loopback it costs
what a local one does.

What differs from loopback, and why:

- The Dask workers (``scale.dask_workers``, one thread each, as on loopback)
  are spread over the nodes, each in its node's namespace and taking the
  node's place (``THAW_HOST``), so its reads and its cache fills go to its own
  node's worker first; on loopback they sit on no node.
- A run's fresh cluster is a fresh master and workers on the same nodes (the
  lab and the Dask workers serve every run of the invocation): the master's
  journal and the workers' directories are removed before it starts, so its
  memory is empty and its namespace holds only the under-store's files.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..cluster import ClusterSpec, EmulatedCluster
from ..netdask import start_dask_on
from .policies import Policy
from .workloads import Scale


def cluster_spec(scale: Scale, policy: Policy | None = None) -> ClusterSpec:
    """The nodes of ``scale`` on its network; ``policy`` gives the workers'
    cache policy."""
    args = ["--cache-window", scale.cache_window]
    if policy is not None:
        args = ["--cache-policy", policy.cache_policy, *args]
    return ClusterSpec(
        nodes=scale.workers, racks=1, slots=1, ufs=scale.ufs, penalty=scale.penalty,
        block_size=str(scale.block_size), mem_capacity=str(scale.mem_capacity),
        heartbeat_ms=scale.heartbeat_ms, network=scale.network, worker_args=args,
    )  # fmt: skip


def start_dask(scale: Scale, base: Path) -> tuple[EmulatedCluster, Any, Any]:
    """The lab (entered), and ``scale.dask_workers`` one-thread Dask workers
    spread over its nodes. Returns (an unstarted cluster holding the lab, the
    Dask cluster, its client)."""
    anchor = EmulatedCluster(cluster_spec(scale), root=base / "anchor")
    per_node = -(-scale.dask_workers // max(1, scale.workers))
    dask_cluster, client = start_dask_on(anchor, 1, per_node=per_node)
    return anchor, dask_cluster, client


def start_thaw(scale: Scale, policy: Policy, ufs: Path) -> EmulatedCluster:
    """A fresh cluster for one run under ``policy`` on the network, its
    under-store ``ufs`` (memory empty, no journal)."""
    base = ufs.parent
    for old in [base / "journal", *(base / f"node{i}" for i in range(scale.workers))]:
        shutil.rmtree(old, ignore_errors=True)
    cluster = EmulatedCluster(cluster_spec(scale, policy), root=base)
    try:
        cluster.start("none")
    except BaseException:
        cluster.close()
        raise
    return cluster
