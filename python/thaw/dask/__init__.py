"""Dask and Thaw cooperate: the scheduler tells storage what a submitted graph
will read, and storage holds it in memory exactly as long as the graph needs it.

This is the scheduled-caching poster's cooperation between scheduler and storage, with
the job-driven migration of Ignem / DYRS behind it:

- **Prefetch at submission.** When a graph reaches the scheduler
  (``update_graph``), its ``thaw://`` inputs are found from the task specs with no
  call in the user's code (``dd.read_parquet``, ``dd.read_csv``,
  ``db.read_text``, ``da.from_zarr``; ``dask.annotate(thaw_inputs=[...])`` for
  anything else) and one submission (a ``compute``/``persist``/``submit`` call)
  becomes one Thaw job whose inputs are migrated at once: the earliest moment the
  scheduler knows them, so the whole time the graph waits for workers is
  lead-time.
- **Do not evict, for exactly as long as needed.** The job's lease is renewed
  while any of its keys is wanted. Each input file is released as soon as every
  task that reads it has run (implicit eviction at the granularity the tasks
  read), and the job ends with its last file; the rest when the job's keys are
  released or its client goes away. A lease that runs out (scheduler killed)
  frees everything; a plugin Dask removes ends its jobs itself.
- **Reads carry the job.** Each reading task gets the annotation ``thaw_job``;
  a Thaw read inside a Dask task takes its job from it (see
  :func:`thaw.jobs.current_job_id`), so per-job counters and the job's read
  state are the Dask submission's.
- **Memory-locality placement** (CAVA, section III: the decision in
  :mod:`thaw.dask.placement`, its rounds in :mod:`thaw.dask.placer`). The
  reading tasks are held (state no-worker) and launched by the plugin on each
  free slot (those Dask's own queuing would give a root task), best locality
  level first, with delay scheduling bounded per task;
  ``placement=False`` leaves placement to Dask. The master learns each job's
  origin and task counters, which ``thaw jobs`` shows.
- **Cache affinity at runtime** (CAVA, section IV-A). Each submission's job is an
  application to the master's cache manager: the plugin tells it the job's
  name (``thaw_app`` annotation, else the graph's) and inputs, and a worker
  plugin (:class:`thaw.dask.usage.ThawUsage`) measures each job's tasks (CPU
  time and storage writes of the Dask worker process, split among the tasks
  running together) and reports them every second, from which the master
  classifies the job for the ``cava`` cache policy.
  ``dask.annotate(thaw_cache_affinity=0.3)`` names the affinity instead.

Nothing here can fail a computation: a Thaw master that is down, a path that
does not exist or a restart is logged as a warning and the graph runs as it would
without the plugin (its reads fall back to the under-store as any cold read does).

Install: ``thaw.dask.install(client)`` on a running cluster, or
``dask scheduler --preload thaw.dask`` / ``LocalCluster(scheduler_kwargs=
{"preload": ["thaw.dask"]})`` for clusters the user starts (options from
``THAW_MASTER`` and the ``THAW_DASK_*`` variables, see :func:`dask_setup`).

Modules: :mod:`~thaw.dask.plugin` (the scheduler plugin: hooks and jobs),
:mod:`~thaw.dask.inputs` (what a graph reads), :mod:`~thaw.dask.job` (a
submission as the plugin keeps it), :mod:`~thaw.dask.thaw_jobs` (the calls
to the master for each job), :mod:`~thaw.dask.placement` (the placement
decision) and :mod:`~thaw.dask.placer` (placement at work),
:mod:`~thaw.dask.recompute` (lineage reruns as Dask tasks),
:mod:`~thaw.dask.usage` (each job's tasks measured on the workers).
"""

from __future__ import annotations

import os
from typing import Any

from ..client import default_master
from . import placement
from .annotations import (
    AFFINITY_ANNOTATION,
    APP_ANNOTATION,
    INPUTS_ANNOTATION,
    JOB_ANNOTATION,
    START_ANNOTATION,
)
from .inputs import find_inputs
from .job import DaskJob, Held
from .placer import HOLD, PLACE_METADATA, ThawWorkerPlace, launch_summary
from .plugin import ThawSchedulerPlugin
from .usage import ThawUsage

__all__ = [
    "AFFINITY_ANNOTATION",
    "APP_ANNOTATION",
    "HOLD",
    "INPUTS_ANNOTATION",
    "JOB_ANNOTATION",
    "PLACE_METADATA",
    "START_ANNOTATION",
    "DaskJob",
    "Held",
    "ThawSchedulerPlugin",
    "ThawUsage",
    "ThawWorkerPlace",
    "dask_setup",
    "find_inputs",
    "install",
    "jobs",
    "launch_summary",
    "placement",
    "placements",
]


def install(client: Any, master: str | None = None, **options: Any) -> None:
    """Installs the plugin on ``client``'s scheduler (``thaw.dask.install(client)``)
    and, for placement, :class:`ThawWorkerPlace` on its workers.

    ``master`` defaults to the one this process would use (``THAW_MASTER``), so
    annotated inputs name the same cluster here and on the scheduler. Options:
    see :class:`ThawSchedulerPlugin`.
    """
    client.register_plugin(ThawSchedulerPlugin(master or default_master(), **options))
    client.register_plugin(ThawUsage(master or default_master()))
    if options.get("placement", True):
        client.register_plugin(ThawWorkerPlace())


def placements(client: Any) -> list[dict[str, Any]]:
    """Every launch the plugin made: job, key, level, delay paid, when (``at``,
    seconds since the epoch; ``since_submit``, after its job's submission;
    ``held``, of those ready), whether the task's blocks were in memory, worker."""

    def ask(dask_scheduler: Any) -> list[dict[str, Any]]:
        plugin = dask_scheduler.plugins.get(ThawSchedulerPlugin.name)
        return list(plugin.launch_log) if plugin is not None else []

    return client.run_on_scheduler(ask)  # type: ignore[no-any-return]


def jobs(client: Any) -> list[dict[str, Any]]:
    """The plugin's live jobs, asked of ``client``'s scheduler."""

    def ask(dask_scheduler: Any) -> list[dict[str, Any]]:
        plugin = dask_scheduler.plugins.get(ThawSchedulerPlugin.name)
        return plugin.summary() if plugin is not None else []

    return client.run_on_scheduler(ask)  # type: ignore[no-any-return]


async def dask_setup(server: Any) -> None:
    """``--preload thaw.dask``: on a scheduler, adds the plugin, configured by
    ``THAW_MASTER``, ``THAW_DASK_LEASE`` (seconds), ``THAW_DASK_EVICTION`` and
    ``THAW_DASK_PLACEMENT`` (0 turns placement off); on a worker, says where it
    sits (:class:`ThawWorkerPlace`)."""
    from distributed import Scheduler

    if not isinstance(server, Scheduler):
        await server.plugin_add(ThawWorkerPlace(), name=ThawWorkerPlace.name)
        await server.plugin_add(ThawUsage(os.environ.get("THAW_MASTER") or None), name=ThawUsage.name)
        return
    server.add_plugin(
        ThawSchedulerPlugin(
            os.environ.get("THAW_MASTER") or None,
            lease=float(os.environ.get("THAW_DASK_LEASE", "30")),
            eviction=os.environ.get("THAW_DASK_EVICTION", "explicit"),
            placement=os.environ.get("THAW_DASK_PLACEMENT", "1") != "0",
        )
    )
