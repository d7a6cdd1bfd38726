"""The README's Python example runs as written (from the repository root)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from thaw.cluster import find_binary

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_example_runs() -> None:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "no Python example in the README"
    out = subprocess.run(
        [sys.executable, "-c", blocks[0]], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "'job_id': 'daily-report'" in out.stdout


def test_the_readme_pipeline_is_rebuilt_after_its_worker_is_killed(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text()
    (block,) = re.findall(r"```sh\n(# pipeline-example.*?)```", text, re.S)
    env = dict(os.environ, PATH=f"{Path(find_binary()).parent}:{os.environ['PATH']}")
    # If a step fails, the servers it started in the background go too (and
    # on a timeout, its whole process group).
    script = "trap 'kill -9 $(jobs -p) 2>/dev/null' EXIT\n" + block
    p = subprocess.Popen(
        ["bash", "-e", "-c", script], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        stdout, stderr = p.communicate()
    out = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert out.stdout.endswith("APPLE\nFIG\nPEAR\n"), out.stdout
