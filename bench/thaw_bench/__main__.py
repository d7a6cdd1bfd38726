"""``python -m thaw_bench EXPERIMENT [options]``: runs one of the papers'
experiments on an emulated cluster on this machine and writes
``OUT/EXPERIMENT/results.json`` and ``report.md`` with figures.

Experiments: ``swim``, ``scheduled`` (the scheduled-caching poster's on-disk vs
in-memory vs scheduled caching on SWIM: :mod:`thaw_bench.scheduled`), ``sort``,
``wordcount``, ``interference``, ``sql``,
``pipeline`` (Tachyon, section 3), ``locality`` (CAVA, Fig. 3's memory-locality
levels: :mod:`thaw_bench.locality`), ``devices`` (Ignem, Figs. 1-2: block reads
and map tasks from HDD, SSD and RAM: :mod:`thaw_bench.devices`), ``do-not-harm``
(Ignem, section III-A3's rule on and off: :mod:`thaw_bench.do_not_harm`), ``cava``
(CAVA, section V's cache policies, with options and ``--out`` of its own:
:mod:`thaw_bench.cava`), ``traces`` (Ignem, section II-C's and DYRS, section II's
trace analyses over the SWIM traces: no cluster, options of its own:
:mod:`thaw_bench.trace_analysis`), and ``paper`` (every one of them, section by
section, Tachyon's four experiments too, with an index of what ran and how long
it took: :mod:`thaw_bench.paper`). Every configuration of a table runs in one
invocation, on the same placed data.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from thaw.dask.placement import Delays
from thaw.sizes import parse_size

from . import devices as devices_mod
from . import do_not_harm as harm_mod
from . import experiments as ex
from . import locality as loc
from . import paper as paper_mod
from . import pipeline as pipeline_mod
from . import scheduled as scheduled_mod
from . import trace_analysis
from .cava import cli as cava_cli
from .cava.workloads import APPS
from .cluster import ClusterSpec
from .configs import CONFIGS, SCENARIOS
from .netlab import NetLabError, require_root
from .workloads import DEFAULT_TRACE


def _list(kind: type, choices: dict[str, object] | None = None):  # type: ignore[no-untyped-def]
    def parse(s: str) -> list[object]:
        items = [x.strip() for x in s.split(",") if x.strip()]
        if choices is not None:
            bad = [x for x in items if x not in choices]
            if bad:
                raise argparse.ArgumentTypeError(
                    f"unknown {', '.join(bad)}: expected some of {', '.join(choices)}"
                )
        return [kind(x) for x in items]

    return parse


def _sizes(s: str) -> list[int]:
    return [parse_size(x) for x in s.split(",") if x.strip()]


def _common() -> argparse.ArgumentParser:
    """The emulated cluster's options, a new parser (and new actions) for each
    subcommand: a subcommand's ``set_defaults`` changes its own defaults only
    (on one shared parent it changed every subcommand's: locality's 2 MiB blocks
    and 3 repeats had become swim's)."""
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("emulated cluster (defaults: the scaling in BENCHMARKS.md)")
    d = ClusterSpec()
    g.add_argument(
        "--nodes", type=int, default=d.nodes, help="Thaw workers and Dask workers (default %(default)s)"
    )
    g.add_argument("--racks", type=int, default=d.racks)
    g.add_argument("--slots", type=int, default=d.slots, help="task slots per node (default %(default)s)")
    g.add_argument("--disk", default=d.disk, help="each node's disk bandwidth (default %(default)s)")
    g.add_argument("--penalty", type=float, default=d.penalty, help="throughput lost per extra stream")
    g.add_argument("--block-size", default=d.block_size)
    g.add_argument("--mem", default=d.mem_capacity, help="MEM tier per node (default %(default)s)")
    g.add_argument("--heartbeat-ms", type=int, default=d.heartbeat_ms)
    g.add_argument(
        "--migration-io",
        choices=["idle", "normal", "instant"],
        default=d.migration_io,
        help="migrations read disks only while no job does (idle, default), as one more stream (normal), "
        "or unpaced by the device model (instant; the configuration instant sets it for itself)",
    )
    g.add_argument(
        "--network",
        default=None,
        metavar="SPEC",
        help="run each node as an emulated host with a network (needs root; `thaw netlab up`'s SPEC, e.g. "
        "host=100MiB/s,rack=200MiB/s, or none for unshaped links); default: every node on loopback",
    )
    g.add_argument(
        "--nodes-per-host",
        type=int,
        default=d.nodes_per_host,
        help="with --network: nodes per machine (VMs on one host; default %(default)s)",
    )
    g.add_argument(
        "--out", type=Path, default=Path("bench-out"), help="results directory (default %(default)s)"
    )
    g.add_argument("--root", help="where the cluster's disks live (default: a temporary directory)")
    g.add_argument("--repeats", type=int, default=1, help="runs of every configuration (default %(default)s)")
    d = Delays()
    g.add_argument(
        "--locality-wait",
        type=float,
        default=d.memory,
        help="placed configurations: the wait before each step down a locality level, s (CAVA "
        "Algorithm 1; memory steps scale with the job's cached fraction; default %(default)s)",
    )
    g.add_argument(
        "--max-locality-wait",
        type=float,
        default=d.max_wait,
        help="placed configurations: no task waits longer for a better level, s (default %(default)s)",
    )
    g.add_argument(
        "--locality-wait-runs",
        type=float,
        default=d.task_runs,
        help="placed configurations: no step down waits longer than this many of the tasks' measured "
        "run times (default %(default)s)",
    )
    return common


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m thaw_bench", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="experiment", required=True)
    configs = _list(str, CONFIGS)  # type: ignore[arg-type]
    scenarios = _list(str, SCENARIOS)  # type: ignore[arg-type]

    s = sub.add_parser(
        "swim", parents=[_common()], help="SWIM trace replay (ignem Tables I-II, dyrs Table I)"
    )
    s.add_argument("--jobs", type=int, default=200)
    s.add_argument("--byte-scale", type=float, default=1 / 256)
    s.add_argument("--time-scale", type=float, default=1 / 800)
    s.add_argument("--write-scale", type=float, default=0.25, help="shuffle and output bytes, scaled further")
    s.add_argument(
        "--trace",
        default=DEFAULT_TRACE,
        help="a SWIM trace: a path, or a name shipped with the package (FB-2009_samples_24_times_1hr_0.tsv, "
        "the default, or FB-2010_samples_24_times_1hr_0.tsv)",
    )
    s.add_argument("--configs", type=configs, default=["cold", "ram", "ignem", "dyrs", "dyrs-place"])
    s.add_argument("--scenarios", type=scenarios, default=["homogeneous", "slow-node"])
    s.add_argument(
        "--startup",
        type=float,
        default=0.0,
        help="every job's start-up delay after submission, s (a Tez AM launch; default: none, queueing only)",
    )

    sc = sub.add_parser(
        "scheduled",
        parents=[_common()],
        help="on-disk vs in-memory vs scheduled caching on SWIM (the scheduled-caching poster)",
    )
    sc.add_argument("--quick", action="store_true", help="a small replay, one repeat, one start-up (CI)")
    sc.add_argument("--jobs", type=int, default=None, help="SWIM jobs (default 200; --quick: 24)")
    sc.add_argument(
        "--startup",
        type=float,
        default=scheduled_mod.STARTUP,
        help="every job's start-up, s: the lead time at which inputs are reachable (default %(default)s)",
    )
    sc.add_argument(
        "--short-startup",
        type=float,
        default=scheduled_mod.SHORT_STARTUP,
        help="a shorter start-up run beside it, where they are not; negative: none (default %(default)s)",
    )
    sc.add_argument("--byte-scale", type=float, default=None, help="default 1/256 (--quick: 1/1024)")
    sc.add_argument("--time-scale", type=float, default=1 / 800)
    sc.add_argument("--trace", default=DEFAULT_TRACE, help="a SWIM trace, as swim takes it")
    sc.set_defaults(repeats=3)

    for kind, sizes in (("sort", "256MiB"), ("wordcount", "64MiB,128MiB,256MiB")):
        k = sub.add_parser(kind, parents=[_common()], help=f"{kind} over input sizes and added lead-times")
        k.add_argument("--sizes", type=_sizes, default=_sizes(sizes))
        k.add_argument("--leads", type=_list(float), default=[0.0], help="added lead-times, s (e.g. 0,5)")
        k.add_argument("--configs", type=configs, default=["cold", "ram", "ignem", "dyrs"])
        k.add_argument("--scenario", choices=list(SCENARIOS), default="homogeneous")

    i = sub.add_parser(
        "interference", parents=[_common()], help="sort under DYRS, interference patterns (dyrs Table II)"
    )
    i.add_argument("--size", type=parse_size, default=parse_size("256MiB"))
    i.add_argument("--lead", type=float, default=5.0, help="added lead-time, s")
    i.add_argument(
        "--period-scale", type=float, default=0.2, help="the paper's 10 s / 20 s periods times this"
    )
    i.add_argument(
        "--scenarios", type=scenarios, default=["slow-node", "alt10", "alt20", "alt10x2", "alt20x2"]
    )
    i.add_argument("--config", choices=list(CONFIGS), default="dyrs")

    q = sub.add_parser("sql", parents=[_common()], help="TPC-H on DuckDB, migrate after planning")
    q.add_argument("--sf", type=float, default=0.1)
    q.add_argument("--queries", type=_list(int), default=None)
    q.add_argument("--configs", type=configs, default=["cold", "ram", "ignem", "dyrs"])
    q.add_argument("--scenario", choices=list(SCENARIOS), default="slow-node")
    q.add_argument(
        "--ahead", type=float, default=2.0, help="seconds the queue is busy before the first query"
    )

    pp = sub.add_parser(
        "pipeline",
        parents=[_common()],
        help="Tachyon, section 3's log pipeline by write type, and with a worker killed",
    )
    pp.add_argument("--parts", type=int, default=8, help="log partitions (one task per step each)")
    pp.add_argument("--part-size", type=parse_size, default=parse_size("16MiB"))
    pp.add_argument("--ufs", default="40MiB/s", help="each node's emulated under-store bandwidth")
    pp.add_argument("--pipeline-configs", type=_list(str), default=list(pipeline_mod.CONFIGS))

    lo = sub.add_parser(
        "locality",
        parents=[_common()],
        help="CAVA, Fig. 3: map tasks' total time with the input in the task node's memory, a co-resident "
        "node's, another host's, another rack's, or on the local disk (use with --network)",
    )
    lo.add_argument(
        "--kinds", type=_list(str, APPS), default=None, help="CAVA kinds (default: all of the registry)"
    )
    lo.add_argument(
        "--blocks", type=int, default=12, help="map tasks (blocks) per kind (default %(default)s)"
    )
    lo.add_argument(
        "--pagerank-iters", type=int, default=40, help="PageRank's iterations per block (default %(default)s)"
    )
    lo.set_defaults(repeats=3, block_size="2MiB")

    devices_mod.add_parser(sub, _common())
    harm_mod.add_parser(sub, _common())
    cava_cli.add_parser(sub)
    trace_analysis.add_parser(sub)

    pa = sub.add_parser(
        "paper",
        parents=[_common()],
        help="every experiment of the five papers, section by section, with an index (make bench-paper)",
    )
    paper_mod.add_arguments(pa)
    return p


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    if a.experiment == "cava":
        return cava_cli.main_args(a, argv)
    if a.experiment == "traces":
        return trace_analysis.main_args(a, argv)
    spec = ClusterSpec(
        nodes=a.nodes, racks=a.racks, slots=a.slots, disk=a.disk, penalty=a.penalty,
        block_size=a.block_size, mem_capacity=a.mem, heartbeat_ms=a.heartbeat_ms, migration_io=a.migration_io,
        network=a.network, nodes_per_host=a.nodes_per_host,
    )  # fmt: skip
    if a.network is not None and a.experiment != "paper":
        try:
            require_root()
        except NetLabError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    t0 = time.time()

    def say(msg: str) -> None:
        print(f"[{time.time() - t0:7.1f}s] {msg}", flush=True)

    delays = Delays(
        memory=a.locality_wait,
        disk=a.locality_wait,
        max_wait=a.max_locality_wait,
        task_runs=a.locality_wait_runs,
    )
    bench = ex.Bench(spec=spec, out=a.out, say=say, root=a.root, delays=delays)
    if a.experiment == "paper":
        return paper_mod.main_args(a, bench, argv)
    r = a.repeats
    if a.experiment == "swim":
        ex.swim(
            bench, a.jobs, a.byte_scale, a.time_scale, a.write_scale, a.configs, a.scenarios, a.trace,
            repeats=r, startup=a.startup,
        )  # fmt: skip
    elif a.experiment == "scheduled":
        scheduled_mod.scheduled(
            bench, a.quick, a.jobs, a.startup, a.short_startup if a.short_startup >= 0 else None,
            a.byte_scale, a.time_scale, trace=a.trace, repeats=1 if a.quick else r,
        )  # fmt: skip
    elif a.experiment in ("sort", "wordcount"):
        ex.single(bench, a.experiment, a.sizes, a.leads, a.configs, a.scenario, r)
    elif a.experiment == "interference":
        ex.interference(bench, a.size, a.lead, a.period_scale, a.scenarios, a.config, r)
    elif a.experiment == "sql":
        ex.sql(bench, a.sf, a.queries, a.configs, a.scenario, a.ahead, r)
    elif a.experiment == "devices":
        devices_mod.devices(
            bench, a.quick, nodes=a.nodes, slots=a.slots, blocks=a.blocks, repeats=r, ssd=a.ssd
        )  # fmt: skip
    elif a.experiment == "do-not-harm":
        harm_mod.do_not_harm(
            bench, a.quick, nodes=a.nodes, slots=a.slots, mem=a.mem, jobs=a.jobs, job_blocks=a.job_blocks,
            lead=a.lead, migration_io=a.migration_io, repeats=r,
        )  # fmt: skip
    elif a.experiment == "locality":
        loc.locality(bench, a.kinds, a.blocks, r, a.pagerank_iters)
    else:  # pipeline
        pipeline_mod.pipeline(
            a.out, parts=a.parts, part_size=a.part_size, nodes=a.nodes, slots=a.slots, ufs=a.ufs,
            repeats=r, configs=tuple(a.pipeline_configs), say=say, network=a.network,
        )  # fmt: skip
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
