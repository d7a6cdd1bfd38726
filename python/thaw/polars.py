"""``thaw://`` paths in polars.

polars reads remote files with its own Rust readers, which know only the
schemes built into polars (``s3://``, ``gs://``, ``az://``, ``http(s)://``,
``hf://``); any other path, ``thaw:///...`` included, is taken as a local file
("No such file or directory"), and polars has no way to plug in an fsspec
filesystem by scheme. It does read file objects, so these functions open the
``thaw://`` files (a path without a scheme is a Thaw path too) through
:class:`thaw.ThawFileSystem` and hand polars the file objects: the reads carry
the current :func:`thaw.job`'s id and come from worker memory where the blocks
are. A directory or a glob reads every file it names, in order, as one frame.

>>> import thaw.polars as tpl
>>> df = tpl.read_parquet("thaw:///tables/sales.parquet")
>>> lazy = tpl.scan_csv("thaw:///logs/*.csv").filter(pl.col("level") == "ERROR")
"""

from __future__ import annotations

from typing import Any

import polars as pl

from .fs import ThawFileSystem

__all__ = ["read_csv", "read_parquet", "scan_csv", "scan_parquet"]


def _files(source: str | list[str], fs: ThawFileSystem | None) -> list[Any]:
    """The open files a ``thaw://`` path, directory, glob or list names."""
    fs = fs or ThawFileSystem()
    paths: list[str] = []
    for p in [source] if isinstance(source, str) else list(source):
        if not isinstance(p, str):
            raise TypeError(f"thaw.polars reads thaw:// paths (str), not {type(p).__name__}")
        path = fs._strip_protocol(p)
        if any(ch in path for ch in "*?["):
            found = sorted(fs.glob(path))
            if not found:
                raise FileNotFoundError(f"no file in Thaw matches {p}")
            paths.extend(found)
        elif fs.isdir(path):
            found = sorted(fs.find(path))
            if not found:
                raise FileNotFoundError(f"{p} is an empty directory: no files to read")
            paths.extend(found)
        else:
            paths.append(path)
    # Opened here, so a missing file fails now, with the server's message.
    return [fs.open(p, "rb") for p in paths]


def _one_or_all(files: list[Any]) -> Any:
    return files[0] if len(files) == 1 else files


def read_parquet(source: str | list[str], *, fs: ThawFileSystem | None = None, **kwargs: Any) -> pl.DataFrame:
    """``polars.read_parquet`` of Thaw files (keyword arguments go to polars)."""
    return pl.read_parquet(_one_or_all(_files(source, fs)), **kwargs)


def scan_parquet(source: str | list[str], *, fs: ThawFileSystem | None = None, **kwargs: Any) -> pl.LazyFrame:
    """``polars.scan_parquet`` of Thaw files: the files are opened now and
    read when the frame is collected."""
    return pl.scan_parquet(_one_or_all(_files(source, fs)), **kwargs)


def read_csv(source: str | list[str], *, fs: ThawFileSystem | None = None, **kwargs: Any) -> pl.DataFrame:
    """``polars.read_csv`` of Thaw files; several are concatenated in order."""
    files = _files(source, fs)
    if len(files) == 1:
        return pl.read_csv(files[0], **kwargs)
    return pl.concat([pl.read_csv(f, **kwargs) for f in files])


def scan_csv(source: str | list[str], *, fs: ThawFileSystem | None = None, **kwargs: Any) -> pl.LazyFrame:
    """``polars.scan_csv`` of Thaw files; several are concatenated in order."""
    files = _files(source, fs)
    if len(files) == 1:
        return pl.scan_csv(files[0], **kwargs)
    return pl.concat([pl.scan_csv(f, **kwargs) for f in files])
