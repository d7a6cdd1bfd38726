"""Thaw on HDFS from Python (a real MiniDFSCluster on loopback, ``thaw.minihdfs``):
a parquet file written through Thaw lands in HDFS, and a fresh cluster, with
nothing in memory, reads it back through pandas and migrates it for a job.
Skipped, saying why, where ``scripts/hdfs/setup.sh`` could not build the launcher."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

import thaw
from thaw.minihdfs import MiniHdfs, hdfs_home


@pytest.fixture(scope="module")
def hdfs() -> Iterator[MiniHdfs]:
    if not (hdfs_home() / "classes" / "MiniHdfs.class").exists():
        pytest.skip(f"no MiniDFSCluster in {hdfs_home()} (scripts/hdfs/setup.sh makes it; it needs a JDK)")
    with MiniHdfs() as server:
        yield server


def test_a_file_written_through_thaw_lives_in_hdfs_and_reads_back_cold(hdfs: MiniHdfs) -> None:
    df = pd.DataFrame({"k": [i % 5 for i in range(100_000)], "v": [i * 0.5 for i in range(100_000)]})
    ufs = hdfs.uri("/lake")
    with thaw.LocalCluster(ufs=ufs, workers=1, block_size="1MiB") as c:
        df.to_parquet(f"thaw://{c.master}/t/part-0.parquet", storage_options={"write_type": "through"})
    # A new cluster knows nothing: the file is found in HDFS, read through, and
    # a job's migration brings every block into memory.
    with thaw.LocalCluster(ufs=ufs, workers=1, block_size="1MiB") as c:
        client = thaw.Client(c.master)
        info = client.stat("/t/part-0.parquet")
        assert info["persisted"]
        pd.testing.assert_frame_equal(pd.read_parquet(f"thaw://{c.master}/t/part-0.parquet"), df)
        with thaw.job("hdfs-job", inputs=["/t/part-0.parquet"], client=client) as j:
            j.wait(timeout=60)
            p = j.progress()
            assert p is not None and p["blocks_in_memory"] == p["blocks"], p
