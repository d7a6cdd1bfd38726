"""thaw-spark-submit's decisions without Spark: the paths it records, the
command line a run and a rerun get, and its errors on bad input (the end to
end run, a killed worker's output rebuilt, is test_spark_lineage.py)."""

from __future__ import annotations

import json
import stat

import pytest

import thaw
from thaw import spark_submit as ss


def test_thaw_paths_are_namespace_paths() -> None:
    assert ss.thaw_path("thaw://10.0.0.1:19998/a/b.csv") == "/a/b.csv"
    assert ss.thaw_path("thaw:///a/b") == "/a/b"
    assert ss.thaw_path("/a/b") == "/a/b"
    with pytest.raises(ValueError, match="not a thaw:// path"):
        ss.thaw_path("s3a://bucket/a")
    with pytest.raises(ValueError, match="absolute"):
        ss.thaw_path("a/b")


def test_a_rerun_passes_thaws_recovery_to_the_executors_and_keeps_the_recorded_arguments() -> None:
    config = {"spark_submit": "/opt/spark/bin/spark-submit", "args": ["--master", "spark://h:7077", "job.py"]}
    first = ss.spark_argv(config, None, {})
    assert first == [
        "/opt/spark/bin/spark-submit",
        "--conf",
        "spark.sql.sources.commitProtocolClass=io.thaw.spark.LineageCommitProtocol",
        "--master",
        "spark://h:7077",
        "job.py",
    ]
    rerun = ss.spark_argv(config, "/tmp/d.conf", {"THAW_RECOVER_LINEAGE": "7", "THAW_MASTER": "m:1"})
    assert rerun[3:5] == ["--properties-file", "/tmp/d.conf"]
    assert "spark.executorEnv.THAW_RECOVER_LINEAGE=7" in rerun
    assert "spark.executorEnv.THAW_MASTER=m:1" in rerun
    assert rerun[-3:] == config["args"]


def test_bad_command_lines_say_what_is_wrong(capsys) -> None:
    with pytest.raises(SystemExit):
        ss.main(["--output", "thaw:///o/part-00000-c000.csv", "job.py"])
    assert "after --" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ss.main(["--", "job.py"])
    assert "--output" in capsys.readouterr().err


def test_a_rerun_refuses_a_configuration_it_did_not_record(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("THAW_LINEAGE_CONFIG", raising=False)
    with pytest.raises(SystemExit, match="THAW_LINEAGE_CONFIG"):
        ss.main(["rerun"])
    other = tmp_path / "config"
    other.write_text(json.dumps({"format": "thaw.lineage.step/1"}))
    monkeypatch.setenv("THAW_LINEAGE_CONFIG", str(other))
    with pytest.raises(SystemExit, match="not a thaw-spark-submit lineage"):
        ss.main(["rerun"])


def test_it_records_the_lineage_runs_spark_submit_and_a_rerun_runs_it_again(tmp_path, monkeypatch) -> None:
    # A stand-in spark-submit that notes its arguments and the rerun's variable.
    fake = tmp_path / "spark-submit"
    record = tmp_path / "calls"
    fake.write_text(f'#!/bin/sh\necho "$THAW_RECOVER_LINEAGE|$*" >> {record}\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    with thaw.LocalCluster(workers=1) as cluster:
        client = thaw.Client(cluster.master)
        client.write_bytes("/in/a.csv", b"x\n")
        client.write_bytes("/in/d/b.csv", b"y\n")
        client.write_bytes("/in/d/_SUCCESS", b"")
        entry, status = ss.submit(
            ["thaw:///in/a.csv", "/in/d"],
            ["thaw:///out/part-00000-c000.csv"],
            ["--master", "local", "job.py"],
            spark_submit=str(fake),
            client=client,
        )
        assert status == 0
        assert [i["path"] for i in entry["inputs"]] == ["/in/a.csv", "/in/d/b.csv"]
        assert [o["path"] for o in entry["outputs"]] == ["/out/part-00000-c000.csv"]
        assert entry["kind"] == "wide"
        config = client.native().lineage(entry["lineage_id"], "")["config"]
        recorded = json.loads(config)
        assert recorded["args"] == ["--master", "local", "job.py"]
        # What Thaw's workflow manager runs: the recorded job, with recovery on.
        where = tmp_path / "lineage-config"
        where.write_bytes(config)
        monkeypatch.setenv("THAW_LINEAGE_CONFIG", str(where))
        monkeypatch.setenv("THAW_RECOVER_LINEAGE", str(entry["lineage_id"]))
        assert ss.main(["rerun"]) == 0
    first, again = record.read_text().splitlines()
    assert first.startswith(f"|--conf spark.sql.sources.commitProtocolClass={ss.COMMIT_PROTOCOL}")
    assert first.endswith("--master local job.py")
    assert again.startswith(f"{entry['lineage_id']}|")
    assert f"spark.executorEnv.THAW_RECOVER_LINEAGE={entry['lineage_id']}" in again
    assert again.endswith("--master local job.py")
