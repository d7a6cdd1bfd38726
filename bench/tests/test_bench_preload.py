"""The inputs-in-RAM bound (the harness's ``preload_inputs``): inputs larger than
the workers' migration buffers are refused at once, inputs that fit are moved and
waited for."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import thaw
from thaw_bench.record import InputsExceedMemory, preload_inputs

from tests.conftest import BLOCK
from tests.test_migration import cold, wait_for


def test_inputs_in_ram_past_the_cluster_s_memory_is_refused_at_once(tmp_path: Path) -> None:
    ufs = tmp_path / "ufs"
    cold(ufs / "in", "a.bin", 10 * BLOCK)
    with thaw.LocalCluster(ufs=ufs, mem_capacity=8 * BLOCK, block_size=BLOCK, heartbeat_ms=200) as cluster:
        client = thaw.Client(cluster.master)
        wait_for(lambda: all(w.get("migration") for w in client.status()["workers"]))
        started = time.monotonic()
        with pytest.raises(InputsExceedMemory, match=r"inputs are 10 MiB.*hold 6 MiB"):
            preload_inputs(client, ["/in"], timeout=60, say=lambda _m: None)
        assert time.monotonic() - started < 5
        assert client.job("inputs-in-ram") is None
        # Inputs that fit are moved, and the result says they all made it.
        cold(ufs / "small", "b.bin", 3 * BLOCK)
        said: list[str] = []
        preload = preload_inputs(client, ["/small"], timeout=60, say=said.append)
        assert preload["complete"] and preload["job"]["blocks_in_memory"] == 3, preload
        assert said and "3 blocks" in said[0]
