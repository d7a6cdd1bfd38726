"""More S3 clients against the gateway (``thaw local --s3-port``), byte for
byte: the AWS CLI (``aws s3 cp/ls/sync/rm/mb/rb`` and ``aws s3api``), with its
multipart uploads and its own signing (it carries its own botocore), and s3fs
(fsspec's ``s3://``, on aiobotocore) with pandas over it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import thaw

MIB = 1 << 20
AWS = Path(sys.executable).parent / "aws"


@pytest.fixture(scope="module")
def cluster() -> Iterator[thaw.LocalCluster]:
    with thaw.LocalCluster(workers=1, mem_capacity="256MiB", block_size="4MiB", s3_port=0) as c:
        yield c


def aws(c: thaw.LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """``aws ARGS`` against the gateway, with its key pair and nothing of
    this machine's AWS configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ACCESS_KEY_ID="thaw", AWS_SECRET_ACCESS_KEY="thawsecret", AWS_DEFAULT_REGION="us-east-1",
        AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, AWS_MAX_ATTEMPTS="1",
        PYTHONIOENCODING="utf-8",
    )  # fmt: skip
    assert c.s3 is not None
    cmd = [str(AWS), "--endpoint-url", c.s3, *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, f"{r.args}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.skipif(not AWS.exists(), reason="the AWS CLI (awscli) is not installed beside this Python")
def test_the_aws_cli_copies_lists_syncs_and_removes(cluster, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    files = {
        "a.txt": b"hello\n",
        "with space.txt": b"spaces",
        "sub/caf\u00e9 100%.bin": os.urandom(3 * MIB + 5),
        "empty": b"",
    }
    for name, body in files.items():
        (src / name).write_bytes(body)
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(20 * MIB + 123))  # over the CLI's 8 MiB threshold: a multipart upload

    ok(aws(cluster, "s3", "mb", "s3://cli"))
    ok(aws(cluster, "s3", "cp", str(big), "s3://cli/big.bin"))
    t = thaw.Client(cluster.master)
    assert t.stat("/cli/big.bin")["length"] == big.stat().st_size
    ok(aws(cluster, "s3", "sync", str(src), "s3://cli/synced/"))
    listed = ok(aws(cluster, "s3", "ls", "s3://cli/synced/", "--recursive"))
    for name, body in files.items():
        assert f"{len(body)} synced/{name}" in " ".join(listed.split()), listed
    # A second sync finds nothing to send (sizes and times agree).
    assert ok(aws(cluster, "s3", "sync", str(src), "s3://cli/synced/")).strip() == ""

    # Back down, byte for byte: ranged multipart downloads of the big one.
    dst = tmp_path / "dst"
    ok(aws(cluster, "s3", "cp", "s3://cli/synced/", str(dst), "--recursive"))
    for name, body in files.items():
        assert (dst / name).read_bytes() == body, name
    ok(aws(cluster, "s3", "cp", "s3://cli/big.bin", str(tmp_path / "big.back")))
    assert digest(tmp_path / "big.back") == digest(big)

    # s3api: a head, and a listing paged two keys at a time.
    head = json.loads(ok(aws(cluster, "s3api", "head-object", "--bucket", "cli", "--key", "big.bin")))
    assert head["ContentLength"] == big.stat().st_size
    keys: list[str] = []
    token: list[str] = []
    while True:
        listing = ["list-objects-v2", "--bucket", "cli", "--prefix", "synced/", "--max-keys", "2"]
        listing.append("--no-paginate")
        page = json.loads(ok(aws(cluster, "s3api", *listing, *token)))
        keys += [o["Key"] for o in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            break
        token = ["--continuation-token", page["NextContinuationToken"]]
    assert sorted(keys) == sorted(f"synced/{n}" for n in files)
    missing = aws(cluster, "s3api", "head-object", "--bucket", "cli", "--key", "nothing")
    assert missing.returncode != 0 and "404" in missing.stderr, missing.stderr

    # Removal, then the bucket.
    ok(aws(cluster, "s3", "rm", "s3://cli/synced/", "--recursive"))
    gone = aws(cluster, "s3", "ls", "s3://cli/synced/", "--recursive")
    assert (gone.returncode, gone.stdout.strip()) == (1, ""), gone  # the CLI's "nothing found"
    ok(aws(cluster, "s3", "rb", "s3://cli", "--force"))
    assert all(e["name"] != "cli" for e in t.ls("/"))


def test_s3fs_through_fsspec_writes_reads_lists_and_removes(cluster) -> None:
    s3fs = pytest.importorskip("s3fs")
    fs = s3fs.S3FileSystem(
        key="thaw", secret="thawsecret", endpoint_url=cluster.s3, client_kwargs={"region_name": "us-east-1"},
        use_listings_cache=False, skip_instance_cache=True, default_block_size=5 * MIB,
    )  # fmt: skip
    fs.mkdir("fsspec")  # a bucket: a top-level directory
    t = thaw.Client(cluster.master)
    assert t.stat("/fsspec")["type"] == "directory"

    small = {"fsspec/a.bin": os.urandom(1000), "fsspec/d/caf\u00e9 100%.txt": b"x y", "fsspec/d/empty": b""}
    fs.pipe(small)
    big = os.urandom(13 * MIB + 7)  # over s3fs's 5 MiB block: a multipart upload of three parts
    with fs.open("fsspec/big.bin", "wb") as f:
        for i in range(0, len(big), 3 * MIB):
            f.write(big[i : i + 3 * MIB])
    for key, body in {**small, "fsspec/big.bin": big}.items():
        assert fs.cat_file(key) == body, key
        with t.open("/" + key) as native:  # the same bytes natively
            assert native.read() == body, key
    # Ranges, one across the cluster's 4 MiB block boundary, and a seek-and-read file object.
    assert fs.cat_file("fsspec/big.bin", start=4 * MIB - 5, end=4 * MIB + 5) == big[4 * MIB - 5 : 4 * MIB + 5]
    with fs.open("fsspec/big.bin", "rb", block_size=MIB) as f:
        f.seek(9 * MIB + 1)
        assert f.read(100) == big[9 * MIB + 1 : 9 * MIB + 101]

    assert fs.info("fsspec/big.bin")["size"] == len(big)
    assert sorted(fs.ls("fsspec", detail=False)) == ["fsspec/a.bin", "fsspec/big.bin", "fsspec/d"]
    assert sorted(fs.find("fsspec/d")) == sorted(k for k in small if k.startswith("fsspec/d/"))
    assert fs.isdir("fsspec/d") and not fs.exists("fsspec/nothing")
    with pytest.raises(FileNotFoundError):
        fs.cat_file("fsspec/nothing")

    # pandas over s3:// (s3fs underneath), written and read back through the gateway.
    opts = {
        "key": "thaw", "secret": "thawsecret", "endpoint_url": cluster.s3,
        "client_kwargs": {"region_name": "us-east-1"},
    }  # fmt: skip
    df = pd.DataFrame({"k": range(1000), "v": [f"row {i}" for i in range(1000)]})
    df.to_parquet("s3://fsspec/table/part-0.parquet", storage_options=opts)
    back = pd.read_parquet("s3://fsspec/table/", storage_options=opts)
    pd.testing.assert_frame_equal(back.sort_values("k").reset_index(drop=True), df)

    fs.rm("fsspec/d", recursive=True)
    assert not fs.exists("fsspec/d/empty")
    fs.copy("fsspec/big.bin", "fsspec/copy.bin")
    assert fs.cat_file("fsspec/copy.bin") == big
    fs.rm("fsspec", recursive=True)
    assert all(e["name"] != "fsspec" for e in t.ls("/"))
