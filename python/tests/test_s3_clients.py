"""More S3 clients against the gateway (``thaw local --s3-port``), byte for
byte: the AWS CLI (``aws s3 cp/ls/sync/rm/mb/rb`` and ``aws s3api``), with its
multipart uploads and its own signing (it carries its own botocore)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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
