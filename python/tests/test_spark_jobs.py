"""The Spark integration's jobs (java/thaw-spark), on a real Spark standalone
cluster beside a real Thaw cluster (thaw/sparkcluster.py): the session
extension submits a query's files after partition pruning as one Thaw job
before the query runs, renews it while it runs and releases it when it ends
or fails; the listener does the same for RDD jobs.

Spark reads the files here from Thaw's under-store directory (``file://``)
with the extension's ``file`` scheme mapped onto Thaw's root
(``spark.thaw.migrate.localRoot``): what is tested is the job a query
submits, not the ``thaw://`` file system (test_spark_thaw.py tests that).
One Spark application serves the whole module."""

from __future__ import annotations

import pytest

import thaw
from thaw import sparkcluster as sc

REASON = sc.skip_reason()
pytestmark = [pytest.mark.spark, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

LEASE_MS = 1500


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory):
    with sc.clusters(tmp_path_factory.mktemp("spark-jobs")) as c:
        spark = sc.session(
            c,
            "thaw-jobs-test",
            **{
                "spark.thaw.migrate.schemes": "thaw,file",
                "spark.thaw.migrate.localRoot": str(c.ufs),
                "spark.thaw.lease.ms": str(LEASE_MS),
            },
        )
        try:
            # A table of three partitions, two files each, in the under-store.
            df = spark.range(600).selectExpr("id", "id % 3 AS part", "repeat('x', 100) AS pad")
            df.repartition(2).write.partitionBy("part").parquet(f"file://{c.ufs}/tables/t")
            yield c, spark, thaw.Client(c.thaw)
        finally:
            spark.stop()


def app_jobs(client: thaw.Client, spark, kind: str) -> list[dict]:
    """This application's Thaw jobs of a kind: "query" or "job" (RDD)."""
    app = spark.sparkContext.applicationId
    return [j for j in client.jobs()["jobs"] if j["origin"].startswith(f"spark {app} {kind} ")]


def ended(client: thaw.Client, job_id: str) -> dict:
    return sc.wait_for(
        f"job {job_id} ended", lambda: (j := client.job(job_id, ended=True)) and j["state"] == "ended" and j
    )


def test_a_query_submits_its_pruned_files_before_it_runs_renews_and_releases(env) -> None:
    c, spark, client = env
    spark.sparkContext.setJobDescription("pruned scan")
    try:
        # Each task sleeps longer than the job's lease: only renewals keep it.
        rows = (
            spark.read.parquet(f"file://{c.ufs}/tables/t")
            .where("part = 1")
            .selectExpr("id", f"reflect('java.lang.Thread', 'sleep', CAST({2 * LEASE_MS} AS BIGINT)) AS z")
            .groupBy()
            .count()
            .collect()
        )
    finally:
        spark.sparkContext.setLocalProperty("spark.job.description", None)
    assert rows[0][0] == 200
    [job] = [j for j in app_jobs(client, spark, "query") if "pruned scan" in j["origin"]]
    execution = int(job["job_id"].rsplit("-", 1)[1])
    app = spark.sparkContext.applicationId
    assert job["job_id"] == f"spark-{app}-{execution}"
    assert job["origin"] == f"spark {app} query {execution} pruned scan"
    job = ended(client, job["job_id"])
    # Released by the query's end, not by its lease running out mid-query.
    assert job["end_reason"] == "evicted", job
    # Partition pruning: the files of part=1 only (one block each), all moved.
    pruned = sorted((c.ufs / "tables" / "t" / "part=1").glob("*.parquet"))
    assert len(pruned) == 2
    assert job["blocks"] == len(pruned)
    assert job["blocks_migrated"] == len(pruned)
    # Submitted before any of the query's Spark jobs was.
    sql = sc.rest(spark, f"sql/{execution}")
    spark_jobs = [sc.rest(spark, f"jobs/{j}") for j in sql["successJobIds"]]
    assert spark_jobs
    first = min(sc.spark_ms(j["submissionTime"]) for j in spark_jobs)
    assert job["submitted_ms"] <= first, (job["submitted_ms"], first)
    # The listener leaves SQL executions' jobs to the extension.
    assert not app_jobs(client, spark, "job")


def test_a_failing_query_releases_its_job(env) -> None:
    c, spark, client = env
    spark.sparkContext.setJobDescription("failing scan")
    try:
        with pytest.raises(Exception, match="boom"):
            spark.read.parquet(f"file://{c.ufs}/tables/t").where("part = 2").selectExpr(
                "raise_error(concat('boom ', id))"
            ).collect()
    finally:
        spark.sparkContext.setLocalProperty("spark.job.description", None)
    [job] = [j for j in app_jobs(client, spark, "query") if "failing scan" in j["origin"]]
    job = ended(client, job["job_id"])
    assert job["end_reason"] == "evicted", job
    assert job["blocks"] == 2


def test_explain_submits_nothing(env) -> None:
    c, spark, client = env
    before = len(app_jobs(client, spark, "query"))
    spark.read.parquet(f"file://{c.ufs}/tables/t").where("part = 0").explain()
    assert len(app_jobs(client, spark, "query")) == before


def test_a_session_turns_submission_off_and_on_between_queries(env) -> None:
    c, spark, client = env

    def count(description: str) -> int:
        spark.sparkContext.setJobDescription(description)
        try:
            return spark.read.parquet(f"file://{c.ufs}/tables/t").where("part = 0").count()
        finally:
            spark.sparkContext.setLocalProperty("spark.job.description", None)

    spark.conf.set("spark.thaw.migrate.enabled", "false")
    try:
        assert count("scan while off") == 200
    finally:
        spark.conf.set("spark.thaw.migrate.enabled", "true")
    assert count("scan when on again") == 200
    origins = [j["origin"] for j in app_jobs(client, spark, "query")]
    assert not [o for o in origins if "scan while off" in o]
    assert [o for o in origins if "scan when on again" in o]


def test_an_rdd_job_over_files_submits_its_inputs_and_releases_them(env) -> None:
    c, spark, client = env
    logs = c.ufs / "logs"
    logs.mkdir()
    for i in range(3):
        (logs / f"day{i}.txt").write_text("ok\nERROR disk\n" * 50)
    (logs / "other.csv").write_text("not matched by the glob\n")
    errors = spark.sparkContext.textFile(f"file://{logs}/day*.txt").filter(lambda s: "ERROR" in s).count()
    assert errors == 150
    [job] = app_jobs(client, spark, "job")
    app = spark.sparkContext.applicationId
    assert job["job_id"].startswith(f"spark-{app}-job")
    assert "count at" in job["origin"]
    job = ended(client, job["job_id"])
    assert job["end_reason"] == "evicted", job
    assert job["blocks"] == 3  # the glob's three files, not other.csv
