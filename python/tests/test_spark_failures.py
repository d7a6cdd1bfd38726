"""Spark over ``thaw://`` when Thaw fails under it: the leader of a group of
three Thaw masters killed (SIGKILL) while a query runs, and a Thaw worker
killed while a query scans files it holds in memory. The queries go on (the
client fails over to the next leader, and from a dead worker's files to their
under-store copies through the worker that is left) and no Spark task fails
(Thaw's client fails over, not Spark's task retries). A Spark standalone
cluster beside a Thaw cluster, as processes (thaw/sparkcluster.py); one of
each serves the module, the master test first (it needs both workers)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import thaw
from thaw import sparkcluster as sc

REASON = sc.skip_reason() or (
    None if sc.has_filesystem() else "thaw-hadoop's jar has no io.thaw.hadoop.ThawFileSystem"
)
pytestmark = [pytest.mark.spark, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[sc.Clusters, Any, thaw.Client]]:
    with sc.clusters(tmp_path_factory.mktemp("spark-failures"), masters=3) as c:
        spark = sc.session(
            c,
            "thaw-failures",
            **{
                "spark.sql.files.openCostInBytes": str(128 << 20),
                # Renewed every 0.5 s: a new leader learns a running query's job soon.
                "spark.thaw.lease.ms": "1500",
            },
        )
        try:
            yield c, spark, thaw.Client(c.thaw)
        finally:
            spark.stop()


def write_files(spark: Any, client: thaw.Client, path: str, rows: int) -> None:
    """Eight parquet files in memory on both workers, each with its under-store copy."""
    df = spark.range(rows).selectExpr("id", "repeat(CAST(id AS STRING), 20) AS pad")
    df.repartition(8).write.option("fs.thaw.write.type", "cache-through").parquet(f"thaw://{path}")
    files = [e for e in client.ls(path, blocks=True) if e["name"].startswith("part-")]
    assert len(files) == 8 and all(e["persisted"] for e in files)
    holders = {r["host"] for e in files for b in e["blocks"] for r in b["replicas"]}
    assert holders == set(sc.HOSTS), holders


def slow_sum(spark: Any, path: str, description: str, kill: Callable[[], None]) -> tuple[Any, float]:
    """The sum of ``id`` over ``path``, 4 ms a row (each of the eight tasks
    takes about 4 s on two cores), with ``kill`` run once a task is running.
    Returns the sum and when the kill happened (ms since the epoch)."""
    got: dict[str, Any] = {}

    def scan() -> None:
        spark.sparkContext.setJobDescription(description)
        try:
            # (a filter: a projection nobody reads would be pruned away)
            q = spark.read.parquet(f"thaw://{path}").where(
                "length(coalesce(reflect('java.lang.Thread', 'sleep', 4L), '')) >= 0"
            )
            got["sum"] = q.groupBy().sum("id").collect()[0][0]
        except Exception as e:  # the assertion below shows it
            got["error"] = e
        finally:
            spark.sparkContext.setLocalProperty("spark.job.description", None)

    t = threading.Thread(target=scan)
    t.start()
    sc.wait_for("the scan running", lambda: any(s["numActiveTasks"] > 0 for s in sc.rest(spark, "stages")))
    kill()
    killed_ms = time.time() * 1000
    t.join(timeout=300)
    assert not t.is_alive(), "the query hangs after the kill"
    assert "error" not in got, got.get("error")
    return got["sum"], killed_ms


def assert_tasks_succeeded_some_after(spark: Any, description: str, killed_ms: float) -> None:
    tasks = sc.scan_tasks(spark, description)
    assert len(tasks) == 8
    assert all(x["status"] == "SUCCESS" for x in tasks), [x["status"] for x in tasks]
    # Some tasks opened their files after the kill, through what was left.
    assert any(sc.spark_ms(x["launchTime"]) > killed_ms for x in tasks)


def test_the_leader_killed_mid_query_the_query_finishes_through_the_next(env) -> None:
    c, spark, client = env
    rows = 8000
    write_files(spark, client, "/leader/t", rows)
    first = sc.leader(c)
    assert first is not None
    total, killed_ms = slow_sum(spark, "/leader/t", "scan under a leader kill", lambda: c.kill(first))
    assert total == rows * (rows - 1) // 2
    assert_tasks_succeeded_some_after(spark, "scan under a leader kill", killed_ms)
    second = sc.wait_for("a new leader", lambda: sc.leader(c))
    assert second != first
    # Jobs are soft state: the new leader knew nothing of the query's job
    # until a renewal submitted it again; the query's end released it there.
    app = spark.sparkContext.applicationId
    jobs = [j for j in client.jobs()["jobs"] if j["origin"].startswith(f"spark {app} query")]
    [killed] = [j for j in jobs if "under a leader kill" in j["origin"]]
    assert killed["state"] == "ended", killed
    # The session's extension and file system reach the new leader: a query
    # after the failover submits its job there, and a write lands.
    spark.sparkContext.setJobDescription("scan after failover")
    try:
        assert spark.read.parquet("thaw:///leader/t").count() == rows
    finally:
        spark.sparkContext.setLocalProperty("spark.job.description", None)
    app = spark.sparkContext.applicationId
    assert [
        j
        for j in client.jobs()["jobs"]
        if j["origin"].startswith(f"spark {app} query") and "after failover" in j["origin"]
    ]
    spark.range(10).write.parquet("thaw:///leader/after")
    assert spark.read.parquet("thaw:///leader/after").count() == 10


def test_a_worker_killed_mid_scan_the_query_finishes_from_the_under_store(env) -> None:
    c, spark, client = env
    rows = 8000
    write_files(spark, client, "/kill/t", rows)
    total, killed_ms = slow_sum(spark, "/kill/t", "scan under a kill", lambda: c.kill("thaw-worker0"))
    assert total == rows * (rows - 1) // 2
    # The tasks that opened files after the kill read the dead worker's files
    # from the under-store, through the worker left.
    assert_tasks_succeeded_some_after(spark, "scan under a kill", killed_ms)
    assert sum(w["alive"] for w in client.status()["workers"]) == 1
