"""pandas, pyarrow, DuckDB and Dask reading and writing ``thaw://`` paths: the
same answers as from a local copy, and every read carrying the job's id."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import dask
import dask.dataframe as dd
import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import thaw

ROWS = 200_000


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame(
        {
            "key": rng.choice([f"k{i:02d}" for i in range(23)], ROWS),
            "value": rng.normal(size=ROWS),
            "n": rng.integers(0, 1000, ROWS),
        }
    )


@pytest.fixture
def tables(frame: pd.DataFrame, cluster: thaw.LocalCluster, root: str, tmp_path: Path) -> dict[str, str]:
    """The frame as parquet and CSV: written by pandas into Thaw, and locally."""
    local_pq, local_csv = tmp_path / "t.parquet", tmp_path / "t.csv"
    frame.to_parquet(local_pq, row_group_size=20_000)
    frame.to_csv(local_csv, index=False)
    url = f"thaw://{cluster.master}{root}"
    frame.to_parquet(f"{url}/t.parquet", row_group_size=20_000)
    frame.to_csv(f"{url}/t.csv", index=False)
    return {
        "pq": f"thaw://{root}/t.parquet",
        "csv": f"thaw://{root}/t.csv",
        "path": f"{root}/t.parquet",
        "local_pq": str(local_pq),
        "local_csv": str(local_csv),
    }


def test_parquet_written_by_pandas_reads_back_everywhere(
    tables: dict[str, str], frame: pd.DataFrame, client: thaw.Client
) -> None:
    # The file is really in Thaw (and spans several 1 MiB blocks).
    info = thaw.ThawFileSystem().info(tables["pq"])
    assert info["size"] == Path(tables["local_pq"]).stat().st_size
    assert len(info["blocks"]) > 1
    local = pq.read_table(tables["local_pq"])
    # pyarrow, with the fsspec filesystem and with its pyarrow.fs wrapper.
    assert pq.read_table(tables["path"], filesystem=thaw.ThawFileSystem()).equals(local)
    assert pq.read_table(tables["path"], filesystem=thaw.arrow_filesystem()).equals(local)
    # pandas by URL.
    pd.testing.assert_frame_equal(pd.read_parquet(tables["pq"]), pd.read_parquet(tables["local_pq"]))
    pd.testing.assert_frame_equal(pd.read_parquet(tables["pq"]), frame)


def test_duckdb_aggregate_matches_the_local_copy(tables: dict[str, str]) -> None:
    con = thaw.register_duckdb(duckdb.connect())
    q = (
        "SELECT key, sum(value) AS s, count(*) AS c, max(n) AS m"
        " FROM read_parquet('{}') GROUP BY key ORDER BY key"
    )
    got = con.sql(q.format(tables["pq"])).fetchall()
    want = duckdb.sql(q.format(tables["local_pq"])).fetchall()
    assert len(got) == 23
    assert [(k, c, m) for k, _, c, m in got] == [(k, c, m) for k, _, c, m in want]
    np.testing.assert_allclose([s for _, s, _, _ in got], [s for _, s, _, _ in want], rtol=1e-9)
    # Through an Arrow dataset (DuckDB's fastest path to Thaw data).
    con.register("t", thaw.arrow_dataset(tables["pq"]))
    assert [(k, c, m) for k, _, c, m in con.sql(q.replace("read_parquet('{}')", "t")).fetchall()] == [
        (k, c, m) for k, _, c, m in want
    ]
    # DuckDB writes through Thaw too.
    out = tables["pq"].replace("t.parquet", "from-duckdb.parquet")
    con.sql(f"COPY (SELECT key, count(*) AS c FROM read_parquet('{tables['pq']}') GROUP BY key) TO '{out}'")
    assert con.sql(f"SELECT sum(c) FROM read_parquet('{out}')").fetchone() == (ROWS,)


def test_dask_groupby_matches_pandas(tables: dict[str, str]) -> None:
    want = pd.read_parquet(tables["local_pq"]).groupby("key")["value"].agg(["sum", "count"])
    got = dd.read_parquet(tables["pq"]).groupby("key")["value"].agg(["sum", "count"]).compute()
    got.index, want.index = got.index.astype(str), want.index.astype(str)  # dask: pyarrow strings
    pd.testing.assert_frame_equal(got.sort_index(), want.sort_index(), check_exact=False, rtol=1e-9)


def test_dask_reads_a_csv_in_several_partitions(tables: dict[str, str]) -> None:
    df = dd.read_csv(tables["csv"], blocksize=1 << 20)
    assert df.npartitions >= 4
    want = pd.read_csv(tables["local_csv"])
    got = df.compute().reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    # In worker processes: the filesystem travels pickled, with its master.
    with dask.config.set(scheduler="processes", num_workers=2):
        assert int(df["n"].sum().compute()) == int(want["n"].sum())


def _job_reads(client: thaw.Client, job: str) -> tuple[int, int]:
    s = client.job_stats(job)
    return s["reads"], s["bytes_read"]


def test_every_read_in_a_job_block_carries_its_id(tables: dict[str, str], client: thaw.Client) -> None:
    job = f"report-{uuid.uuid4().hex[:6]}"
    unnamed_before = _job_reads(client, "")
    with thaw.job(job) as j:
        assert thaw.current_job_id() == job
        pd.read_parquet(tables["pq"])
        # Dask's threaded scheduler runs tasks in a pool that does not copy
        # contexts: the process's one active job still names them.
        dd.read_csv(tables["csv"], blocksize=1 << 20)["n"].sum().compute()
        con = thaw.register_duckdb(duckdb.connect())
        con.sql(f"SELECT count(*) FROM read_parquet('{tables['pq']}')").fetchall()
    assert thaw.current_job_id() is None
    reads, nbytes = _job_reads(client, job)
    assert reads > 0
    size_pq = Path(tables["local_pq"]).stat().st_size
    size_csv = Path(tables["local_csv"]).stat().st_size
    assert nbytes >= size_pq + size_csv
    # No read in the block went out without the job's id.
    assert _job_reads(client, "") == unnamed_before
    assert j.stats()["reads"] == reads


def test_job_id_by_storage_options_reaches_worker_processes(
    tables: dict[str, str], client: thaw.Client
) -> None:
    job = f"etl-{uuid.uuid4().hex[:6]}"
    df = dd.read_csv(tables["csv"], blocksize=1 << 20, storage_options={"job_id": job})
    with dask.config.set(scheduler="processes", num_workers=2):
        df["n"].sum().compute()
    assert client.job_stats(job)["bytes_read"] >= Path(tables["local_csv"]).stat().st_size


def test_thaw_urls_work_without_importing_thaw(tables: dict[str, str], cluster: thaw.LocalCluster) -> None:
    # fsspec finds the protocol through the package's entry point.
    code = f"import pandas as pd; print(len(pd.read_parquet('thaw://{cluster.master}{tables['path']}')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(ROWS)


def test_dask_distributed_workers_read_through_thaw(tables: dict[str, str]) -> None:
    from distributed import Client as DaskClient
    from distributed import LocalCluster as DaskCluster

    want = pd.read_parquet(tables["local_pq"])["value"].sum()
    with (
        DaskCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as dc,
        DaskClient(dc),
    ):
        got = dd.read_parquet(tables["pq"])["value"].sum().compute()
    assert got == pytest.approx(want, rel=1e-9)


def test_dask_writes_a_dataset_and_ls_shows_where_its_blocks_are(
    tables: dict[str, str], frame: pd.DataFrame
) -> None:
    out = tables["pq"].replace("t.parquet", "by-dask")
    dd.from_pandas(frame, npartitions=4).to_parquet(out)
    back = dd.read_parquet(out).compute().reset_index(drop=True)
    pd.testing.assert_frame_equal(back, frame, check_dtype=False)
    files = [e for e in thaw.ThawFileSystem().ls(out) if e["type"] == "file"]
    assert len(files) >= 4
    for e in files:
        assert e["blocks"] and all(b["hosts"] and b["replicas"][0]["tier"] == "MEM" for b in e["blocks"])
