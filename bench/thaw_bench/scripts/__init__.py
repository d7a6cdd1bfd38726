"""Standalone benchmarks, one module each, run as ``python -m thaw_bench.scripts.NAME
[options]`` (``--help`` gives each one's options); each prints its table and most
write a JSON with ``--out``:

- ``user_paths``: ``readinto``, ``read``, ``get``, ``put`` of a file in worker
  memory against the same on tmpfs;
- ``read_parquet``: ``pyarrow.parquet.read_table`` from Thaw memory against tmpfs;
- ``full_tier``: a full memory tier through the ``thaw`` CLI (reads, a migration);
- ``clean_exit``: does a script reading through Thaw with pandas exit cleanly;
- ``mount_duckdb``, ``mount_requests``: ``thaw mount`` under DuckDB, and what one
  request through the mount costs;
- ``ufs_s3``, ``cli_s3_cat``: cold reads from an S3 under-store (SeaweedFS, the
  ``s3`` extra) and HDFS;
- ``dask_placement``: memory-local placement of Dask tasks by the Thaw plugin
  against Dask's own, on the emulated cluster;
- ``recompute_priority``: who gets the slots while a lost file is recomputed.
"""
