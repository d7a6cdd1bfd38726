"""Thaw's evaluation harness, a package of its own beside the user package ``thaw``:
an emulated cluster on one machine (or a real one), jobs on Dask and DuckDB, and
the papers' experiments replayed side by side (``python -m thaw_bench --help``,
or ``thaw-bench-py``, lists them); the standalone benchmarks are
:mod:`thaw_bench.scripts`."""
