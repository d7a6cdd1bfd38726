"""Thaw servers as separate processes for tests that kill them (kill -9)."""

from __future__ import annotations

import os
import socket
import subprocess
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
