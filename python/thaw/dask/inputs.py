"""Finding the Thaw files a Dask task reads, from its task spec alone, so a
user names nothing: fsspec ``OpenFile``s (``read_csv``, ``read_text``), a reader
holding a Thaw filesystem as ``fs`` (``read_parquet``), zarr arrays on a Thaw
store (``from_zarr``: the chunk files of the task's region); or from the
``thaw_inputs`` annotation (:func:`graph_reads`, for a submitted graph)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable
from typing import Any

from ..fs import ThawFileSystem
from .annotations import INPUTS_ANNOTATION

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


def graph_reads(
    scheduler: Any, tasks: Iterable[Any], annotations: dict[str, Any], master: str
) -> tuple[dict[Any, set[tuple[str, str]]], dict[Any, list[tuple[str, int, int]]]]:
    """What the ``tasks`` of a graph just submitted to ``scheduler`` read: per
    task key, its Thaw files as (master, path), and the byte ranges of those
    annotated with ranges. ``annotations``: the graph's, by name then key;
    ``master``: the one for annotated paths that name none."""
    named = annotations.get(INPUTS_ANNOTATION, {})
    reads: dict[Any, set[tuple[str, str]]] = {}
    ranges: dict[Any, list[tuple[str, int, int]]] = {}
    for key in tasks:
        ts = scheduler.tasks.get(key)
        if ts is None or ts.run_spec is None:
            continue
        found: set[tuple[str, str]] = set()
        given = named.get(key) or (ts.annotations or {}).get(INPUTS_ANNOTATION)
        if given:
            for item in [given] if isinstance(given, (str, dict)) else given:
                path, span = _annotated_input(item)
                url = path if path.startswith("thaw://") else f"thaw://{path}"
                here = find_inputs(url, master)
                found |= here
                if span is not None:
                    ranges.setdefault(key, []).extend((p, *span) for _, p in here)
        elif not ts.dependencies:
            value = getattr(ts.run_spec, "value", ts.run_spec)
            # A from_zarr array node: its getters read the chunks.
            found = set() if zarr_array(value) else find_inputs(ts.run_spec)
        else:
            found = _zarr_getter_inputs(ts)
        if found:
            reads[key] = found
    return reads, ranges


def _annotated_input(item: Any) -> tuple[str, tuple[int, int] | None]:
    """One ``thaw_inputs`` item: a path or URL, ``(path, offset, length)``, or
    ``{"path": ..., "offset": ..., "length": ...}``."""
    if isinstance(item, dict):
        return str(item["path"]), (
            int(item.get("offset", 0)),
            int(item["length"]),
        ) if "length" in item else None
    if isinstance(item, (tuple, list)):
        if len(item) != 3:
            raise ValueError(f"a thaw_inputs range is (path, offset, length), not {item!r}")
        return str(item[0]), (int(item[1]), int(item[2]))
    return str(item), None


def _zarr_getter_inputs(ts: Any) -> set[tuple[str, str]]:
    """A from_zarr getter reading from an array node (the default,
    ``inline_array=False``): the chunk files of its region."""
    from dask._task_spec import DataNode, Task

    if len(ts.dependencies) != 1 or not isinstance(ts.run_spec, Task):
        return set()
    (dep,) = ts.dependencies
    spec = dep.run_spec
    z = zarr_array(spec.value if isinstance(spec, DataNode) else spec)
    region = region_of(ts.run_spec.args) if z else None
    if z is None or region is None:
        return set()
    return {(z[0], f) for f in zarr_chunk_files(z[1], z[2], region)}
