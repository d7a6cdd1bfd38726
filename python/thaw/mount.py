"""``thaw mount`` from Python: the namespace as a read-only file system while a
``with`` block runs, so programs that only take paths (DuckDB's own
``read_parquet``, pyarrow, shell tools) read Thaw memory::

    with thaw.Mount("/mnt/thaw", master=cluster.master) as m:
        duckdb.sql(f"SELECT count(*) FROM read_parquet('{m.path}/sales/*.parquet')")
    print(m.served)   # what the mount served: opens, bytes from local block files, ...
"""

from __future__ import annotations

import os
import select
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from .cluster import find_binary
from .errors import ThawError


class Mount:
    """Runs ``thaw mount MOUNTPOINT`` (``args``: more of its flags) until the block
    ends, then stops it (it unmounts on SIGTERM) and keeps its summary in ``served``.
    ``master``: the cluster's address (default ``THAW_MASTER``); ``timeout``: for
    mounting and for unmounting."""

    def __init__(
        self,
        mountpoint: str | os.PathLike[str],
        master: str | None = None,
        *,
        args: list[str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.path = Path(mountpoint)
        self.served = ""
        self.returncode: int | None = None
        self._timeout = timeout
        cmd = [find_binary(), "mount", str(self.path), *(args or [])]
        if master:
            cmd += ["--master", master]
        # A file, not a pipe: a chatty mount must never block on a full pipe.
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed in close())
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log, text=True
        )
        # It prints one line once mounted, or exits; a mount that does neither
        # within the timeout is given up on, not waited for.
        out = self._proc.stdout
        assert out is not None  # a pipe: stdout=PIPE above
        ready, _, _ = select.select([out], [], [], timeout)
        line = out.readline() if ready else ""
        if not line.startswith("thaw mounted on"):
            self._proc.kill()
            self._proc.wait()
            why = self._log_text().strip() or "it did not mount in time"
            self._log.close()
            raise ThawError(f"thaw mount {self.path} failed: {why}")

    def _log_text(self) -> str:
        self._log.seek(0)
        return self._log.read()

    def close(self) -> None:
        """Unmounts (SIGTERM to ``thaw mount``; a lazy unmount if it does not stop)."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(self._timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
                subprocess.run([find_binary(), "umount", "--lazy", str(self.path)], check=False)
        self.returncode = self._proc.returncode
        if not self._log.closed:
            text = self._log_text()
            self.served = next((line for line in text.splitlines() if "served" in line), "")
            self._log.close()

    def __enter__(self) -> Mount:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
