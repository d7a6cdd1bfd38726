"""The emulated cluster on emulated hosts with a network (``thaw_bench.netlab``,
``ClusterSpec.network``): a small cluster on the network runs a job whose
processes sit in their nodes' namespaces; its namespaces are gone after it
ends, and within seconds of a kill -9 of the harness; the CAVA locality
experiment reads each level's input from where the level says, on loopback and
on the network. The network tests need root and a `thaw` with the `netlab`
command; they are skipped otherwise, saying which."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from thaw.cluster import find_binary
from thaw_bench import netlab
from thaw_bench.netlab import NetLab, NetLabError, Place


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root: the emulated hosts are network namespaces"
    try:
        out = subprocess.run([find_binary(), "netlab", "--help"], capture_output=True, timeout=30)
    except Exception as e:
        return f"no thaw binary: {e}"
    if out.returncode != 0:
        return "this thaw has no `netlab` command"
    return None


needs_lab = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))

ROOT = Path(__file__).resolve().parents[2]


def _gone(names: list[str], timeout: float = 10.0) -> list[str]:
    """Which of ``names`` ``ip netns list`` still shows after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        left = [n for n in names if n in netlab.netns_list()]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_not_root_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(NetLabError, match="needs root"):
        NetLab([Place("a", "h", "r")], "none", binary="/bin/true").start()


def test_bad_places_are_refused() -> None:
    with pytest.raises(NetLabError, match="repeat"):
        NetLab([Place("a", "h", "r"), Place("a", "h2", "r")], binary="/bin/true")
    with pytest.raises(NetLabError, match="bad node place"):
        Place("a b", "h", "r").arg()


def test_enter_refuses_with_threads_running() -> None:
    lab = NetLab([Place("a", "h", "r")], binary="/bin/true")
    lab.nodes = {"a": netlab.LabNode("a", "no-such-ns", "198.18.0.1", "h", "r")}
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        with pytest.raises(NetLabError, match="before any client or thread"):
            lab.enter("a")
    finally:
        stop.set()
        t.join()


# A harness on the network: two nodes on two hosts and racks, node1's disk
# holding the input, node0's Dask worker reading it. Prints what it saw, then
# (with "hold") waits to be killed.
CHILD = r"""
import json, os, sys, time, zlib
from thaw.client import Client
from thaw_bench.cluster import ClusterSpec, EmulatedCluster
from thaw_bench.netdask import start_dask_on
from thaw_bench.runner import stop_dask

def ino(path):
    return os.stat(path).st_ino

def read_task(master, path):
    c = Client(master, "net-job", read_cache="none")
    with c.open(path) as f:
        data = f.read()
        stats = f.stats()
    return {"crc": zlib.crc32(data), "bytes": len(data), "stats": stats,
            "netns": ino("/proc/self/ns/net"), "host": os.environ.get("THAW_HOST"),
            "worker": os.environ.get("THAW_WORKER")}

spec = ClusterSpec(nodes=2, racks=2, slots=1, disk="400MiB/s", block_size="256KiB", heartbeat_ms=100,
                   network=sys.argv[1], short_circuit=False)
ec = EmulatedCluster(spec)
dc = dask = None
try:
    ec.start("dyrs")
    lab = ec.lab
    w = Client(ec.master, host="node1", rack="rack1", worker=ec.addresses["node1"])
    data = os.urandom(1 << 20)
    with w.open("/in", "wb", write_type="replicated:1", block_size=256 << 10) as f:
        f.write(data)
    dc, dask = start_dask_on(ec, 1, nodes=["node0"])
    got = dask.submit(read_task, ec.master, "/in", pure=False).result()
    out = {
        "lab": lab.id,
        "netns": {n: x.netns for n, x in lab.nodes.items()},
        "ns_ino": {n: ino(f"/var/run/netns/{x.netns}") for n, x in lab.nodes.items()},
        "addresses": {n: x.address for n, x in lab.nodes.items()},
        "self_ns": ino("/proc/self/ns/net"),
        "procs": {n: (p.pid, ino(f"/proc/{p.pid}/ns/net")) for n, p, _ in ec._procs},
        "dask_pids": list(dask.run(os.getpid).values()) + [p.pid for _, p in dc.procs],
        "master": ec.master, "workers": ec.addresses, "crc": zlib.crc32(data), "task": got,
        "dirs": [str(ec.root), str(ec.mem_root), str(dc.logs)],
    }
    print(json.dumps(out), flush=True)
    if sys.argv[2] == "hold":
        time.sleep(600)
finally:
    stop_dask(dc, dask)
    ec.close()
"""


def _child(mode: str, network: str = "host=100MiB/s,rack=200MiB/s") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, network, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, THAW_BIN=find_binary()),
        cwd=ROOT,
    )


def _seen(proc: subprocess.Popen[str]) -> dict:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(30)
        raise AssertionError(f"the harness ended ({proc.returncode}) saying:\n{proc.stderr.read()[-3000:]}")
    return json.loads(line)


@needs_lab
def test_a_cluster_on_the_network_runs_a_job_and_leaves_nothing() -> None:
    proc = _child("exit")
    try:
        seen = _seen(proc)
        assert proc.wait(120) == 0, proc.stderr.read()[-3000:] if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    ns = seen["ns_ino"]
    # The harness in node driver, the master and each worker in their own node.
    assert seen["self_ns"] == ns["driver"]
    for name, (_, ino) in seen["procs"].items():
        assert ino == ns[name], f"{name} is not in its node's namespace"
    assert seen["master"].split(":")[0] == seen["addresses"]["master"]
    assert seen["workers"]["node1"].split(":")[0] == seen["addresses"]["node1"]
    # The task ran in node0, reading node1's disk over the network, right bytes.
    task = seen["task"]
    assert task["netns"] == ns["node0"]
    assert task["worker"] == seen["workers"]["node0"]
    assert task["crc"] == seen["crc"] and task["bytes"] == 1 << 20
    assert task["stats"].get("remote_disk", 0) == 1 << 20, task["stats"]
    assert _gone(list(seen["netns"].values())) == []


@needs_lab
def test_kill_9_of_the_harness_leaves_nothing_behind() -> None:
    proc = _child("hold")
    try:
        seen = _seen(proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    pids = [p for p, _ in seen["procs"].values()] + seen["dask_pids"]
    try:
        assert _gone(list(seen["netns"].values())) == []
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [p for p in pids if _alive(p)] == []
    finally:
        for d in seen["dirs"]:  # a killed harness cannot remove its directories
            shutil.rmtree(d, ignore_errors=True)


def _locality(tmp_path: Path, network: list[str]) -> dict:
    out = subprocess.run(
        [
            sys.executable, "-m", "thaw_bench", "locality", *network, "--kinds", "grep", "--blocks", "2",
            "--repeats", "1", "--block-size", "256KiB", "--disk", "50MiB/s", "--out", str(tmp_path),
        ],
        capture_output=True, text=True, timeout=280, env=dict(os.environ, THAW_BIN=find_binary()), cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    doc = json.loads((tmp_path / "locality" / "results.json").read_text())
    runs = {r["level"]: r for r in doc["runs"]}
    assert set(runs) == {"vm-ml", "pm-ml", "rm-ml", "off-rack-ml", "vm-dl"}
    assert all(r["source_ok"] for r in runs.values()), runs
    assert runs["vm-dl"]["bytes_mem"] == 0 and runs["vm-ml"]["bytes_mem"] == runs["vm-ml"]["bytes"]
    # The report holds both tables, one row per level.
    report = (tmp_path / "locality" / "report.md").read_text()
    assert report.count("| VM ML") == 2 and "| VM DL: map total, s" in report, report
    return doc


def test_locality_on_loopback_reads_each_level_from_its_source(tmp_path: Path) -> None:
    doc = _locality(tmp_path, [])
    assert "network" not in doc["cluster"]


@needs_lab
def test_locality_reads_each_level_from_its_source(tmp_path: Path) -> None:
    doc = _locality(tmp_path, ["--network", "host=100MiB/s,rack=100MiB/s"])
    assert _gone(list(doc["cluster"]["network"]["netns"].values())) == []


@pytest.mark.early(21)
@needs_lab
def test_the_cava_command_runs_on_the_network(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable, "-m", "thaw_bench", "cava", "--tiny", "--network", "host=100MiB/s",
            "--experiments", "workloads", "--policies", "lru", "--workloads", "W1", "--out", str(tmp_path),
        ],
        capture_output=True, text=True, timeout=280, env=dict(os.environ, THAW_BIN=find_binary()), cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    doc = json.loads((tmp_path / "results.json").read_text())
    assert '"failed": ' not in json.dumps(doc["workloads"]), doc["workloads"]
    workers = {w["address"].split(":")[0] for r in _runs(doc["workloads"]) for w in r["cache"]["workers"]}
    assert workers and all(a.startswith("198.18.") for a in workers), workers
    assert any(r["hit_ratio"] for r in _runs(doc["workloads"])), "LRU cached nothing"


def _runs(node: object) -> list[dict]:
    """Every run record (a dict with "cache" and "hit_ratio") inside ``node``."""
    if isinstance(node, dict):
        if "cache" in node and "hit_ratio" in node:
            return [node]
        return [r for v in node.values() for r in _runs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _runs(v)]
    return []
