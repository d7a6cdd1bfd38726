"""A local HDFS for the HDFS under-store: Hadoop's MiniDFSCluster (a NameNode
and DataNodes in one JVM, the same code as a production cluster), started
through ``scripts/hdfs/MiniHdfs.java`` as ``scripts/hdfs/setup.sh`` built it
(``make test`` runs that). The benchmarks run Thaw on it as on a real HDFS::

    with MiniHdfs() as hdfs, thaw.LocalCluster(ufs=hdfs.uri("/thaw")) as c:
        ...

It exits when the ``with`` block ends (its stdin closes).
"""

from __future__ import annotations

import os
import select
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

STARTUP_SECONDS = 120.0


def hdfs_home() -> Path:
    """Where ``scripts/hdfs/setup.sh`` put the jars and the launcher
    (``$THAW_HDFS_HOME``, else ``~/.cache/thaw/hdfs-3.4.1``)."""
    if home := os.environ.get("THAW_HDFS_HOME"):
        return Path(home)
    return Path.home() / ".cache" / "thaw" / "hdfs-3.4.1"


class MiniHdfs:
    """A MiniDFSCluster with ``datanodes`` DataNodes on a free loopback port;
    ``name_node`` is ``hdfs://127.0.0.1:PORT``, ``data_dir`` its storage (the
    DataNodes' block files: drop their pages for cold reads)."""

    def __init__(self, datanodes: int = 1) -> None:
        home = hdfs_home()
        if not (home / "classes" / "MiniHdfs.class").exists():
            raise FileNotFoundError(
                f"no MiniDFSCluster in {home}: scripts/hdfs/setup.sh makes it (it needs a JDK and Maven)"
            )
        self._dir = tempfile.TemporaryDirectory(prefix="thaw-hdfs-")
        self.data_dir = Path(self._dir.name) / "data"
        self._log = open(Path(self._dir.name) / "hdfs.log", "w")  # noqa: SIM115 (closed in close())
        self._proc = subprocess.Popen(
            [
                "java",
                "-Xmx768m",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp",
                f"{home}/lib/*:{home}/classes",
                "MiniHdfs",
                str(self.data_dir),
                "0",
                str(datanodes),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        out = self._proc.stdout
        assert out is not None  # stdout=PIPE above
        ready, _, _ = select.select([out], [], [], STARTUP_SECONDS)
        line = out.readline() if ready else ""
        prefix = "hdfs listening on "
        if not line.startswith(prefix):
            self.close()
            log = (Path(self._dir.name) / "hdfs.log").read_text() if Path(self._dir.name).exists() else ""
            raise RuntimeError(f"MiniHdfs did not start: {line!r}\n{log[-3000:]}")
        self.name_node = line[len(prefix) :].strip()

    def uri(self, path: str = "/") -> str:
        """``hdfs://127.0.0.1:PORT/path``"""
        return f"{self.name_node}/{path.lstrip('/')}"

    def close(self) -> None:
        if self._proc.poll() is None:
            if self._proc.stdin:
                self._proc.stdin.close()  # EOF: it shuts the cluster down
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()
        self._dir.cleanup()

    def __enter__(self) -> MiniHdfs:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
