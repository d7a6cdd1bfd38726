"""``python -m thaw_bench paper --quick`` (``make bench-paper-quick``): every
section of ``make bench-paper`` in its small configuration, as a separate
process the way the make target runs it (``--only`` a group of sections per
test, so the groups run side by side). Checks that every section ran (the
network ones only as root: skipped with the reason otherwise), wrote the
results files it names, and that the index lists each with its time; and the
runner's own decisions: ``--only``/``--skip``, an unknown name, a failing
section recorded while the rest still run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from thaw.cluster import find_binary
from thaw_bench import paper
from thaw_bench.experiments import Bench

ROOT = Path(__file__).resolve().parents[2]


def _thaw_bench_bin() -> str:
    """The ``thaw-bench`` binary Tachyon's section runs: ``THAW_BENCH_BIN``, else
    the debug build's (``make test`` builds it), else the release build's."""
    named = os.environ.get("THAW_BENCH_BIN")
    if named:
        return named
    for profile in ("debug", "release"):
        path = ROOT / "target" / profile / "thaw-bench"
        if path.is_file():
            return str(path)
    pytest.fail(
        "no thaw-bench binary: `cargo test --workspace --no-run` or `cargo build -p thaw-bench` builds it"
    )


#: The sections in groups of about a minute each (seconds of a quick run on
#: two cores in brackets), one test each: the groups run at once on the
#: test session's workers instead of one after another in one test. The
#: network sections share a group.
GROUPS = {
    "tachyon": ["tachyon"],  # 89
    "cava-scheduled": ["traces", "scheduled", "cava"],  # 55
    "devices-network": ["devices", "swim-network", "locality"],  # 49
    "swim": ["swim", "swim-queueing", "swim-fb2010", "do-not-harm"],  # 48
    "jobs": ["sort", "wordcount", "interference", "sql"],  # 33
}
SECONDS = {"tachyon": 89, "cava-scheduled": 55, "devices-network": 49, "swim": 48, "jobs": 33}


def test_the_groups_hold_every_section_once() -> None:
    grouped = [name for names in GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(s.name for s in paper.SECTIONS)


@pytest.mark.timeout(960)
@pytest.mark.parametrize(
    "group", [pytest.param(g, marks=pytest.mark.early(SECONDS[g])) for g in GROUPS]
)  # fmt: skip
def test_quick_run_of_every_section(tmp_path: Path, group: str) -> None:
    out = tmp_path / "paper"
    env = dict(os.environ, THAW_BIN=find_binary(), THAW_BENCH_BIN=_thaw_bench_bin())
    only = ",".join(GROUPS[group])
    cmd = [sys.executable, "-m", "thaw_bench", "paper", "--quick", "--only", only, "--out", str(out)]
    proc = subprocess.run(
        [*cmd, "--root", str(tmp_path / "c")], capture_output=True, text=True, timeout=900, env=env, cwd=ROOT
    )
    tail = (proc.stdout[-6000:], proc.stderr[-6000:])
    assert proc.returncode == 0, tail
    doc = json.loads((out / "index.json").read_text())
    assert doc["quick"] is True
    by_name = {s["section"]: s for s in doc["sections"]}
    chosen = [s for s in paper.SECTIONS if s.name in GROUPS[group]]
    assert list(by_name) == [s.name for s in chosen], tail
    index = (out / "index.md").read_text()
    root = os.geteuid() == 0
    for section in chosen:
        rec = by_name[section.name]
        assert f"| {section.name} | {section.paper} |" in index
        if section.network and not root:
            assert rec["status"] == "skipped" and "root" in rec["reason"], rec
            continue
        assert rec["status"] == "ok", rec
        assert rec["files"], rec
        for f in rec["files"]:
            path = out / f
            assert path.is_file() and path.stat().st_size > 0, (section.name, f)
            assert f.startswith(section.name + "/"), (section.name, f)
            assert f in index
        assert rec["seconds"] > 0
    assert doc["total_seconds"] >= sum(s["seconds"] for s in doc["sections"]) - 1
    assert "Total:" in index


def _bench(tmp_path: Path) -> Bench:
    return Bench(out=tmp_path / "paper", say=lambda _m: None)


def test_a_failing_section_is_recorded_and_the_rest_run(tmp_path: Path) -> None:
    def boom(bench: Bench, quick: bool) -> Path:
        raise RuntimeError("the cluster did not start")

    def writes(bench: Bench, quick: bool) -> Path:
        bench.out.mkdir(parents=True)
        path = bench.out / "results.json"
        path.write_text(json.dumps({"quick": quick}))
        return path

    def nothing(bench: Bench, quick: bool) -> list[Path]:
        return [bench.out / "never-written.json"]

    sections = [
        paper.Section("boom", "a figure", boom),
        paper.Section("ok", "another figure", writes),
        paper.Section("missing", "a third", nothing),
    ]
    doc = paper.run_paper(_bench(tmp_path), sections, quick=True, command="test")
    status = {s["section"]: s["status"] for s in doc["sections"]}
    assert status == {"boom": "failed", "ok": "ok", "missing": "failed"}
    assert "the cluster did not start" in doc["sections"][0]["error"]
    assert "do not exist" in doc["sections"][2]["error"]
    assert doc["sections"][1]["files"] == ["ok/results.json"]
    assert json.loads((tmp_path / "paper" / "ok" / "results.json").read_text()) == {"quick": True}
    index = (tmp_path / "paper" / "index.md").read_text()
    assert "| boom | a figure | failed: RuntimeError: the cluster did not start |" in index
    assert json.loads((tmp_path / "paper" / "index.json").read_text())["sections"][2]["status"] == "failed"


def test_a_network_section_without_root_is_skipped_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    ran: list[str] = []

    def net(bench: Bench, quick: bool) -> Path:
        ran.append(str(bench.spec.network))
        return bench.out

    doc = paper.run_paper(_bench(tmp_path), [paper.Section("net", "Fig. 3", net, network=True)])
    assert ran == []
    assert doc["sections"][0]["status"] == "skipped"
    assert "needs root" in doc["sections"][0]["reason"]


def _record_network(bench: Bench, quick: bool) -> Path:
    """A section that writes down the network it was given and its process."""
    bench.out.mkdir(parents=True)
    path = bench.out / "r.json"
    path.write_text(json.dumps({"network": bench.spec.network, "pid": os.getpid()}))
    return path


def test_network_sections_run_in_a_process_of_their_own_on_the_network(tmp_path: Path) -> None:
    sections = [paper.Section("lo", "x", _record_network)]
    if os.geteuid() == 0:
        sections.append(paper.Section("net", "y", _record_network, network=True))
    doc = paper.run_paper(_bench(tmp_path), sections, network="host=10MiB/s")
    assert [s["status"] for s in doc["sections"]] == ["ok"] * len(sections), doc
    lo = json.loads((tmp_path / "paper" / "lo" / "r.json").read_text())
    assert lo == {"network": None, "pid": os.getpid()}
    if os.geteuid() == 0:
        net = json.loads((tmp_path / "paper" / "net" / "r.json").read_text())
        assert net["network"] == "host=10MiB/s" and net["pid"] != os.getpid()


def test_only_and_skip_choose_sections_and_unknown_names_are_errors() -> None:
    names = [s.name for s in paper.select(paper.SECTIONS, ["sort", "traces"], None)]
    assert names == ["traces", "sort"]  # the registry's order, not the option's
    names = [s.name for s in paper.select(paper.SECTIONS, None, ["cava", "tachyon"])]
    assert "cava" not in names and "tachyon" not in names and "swim" in names
    with pytest.raises(ValueError, match="unknown section nope: expected some of traces"):
        paper.select(paper.SECTIONS, ["nope"], None)


def test_the_command_rejects_an_unknown_section(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "thaw_bench", "paper", "--only", "swim,nope", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "unknown section nope" in proc.stderr
    assert not (tmp_path / "index.json").exists()
