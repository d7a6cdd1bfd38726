"""The emulated device model from Python: LocalCluster(device_model=...), the
devices in Client.status(), Client.interfere on and off, and its errors."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

import thaw

MIB = 1 << 20


def _devices(client: thaw.Client, want: int) -> list[dict[str, Any]]:
    """The live workers once `want` of them report devices (they come with heartbeats)."""
    deadline = time.monotonic() + 10
    while True:
        workers = [w for w in client.status()["workers"] if w["alive"]]
        if sum(1 for w in workers if w["devices"]) >= want or time.monotonic() > deadline:
            return workers
        time.sleep(0.05)


def _device(worker: dict[str, Any], name: str) -> dict[str, Any]:
    return next(d for d in worker["devices"] if d["device"] == name)


def _streams(client: thaw.Client, worker_id: int) -> int:
    """Worker `worker_id`'s under-store interference as the master shows it."""
    worker = next(w for w in client.status()["workers"] if w["id"] == worker_id)
    return int(_device(worker, "ufs")["interference_streams"])


def test_device_models_interference_and_status() -> None:
    with thaw.LocalCluster(
        workers=2,
        block_size="1MiB",
        heartbeat_ms=100,
        device_model="ufs=8MiB/s,penalty=0.5",
        worker_device_models={1: "ufs=8MiB/s,disk=32MiB/s"},
    ) as cluster:
        client = cluster.client()
        workers = _devices(client, 2)
        names = sorted(sorted(d["device"] for d in w["devices"]) for w in workers)
        assert names == [["disk", "ufs"], ["ufs"]], workers
        plain = next(w for w in workers if len(w["devices"]) == 1)
        both = next(w for w in workers if len(w["devices"]) == 2)
        assert _device(plain, "ufs")["bandwidth"] == 8 * MIB and _device(plain, "ufs")["penalty"] == 0.5
        assert _device(both, "disk")["penalty"] == 0.3  # the default

        # A cold read pays the modelled under-store (two workers fill at most
        # twice as fast as one).
        data = os.urandom(2 * MIB)
        Path(cluster.ufs, "cold.bin").write_bytes(data)
        t0 = time.monotonic()
        assert client.cat("/cold.bin") == data
        assert time.monotonic() - t0 >= len(data) / (2 * 8 * MIB)

        stats = client.interfere(plain["id"], "ufs", streams=2)
        assert _device(stats, "ufs")["interference_streams"] == 2
        deadline = time.monotonic() + 10
        while _streams(client, plain["id"]) != 2:
            assert time.monotonic() < deadline, "the status never showed the interference"
            time.sleep(0.05)
        stats = client.interfere(plain["address"], "ufs", on=False)
        assert _device(stats, "ufs")["interference_streams"] == 0

        with pytest.raises(ValueError, match="no worker with id 999"):
            client.interfere(999)
        with pytest.raises(ValueError, match="streams"):
            client.interfere(plain["id"], streams=0)
        with pytest.raises(thaw.errors.FailedPrecondition, match="no disk device model"):
            client.interfere(plain["id"], "disk")
        with pytest.raises(ValueError, match="tape"):
            client.interfere(plain["id"], "tape")


def test_a_bad_device_model_stops_the_cluster_with_a_clear_error() -> None:
    with pytest.raises(thaw.ThawError, match="needs a /s suffix"):
        thaw.LocalCluster(device_model="disk=40MiB")
