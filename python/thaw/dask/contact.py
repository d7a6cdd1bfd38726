"""The scheduler plugin's way to Thaw: one client per master, shared by the
threads that migrate and the one that asks where blocks are, and the warnings
kept for the user (nothing the plugin does with Thaw may fail a graph)."""

from __future__ import annotations

import logging
import threading

from .._context import default_master
from ..client import Client

_log = logging.getLogger("thaw.dask")


class ThawContact:
    """``master``: the Thaw master for inputs named without one (default:
    :func:`thaw.client.default_master`, asked when needed)."""

    def __init__(self, master: str | None) -> None:
        self.given = master
        self._clients: dict[str, Client] = {}
        self._lock = threading.Lock()
        #: The last 100 warnings (the plugin's ``warnings``).
        self.warnings: list[str] = []

    def master(self) -> str:
        return self.given or default_master()

    def client(self, master: str) -> Client:
        c = self._clients.get(master)
        if c is None:
            c = self._clients[master] = Client(master)
        return c

    def warn(self, msg: str) -> None:
        _log.warning("%s", msg)
        with self._lock:
            self.warnings.append(msg)
            del self.warnings[:-100]
