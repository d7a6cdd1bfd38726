"""CAVA, section V on this machine: memory-locality placement and cache-affinity-aware
replacement together, against CAVA-LRU, CA-Only, Static-CA and No-Cache, on a
small emulated cluster (``python -m thaw_bench cava``).

The cluster is an emulated one (:mod:`thaw_bench.cluster`): 4 nodes on 2 racks
by default, each a Thaw worker (a small MEM tier, its own emulated link to the
under-store, ``device_model`` e.g. ``ufs=40MiB/s,penalty=0.3``, so a cold block
costs real device time and a memory hit almost nothing) and a Dask worker
beside it whose tasks read their node's memory by short-circuit and fill cold
blocks into it. Reads cache on read (the client's ``read_cache="mem"``);
No-Cache reads with ``read_cache="none"``. Migration is off (``none``): only
what reads leave in memory is ever cached, so the workers' cache policy alone
decides what stays: ``lru`` (with placement: CAVA-LRU), ``ca`` (CA-Only, and
Static-CA with declared affinities), ``cava``, or ``lfu`` (an extra).

Applications are Dask graphs (one submission each, one task per input block,
annotated ``thaw_job`` = the application's run, ``thaw_app`` = its kind, and
for Static-CA ``thaw_cache_affinity``), run with :func:`thaw.dask.install`,
whose scheduler plugin places the reading tasks by memory locality (CAVA,
Algorithm 1: a task goes where its block is in memory, waiting a little for
that slot; ``--no-placement`` leaves placement to Dask) and whose worker plugin
measures each job's task CPU and writes for the master's classifier. Dask
workers have one thread each, so that each task's CPU and writes are its own.
Each application first waits ``startup`` (the ``thaw_start_after`` annotation:
its launch, holding no slot and measured in its runtime, not in its tasks'
figures). The seven kinds of CAVA, Table I are :mod:`.kinds`' registry (grep,
wordcount, sort over text; aggregation, join, selection over visit records;
pagerank over an edge list), each doing its real work on its block; the master
classifies them at runtime (thresholds: the mean of the applications measured
lately).

Writes go out while a task runs, not all at its end: the master counts them
from the workers' heartbeats and stops reclassifying an application once its
last input is read, so writes at the very end would not count.

Experiments (each optional, ``--experiments``):

- ``affinity``: each kind alone on one cluster, cold (No-Cache reads) and with
  its input already in memory: the measured benefit ``1 - R_hot / R_cold``
  (CAVA, section V-A's Static-CA values), the CPU and write figures the master
  measured and the class it gave each kind. The kinds run once cold before the
  measured runs, so that the classifier's thresholds are the mean of the seven
  (as Table I's average is) when the measured runs are classified.
- ``workloads``: W1-W6 of Table III scaled down: ``apps`` applications, at most
  ``concurrency`` running at once (the next starts when one ends), classes in the
  70/20/10 (CA-H) or 20/70/10 (CA-M) mix for high/medium/low affinity (every
  kind of a class in turn), each file read by kinds of its type only, hot files
  (read more than three times) holding more (HD-H) or less (HD-L) than half of
  the distinct input, shared across affinity classes (W1, W4, W5) or within one
  (W2, W3, W6), the distinct input larger than the cluster's memory. Each runs
  under every policy (default :data:`PAPER_POLICIES`) on a fresh cluster: total runtime
  normalized to No-Cache (and its range over the repeats), each kind's mean
  runtime normalized to No-Cache (Table IV) and hit ratio, share of hot data
  cached at the end, hit ratio, memory reads from the task's own node, where the
  plugin launched the tasks, the classes the master gave, the workers' drops;
  for one workload (W5) cached bytes of each
  hot file and of the cold files every 0.5 s (CAVA, Fig. 7).
- ``trace``: the first jobs of a SWIM trace (sizes from the trace, scaled to
  blocks), their inputs recurring by a Zipf popularity (the trace names no
  files), under the same policies: hit ratio and mean job runtime.

A run that fails (the cluster does not start, an application errs, the run
times out) is recorded with its error and left out of the tables' means.

With ``--network SPEC`` (root only) each node is an emulated host with a
network (:mod:`thaw_bench.netlab`), so a hit in another worker's memory
crosses the shaped links.

The modules: :mod:`.kinds` (the seven kinds, their work and their input
files' formats), :mod:`.workloads` (W1-W6, the presets, the generated
workloads and their input files), :mod:`.policies`, :mod:`.tasks` (a task:
read a block, do the kind's work), :mod:`.runner` (one run on a fresh cluster) and
:mod:`.sampler` (the cache report over time), :mod:`.experiments` (the three
experiments and :func:`~.experiments.cava`, which runs them), :mod:`.report` and
:mod:`.figure` (the tables and Fig. 7), :mod:`.cli` (the command).
"""
