"""The SWIM replay's bounds and ablations: instant migration (Ignem, Fig. 7),
Ignem with prioritisation off, DYRS, Fig. 10's naive load balancing, the
reachable bound and the memory footprint, and trace selection.

The configurations run on a small emulated cluster (real Thaw processes, one
Dask worker per node, a modelled 1 MiB/s disk): each test checks the decision a
configuration makes (what the master plans with, whether a copy is paced,
where a block goes), not how fast anything is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from thaw_bench import bounds
from thaw_bench import experiments as ex
from thaw_bench.cluster import ClusterSpec
from thaw_bench.configs import CONFIGS
from thaw_bench.report import check_accounting, write_report
from thaw_bench.workloads import DEFAULT_TRACE, swim_jobs, trace_label, trace_tag

MiB = 1 << 20
BLOCK = 256 << 10
DISK = 1 * MiB  # bytes/s: a paced copy of a block takes 250 ms


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """One 2 MiB sort job (8 blocks) with a 1.5 s start-up, under each of the
    new configurations and Ignem, on 3 nodes."""
    tmp = tmp_path_factory.mktemp("bounds")
    spec = ClusterSpec(
        nodes=3, slots=2, disk="1MiB/s", block_size="256KiB", mem_capacity="64MiB", heartbeat_ms=100
    )
    bench = ex.Bench(spec=spec, out=tmp / "out", say=lambda _m: None, root=str(tmp / "cluster"))
    report = ex.single(bench, "sort", [2 * MiB], [1.5], ["ignem", "instant", "ignem-fifo", "naive"])
    doc = json.loads((report.parent / "results.json").read_text())
    return {r["config"]: r for r in doc["runs"]}


pytestmark = pytest.mark.timeout(600)


def _done(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in run["migrations"] if m["outcome"] == "done"]


def test_every_configuration_reads_its_input_exactly_once(runs: dict[str, dict[str, Any]]) -> None:
    assert set(runs) == {"ignem", "instant", "ignem-fifo", "naive"}
    for run in runs.values():
        assert check_accounting(run) == [], run["run"]
        assert {m["block_id"] for m in _done(run)} <= set(run["jobs"][0]["blocks"])


def test_the_master_plans_as_each_configuration_says(runs: dict[str, dict[str, Any]]) -> None:
    """Ignem migrates smaller jobs first by default; the ablation turns it off;
    naive is the master's own policy, in DYRS's FIFO order."""
    assert runs["ignem"]["planner"] == {"policy": "ignem", "priority": "smallest-job-first"}
    assert runs["ignem-fifo"]["planner"] == {"policy": "ignem", "priority": "fifo"}
    assert runs["naive"]["planner"] == {"policy": "naive", "priority": "fifo"}
    assert runs["instant"]["planner"]["policy"] == "ignem"
    assert runs["instant"]["migration_io"] == "instant" and runs["ignem"]["migration_io"] == "idle"
    assert runs["instant"]["eviction"] == "explicit" and runs["ignem"]["eviction"] == "implicit"


def test_instant_migration_is_not_paced_and_the_others_are(runs: dict[str, dict[str, Any]]) -> None:
    paced = BLOCK / DISK  # 0.25 s a block through the device model
    instant = _done(runs["instant"])
    assert len({m["block_id"] for m in instant}) == 8, "every block migrated within the start-up"
    # Each side of the same line (0.8 of a paced copy): an instant copy of 256 KiB
    # takes milliseconds, but a loaded two-core machine once took 138 ms over one.
    assert max(m["end"] - m["start"] for m in instant) < 0.8 * paced, instant
    for cfg in ("ignem", "naive"):
        done = _done(runs[cfg])
        assert done, cfg
        assert min(m["end"] - m["start"] for m in done) >= 0.8 * paced, (cfg, done)
    # So its map tasks all read from memory; every block was there before the first.
    maps = [t for t in runs["instant"]["tasks"] if t["kind"] == "map"]
    assert {t["source"] for t in maps} <= {"mem", "mem-remote"}
    assert max(m["end"] for m in instant) <= min(t["start"] for t in maps)


def test_naive_binds_to_replica_holders_and_spreads_by_count(runs: dict[str, dict[str, Any]]) -> None:
    run = runs["naive"]
    (job,) = run["jobs"]
    holders = dict(zip(job["blocks"], job["holders"], strict=True))
    done = _done(run)
    assert all(m["node"] in holders[m["block_id"]] for m in done)
    # With every node holding a replica of most blocks and equal disks, the
    # fewest-outstanding rule leaves no node out.
    assert len({m["node"] for m in done}) >= 2, done


def test_the_report_carries_both_bounds_and_the_footprint(
    runs: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    doc = {"experiment": "sort", "title": "t", "params": {"nodes": 3, "disk": "1MiB/s", "penalty": 0.3,
           "block_size": BLOCK}, "runs": list(runs.values())}  # fmt: skip
    text = write_report(doc, tmp_path).read_text()
    assert "Reachable in lead time" in text and "Footprint vs instant" in text
    summary = json.loads((tmp_path / "summary.json").read_text())
    st = summary["scenarios"]["homogeneous"]["configs"]
    # 1.5 s of lead over 3 disks at 1 MiB/s reaches the whole 2 MiB input.
    assert st["instant"]["bounds"]["reachable_share"] == pytest.approx(1.0)
    assert st["instant"]["bounds"]["mem_bytes_share"] == pytest.approx(1.0)
    assert st["instant"]["bounds"]["footprint"]["max"] > 0


# -- the bounds' arithmetic, on records written by hand --------------------------------


def _run(scenario: str, lead: float, holders: list[list[str]], size: int) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "jobs": [{"job": "j", "submit": 1.0, "input_bytes": size, "holders": holders}],
        "tasks": [
            {
                "kind": "map",
                "job": "j",
                "start": 1.0 + lead + i,
                "bytes": size // len(holders),
                "source": "disk",
            }
            for i in range(len(holders))
        ],
        "samples": [{"buffer_used": x} for x in (0, 0, MiB, 3 * MiB)],
    }


PARAMS = {"nodes": 3, "disk": "12MiB/s", "penalty": 0.3, "node_disks": {"2": "6MiB/s"}}


def test_a_migration_stream_s_rate_follows_the_device_model_and_the_scenario() -> None:
    rates = bounds.stream_rates(PARAMS, "homogeneous")
    assert rates == {"node0": 12 * MiB, "node1": 12 * MiB, "node2": 6 * MiB}
    # Two dd streams on node0: the disk gives 12/(1+0.3*2), shared by three.
    assert bounds.stream_rates(PARAMS, "slow-node")["node0"] == pytest.approx(12 * MiB / 1.6 / 3)
    # Alternating: on half the time.
    alt = bounds.stream_rates(PARAMS, "alt10")["node0"]
    assert alt == pytest.approx((12 * MiB / 1.6 / 3 + 12 * MiB) / 2)


def test_reachable_is_lead_time_times_the_holders_disks_capped_at_the_input() -> None:
    # 0.5 s of lead, blocks on node1 and node2 (12 + 6 MiB/s): 9 MiB of a 64 MiB input.
    r = bounds.reachable(_run("homogeneous", 0.5, [["node1"], ["node2", "node1"]], 64 * MiB), PARAMS)
    assert r["reachable_bytes"] == pytest.approx(9 * MiB)
    assert r["jobs"]["j"]["lead_s"] == pytest.approx(0.5)
    # A long lead reaches it all, no more.
    r = bounds.reachable(_run("homogeneous", 30.0, [["node1"]], 64 * MiB), PARAMS)
    assert r["reachable_bytes"] == 64 * MiB
    # A job whose first task started at once could have had nothing.
    assert bounds.reachable(_run("homogeneous", 0.0, [["node1"]], MiB), PARAMS)["reachable_bytes"] == 0


def test_the_footprint_counts_non_zero_samples_only() -> None:
    fp = bounds.footprint([_run("homogeneous", 0, [["node0"]], MiB)])
    assert fp is not None
    assert fp["mean"] == 2 * MiB and fp["max"] == 3 * MiB and fp["nonzero_share"] == 0.5


# -- configurations and traces ---------------------------------------------------------


def test_the_new_configurations_are_what_they_say() -> None:
    assert CONFIGS["instant"].migration_io == "instant" and CONFIGS["instant"].plugin == "migrate"
    assert CONFIGS["ignem-fifo"].policy == "ignem" and CONFIGS["ignem-fifo"].priority == "fifo"
    assert CONFIGS["ignem"].priority is None  # the master's default for ignem: smallest job first
    assert CONFIGS["naive"].policy == "naive"


def test_a_run_is_titled_by_its_trace() -> None:
    assert ex.swim_name(DEFAULT_TRACE, 200, 0.0) == (
        "swim",
        "SWIM: the first 200 jobs of " + trace_label(DEFAULT_TRACE),
    )
    name, title = ex.swim_name("FB-2010_samples_24_times_1hr_0.tsv", 40, 1.0)
    assert name == "swim-FB-2010-startup1s"
    assert "Facebook 2010 trace" in title and "2009" not in title and "40 jobs" in title
    assert trace_tag("/some/where/my_trace.tsv") == "my" and "my_trace.tsv" in trace_label("x/my_trace.tsv")


def test_the_2010_trace_ships_with_the_package() -> None:
    jobs = swim_jobs("FB-2010_samples_24_times_1hr_0.tsv", jobs=40)
    assert len(jobs) == 40 and jobs[0].name == "swim-job0"
    assert jobs[2].trace["input"] == 53088744165
