"""`thaw mount`: DuckDB's own ``read_parquet`` and pyarrow read Thaw files
through the FUSE mount as local paths, with no Thaw filesystem registered."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import thaw


def _fuse_missing() -> str | None:
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return "not root and fusermount3 is not installed (Debian package fuse3)"
    return None


@pytest.fixture
def mount(cluster: thaw.LocalCluster, tmp_path: Path) -> Iterator[Path]:
    why = _fuse_missing()
    if why:
        pytest.skip(f"FUSE mount tests need FUSE: {why}")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    m = thaw.Mount(mnt, master=cluster.master)
    try:
        yield mnt
    finally:
        m.close()
    # SIGTERM unmounts and ends it cleanly, saying what it served.
    assert m.returncode == 0 and m.served.startswith("thaw mount: served"), m.served
    assert not os.path.ismount(mnt)


def test_duckdb_and_pyarrow_read_parquet_from_the_mount(
    client: thaw.Client, root: str, mount: Path, tmp_path: Path
) -> None:
    duckdb = pytest.importorskip("duckdb")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    n = 300_000
    table = pa.table(
        {"key": [i % 7 for i in range(n)], "v": list(range(n)), "s": [f"row{i}" for i in range(n)]}
    )
    local = tmp_path / "t.parquet"
    pq.write_table(table, local, compression="none")
    assert local.stat().st_size > 3 << 20  # several 1 MiB blocks
    client.put(local, f"{root}/data/t.parquet", write_type="must-cache")

    path = mount / root.lstrip("/") / "data" / "t.parquet"
    assert path.stat().st_size == local.stat().st_size
    q = "SELECT key, count(*), sum(v), max(s) FROM read_parquet('{}') GROUP BY key ORDER BY key"
    con = duckdb.connect()
    assert con.sql(q.format(path)).fetchall() == con.sql(q.format(local)).fetchall()
    # A glob over the mounted directory, as a job would name its inputs.
    glob = mount / root.lstrip("/") / "data" / "*.parquet"
    assert con.sql(f"SELECT count(*) FROM read_parquet('{glob}')").fetchone() == (n,)
    assert pq.read_table(path).equals(table)
