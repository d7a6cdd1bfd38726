"""A log-processing pipeline like Tachyon, section 3's (Conviva's: data cleaning, then
metric analysis), end to end on Dask, by how its steps write their outputs.

Generated logs (one file per partition) are first written into Thaw
(``cache-through``: in memory and in the under-store, as Tachyon, section 3 starts
"as soon as all data had been written to the system"). Then three steps, each
a Dask task per partition reading the step before's output, each task a
:func:`thaw.lineage.step` (its lineage recorded before it writes):

- grep: the WARN and ERROR lines of a log (about half of it, as Tachyon, section 3's
  500 GB of output from 1 TB of input);
- count: lines per (service, level) of each grep output;
- wordcount: word counts of each grep output, then one total over all (wide).

Configurations, side by side in one invocation, the order rotating per repeat:

- ``through``: outputs written synchronously to the under-store only (the
  papers' HDFS without a cache; the next step reads them back from it);
- ``must-cache``: to memory only, never persisted (the bound: no under-store
  write at all, and nothing to recover from);
- ``cache-through``: synchronously to the under-store and to memory (HDFS with
  the OS buffer cache, Tachyon, section 3's baseline);
- ``async-through``: to memory, persisted in the background;
- ``async-through-kill``: the same, with one node's Thaw worker killed (kill -9)
  once the grep step is done: its grep outputs not yet checkpointed are lost and
  rebuilt from lineage (the master proactive, ``--recompute-executor
  external``) by the running Dask cluster's workers
  (:class:`thaw.dask.recompute.RecomputeExecutor`: each rerun a Dask task that
  runs the step in the worker's interpreter), while the count and wordcount
  tasks that need them wait (giving their Dask slots back). The rerun goes
  at Dask priority +1, ahead of the pipeline's queued tasks: the pipeline is
  the one job, and it waits for the rerun (Tachyon, section 4: a
  recomputation ranks above the jobs waiting for it; the case of jobs that do
  not wait is ``thaw_bench.scripts.recompute_priority``'s);
- ``async-through-kill-process``: the same kill, the lost outputs rebuilt by
  the master's local executor (a new ``python -m thaw rerun`` process on the
  master's host, cold: it imports the step's module), as before the Dask
  executor was used here.

Dead-worker detection is the master's probe (a worker silent for 1.5
heartbeat intervals whose data port refuses is dead: 0.3 s here), not the
2 s heartbeat timeout (``crates/thaw-master/src/liveness.rs``).

The under-store is an emulated device per node (``--ufs``, default 40 MiB/s: a
disk shared by three HDFS replicas' writes); the machine's own disk and page
cache would hide it. Every configuration's final outputs are compared, byte for
byte, with the first's. Each run records its timeline (seconds from its start):
every task's node, start, end and seconds spent reading (a wait for a lost
input's rebuild included); with a kill, when the kill came and when the master
declared the worker dead, the victim's grep outputs, each persisted before
the kill or lost and rebuilt (from when to when), and each rerun's Dask task
(from when to when, where it ran).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from thaw import lineage
from thaw.client import Client
from thaw.dask.recompute import RecomputeExecutor

from .cluster import ClusterSpec, EmulatedCluster
from .netdask import start_dask_on

CONFIGS = (
    "through",
    "must-cache",
    "cache-through",
    "async-through",
    "async-through-kill",
    "async-through-kill-process",
)
KILLS = ("async-through-kill", "async-through-kill-process")
#: Dask priority of a rerun in the killed pipeline (see the module doc).
RERUN_PRIORITY = 1
LEVELS = ("INFO",) * 10 + ("WARN",) * 6 + ("ERROR",) * 4
SERVICES = [f"svc{i}" for i in range(8)]
WORDS = [f"w{i:03d}" for i in range(400)]


def generate_log(seed: int, size: int) -> bytes:
    """A deterministic log partition of about ``size`` bytes."""
    rng = random.Random(seed)
    out: list[str] = []
    n = 0
    t = 1_700_000_000 + seed * 100_000
    while n < size:
        t += rng.randrange(1, 50)
        words = " ".join(rng.choices(WORDS, k=rng.randrange(6, 14)))
        line = f"{t} {rng.choice(SERVICES)} {rng.choice(LEVELS)} user{rng.randrange(10_000)} {words}\n"
        out.append(line)
        n += len(line)
    return "".join(out).encode()


def _write(c: Client, path: str, data: bytes, write_type: str) -> None:
    with c.open(path, "wb", write_type=write_type) as f:
        f.write(data)


def _read(c: Client, path: str, took: list[float]) -> bytes:
    """``c.cat(path)``, its seconds added to ``took`` (a lost input's wait included)."""
    t = time.monotonic()
    data = c.cat(path)
    took.append(time.monotonic() - t)
    return data


def grep_step(inputs: list[str], outputs: list[str], *, write_type: str) -> float:
    """Keeps a log's WARN and ERROR lines. Each step returns its seconds of reading."""
    c, took = Client(), []
    data = _read(c, inputs[0], took)
    lines = [ln for ln in data.splitlines(keepends=True) if b" WARN " in ln or b" ERROR " in ln]
    _write(c, outputs[0], b"".join(lines), write_type)
    return sum(took)


def count_step(inputs: list[str], outputs: list[str], *, write_type: str) -> float:
    """Lines per (service, level) of a grep output."""
    c, took = Client(), []
    counts = Counter(tuple(ln.split(b" ", 3)[1:3]) for ln in _read(c, inputs[0], took).splitlines())
    text = "".join(f"{s.decode()} {lv.decode()} {n}\n" for (s, lv), n in sorted(counts.items()))
    _write(c, outputs[0], text.encode(), write_type)
    return sum(took)


def wordcount_step(inputs: list[str], outputs: list[str], *, write_type: str) -> float:
    """Word counts of a grep output's messages (a partial count)."""
    c, took = Client(), []
    counts: Counter[bytes] = Counter()
    for ln in _read(c, inputs[0], took).splitlines():
        counts.update(ln.split(b" ")[4:])
    _write(
        c, outputs[0], "".join(f"{w.decode()} {n}\n" for w, n in sorted(counts.items())).encode(), write_type
    )
    return sum(took)


def total_step(inputs: list[str], outputs: list[str], *, write_type: str) -> float:
    """The sum of the partial word counts (wide: every input)."""
    c, took = Client(), []
    total: Counter[str] = Counter()
    for p in inputs:
        for ln in _read(c, p, took).decode().splitlines():
            w, n = ln.split()
            total[w] += int(n)
    _write(c, outputs[0], "".join(f"{w} {n}\n" for w, n in sorted(total.items())).encode(), write_type)
    return sum(took)


def run_task(
    master: str,
    fn: Callable[..., int],
    inputs: list[str],
    outputs: list[str],
    kind: str,
    write_type: str,
    *_: Any,
) -> dict[str, Any]:
    """One Dask task: records the step's lineage, then runs it. The trailing
    arguments are the futures it depends on. Returns its output, its node, and
    its start, end (wall clock) and seconds of reading."""
    start = time.time()
    step = lineage.step(inputs=inputs, outputs=outputs, kind=kind, client=Client(master))
    read_s = step(fn)(write_type=write_type)
    node = os.environ.get("THAW_HOST", "")
    return {"output": outputs[0], "node": node, "start": start, "end": time.time(), "read_s": read_s}


def run_pipeline(
    cluster: EmulatedCluster,
    dask: Any,
    config: str,
    root: str,
    parts: int,
    victim: str,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Runs the three steps under ``config``; returns its timings and outcome."""
    from distributed import wait

    write_type = "async-through" if config.startswith("async") else config
    m = cluster.master
    logs = [f"/pipeline/logs/part-{i}" for i in range(parts)]
    grep_paths = [f"{root}/grep/part-{i}" for i in range(parts)]
    t0, wall0 = time.monotonic(), time.time()
    timeline: dict[str, Any] = {}

    def at() -> float:
        return round(time.monotonic() - t0, 3)

    def task(fn: Callable[..., float], inputs: list[str], output: str, kind: str, *after: Any) -> Any:
        return dask.submit(run_task, m, fn, inputs, [output], kind, write_type, *after, pure=False)

    grep = [task(grep_step, [logs[i]], grep_paths[i], "narrow") for i in range(parts)]
    wait(grep)
    t_grep = time.monotonic() - t0
    lost_at_kill = 0
    c = cluster.client()
    executor = None
    if config in KILLS:
        if config == "async-through-kill":
            executor = RecomputeExecutor(dask.scheduler.address, m, priority=RERUN_PRIORITY, poll=0.05)
            executor.start()
        timeline["kill"] = at()
        cluster.kill_node(victim)
        deadline = time.monotonic() + 60
        while not any(w["host"] == victim and not w["alive"] for w in c.status()["workers"]):
            assert time.monotonic() < deadline, f"{victim} was not declared dead"
            time.sleep(0.02)
        timeline["declared_dead"] = at()
        lost_at_kill = c.status()["persistence"]["lost"]
        say(f"  killed {victim}'s Thaw worker after grep ({t_grep:.1f} s): {lost_at_kill} files lost")

    counts = [
        task(count_step, [grep_paths[i]], f"{root}/count/part-{i}", "narrow", g) for i, g in enumerate(grep)
    ]
    wcs = [
        task(wordcount_step, [grep_paths[i]], f"{root}/wc/part-{i}", "narrow", g) for i, g in enumerate(grep)
    ]
    wc_paths = [f"{root}/wc/part-{i}" for i in range(parts)]
    total = task(total_step, wc_paths, f"{root}/wc/total", "wide", *wcs)
    wait([*counts, total])
    took = time.monotonic() - t0
    if executor is not None:
        executor.stop()
        timeline["reruns"] = [
            {
                "lineage": r["lineage_id"],
                "start": r["start"] and round(r["start"] - wall0, 3),
                "end": r["end"] and round(r["end"] - wall0, 3),
                "where": r.get("where", ""),
                "error": r["error"],
            }
            for r in executor.ran
        ]
    timeline["tasks"] = [
        {
            "output": r["output"].removeprefix(root + "/"),
            "node": r["node"],
            "start": round(r["start"] - wall0, 3),
            "end": round(r["end"] - wall0, 3),
            "read_s": round(r["read_s"], 3),
        }
        for r in (f.result() for f in [*grep, *counts, *wcs, total])
    ]
    if config in KILLS:
        # The victim's grep outputs: each persisted before the kill, or lost and rebuilt (when).
        for p, g in zip(grep_paths, grep, strict=True):
            info = c.stat(p)
            if g.result()["node"] != victim and not info["rebuilds"]:
                continue
            entry: dict[str, Any] = {"path": p.removeprefix(root + "/"), "rebuilt": bool(info["rebuilds"])}
            if info["rebuilds"]:
                end = info["last_rebuild_ms"] / 1000 - wall0
                entry["start"] = round(end - info["last_rebuild_took_ms"] / 1000, 3)
                entry["end"] = round(end, 3)
            timeline.setdefault("victim_outputs", []).append(entry)
    digest = hashlib.sha256()
    for p in [*(f"{root}/count/part-{i}" for i in range(parts)), f"{root}/wc/total"]:
        digest.update(c.cat(p))
    p = c.status()["persistence"]
    return {
        "config": config,
        "seconds": round(took, 3),
        "grep_seconds": round(t_grep, 3),
        "lost_at_kill": lost_at_kill,
        "lost_at_end": p["lost"],
        "recomputations_done": p["recomputations_done"],
        "recomputations_failed": p["recomputations_failed"],
        "result_sha256": digest.hexdigest(),
        "timeline": timeline,
    }


def pipeline(
    out: Path,
    *,
    parts: int = 8,
    part_size: int = 16 << 20,
    nodes: int = 4,
    slots: int = 2,
    ufs: str = "40MiB/s",
    repeats: int = 3,
    configs: tuple[str, ...] = CONFIGS,
    say: Callable[[str], None] = print,
    network: str | None = None,
) -> Path:
    """Runs every configuration ``repeats`` times; writes ``pipeline.json``.
    ``network``: on emulated hosts (``ClusterSpec.network``), else loopback."""
    spec = ClusterSpec(
        nodes=nodes, slots=slots, disk="200MiB/s", block_size="4MiB", mem_capacity="1GiB", ufs=ufs,
        heartbeat_ms=200, worker_timeout_ms=2000, network=network,
    )  # fmt: skip
    cluster = EmulatedCluster(spec)
    dask_cluster = dask = None
    runs: list[dict[str, Any]] = []
    data = [generate_log(i, part_size) for i in range(parts)]
    try:
        cluster.start("none")
        dask_cluster, dask = start_dask_on(cluster, slots)
        for r in range(repeats):
            order = list(configs[r % len(configs) :]) + list(configs[: r % len(configs)])
            for config in order:
                # Reruns by the Dask cluster's workers, or by the master's local executor.
                external = ["--recompute-executor", "external"] if config == "async-through-kill" else []
                cluster.spec.master_args = external
                cluster.start("none")  # fresh memory; the journal and the under-store stay
                c = Client(cluster.master, read_cache="mem")
                if r == 0 and config == order[0]:
                    for i, d in enumerate(data):
                        c.write_bytes(
                            f"/pipeline/logs/part-{i}", d, write_type="cache-through", overwrite=True
                        )
                # Every run starts with the logs in memory (Tachyon, section 3).
                for i in range(parts):
                    c.cat(f"/pipeline/logs/part-{i}")
                root = f"/pipeline/run{r}-{config}"
                run = run_pipeline(cluster, dask, config, root, parts, cluster.nodes[0].name, say)
                run["repeat"] = r
                runs.append(run)
                say(f"  {config}: {run['seconds']:.1f} s (grep {run['grep_seconds']:.1f} s)")
                c.rm(root, recursive=True)
    finally:
        if dask is not None:
            dask.close()
        if dask_cluster is not None:
            dask_cluster.close()
        cluster.close()
    summary = summarize(runs, configs)
    doc = {
        "experiment": "pipeline",
        "params": {
            "parts": parts,
            "part_size": part_size,
            "nodes": nodes,
            "slots": slots,
            "ufs": ufs,
            "repeats": repeats,
            "block_size": spec.block_size,
        },
        "runs": runs,
        "summary": summary,
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out / "pipeline.json"
    path.write_text(json.dumps(doc, indent=2))
    say(json.dumps(summary, indent=2))
    return path


def summarize(runs: list[dict[str, Any]], configs: tuple[str, ...]) -> dict[str, Any]:
    import statistics

    med = {c: statistics.median(r["seconds"] for r in runs if r["config"] == c) for c in configs}
    digests = {r["result_sha256"] for r in runs}
    out: dict[str, Any] = {"median_seconds": med, "same_results": len(digests) == 1}
    if "through" in med:
        out["speedup_over_through"] = {c: round(med["through"] / v, 2) for c, v in med.items()}
    if "cache-through" in med:
        out["speedup_over_cache_through"] = {c: round(med["cache-through"] / v, 2) for c, v in med.items()}
    return out
