"""S3 GETs and PUTs through ``thaw gateway`` (``thaw local --s3-port``) beside
SeaweedFS's own S3 endpoint (``thaw.seaweed``) on this machine, with the same
boto3 client; and Thaw's native read of the same file (``thaw fs cat``, on the
worker's host and as a remote client).

- Large: one 1 GiB object held in Thaw memory (must-cache) and in SeaweedFS
  (its pages warm: its best case), read whole by 1 and by 8 concurrent
  clients, each in 8 MiB reads; MiB/s over all bytes, median of the repeats.
- Small: N objects of 64 KiB, PUT then GET by 8 client threads; ops/s and the
  p99 latency of each.

    python -m thaw_bench.scripts.s3_gateway [--size-mib 1024] [--objects 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
from botocore.config import Config

import thaw
from thaw.cluster import find_binary
from thaw.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedS3

CHUNK = 8 << 20
SMALL = 64 << 10
THREADS = 8


def client(endpoint: str, key: str, secret: str) -> Any:
    cfg = Config(max_pool_connections=2 * THREADS, retries={"max_attempts": 2})
    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
        region_name="us-east-1", config=cfg,
    )  # fmt: skip


def read_whole(s3: Any, bucket: str, key: str) -> int:
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    n = 0
    while chunk := body.read(CHUNK):
        n += len(chunk)
    return n


def get_rate(s3: Any, bucket: str, key: str, clients: int, size: int) -> float:
    """MiB/s of `clients` concurrent whole-object GETs."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        got = list(pool.map(lambda _: read_whole(s3, bucket, key), range(clients)))
    took = time.perf_counter() - t0
    assert all(g == size for g in got), got
    return clients * size / (1 << 20) / took


def small_ops(s3: Any, bucket: str, n: int) -> dict[str, float]:
    body = os.urandom(SMALL)

    def timed(f: Any) -> float:
        t0 = time.perf_counter()
        f()
        return time.perf_counter() - t0

    out: dict[str, float] = {}
    for op in ("put", "get"):

        def one(i: int, op: str = op) -> float:
            if op == "put":
                return timed(lambda: s3.put_object(Bucket=bucket, Key=f"small/o{i}", Body=body))
            return timed(lambda: s3.get_object(Bucket=bucket, Key=f"small/o{i}")["Body"].read())

        t0 = time.perf_counter()
        with ThreadPoolExecutor(THREADS) as pool:
            lat = sorted(pool.map(one, range(n)))
        out[f"{op}_ops_per_s"] = n / (time.perf_counter() - t0)
        out[f"{op}_p99_ms"] = lat[int(0.99 * (n - 1))] * 1000
    return out


def native_rate(env: dict[str, str], path: str, size: int, remote: bool) -> float:
    e = {**env, **({"THAW_HOST": "elsewhere"} if remote else {})}
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        subprocess.run([find_binary(), "fs", "cat", path], stdout=null, check=True, env=e)
    return size / (1 << 20) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--objects", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    size = args.size_mib << 20
    data = os.urandom(size)
    mem = f"{2 * args.size_mib + 1024}MiB"
    with (
        SeaweedS3(["bench"]) as weed,
        tempfile.TemporaryDirectory() as tmp,
        thaw.LocalCluster(workers=1, mem_capacity=mem, s3_port=0, ufs=tmp) as c,
    ):
        assert c.s3 is not None
        gw = client(c.s3, "thaw", "thawsecret")
        sw = client(weed.endpoint, ACCESS_KEY, SECRET_KEY)
        gw.create_bucket(Bucket="bench")
        thaw.Client(c.master).write_bytes("/bench/big.bin", data, write_type="must-cache")
        sw.put_object(Bucket="bench", Key="big.bin", Body=data)
        del data
        env = {**os.environ, "THAW_MASTER": c.master}
        rows: Any = {}
        for _ in range(args.repeats):
            # Alternating sides, each read once to warm before it counts.
            for name, fn in [
                ("thaw_gateway_1", lambda: get_rate(gw, "bench", "big.bin", 1, size)),
                ("seaweed_1", lambda: get_rate(sw, "bench", "big.bin", 1, size)),
                ("thaw_gateway_8", lambda: get_rate(gw, "bench", "big.bin", 8, size)),
                ("seaweed_8", lambda: get_rate(sw, "bench", "big.bin", 8, size)),
                ("thaw_native_local", lambda: native_rate(env, "/bench/big.bin", size, False)),
                ("thaw_native_remote", lambda: native_rate(env, "/bench/big.bin", size, True)),
            ]:
                rows.setdefault(name, []).append(fn())
        rows_all = rows
        large = {k: statistics.median(v) for k, v in rows.items()}
        small = {
            "thaw_gateway": small_ops(gw, "bench", args.objects),
            "seaweed": small_ops(sw, "bench", args.objects),
        }
    gs, ss = small["thaw_gateway"], small["seaweed"]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    mib = args.size_mib
    names = {
        "thaw_gateway_1": f"thaw gateway, GET of a {mib} MiB object in memory, 1 client",
        "seaweed_1": "SeaweedFS S3, the same object (pages warm), 1 client",
        "thaw_gateway_8": "thaw gateway, 8 concurrent clients (MiB/s over all)",
        "seaweed_8": "SeaweedFS S3, 8 concurrent clients",
        "thaw_native_local": "thaw fs cat, on the worker's host (native, short-circuit)",
        "thaw_native_remote": "thaw fs cat, as a remote client (native, streamed)",
    }
    rows: list[dict[str, str]] = [
        {
            "reader": names[k],
            "median MiB/s": f"{v:.0f}",
            "range": f"{min(rows_all[k]):.0f}-{max(rows_all[k]):.0f}",
        }
        for k, v in large.items()
    ]
    for side, d in small.items():
        rows.append({
            "reader": f"{side}: {args.objects} objects of 64 KiB, {THREADS} threads",
            "PUT ops/s": f"{d['put_ops_per_s']:.0f}", "PUT p99 ms": f"{d['put_p99_ms']:.1f}",
            "GET ops/s": f"{d['get_ops_per_s']:.0f}", "GET p99 ms": f"{d['get_p99_ms']:.1f}",
        })  # fmt: skip
    result = {
        "title": "S3 GETs and PUTs (boto3) through thaw gateway, SeaweedFS's S3 endpoint, Thaw's native read",
        "section": "The S3 gateway (`thaw gateway`)",
        "command": [
            "./scripts/python-env.sh release",
            f".venv/bin/python -m thaw_bench.scripts.s3_gateway --size-mib {mib} --objects {args.objects} "
            f"--repeats {args.repeats} --out results/s3-gateway.json",
        ],
        "commit": commit,
        "commit_is": "the build measured",
        "date": time.strftime("%Y-%m-%d"),
        "machine": "2 vCPUs, 24 GiB RAM, Firecracker VM; quiet (nothing else running, sched_autogroup off)",
        "ratios": {
            "gateway vs native remote": f"{large['thaw_gateway_1'] / large['thaw_native_remote']:.2f}",
            "gateway vs SeaweedFS, 1 client": f"{large['thaw_gateway_1'] / large['seaweed_1']:.2f}",
            "gateway vs SeaweedFS, 8 clients": f"{large['thaw_gateway_8'] / large['seaweed_8']:.2f}",
            "small GET ops/s vs SeaweedFS": f"{gs['get_ops_per_s'] / ss['get_ops_per_s']:.2f}",
            "small PUT ops/s vs SeaweedFS": f"{gs['put_ops_per_s'] / ss['put_ops_per_s']:.2f}",
        },
        "rows": rows,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
