"""Progress bars for put/get: tqdm on a terminal, nothing otherwise."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

# Below this many bytes and files a copy is quick enough that a bar is only noise.
_MIN_BYTES = 32 << 20
_MIN_FILES = 20


class Progress:
    """A byte-count bar. ``enabled`` None: on when stderr is a terminal and the
    copy is large or of many files. ``update_fn`` is what the native copy loop
    calls."""

    def __init__(self, total: int, desc: str, enabled: bool | None, files: int = 1) -> None:
        if enabled is None:
            enabled = sys.stderr.isatty() and (total >= _MIN_BYTES or files >= _MIN_FILES)
        self._bar: Any = None
        if enabled:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024)

    @property
    def shown(self) -> bool:
        return self._bar is not None

    @property
    def update_fn(self) -> Any:
        return self._bar.update if self._bar is not None else None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.close()
