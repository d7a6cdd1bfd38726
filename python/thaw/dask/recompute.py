"""Recomputation on Dask (Tachyon, section 2.6 and 4).

The master's workflow manager decides what to rerun and in what order; with
``thaw master --recompute-executor external`` it runs nothing itself, and this
executor, started by the scheduler plugin (``thaw.dask.install(client,
recompute=True)``), claims each rerun and runs its command as a Dask task, on the
same workers as the jobs, so recomputation needs no cluster of its own. A
:func:`thaw.lineage.step`'s rerun runs inside the worker's interpreter
(:func:`rerun_here`), whose imports are warm: the local executor's
``python -m thaw rerun`` starts a new interpreter and imports the step's
module (6.8-8.5 s for the log pipeline's on a loaded machine, BENCHMARKS.md).
Such a rerun cannot be killed: one past the master's ``--recompute-timeout``
is counted failed and tried again while it runs on. Any other command runs in
a process of its own, as the local executor runs it.

Resource allocation (Tachyon, section 4, "Recomputation Resource Acquisition"): a
rerun is handed to Dask only while no job's task is queued for a slot at the
scheduler, at priority ``RECOMPUTE_PRIORITY`` (-1; Dask's default is 0), so it
waits behind the tasks of jobs that do not need it; and a task that reads a lost
file (a job waiting for it) secedes from its worker's thread pool while it waits
(``thaw.client._native_reader``), so its slot goes to the rerun: the waiting job
ranks below the rerun it waits for. This answers the paper's priority inversion (jobs
holding every slot while waiting for data only a recomputation can bring) without
killing their tasks.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from .. import lineage
from .._context import recovering
from ..client import Client
from ..errors import ThawError

log = logging.getLogger("thaw.dask")

#: Dask priority of a rerun's task: below the jobs' tasks (0 by default).
RECOMPUTE_PRIORITY = -1


def in_process(task: dict[str, Any]) -> bool:
    """Whether a rerun can run inside the Dask worker's interpreter: its
    command is a :func:`thaw.lineage.step`'s (``python -m thaw rerun``, the
    configuration the step recorded), and the cluster is not secured (there,
    the rerun acts as the superuser with a token only its own process gets)."""
    cmd = task["command"]
    if len(cmd) != 4 or cmd[1:] != ["-m", "thaw", "rerun"]:
        return False
    if any(task["env"].get(k) for k in ("THAW_TOKEN", "THAW_TOKEN_FILE", "THAW_TLS_CA")):
        return False
    try:
        return bool(json.loads(task["config"]).get("format") == lineage.STEP_FORMAT)
    except (ValueError, AttributeError):
        return False


def rerun_here(task: dict[str, Any]) -> str:
    """Runs a step's rerun in this process, in a context of its own
    (:class:`thaw._context.recovering`: its writes rebuild the lost outputs,
    the other tasks of the worker are untouched), as ``python -m thaw
    rerun`` would in a process of its own. Returns "" or why it failed."""
    env = task["env"]
    produce = env.get("THAW_REBUILD_OUTPUTS")
    outputs = None if produce is None else [int(x) for x in produce.split(",") if x.strip()]
    try:
        with recovering(int(env["THAW_RECOVER_LINEAGE"]), env.get("THAW_JOB_ID")):
            lineage.rerun(int(env["THAW_LINEAGE_ID"]), outputs, client=Client(env["THAW_MASTER"]))
    except Exception as e:  # the step's own failure, reported to the master as the command's would be
        return f"{type(e).__name__}: {e}"[-800:]
    return ""


def run_recomputation(task: dict[str, Any]) -> dict[str, Any]:
    """Runs one lineage rerun (on a Dask worker): a step's in this worker's
    interpreter (:func:`in_process`: no new process, the step's module most
    likely imported already), any other command in a process of its own.
    Returns its start and end (epoch seconds), ``error`` ("" or why it
    failed) and ``where`` ("in-process" or "process")."""
    start = time.time()
    if in_process(task):
        error = rerun_here(task)
        return {"error": error, "start": start, "end": time.time(), "where": "in-process"}
    with tempfile.NamedTemporaryFile(prefix="thaw-lineage-", suffix=".config", delete=False) as f:
        f.write(task["config"])
    env = {**os.environ, **task["env"], "THAW_LINEAGE_CONFIG": f.name}
    timeout = task["timeout_ms"] / 1000 or None
    try:
        p = subprocess.run(task["command"], env=env, capture_output=True, timeout=timeout, check=False)
        error = ""
        if p.returncode != 0:
            error = f"exit status {p.returncode}: {p.stderr.decode(errors='replace').strip()[-800:]}"
    except subprocess.TimeoutExpired:
        error = f"killed after {timeout:.0f} s"
    except OSError as e:
        error = f"cannot start {task['command'][0]!r}: {e}"
    finally:
        os.unlink(f.name)
    return {"error": error, "start": start, "end": time.time(), "where": "process"}


class RecomputeExecutor:
    """Claims lineage reruns from the master and runs them on the Dask cluster
    at ``scheduler_address``, at most ``slots`` at once."""

    def __init__(
        self,
        scheduler_address: str,
        master: str,
        *,
        slots: int = 2,
        poll: float = 0.2,
        priority: int = RECOMPUTE_PRIORITY,
        jobs_waiting: Callable[[], bool] | None = None,
    ) -> None:
        self.scheduler_address = scheduler_address
        self.master = master
        self.slots = slots
        self.priority = priority
        self.jobs_waiting = jobs_waiting
        self.poll = poll
        self.name = f"dask {scheduler_address}"
        self.ran: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="thaw-dask-recompute", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        from distributed import Client as DaskClient

        thaw = Client(self.master).native()
        dask = DaskClient(self.scheduler_address, set_as_default=False, timeout=30)
        running: dict[str, tuple[Any, dict[str, Any]]] = {}
        try:
            while not self._stop.is_set():
                self._claim(thaw, dask, running)
                for key, (fut, task) in list(running.items()):
                    if fut.done():
                        try:
                            outcome = fut.result()
                        except Exception as e:  # the task itself failed (its worker died)
                            outcome = {"error": f"its Dask task failed: {e}", "start": None, "end": None}
                        self._report(thaw, task, outcome)
                        del running[key]
                self._stop.wait(self.poll)
        finally:
            dask.close()

    def _claim(self, thaw: Any, dask: Any, running: dict[str, tuple[Any, dict[str, Any]]]) -> None:
        free = self.slots - len(running)
        if free <= 0:
            return
        # Below the jobs that do not wait for it: a rerun is claimed only while
        # no job's task is queued for a slot. (A lone task bypasses Dask's
        # scheduler-side queue and would start on the next free thread,
        # whatever its priority; the queued tasks of jobs that do wait for the
        # rerun start, find their file lost, and give their slot back.)
        if self.jobs_waiting is not None and self.jobs_waiting():
            return
        try:
            tasks = thaw.claim_recomputations(self.name, free)
        except ThawError as e:
            log.debug("claiming recomputations failed: %s", e)
            return
        for t in tasks:
            key = f"thaw-recompute-{t['lineage_id']}-{t['attempt']}-{uuid.uuid4().hex[:6]}"
            fut = dask.submit(run_recomputation, t, key=key, priority=self.priority, pure=False)
            running[key] = (fut, t)
            log.info("recomputing lineage %s (attempt %s): Dask task %s", t["lineage_id"], t["attempt"], key)

    def _report(self, thaw: Any, task: dict[str, Any], outcome: dict[str, Any]) -> None:
        self.ran.append({"lineage_id": task["lineage_id"], "attempt": task["attempt"], **outcome})
        try:
            thaw.recomputation_done(task["lineage_id"], task["attempt"], outcome["error"])
        except ThawError as e:  # the master times the run out instead
            log.warning("could not report lineage %s's rerun: %s", task["lineage_id"], e)
