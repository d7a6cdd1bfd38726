"""Spark over ``thaw://`` (java/thaw-hadoop's FileSystem, java/thaw-spark's
extension) on a real Spark standalone cluster whose two workers sit on the
hosts of Thaw's two workers (127.0.0.2, 127.0.0.3; thaw/sparkcluster.py):
DataFrame and SQL reads and writes of parquet and CSV, byte for byte; every
write type; and a query whose inputs the extension migrated runs its scan
tasks where they are in memory, as Spark's task locality and Thaw's read
sources both say. One Spark application serves the whole module."""

from __future__ import annotations

import csv
import io
import threading

import pyarrow.parquet as pq
import pytest

import thaw
from thaw import sparkcluster as sc

REASON = sc.skip_reason() or (
    None
    if sc.has_filesystem()
    else "thaw-hadoop's jar has no io.thaw.hadoop.ThawFileSystem (the thaw:// FileSystem is not built here)"
)
pytestmark = [pytest.mark.spark, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

#: The job id every read of this application carries (fs.thaw.job).
READS = "spark-thaw-test-reads"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("spark-thaw")
    with sc.clusters(tmp) as c:
        spark = sc.session(c, "thaw-fs-test", **{"spark.hadoop.fs.thaw.job": READS})
        try:
            yield c, spark, thaw.Client(c.thaw), tmp
        finally:
            spark.stop()


def only_part(client: thaw.Client, directory: str) -> str:
    [part] = [e["path"] for e in client.ls(directory) if e["path"].rsplit("/", 1)[1].startswith("part-")]
    return part


def local_part(directory) -> bytes:
    [part] = [p for p in directory.iterdir() if p.name.startswith("part-")]
    return part.read_bytes()


def frame(spark, n: int = 5000):
    return spark.range(n).selectExpr("id", "CAST(id * 1.5 AS DOUBLE) AS v", "concat('s', id) AS s")


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_dataframe_writes_and_reads_through_thaw_byte_exact(env, fmt: str) -> None:
    _, spark, client, tmp = env
    df = frame(spark)
    getattr(df.coalesce(1).write.option("header", "true"), fmt)(f"thaw:///df/{fmt}")
    getattr(df.coalesce(1).write.option("header", "true"), fmt)(f"file://{tmp}/df-{fmt}")
    got, want = client.cat(only_part(client, f"/df/{fmt}")), local_part(tmp / f"df-{fmt}")
    if fmt == "csv":
        # Spark wrote the same bytes to Thaw as to a local directory.
        assert got == want
    else:
        # The same file but for the order parquet-mr lists a column's
        # encodings in (a hash set's, which varies between JVMs): the same
        # length, data and metadata, read by another implementation.
        assert len(got) == len(want)
        a, b = pq.ParquetFile(io.BytesIO(got)), pq.ParquetFile(io.BytesIO(want))
        assert a.read().equals(b.read())
        assert a.metadata.metadata == b.metadata.metadata
    # Spark's own read of the file through thaw:// gives Thaw's bytes.
    [blob] = spark.read.format("binaryFile").load(f"thaw://{only_part(client, f'/df/{fmt}')}").collect()
    assert bytes(blob["content"]) == got
    back = (
        spark.read.option("header", "true")
        .option("inferSchema", "true")
        .format(fmt)
        .load(f"thaw:///df/{fmt}")
    )
    assert sorted(back.collect()) == sorted(df.collect())


def test_spark_reads_what_thaw_holds_byte_exact(env) -> None:
    _, spark, client, _ = env
    text = "k,v\n" + "".join(f"{i},{'x' * (i % 17)}\n" for i in range(20000))
    client.write_bytes("/in/rows.csv", text.encode(), write_type="cache-through")
    rows = spark.read.option("header", "true").csv("thaw:///in/rows.csv").collect()
    want = list(csv.reader(io.StringIO(text)))[1:]
    assert sorted((r["k"], r["v"] or "") for r in rows) == sorted((k, v) for k, v in want)
    # Binary files come back as they are.
    [blob] = spark.read.format("binaryFile").load("thaw:///in/rows.csv").collect()
    assert bytes(blob["content"]) == text.encode()


def test_sql_reads_and_writes_parquet_and_csv_through_thaw(env) -> None:
    _, spark, client, tmp = env
    frame(spark, 3000).coalesce(1).write.parquet("thaw:///sql/src")
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW src USING parquet OPTIONS (path 'thaw:///sql/src')")
    spark.sql(
        "INSERT OVERWRITE DIRECTORY 'thaw:///sql/out' USING csv "
        "SELECT id, s FROM src WHERE id % 2 = 0 DISTRIBUTE BY 1"
    )
    spark.sql(
        f"INSERT OVERWRITE DIRECTORY 'file://{tmp}/sql-out' USING csv "
        "SELECT id, s FROM src WHERE id % 2 = 0 DISTRIBUTE BY 1"
    )
    assert client.cat(only_part(client, "/sql/out")) == local_part(tmp / "sql-out")
    n = spark.sql("SELECT count(*) FROM csv.`thaw:///sql/out`").collect()[0][0]
    assert n == 1500


@pytest.mark.parametrize("write_type", ["must-cache", "cache-through", "through", "async-through"])
def test_a_spark_write_with_each_write_type(env, write_type: str) -> None:
    _, spark, client, _ = env
    df = frame(spark, 2000)
    # Per write: the write type as a writer option, with the file system not
    # taken from Hadoop's cache (whose instance has the session's type).
    (
        df.repartition(2)
        .write.option("fs.thaw.write.type", write_type)
        .option("fs.thaw.impl.disable.cache", "true")
        .parquet(f"thaw:///wt/{write_type}")
    )
    parts = [e for e in client.ls(f"/wt/{write_type}") if e["path"].rsplit("/", 1)[1].startswith("part-")]
    assert len(parts) == 2
    for p in parts:
        assert client.stat(p["path"])["write_type"] == write_type
    back = spark.read.parquet(f"thaw:///wt/{write_type}")
    assert sorted(back.collect()) == sorted(df.collect())


def memory_hosts(client: thaw.Client, directory: str) -> dict[str, set[str]]:
    """Each part file's hosts holding all its blocks in memory."""
    out = {}
    for e in client.ls(directory, blocks=True):
        if not e["path"].rsplit("/", 1)[1].startswith("part-"):
            continue
        hosts = None
        for b in e["blocks"]:
            mem = {r["host"] for r in b["replicas"] if r["tier"] == "MEM"}
            hosts = mem if hosts is None else hosts & mem
        out[e["path"]] = hosts or set()
    return out


def run_scan(spark, path: str, description: str) -> int:
    spark.sparkContext.setJobDescription(description)
    try:
        return spark.read.parquet(path).selectExpr("sum(id)").collect()[0][0]
    finally:
        spark.sparkContext.setLocalProperty("spark.job.description", None)


def test_a_query_whose_inputs_were_migrated_scans_memory_local(env) -> None:
    _, spark, client, _ = env
    # One task per file (small files are otherwise packed into one task).
    spark.conf.set("spark.sql.files.openCostInBytes", str(128 << 20))
    df = spark.range(40000).selectExpr("id", "repeat(CAST(id AS STRING), 20) AS pad")
    # Cold inputs: four files in the under-store only.
    df.repartition(4).write.option("fs.thaw.write.type", "through").option(
        "fs.thaw.impl.disable.cache", "true"
    ).parquet("thaw:///cold/t")
    assert all(not h for h in memory_hosts(client, "/cold/t").values())
    total = 40000 * 39999 // 2
    # The extension migrates the query's inputs when it is planned and lists
    # again: the scan's locations are where the blocks go.
    assert run_scan(spark, "thaw:///cold/t", "first scan") == total
    app = spark.sparkContext.applicationId
    [job] = [
        j
        for j in client.jobs()["jobs"]
        if j["origin"].startswith(f"spark {app} query") and "first scan" in j["origin"]
    ]
    job = sc.wait_for(
        "the first scan's job ended",
        lambda: (j := client.job(job["job_id"], ended=True)) and j["ended"] and j,
    )
    assert job["blocks"] == 4
    # Its scan tasks waited for the hosts the migration was placing their
    # blocks on (the relisting's locations), rather than running anywhere.
    first = sc.scan_tasks(spark, "first scan")
    assert len(first) == 4
    for t in first:
        assert t["taskLocality"] == "NODE_LOCAL", t
    # The query may end before its last migration does (its job's release
    # drops what is still pending): make sure every block is in memory now,
    # held there by a job of the test's until the end (releasing it would
    # evict what it migrated).
    client.migrate("/cold/t", "warm")
    client.wait_migrated("warm", timeout=60)
    hosts = memory_hosts(client, "/cold/t")
    assert all(len(h) == 1 for h in hosts.values()), hosts
    # Inputs in memory: a new query's scan tasks run where they are, and read them from memory.
    before = client.job_stats(READS)
    assert run_scan(spark, "thaw:///cold/t", "second scan") == total
    after = client.job_stats(READS)
    tasks = sc.scan_tasks(spark, "second scan")
    assert len(tasks) == 4, tasks
    placed = {t["host"] for t in tasks}
    assert placed <= set(sc.HOSTS)
    for t in tasks:
        assert t["taskLocality"] == "NODE_LOCAL", t
    assert {h for hs in hosts.values() for h in hs} == placed
    read = after["bytes_read"] - before["bytes_read"]
    assert read > 0
    assert after["bytes_from_memory"] - before["bytes_from_memory"] == read
    assert after["bytes_cold"] == before["bytes_cold"]
    client.evict("warm")


def test_a_query_queued_behind_another_gets_its_inputs_into_memory_while_it_waits(env) -> None:
    _, spark, client, _ = env
    spark.conf.set("spark.sql.files.openCostInBytes", str(128 << 20))
    df = spark.range(40000).selectExpr("id", "repeat(CAST(id AS STRING), 20) AS pad")
    df.repartition(4).write.option("fs.thaw.write.type", "through").option(
        "fs.thaw.impl.disable.cache", "true"
    ).parquet("thaw:///queued/t")
    assert all(not h for h in memory_hosts(client, "/queued/t").values())

    def blocker() -> None:
        # Both executor cores busy for 10 s: the next query's tasks wait in the FIFO pool.
        spark.sparkContext.setJobDescription("blocker")
        spark.range(0, 2, 1, 2).selectExpr("reflect('java.lang.Thread', 'sleep', 10000L)").collect()

    t = threading.Thread(target=blocker)
    t.start()
    try:
        sc.wait_for(
            "the blocker running", lambda: any(s["numActiveTasks"] == 2 for s in sc.rest(spark, "stages"))
        )
        # Listed before the query, its schema given (inferring it would run a
        # Spark job, which would queue behind the blocker first).
        table = spark.read.schema("id BIGINT, pad STRING").parquet("thaw:///queued/t")
        before = client.job_stats(READS)
        spark.sparkContext.setJobDescription("queued scan")
        try:
            assert table.selectExpr("sum(id)").collect()[0][0] == 40000 * 39999 // 2
        finally:
            spark.sparkContext.setLocalProperty("spark.job.description", None)
        after = client.job_stats(READS)
    finally:
        t.join()
    # Submitted when it was planned, its cold inputs were in memory by the time
    # its tasks got a core: every byte it read came from memory.
    read = after["bytes_read"] - before["bytes_read"]
    assert read > 0
    assert after["bytes_from_memory"] - before["bytes_from_memory"] == read
    app = spark.sparkContext.applicationId
    [job] = [
        j
        for j in client.jobs()["jobs"]
        if j["origin"].startswith(f"spark {app} query") and "queued scan" in j["origin"]
    ]
    tasks = sc.scan_tasks(spark, "queued scan")
    assert min(sc.spark_ms(x["launchTime"]) for x in tasks) - job["submitted_ms"] > 1000
    for x in tasks:
        assert x["taskLocality"] == "NODE_LOCAL", x
