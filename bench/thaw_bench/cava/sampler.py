"""The cache report sampled while a CAVA run goes: cached bytes per file over
time (CAVA, Fig. 7) and the latest figures and class the master gave each
application."""

from __future__ import annotations

import threading
import time
from typing import Any

from thaw.client import Client


def cache_snapshot(client: Client) -> dict[str, Any]:
    """``Client.cache_report()`` as the harness keeps it: cached bytes per file
    (files the report does not list have none), the applications (with their
    classes) and the workers' MEM counters."""
    rep = client.cache_report(max_files=1000)
    return {
        "files": {str(f["path"]): int(f["cached_bytes"]) for f in rep["files"]},
        "apps": list(rep["apps"]),
        "workers": list(rep["workers"]),
        "file_details": list(rep["files"]),
    }


#: The figures of an application kept from the cache report.
APP_FIELDS = ("class", "affinity", "source", "cpu_util", "write_rate", "cached_fraction", "probability")
APP_FIELDS += ("tasks", "wall_seconds", "cpu_threshold", "write_threshold")


class Sampler(threading.Thread):
    """Samples the cache report every ``interval`` seconds: cached bytes per
    file, and the latest figures and class of each application."""

    def __init__(self, client: Client, t0: float, interval: float):
        super().__init__(daemon=True, name="thaw-bench-cava-sampler")
        self.client, self.t0, self.interval = client, t0, interval
        self.samples: list[dict[str, Any]] = []
        self.apps: dict[str, dict[str, Any]] = {}
        self.errors: list[str] = []
        self._stop_evt = threading.Event()

    def sample(self) -> dict[str, Any]:
        snap = cache_snapshot(self.client)
        for a in snap["apps"]:
            self.apps[str(a["job_id"])] = {k: a.get(k) for k in APP_FIELDS}
        self.samples.append({"t": round(time.time() - self.t0, 3), "files": snap["files"]})
        return snap

    def run(self) -> None:
        while not self._stop_evt.wait(self.interval):
            try:
                self.sample()
            except Exception as e:  # one missed sample; the run goes on
                self.errors = [*self.errors[-4:], repr(e)[:300]]

    def stop(self) -> None:
        self._stop_evt.set()
        self.join(10)
