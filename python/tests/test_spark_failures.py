"""Spark over ``thaw://`` when Thaw fails under it: a Thaw worker killed
(SIGKILL) while a query scans files it holds in memory; the scan goes on from
the files' under-store copies through the worker that is left, and no Spark
task fails (Thaw's client fails over, not Spark's task retries). A Spark
standalone cluster beside a Thaw cluster, as processes (thaw/sparkcluster.py)."""

from __future__ import annotations

import threading
import time

import pytest

import thaw
from thaw import sparkcluster as sc

REASON = sc.skip_reason() or (
    None if sc.has_filesystem() else "thaw-hadoop's jar has no io.thaw.hadoop.ThawFileSystem"
)
pytestmark = [pytest.mark.serial, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def test_a_worker_killed_mid_scan_the_query_finishes_from_the_under_store(tmp_path) -> None:
    with sc.clusters(tmp_path) as c:
        spark = sc.session(c, "thaw-failures", **{"spark.sql.files.openCostInBytes": str(128 << 20)})
        try:
            client = thaw.Client(c.thaw)
            rows = 8000
            df = spark.range(rows).selectExpr("id", "repeat(CAST(id AS STRING), 20) AS pad")
            # Eight files in memory on both workers, each with its under-store copy.
            df.repartition(8).write.option("fs.thaw.write.type", "cache-through").parquet("thaw:///kill/t")
            files = [e for e in client.ls("/kill/t", blocks=True) if e["name"].startswith("part-")]
            assert len(files) == 8 and all(e["persisted"] for e in files)
            holders = {r["host"] for e in files for b in e["blocks"] for r in b["replicas"]}
            assert holders == set(sc.HOSTS), holders
            got: dict[str, object] = {}

            def scan() -> None:
                spark.sparkContext.setJobDescription("scan under a kill")
                try:
                    # 4 ms a row: each task takes about 4 s, eight on two cores.
                    # (a filter: a projection nobody reads would be pruned away)
                    q = spark.read.parquet("thaw:///kill/t").where(
                        "length(coalesce(reflect('java.lang.Thread', 'sleep', 4L), '')) >= 0"
                    )
                    got["sum"] = q.groupBy().sum("id").collect()[0][0]
                except Exception as e:  # the assertion below shows it
                    got["error"] = e

            t = threading.Thread(target=scan)
            t.start()
            sc.wait_for(
                "the scan running", lambda: any(s["numActiveTasks"] > 0 for s in sc.rest(spark, "stages"))
            )
            c.kill("thaw-worker0")
            killed_ms = time.time() * 1000
            t.join(timeout=300)
            assert not t.is_alive(), "the query hangs after the kill"
            assert "error" not in got, got.get("error")
            assert got["sum"] == rows * (rows - 1) // 2
            tasks = sc.scan_tasks(spark, "scan under a kill")
            assert len(tasks) == 8
            assert all(x["status"] == "SUCCESS" for x in tasks), [x["status"] for x in tasks]
            # Some tasks opened their files after the kill: they read the dead
            # worker's files from the under-store, through the worker left.
            assert any(sc.spark_ms(x["launchTime"]) > killed_ms for x in tasks)
            assert sum(w["alive"] for w in client.status()["workers"]) == 1
        finally:
            spark.stop()
