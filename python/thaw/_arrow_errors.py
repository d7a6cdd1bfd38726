"""The server's message for a missing ``thaw://`` file read through pyarrow.

pyarrow loses it: its wrapper of an fsspec filesystem
(``pyarrow.fs.FSSpecHandler.get_file_info``) turns the filesystem's
``FileNotFoundError`` into ``FileType.NotFound``, as its contract says, and its
dataset discovery (``pyarrow.dataset._ensure_single_source``, behind
``pq.read_table`` and ``pandas.read_parquet``) then raises
``FileNotFoundError(path)``: no message, no errno. For a Thaw filesystem that
error is replaced by the server's (:class:`thaw.errors.NotFound`, errno ENOENT),
chained to pyarrow's; every other filesystem's error is left as it is.

Installed once pyarrow is imported and a :class:`~thaw.ThawFileSystem` is made
(so ``import thaw`` never imports pyarrow); the filesystem hands its class in,
so this module imports nothing of :mod:`thaw.fs`. It wraps a private pyarrow
function: ``python/tests/test_polars_and_errors.py`` fails if a pyarrow release
moves it.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

_installed = False


def _thaw_fs(filesystem: Any, thaw_fs: type) -> Any:
    """The ``thaw_fs`` behind ``filesystem`` (itself, or inside pyarrow's wrapper), or None."""
    inner = getattr(getattr(filesystem, "handler", None), "fs", filesystem)
    return inner if isinstance(inner, thaw_fs) else None


def install(thaw_fs: type) -> None:
    """Replaces pyarrow's error for a missing file of a ``thaw_fs`` filesystem
    (:class:`~thaw.ThawFileSystem`), once, if pyarrow is loaded."""
    global _installed
    if _installed or "pyarrow" not in sys.modules:
        return
    _installed = True
    try:
        import pyarrow.dataset as ds
    except ImportError:
        return
    original = getattr(ds, "_ensure_single_source", None)
    if original is None:
        return

    @functools.wraps(original)
    def ensure_single_source(path: Any, filesystem: Any = None) -> Any:
        try:
            return original(path, filesystem)
        except FileNotFoundError as bare:
            fs = _thaw_fs(filesystem, thaw_fs)
            if fs is None or not isinstance(path, str):
                raise
            try:
                fs.info(path)
            except FileNotFoundError as server:
                raise server from bare
            raise

    ds._ensure_single_source = ensure_single_source
