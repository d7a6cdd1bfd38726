"""``python -m thaw_bench cava``: its options (a preset, the experiments, the
policies, the scale's overrides) and the run they start."""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from thaw.sizes import parse_size

from ..netlab import NetLabError, require_root
from ..results import command_line
from .experiments import EXPERIMENTS, cava
from .policies import PAPER_POLICIES, POLICIES
from .report import print_summary
from .workloads import PRESETS, SHAPES, Scale


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``cava`` subcommand of ``python -m thaw_bench``."""
    c = sub.add_parser(
        "cava",
        help="CAVA, section V: No-Cache, LRU, CA-Only, Static-CA, CAVA (and LFU) over W1-W6-like "
        "workloads with memory-locality placement, a trace replay and per-application affinity",
    )
    size = c.add_mutually_exclusive_group()
    size.add_argument(
        "--quick", action="store_true", help="W1, W3, W5; 2 MiB blocks, 12 apps per workload (a few minutes)"
    )
    size.add_argument("--tiny", action="store_true", help="test-sized: W1 and W5, 6 apps, 1 MiB blocks")
    c.add_argument("--out", type=Path, default=Path("bench-out/cava"), help="default %(default)s")
    c.add_argument("--experiments", default=",".join(EXPERIMENTS), help="some of " + ", ".join(EXPERIMENTS))
    c.add_argument(
        "--policies",
        default=",".join(PAPER_POLICIES),
        help="some of " + ", ".join(POLICIES) + " (default: the paper's five)",
    )
    c.add_argument("--workloads", default=None, help="some of W1..W6 (default: the preset's)")
    c.add_argument("--repeats", type=int, default=1, help="runs of every (workload, policy); medians")
    c.add_argument("--affinity-repeats", type=int, default=None, help="default: 3 (1 with --quick, --tiny)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument(
        "--static-affinity",
        choices=["paper", "measured"],
        default="paper",
        help="Static-CA's declared affinities: CAVA's, or this run's affinity experiment's",
    )
    c.add_argument(
        "--timeline", default="W5", help="the workload sampled for the figure (default %(default)s)"
    )
    c.add_argument("--apps", type=int, default=None, help="applications per workload")
    c.add_argument("--concurrency", type=int, default=None, help="applications running at once")
    c.add_argument("--workers", type=int, default=None, help="emulated nodes (a Thaw and a Dask worker each)")
    c.add_argument("--racks", type=int, default=None, help="racks the nodes are spread over")
    c.add_argument(
        "--no-placement",
        action="store_true",
        help="Dask places the tasks (default: the Thaw plugin, by memory locality)",
    )
    c.add_argument("--mem-blocks", type=int, default=None, help="MEM tier per worker, in blocks")
    c.add_argument("--block-size", default=None, help="e.g. 4MiB")
    c.add_argument(
        "--ufs", default=None, help="the under-store's emulated bandwidth per worker, e.g. 40MiB/s"
    )
    c.add_argument("--penalty", type=float, default=None)
    c.add_argument("--slots", type=int, default=None, help="Dask worker threads per node (default 1)")
    c.add_argument("--trace-jobs", type=int, default=None)
    c.add_argument(
        "--startup",
        type=float,
        default=None,
        help="each application's launch, in block read times of the under-store (default 6)",
    )
    c.add_argument("--pagerank-iters", type=int, default=None, help="PageRank's iterations per block")
    c.add_argument("--cache-window", default=None, help="LocalCluster(cache_window=...), default 10m")
    c.add_argument("--trace", default="FB-2009_samples_24_times_1hr_0.tsv")
    c.add_argument("--root", default=None, help="where the under-store directory goes (default: /tmp)")
    c.add_argument(
        "--network",
        default=None,
        metavar="SPEC",
        help="each worker an emulated host with a network (needs root; `thaw netlab up`'s SPEC, e.g. "
        "host=160MiB/s, or none); default: loopback",
    )
    return c


def _items(s: str, known: Any, what: str) -> list[str]:
    items = [x.strip() for x in s.split(",") if x.strip()]
    bad = [x for x in items if x not in known]
    if bad:
        raise SystemExit(f"unknown {what} {', '.join(bad)}: expected some of {', '.join(known)}")
    return items


def scale_from_args(a: argparse.Namespace) -> Scale:
    """The preset the options name, with the overrides they give."""
    scale = replace(PRESETS["tiny" if a.tiny else "quick" if a.quick else "full"])
    overrides = {
        "apps": a.apps, "concurrency": a.concurrency, "workers": a.workers, "mem_blocks": a.mem_blocks,
        "ufs": a.ufs, "penalty": a.penalty, "slots": a.slots, "trace_jobs": a.trace_jobs, "racks": a.racks,
        "startup": a.startup, "pagerank_iters": a.pagerank_iters, "cache_window": a.cache_window,
        "network": a.network,
    }  # fmt: skip
    scale = replace(scale, **{k: v for k, v in overrides.items() if v is not None})
    if a.no_placement:
        scale = replace(scale, placement=False)
    if a.block_size:
        scale = replace(scale, block_size=parse_size(a.block_size))
    if a.workloads:
        scale = replace(scale, workloads=tuple(_items(a.workloads, SHAPES, "workload")))
    return scale


def main_args(a: argparse.Namespace, argv: list[str] | None = None) -> int:
    """Runs ``python -m thaw_bench cava`` as parsed into ``a`` (``argv``: the
    arguments, for the command recorded in the results; default sys.argv)."""
    scale = scale_from_args(a)
    if scale.network is not None:
        try:
            require_root()
        except NetLabError as e:
            raise SystemExit(f"error: {e}") from None
    command = command_line(argv)
    t0 = time.time()

    def say(msg: str) -> None:
        print(f"[{time.time() - t0:7.1f}s] {msg}", flush=True)

    doc = cava(
        a.out,
        scale,
        experiments=tuple(_items(a.experiments, EXPERIMENTS, "experiment")),
        policies=_items(a.policies, POLICIES, "policy"),
        repeats=a.repeats,
        affinity_repeats=a.affinity_repeats or (1 if a.tiny or a.quick else 3),
        seed=a.seed,
        static_affinity=a.static_affinity,
        timeline_workload=a.timeline,
        trace=a.trace,
        root=a.root,
        say=say,
        command=command,
    )
    print_summary(doc)
    return 0
