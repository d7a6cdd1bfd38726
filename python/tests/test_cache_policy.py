"""CAVA's cache management on a real cluster (CAVA, section IV): the cava policy
keeps a hot file that LRU throws out and drops fills not worth their victims;
applications are classified from what their processes measurably do (CPU time,
storage writes from /proc) or take a declared affinity at its word; a repeated
application starts from its last class; and the Dask integration measures
each job's tasks on the workers."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

import thaw

BLOCK = 1 << 20


def _report(client: thaw.Client, job: str, timeout: float = 10.0) -> dict[str, Any]:
    """The cache report's entry for ``job``, once the master has one."""
    deadline = time.monotonic() + timeout
    while True:
        apps = {a["job_id"]: a for a in client.cache_report()["apps"]}
        if job in apps or time.monotonic() > deadline:
            return apps[job]
        time.sleep(0.05)


def _cached(client: thaw.Client, path: str) -> int:
    """Bytes of ``path`` in memory (MEM replicas)."""
    return int(client.stat(path)["in_memory_bytes"])


def _read(master: str, path: str, job: str, affinity: float | None) -> None:
    with thaw.job(job, cache_affinity=affinity, measure=affinity is None):
        thaw.Client(master, read_cache="mem").cat(path)


def _run_workload(tmp_path: Path, policy: str) -> tuple[int, int, dict[str, Any]]:
    """A hot file read three times by a medium-affinity job, then cold files
    read once each by a high-affinity one, in memory for 3 of the 5 files:
    (hot bytes in memory at the end, drops, cache report)."""
    ufs = tmp_path / policy
    ufs.mkdir()
    for name in ("hot", "c1", "c2", "c3", "c4"):
        (ufs / name).write_bytes(os.urandom(2 * BLOCK))
    with thaw.LocalCluster(
        ufs=ufs, workers=1, block_size=BLOCK, mem_capacity=6 * BLOCK, cache_policy=policy, heartbeat_ms=100
    ) as c:
        client = thaw.Client(c.master)
        for i in range(3):
            _read(c.master, "/hot", f"sort-{i}", 0.2)
        # The worker must know the grep jobs' affinity before they read: a
        # declared affinity goes out with the next heartbeat answer.
        for i in range(1, 5):
            _read(c.master, f"/c{i}", f"grep-{i}", 0.4)
        time.sleep(0.5)  # evictions reach the master with the next heartbeats
        report = client.cache_report()
        return _cached(client, "/hot"), report["workers"][0]["drops"], report


def test_cava_keeps_the_hot_file_lru_throws_out_and_drops_what_is_not_worth_it(tmp_path: Path) -> None:
    hot_cava, drops_cava, report = _run_workload(tmp_path, "cava")
    hot_lru, drops_lru, _ = _run_workload(tmp_path, "lru")
    assert hot_cava == 2 * BLOCK, "cava keeps the file read three times"
    assert hot_lru < 2 * BLOCK, "LRU evicts it for the newest reads"
    assert drops_cava > 0 and drops_lru == 0
    w = report["workers"][0]
    assert w["policy"] == "cava" and w["cached_bytes"] <= 6 * BLOCK
    assert w["hits"] >= 4 and 0 < w["hit_ratio"] < 1, w
    files = {f["path"]: f for f in report["files"]}
    assert files["/hot"]["frequency"] == pytest.approx(3.0)
    assert files["/hot"]["benefit"] == pytest.approx(0.6)
    assert files["/hot"]["benefit"] > files["/c1"]["benefit"]
    apps = {a["job_id"]: a for a in report["apps"]}
    assert apps["grep-1"]["source"] == "declared" and apps["grep-1"]["affinity"] == 0.4


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    x = 0
    while time.process_time() < end:
        x += 1


@pytest.mark.serial
def test_applications_are_classified_from_measured_cpu_and_writes(
    tmp_path: Path,
) -> None:
    (tmp_path / "ufs").mkdir()
    with thaw.LocalCluster(
        ufs=tmp_path / "ufs",
        workers=1,
        block_size=BLOCK,
        mem_capacity=8 * BLOCK,
        heartbeat_ms=100,
        ca_cpu_threshold=0.5,
        ca_write_threshold=4 << 20,
    ) as c:
        client = thaw.Client(c.master)
        # Measured, not declared: an idle job, a CPU-bound one, and one that
        # is CPU-bound and writes heavily to local files.
        with thaw.job("idle", client=client):
            time.sleep(1.2)
        with thaw.job("cpu", client=client):
            _burn(1.2)
        out = tmp_path / "out.bin"
        with thaw.job("cpu-writer", client=client):
            with open(out, "wb") as f:
                for _ in range(12):
                    f.write(os.urandom(4 << 20))
                    f.flush()
                    os.fsync(f.fileno())
            _burn(1.2)
        got = {j: _report(client, j) for j in ("idle", "cpu", "cpu-writer")}
        # The last report (sent as each job ended) may lag a moment.
        time.sleep(0.5)
        got = {j: _report(client, j) for j in got}
        assert got["idle"]["class"] == "high" and got["idle"]["cpu_util"] < 0.5, got["idle"]
        assert got["cpu"]["class"] == "medium" and got["cpu"]["cpu_util"] > 0.5, got["cpu"]
        assert got["cpu-writer"]["class"] == "low", got["cpu-writer"]
        assert got["cpu-writer"]["write_rate"] > 4 << 20
        assert all(a["source"] == "measured" for a in got.values())
        # Another run of "cpu", not measured yet (it reports no figures):
        # it starts from the class the last "cpu" was given.
        client.report_app_usage("cpu-again", name="cpu")
        again = _report(client, "cpu-again")
        assert (again["class"], again["source"]) == ("medium", "history")
        # Bad input: a clear error, nothing recorded.
        with pytest.raises(ValueError, match=r"outside \[0, 1\]"):
            thaw.job("bad", cache_affinity=1.5)
        with pytest.raises(thaw.errors.InvalidArgument, match=r"within \[0, 1\]"):
            client.native().report_app_usage("bad", declared_affinity=-0.5)
        assert "bad" not in {a["job_id"] for a in client.cache_report()["apps"]}


@pytest.mark.serial
def test_dask_tasks_are_measured_per_job_and_an_annotation_declares_an_affinity(tmp_path: Path) -> None:
    dask = pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    import thaw.dask

    ufs = tmp_path / "ufs"
    ufs.mkdir()
    for i in range(4):
        (ufs / f"part-{i}").write_bytes(os.urandom(BLOCK))
    with (
        thaw.LocalCluster(
            ufs=ufs, workers=1, block_size=BLOCK, mem_capacity=16 * BLOCK, heartbeat_ms=100
        ) as c,
        distributed.Client(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            env={"THAW_MASTER": c.master},
        ) as dc,
    ):
        thaw.dask.install(dc, c.master)
        master = c.master  # the closures travel to the Dask worker: a string, not the cluster

        def crunch(path: str) -> int:
            import thaw as t

            data = t.Client(master).cat(path)
            end, x = time.process_time() + 0.3, 0
            while time.process_time() < end:
                x += 1
            return len(data)

        def skim(path: str) -> int:
            import thaw as t

            return len(t.Client(master).cat(path))

        paths = [f"thaw://{c.master}/part-{i}" for i in range(4)]
        with dask.annotate(thaw_job="crunchy", thaw_inputs=paths[:2]):
            a = [dask.delayed(crunch)(p.split(c.master)[1]) for p in paths[:2]]
        with dask.annotate(thaw_job="skimmer", thaw_inputs=paths[2:], thaw_cache_affinity=0.3):
            b = [dask.delayed(skim)(p.split(c.master)[1]) for p in paths[2:]]
        # One submission is one Thaw job: two submissions, two applications.
        assert dask.compute(*a) == (BLOCK,) * 2
        assert dask.compute(*b) == (BLOCK,) * 2
        client = thaw.Client(c.master)
        deadline = time.monotonic() + 15
        while True:
            crunchy = _report(client, "crunchy")
            if crunchy["tasks"] >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        # Measured on the Dask worker: two tasks, most of their time on CPU.
        assert crunchy["tasks"] >= 2 and crunchy["cpu_util"] > 0.5, crunchy
        assert crunchy["source"] in ("measured", "history")
        assert crunchy["input_bytes"] == 2 * BLOCK
        skimmer = _report(client, "skimmer")
        assert (skimmer["source"], skimmer["affinity"]) == ("declared", 0.3)


def test_inputs_larger_than_memory_are_cached_with_the_probability_that_fits(tmp_path: Path) -> None:
    ufs = tmp_path / "ufs"
    ufs.mkdir()
    (ufs / "big").write_bytes(os.urandom(16 * BLOCK))
    with thaw.LocalCluster(
        ufs=ufs, workers=1, block_size=BLOCK, mem_capacity=8 * BLOCK, cache_policy="cava", heartbeat_ms=100
    ) as c:
        client = thaw.Client(c.master)
        # The application says what it will read: 16 MiB for 8 MiB of memory.
        app = client.report_app_usage("big-scan", name="scan", inputs=["/big"], cache_affinity=0.4)
        assert app["probability"] == pytest.approx(0.5) and app["input_bytes"] == 16 * BLOCK, app
        # The worker learns it with the next heartbeat answer.
        time.sleep(0.4)
        with thaw.job("big-scan", measure=False):
            assert thaw.Client(c.master, read_cache="mem").cat("/big") == (ufs / "big").read_bytes()
        time.sleep(0.4)
        w = client.cache_report()["workers"][0]
        # About half the blocks drawn (a fixed draw per block), the rest not
        # asked for: memory is not filled by arrival order and then churned.
        assert 3 <= w["skipped"] <= 13 and w["skipped"] + w["cached_bytes"] // BLOCK + w["drops"] == 16, w
        cached = client.stat("/big")["in_memory_bytes"] // BLOCK
        # The same blocks again on the next read: its hits are exactly those.
        with thaw.job("big-scan-2", measure=False):
            thaw.Client(c.master, read_cache="mem").cat("/big")
        time.sleep(0.4)
        w2 = client.cache_report()["workers"][0]
        assert w2["hits"] - w["hits"] == cached, (w, w2)


def test_the_usage_meter_splits_a_process_among_the_tasks_running_together() -> None:
    from thaw.usage import UsageMeter

    now, cpu, wrote = [0.0], [0.0], [0]
    m = UsageMeter(clock=lambda: now[0], cpu=lambda: cpu[0], writes=lambda: wrote[0])
    m.start("a1", "A")
    now[0], cpu[0] = 1.0, 1.0  # A alone for a second, one core busy
    m.start("b1", "B")
    now[0], cpu[0], wrote[0] = 2.0, 2.0, 100  # both: a core and 100 bytes shared
    m.stop("a1")
    now[0], cpu[0] = 3.0, 2.0  # B alone, idle (waiting on a read)
    m.stop("b1")
    cpu[0] = 5.0  # the process between tasks: nobody's
    f = m.snapshot()
    assert (f["A"].wall, f["A"].cpu, f["A"].writes, f["A"].tasks) == (2.0, 1.5, 50, 1)
    assert (f["B"].wall, f["B"].cpu, f["B"].writes, f["B"].tasks) == (2.0, 0.5, 50, 1)
    # A long-lived worker forgets jobs idle long enough, never one still running.
    m.start("c1", "C")
    now[0] = 100.0
    assert m.forget_idle(50.0) == ["A", "B"] and set(m.snapshot()) == {"C"}
