"""The Dask scheduler plugin (``thaw.dask``): ordinary Dask code over ``thaw://``
gets its inputs migrated at submission, its reads carry the submission's job, and
each file leaves memory once its tasks ran; input detection for parquet, CSV,
text, zarr and annotations; and a graph runs as it would without the plugin when
inputs are missing, the master forgets or loses the job, a Dask worker dies or the
client goes away."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import dask.bag as db
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client as DaskClient
from distributed import Event
from distributed import LocalCluster as DaskCluster

import thaw
import thaw.dask
from thaw.dask import find_inputs

from .procs import alive_workers, free_port, lossy_cluster, spawn
from .test_migration import mem_used, wait_for


@pytest.fixture(scope="module")
def dask_cluster(cluster: thaw.LocalCluster) -> Iterator[DaskCluster]:
    """Two worker processes of one thread each, the plugin on their scheduler."""
    # Worker processes take the default master from the environment.
    before = os.environ.get("THAW_MASTER")
    os.environ["THAW_MASTER"] = cluster.master
    try:
        with DaskCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as dc:
            with DaskClient(dc) as c:
                thaw.dask.install(c, cluster.master)
            yield dc
    finally:
        if before is None:
            os.environ.pop("THAW_MASTER", None)
        else:
            os.environ["THAW_MASTER"] = before


@pytest.fixture
def dask_client(dask_cluster: DaskCluster) -> Iterator[DaskClient]:
    with DaskClient(dask_cluster) as c:
        yield c


def frame(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"key": rng.integers(0, 13, rows), "value": rng.normal(size=rows)})


def cold_parquet(ufs_dir: Path, files: int, rows: int = 120_000) -> pd.DataFrame:
    """``files`` parquet files placed in the under-store only (cold to Thaw)."""
    ufs_dir.mkdir(parents=True, exist_ok=True)
    parts = [frame(rows, i) for i in range(files)]
    for i, p in enumerate(parts):
        p.to_parquet(ufs_dir / f"part-{i}.parquet")
    return pd.concat(parts)


def thaw_jobs(client: thaw.Client) -> list[dict[str, Any]]:
    """The Dask jobs running at the master (not those that ended lately)."""
    return [j for j in client.jobs()["jobs"] if j["job_id"].startswith("dask-") and j["state"] == "running"]


def hold_workers(c: DaskClient) -> tuple[Event, list[Any]]:
    """Occupies every Dask thread until the returned event is set."""
    ev = Event(f"hold-{uuid.uuid4().hex[:6]}")
    name = ev.name

    def wait() -> None:
        Event(name).wait(60)

    futures = [c.submit(wait, pure=False, workers=[w]) for w in c.scheduler_info()["workers"]]
    wait_for(lambda: sum(len(v) for v in c.processing().values()) >= len(futures))
    return ev, futures


def test_a_plain_groupby_migrates_at_submission_and_releases_after(
    client: thaw.Client, root: str, ufs_dir: Path, dask_client: DaskClient
) -> None:
    want = cold_parquet(ufs_dir, files=4).groupby("key")["value"].sum()
    # Ordinary Dask code: no Thaw call anywhere.
    query = dd.read_parquet(f"thaw://{root}/").groupby("key")["value"].sum()
    # Building the graph reads the parquet footers here (no job: they stay as
    # cache); what the job migrates comes on top.
    query.optimize().__dask_graph__()
    base = mem_used(client)
    ev, holders = hold_workers(dask_client)
    result = dask_client.compute(query)
    # While the graph waits for a worker, its inputs move into memory.
    wait_for(lambda: len(thaw_jobs(client)) == 1, timeout=20)
    (job,) = thaw_jobs(client)
    assert job["blocks"] >= 4, job
    wait_for(lambda: (client.job(job["job_id"]) or {}).get("blocks_in_memory") == job["blocks"], timeout=30)
    (seen,) = thaw.dask.jobs(dask_client)
    assert seen["job_id"] == job["job_id"] and seen["tasks"] == 4 and seen["tasks_done"] == 0, seen
    assert seen["files"] == [f"{root}/part-{i}.parquet" for i in range(4)], seen
    ev.set()
    pd.testing.assert_series_equal(result.result().sort_index(), want, check_exact=False)
    # The reads carried the submission's job, and the job's blocks left memory.
    stats = client.job_stats(job["job_id"])
    assert stats["bytes_read"] > 0 and stats["bytes_from_memory"] == stats["bytes_read"], stats
    wait_for(lambda: client.job(job["job_id"]) is None, timeout=20)
    wait_for(lambda: mem_used(client) <= base, timeout=20)
    assert all(h.result() is None for h in holders)
    assert not thaw.dask.jobs(dask_client)
    # The ended job stays listed, with what was moved for it and what it read.
    ended = next(j for j in client.jobs()["jobs"] if j["job_id"] == job["job_id"])
    assert ended == client.job(job["job_id"], ended=True)
    assert (ended["state"], ended["end_reason"]) == ("ended", "evicted"), ended
    assert (ended["blocks"], ended["bytes"]) == (job["blocks"], job["bytes"]), ended
    # (A block the graph's footer reads left in memory needed no migration.)
    assert 0 < ended["blocks_migrated"] <= job["blocks"] and ended["bytes_migrated"] > 0, ended
    # Every read came after its block was in memory: all of it from memory.
    # The workers count reads and tell the master with their next full
    # heartbeat, so the listing has them within a heartbeat interval.
    wait_for(lambda: (client.job(job["job_id"], ended=True) or {}).get("read_bytes", 0) > 0, timeout=10)
    ended = client.job(job["job_id"], ended=True)
    assert ended is not None and ended["read_bytes"] > 0, ended
    assert ended["read_bytes_from_memory"] == ended["read_bytes"], ended


def test_each_file_is_released_once_its_tasks_ran(
    client: thaw.Client, root: str, ufs_dir: Path, dask_client: DaskClient
) -> None:
    cold_parquet(ufs_dir, files=2, rows=50_000)
    ev = Event(f"gate-{uuid.uuid4().hex[:6]}")
    name = ev.name

    def read(path: str, gated: bool) -> int:
        if gated:
            Event(name).wait(60)
        return len(pd.read_parquet(f"thaw://{path}"))

    # One submission, two tasks on two workers, each reading one file; the
    # second waits at a gate.
    w1, w2 = sorted(dask_client.scheduler_info()["workers"])
    parts = []
    for i, (worker, gated) in enumerate([(w1, False), (w2, True)]):
        path = f"{root}/part-{i}.parquet"
        with dask.annotate(thaw_inputs=[path], workers=[worker]):
            parts.append(dask.delayed(read, pure=False)(path, gated))
    futures = dask_client.compute(parts)
    wait_for(lambda: any(j["tasks_done"] for j in thaw.dask.jobs(dask_client)), timeout=30)
    (seen,) = thaw.dask.jobs(dask_client)
    # Part 0's task ran: its file is released while part 1's is still held.
    assert seen["released"] == [f"{root}/part-0.parquet"], seen
    # The plugin tells the master from its own thread, after marking the file
    # released: the master's job loses that file's block shortly after.
    wait_for(lambda: (client.job(seen["job_id"]) or {}).get("blocks") == 1, timeout=10)
    info = client.job(seen["job_id"])
    assert info is not None and info["blocks"] == 1, info
    # `thaw jobs` shows who submitted it (these tasks name their workers, so the
    # plugin placed none of them: no task counters).
    assert info["origin"].startswith("dask Client-") and "2 reading tasks" in info["origin"], info
    ev.set()
    assert [f.result() for f in futures] == [50_000, 50_000]
    # The last file read ends the job, though its results are still wanted.
    wait_for(lambda: not thaw.dask.jobs(dask_client), timeout=30)
    wait_for(lambda: client.job(seen["job_id"]) is None, timeout=20)


def test_inputs_are_found_for_csv_text_zarr_parquet_and_annotations(
    cluster: thaw.LocalCluster, client: thaw.Client, root: str
) -> None:
    url = f"thaw://{cluster.master}{root}"
    for i in range(2):
        frame(1000, i).to_csv(f"{url}/c{i}.csv", index=False)
        frame(1000, i).to_parquet(f"{url}/p{i}.parquet")
    da.from_array(np.arange(10_000.0).reshape(100, 100), chunks=(50, 50)).to_zarr(f"{url}/arr")

    def inputs(graph: Any) -> set[str]:
        found: set[str] = set()
        for spec in dict(graph).values():
            found |= {p for m, p in find_inputs(spec) if m == cluster.master}
        return found

    csv = dd.read_csv(f"{url}/c*.csv").optimize().__dask_graph__()
    assert inputs(csv) == {f"{root}/c0.csv", f"{root}/c1.csv"}
    pq = dd.read_parquet([f"{url}/p0.parquet", f"{url}/p1.parquet"]).optimize().__dask_graph__()
    assert inputs(pq) == {f"{root}/p0.parquet", f"{root}/p1.parquet"}
    text = db.read_text(f"{url}/c*.csv").__dask_graph__()
    assert inputs(text) == {f"{root}/c0.csv", f"{root}/c1.csv"}
    # An inlined zarr getter names exactly the chunks of its region.
    arr = da.from_zarr(f"{url}/arr", inline_array=True)
    getters = [v for k, v in dict(arr.__dask_graph__()).items() if k == (arr.name, 1, 0)]
    assert {p for _, p in find_inputs(getters[0])} == {f"{root}/arr/c/1/0"}


def test_zarr_and_annotated_graphs_become_jobs(
    cluster: thaw.LocalCluster, client: thaw.Client, root: str, dask_client: DaskClient
) -> None:
    url = f"thaw://{cluster.master}{root}"
    data = np.arange(40_000.0).reshape(200, 200)
    da.from_array(data, chunks=(100, 100)).to_zarr(f"{url}/arr")
    client.write_bytes(f"{root}/blob", b"x" * 1000)
    ev, holders = hold_workers(dask_client)
    total = dask_client.compute(da.from_zarr(f"{url}/arr").sum())
    with dask.annotate(thaw_inputs=[f"{root}/blob"]):
        annotated = dask_client.submit(len, b"abc", pure=False)
    wait_for(lambda: len(thaw.dask.jobs(dask_client)) == 2)
    by_tasks = {j["tasks"]: j for j in thaw.dask.jobs(dask_client)}
    assert by_tasks[4]["files"] == sorted(f"{root}/arr/c/{i}/{j}" for i in (0, 1) for j in (0, 1))
    assert by_tasks[1]["files"] == [f"{root}/blob"]
    ev.set()
    assert total.result() == data.sum() and annotated.result() == 3
    wait_for(lambda: not thaw.dask.jobs(dask_client), timeout=20)
    assert all(h.result() is None for h in holders)


def test_missing_inputs_fail_as_without_the_plugin_and_leave_no_job(
    client: thaw.Client, root: str, dask_client: DaskClient
) -> None:
    with dask.annotate(thaw_inputs=[f"{root}/nothing-here"]):
        ok = dask_client.submit(sum, [1, 2], pure=False)
    assert ok.result() == 3
    # A file removed between building the graph and running it: the task fails
    # as it would without the plugin, which warns and keeps no job.
    client.write_bytes(f"{root}/gone.csv", b"a,b\n1,2\n")
    df = dd.read_csv(f"thaw://{root}/gone.csv")
    df.optimize().__dask_graph__()
    client.rm(f"{root}/gone.csv")
    with pytest.raises(FileNotFoundError):
        dask_client.compute(df).result()
    wait_for(lambda: not thaw.dask.jobs(dask_client), timeout=20)
    assert not thaw_jobs(client)
    warnings = dask_client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.plugins["thaw"].warnings)
    assert any("not in Thaw" in w for w in warnings), warnings


def test_a_job_the_master_forgot_is_migrated_again(
    client: thaw.Client, root: str, ufs_dir: Path, dask_client: DaskClient
) -> None:
    # A master restart loses migration state (soft state); the renewal finds
    # the job unknown and the plugin tells its inputs again.
    cold_parquet(ufs_dir, files=2, rows=20_000)
    ev, holders = hold_workers(dask_client)
    result = dask_client.compute(dd.read_parquet(f"thaw://{root}/")["value"].sum())
    wait_for(lambda: len(thaw_jobs(client)) == 1)
    (job,) = thaw_jobs(client)
    client.evict(job["job_id"])
    assert client.job(job["job_id"]) is None
    wait_for(lambda: client.job(job["job_id"]) is not None, timeout=10)
    ev.set()
    result.result()
    wait_for(lambda: client.job(job["job_id"]) is None, timeout=20)
    assert all(h.result() is None for h in holders)


def test_a_client_that_goes_away_ends_its_jobs(
    client: thaw.Client, root: str, ufs_dir: Path, dask_cluster: DaskCluster, dask_client: DaskClient
) -> None:
    cold_parquet(ufs_dir, files=2, rows=20_000)
    with DaskClient(dask_cluster) as other:
        ev, _ = hold_workers(other)
        pending = other.compute(dd.read_parquet(f"thaw://{root}/")["value"].sum())
        wait_for(lambda: len(thaw_jobs(client)) == 1)
        (job,) = thaw_jobs(client)
        assert not pending.done()
    # The client closed mid-job: its job ends and its blocks leave memory.
    wait_for(lambda: client.job(job["job_id"]) is None, timeout=20)
    Event(ev.name, client=dask_client).set()


def test_a_dead_dask_worker_or_thaw_master_does_not_fail_the_graph(tmp_path: Path) -> None:
    ufs = tmp_path / "ufs"
    want = cold_parquet(ufs / "t", files=4, rows=20_000)["value"].sum()
    with (
        thaw.LocalCluster(ufs=ufs, workers=1) as tc,
        DaskCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as dc,
        DaskClient(dc) as c,
    ):
        thaw.dask.install(c, tc.master, lease=3)
        tclient = thaw.Client(tc.master)
        ev, holders = hold_workers(c)
        result = c.compute(dd.read_parquet(f"thaw://{tc.master}/t/")["value"].sum())
        wait_for(lambda: len(thaw_jobs(tclient)) == 1)
        # kill -9 one Dask worker: its tasks run again elsewhere; the job goes on.
        os.kill(next(iter(c.run(os.getpid).values())), 9)
        ev.set()
        assert result.result() == pytest.approx(want)
        wait_for(lambda: not thaw_jobs(tclient), timeout=20)
        del holders
        # The Thaw master goes away: a graph naming Thaw inputs still computes,
        # with a warning.
        tc.close()
        with dask.annotate(thaw_inputs=["/t/part-0.parquet"]):
            assert c.submit(sum, [2, 3], pure=False).result() == 5
        time.sleep(0.5)
        warnings = c.run_on_scheduler(lambda dask_scheduler: dask_scheduler.plugins["thaw"].warnings)
        assert any("failed" in w for w in warnings), warnings


def _up(client: thaw.Client) -> bool:
    try:
        return any(w["alive"] for w in client.status()["workers"])
    except Exception:
        return False


def _all_in_memory(client: thaw.Client, job_id: str, blocks: int) -> bool:
    try:
        j = client.job(job_id)
    except thaw.errors.Unavailable:  # the master is starting again
        return False
    return j is not None and j["blocks"] == blocks and j["blocks_in_memory"] == blocks


def _mem_held(client: thaw.Client) -> int:
    tiers = [t for w in client.status()["workers"] for t in w["tiers"] if t["tier"] == "MEM"]
    return sum(t["held"] for t in tiers)


def test_a_thaw_master_killed_and_restarted_mid_job_migrates_the_job_again(tmp_path: Path) -> None:
    # A real master process, kill -9 and started again on its port with its
    # journal: migration state is soft, so the plugin's next renewal finds the
    # job unknown and tells its inputs again; the graph computes as it would.
    ufs = tmp_path / "ufs"
    want = cold_parquet(ufs / "t", files=4, rows=20_000)["value"].sum()
    port = free_port()
    addr = f"127.0.0.1:{port}"
    master_args = [
        "master", "--ufs", str(ufs), "--journal-dir", str(tmp_path / "journal"),
        "--port", str(port), "--bind", "127.0.0.1", "--heartbeat-ms", "200", "--worker-timeout-ms", "3000",
    ]  # fmt: skip
    procs = [spawn(tmp_path, "master", master_args)]
    try:
        worker_args = [
            "worker", "--master", addr, "--mem-dir", str(tmp_path / "mem"), "--mem-capacity", "256MiB",
            "--port", "0", "--bind", "127.0.0.1",
        ]  # fmt: skip
        procs.append(spawn(tmp_path, "worker", worker_args))
        tclient = thaw.Client(addr)
        wait_for(lambda: _up(tclient), timeout=30)
        with (
            DaskCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as dc,
            DaskClient(dc) as c,
        ):
            thaw.dask.install(c, addr, lease=3)
            ev, holders = hold_workers(c)
            result = c.compute(dd.read_parquet(f"thaw://{addr}/t/")["value"].sum())
            wait_for(lambda: len(thaw_jobs(tclient)) == 1)
            (job,) = thaw_jobs(tclient)
            wait_for(lambda: _all_in_memory(tclient, job["job_id"], 4))
            procs[0].kill()  # SIGKILL
            procs[0].wait()
            procs[0] = spawn(tmp_path, "master", master_args)
            # The new master starts with no jobs; the plugin migrates this one
            # again, and the re-registered worker holds its blocks once more.
            wait_for(lambda: _all_in_memory(tclient, job["job_id"], 4), timeout=30)
            ev.set()
            assert result.result() == pytest.approx(want)
            del holders
            wait_for(lambda: not thaw_jobs(tclient), timeout=20)
            # Nothing stays held for the job (blocks its readers cached stay as
            # evictable cache, as without the plugin).
            wait_for(lambda: _mem_held(tclient) == 0, timeout=20)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_clusters_the_user_starts_take_the_plugin_by_preload(
    cluster: thaw.LocalCluster, root: str, ufs_dir: Path
) -> None:
    import sys

    want = cold_parquet(ufs_dir, files=2, rows=10_000)["value"].sum()
    port = free_port()
    env = {**os.environ, "THAW_MASTER": cluster.master, "THAW_HOST": "node-x", "THAW_RACK": "rack-x"}
    dask_cli = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    procs = [
        subprocess.Popen(
            [*dask_cli, "--port", str(port), "--no-dashboard", "--preload", "thaw.dask"], env=env
        )
    ]
    try:
        worker_cli = [sys.executable, "-m", "distributed.cli.dask_worker", f"tcp://127.0.0.1:{port}"]
        procs.append(
            subprocess.Popen(
                [*worker_cli, "--nthreads", "1", "--no-dashboard", "--preload", "thaw.dask"], env=env
            )
        )
        with DaskClient(f"tcp://127.0.0.1:{port}", timeout=60) as c:
            c.wait_for_workers(1, timeout=60)
            assert dd.read_parquet(f"thaw://{root}/")["value"].sum().compute() == pytest.approx(want)
            log = thaw.dask.placements(c)
            assert len(log) == 2 and {e["job"] for e in log} == {log[0]["job"]}, log
            places = c.run_on_scheduler(lambda dask_scheduler: dask_scheduler.get_metadata(["thaw-place"]))
            assert [(p["host"], p["rack"]) for p in places.values()] == [("node-x", "rack-x")]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


def test_removing_the_plugin_hands_held_tasks_back_to_dask(
    cluster: thaw.LocalCluster, root: str, ufs_dir: Path
) -> None:
    want = cold_parquet(ufs_dir, files=2, rows=10_000)["value"].sum()
    with (
        DaskCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as dc,
        DaskClient(dc) as c,
    ):
        thaw.dask.install(c, cluster.master)
        ev, holders = hold_workers(c)
        result = c.compute(dd.read_parquet(f"thaw://{cluster.master}{root}/")["value"].sum())
        wait_for(lambda: len(thaw.dask.jobs(c)) == 1)
        wait_for(lambda: thaw.Client(cluster.master).job(thaw.dask.jobs(c)[0]["job_id"]) is not None)
        # Its read tasks are held by the plugin (no free slot yet).
        states = c.run_on_scheduler(
            lambda dask_scheduler: sorted({ts.state for ts in dask_scheduler.tasks.values()})
        )
        assert "no-worker" in states, states
        (job,) = thaw.dask.jobs(c)
        c.unregister_scheduler_plugin("thaw")
        # Dask removes a plugin without closing it: the plugin notices, ends its
        # job (its blocks are released) and hands the held tasks back.
        wait_for(lambda: thaw.Client(cluster.master).job(job["job_id"]) is None, timeout=10)
        ev.set()
        assert result.result(timeout=60) == pytest.approx(want)
        assert all(h.result() is None for h in holders)


@pytest.mark.parametrize("placement", [True, False])
def test_a_start_up_holds_tasks_while_their_inputs_migrate(
    cluster: thaw.LocalCluster, client: thaw.Client, root: str, ufs_dir: Path, placement: bool
) -> None:
    cold_parquet(ufs_dir, files=2, rows=10_000)
    with (
        DaskCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as dc,
        DaskClient(dc) as c,
    ):
        thaw.dask.install(c, cluster.master, placement=placement)
        t0 = time.time()
        tasks = []
        for i in range(2):
            path = f"{root}/part-{i}.parquet"
            with dask.annotate(
                thaw_inputs=[path], thaw_start_after=t0 + 1.5, thaw_job=f"startup-{placement}"
            ):
                tasks.append(dask.delayed(time.time, pure=False)())
        futures = c.compute(tasks)
        # The job migrates during the start-up; its tasks start after it.
        wait_for(lambda: client.job(f"startup-{placement}") is not None, timeout=5)
        assert time.time() < t0 + 1.5
        started = [f.result(timeout=30) for f in futures]
        assert min(started) >= t0 + 1.5, (t0, started)


def _read(path: str, master: str) -> bytes:
    """A Dask task reading a Thaw file (its worker's only thread)."""
    return thaw.Client(master).cat(path)


def test_a_task_reading_a_lost_file_gives_its_slot_to_the_rerun_dask_runs_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The master runs no rerun itself (--recompute-executor external): the
    # plugin claims them and runs them as Dask tasks. One Dask worker with one
    # thread: a reading task that held its thread while waiting for the rerun
    # would leave the rerun nowhere to run (Tachyon, section 4's priority inversion).
    from .test_lineage import grep

    flags = ["--recompute", "reactive", "--recompute-executor", "external"]
    addr, procs = lossy_cluster(tmp_path, flags)
    # The rerun (`python -m thaw rerun`, on a Dask worker) imports the step's module.
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    try:
        client = thaw.Client(addr, host="h0")
        wait_for(lambda: alive_workers(client) == 2, timeout=30)
        logs = b"".join(f"{i} {'ERROR' if i % 4 == 0 else 'ok'} line\n".encode() for i in range(30_000))
        client.write_bytes("/logs", logs, write_type="cache-through")
        monkeypatch.setenv("THAW_HOST", "h0")
        thaw.lineage.step(inputs=["/logs"], outputs=["/errors"], kind="narrow", client=client)(grep)(
            pattern="ERROR"
        )
        want = client.cat("/errors")
        procs[1].kill()  # kill -9 of the Thaw worker holding /errors
        procs[1].wait()
        wait_for(lambda: client.stat("/errors")["lost"], timeout=30)
        with (
            DaskCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as dc,
            DaskClient(dc) as c,
        ):
            thaw.dask.install(c, addr, recompute=True, placement=False)
            assert c.submit(_read, "/errors", addr, pure=False).result(timeout=120) == want

            def ran() -> list[tuple[int, str, str]]:
                done = c.run_on_scheduler(
                    lambda dask_scheduler: dask_scheduler.plugins["thaw"].recompute_executor.ran
                )
                return [(r["lineage_id"], r["error"], r["where"]) for r in done]

            # Reported once the rerun's task ends (just after its last write); a
            # step's rerun runs in the Dask worker's interpreter, not a new process.
            lineage_id = client.stat("/errors")["lineage_id"]
            wait_for(lambda: ran() == [(lineage_id, "", "in-process")], timeout=30)
        assert client.status()["persistence"]["recomputations_done"] == 1
    finally:
        for p in procs:
            p.kill()
            p.wait()
