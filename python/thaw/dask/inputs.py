"""Finding the Thaw files a Dask task reads, from its task spec alone, so a
user names nothing: fsspec ``OpenFile``s (``read_csv``, ``read_text``), a reader
holding a Thaw filesystem as ``fs`` (``read_parquet``), zarr arrays on a Thaw
store (``from_zarr``: the chunk files of the task's region)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable
from typing import Any

from ..fs import ThawFileSystem

# How deep a task spec is searched for inputs: read tasks hold their paths a
# few levels down (Task -> args -> dict -> tuple -> str).
_MAX_DEPTH = 8


def find_inputs(run_spec: Any, default_master: str | None = None) -> set[tuple[str, str]]:
    """The Thaw files a task reads, as (master, path), found in its spec:

    - an fsspec ``OpenFile`` on a :class:`~thaw.fs.ThawFileSystem` (``read_csv``,
      ``read_text``): its path;
    - a callable that holds a Thaw filesystem as ``fs`` (dask's parquet reader):
      the absolute paths among the task's arguments;
    - a zarr array on a Thaw store (``from_zarr``): the chunk files the task's
      slice covers, or the array's directory if that cannot be told.
    """
    found: set[tuple[str, str]] = set()
    _walk(run_spec, found, None, 0, default_master)
    return found


def _thaw_fs(obj: Any) -> ThawFileSystem | None:
    fs = getattr(obj, "fs", None)
    if isinstance(fs, ThawFileSystem):
        return fs
    # zarr wraps a synchronous filesystem for its async store.
    inner = getattr(fs, "sync_fs", None)
    return inner if isinstance(inner, ThawFileSystem) else None


def _walk(
    x: Any, found: set[tuple[str, str]], fs: ThawFileSystem | None, depth: int, master: str | None
) -> None:
    if depth > _MAX_DEPTH or x is None or isinstance(x, (int, float, bool, bytes)):
        return
    if isinstance(x, str):
        if x.startswith("thaw://"):
            rest = x[len("thaw://") :].partition("/")
            netloc = rest[0] if ":" in rest[0] else ""
            m = netloc or (fs.master if fs else master)
            if m:
                found.add((m, ThawFileSystem._strip_protocol(x)))
        elif fs is not None and x.startswith("/"):
            found.add((fs.master, ThawFileSystem._strip_protocol(x)))
        return
    from dask._task_spec import DataNode, Task

    if isinstance(x, Task):
        region = region_of(x.args)
        arrays = [z for z in map(zarr_array, (getattr(a, "value", a) for a in x.args)) if z] if region else []
        if arrays:  # an inlined from_zarr getter: the chunks its region covers
            for m, root, arr in arrays:
                found.update((m, f) for f in zarr_chunk_files(root, arr, region))
            return
        fs = _thaw_fs(x.func) or fs
        _walk(x.func, found, fs, depth + 1, master)
        for a in x.args:
            _walk(a, found, fs, depth + 1, master)
        for a in x.kwargs.values():
            _walk(a, found, fs, depth + 1, master)
        return
    if isinstance(x, DataNode):
        _walk(x.value, found, fs, depth + 1, master)
        return
    if isinstance(x, functools.partial):
        fs = _thaw_fs(x.func) or fs
        for a in itertools.chain(x.args, x.keywords.values()):
            _walk(a, found, fs, depth + 1, master)
        return
    if isinstance(x, (list, tuple, set, frozenset)):
        for a in x:
            _walk(a, found, fs, depth + 1, master)
        return
    if isinstance(x, dict):
        for a in x.values():
            _walk(a, found, fs, depth + 1, master)
        return
    own = _thaw_fs(x)
    if own is not None and isinstance(getattr(x, "path", None), str):
        found.add((own.master, ThawFileSystem._strip_protocol(x.path)))  # fsspec OpenFile
        return
    zarr = _zarr_inputs(x)
    if zarr:
        found.update(zarr)


def zarr_array(x: Any) -> tuple[str, str, Any] | None:
    """(master, directory, array) if ``x`` is a zarr array on a Thaw store."""
    store_path = getattr(x, "store_path", None)
    store = getattr(store_path, "store", None)
    fs = _thaw_fs(store)
    if fs is None or not hasattr(x, "metadata") or not hasattr(x, "chunks"):
        return None
    root = "/".join(p for p in (getattr(store, "path", ""), getattr(store_path, "path", "")) if p)
    return fs.master, ThawFileSystem._strip_protocol(root), x


def zarr_chunk_files(root: str, arr: Any, region: tuple[slice, ...]) -> set[str]:
    """The chunk files of ``arr`` (stored under ``root``) that ``region`` covers."""
    ranges = []
    for s, c, n in zip(region, arr.chunks, arr.shape, strict=False):
        start, stop, _ = s.indices(n)
        ranges.append(range(start // c, -(-stop // c)))
    return {f"{root}/{arr.metadata.encode_chunk_key(coords)}" for coords in itertools.product(*ranges)}


def region_of(args: Iterable[Any]) -> tuple[slice, ...] | None:
    """The tuple of slices among a getter task's arguments (dask.array's
    ``getter(array, region)``)."""
    from dask._task_spec import DataNode

    for a in args:
        a = a.value if isinstance(a, DataNode) else a
        if isinstance(a, tuple) and a and all(isinstance(s, slice) for s in a):
            return a
    return None


def _zarr_inputs(x: Any) -> set[tuple[str, str]]:
    """A zarr array met outside a getter: its directory (every chunk file)."""
    z = zarr_array(x)
    return {(z[0], z[1])} if z else set()
