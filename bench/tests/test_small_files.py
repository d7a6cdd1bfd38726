"""The small-file warm-up benchmark (``thaw_bench.scripts.small_files``) end to
end on a few hundred files: ``thaw migrate --wait`` brings every file into memory
(the script checks the job's counts and fails otherwise), the MEM tier empties
after the evict, the parallel direct read runs, and the results carry both
series and the ratio. Alluxio is left out (a ~200 MB download)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def test_every_file_reaches_memory_and_the_ratio_follows(tmp_path: Path) -> None:
    out = tmp_path / "small-files.json"
    cmd = [sys.executable, "-m", "thaw_bench.scripts.small_files", "--files", "600", "--size", "64KiB"]
    subprocess.run([*cmd, "--repeats", "2", "--no-alluxio", "--out", str(out)], check=True, timeout=600)
    doc = json.loads(out.read_text())
    assert (doc["files"], doc["size"]) == (600, 64 << 10)
    for series in ("thaw", "xargs"):
        assert len(doc["rounds_s"][series]) == 2 and all(v > 0 for v in doc["rounds_s"][series]), series
    assert doc["thaw_vs_xargs"] == pytest.approx(doc["median_s"]["xargs"] / doc["median_s"]["thaw"])
    assert "thaw_vs_alluxio" not in doc
