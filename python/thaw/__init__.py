"""Thaw: a distributed memory tier for data-parallel jobs.

>>> import thaw, pandas as pd
>>> with thaw.LocalCluster(ufs="./data", workers=2) as cluster:
...     with thaw.job("report"):
...         df = pd.read_parquet("thaw:///tables/sales.parquet")

- :class:`Client`: metadata, file objects, put/get, cluster status.
- :class:`LocalCluster`: a local cluster from the installed ``thaw`` binary.
- :func:`job`: names the job every read and write in a block carries.
- :mod:`thaw.lineage`: which program derives which files (Tachyon, section 2.4), so
  files written at memory speed (``async-through``) can be rebuilt if lost.
- ``thaw://`` paths work in fsspec users (pandas, pyarrow, Dask, DuckDB); see
  :class:`ThawFileSystem`, :func:`arrow_filesystem`, :func:`register_duckdb`.
"""

from __future__ import annotations

import fsspec

from . import errors, lineage
from ._native import __version__
from .client import Client, ThawFile, ThawWriter, default_master
from .cluster import LocalCluster, find_binary
from .errors import ThawError
from .fs import ThawFileSystem, arrow_dataset, arrow_filesystem, register_duckdb
from .jobs import Job, current_job_id, job
from .mount import Mount

# The package's entry point registers the protocol for fsspec users who never
# import thaw; this covers running from a source tree without installed metadata.
fsspec.register_implementation("thaw", ThawFileSystem, clobber=True)

__all__ = [
    "Client",
    "Job",
    "LocalCluster",
    "Mount",
    "ThawError",
    "ThawFile",
    "ThawFileSystem",
    "ThawWriter",
    "__version__",
    "arrow_dataset",
    "arrow_filesystem",
    "current_job_id",
    "default_master",
    "errors",
    "find_binary",
    "job",
    "lineage",
    "register_duckdb",
]
