"""The Hadoop read benchmark (``thaw_bench.scripts.hadoop_read``) end to end on a
small file: real JVMs read through Hadoop's ``FileSystem.open`` from Thaw (local
and remote to the worker), the tmpfs baseline and cold from the under-store, and
the results file carries every series, medians and ratios. Alluxio is left out
(its jars are a ~200 MB download); the benchmark itself runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from thaw_bench import jvm

JAR = jvm.REPO / "java" / "thaw-hadoop" / "target" / "thaw-hadoop-0.1.0.jar"

pytestmark = [
    pytest.mark.skipif(shutil.which("javac") is None or shutil.which("mvn") is None, reason="no JDK/Maven"),
    pytest.mark.skipif(not JAR.exists(), reason="thaw-hadoop's jar is not built (scripts/java.sh)"),
]


def test_every_reader_reads_the_whole_file_and_the_ratios_follow(tmp_path: Path) -> None:
    out = tmp_path / "hadoop-read.json"
    cmd = [sys.executable, "-m", "thaw_bench.scripts.hadoop_read", "--size", "24MiB", "--repeats", "2"]
    subprocess.run([*cmd, "--no-alluxio", "--out", str(out)], check=True, timeout=600)
    doc = json.loads(out.read_text())
    assert doc["size"] == 24 << 20
    for series in ("tmpfs", "thaw-cold", "thaw-local", "thaw-remote"):
        assert len(doc["rounds"][series]) == 2, series
        assert all(v > 0 for v in doc["rounds"][series]), series
    med = doc["median"]
    assert doc["ratios"]["thaw-local / tmpfs"] == pytest.approx(med["thaw-local"] / med["tmpfs"])
    assert "thaw-cold / alluxio-cold" not in doc["ratios"]
