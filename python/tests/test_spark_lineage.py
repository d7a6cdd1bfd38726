"""Tachyon's framework wrapper for Spark (section 2.4) end to end:
``thaw-spark-submit`` records a Spark job's lineage (its input's file id, its
output file, the spark-submit command line and configuration) and runs it; the
job writes its output ``async-through`` (in memory, its checkpoint held back
here), the Thaw worker holding it is killed, and Thaw's workflow manager
resubmits the Spark job, whose write rebuilds the lost file in place, byte for
byte. Real processes throughout: a Spark standalone cluster beside a Thaw
cluster (thaw/sparkcluster.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import thaw
from thaw import sparkcluster as sc

REASON = sc.skip_reason() or (
    None
    if sc.has_filesystem()
    else "thaw-hadoop's jar has no io.thaw.hadoop.ThawFileSystem (the thaw:// FileSystem is not built here)"
)
pytestmark = [pytest.mark.spark, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

JOB = """\
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("lineage-job").getOrCreate()
df = spark.read.option("header", "true").csv(sys.argv[1])
out = df.selectExpr("upper(name) AS name", "CAST(n AS INT) * 2 AS n")
out.write.mode("overwrite").option("header", "true").csv(sys.argv[2])
spark.stop()
"""


def test_a_lost_async_through_spark_output_is_rebuilt_by_resubmitting_the_job(tmp_path) -> None:
    # Checkpoints never finish (1 KiB/s): the output lives in one worker's memory only.
    with sc.clusters(tmp_path, thaw_worker_flags=("--checkpoint-bandwidth", "1KiB")) as c:
        client = thaw.Client(c.thaw)
        rows = "name,n\n" + "".join(f"item{i},{i}\n" for i in range(5000))
        client.write_bytes("/in/items.csv", rows.encode(), write_type="cache-through")
        job = tmp_path / "job.py"
        job.write_text(JOB)
        conf = sc.session_conf(c, **{"spark.hadoop.fs.thaw.write.type": "async-through"})
        del conf["spark.sql.extensions"], conf["spark.extraListeners"], conf["spark.ui.port"]
        spark_args = [f"--conf={k}={v}" for k, v in conf.items() if k != "spark.master"]
        output = "/out/part-00000-c000.csv"
        run = subprocess.run(
            [
                sys.executable, "-m", "thaw.spark_submit", "--master", c.thaw,
                "--input", "thaw:///in/items.csv", "--output", f"thaw://{output}",
                "--", "--master", c.spark, *spark_args, str(job), "thaw:///in/items.csv", "thaw:///out",
            ],
            capture_output=True, text=True, timeout=240, cwd=tmp_path, check=False,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-4000:]
        info = client.stat(output, blocks=True)
        assert info["write_type"] == "async-through"
        lineage = thaw.lineage.get(output, client=client)
        assert lineage["lineage_id"] == info["lineage_id"] > 0
        assert [i["path"] for i in lineage["inputs"]] == ["/in/items.csv"]
        assert lineage["command"][1:] == ["-m", "thaw.spark_submit", "rerun"]
        first = client.cat(output)
        assert first.splitlines()[:2] == [b"name,n", b"ITEM0,0"]
        # Kill the Thaw worker whose memory holds it.
        [host] = {r["host"] for b in info["blocks"] for r in b["replicas"] if r["tier"] == "MEM"}
        c.kill(f"thaw-worker{sc.HOSTS.index(host)}")
        # The workflow manager reruns thaw-spark-submit, which resubmits the job.
        rebuilt = sc.wait_for(
            "the output rebuilt",
            lambda: (s := client.stat(output)) and s.get("rebuilds", 0) >= 1 and not s["lost"] and s,
            timeout=200,
        )
        assert rebuilt["file_id"] == info["file_id"]
        assert client.cat(output) == first
        # What reran was the Spark job, resubmitted (the rerun's own log).
        [log] = (tmp_path / "journal" / "recompute").glob(f"lineage-{info['lineage_id']}-attempt-*.log")
        assert "lineage-job" in log.read_text(errors="replace")
