"""The S3 gateway (``thaw gateway``, ``LocalCluster(s3_port=)``) against real
S3 clients: boto3, pyarrow's ``S3FileSystem`` and polars, each byte for byte
against a real ``thaw local``. A walk through the operations it serves, their
error codes, pagination, delimiters, odd keys and ranges at block boundaries,
and bad input: wrong signatures, keys that escape, short bodies."""

from __future__ import annotations

import hashlib
import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

import thaw

from .procs import cli_gateway

boto3 = pytest.importorskip("boto3")
from boto3.s3.transfer import TransferConfig  # noqa: E402
from botocore import UNSIGNED  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

MIB = 1 << 20


@pytest.fixture(scope="module")
def cluster() -> Iterator[thaw.LocalCluster]:
    with thaw.LocalCluster(workers=1, mem_capacity="256MiB", block_size="1MiB", s3_port=0) as c:
        assert c.s3 is not None and c.s3.startswith("http://")
        yield c


def s3(c: thaw.LocalCluster, **kw: Any) -> Any:
    kw.setdefault("aws_access_key_id", "thaw")
    kw.setdefault("aws_secret_access_key", "thawsecret")
    cfg = Config(
        retries={"max_attempts": 1}, **({"signature_version": UNSIGNED} if kw.pop("unsigned", False) else {})
    )
    endpoint = kw.pop("endpoint_url", c.s3)
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", config=cfg, **kw)


def code(e: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    r = e.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def data(n: int, seed: int) -> bytes:
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}-{i}".encode()).digest()
        i += 1
    return bytes(out[:n])


def test_buckets_are_top_level_directories(cluster) -> None:
    c = s3(cluster)
    c.create_bucket(Bucket="bk1")
    assert thaw.Client(cluster.master).stat("/bk1")["type"] == "directory"
    assert "bk1" in [b["Name"] for b in c.list_buckets()["Buckets"]]
    c.head_bucket(Bucket="bk1")
    with pytest.raises(ClientError) as e:
        c.head_bucket(Bucket="nobucket")
    assert code(e)[1] == 404
    with pytest.raises(ClientError) as e:
        c.create_bucket(Bucket="bk1")
    assert code(e) == ("BucketAlreadyOwnedByYou", 409)
    c.put_object(Bucket="bk1", Key="f", Body=b"x")
    with pytest.raises(ClientError) as e:
        c.delete_bucket(Bucket="bk1")
    assert code(e) == ("BucketNotEmpty", 409)
    c.delete_object(Bucket="bk1", Key="f")
    c.delete_bucket(Bucket="bk1")
    assert "bk1" not in [b["Name"] for b in c.list_buckets()["Buckets"]]
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="nobucket", Key="k")
    assert code(e) == ("NoSuchBucket", 404)
    # A PUT makes a key's directories, never its bucket.
    with pytest.raises(ClientError) as e:
        c.put_object(Bucket="nobucket", Key="a/b", Body=b"x")
    assert code(e) == ("NoSuchBucket", 404)
    assert not thaw.Client(cluster.master).exists("/nobucket")


ODD_KEYS = ["empty", "with space.txt", "ünïcödé/ファイル.bin", "per%cent+plus.bin", "deep/a/b/c/d.bin", "x-1"]


def test_objects_round_trip_byte_exact_with_odd_keys(cluster) -> None:
    c = s3(cluster)
    c.create_bucket(Bucket="odd")
    bodies = {k: (b"" if k == "empty" else data(100_000 + i * 777, i)) for i, k in enumerate(ODD_KEYS)}
    for k, b in bodies.items():
        c.put_object(Bucket="odd", Key=k, Body=b)
    for k, b in bodies.items():
        r = c.get_object(Bucket="odd", Key=k)
        assert r["Body"].read() == b, k
        assert r["ContentLength"] == len(b)
        assert c.head_object(Bucket="odd", Key=k)["ContentLength"] == len(b)
    # The same bytes through Thaw's own client, at the mapped paths.
    t = thaw.Client(cluster.master)
    assert t.cat("/odd/ünïcödé/ファイル.bin") == bodies["ünïcödé/ファイル.bin"]
    listed = []
    for page in c.get_paginator("list_objects_v2").paginate(Bucket="odd"):
        listed += [(o["Key"], o["Size"]) for o in page.get("Contents", [])]
    assert listed == sorted((k, len(b)) for k, b in bodies.items())
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="odd", Key="missing")
    assert code(e) == ("NoSuchKey", 404)
    # A key cannot be an object and a prefix of others at once (a tree).
    with pytest.raises(ClientError) as e:
        c.put_object(Bucket="odd", Key="empty/child", Body=b"x")
    assert code(e) == ("InvalidArgument", 400)
    with pytest.raises(ClientError) as e:
        c.put_object(Bucket="odd", Key="deep/a", Body=b"x")
    assert code(e) == ("InvalidArgument", 400)
    assert c.get_object(Bucket="odd", Key="empty")["Body"].read() == b""


def test_ranges_at_block_boundaries_and_conditions(cluster) -> None:
    c = s3(cluster)
    c.create_bucket(Bucket="rng")
    body = data(3 * MIB + 5, 7)
    c.put_object(Bucket="rng", Key="f.bin", Body=body)
    for first, last in [
        (0, 0),
        (MIB - 1, MIB),
        (MIB - 3, 2 * MIB + 3),
        (2 * MIB, 3 * MIB + 4),
        (3 * MIB + 4, 3 * MIB + 4),
    ]:
        r = c.get_object(Bucket="rng", Key="f.bin", Range=f"bytes={first}-{last}")
        assert r["Body"].read() == body[first : last + 1], (first, last)
        assert r["ContentRange"] == f"bytes {first}-{last}/{len(body)}"
    assert c.get_object(Bucket="rng", Key="f.bin", Range="bytes=-10")["Body"].read() == body[-10:]
    assert c.get_object(Bucket="rng", Key="f.bin", Range=f"bytes={MIB}-")["Body"].read() == body[MIB:]
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="rng", Key="f.bin", Range=f"bytes={len(body)}-")
    assert code(e) == ("InvalidRange", 416)
    # ETags stay while the object does, change when it is replaced.
    tag = c.head_object(Bucket="rng", Key="f.bin")["ETag"]
    assert c.head_object(Bucket="rng", Key="f.bin")["ETag"] == tag
    assert c.get_object(Bucket="rng", Key="f.bin", IfMatch=tag)["Body"].read() == body
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="rng", Key="f.bin", IfNoneMatch=tag)
    assert code(e)[1] == 304
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="rng", Key="f.bin", IfMatch='"0123"')
    assert code(e) == ("PreconditionFailed", 412)
    c.put_object(Bucket="rng", Key="f.bin", Body=b"new")
    assert c.head_object(Bucket="rng", Key="f.bin")["ETag"] != tag
    assert c.get_object(Bucket="rng", Key="f.bin")["Body"].read() == b"new"


def test_listings_page_group_and_encode(cluster) -> None:
    c = s3(cluster)
    c.create_bucket(Bucket="lst")
    keys = [f"logs/2026/part-{i:04d}" for i in range(1100)] + [
        "logs/a.csv",
        "logs-x",
        "top",
        "dir/",
        "logs/2026.csv",
    ]
    # The many through Thaw's client (faster), the rest through S3.
    t = thaw.Client(cluster.master)
    for k in keys[:1100]:
        t.write_bytes(f"/lst/{k}", k.encode())
    for k in keys[1100:]:
        c.put_object(Bucket="lst", Key=k, Body=b"" if k.endswith("/") else k.encode())
    # Every key once, in S3's order, over three pages of 500.
    got = []
    pages = 0
    for page in c.get_paginator("list_objects_v2").paginate(Bucket="lst", PaginationConfig={"PageSize": 500}):
        got += [o["Key"] for o in page.get("Contents", [])]
        pages += 1
    assert got == sorted(keys) and pages == 3
    # Version 1 with markers, the same keys.
    got1 = []
    for page in c.get_paginator("list_objects").paginate(Bucket="lst", PaginationConfig={"PageSize": 400}):
        got1 += [o["Key"] for o in page.get("Contents", [])]
    assert got1 == sorted(keys)
    # A delimiter groups; a prefix ending mid-name filters.
    r = c.list_objects_v2(Bucket="lst", Delimiter="/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["dir/", "logs/"]
    assert [o["Key"] for o in r["Contents"]] == ["logs-x", "top"]
    r = c.list_objects_v2(Bucket="lst", Prefix="logs/2026", Delimiter="/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["logs/2026/"]
    assert [o["Key"] for o in r["Contents"]] == ["logs/2026.csv"]
    r = c.list_objects_v2(Bucket="lst", Prefix="logs/2026/part-10", MaxKeys=1000)
    assert [o["Key"] for o in r["Contents"]] == [f"logs/2026/part-{i:04d}" for i in range(1000, 1100)]
    # Another delimiter: a character, not a directory.
    r = c.list_objects_v2(Bucket="lst", Prefix="logs", Delimiter="-")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["logs-", "logs/2026/part-"]
    assert [o["Key"] for o in r["Contents"]] == ["logs/2026.csv", "logs/a.csv"]
    assert c.list_objects_v2(Bucket="lst", Prefix="nothing/")["KeyCount"] == 0
    # An object's key as a "directory" holds nothing (s3fs's isdir asks this).
    for prefix in ("top/", "logs/2026.csv/", "logs/2026/part-0001/"):
        assert c.list_objects_v2(Bucket="lst", Prefix=prefix, Delimiter="/")["KeyCount"] == 0, prefix
        assert c.list_objects_v2(Bucket="lst", Prefix=prefix)["KeyCount"] == 0, prefix


def test_a_listing_resumed_anywhere_keeps_s3_order(cluster) -> None:
    # Names that extend a directory's name with a byte below "/" sort before
    # its keys; a listing resumed after any of them (a page boundary, a
    # StartAfter that is no key) must still return every later key once.
    c = s3(cluster)
    c.create_bucket(Bucket="order")
    keys = ["a!", "a-1", "a.csv", "a/b-c", "a/b.d", "a/b/e", "a/b/e-f", "a/c", "a0", "ab/x", "b"]
    for k in keys:
        c.put_object(Bucket="order", Key=k, Body=k.encode())
    assert sorted(keys) == keys
    for size in (1, 2, 3, 5):
        got = []
        for page in c.get_paginator("list_objects_v2").paginate(
            Bucket="order", PaginationConfig={"PageSize": size}
        ):
            got += [o["Key"] for o in page.get("Contents", [])]
        assert got == keys, size
    for after in [*keys, "", "a", "a/", "a.", "a/b/", "a/b/e/", "a/bz", "a/b0", "zz", "a" * 300]:
        r = c.list_objects_v2(Bucket="order", StartAfter=after)
        assert [o["Key"] for o in r.get("Contents", [])] == [k for k in keys if k > after], after
        r = c.list_objects_v2(Bucket="order", StartAfter=after, Prefix="a/b")
        assert [o["Key"] for o in r.get("Contents", [])] == [
            k for k in keys if k > after and k.startswith("a/b")
        ], after


def test_deletes_copies_and_write_types(cluster) -> None:
    c = s3(cluster)
    t = thaw.Client(cluster.master)
    c.create_bucket(Bucket="del")
    for i in range(1000):
        t.write_bytes(f"/del/many/k{i}", b"")
    r = c.delete_objects(Bucket="del", Delete={"Objects": [{"Key": f"many/k{i}"} for i in range(1000)]})
    assert len(r["Deleted"]) == 1000 and not r.get("Errors")
    # The emptied directories went with their last keys.
    assert c.list_objects_v2(Bucket="del")["KeyCount"] == 0
    with pytest.raises(ClientError) as e:
        c.delete_objects(Bucket="del", Delete={"Objects": [{"Key": f"k{i}"} for i in range(1001)]})
    assert code(e)[0] == "MalformedXML"
    c.delete_object(Bucket="del", Key="never-there")
    body = data(2 * MIB + 1, 3)
    c.put_object(Bucket="del", Key="src.bin", Body=body)
    c.copy_object(Bucket="del", Key="copies/dst.bin", CopySource={"Bucket": "del", "Key": "src.bin"})
    assert c.get_object(Bucket="del", Key="copies/dst.bin")["Body"].read() == body
    # Write types: the gateway's default, a header, metadata.
    assert t.stat("/del/src.bin")["write_type"] == "cache-through"

    def with_header(params: Any, **_: Any) -> None:
        params["headers"]["x-thaw-write-type"] = "must-cache"

    h = s3(cluster)
    h.meta.events.register("before-call.s3.PutObject", with_header)
    h.put_object(Bucket="del", Key="mem.bin", Body=b"in memory only")
    assert t.stat("/del/mem.bin")["write_type"] == "must-cache"
    c.put_object(Bucket="del", Key="async.bin", Body=b"a", Metadata={"thaw-write-type": "async-through"})
    assert t.stat("/del/async.bin")["write_type"] == "async-through"
    with pytest.raises(ClientError) as e:
        c.put_object(Bucket="del", Key="bad.bin", Body=b"a", Metadata={"thaw-write-type": "sideways"})
    assert code(e) == ("InvalidArgument", 400)


def test_bad_input_gets_s3_errors_and_leaves_nothing(cluster) -> None:
    c = s3(cluster)
    t = thaw.Client(cluster.master)
    c.create_bucket(Bucket="bad")
    for key in ["a/../../escape", "../x", "a//b", "./x"]:
        with pytest.raises(ClientError) as e:
            c.put_object(Bucket="bad", Key=key, Body=b"x")
        assert code(e) == ("InvalidArgument", 400), key
    assert c.list_objects_v2(Bucket="bad")["KeyCount"] == 0
    # Wrong secret, unknown key.
    with pytest.raises(ClientError) as e:
        s3(cluster, aws_secret_access_key="wrong").list_objects_v2(Bucket="bad")
    assert code(e) == ("SignatureDoesNotMatch", 403)
    with pytest.raises(ClientError) as e:
        s3(cluster, aws_access_key_id="nobody").list_objects_v2(Bucket="bad")
    assert code(e)[1] == 403
    # Unsigned requests are anonymous access (a cluster without a secret).
    u = s3(cluster, unsigned=True)
    u.put_object(Bucket="bad", Key="anon", Body=b"anonymous")
    assert u.get_object(Bucket="bad", Key="anon")["Body"].read() == b"anonymous"
    # A body shorter than its Content-Length, then the connection closed:
    # no object, nothing staged, and the gateway goes on serving.
    c.put_object(Bucket="bad", Key="kept", Body=b"old bytes")
    host, port = cluster.s3.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"PUT /bad/kept HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"y" * 5000)
        s.shutdown(socket.SHUT_WR)
        s.recv(4096)
    assert c.get_object(Bucket="bad", Key="kept")["Body"].read() == b"old bytes"
    # The same for a new key (written in place): no object, and no directory
    # left for a listing to show as a prefix.
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"PUT /bad/new/deep/k HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"y" * 5000)
        s.shutdown(socket.SHUT_WR)
        s.recv(4096)
    deadline = time.monotonic() + 10
    while any(e["name"] == "new" for e in t.ls("/bad")):
        assert time.monotonic() < deadline, t.ls("/bad")
        time.sleep(0.1)
    assert c.list_objects_v2(Bucket="bad", Delimiter="/").get("CommonPrefixes", []) == []
    staged = t.ls("/.thaw-gateway") if any(e["name"] == ".thaw-gateway" for e in t.ls("/")) else []
    assert staged == []
    assert [b["Name"] for b in c.list_buckets()["Buckets"] if b["Name"].startswith(".")] == []


def test_pyarrow_and_polars_read_a_bucket(cluster, tmp_path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from pyarrow import fs as pafs

    c = s3(cluster)
    c.create_bucket(Bucket="tables")
    endpoint = cluster.s3.removeprefix("http://")
    s3fs = pafs.S3FileSystem(
        access_key="thaw",
        secret_key="thawsecret",
        endpoint_override=endpoint,
        scheme="http",
        region="us-east-1",
    )
    table = pa.table({"id": list(range(50_000)), "name": [f"n{i % 97}" for i in range(50_000)]})
    # pyarrow writes through multipart uploads.
    for i, start in enumerate(range(0, 50_000, 20_000)):
        pq.write_table(table.slice(start, 20_000), f"tables/t/part-{i}.parquet", filesystem=s3fs)
    back = pq.read_table("tables/t", filesystem=s3fs)
    assert back.sort_by("id").equals(table)
    parts = [o["Key"] for o in c.list_objects_v2(Bucket="tables", Prefix="t/")["Contents"]]
    assert len(parts) == 3
    pl = pytest.importorskip("polars")
    opts = {
        "aws_access_key_id": "thaw",
        "aws_secret_access_key": "thawsecret",
        "aws_endpoint_url": cluster.s3,
        "aws_region": "us-east-1",
        "aws_allow_http": "true",
    }
    df = pl.read_parquet(f"s3://tables/{parts[0]}", storage_options=opts)
    first = pq.read_table(f"tables/{parts[0]}", filesystem=s3fs)
    assert df.to_dicts() == first.to_pylist()
    total = (
        pl.scan_parquet("s3://tables/t/*.parquet", storage_options=opts).select(pl.col("id").sum()).collect()
    )
    assert total.item() == sum(range(50_000))


def test_multipart_uploads_and_ranged_downloads(cluster, tmp_path) -> None:
    c = s3(cluster)
    t = thaw.Client(cluster.master)
    c.create_bucket(Bucket="mpu")
    src = tmp_path / "big.bin"
    body = data(17 * MIB + 3, 11)
    src.write_bytes(body)
    # s3transfer: 5 MiB parts, 4 threads up; ranged GETs down.
    cfg = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB, max_concurrency=4)
    c.upload_file(str(src), "mpu", "dir/big.bin", Config=cfg)
    assert t.cat("/mpu/dir/big.bin") == body
    dst = tmp_path / "back.bin"
    c.download_file("mpu", "dir/big.bin", str(dst), Config=cfg)
    assert dst.read_bytes() == body
    # By hand: parts out of order, one sent twice, listed, completed.
    up = c.create_multipart_upload(Bucket="mpu", Key="manual.bin")["UploadId"]
    chunks = [data(5 * MIB, 20), data(5 * MIB, 21), b"tail"]
    tags = {}
    for n in (3, 1, 2, 2):
        tags[n] = c.upload_part(
            Bucket="mpu", Key="manual.bin", UploadId=up, PartNumber=n, Body=chunks[n - 1]
        )["ETag"]
    parts = c.list_parts(Bucket="mpu", Key="manual.bin", UploadId=up)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in parts] == [(1, 5 * MIB), (2, 5 * MIB), (3, 4)]

    def complete(key: str, upload: str, *parts: tuple[int, str]) -> None:
        listed = [{"PartNumber": n, "ETag": tag} for n, tag in parts]
        c.complete_multipart_upload(Bucket="mpu", Key=key, UploadId=upload, MultipartUpload={"Parts": listed})

    with pytest.raises(ClientError) as e:
        complete("manual.bin", up, (1, '"00"'), (3, tags[3]))
    assert code(e) == ("InvalidPart", 400)
    with pytest.raises(ClientError) as e:
        complete("manual.bin", up, (3, tags[3]), (1, tags[1]))
    assert code(e) == ("InvalidPartOrder", 400)
    complete("manual.bin", up, *[(n, tags[n]) for n in (1, 2, 3)])
    assert c.get_object(Bucket="mpu", Key="manual.bin")["Body"].read() == b"".join(chunks)
    with pytest.raises(ClientError) as e:
        c.list_parts(Bucket="mpu", Key="manual.bin", UploadId=up)
    assert code(e) == ("NoSuchUpload", 404)
    # A small part before the last; an aborted upload leaves nothing.
    up = c.create_multipart_upload(Bucket="mpu", Key="small.bin")["UploadId"]
    a = c.upload_part(Bucket="mpu", Key="small.bin", UploadId=up, PartNumber=1, Body=b"x")["ETag"]
    b = c.upload_part(Bucket="mpu", Key="small.bin", UploadId=up, PartNumber=2, Body=b"y")["ETag"]
    with pytest.raises(ClientError) as e:
        complete("small.bin", up, (1, a), (2, b))
    assert code(e) == ("EntityTooSmall", 400)
    c.abort_multipart_upload(Bucket="mpu", Key="small.bin", UploadId=up)
    assert t.ls("/.thaw-gateway/mpu") == []
    assert "small.bin" not in [o["Key"] for o in c.list_objects_v2(Bucket="mpu").get("Contents", [])]
    with pytest.raises(ClientError) as e:
        c.upload_part(Bucket="mpu", Key="other.bin", UploadId=up, PartNumber=1, Body=b"x")
    assert code(e) == ("NoSuchUpload", 404)


def test_a_gateway_sweeps_uploads_left_unfinished_and_drops_stalled_bodies(cluster) -> None:
    """A second gateway (the CLI's) whose uploads expire after a second and
    whose request bodies may pause for a second at most."""
    with cli_gateway(cluster.master, "--upload-ttl", "1", "--body-timeout", "1") as endpoint:
        gw = s3(cluster, endpoint_url=endpoint)
        gw.create_bucket(Bucket="sweep")
        up = gw.create_multipart_upload(Bucket="sweep", Key="left.bin")["UploadId"]
        gw.upload_part(Bucket="sweep", Key="left.bin", UploadId=up, PartNumber=1, Body=b"abandoned")
        deadline = time.monotonic() + 30
        while thaw.Client(cluster.master).ls("/.thaw-gateway/mpu"):
            assert time.monotonic() < deadline, "the upload was never swept"
            time.sleep(0.2)
        with pytest.raises(ClientError) as e:
            gw.list_parts(Bucket="sweep", Key="left.bin", UploadId=up)
        assert code(e) == ("NoSuchUpload", 404)
        # A client that sends part of its body and stalls: its request
        # fails, the old object stays, nothing is staged, others are served.
        gw.put_object(Bucket="sweep", Key="kept", Body=b"old")
        host, port = endpoint.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as s:
            s.sendall(b"PUT /sweep/kept HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n" + b"z" * 4000)
            answer = s.recv(4096)
        assert b"IncompleteBody" in answer, answer
        assert gw.get_object(Bucket="sweep", Key="kept")["Body"].read() == b"old"
        staged = [e for e in thaw.Client(cluster.master).ls("/.thaw-gateway") if e["type"] != "directory"]
        assert staged == []


def api(cluster: thaw.LocalCluster, method: str, path: str) -> tuple[int, dict[str, Any]]:
    what, _, rest = path.partition("?")
    req = urllib.request.Request(f"{cluster.s3}/?thaw={what}&{rest}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read().decode()}


def test_job_hints_warm_a_prefix_and_reads_count_against_the_job(cluster) -> None:
    c = s3(cluster)
    t = thaw.Client(cluster.master)
    c.create_bucket(Bucket="warm")

    def cold(params: Any, **_: Any) -> None:
        params["headers"]["x-thaw-write-type"] = "through"

    w = s3(cluster)
    w.meta.events.register("before-call.s3.PutObject", cold)
    bodies = {f"in/shard-{i}.bin": data(MIB + 17 * i, 40 + i) for i in range(3)}
    for k, b in bodies.items():
        w.put_object(Bucket="warm", Key=k, Body=b)
    w.put_object(Bucket="warm", Key="other/x.bin", Body=b"not asked for")
    assert all(t.stat(f"/warm/{k}")["in_memory_bytes"] == 0 for k in bodies)
    # The prefix's objects become job "train"'s inputs, migrated into memory.
    status, info = api(cluster, "POST", "migrate?bucket=warm&prefix=in/&job=train&lease=120")
    assert status == 200, info
    assert info["job_id"] == "train" and info["bytes"] == sum(len(b) for b in bodies.values())
    deadline = time.monotonic() + 30
    while api(cluster, "GET", "job?job=train")[1]["bytes_in_memory"] < info["bytes"]:
        assert time.monotonic() < deadline, api(cluster, "GET", "job?job=train")
        time.sleep(0.1)
    assert t.stat("/warm/other/x.bin")["in_memory_bytes"] == 0
    # Reads that name the job count against it (and come from memory).

    def as_train(params: Any, **_: Any) -> None:
        params["headers"]["x-thaw-job"] = "train"

    r = s3(cluster)
    r.meta.events.register("before-call.s3.GetObject", as_train)
    for k, b in bodies.items():
        assert r.get_object(Bucket="warm", Key=k)["Body"].read() == b
    # (The workers report reads with their heartbeats.)
    deadline = time.monotonic() + 30
    while (job := api(cluster, "GET", "job?job=train")[1])["read_bytes"] < info["bytes"]:
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    assert job["read_bytes"] == job["read_bytes_from_memory"] == info["bytes"], job
    status, _ = api(cluster, "POST", "evict?job=train")
    assert status == 200
    # Bad calls: a clear S3 error each.
    assert api(cluster, "POST", "migrate?bucket=warm&prefix=in/")[0] == 400
    assert api(cluster, "POST", "migrate?bucket=warm&prefix=none/&job=j")[0] == 404
    assert api(cluster, "POST", "migrate?bucket=nobucket&prefix=&job=j")[0] == 404
    assert api(cluster, "GET", "other?job=j")[0] == 501
