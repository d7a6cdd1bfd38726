"""Thaw on an S3 bucket (a real SeaweedFS on loopback, and moto's server as a
second S3 implementation): pandas, DuckDB and a job's migration read objects that
pyarrow's own S3 client put there; writes through Thaw land in the bucket; a
directory removed or renamed stays gone; a wrong bucket fails the cluster's start-up."""

from __future__ import annotations

import time
from collections.abc import Iterator

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import thaw
from thaw.errors import ThawError
from thaw.seaweed import MotoS3, SeaweedS3


@pytest.fixture(scope="module", params=[SeaweedS3, MotoS3], ids=["seaweedfs", "moto"])
def s3(request: pytest.FixtureRequest) -> Iterator[SeaweedS3]:
    with request.param(["lake"]) as server:
        yield server


@pytest.fixture(scope="module")
def cluster(s3: SeaweedS3) -> Iterator[thaw.LocalCluster]:
    with thaw.LocalCluster(
        ufs=s3.uri("lake", "warehouse"), env=s3.env, workers=2, block_size="1MiB", mem_capacity="256MiB"
    ) as c:
        yield c


def frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"k": [i % 7 for i in range(n)], "v": [float(i) for i in range(n)]})


def test_objects_another_tool_put_in_the_bucket_read_through_thaw(
    s3: SeaweedS3, cluster: thaw.LocalCluster
) -> None:
    df = frame(200_000)
    with s3.filesystem().open_output_stream("lake/warehouse/sales/part-0.parquet") as out:
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), out)
    client = thaw.Client(cluster.master)
    assert client.stat("/sales/part-0.parquet")["length"] > 1 << 20  # several blocks
    got = pd.read_parquet(f"thaw://{cluster.master}/sales/part-0.parquet")
    pd.testing.assert_frame_equal(got, df)
    con = thaw.register_duckdb(duckdb.connect(), thaw.ThawFileSystem(client=client))
    rows = con.sql(
        "SELECT k, sum(v) FROM read_parquet('thaw:///sales/part-0.parquet') GROUP BY k ORDER BY k"
    ).fetchall()
    want = df.groupby("k").v.sum()
    assert [(k, v) for k, v in rows] == list(zip(want.index, want.values, strict=True))


def test_a_jobs_inputs_migrate_from_the_bucket_and_are_read_from_memory(
    s3: SeaweedS3, cluster: thaw.LocalCluster
) -> None:
    payload = bytes(range(256)) * (12 * 1024)  # 3 MiB: three blocks
    with s3.filesystem().open_output_stream("lake/warehouse/inputs/blob.bin") as out:
        out.write(payload)
    client = thaw.Client(cluster.master)
    with thaw.job("s3-job", inputs=["/inputs"], client=client) as job:
        job.wait(timeout=30)
        p = job.progress()
        assert p is not None and p["blocks"] == 3 and p["blocks_in_memory"] == 3, p
        assert client.cat("/inputs/blob.bin") == payload
        stats = job.stats()
    assert stats["bytes_read"] >= len(payload)


def test_writes_that_persist_land_in_the_bucket(s3: SeaweedS3, cluster: thaw.LocalCluster) -> None:
    df = frame(50_000)
    df.to_csv(f"thaw://{cluster.master}/out/table.csv", index=False)  # cache-through by default
    with s3.filesystem().open_input_stream("lake/warehouse/out/table.csv") as f:
        text = f.read().decode()
    assert text.splitlines()[0] == "k,v"
    assert len(text.splitlines()) == 50_001
    client = thaw.Client(cluster.master)
    client.mv("/out/table.csv", "/out/renamed.csv")
    fs = s3.filesystem()
    assert fs.get_file_info("lake/warehouse/out/table.csv").type.name == "NotFound"
    assert fs.get_file_info("lake/warehouse/out/renamed.csv").size == len(text)
    client.rm("/out", recursive=True)
    assert fs.get_file_info("lake/warehouse/out/renamed.csv").type.name == "NotFound"


def test_a_removed_or_renamed_directory_stays_gone(s3: SeaweedS3, cluster: thaw.LocalCluster) -> None:
    client = thaw.Client(cluster.master)
    fs = s3.filesystem()

    def names() -> list[str]:
        return [e["path"] for e in client.ls("/")]

    def in_bucket(name: str) -> bool:
        listed = fs.get_file_info(pafs.FileSelector("lake/warehouse", recursive=True, allow_not_found=True))
        return any(i.path.startswith(f"lake/warehouse/{name}") for i in listed)

    client.mkdir("/r1")
    client.write_bytes("/r1/sub/f", b"bytes")
    client.rm("/r1", recursive=True)
    assert "/r1" not in names()
    assert not in_bucket("r1")
    with pytest.raises(FileNotFoundError):
        client.rm("/r1", recursive=True)
    client.write_bytes("/r1", b"a file now")
    assert client.cat("/r1") == b"a file now"
    client.mkdir("/d1")
    before = client.write_bytes("/d1/f", b"moved")
    time.sleep(1.1)  # S3 copies get a new Last-Modified (whole seconds)
    client.mv("/d1", "/d2")
    assert "/d1" not in names() and "/d2" in names()
    assert not in_bucket("d1/")
    assert client.cat("/d2/f") == b"moved"
    # The same file (not one loaded again from the bucket as new).
    assert client.ls("/d2")[0]["file_id"] == before["file_id"]
    client.rm("/d2", recursive=True)
    client.rm("/r1")


def test_a_bucket_that_does_not_exist_fails_the_start_saying_so(s3: SeaweedS3) -> None:
    with (
        pytest.raises(ThawError, match="does not exist"),
        thaw.LocalCluster(ufs=s3.uri("no-such-bucket"), env=s3.env, startup_timeout=60),
    ):
        pass
