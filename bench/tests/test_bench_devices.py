"""The two Ignem experiments of :mod:`thaw_bench.devices` and
:mod:`thaw_bench.do_not_harm`, each in its quick configuration end to end on a
real emulated cluster (Thaw processes, a Dask worker per node): the report's
structure, and only orderings that physics fixes (a 1 MiB block cannot come off
a 12 MiB/s disk in under 83 ms; a worker with the rule on never evicts an
unread block), not timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thaw_bench import experiments as ex
from thaw_bench.__main__ import main as bench_main
from thaw_bench.cluster import ClusterSpec
from thaw_bench.devices import devices, parse_model
from thaw_bench.do_not_harm import do_not_harm
from thaw_bench.report import MEM_SOURCES, check_accounting
from thaw_bench.results import map_tasks

pytestmark = pytest.mark.timeout(300)

MiB = 1 << 20


def _bench(tmp_path: Path) -> ex.Bench:
    spec = ClusterSpec(heartbeat_ms=100)  # the harness's disk: 12 MiB/s, penalty 0.3; 1 MiB blocks
    return ex.Bench(spec=spec, out=tmp_path / "out", say=lambda _m: None, root=str(tmp_path / "cluster"))


def test_devices_quick_hdd_ssd_ram(tmp_path: Path) -> None:
    report = devices(_bench(tmp_path), quick=True)
    doc = json.loads((report.parent / "results.json").read_text())
    assert doc["experiment"] == "devices"
    assert [r["device"] for r in doc["runs"]] == ["hdd", "ssd", "ram"]
    for run in doc["runs"]:
        assert check_accounting(run) == [], run["run"]
        assert len(map_tasks(run)) == 16
    by = {r["device"]: r for r in doc["runs"]}
    # Where the bytes came from: the disks for HDD and SSD, memory for RAM.
    assert {t["source"] for t in map_tasks(by["hdd"])} == {"disk"}
    assert {t["source"] for t in map_tasks(by["ssd"])} == {"disk"}
    assert {t["source"] for t in map_tasks(by["ram"])} <= MEM_SOURCES
    s = doc["summary"]
    hdd, ssd, ram = (s["devices"][d]["block_read_s"] for d in ("hdd", "ssd", "ram"))
    # A block off the 12 MiB/s model takes at least 1 MiB / 12 MiB/s; off the
    # 48 MiB/s SSD model at least a quarter of that.
    assert min(t["read_end"] - t["start"] for t in map_tasks(by["hdd"])) >= 1 / 12 * 0.95
    assert min(t["read_end"] - t["start"] for t in map_tasks(by["ssd"])) >= 1 / 48 * 0.95
    assert hdd["mean"] > ram["mean"] and ssd["mean"] > 0
    assert s["ratios"]["block_read_hdd"]["ratio"] > 1
    text = report.read_text()
    assert "| RAM faster than | Thaw" in text and "160x" in text and "7x" in text and "23x" in text
    assert "no problems" in text
    assert (report.parent / "devices.png").stat().st_size > 0


def test_do_not_harm_quick_on_and_off(tmp_path: Path) -> None:
    report = do_not_harm(_bench(tmp_path), quick=True)
    doc = json.loads((report.parent / "results.json").read_text())
    runs = {r["config"]: r for r in doc["runs"]}
    assert set(runs) == {"cold", "ignem", "ignem-harm-off"}
    for run in runs.values():
        assert check_accounting(run) == [], run["run"]
        assert len(run["jobs"]) == 3
    cold, on, off = runs["cold"]["stats"], runs["ignem"]["stats"], runs["ignem-harm-off"]["stats"]
    assert cold["migrated"] == 0 and cold["mem_reads"] == 0
    # The decision both ways: with the rule no unread block is evicted; without
    # it, memory short of the inputs (6 blocks of buffer, 18 queued) makes
    # migrations evict unread ones.
    assert on["evicted_unread"] == 0 and on["mem_reads"] > 0
    assert off["evicted_unread"] > 0
    assert runs["ignem-harm-off"]["do_not_harm"] == "off"
    text = report.read_text()
    assert "migrated then evicted unread" in text and "no problems" in text


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="penalty=P"):
        parse_model("48MiB/s,speed=3")
    with pytest.raises(ValueError, match="at least 1"):
        devices(_bench(tmp_path), blocks=0)
    with pytest.raises(ValueError, match="idle or normal"):
        do_not_harm(_bench(tmp_path), migration_io="instant")
    with pytest.raises(SystemExit):
        bench_main(["devices", "--blocks", "many"])
