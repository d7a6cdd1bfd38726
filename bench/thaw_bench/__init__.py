"""The evaluation harness: an emulated cluster on one machine (or a real one),
jobs on Dask and DuckDB, and the papers' experiments replayed side by side.
``python -m thaw_bench --help`` lists the experiments."""
