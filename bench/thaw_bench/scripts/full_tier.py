"""Benchmark: a full memory tier, as a user meets it on ``thaw local`` (one
worker, no device model), through the ``thaw`` CLI.

1. ``reads``: MEM of ``--mem`` (default 100 MiB); four files of 40% of it each,
   each read twice with ``thaw fs cat > /dev/null`` (page cache of the
   under-store files dropped first). Says, per read, the seconds and whether the
   file was in memory before it, and at the end which files stayed in memory and
   what ``thaw status`` shows (held / evictable / evicted).
2. ``migrate``: MEM of ``--big`` (default 1 GiB) filled by cold reads of other
   files (nothing references them), then ``thaw --job j migrate BIG --wait`` of a
   cold file as large as MEM: how long the wait took, how many blocks went in
   and how many failed, and why (the migration buffer is 80% of MEM by
   default), then the same with ``--migration-buffer`` = MEM.

    python -m thaw_bench.scripts.full_tier --out bench-out/full-tier.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import thaw
from thaw.cluster import find_binary

MiB = 1 << 20


def write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    chunk = os.urandom(4 * MiB)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(chunk))
            f.write(chunk[:n])
            left -= n
    drop(path)


def drop(path: Path) -> None:
    """Drops the file's pages from the page cache: the next read is cold."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def run(bin_: str, master: str, *args: str, timeout: float = 600) -> tuple[float, str]:
    t = time.perf_counter()
    out = subprocess.run(
        [bin_, *args],
        env=dict(os.environ, THAW_MASTER=master),
        stdout=subprocess.PIPE if args[:2] != ("fs", "cat") else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,
        check=True,
    )
    return time.perf_counter() - t, out.stdout or ""


def in_memory(client: thaw.Client, path: str) -> int:
    blocks = client.stat(path, blocks=True)["blocks"]
    return sum(any(r["tier"] == "MEM" for r in b["replicas"]) for b in blocks)


def mem_tier(client: thaw.Client) -> dict[str, Any]:
    w = client.status()["workers"][0]
    stats = client.native().worker_stats(w["address"])
    return next(t for t in stats["tiers"] if t["tier"] == "MEM")


def settle() -> None:
    """Waits for the worker's next heartbeats (200 ms apart), so the master's
    view is current."""
    time.sleep(0.6)


def reads(bin_: str, mem: int) -> dict[str, Any]:
    size = mem * 4 // 10
    with tempfile.TemporaryDirectory() as tmp:
        ufs = Path(tmp, "ufs")
        for i in range(4):
            write(ufs / f"f{i}", size)
        with thaw.LocalCluster(ufs=ufs, mem_capacity=mem, heartbeat_ms=200) as cluster:
            client = thaw.Client(cluster.master)
            rows = []
            for i in range(4):
                for attempt in (1, 2):
                    before = in_memory(client, f"/f{i}")
                    secs, _ = run(bin_, cluster.master, "fs", "cat", f"/f{i}")
                    row = {"file": f"f{i}", "read": attempt, "seconds": round(secs, 3)}
                    rows.append(dict(row, in_memory_before=before))
                    settle()
            settle()
            stayed = {f"f{i}": in_memory(client, f"/f{i}") for i in range(4)}
            _, status = run(bin_, cluster.master, "status")
            return {"mem": mem, "file_size": size, "reads": rows, "in_memory_at_end": stayed,
                    "mem_tier": mem_tier(client), "status": status}  # fmt: skip


def migrate(bin_: str, mem: int, buffer: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        ufs = Path(tmp, "ufs")
        for i in range(2):
            write(ufs / "cached" / f"c{i}", mem // 2)
        write(ufs / "big", mem)
        with thaw.LocalCluster(
            ufs=ufs, mem_capacity=mem, heartbeat_ms=200, migration_buffer=buffer
        ) as cluster:
            client = thaw.Client(cluster.master)
            for i in range(2):
                run(bin_, cluster.master, "fs", "cat", f"/cached/c{i}")
            settle()
            full = mem_tier(client)
            secs, out = run(bin_, cluster.master, "--job", "j", "migrate", "/big", "--wait", "--json")
            info = json.loads(out)
            return {
                "mem": mem,
                "migration_buffer": buffer,
                "mem_before": {k: full[k] for k in ("used", "evictable", "held")},
                "wait_seconds": round(secs, 2),
                "blocks": info["blocks"],
                "in_memory": info["blocks_in_memory"],
                "failed": info["blocks_failed"],
                "failure": info.get("failure", ""),
                "mem_after": mem_tier(client),
            }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mem", type=int, default=100 * MiB, help="MEM of the reads case, bytes")
    ap.add_argument("--big", type=int, default=1 << 30, help="MEM (and file) of the migrate case, bytes")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    bin_ = find_binary()
    doc: dict[str, Any] = {"binary": bin_, "command": " ".join(sys.argv)}
    doc["reads"] = r = reads(bin_, args.mem)
    print(f"reads: MEM {args.mem // MiB} MiB, four files of {r['file_size'] // MiB} MiB, each read twice")
    for row in r["reads"]:
        print(f"  {row['file']} read {row['read']}: {row['seconds']:.3f} s, blocks in memory before: "
              f"{row['in_memory_before']}")  # fmt: skip
    t = r["mem_tier"]
    print(f"  in memory at the end: {r['in_memory_at_end']}; MEM used {t['used'] // MiB} MiB, "
          f"held {t['held'] // MiB} MiB, evictable {t['evictable'] // MiB} MiB, "
          f"evictions {t['evictions']}")  # fmt: skip
    doc["migrate"] = []
    for buffer in (None, args.big):
        m = migrate(bin_, args.big, buffer)
        doc["migrate"].append(m)
        label = "default buffer (80% of MEM)" if buffer is None else f"--migration-buffer {buffer // MiB} MiB"
        why = f" ({m['failure']})" if m["failed"] else ""
        print(f"migrate --wait of {args.big // MiB} MiB into {args.big // MiB} MiB of MEM full of "
              f"cached blocks, {label}: returned in {m['wait_seconds']} s; {m['in_memory']} of "
              f"{m['blocks']} blocks in memory, {m['failed']} failed{why}")  # fmt: skip
        a = m["mem_after"]
        print(f"  MEM after: used {a['used'] // MiB} MiB, held {a['held'] // MiB} MiB, evictable "
              f"{a['evictable'] // MiB} MiB, evictions {a['evictions']}")  # fmt: skip
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
