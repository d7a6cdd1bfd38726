"""File objects of :class:`thaw.Client`: :class:`ThawFile` reads at its own
position through one native reader (``read_buffer`` returns a read-only buffer
over a block file on this host without copying it; pyarrow uses it), and
:class:`ThawWriter` streams a new file to the workers."""

from __future__ import annotations

import io
import sys
from types import TracebackType
from typing import Any

from . import _native

# Reads smaller than this are served from a read-ahead buffer (lines, headers,
# footers); larger ones go straight to the native reader.
_SMALL_READ = 64 << 10
_READ_AHEAD = 1 << 20


class ThawFile(io.RawIOBase):
    """A Thaw file open for reading: seekable, with ``read``, ``readinto``,
    ``readline`` and ``read_buffer`` (zero-copy for local blocks)."""

    mode = "rb"

    def __init__(self, reader: _native.NativeReader) -> None:
        super().__init__()
        self._r = reader
        self.path: str = reader.path
        self.size: int = reader.length
        self._pos = 0
        self._buf = b""
        self._buf_at = 0  # file offset of _buf[0]
        self._last_end = 0  # where the last read ended (sequential reads start there)

    @property
    def name(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"<ThawFile {self.path!r} size={self.size} pos={self._pos}>"

    def info(self) -> dict[str, Any]:
        """The file's status when opened, with blocks and replicas."""
        return self._r.info()

    def stats(self) -> dict[str, int]:
        """Bytes read so far by source (short_circuit, zero_copy, remote_mem,
        remote_disk, under_store) and fail-overs."""
        return self._r.stats()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._check()
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if pos < 0:
            raise OSError(22, f"negative seek position {pos}")
        self._pos = pos
        return pos

    def _check(self) -> None:
        if self.closed:
            raise ValueError(f"I/O operation on closed file {self.path}")

    def _buffered(self, n: int) -> bytes | None:
        """Up to ``n`` bytes at the position from the read-ahead buffer."""
        i = self._pos - self._buf_at
        if 0 <= i < len(self._buf):
            return self._buf[i : i + n]
        return None

    def _fill(self) -> bytes:
        """Reads ahead from the position into the buffer; returns the buffer."""
        self._buf_at = self._pos
        self._buf = self._r.read_at(self._pos, _READ_AHEAD)
        return self._buf

    def read(self, size: int | None = -1) -> bytes:
        self._check()
        rest = max(self.size - self._pos, 0)
        n = rest if size is None or size < 0 else min(size, rest)
        if n == 0:
            return b""
        got = self._buffered(n)
        if got is None and n < _SMALL_READ and self._pos == self._last_end:
            # Small reads in sequence (a parser's): read ahead. A small read
            # elsewhere (a footer, an index) reads just what it asks for.
            got = self._fill()[:n]
        if got is not None and len(got) < n:
            got += self._r.read_at(self._pos + len(got), n - len(got))
        if got is None:
            got = self._r.read_at(self._pos, n)
        self._pos += len(got)
        self._last_end = self._pos
        return got

    def readall(self) -> bytes:
        return self.read(-1)

    def read1(self, size: int = -1) -> bytes:
        return self.read(size)

    def readinto(self, buffer: Any) -> int:
        self._check()
        n = self._r.readinto_at(self._pos, buffer)
        self._pos += n
        return n

    def read_buffer(self, size: int = -1) -> Any:
        """``size`` bytes as a buffer-protocol object: over the mapped block files
        when every block of the range is on this host (no copy), else bytes."""
        self._check()
        rest = max(self.size - self._pos, 0)
        n = rest if size is None or size < 0 else min(size, rest)
        buf = self._r.read_buffer_at(self._pos, n) if n > 0 else None
        if buf is None:
            return self.read(n)
        self._pos += n
        return buf

    def readline(self, size: int | None = -1) -> bytes:
        self._check()
        limit = None if size is None or size < 0 else size
        parts = []
        got = 0
        while self._pos < self.size and (limit is None or got < limit):
            chunk = self._buffered(_READ_AHEAD)
            if chunk is None:
                chunk = self._fill()
            if limit is not None:
                chunk = chunk[: limit - got]
            nl = chunk.find(b"\n")
            if nl >= 0:
                chunk = chunk[: nl + 1]
            parts.append(chunk)
            got += len(chunk)
            self._pos += len(chunk)
            if nl >= 0:
                break
        return b"".join(parts)

    def close(self) -> None:
        if not self.closed:
            self._r.close()
            self._buf = b""
        super().close()


class ThawWriter(io.RawIOBase):
    """A Thaw file being written. Bytes stream to the workers as they come;
    ``close`` completes the file. Leaving a ``with`` block on an exception, or
    dropping the object unclosed, deletes the partial file instead."""

    mode = "wb"

    def __init__(self, writer: _native.NativeWriter) -> None:
        super().__init__()
        self._w = writer
        self.path: str = writer.path
        self.info: dict[str, Any] | None = None
        # The exception being handled when the file was opened (if any): one
        # raised since, still propagating at close, means the write failed.
        self._exc_at_open = sys.exc_info()[1]

    @property
    def name(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"<ThawWriter {self.path!r} written={self._w.written}>"

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._w.written

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError(f"I/O operation on closed file {self.path}")
        return self._w.write(data)

    def flush(self) -> None:
        """Bytes are already on their way to the workers; durability comes with
        ``close``."""

    def close(self) -> None:
        """Completes the file. Called while an exception raised after the file was
        opened propagates (a wrapper's ``__exit__``: fsspec's ``OpenFile``, text
        mode, pandas' handles), it deletes the partial file instead."""
        if self.closed:
            return
        failing = sys.exc_info()[1]
        if failing is not None and failing is not self._exc_at_open:
            self.discard()
            return
        try:
            self.info = self._w.close()
        finally:
            super().close()

    def discard(self) -> None:
        """Gives the write up: the partial file is deleted."""
        if not self.closed:
            self._w.abort()
            super().close()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None:
            self.discard()
        else:
            self.close()

    def __del__(self) -> None:
        # io.IOBase.__del__ would close (complete) a half-written file.
        if not self.closed:
            self._w.abort()
