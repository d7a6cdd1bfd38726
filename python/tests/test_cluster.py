"""LocalCluster: found by Client(), stopped cleanly on exit, on error, and when
the Python process that owns it is killed -9; usable after fork."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import thaw


def _gone(pid: int, within: float = 20.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A child of this process is a zombie until reaped.
        try:
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def _mem_dirs(c: thaw.LocalCluster) -> list[Path]:
    return [Path(t["dir"]) for w in c.status()["workers"] for t in w["tiers"] if t["tier"] == "MEM"]


def test_client_finds_the_latest_cluster_and_it_stops_cleanly(cluster: thaw.LocalCluster) -> None:
    assert thaw.Client().master == cluster.master
    with thaw.LocalCluster(workers=1) as inner:
        assert inner.running and inner.master != cluster.master
        assert thaw.Client().master == inner.master
        assert thaw.ThawFileSystem().master == inner.master
        thaw.Client().write_bytes("/x", b"in memory")
        pid, mem, tmp, ufs = inner.pid, _mem_dirs(inner), inner._tmp, Path(inner.ufs)
        assert pid is not None and all(m.exists() for m in mem)
    assert not inner.running and _gone(pid)
    assert not any(m.exists() for m in mem), "tmpfs tier left behind"
    assert not Path(tmp).exists() and not ufs.exists()
    assert thaw.Client().master == cluster.master
    inner.close()  # idempotent


def test_an_error_in_the_block_still_stops_the_cluster(tmp_path: Path) -> None:
    ufs = tmp_path / "data"
    ufs.mkdir()
    (ufs / "kept.csv").write_text("a,b\n1,2\n")
    with pytest.raises(RuntimeError), thaw.LocalCluster(ufs=ufs) as c:
        pid = c.pid
        assert thaw.Client().cat("/kept.csv") == b"a,b\n1,2\n"
        raise RuntimeError("boom")
    assert pid is not None and _gone(pid)
    assert (ufs / "kept.csv").read_text() == "a,b\n1,2\n", "a given under-store is the user's: kept"


def test_the_cluster_dies_with_its_owner_even_on_kill_9(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time, thaw
        c = thaw.LocalCluster(workers=1)
        dirs = [t["dir"] for w in c.status()["workers"] for t in w["tiers"] if t["tier"] == "MEM"]
        print(c.pid, dirs[0], flush=True)
        time.sleep(600)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        pid_s, mem = owner.stdout.readline().split()
        pid = int(pid_s)
        assert Path(mem).exists()
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert _gone(pid), "the cluster outlived its owner"
        deadline = time.monotonic() + 10
        while Path(mem).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(mem).exists(), "tmpfs tier left behind"
    finally:
        owner.kill()


def test_a_cluster_starts_empty_unless_it_keeps_its_state(tmp_path: Path) -> None:
    # A memory-only file is in the namespace alone (no under-store copy).
    with thaw.LocalCluster(ufs=tmp_path / "ufs", block_size="1MiB") as c:
        thaw.Client(c.master).write_bytes("/m", b"x", write_type="must-cache")
    with thaw.LocalCluster(ufs=tmp_path / "ufs", block_size="1MiB") as c:
        assert not thaw.Client(c.master).exists("/m")
    state = tmp_path / "state"
    with thaw.LocalCluster(ufs=tmp_path / "ufs", block_size="1MiB", state_dir=state) as c:
        thaw.Client(c.master).write_bytes("/k", b"x", write_type="must-cache")
    assert (state / "journal").exists(), "the kept state stays"
    with thaw.LocalCluster(ufs=tmp_path / "ufs", block_size="1MiB", state_dir=state) as c:
        assert thaw.Client(c.master).exists("/k")


def test_a_cluster_that_cannot_start_says_why() -> None:
    with pytest.raises(thaw.ThawError, match="mem-capacity"):
        thaw.LocalCluster(mem_capacity="lots")
    with pytest.raises(ValueError):
        thaw.LocalCluster(workers=0)


def test_binary_lookup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert os.access(thaw.find_binary(), os.X_OK)
    monkeypatch.setenv("THAW_BIN", str(tmp_path / "nothing"))
    with pytest.raises(thaw.ThawError, match="THAW_BIN"):
        thaw.find_binary()


def _read_in_child(master: str, path: str, q: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    q.put(thaw.Client(master).cat(path))


def test_a_forked_child_gets_its_own_connections(client: thaw.Client, root: str) -> None:
    client.write_bytes(f"{root}/f", b"forked")
    assert client.cat(f"{root}/f") == b"forked"  # the parent's runtime is running
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_read_in_child, args=(client.master, f"{root}/f", q))
    p.start()
    try:
        assert q.get(timeout=30) == b"forked"
    finally:
        p.join(10)
    assert p.exitcode == 0


def test_the_dashboard_is_served_where_the_cluster_says(tmp_path: Path) -> None:
    import html
    import urllib.request

    options = {"mem_capacity": "32MiB", "block_size": "1MiB"}
    with thaw.LocalCluster(tmp_path / "ufs", workers=2, web_port=0, **options) as c:
        assert c.dashboard is not None and c.dashboard.startswith("http://127.0.0.1:")
        c.client().write_bytes("/d/<img src=x>", b"hello")
        with urllib.request.urlopen(c.dashboard, timeout=10) as r:
            home = r.read().decode()
        for w in c.status()["workers"]:
            assert w["address"] in home, home
        with urllib.request.urlopen(f"{c.dashboard}files?path=/d", timeout=10) as r:
            listing = r.read().decode()
        # The name shows as text: escaped in the page, itself once unescaped.
        assert "<img" not in listing and "><img src=x></a>" in html.unescape(listing), listing


def test_metrics_are_served_where_the_cluster_says(tmp_path: Path) -> None:
    import urllib.request

    with thaw.LocalCluster(tmp_path / "ufs", workers=2, mem_capacity="32MiB", metrics_port=0) as c:
        assert sorted(c.metrics) == ["master", "worker 1", "worker 2"]
        # Worker I of the cluster is worker I of the status.
        status = {w["id"]: w["metrics_address"] for w in c.status()["workers"]}
        assert status == {1: c.metrics["worker 1"], 2: c.metrics["worker 2"]}
        with urllib.request.urlopen(f"http://{c.metrics['worker 2']}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert 'thaw_worker_tier_capacity_bytes{tier="mem"} 33554432\n' in text, text
        with urllib.request.urlopen(f"http://{c.metrics['master']}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert 'thaw_master_workers{state="live"} 2\n' in text, text


def test_a_group_of_masters_serves_python_and_fsspec_clients(tmp_path: Path) -> None:
    import fsspec

    with thaw.LocalCluster(workers=1, masters=3, mem_capacity="64MiB") as c:
        addrs = c.master.split(",")
        assert len(addrs) == 3 and len(set(addrs)) == 3, c.master
        client = thaw.Client(c.master)
        client.write_bytes("/ha.txt", b"replicated", write_type="cache-through")
        assert client.cat("/ha.txt") == b"replicated"
        # One address alone: only the leader serves; the others say who leads.
        served = 0
        for a in addrs:
            try:
                thaw.Client(a).stat("/ha.txt")
                served += 1
            except thaw.ThawError as e:
                assert "not the leader" in str(e) or "no leader" in str(e), e
        assert served == 1
        fs = fsspec.filesystem("thaw", master=c.master)
        with fs.open("/ha.txt", "rb") as f:
            assert f.read() == b"replicated"
