"""Exceptions raised by Thaw, one per server error kind.

Each is a :class:`ThawError` and also the built-in exception a Python user would
catch for that case (``FileNotFoundError`` for a missing path, and so on), so code
written against local files handles Thaw's errors unchanged. The message is the
server's.
"""

from __future__ import annotations

import errno


class ThawError(Exception):
    """Base of every error Thaw raises. ``kind`` is the server's error kind."""

    kind = "internal"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        if isinstance(self, OSError) and args:
            # The server's message as strerror too (errno is the class's), for
            # code that formats an OSError from its parts.
            self.strerror = str(args[0])

    def __str__(self) -> str:
        return self.args[0] if self.args else self.kind


class NotFound(ThawError, FileNotFoundError):
    kind = "not-found"
    errno = errno.ENOENT


class AlreadyExists(ThawError, FileExistsError):
    kind = "already-exists"
    errno = errno.EEXIST


class InvalidArgument(ThawError, ValueError):
    kind = "invalid-argument"


class PermissionDenied(ThawError, PermissionError):
    kind = "permission-denied"
    errno = errno.EACCES


class IsADirectory(ThawError, IsADirectoryError):
    kind = "is-a-directory"
    errno = errno.EISDIR


class NotADirectory(ThawError, NotADirectoryError):
    kind = "not-a-directory"
    errno = errno.ENOTDIR


class DirectoryNotEmpty(ThawError, OSError):
    kind = "directory-not-empty"
    errno = errno.ENOTEMPTY


class ResourceExhausted(ThawError, OSError):
    """A tier or buffer is full."""

    kind = "resource-exhausted"
    errno = errno.ENOSPC


class Unavailable(ThawError, ConnectionError):
    """A server cannot be reached; retrying later or elsewhere may work."""

    kind = "unavailable"


class Timeout(ThawError, TimeoutError):
    kind = "timeout"


class DataLost(ThawError, OSError):
    """Bytes that no replica or under-store copy holds any more."""

    kind = "data-lost"
    errno = errno.EIO


class FailedPrecondition(ThawError, OSError):
    """The operation does not fit the object's state (e.g. an incomplete file)."""

    kind = "failed-precondition"


class Internal(ThawError):
    kind = "internal"


_BY_KIND: dict[str, type[ThawError]] = {
    cls.kind: cls
    for cls in (
        NotFound,
        AlreadyExists,
        InvalidArgument,
        PermissionDenied,
        IsADirectory,
        NotADirectory,
        DirectoryNotEmpty,
        ResourceExhausted,
        Unavailable,
        Timeout,
        DataLost,
        FailedPrecondition,
        Internal,
    )
}


def from_kind(kind: str, message: str) -> ThawError:
    """The exception for a server error kind (used by the native module)."""
    return _BY_KIND.get(kind, Internal)(message)
