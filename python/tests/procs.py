"""Thaw servers as separate processes for tests that kill them (kill -9)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

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
