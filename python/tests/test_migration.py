"""Migration from Python: ``thaw.job(..., inputs=...)`` moves cold inputs into
memory on enter, keeps the job alive, and evicts on exit; implicit eviction, the
``none`` baseline, and clear errors."""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

import thaw
from thaw.errors import InvalidArgument, NotFound

from .conftest import BLOCK


def mem_used(client: thaw.Client) -> int:
    total = 0
    for w in client.status()["workers"]:
        stats = client.native().worker_stats(w["address"])
        total += sum(t["used"] for t in stats["tiers"] if t["tier"] == "MEM")
    return total


def wait_for(cond: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def cold(ufs_dir: Path, name: str, size: int) -> bytes:
    data = os.urandom(size)
    ufs_dir.mkdir(parents=True, exist_ok=True)
    (ufs_dir / name).write_bytes(data)
    return data


def test_a_job_with_inputs_reads_them_from_memory_and_evicts_on_exit(
    client: thaw.Client, root: str, ufs_dir: Path
) -> None:
    data = cold(ufs_dir, "a.bin", 3 * BLOCK + 123)
    base = mem_used(client)
    name = f"mig-{uuid.uuid4().hex[:6]}"
    with thaw.job(name, inputs=[f"thaw://{root}"], client=client, wait=20) as j:
        p = j.progress()
        assert p is not None and p["blocks"] == 4 and p["blocks_in_memory"] == 4 and p["progress"] == 1.0
        with client.open(f"{root}/a.bin") as f:
            assert f.read() == data
            stats = f.stats()
        # Every byte from memory: mapped from the local MEM replica, none from
        # the under-store.
        assert stats["under_store"] == 0 and stats["remote_disk"] == 0, stats
        assert stats["short_circuit"] + stats["remote_mem"] == len(data), stats
        assert any(x["job_id"] == name for x in client.jobs()["jobs"])
    # Explicit eviction on exit: the job is gone and so are its blocks.
    assert client.job(name) is None
    wait_for(lambda: mem_used(client) <= base)


def test_the_lease_is_renewed_while_the_job_runs(client: thaw.Client, root: str, ufs_dir: Path) -> None:
    cold(ufs_dir, "l.bin", BLOCK)
    name = f"lease-{uuid.uuid4().hex[:6]}"
    with thaw.job(name, inputs=root, client=client, lease=0.6, wait=20):
        time.sleep(2.0)  # three leases long
        info = client.job(name)
        assert info is not None and info["blocks_in_memory"] == 1
    assert client.job(name) is None
    # Without a renewer, a lease runs out.
    client.migrate(root, f"{name}-bare", lease=0.5)
    wait_for(lambda: client.job(f"{name}-bare") is None)
    assert client.renew(f"{name}-bare") == [f"{name}-bare"]


def test_implicit_eviction_frees_memory_as_pandas_reads(
    client: thaw.Client, root: str, ufs_dir: Path
) -> None:
    df = pd.DataFrame({"x": range(400_000), "y": [float(i) / 3 for i in range(400_000)]})
    ufs_dir.mkdir(parents=True, exist_ok=True)
    df.to_csv(ufs_dir / "t.csv", index=False)
    size = (ufs_dir / "t.csv").stat().st_size
    assert size > 3 * BLOCK
    base = mem_used(client)
    name = f"imp-{uuid.uuid4().hex[:6]}"
    with thaw.job(name, inputs=[root], client=client, eviction="implicit", wait=20):
        assert mem_used(client) >= base + size
        got = pd.read_csv(f"thaw://{root}/t.csv", storage_options={"master": client.master})
        assert got.equals(df)
        # Read blocks leave memory while the job still runs (whole reads at
        # once; a block read only in part after the idle delay).
        wait_for(lambda: mem_used(client) <= base)
        info = client.job(name)
        assert info is not None and info["blocks_read"] == info["blocks"], info


def test_migrate_errors_are_clear(client: thaw.Client, root: str) -> None:
    with pytest.raises(ValueError, match="job id"):
        thaw.Client(client.master).migrate(root)
    with pytest.raises(NotFound):
        client.migrate(f"{root}/missing", "j-missing")
    with pytest.raises(InvalidArgument):
        client.migrate(root, "j-bad", eviction="sometimes")
    with pytest.raises(NotFound):
        client.evict("never-migrated")
    with pytest.raises(ValueError):
        thaw.job("x", inputs=root, eviction="sometimes")
    with pytest.raises(NotFound), thaw.job("j-enter", inputs=[f"{root}/missing"], client=client):
        pass
    assert thaw.current_job_id() is None


def test_policy_none_is_the_baseline(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(os.urandom(2 * BLOCK))
    with thaw.LocalCluster(ufs=tmp_path, workers=1, block_size=BLOCK, migration_policy="none") as c:
        client = c.client()
        info = client.migrate("/d", "base")
        assert info["blocks"] == 2
        time.sleep(1.0)
        info = client.job("base")
        assert info is not None and info["blocks_in_memory"] == 0
        assert (info["blocks_pending"], info["blocks_not_migrated"]) == (0, 2)
        assert client.jobs()["policy"] == "none"
        # Nothing will move: waiting for the migration returns at once.
        assert client.wait_migrated("base", timeout=1)["blocks_not_migrated"] == 2


def test_a_failed_wait_on_enter_leaves_nothing_behind(tmp_path: Path) -> None:
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "f").write_bytes(os.urandom(4 * BLOCK))
    with thaw.LocalCluster(ufs=tmp_path, workers=1, block_size=BLOCK, device_model="ufs=1MiB/s") as c:
        client = c.client()
        with pytest.raises(TimeoutError), thaw.job("slow-job", inputs="/slow", client=client, wait=0.3):
            pass
        assert thaw.current_job_id() is None
        assert not [t for t in threading.enumerate() if t.name.startswith("thaw-lease-")]
        assert client.job("slow-job") is None, "the job was evicted"


def test_bad_evict_and_lease_arguments(client: thaw.Client, root: str, ufs_dir: Path) -> None:
    cold(ufs_dir, "e.bin", BLOCK)
    name = f"args-{uuid.uuid4().hex[:6]}"
    client.migrate(root, name)
    with pytest.raises(ValueError, match="paths=None"):
        client.evict(name, [])
    assert client.job(name) is not None, "an empty path list released nothing"
    # A path the job does not have releases nothing either.
    cold(ufs_dir / "later", "x.bin", 10)
    info = client.evict(name, f"{root}/later/x.bin")
    assert info is not None and info["blocks"] == 1
    client.evict(name)
    for bad in (0, -5):
        with pytest.raises(ValueError, match="lease"):
            client.migrate(root, name, lease=bad)
    with pytest.raises(InvalidArgument, match="control"):
        client.migrate(root, "bad\njob")


def test_a_wait_for_inputs_larger_than_memory_returns_with_the_reason(tmp_path: Path) -> None:
    """Memory full of the job's own blocks: the rest fail after the room wait
    (saying who holds the memory) and the wait returns instead of hanging."""
    ufs = tmp_path / "ufs"
    cold(ufs / "big", "a.bin", 10 * BLOCK)
    with thaw.LocalCluster(
        ufs=ufs, mem_capacity=8 * BLOCK, block_size=BLOCK, heartbeat_ms=200, migration_room_wait_ms=500
    ) as cluster:
        client = thaw.Client(cluster.master)
        started = time.monotonic()
        with thaw.job("too-big", inputs=["/big"], client=client, wait=60) as j:
            p = j.progress()
        assert time.monotonic() - started < 50
        assert p is not None
        assert p["blocks_pending"] + p["blocks_queued"] == 0, p
        assert p["blocks_failed"] > 0 and p["blocks_in_memory"] > 0, p
        assert "no room in the migration buffer" in p["failure"], p
        assert "held by job too-big" in p["failure"], p


def test_a_submitter_s_origin_and_task_counters_show_with_the_job(
    client: thaw.Client, root: str, ufs_dir: Path
) -> None:
    cold(ufs_dir, "o.bin", 10)
    name = f"rec-{uuid.uuid4().hex[:6]}"
    origin = "dask client Client-1234 graph sum-tree (4 tasks)"
    info = client.migrate(root, name, origin=origin)
    assert (info["origin"], info["tasks"]) == (origin, None)
    try:
        # No origin (None or empty) keeps the job's; another replaces it.
        assert client.migrate(root, name)["origin"] == origin
        assert client.migrate(root, name, origin="")["origin"] == origin
        assert client.migrate(root, name, origin="pytest")["origin"] == "pytest"
        for bad in ("x" * 201, "tab\there"):
            with pytest.raises(InvalidArgument, match="origin"):
                client.migrate(root, name, origin=bad)
        job = client.job(name)
        assert job is not None and job["origin"] == "pytest"

        # Each report replaces the counters (absolute values, not deltas).
        counts = {"tasks": 12, "placed": 4, "done": 2, "memory_local": 3, "inputs_in_memory": 4}
        got = client.report_tasks(name, **counts, delay_ms_p99=120, delay_ms_max=300.4)
        assert got["job_id"] == name
        assert got["tasks"] == {**counts, "delay_ms_median": 0, "delay_ms_p99": 120, "delay_ms_max": 300}
        now = {"tasks": 12, "placed": 12, "done": 10, "memory_local": 11, "inputs_in_memory": 12}
        client.report_tasks(name, **now, delay_ms_p99=120, delay_ms_max=300)
        want = {**now, "delay_ms_median": 0, "delay_ms_p99": 120, "delay_ms_max": 300}
        job = client.job(name)
        assert job is not None and job["tasks"] == want and job["origin"] == "pytest"
        listed = next(j for j in client.jobs()["jobs"] if j["job_id"] == name)
        assert (listed["origin"], listed["tasks"]) == ("pytest", want)
        # The job's client reports for its own job by default.
        assert thaw.Client(client.master, name).report_tasks(**now)["tasks"]["delay_ms_max"] == 0

        # Counters that do not add up are refused, naming the rule; nothing changes.
        with pytest.raises(InvalidArgument, match="placed <= tasks"):
            client.report_tasks(name, **{**now, "placed": 13})
        with pytest.raises(InvalidArgument, match="memory_local <= placed"):
            client.report_tasks(name, **{**now, "memory_local": 13, "tasks": 20})
        with pytest.raises(InvalidArgument, match="delay_ms_p99 <= delay_ms_max"):
            client.report_tasks(name, **now, delay_ms_p99=5, delay_ms_max=4)
        with pytest.raises(ValueError, match="placed"):
            client.report_tasks(name, **{**now, "placed": -1})
        with pytest.raises(ValueError, match="delay_ms_max"):
            client.report_tasks(name, **now, delay_ms_max=float("nan"))
        job = client.job(name)
        assert job is not None and job["tasks"]["delay_ms_max"] == 0
        with pytest.raises(NotFound, match="never migrated"):
            client.report_tasks(f"{name}-none", **now)
    finally:
        client.evict(name)
