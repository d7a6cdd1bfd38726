"""The trace analyses (Ignem II-C, DYRS II over the SWIM traces): on a small
trace written here, every figure equals its value worked out by hand; the
scheduler equals a one-task-at-a-time reference; bad traces and options fail
clearly; and ``python -m thaw_bench traces`` runs over both bundled traces."""

from __future__ import annotations

import heapq
import json
import random
from pathlib import Path

import numpy as np
import pytest

from thaw_bench import trace_analysis as ta
from thaw_bench import workloads
from thaw_bench.__main__ import main as bench_main

# id, submit s, gap s, input, shuffle, output bytes
TRACE = "j0\t0\t0\t200\t0\t0\nj1\t1\t1\t300\t100\t0\n\nj2\t1.5\t0.5\t50\t0\t0\nj3\t2.5\t1\t0\t0\t0\n"

# 2 machines of one slot; 100-byte blocks; disks at 100 B/s; tasks: no overhead,
# 100 B/s; 1 s start-up; 200 B of memory each; 10 s windows.
MODEL = ta.Model(
    nodes=2, mem_per_node=200, slots=1, block_size=100, disk_rate=100.0, startup=1.0,
    task_overhead=0.0, task_rate=100.0, window=10.0,
)  # fmt: skip


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    p = tmp_path / "tiny.tsv"
    p.write_text(TRACE)
    return p


def test_read_trace_gives_the_lines_and_swim_jobs_scales_them(trace: Path) -> None:
    jobs = workloads.read_trace(trace)
    assert [(j.id, j.submit, j.input, j.shuffle, j.output) for j in jobs] == [
        ("j0", 0.0, 200, 0, 0), ("j1", 1.0, 300, 100, 0), ("j2", 1.5, 50, 0, 0), ("j3", 2.5, 0, 0, 0),
    ]  # fmt: skip
    specs = workloads.swim_jobs(trace, jobs=3, byte_scale=0.5, time_scale=2.0)
    assert [(s.name, s.submit_at, s.input_bytes, s.shuffle_bytes) for s in specs] == [
        ("swim-j0", 0.0, 100, 0), ("swim-j1", 2.0, 150, 50), ("swim-j2", 3.0, 25, 0),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "line,error",
    [("j0\t1\t1\t5\t5", "5 tab-separated columns"), ("j0\t1\t1\tmany\t5\t5", "not a number"),
     ("j0\t1\t1\t-5\t5\t5", "negative")],
)  # fmt: skip
def test_a_bad_trace_line_is_a_clear_error(tmp_path: Path, line: str, error: str) -> None:
    p = tmp_path / "bad.tsv"
    p.write_text(TRACE + line + "\n")
    with pytest.raises(ValueError, match=rf"bad.tsv:6: .*{error}"):
        workloads.read_trace(p)


def test_the_schedule_by_hand(trace: Path) -> None:
    """j0: 2 maps of 1 s at 1 (its start-up). j1: 3 maps of 1 s from 2, two
    slots: 2, 2, 3; its reducer 4-5. j2 is released at 2.5 and waits for a slot
    until 3 (queued 0.5 s), ends 3.5. j3 (no input): one empty map at 3.5."""
    s = ta.simulate(workloads.read_trace(trace), MODEL)
    assert s.submit.tolist() == [0, 1, 1.5, 2.5]
    assert s.first_start.tolist() == [1, 2, 3, 3.5]
    assert s.maps.tolist() == [2, 3, 1, 1]
    assert s.end.tolist() == [2, 5, 3.5, 3.5]
    # Inputs held to the job's end: +200 at 0, +350 in [1, 2), -200 at 2, -50 at 3.5.
    assert s.held_to_end.tolist() == [200, 550, 350, 300, 300]
    # Each block until its map ends: j0's at 2, j1's at 3, 3 and 4, j2's at 3.5.
    assert s.held_to_read.tolist() == [200, 550, 350, 100, 0]
    # Input read, shuffle written and read, 3 x output written: 200 + 400 + 100 + 50 B.
    assert s.disk_bytes.tolist() == [pytest.approx(750)]


def test_the_papers_figures_by_hand(trace: Path) -> None:
    f = ta.analyse(workloads.read_trace(trace), MODEL)
    # Lead-times 1, 1, 1.5, 1; read-times from one disk 2, 3, 0.5, 0 s; from one
    # disk per map (2, 2, 1, 1 disks) 1, 1.5, 0.5, 0 s.
    assert (f["lead_mean_s"], f["lead_median_s"], f["jobs_queued"]) == (1.125, 1.0, 0.25)
    assert (f["jobs_lead_ge_read_one_disk"], f["jobs_lead_ge_read_spread"]) == (0.5, 0.75)
    assert f["bytes_within_lead_one_disk"] == pytest.approx(250 / 550)
    assert f["bytes_within_lead_spread"] == pytest.approx(450 / 550)
    assert f["jobs_input_within_startup_one_disk"] == 0.5
    assert (f["jobs_at_most_one_block"], f["jobs_without_input"]) == (0.5, 0.25)
    assert (f["largest_input_bytes"], f["input_share_of_largest_1pct"]) == (300, pytest.approx(300 / 550))
    # 750 B in one 10 s window of 2 disks at 100 B/s.
    assert (f["disk_util_mean"], f["disk_util_max"]) == (pytest.approx(0.375), pytest.approx(0.375))
    assert (f["disk_windows_under_4pct"], f["disk_windows_over_100pct"]) == (0, 0)
    assert f["cluster_memory_bytes"] == 400
    end, read = f["held_to_end"], f["held_to_read"]
    assert (end["peak_bytes"], end["mean_bytes"], read["mean_bytes"]) == (550, 340, 240)
    assert end["p99_bytes"] == pytest.approx(542)  # between 350 and 550, 96% of the way
    assert (end["peak_share_of_cluster"], end["peak_per_node_bytes"]) == (1.375, 275)
    assert (end["seconds_over_cluster_memory"], read["seconds_over_cluster_memory"]) == (1, 1)
    assert f["papers_worst_case_per_node_bytes"] == 100


def _reference(free: list[float], n: int, d: float, release: float) -> tuple[list[float], list[float]]:
    """FIFO list scheduling one task at a time."""
    heap = [(f, i) for i, f in enumerate(free)]
    heapq.heapify(heap)
    starts = []
    for _ in range(n):
        f, i = heapq.heappop(heap)
        starts.append(max(f, release))
        heapq.heappush(heap, (starts[-1] + d, i))
    return sorted(starts), sorted(max(f, release) for f, _ in heap)


def test_assign_equals_one_task_at_a_time() -> None:
    rnd = random.Random(30)
    for _ in range(2000):
        free = [
            rnd.choice([0.0, rnd.uniform(0, 20), float(rnd.randint(0, 5))]) for _ in range(rnd.randint(1, 12))
        ]
        n, d, release = rnd.randint(1, 40), rnd.choice([0.5, 1.0, rnd.uniform(0.1, 5)]), rnd.uniform(0, 10)
        got_free = np.array(free)
        got = sorted(ta.assign(got_free, n, d, release))
        want, want_free = _reference(free, n, d, release)
        assert got == pytest.approx(want), (free, n, d, release)
        # A slot free before the release is as good as one free at it.
        assert sorted(np.maximum(got_free, release)) == pytest.approx(want_free), (free, n, d, release)


def test_each_trace_gets_its_own_cluster_and_an_unknown_one_needs_nodes() -> None:
    a, b = workloads.SWIM_TRACES
    assert (ta.trace_label(a), ta.trace_label(b)) == ("FB-2009", "FB-2010")
    assert (ta.model_for(a).nodes, ta.model_for(b).nodes) == (600, 3000)
    with pytest.raises(ValueError, match=r"no machine count known for trace 'tiny'.*--nodes"):
        ta.model_for("tiny.tsv")
    assert ta.model_for("tiny.tsv", nodes=4).nodes == 4


def test_the_command_reports_a_trace_and_refuses_bad_options(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert bench_main(["traces", "--traces", str(trace), "--nodes", "2", "--out", str(out)]) == 0
    doc = json.loads((out / "traces" / "results.json").read_text())
    assert [r["tiny"] for r in doc["rows"] if r["measure"] == "jobs"] == ["4"]
    assert [r["tiny"] for r in doc["assumptions"] if r["assumption"] == "machines"] == ["2 (given)"]
    with pytest.raises(SystemExit, match="no machine count known"):
        bench_main(["traces", "--traces", str(trace), "--out", str(out)])
    with pytest.raises(SystemExit, match="not found"):
        bench_main(["traces", "--traces", "FB-1999.tsv", "--nodes", "2", "--out", str(out)])
    with pytest.raises(SystemExit, match="--disk 'fast'"):
        bench_main(["traces", "--traces", str(trace), "--nodes", "2", "--disk", "fast", "--out", str(out)])
    with pytest.raises(SystemExit, match="must be positive"):
        bench_main(["traces", "--traces", str(trace), "--nodes", "2", "--disk", "0MiB/s", "--out", str(out)])


def test_the_command_runs_on_both_bundled_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in workloads.SWIM_TRACES:  # shipped in the package (package-data traces/*)
        assert (Path(ta.__file__).parent / "traces" / name).is_file()
    assert bench_main(["traces", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    doc = json.loads((tmp_path / "traces" / "results.json").read_text())
    assert doc["section"] == ta.SECTION and doc["command"] == [
        f"python -m thaw_bench traces --out {tmp_path}"
    ]
    assert set(doc["traces"]) == {"FB-2009", "FB-2010"}
    for row in doc["rows"]:
        assert set(row) == {"measure", ta.PAPERS, "FB-2009", "FB-2010"}
        assert f"| {row['measure']} |" in printed
    jobs = next(r for r in doc["rows"] if r["measure"] == "jobs")
    assert (jobs["FB-2009"], jobs["FB-2010"]) == ("5,894", "24,442")
    for label, t in doc["traces"].items():
        f = t["figures"]
        assert t["file"].startswith(label) and f["jobs"] == len(workloads.read_trace(t["file"]))
        assert 0 < f["held_to_read"]["mean_bytes"] <= f["held_to_end"]["mean_bytes"]
        assert f["lead_median_s"] >= t["model"]["startup"]
