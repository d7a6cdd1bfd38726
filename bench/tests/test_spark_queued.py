"""The queued Spark SQL benchmark (``thaw_bench.scripts.spark_queued``) end to
end at a tiny scale: real Spark and Thaw clusters, a blocker holding both
cores, TPC-H Q6 queued behind it in each configuration; every configuration
gives the same answer, the extension's run reads only memory and runs its
scan tasks node-local, and the results file carries the medians and ratios."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from thaw import sparkcluster as sc

REASON = sc.skip_reason() or (None if sc.has_filesystem() else "thaw-hadoop's jar has no ThawFileSystem")
pytestmark = [pytest.mark.serial, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def test_each_configuration_answers_and_the_extension_reads_memory_only(tmp_path: Path) -> None:
    out = tmp_path / "spark-queued.json"
    cmd = [sys.executable, "-m", "thaw_bench.scripts.spark_queued", "--sf", "0.02", "--part-size", "1MiB"]
    cmd += ["--ufs-rate", "2MiB/s", "--wait", "6", "--repeats", "1", "--data", str(tmp_path / "tpch")]
    r = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    doc = json.loads(out.read_text())
    runs = {r["config"]: r for r in doc["runs"]}
    assert set(runs) == {"ufs", "thaw", "thaw-dyrs", "memory"}
    dyrs = runs["thaw-dyrs"]
    assert dyrs["thaw_bytes_read"] > 0
    assert dyrs["thaw_bytes_from_memory"] == dyrs["thaw_bytes_read"]
    assert dyrs["node_local"] == dyrs["scan_tasks"] > 0
    assert runs["thaw"]["thaw_bytes_cold"] > 0
    assert set(doc["ratios"]) == {"thaw-dyrs / memory (run)", "thaw / memory (run)", "ufs / memory (run)"}
