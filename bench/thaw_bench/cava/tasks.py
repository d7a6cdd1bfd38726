"""The applications' work as Dask tasks, one per input block: a task reads its
block (from memory or the under-store, as the cluster serves it), runs its
kind's work (:data:`.kinds.KINDS`) and writes each piece of the output through
to the under-store as it comes; it returns what it read, from where, and what
it wrote."""

from __future__ import annotations

import time
from typing import Any

from thaw.client import Client

from .kinds import KINDS


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
    for k, out in enumerate(KINDS[kind].work(data, iters)):
        if output is not None:
            client.write_bytes(f"{output}-{k}", out, write_type="through")
            written += len(out)
    local = stats.get("short_circuit", 0) + stats.get("zero_copy", 0)
    return {
        "offset": offset,
        "bytes": len(data),
        "bytes_mem": local + stats.get("remote_mem", 0),
        # Read from its own node's memory (what memory-locality placement buys).
        "bytes_local_mem": local,
        "bytes_ufs": stats.get("under_store", 0) + stats.get("remote_disk", 0),
        "written": written,
        "cpu_s": round(time.thread_time() - cpu0, 4),
        "start": start,
        "end": time.time(),
    }


def collect(*records: dict[str, Any]) -> list[dict[str, Any]]:
    return list(records)
