"""The task annotations through which Dask users and the Thaw scheduler plugin
talk (``dask.annotate(thaw_inputs=[...])``)."""

from __future__ import annotations

#: The task annotation naming the Thaw job of a task's reads. The plugin sets
#: it; a user who sets it (``dask.annotate(thaw_job="nightly")``) names the job.
JOB_ANNOTATION = "thaw_job"
#: The annotation a user sets (``dask.annotate(thaw_inputs=[...])``) to name a
#: task's Thaw inputs when they cannot be found from the task itself: paths or
#: URLs, or ``(path, offset, length)`` for a task that reads only that range
#: (placement then looks at those blocks alone).
INPUTS_ANNOTATION = "thaw_inputs"

#: Cache affinity (CAVA, section IV): ``dask.annotate(thaw_cache_affinity=0.3)``
#: names the job's affinity (taken at its word, CAVA's Static-CA) instead of
#: the one measured at runtime; ``thaw_app="grep"`` names the application, so
#: its runs start from the class the last one was given (default: the graph's
#: name).
AFFINITY_ANNOTATION = "thaw_cache_affinity"
APP_ANNOTATION = "thaw_app"

#: An annotation holding a task until a time (seconds since the epoch): a job's
#: start-up (container allocation, interpreter start) modelled by a harness,
#: during which its inputs already migrate. Honoured with or without placement.
START_ANNOTATION = "thaw_start_after"
