"""``thaw://`` for fsspec, and through it for pandas, pyarrow, Dask and DuckDB.

Paths: ``thaw:///dir/file`` (the cluster from :func:`thaw.client.default_master`)
or ``thaw://host:port/dir/file`` (that master). Data moves between Thaw and the
caller's buffers only, never through a local temporary file. ``info`` carries
each block's replicas (``blocks``) and :meth:`ThawFileSystem.block_locations`
gives them HDFS-style, for schedulers that place tasks by locality.
"""

from __future__ import annotations

import atexit
import datetime
import os
import re
import sys
import threading
import time
from typing import Any

from fsspec.callbacks import DEFAULT_CALLBACK, Callback
from fsspec.spec import AbstractFileSystem
from fsspec.utils import tokenize

from . import _arrow_errors
from .client import Client, ThawFile, ThawWriter

_GLOB = re.compile(r"[*?\[]")
_MASTER_NETLOC = re.compile(r"^[A-Za-z0-9_.\-]+:\d+$|^\[[0-9A-Fa-f:.]+\]:\d+$")
_COPY_CHUNK = 8 << 20


def _entry(d: dict[str, Any]) -> dict[str, Any]:
    """A Thaw status dict in fsspec's shape (name, size, type), Thaw's fields kept."""
    out = {
        "name": d["path"],
        "size": d["length"] if d["type"] == "file" else 0,
        "type": d["type"],
        "mtime": d["mtime_ms"] / 1000.0,
    }
    for k in (
        "file_id",
        "block_size",
        "complete",
        "persisted",
        "persistence",
        "temporary",
        "persist_error",
        "lost",
        "write_type",
        "in_memory_bytes",
    ):
        out[k] = d[k]
    if d.get("blocks"):
        out["blocks"] = [
            {
                "offset": b["offset"],
                "length": b["length"],
                "hosts": sorted({r["host"] for r in b["replicas"]}),
                "replicas": b["replicas"],
            }
            for b in d["blocks"]
        ]
    return out


# pyarrow releases what a read through an fsspec filesystem leaves (its
# wrapper of the filesystem, the file) on its own threads, a moment after the
# read returns; one that does it after the interpreter has begun to shut down
# takes the GIL from a C++ thread and aborts the process ("terminate called
# without an active exception", exit code -6), or hangs it (apache/arrow
# issues 34314 and 39162; a plain Python file object shows it too). A process
# that read through Thaw with pyarrow loaded waits this long at exit, the GIL
# released, for those threads to finish: measured with a script that reads a
# parquet file with pandas and exits, 4 of 60 runs failed without it.
_EXIT_GRACE_S = 0.2
_exit_grace = threading.Lock()
_exit_grace_registered = False


def _wait_for_arrow_threads() -> None:
    time.sleep(_EXIT_GRACE_S)


def _register_exit_grace() -> None:
    global _exit_grace_registered
    if _exit_grace_registered or "pyarrow" not in sys.modules:
        return
    with _exit_grace:
        if not _exit_grace_registered:
            atexit.register(_wait_for_arrow_threads)
            _exit_grace_registered = True


class ThawFileSystem(AbstractFileSystem):
    """fsspec filesystem over a Thaw cluster.

    ``master``: host:port (default: see :func:`thaw.client.default_master`).
    ``job_id``: job id of this filesystem's reads and writes; given, it always
    wins (default: the enclosing :func:`thaw.job`, else ``THAW_JOB_ID``).
    ``write_type``: how new files are written (must-cache, async-through,
    cache-through, through, replicated:N); ``open(..., temporary=True)`` marks an
    async-through file never to be persisted unless asked.
    ``block_size``: block size of new files (default: the master's).
    ``tls_ca``: the CA of a cluster serving TLS (default: ``THAW_TLS_CA``).
    ``token``/``secret_file``: credentials on a cluster with a secret (default:
    the environment's; see :class:`thaw.Client`); they travel with the
    filesystem when it is pickled (to Dask workers).
    """

    protocol = "thaw"
    root_marker = "/"
    # The master is resolved when a filesystem is made, so a cached instance could
    # outlive the cluster it points at; instances are cheap (connections are shared).
    cachable = False

    def __init__(
        self,
        master: str | None = None,
        job_id: str | None = None,
        write_type: str = "cache-through",
        block_size: int | None = None,
        client: Client | None = None,
        token: str | None = None,
        secret_file: str | None = None,
        tls_ca: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.client = client or Client(master, job_id, token=token, secret_file=secret_file, tls_ca=tls_ca)
        self.master = self.client.master
        self.write_type = write_type
        self.default_block_size = int(block_size or 0)
        # pyarrow, if loaded, reports a missing file with the server's message.
        _arrow_errors.install(ThawFileSystem)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled into other processes (Dask workers) with the resolved master.
        opts = {
            "master": self.master,
            "job_id": self.client._job_id,
            "write_type": self.write_type,
            "block_size": self.default_block_size or None,
            # Credentials travel with the file system (to Dask workers).
            "token": self.client._settings[5],
            "secret_file": self.client._settings[6],
            "tls_ca": self.client._settings[7],
        }
        return (_make_fs, (opts,))

    # -- paths ----------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = os.fspath(path) if isinstance(path, os.PathLike) else str(path)
        if path.startswith("thaw://"):
            rest = path[len("thaw://") :]
            netloc, _, tail = rest.partition("/")
            path = "/" + tail if _MASTER_NETLOC.match(netloc) else "/" + rest
        path = "/" + path.lstrip("/")
        path = re.sub(r"/+", "/", path)
        return path.rstrip("/") or "/"

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> dict[str, Any]:
        if path.startswith("thaw://"):
            netloc = path[len("thaw://") :].partition("/")[0]
            if _MASTER_NETLOC.match(netloc):
                return {"master": netloc}
        return {}

    def unstrip_protocol(self, name: str) -> str:
        """A full URL, naming this filesystem's master (so it means the same file
        in another process, or with another cluster as the default)."""
        return f"thaw://{self.master}{self._strip_protocol(name)}"

    # -- metadata -------------------------------------------------------------

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        """Entries in fsspec's shape; with ``detail``, each file's ``blocks`` (as in
        :meth:`info`) come along, from the same call to the master."""
        entries = [_entry(d) for d in self.client.ls(self._strip_protocol(path), blocks=detail)]
        entries.sort(key=lambda e: e["name"])
        return entries if detail else [e["name"] for e in entries]

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        """Status with ``blocks``: per block its offset, length, the hosts holding
        it and each replica (worker address, tier, locality to this client)."""
        return _entry(self.client.stat(self._strip_protocol(path), blocks=True))

    def persist(self, path: str, wait: bool = True, timeout: float = 300.0) -> dict[str, Any]:
        """Writes a file to the under-store now (see :meth:`thaw.Client.persist`)."""
        return _entry(self.client.persist(self._strip_protocol(path), wait=wait, timeout=timeout))

    def block_locations(self, path: str, start: int = 0, length: int | None = None) -> list[dict[str, Any]]:
        """The blocks overlapping [start, start+length): offset, length, hosts, and
        the hosts holding it in memory (``mem_hosts``), nearest first."""
        info = self.info(path)
        end = info["size"] if length is None else start + length
        out = []
        for b in info.get("blocks", []):
            if b["offset"] < end and b["offset"] + b["length"] > start:
                mem = [r["host"] for r in b["replicas"] if r["tier"] == "MEM"]
                out.append({**b, "mem_hosts": list(dict.fromkeys(mem))})
        return out

    def exists(self, path: str, **kwargs: Any) -> bool:
        return self.client.exists(self._strip_protocol(path))

    # Questions that need no block list ask the master without one (DuckDB asks
    # them many times per file).
    def _status(self, path: str) -> dict[str, Any]:
        return _entry(self.client.stat(self._strip_protocol(path)))

    def size(self, path: str) -> int:
        return int(self._status(path)["size"])

    def isfile(self, path: str) -> bool:
        try:
            return self._status(path)["type"] == "file"
        except (FileNotFoundError, NotADirectoryError):
            return False

    def isdir(self, path: str) -> bool:
        try:
            return self._status(path)["type"] == "directory"
        except (FileNotFoundError, NotADirectoryError):
            return False

    def modified(self, path: str) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self._status(path)["mtime"], tz=datetime.UTC)

    def created(self, path: str) -> datetime.datetime:
        """Thaw keeps one time per file (its last change)."""
        return self.modified(path)

    def ukey(self, path: str) -> str:
        i = self._status(path)
        return tokenize(i.get("file_id"), i["mtime"], i["size"])

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        self.client.mkdir(self._strip_protocol(path), parents=create_parents, exist_ok=False)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        self.client.mkdir(self._strip_protocol(path), parents=True, exist_ok=exist_ok)

    def rmdir(self, path: str) -> None:
        path = self._strip_protocol(path)
        if not self.isdir(path):
            raise NotADirectoryError(path)
        self.client.rm(path, recursive=False)

    def _rm(self, path: str) -> None:
        self.client.rm(self._strip_protocol(path), recursive=False)

    def rm_file(self, path: str) -> None:
        self._rm(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        if isinstance(path, str) and maxdepth is None and not _GLOB.search(path):
            # One call: the master removes a whole tree at once.
            self.client.rm(self._strip_protocol(path), recursive=recursive)
            return
        super().rm(path, recursive=recursive, maxdepth=maxdepth)

    def mv(
        self, path1: Any, path2: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any
    ) -> None:
        if (
            isinstance(path1, str)
            and isinstance(path2, str)
            and not _GLOB.search(path1)
            and not path2.endswith("/")
            and not self.exists(path2)
        ):
            # A rename at the master: no bytes move, directories move whole.
            self.client.mv(self._strip_protocol(path1), self._strip_protocol(path2))
            return
        super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)

    # -- data -----------------------------------------------------------------

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> ThawFile | ThawWriter:
        if not autocommit:
            raise NotImplementedError(
                "Thaw files are complete when closed; fsspec transactions are not supported"
            )
        if mode == "rb":
            _register_exit_grace()
        # Client.open takes rb, wb and xb, and says what else is possible.
        return self.client.open(
            self._strip_protocol(path),
            mode,
            write_type=kwargs.get("write_type", self.write_type),
            block_size=int(kwargs.get("thaw_block_size") or self.default_block_size),
            temporary=bool(kwargs.get("temporary", False)),
        )

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        return self.client.cat(self._strip_protocol(path), start, end)

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        with self.client.open(
            self._strip_protocol(path),
            "wb" if mode == "overwrite" else "xb",
            write_type=kwargs.get("write_type", self.write_type),
            block_size=self.default_block_size,
            length=len(value),
        ) as f:
            f.write(value)

    def put_file(
        self,
        lpath: str,
        rpath: str,
        callback: Callback = DEFAULT_CALLBACK,
        mode: str = "overwrite",
        **kwargs: Any,
    ) -> None:
        rpath = self._strip_protocol(rpath)
        if os.path.isdir(lpath):
            self.makedirs(rpath, exist_ok=True)
            return
        callback.set_size(os.path.getsize(lpath))
        self.client.native().put_file(
            os.fspath(lpath),
            rpath,
            kwargs.get("write_type", self.write_type),
            self.default_block_size,
            mode == "overwrite",
            callback.relative_update,
        )

    def get_file(
        self,
        rpath: str,
        lpath: str,
        callback: Callback = DEFAULT_CALLBACK,
        outfile: Any = None,
        **kwargs: Any,
    ) -> None:
        rpath = self._strip_protocol(rpath)
        if outfile is None and hasattr(lpath, "write"):
            outfile = lpath
        info = self.info(rpath)
        if info["type"] == "directory":
            if outfile is None:
                os.makedirs(lpath, exist_ok=True)
            return
        callback.set_size(info["size"])
        if outfile is not None:
            with self.client.open(rpath, "rb") as f:
                while chunk := f.read(_COPY_CHUNK):
                    outfile.write(chunk)
                    callback.relative_update(len(chunk))
            return
        lpath = os.fspath(lpath)
        os.makedirs(os.path.dirname(lpath) or ".", exist_ok=True)
        self.client.native().get_file(rpath, lpath, callback.relative_update)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        path1, path2 = self._strip_protocol(path1), self._strip_protocol(path2)
        if self.isdir(path1):
            self.makedirs(path2, exist_ok=True)
            return
        with (
            self.client.open(path1, "rb") as src,
            self.client.open(
                path2, "wb", write_type=self.write_type, block_size=self.default_block_size
            ) as dst,
        ):
            while chunk := src.read(_COPY_CHUNK):
                dst.write(chunk)


def _make_fs(opts: dict[str, Any]) -> ThawFileSystem:
    return ThawFileSystem(**opts)


def arrow_filesystem(fs: ThawFileSystem | None = None) -> Any:
    """A ``pyarrow.fs.FileSystem`` over Thaw (pyarrow's wrapper of an fsspec
    filesystem): ``pyarrow.parquet.read_table("/t.parquet", filesystem=...)``."""
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    fs = fs or ThawFileSystem()
    _arrow_errors.install(ThawFileSystem)
    return PyFileSystem(FSSpecHandler(fs))


def arrow_dataset(path: str, format: str = "parquet", fs: ThawFileSystem | None = None, **kwargs: Any) -> Any:
    """A ``pyarrow.dataset.Dataset`` of the files under a Thaw path. The faster
    way for DuckDB to scan Thaw data: ``con.register("t", thaw.arrow_dataset(p))``
    (DuckDB then scans it through Arrow, with projection and filter pushdown,
    over the same zero-copy reads pyarrow gets, instead of through its Python
    filesystem bridge, which copies every read)."""
    import pyarrow.dataset as ds

    fs = fs or ThawFileSystem()
    return ds.dataset(fs._strip_protocol(path), filesystem=fs, format=format, **kwargs)


def register_duckdb(con: Any, fs: ThawFileSystem | None = None) -> Any:
    """Lets a DuckDB connection read and write ``thaw://`` paths; returns it."""
    con.register_filesystem(fs or ThawFileSystem())
    return con
