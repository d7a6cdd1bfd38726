"""A harness killed mid-run leaves no Dask scheduler behind: the scheduler
process of :func:`thaw_bench.runner.start_dask` dies with the process that
started it (it used to outlive a killed harness, found after kill -9 runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

SCRIPT = """
import sys
from thaw_bench.runner import start_dask
cluster, client = start_dask([("n0", "r0")], 1)
print(cluster.scheduler.process.pid, flush=True)
sys.stdin.read()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for its reaper is gone too
        return f.read().split(") ", 1)[1][0] != "Z"


@pytest.mark.timeout(120)
def test_a_killed_harness_takes_its_dask_scheduler_with_it() -> None:
    harness = subprocess.Popen(
        [sys.executable, "-c", SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert harness.stdout is not None
        pid = int(harness.stdout.readline())
        assert _alive(pid)
        harness.send_signal(signal.SIGKILL)
        harness.wait(10)
        deadline = time.monotonic() + 20
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pid), f"the scheduler {pid} outlived the killed harness"
    finally:
        harness.kill()
