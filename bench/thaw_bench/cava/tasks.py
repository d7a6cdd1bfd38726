"""The applications' work, one Dask task per input block: ``grep`` counts a byte
pattern (little CPU, no output), ``sort`` sorts the block's keys in runs written
through to the under-store, ``pagerank`` iterates over the block as an edge list,
writing its ranks as it goes; each task returns what it read, from where, and
what it wrote."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from thaw.client import Client

from .workloads import APPS

#: Pieces a task writes its output in: a map task's spills (sort), PageRank's
#: iterations each writing their ranks; so writes go out (and are counted for
#: the classifier) while the task runs, not all at its end.
PIECES = 4


def _grep(data: bytes, _iters: int) -> Iterator[bytes]:
    data.count(b"\x00\x01\x02")
    yield from ()


def _sort(data: bytes, _iters: int) -> Iterator[bytes]:
    keys = np.frombuffer(data[: len(data) // 8 * 8], dtype=np.uint64)
    for run in np.array_split(keys, PIECES):
        yield bytes(run[np.argsort(run, kind="stable")].tobytes())


def _pagerank(data: bytes, iters: int) -> Iterator[bytes]:
    words = np.frombuffer(data[: len(data) // 8 * 8], dtype=np.uint32)
    n = 1 << 14
    src, dst = words[0::2] & (n - 1), words[1::2] & (n - 1)
    degree = np.bincount(src, minlength=n).astype(np.float64)
    degree[degree == 0] = 1.0
    rank = np.full(n, 1.0 / n)
    size = max(1, int(len(data) * APPS["pagerank"].write_ratio) // PIECES // 4)
    for i in range(iters):
        rank = 0.15 / n + 0.85 * np.bincount(dst, weights=(rank / degree)[src], minlength=n)
        if (i + 1) % max(1, iters // PIECES) == 0:
            yield bytes(np.resize(rank.astype(np.float32), size).tobytes())


_WORK: dict[str, Callable[[bytes, int], Iterator[bytes]]] = {
    "grep": _grep,
    "sort": _sort,
    "pagerank": _pagerank,
}


def app_task(
    master: str,
    job: str,
    kind: str,
    path: str,
    offset: int,
    length: int,
    read_cache: str,
    output: str | None,
    iters: int,
) -> dict[str, Any]:
    """One task of an application: reads one block (carrying the job id,
    caching on read unless ``read_cache`` is "none"), does the kind's work,
    writing each piece of its output through to the under-store as it comes.
    Returns what happened."""
    start = time.time()
    cpu0 = time.thread_time()
    client = Client(master, job, read_cache=read_cache)
    with client.open(path) as f:
        f.seek(offset)
        data = f.read(length)
        stats = f.stats()
    written = 0
    for k, out in enumerate(_WORK[kind](data, iters)):
        if output is not None:
            client.write_bytes(f"{output}-{k}", out, write_type="through")
            written += len(out)
    mem = stats.get("short_circuit", 0) + stats.get("zero_copy", 0) + stats.get("remote_mem", 0)
    return {
        "offset": offset,
        "bytes": len(data),
        "bytes_mem": mem,
        "bytes_ufs": stats.get("under_store", 0) + stats.get("remote_disk", 0),
        "written": written,
        "cpu_s": round(time.thread_time() - cpu0, 4),
        "start": start,
        "end": time.time(),
    }


def collect(*records: dict[str, Any]) -> list[dict[str, Any]]:
    return list(records)
