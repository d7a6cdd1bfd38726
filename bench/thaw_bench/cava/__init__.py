"""CAVA, section V on this machine: cache-affinity-aware replacement against LRU, LFU
and No-Cache, on a small emulated cluster (``python -m thaw_bench cava``).

The cluster is a :class:`thaw.LocalCluster` (2 workers by default) with a small
MEM tier, blocks of a few MiB and an emulated under-store (``device_model``, e.g.
``ufs=40MiB/s,penalty=0.3``), so a cold block costs real device time and a
memory hit costs almost nothing. Reads cache on read (the client's
``read_cache="mem"``); No-Cache reads with ``read_cache="none"``. Migration is
off (``migration_policy="none"``): only what reads leave in memory is ever
cached, so the cache policy (``LocalCluster(cache_policy=...)``) alone decides
what stays: ``lru``, ``lfu``, ``ca`` (CA-Only, and Static-CA with declared
affinities) or ``cava``.

Applications are Dask graphs (one submission each, one task per input block,
annotated ``thaw_job`` = the application's run, ``thaw_app`` = its kind, and
for Static-CA ``thaw_cache_affinity``), run with :func:`thaw.dask.install`
(whose worker plugin measures each job's task CPU and writes for the master's
classifier) on Dask workers of one thread each, so that each task's CPU and
writes are its own. Each application first waits ``startup`` (the
``thaw_start_after`` annotation: its launch, holding no slot and measured in
its runtime, not in its tasks' figures). Three kinds, placed as CAVA,
Table I's applications are by the classifier (thresholds: the mean of the
applications measured lately):

- ``grep`` (high affinity): counts a byte pattern; little CPU, no output;
- ``sort`` (medium): sorts the block's 8-byte keys in :data:`PIECES` runs (CPU
  below the mean), writing each run through to the under-store as a map
  task's spill (writes above the mean);
- ``pagerank`` (low): many PageRank iterations over the block read as an edge
  list (CPU well above the mean), writing its ranks every quarter of them, at
  a little above sort's rate.

Writes go out while a task runs, not all at its end: the master counts them
from the workers' heartbeats and stops reclassifying an application once its
last input is read, so writes at the very end would not count.

Experiments (each optional, ``--experiments``):

- ``affinity``: each kind alone on one cluster, cold (No-Cache reads) and with
  its input already in memory: the measured benefit ``1 - R_hot / R_cold``
  (CAVA, section V-A's Static-CA values), the CPU and write figures the master
  measured and the class it gave each kind. The kinds run once cold before the
  measured runs, so that the classifier's thresholds are the mean of the three
  (as Table I's average is) when the measured runs are classified.
- ``workloads``: W1-W6 of Table III scaled down: ``apps`` applications, at most
  ``concurrency`` running at once (the next starts when one ends), kinds in the
  70/20/10 (CA-H) or 20/70/10 (CA-M) mix for high/medium/low affinity, hot files
  (read more than three times) holding more (HD-H) or less (HD-L) than half of
  the distinct input, shared across affinity classes (W1, W4, W5) or within one
  (W2, W3, W6), the distinct input larger than the cluster's memory. Each runs
  under every policy (:data:`POLICIES`) on a fresh cluster: total runtime
  normalized to No-Cache, each kind's mean runtime normalized to No-Cache
  (Table IV), share of hot data cached at the end, hit ratio, the classes the
  master gave, the workers' drops; for one workload (W5) cached bytes of each
  hot file and of the cold files every 0.5 s (CAVA, Fig. 7).
- ``trace``: the first jobs of a SWIM trace (sizes from the trace, scaled to
  blocks), their inputs recurring by a Zipf popularity (the trace names no
  files), under the same policies: hit ratio and mean job runtime.

A run that fails (the cluster does not start, an application errs, the run
times out) is recorded with its error and left out of the tables' means.

With ``--network SPEC`` (root only) each worker is an emulated host and the
Dask workers are spread over them (:mod:`.network`), so a hit in another
worker's memory crosses the shaped network.

The modules: :mod:`.workloads` (the kinds, W1-W6, the presets, the generated
workloads and their input files), :mod:`.policies`, :mod:`.tasks` (the
applications' work), :mod:`.runner` (one run on a fresh cluster),
:mod:`.network` (the runs on emulated hosts) and
:mod:`.sampler` (the cache report over time), :mod:`.experiments` (the three
experiments and :func:`~.experiments.cava`, which runs them), :mod:`.report` and
:mod:`.figure` (the tables and Fig. 7), :mod:`.cli` (the command).
"""
