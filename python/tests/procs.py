"""Thaw servers as separate processes for tests that kill them (kill -9)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import thaw
from thaw.cluster import find_binary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(
    tmp_path: Path, name: str, args: list[str], env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Starts ``thaw ARGS``, its output appended to ``tmp_path/NAME.log``."""
    log = open(tmp_path / f"{name}.log", "ab")  # noqa: SIM115
    return subprocess.Popen(
        [find_binary(), *args], stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
    )


def alive_workers(client: thaw.Client) -> int:
    """Workers the master counts alive (0 while it is not listening yet)."""
    try:
        return sum(w["alive"] for w in client.status()["workers"])
    except thaw.errors.Unavailable:
        return 0


def lossy_cluster(
    tmp_path: Path, master_flags: Sequence[str] = (), env: dict[str, str] | None = None
) -> tuple[str, list[subprocess.Popen[bytes]]]:
    """A master and two workers (hosts h0 and h1) as processes, 1 MiB blocks,
    whose checkpoints never finish (1 KiB/s): a file written beside h0 lives
    only in worker 0's memory (``procs[1]``) until someone kills it. Returns the
    master's address and the processes (master first)."""
    port = free_port()
    addr = f"127.0.0.1:{port}"
    master_args = [
        "master", "--ufs", str(tmp_path / "ufs"), "--journal-dir", str(tmp_path / "journal"),
        "--port", str(port), "--bind", "127.0.0.1", "--heartbeat-ms", "200", "--worker-timeout-ms", "1500",
        "--block-size", "1MiB", *master_flags,
    ]  # fmt: skip
    procs = [spawn(tmp_path, "master", master_args, env)]
    for i in range(2):
        worker_args = [
            "worker", "--master", addr, "--host", f"h{i}", "--mem-dir", str(tmp_path / f"mem{i}"),
            "--mem-capacity", "64MiB", "--port", "0", "--bind", "127.0.0.1", "--checkpoint-bandwidth", "1KiB",
        ]  # fmt: skip
        procs.append(spawn(tmp_path, f"worker{i}", worker_args))
    return addr, procs


@contextlib.contextmanager
def cli_gateway(master: str, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """A ``thaw gateway`` process of its own on a free port: yields its
    endpoint URL once it listens; stopped (SIGTERM) after."""
    cmd = [find_binary(), "gateway", "--master", master, "--port", "0", *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("thaw gateway listening on "), line
        yield "http://" + line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(timeout=15)
