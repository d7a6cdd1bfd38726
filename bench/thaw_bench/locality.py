"""CAVA, Fig. 3 (section III-B) on emulated hosts: the map tasks' total time of
each application kind with its input in the memory of the task's own node
(VM memory locality), of another node on the same host (PM), of a node on
another host of the same rack (RM, the paper's), of a node in another rack
(off-rack, beyond the paper), and on the task node's own disk through the
device model (VM disk locality, the baseline), normalized as the paper does:
the improvement over disk locality (paper: 36.7, 29.8 and 26.6% on average
for VM, PM and RM memory locality).

The kinds are those of the CAVA registry (:data:`thaw_bench.cava.workloads.APPS`,
run by :func:`thaw_bench.cava.tasks.app_task`): a kind added there is measured
here too.

Set-up (``python -m thaw_bench locality --network SPEC``): five nodes, two per
host, hosts on two racks: ``node0``/``node1`` on host0 (rack0), ``node2``/``node3``
on host1 (rack1), ``node4`` on host2 (rack0). Every task runs on ``node0`` (a
Dask worker restriction, ``allow_other_workers=False``), two at a time (its two
slots, as the paper's VMs ran two map tasks). Each level reads a file of its
own whose one DISK replica is on the level's node (written by a client that
names that node's worker); the memory levels' files are migrated, held
(explicit eviction) and checked to be in that node's memory before any task
runs; the disk level's file is never in memory and is read without caching.
Each task's own read statistics say where its bytes came from, and a run whose
bytes did not come from the level's source is marked.

Deviations from the paper, each for a reason:

- The paper moves the NodeManager and DataNode into separate VMs for PM (and
  uses another machine for RM) with replication factor 8; here the level's
  node alone holds the input, which forces the same read path without
  8 copies on one machine's memory.
- VMs share no files, so tasks read through their worker's data service at
  every level (``ClusterSpec.short_circuit=False``): Thaw's short-circuit read
  of a block file of a worker on the same host would make PM memory locality
  VM memory locality on this emulation, which real VMs cannot do.
- Reads of the levels run one level at a time, not beside another cluster's
  job as the paper's RM run was; the shaped links give the network's cost.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import statistics
import time
from pathlib import Path
from typing import Any

from thaw.client import Client
from thaw.sizes import parse_size

from .cava.tasks import app_task
from .cava.workloads import APPS
from .cluster import ClusterSpec, EmulatedCluster
from .experiments import Bench, _document
from .netdask import start_dask_on
from .record import write_json
from .runner import stop_dask

#: The network the committed figure ran on: node links unshaped (VMs on one
#: machine talk at memory speed), each host's link 160 MiB/s (a 10 Gb/s NIC
#: shared by 8 VMs, CAVA's machines, is ~156 MB/s per VM) and each rack's
#: uplink 160 MiB/s (two hosts per rack: 2:1 oversubscription). Each node's
#: disk stays the harness's 12 MiB/s (one 7.2K HDD, ~120 MB/s, shared by a
#: machine's 8 VMs is ~15 MB/s each).
NETWORK = "host=160MiB/s,rack=160MiB/s"

TASK_NODE = "node0"


@dataclasses.dataclass(frozen=True)
class Level:
    name: str
    label: str
    #: The node holding the input (its one DISK replica and, if memory, its MEM copy).
    holder: str
    memory: bool
    #: The paper's average improvement over disk locality, %.
    paper: float | None = None


LEVELS: dict[str, Level] = {
    lv.name: lv
    for lv in (
        Level("vm-ml", "VM memory locality (the task node's own memory)", "node0", True, 36.7),
        Level("pm-ml", "PM memory locality (another node, same host)", "node1", True, 29.8),
        Level("rm-ml", "RM memory locality (another host, same rack)", "node4", True, 26.6),
        Level("off-rack-ml", "memory of a node in another rack", "node2", True),
        Level("vm-dl", "VM disk locality (the task node's disk)", "node0", False),
    )
}
BASELINE = "vm-dl"


def locality_spec(base: ClusterSpec) -> ClusterSpec:
    """The five nodes of the module doc on ``base``'s devices and network."""
    return dataclasses.replace(base, nodes=5, nodes_per_host=2, racks=2, short_circuit=False)


def _write_input(cluster: EmulatedCluster, path: str, data: bytes, holder: str, block_size: int) -> None:
    node = next(n for n in cluster.nodes if n.name == holder)
    writer = Client(cluster.master, host=node.host, rack=node.rack, worker=cluster.addresses[holder])
    with writer.open(path, "wb", write_type="replicated:1", block_size=block_size) as f:
        f.write(data)


def _replicas(client: Client, path: str) -> list[list[tuple[str, str]]]:
    return [
        sorted((r["tier"], r["address"]) for r in b["replicas"])
        for b in client.stat(path, blocks=True)["blocks"]
    ]


def _place(
    cluster: EmulatedCluster, kinds: list[str], blocks: int, block_size: int, say: Any
) -> dict[str, str]:
    """Writes each (kind, level) input on its holder, pins the memory levels'
    in their holder's memory, and checks every block is where it should be.
    Returns the paths."""
    c = cluster.client()
    paths: dict[str, str] = {}
    for kind in kinds:
        data = random.Random(f"locality-{kind}").randbytes(blocks * block_size)
        for lv in LEVELS.values():
            path = f"/locality/{kind}/{lv.name}"
            paths[f"{kind}/{lv.name}"] = path
            _write_input(cluster, path, data, lv.holder, block_size)
            if lv.memory:
                job = f"pin-{kind}-{lv.name}"
                c.migrate(path, job, eviction="explicit", lease=7200.0)
                c.wait_migrated(job, timeout=300)
    for key, path in paths.items():
        lv = LEVELS[key.split("/", 1)[1]]
        want = {("DISK", cluster.addresses[lv.holder])}
        if lv.memory:
            want.add(("MEM", cluster.addresses[lv.holder]))
        got = _replicas(c, path)
        bad = [i for i, reps in enumerate(got) if set(reps) != want]
        if bad:
            raise RuntimeError(f"{path}: blocks {bad} are at {got[bad[0]]}, not {sorted(want)}")
    say(f"placed {len(paths)} inputs of {blocks} blocks; every block where its level wants it")
    return paths


def _run_level(
    cluster: EmulatedCluster, dask: Any, worker: str, kind: str, level: Level, path: str, rep: int,
    blocks: int, block_size: int, iters: int,
) -> dict[str, Any]:  # fmt: skip
    """Every map task of ``kind`` over ``path``, on the task node; their times
    and where their bytes came from."""
    out = f"/locality-out/{kind}/{level.name}/r{rep}"
    job = f"locality-{kind}-{level.name}-r{rep}"
    output = out if APPS[kind].write_ratio > 0 else None
    t0 = time.time()
    futures = [
        dask.submit(
            app_task, cluster.master, job, kind, path, i * block_size, block_size, "none",
            f"{output}/part-{i:04d}" if output else None, iters,
            workers=[worker], allow_other_workers=False, pure=False, key=f"{job}-{i}",
        )
        for i in range(blocks)
    ]  # fmt: skip
    tasks = dask.gather(futures)
    wall = time.time() - t0
    with_mem = sum(t["bytes_mem"] for t in tasks)
    total_bytes = sum(t["bytes"] for t in tasks)
    from_source = with_mem if level.memory else total_bytes - with_mem
    if output:
        cluster.client().rm(out, recursive=True)
    return {
        "kind": kind,
        "level": level.name,
        "repeat": rep,
        "tasks": len(tasks),
        "map_total_s": round(sum(t["end"] - t["start"] for t in tasks), 4),
        "wall_s": round(wall, 4),
        "bytes": total_bytes,
        "bytes_mem": with_mem,
        "source_ok": from_source == total_bytes,
        "task_s": [round(t["end"] - t["start"], 4) for t in tasks],
        "cpu_s": round(sum(t["cpu_s"] for t in tasks), 4),
    }


def summarize(runs: list[dict[str, Any]], kinds: list[str]) -> dict[str, Any]:
    """Per kind and level: the map total's median and range over repeats, and
    the improvement over disk locality (per repeat, against that repeat's disk
    run), median and range; per level, the mean over kinds of the medians
    (the paper's "on average")."""
    by = {(r["kind"], r["level"], r["repeat"]): r for r in runs}
    table: dict[str, Any] = {}
    for kind in kinds:
        row: dict[str, Any] = {}
        for lv in LEVELS:
            totals = [r["map_total_s"] for (k, name, _), r in by.items() if k == kind and name == lv]
            gains = [
                100.0 * (1 - r["map_total_s"] / by[(kind, BASELINE, rep)]["map_total_s"])
                for (k, name, rep), r in by.items()
                if k == kind and name == lv and (kind, BASELINE, rep) in by
            ]
            if not totals:
                continue
            row[lv] = {
                "median_s": round(statistics.median(totals), 3),
                "min_s": round(min(totals), 3),
                "max_s": round(max(totals), 3),
                "gain_median": round(statistics.median(gains), 1) if gains else None,
                "gain_min": round(min(gains), 1) if gains else None,
                "gain_max": round(max(gains), 1) if gains else None,
            }
        table[kind] = row
    average = {}
    for lv in LEVELS:
        if lv == BASELINE:
            continue
        gains = [
            table[k][lv]["gain_median"] for k in kinds if table[k].get(lv, {}).get("gain_median") is not None
        ]
        if gains:
            average[lv] = {"mean_gain": round(statistics.fmean(gains), 1), "paper": LEVELS[lv].paper}
    return {"per_kind": table, "average": average}


def locality(
    bench: Bench,
    kinds: list[str] | None = None,
    blocks: int = 12,
    repeats: int = 3,
    iters: int = 40,
) -> Path:
    """Runs every kind at every level ``repeats`` times (kinds and levels in a
    rotated order each repeat), writes ``locality/results.json`` and
    ``report.md`` (the improvement and per-task tables), prints the tables;
    returns the report's path."""
    kinds = kinds or list(APPS)
    unknown = [k for k in kinds if k not in APPS]
    if unknown:
        raise ValueError(f"unknown kinds {', '.join(unknown)}: the registry has {', '.join(APPS)}")
    spec = locality_spec(bench.spec)
    block_size = parse_size(spec.block_size)
    results_dir = bench.out / "locality"
    doc = _document(
        "locality",
        "CAVA, Fig. 3: map tasks' total time by memory-locality level",
        dataclasses.replace(bench, spec=spec),
        {
            "kinds": kinds, "blocks": blocks, "repeats": repeats, "pagerank_iters": iters,
            "task_node": TASK_NODE, "levels": {k: dataclasses.asdict(v) for k, v in LEVELS.items()},
        },
    )  # fmt: skip
    cluster = EmulatedCluster(spec, root=bench.root)
    dask_cluster = dask = None
    try:
        cluster.start("dyrs")
        doc["cluster"] = cluster.info()
        paths = _place(cluster, kinds, blocks, block_size, bench.say)
        dask_cluster, dask = start_dask_on(cluster, spec.slots, nodes=[TASK_NODE])
        worker = next(
            a for a, w in dask.scheduler_info(n_workers=-1)["workers"].items() if w["name"] == TASK_NODE
        )
        names = list(LEVELS)
        for kind in kinds:
            # Not measured: the first tasks of a kind pay its imports and the
            # worker's first connections.
            _run_level(
                cluster, dask, worker, kind, LEVELS["vm-ml"], paths[f"{kind}/vm-ml"], -1, 2, block_size, iters
            )
        for rep in range(repeats):
            for kind in kinds[rep % len(kinds) :] + kinds[: rep % len(kinds)]:
                for name in names[rep % len(names) :] + names[: rep % len(names)]:
                    if name == BASELINE:
                        cluster.drop_pages()
                    r = _run_level(
                        cluster, dask, worker, kind, LEVELS[name], paths[f"{kind}/{name}"], rep, blocks,
                        block_size, iters,
                    )  # fmt: skip
                    bench.say(
                        f"r{rep} {kind:>10} {name:>12}: map total {r['map_total_s']:.3f}s "
                        f"(wall {r['wall_s']:.2f}s){'' if r['source_ok'] else ' NOT FROM ITS SOURCE'}"
                    )
                    doc["runs"].append(r)
    finally:
        stop_dask(dask_cluster, dask)
        cluster.close()
    doc["summary"] = summarize(doc["runs"], kinds)
    doc["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    results_dir.mkdir(parents=True, exist_ok=True)
    write_json(results_dir / "results.json", doc)
    tables = [*table_lines(doc), "", *table_lines(doc, task_rows(doc))]
    report = results_dir / "report.md"
    head = f"# {doc['title']}\n\n`{doc['command']}` · {doc['started']}\n\n"
    report.write_text(head + "\n".join(tables) + "\n")
    for line in tables:
        bench.say(line)
    return report


SHORT = {
    "vm-ml": "VM ML", "pm-ml": "PM ML", "rm-ml": "RM ML", "off-rack-ml": "off-rack memory", "vm-dl": "VM DL",
}  # fmt: skip


def table_rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    """The summary as table rows (BENCHMARKS.md's and the results file's):
    VM DL's map total per kind, then each memory level's improvement over it
    per kind (median of the repeats, their range in brackets), the mean over
    kinds and the paper's."""
    s = doc["summary"]
    kinds = list(s["per_kind"])
    base = {"level": "VM DL: map total, s"}
    for k in kinds:
        c = s["per_kind"][k].get(BASELINE)
        base[k] = f"{c['median_s']:.2f} ({c['min_s']:.2f}-{c['max_s']:.2f})" if c else "-"
    rows = [{**base, "mean of kinds": "", "paper (mean of 7 kinds)": ""}]
    for lv in LEVELS:
        if lv == BASELINE:
            continue
        row = {"level": f"{SHORT[lv]}: improvement over VM DL"}
        for k in kinds:
            c = s["per_kind"][k].get(lv)
            row[k] = f"{c['gain_median']:.1f}% ({c['gain_min']:.1f} to {c['gain_max']:.1f})" if c else "-"
        mean = s["average"].get(lv, {}).get("mean_gain")
        row["mean of kinds"] = f"{mean:.1f}%" if mean is not None else "-"
        row["paper (mean of 7 kinds)"] = f"{LEVELS[lv].paper}%" if LEVELS[lv].paper else "-"
        rows.append(row)
    return rows


def task_rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    """Per level and kind, the median map task's time beside its own CPU time
    (the task thread's, medians over the repeats): what a level's read adds,
    and how much of a task is waiting for a core."""
    rows = []
    for lv in LEVELS:
        row = {"level": SHORT[lv]}
        for kind in doc["params"]["kinds"]:
            runs = [r for r in doc["runs"] if r["kind"] == kind and r["level"] == lv]
            if not runs:
                continue
            task = statistics.median(statistics.median(r["task_s"]) for r in runs)
            cpu = statistics.median(r["cpu_s"] / max(1, r["tasks"]) for r in runs)
            row[f"{kind}: task / CPU, s"] = f"{task:.3f} / {cpu:.3f}"
        rows.append(row)
    return rows


def table_lines(doc: dict[str, Any], rows: list[dict[str, str]] | None = None) -> list[str]:
    """:func:`table_rows` (or ``rows``) as a Markdown table."""
    rows = rows or table_rows(doc)
    head = list(rows[0])
    out = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    out += ["| " + " | ".join(r[h] for h in head) + " |" for r in rows]
    return out
