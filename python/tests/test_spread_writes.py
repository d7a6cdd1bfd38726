"""Memory writes larger than one worker's memory spread over the workers (the
writer's own first, then by free memory), from Python as from Rust; a write
larger than the whole cluster's free memory fails, saying so, and leaves
nothing."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

import thaw

MIB = 1 << 20


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[thaw.LocalCluster]:
    """Three workers with 8 MiB of memory each, 1 MiB blocks."""
    ufs = tmp_path_factory.mktemp("ufs")
    with thaw.LocalCluster(ufs=ufs, workers=3, mem_capacity="8MiB", block_size=MIB, heartbeat_ms=200) as c:
        yield c


def _mem_used(client: thaw.Client) -> int:
    return sum(t["used"] for w in client.status()["workers"] for t in w["tiers"] if t["tier"] == "MEM")


def _wait_memory_free(client: thaw.Client) -> None:
    deadline = time.monotonic() + 15
    while _mem_used(client) > 0:
        assert time.monotonic() < deadline, client.status()["workers"]
        time.sleep(0.1)


@pytest.mark.parametrize("write_type", ["must-cache", "async-through", "cache-through"])
def test_a_file_larger_than_one_worker_spreads_and_reads_back_byte_exact(
    small: thaw.LocalCluster, write_type: str
) -> None:
    client = thaw.Client(small.master)
    data = os.urandom(20 * MIB)
    path = f"/spread-{write_type}"
    # Written as a stream of unknown length, in odd pieces.
    with client.open(path, "wb", write_type=write_type) as f:
        for at in range(0, len(data), 3 * MIB + 777):
            f.write(data[at : at + 3 * MIB + 777])
    assert client.cat(path) == data
    with fsspec.open(f"thaw://{small.master}{path}", "rb") as f:
        assert hashlib.sha256(f.read()).digest() == hashlib.sha256(data).digest()
    blocks = client.stat(path, blocks=True)["blocks"]
    assert len(blocks) == 20
    # Every block in memory once, on more than one worker.
    assert all([r["tier"] for r in b["replicas"]] == ["MEM"] for b in blocks), blocks
    holders = [b["replicas"][0]["address"] for b in blocks]
    assert len(set(holders)) > 1, holders
    assert all(holders.count(h) <= 8 for h in holders), holders
    if write_type == "async-through":
        # Checkpointed whole, from several workers.
        assert client.persist(path, timeout=60)["persistence"] == "persisted"
        assert (Path(small.ufs) / path.lstrip("/")).read_bytes() == data
    if write_type == "cache-through":
        assert (Path(small.ufs) / path.lstrip("/")).read_bytes() == data
    client.rm(path)
    _wait_memory_free(client)


def test_a_write_larger_than_the_cluster_s_free_memory_fails_and_leaves_nothing(
    small: thaw.LocalCluster, tmp_path: Path
) -> None:
    client = thaw.Client(small.master)
    data = os.urandom(30 * MIB)
    with pytest.raises(thaw.errors.ResourceExhausted, match="larger than the cluster's free memory") as e:
        client.write_bytes("/too-big", data, write_type="must-cache")
    assert isinstance(e.value, OSError)
    # Its length known, the write is refused at create, before a byte is sent,
    # saying both sizes.
    assert "this write of 30.0 MiB is larger than the cluster's free memory (24.0 MiB" in str(e.value)
    assert "so none of it is written" in str(e.value)
    assert not client.exists("/too-big")
    # Streamed, its length not known: refused at the first block that finds no room.
    refused = pytest.raises(thaw.errors.ResourceExhausted, match="no worker has room in memory for block 24")
    with refused, client.open("/too-big", "wb", write_type="must-cache") as f:
        for i in range(0, len(data), MIB):
            f.write(data[i : i + MIB])
    assert not client.exists("/too-big")
    _wait_memory_free(client)
    local = tmp_path / "big.bin"
    local.write_bytes(data)
    with pytest.raises(OSError, match="larger than the cluster's free memory"):
        client.put(local, "/too-big", write_type="async-through")
    assert not client.exists("/too-big")
    # What fits still goes in, once the workers have dropped the failed
    # writes' blocks (the master tells them with their next heartbeat; until
    # then it counts that memory as used).
    deadline = time.monotonic() + 10
    while True:
        try:
            client.write_bytes("/fits", data[: 20 * MIB], write_type="must-cache")
            break
        except thaw.errors.ResourceExhausted:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    assert client.cat("/fits") == data[: 20 * MIB]
    client.rm("/fits")
    _wait_memory_free(client)
