"""polars reading ``thaw://`` files through :mod:`thaw.polars` (polars itself
takes an unknown scheme for a local path), and a missing ``thaw://`` file
failing with the server's message and errno however it is opened."""

from __future__ import annotations

import errno

import fsspec
import pandas as pd
import polars as pl
import pyarrow.parquet as pq
import pytest

import thaw
import thaw.polars as tpl


@pytest.fixture
def frames(client: thaw.Client, root: str) -> pd.DataFrame:
    """Three parts of one frame, as parquet and CSV files under ``root``."""
    df = pd.DataFrame({"n": range(3000), "key": [f"k{i % 7}" for i in range(3000)]})
    fs = thaw.ThawFileSystem(client=client)
    for i in range(3):
        part = df.iloc[i * 1000 : (i + 1) * 1000]
        with fs.open(f"{root}/pq/part-{i}.parquet", "wb") as f:
            part.to_parquet(f, index=False)
        with fs.open(f"{root}/csv/part-{i}.csv", "wb") as f:
            f.write(part.to_csv(index=False).encode())
    return df


def test_polars_itself_takes_a_thaw_url_for_a_local_path(frames: pd.DataFrame, root: str) -> None:
    """Why thaw.polars exists (polars 2.1): if this starts passing, polars
    learned the scheme and the README can say so."""
    with pytest.raises(FileNotFoundError, match="os error 2"):
        pl.read_parquet(f"thaw://{root}/pq/part-0.parquet")


def test_thaw_polars_reads_parquet_and_csv_files_directories_and_globs(
    frames: pd.DataFrame, cluster: thaw.LocalCluster, client: thaw.Client, root: str
) -> None:
    want = pl.from_pandas(frames)
    with thaw.job(f"polars-{root[3:]}", client=client) as job:
        one = tpl.read_parquet(f"thaw://{root}/pq/part-1.parquet")
        assert one.equals(want.slice(1000, 1000))
        assert tpl.read_parquet(f"thaw://{root}/pq/").equals(want)
        lazy = tpl.scan_parquet(f"thaw://{root}/pq/part-*.parquet").filter(pl.col("key") == "k3")
        assert lazy.collect().equals(want.filter(pl.col("key") == "k3"))
        assert tpl.read_csv(f"thaw://{root}/csv/part-0.csv").equals(want.slice(0, 1000))
        assert tpl.read_csv(f"{root}/csv").equals(want), "a path without the scheme is a Thaw path too"
        counted = tpl.scan_csv(f"thaw://{root}/csv/*.csv").select(pl.len()).collect().item()
        assert counted == 3000
    # The reads carried the job's id.
    assert client.job_stats(job.id)["bytes_read"] > 0


def test_thaw_polars_says_what_is_missing(frames: pd.DataFrame, root: str) -> None:
    with pytest.raises(FileNotFoundError) as e:
        tpl.read_parquet(f"thaw://{root}/pq/nope.parquet")
    assert e.value.errno == errno.ENOENT and f"{root}/pq/nope.parquet" in str(e.value), repr(e.value)
    with pytest.raises(FileNotFoundError, match="no file in Thaw matches"):
        tpl.scan_csv(f"thaw://{root}/csv/*.tsv")
    with pytest.raises(TypeError, match="thaw:// paths"):
        tpl.read_csv(b"n\n1\n")  # type: ignore[arg-type]


def test_a_missing_thaw_file_fails_with_the_server_s_message_and_errno(
    cluster: thaw.LocalCluster, root: str
) -> None:
    """Not a bare FileNotFoundError('/nope.csv'): the server's words, errno
    ENOENT, and still a FileNotFoundError."""
    missing = f"thaw://{root}/nope.csv"
    attempts = {
        "fsspec.open": lambda: fsspec.open(missing, "rb").open(),
        "pandas.read_csv": lambda: pd.read_csv(missing),
        # pyarrow's own FileNotFoundError(path) is replaced (thaw._arrow_errors).
        "pandas.read_parquet": lambda: pd.read_parquet(missing),
        "pq.read_table": lambda: pq.read_table(f"{root}/nope.csv", filesystem=thaw.ThawFileSystem()),
        "ThawFileSystem.info": lambda: thaw.ThawFileSystem().info(missing),
    }
    for how, attempt in attempts.items():
        with pytest.raises(FileNotFoundError) as e:
            attempt()
        err = e.value
        assert isinstance(err, thaw.errors.NotFound), f"{how}: {err!r}"
        assert err.errno == errno.ENOENT and err.strerror == str(err), f"{how}: {err!r}"
        said = str(err)
        assert said.startswith("no such file or directory") and f"{root}/nope.csv" in said, f"{how}: {err!r}"
