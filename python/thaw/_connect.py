"""The native clients behind :class:`thaw.Client`: one per (process, master,
settings, credentials), so clients made for the same cluster share connections,
and the credentials a client proves itself with when given none."""

from __future__ import annotations

import os
import threading
from typing import Any

from . import _native
from ._context import clusters

_natives: dict[tuple[Any, ...], _native.NativeClient] = {}
_natives_lock = threading.Lock()

#: A client's keyword settings, in the order of ``Client._settings``.
_SETTINGS = ("host", "rack", "worker", "short_circuit", "read_cache", "token", "secret_file", "tls_ca")

_CREDENTIAL_VARS = ("THAW_TOKEN", "THAW_TOKEN_FILE", "THAW_SECRET_FILE", "THAW_USER", "THAW_TLS_CA")


def _credentials(master: str, token: str | None, secret_file: str | None) -> tuple[str | None, str | None]:
    """What a client proves itself with: its own ``token`` or ``secret_file``,
    else the secret of the :class:`~thaw.LocalCluster` at ``master`` started in
    this process with one (if the environment names no credentials), else
    the environment's (``THAW_TOKEN``, ``THAW_TOKEN_FILE``, ``THAW_SECRET_FILE``)."""
    if token is not None or secret_file is not None:
        return token, secret_file
    if not any(os.environ.get(k) for k in _CREDENTIAL_VARS[:3]):
        for c in reversed(clusters):
            if c.master == master and getattr(c, "secret_file", None):
                return None, c.secret_file
    return None, None


def _native_client(master: str, settings: tuple[Any, ...]) -> _native.NativeClient:
    """One native client per (process, master, settings, credentials): clients
    made for the same cluster share connections; a forked child makes its own."""
    host, rack, worker, short_circuit, read_cache, token, secret_file, tls_ca = settings
    token, secret_file = _credentials(master, token, secret_file)
    if tls_ca is None and not os.environ.get("THAW_TLS_CA"):
        # The CA of a LocalCluster this process started with TLS.
        tls_ca = next((c.tls_ca for c in reversed(clusters) if c.master == master and c.tls_ca), None)
    env = tuple(os.environ.get(k) for k in _CREDENTIAL_VARS)
    key = (os.getpid(), master, settings, token, secret_file, tls_ca, env)
    with _natives_lock:
        c = _natives.get(key)
        if c is None:
            c = _native.NativeClient(
                master, None, host, rack, worker, short_circuit, read_cache, token, secret_file, tls_ca
            )
            _natives[key] = c
        return c
