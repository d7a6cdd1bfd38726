"""The task functions Dask workers run for the harness's jobs.

Each task reads through Thaw with its job's id, from the client position of the
node its Dask worker sits on (so a block in that node's memory is read by
short-circuit, one in another node's memory over loopback, as over a network),
and appends one JSON line about itself to the run's task log: the harness's
accounting (every input block read once per job, bytes read equal input sizes)
and its map-task durations come from these lines.
"""

from __future__ import annotations

import json
import os
import threading
import time
import zlib
from collections import Counter
from typing import Any

import numpy as np

from thaw.client import Client

_log_lock = threading.Lock()
_FILLER = bytes(range(256)) * 4096  # 1 MiB of synthetic shuffle/output bytes


def _node() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return os.environ.get("THAW_HOST", "local")


def _log(log_dir: str, record: dict[str, Any]) -> None:
    line = json.dumps(record) + "\n"
    with _log_lock, open(os.path.join(log_dir, f"tasks-{os.getpid()}.jsonl"), "a") as f:
        f.write(line)


def _synthetic(n: int) -> bytes:
    if n <= len(_FILLER):
        return _FILLER[:n]
    return (_FILLER * (n // len(_FILLER) + 1))[:n]


def _source(stats: dict[str, int]) -> str:
    """Where a read's bytes came from: mem (this node's memory), mem-remote
    (another node's), disk (a DISK tier), ufs (the under-store)."""
    if stats.get("remote_disk", 0):
        return "disk"
    if stats.get("under_store", 0):
        return "ufs"
    if stats.get("remote_mem", 0):
        return "mem-remote"
    return "mem"


def _split(n: int, parts: int) -> list[int]:
    base, extra = divmod(n, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def map_task(
    master: str,
    job: str,
    kind: str,
    path: str,
    offset: int,
    length: int,
    block: int,
    shuffle_bytes: int,
    reducers: int,
    output: tuple[str, int] | None,
    log_dir: str,
) -> list[Any] | None:
    """Reads one input block and does the job's map work. Returns one shuffle
    part per reducer (the part itself with one reducer; None for a map-only job,
    which writes ``output`` itself)."""
    node = _node()
    start = time.time()
    client = Client(master, job, read_cache="none")
    with client.open(path) as f:
        f.seek(offset)
        data = f.read(length)
        stats = f.stats()
    read_end = time.time()
    parts: list[Any] | None = None
    if kind == "sort":
        keys = np.frombuffer(data[: len(data) // 8 * 8], dtype=np.uint64)
        bounds = np.linspace(0.0, float(2**64), reducers + 1)[1:-1]
        which = np.searchsorted(bounds, keys.astype(np.float64), side="right")
        parts = [keys[which == r] for r in range(reducers)]
    elif kind == "wordcount":
        counts = Counter(data.split())
        parts = [Counter() for _ in range(reducers)]
        for word, n in counts.items():
            parts[zlib.crc32(word) % reducers][word] = n
    else:
        zlib.crc32(data)
        if reducers:
            parts = [_synthetic(n) for n in _split(shuffle_bytes, reducers)]
    if parts is not None and reducers == 1:
        # One reducer takes the whole map output: no per-reducer split task.
        parts = parts[0]
    if output is not None and output[1] > 0:
        Client(master, job).write_bytes(output[0], _synthetic(output[1]), write_type="through")
    end = time.time()
    _log(
        log_dir,
        {
            "job": job, "kind": "map", "node": node, "path": path, "offset": offset, "block": block,
            "bytes": len(data), "expected": length, "source": _source(stats), "stats": stats,
            "start": start, "read_end": read_end, "end": end,
        },
    )  # fmt: skip
    return parts


def part(parts: list[Any] | None, r: int) -> Any:
    """Reducer ``r``'s share of one map's output (runs where the map ran)."""
    assert parts is not None
    return parts[r]


def reduce_task(
    master: str, job: str, kind: str, r: int, output: tuple[str, int], log_dir: str, *parts: Any
) -> int:
    """Merges the shuffle parts of reducer ``r`` and writes its output file."""
    node = _node()
    start = time.time()
    if kind == "sort":
        keys = np.sort(np.concatenate(parts)) if parts else np.empty(0, np.uint64)
        data = keys.tobytes()
    elif kind == "wordcount":
        total: Counter[bytes] = Counter()
        for p in parts:
            total.update(p)
        data = b"".join(w + b"\t" + str(n).encode() + b"\n" for w, n in sorted(total.items()))
    else:
        data = _synthetic(output[1]) if output[1] else b""
    shuffled = sum(p.nbytes if isinstance(p, np.ndarray) else len(p) for p in parts)
    if data:
        Client(master, job).write_bytes(output[0], data, write_type="through")
    end = time.time()
    _log(
        log_dir,
        {"job": job, "kind": "reduce", "node": node, "reducer": r, "shuffled": shuffled, "written": len(data),
         "start": start, "end": end},
    )  # fmt: skip
    return len(data)
