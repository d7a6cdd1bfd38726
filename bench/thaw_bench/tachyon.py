"""Tachyon's experiments in one call, for ``python -m thaw_bench paper``: the
paper's comparisons with the configurations BENCHMARKS.md's "Writes and lineage
(Tachyon)" tables use.

- Fig. 1, write throughput by write type (``thaw-bench writes``: tmpfs,
  must-cache, async-through, cache-through, through, replicated:3; on this
  machine's devices and behind an HDD-like device model);
- section 2.7, the checkpoint order (``thaw-bench checkpoint-order``:
  newest-first against creation order);
- section 3 and Fig. 2, the log pipeline (:mod:`thaw_bench.pipeline`: through,
  must-cache, cache-through, async-through and async-through with a worker
  killed), at 40 MiB/s and at 12 MiB/s to the under-store;
- section 4, who gets the slots while a lost file is rebuilt
  (:mod:`thaw_bench.scripts.recompute_priority`).

The first two are Rust benchmarks: the ``thaw-bench`` binary of a release
build (``cargo build --release -p thaw-bench``; ``THAW_BENCH_BIN`` names
another).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from thaw.errors import ThawError

from . import pipeline as pipeline_mod
from .scripts import recompute_priority

#: The repository's root (this file is bench/thaw_bench/tachyon.py).
ROOT = Path(__file__).resolve().parents[2]

#: Each node's link to the under-store in the pipeline runs: the harness's
#: 40 MiB/s and its standard 12 MiB/s disk.
PIPELINE_UFS = ("40MiB/s", "12MiB/s")


def thaw_bench_binary() -> Path:
    """The ``thaw-bench`` binary: ``THAW_BENCH_BIN``, else the release build."""
    named = os.environ.get("THAW_BENCH_BIN")
    path = Path(named) if named else ROOT / "target" / "release" / "thaw-bench"
    if not path.is_file():
        raise ThawError(
            f"no thaw-bench binary at {path}: build it (cargo build --release -p thaw-bench) "
            "or set THAW_BENCH_BIN"
        )
    return path


def paper(out: Path, say: Callable[[str], None] = print, *, quick: bool = False) -> list[Path]:
    """Runs every Tachyon experiment into ``out``; returns the results files.
    ``quick``: one repeat each and smaller sizes (a smoke test, no figures)."""
    out.mkdir(parents=True, exist_ok=True)
    binary = thaw_bench_binary()
    repeats = 1 if quick else 5
    paths: list[Path] = []
    for bench, extra in (("writes", ["--size", "16MiB" if quick else "1GiB"]), ("checkpoint-order", [])):
        path = out / f"tachyon-{bench}.json"
        say(f"tachyon: thaw-bench {bench}")
        cmd = [str(binary), bench, *extra, "--repeats", str(repeats), "--out", str(path)]
        subprocess.run(cmd, check=True, cwd=ROOT)
        paths.append(path)
    for ufs in PIPELINE_UFS[:1] if quick else PIPELINE_UFS:
        say(f"tachyon: the log pipeline, under-store at {ufs}")
        paths.append(
            pipeline_mod.pipeline(
                out / f"tachyon-pipeline-{ufs.split('MiB')[0]}",
                parts=8,
                part_size=(4 if quick else 32) << 20,
                nodes=4,
                slots=2,
                ufs=ufs,
                repeats=1 if quick else 3,
                say=say,
            )
        )
    say("tachyon: who gets the slots while a lost file is rebuilt")
    paths.append(recompute_priority.run(1 if quick else 3, out / "tachyon-recompute-priority.json"))
    return paths
