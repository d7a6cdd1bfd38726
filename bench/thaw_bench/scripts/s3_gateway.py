"""S3 GETs and PUTs through ``thaw gateway`` (``thaw local --s3-port``) beside
SeaweedFS's own S3 endpoint (``thaw.seaweed``) on this machine, with the same
boto3 client; and Thaw's native read of the same file (``thaw fs cat``, on the
worker's host and as a remote client).

- Large: one 1 GiB object held in Thaw memory (must-cache) and in SeaweedFS
  (its pages warm: its best case), read whole by 1 and by 8 concurrent
  clients, each in 8 MiB reads; MiB/s over all bytes, median of the repeats.
- Small: N objects of 64 KiB, PUT (new keys), GET, and PUT again (over the
  same keys) by 8 client threads; ops/s and the p99 latency of each, medians
  over --rounds rounds of the three sides, in another order each round
  (async-through's checkpoints finish before the next side starts: how long
  after its last PUT is recorded too). Thaw
  twice: with the gateway's default write type, cache-through (durable when
  the PUT returns: the master's journal and the under-store file are
  fsynced), and with async-through (in worker memory when it returns, made
  durable by a checkpoint after: Tachyon's write). And how many fsync-class
  calls (fsync, fdatasync, sync_file_range) each server makes per PUT, by
  strace (async-through's counted until its checkpoints are done): SeaweedFS
  answers from the page cache, so async-through is the like-for-like
  durability. And the CPU time each server spent per op (its processes, from
  /proc): the client shares the two cores, so a server's CPU per op sets its
  ops/s as much as its waits do (async-through's checkpoint CPU after its
  last PUT is recorded apart).

    python -m thaw_bench.scripts.s3_gateway [--size-mib 1024] [--objects 10000] [--repeats 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
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
SMALL_OPS = (("GET", "get_ops_per_s"), ("PUT", "put_ops_per_s"), ("PUT again", "put_again_ops_per_s"))


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


def syncs_per_put(
    pid: int, s3: Any, bucket: str, n: int = 200, settle: Callable[[int], None] | None = None
) -> float | None:
    """fsync-class calls the server process `pid` (its threads) makes per
    PUT of 64 KiB, over `n` PUTs (and until `settle(n)` returns: the
    checkpoints of async-through writes); none without strace."""
    if shutil.which("strace") is None:
        return None
    body = os.urandom(SMALL)
    out = tempfile.mktemp(suffix=".strace")
    trace = ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync,sync_file_range", "-o", out, "-p", str(pid)]
    st = subprocess.Popen(trace, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    for i in range(n):
        s3.put_object(Bucket=bucket, Key=f"synced/o{i}", Body=body)
    if settle is not None:
        settle(n)
    time.sleep(0.5)
    st.send_signal(signal.SIGINT)
    st.wait(timeout=30)
    calls = 0
    with open(out) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and parts[-1] in ("fsync", "fdatasync", "sync_file_range"):
                calls += int(parts[3])
    os.unlink(out)
    return calls / n


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system) of process `pid` and every process under
    it, from /proc: what a server spent, whichever of its processes did it."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the name: state, ppid, ...; utime and stime are fields 14-15.
        stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    tree, total, grew = {pid}, 0.0, True
    while grew:
        grew = False
        for p, (ppid, _) in stats.items():
            if ppid in tree and p not in tree:
                tree.add(p)
                grew = True
    for p in tree:
        total += stats.get(p, (0, 0.0))[1]
    return total


def small_ops(s3: Any, bucket: str, prefix: str, n: int, server: int) -> dict[str, float]:
    """PUT (new keys), GET and PUT again (the same keys) of `n` objects under
    `prefix`, by 8 threads: ops/s and p99 latency of each, and the CPU time
    the server (process `server`) spent per op. On two cores shared with the
    client, a server's CPU per op decides its ops/s as much as its waits do."""
    body = os.urandom(SMALL)

    def timed(f: Any) -> float:
        t0 = time.perf_counter()
        f()
        return time.perf_counter() - t0

    out: dict[str, float] = {}
    for op in ("put", "get", "put_again"):

        def one(i: int, op: str = op) -> float:
            if op.startswith("put"):
                return timed(lambda: s3.put_object(Bucket=bucket, Key=f"{prefix}/o{i}", Body=body))
            return timed(lambda: s3.get_object(Bucket=bucket, Key=f"{prefix}/o{i}")["Body"].read())

        c0, t0 = cpu_seconds(server), time.perf_counter()
        with ThreadPoolExecutor(THREADS) as pool:
            lat = sorted(pool.map(one, range(n)))
        out[f"{op}_ops_per_s"] = n / (time.perf_counter() - t0)
        out[f"{op}_p99_ms"] = lat[int(0.99 * (n - 1))] * 1000
        out[f"{op}_server_cpu_ms"] = (cpu_seconds(server) - c0) * 1000 / n
    return out


def remove(s3: Any, bucket: str, prefix: str, n: int) -> None:
    """Deletes a round's objects (untimed), a thousand a request, so rounds
    start alike and memory holds one round at a time."""
    for start in range(0, n, 1000):
        keys = [{"Key": f"{prefix}/o{i}"} for i in range(start, min(n, start + 1000))]
        s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


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
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the small-object runs")
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
        gw_async = client(c.s3, "thaw", "thawsecret")
        gw_async.create_bucket(Bucket="bench-async")

        def async_through(params: Any, **_: Any) -> None:
            params["headers"]["x-thaw-write-type"] = "async-through"

        gw_async.meta.events.register("before-call.s3.PutObject", async_through)

        def persisted(prefix: str, n: int) -> None:
            t = thaw.Client(c.master)
            deadline = time.monotonic() + 120 + n / 10
            while not all(t.stat(f"/bench-async/{prefix}/o{i}")["persisted"] for i in range(n)):
                assert time.monotonic() < deadline, "async-through checkpoints did not finish"
                time.sleep(0.2)

        # Counted first, with nothing else pending (checkpoints of earlier
        # async-through writes would count as the next side's).
        assert c._proc is not None and weed._proc is not None
        syncs = {
            "thaw_gateway": syncs_per_put(c._proc.pid, gw, "bench"),
            "thaw_gateway_async": syncs_per_put(
                c._proc.pid, gw_async, "bench-async", settle=lambda n: persisted("synced", n)
            ),
            "seaweed": syncs_per_put(weed._proc.pid, sw, "bench"),
        }
        # Rounds of the three sides, each round in another order; a side's
        # background work (async-through's checkpoints) ends before the next
        # side starts, and each round's objects are deleted after it.
        sides_small: list[tuple[str, Any, str, int]] = [
            ("thaw_gateway", gw, "bench", c._proc.pid),
            ("thaw_gateway_async", gw_async, "bench-async", c._proc.pid),
            ("seaweed", sw, "bench", weed._proc.pid),
        ]
        small_all: dict[str, list[dict[str, float]]] = {}
        drained: list[float] = []
        drain_cpu: list[float] = []
        for r in range(args.rounds):
            for side, s3, bucket, server in sides_small[r % 3 :] + sides_small[: r % 3]:
                prefix = f"small{r}"
                small_all.setdefault(side, []).append(small_ops(s3, bucket, prefix, args.objects, server))
                if side == "thaw_gateway_async":
                    c0, t0 = cpu_seconds(server), time.perf_counter()
                    persisted(prefix, args.objects)
                    drained.append(time.perf_counter() - t0)
                    drain_cpu.append((cpu_seconds(server) - c0) * 1000 / args.objects)
                remove(s3, bucket, prefix, args.objects)
        small = {s: {k: statistics.median(d[k] for d in rs) for k in rs[0]} for s, rs in small_all.items()}
    gs, ga, ss = small["thaw_gateway"], small["thaw_gateway_async"], small["seaweed"]
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
    sides = {
        "thaw_gateway": "thaw gateway, cache-through (default)",
        "thaw_gateway_async": "thaw gateway, async-through",
        "seaweed": "SeaweedFS S3",
    }
    for side, d in small.items():
        n_syncs = syncs[side]
        rows.append({
            "reader": f"{sides[side]}: {args.objects} objects of 64 KiB, {THREADS} threads",
            "PUT ops/s": f"{d['put_ops_per_s']:.0f}", "PUT p99 ms": f"{d['put_p99_ms']:.1f}",
            "GET ops/s": f"{d['get_ops_per_s']:.0f}", "GET p99 ms": f"{d['get_p99_ms']:.1f}",
            "PUT again ops/s": f"{d['put_again_ops_per_s']:.0f}",
            "PUT again p99 ms": f"{d['put_again_p99_ms']:.1f}",
            "server CPU ms per PUT": f"{d['put_server_cpu_ms']:.2f}",
            "per GET": f"{d['get_server_cpu_ms']:.2f}",
            "per PUT again": f"{d['put_again_server_cpu_ms']:.2f}",
            "fsyncs per PUT": "n/a" if n_syncs is None else f"{n_syncs:.1f}",
        })  # fmt: skip
    result = {
        "title": "S3 GETs and PUTs (boto3) through thaw gateway, SeaweedFS's S3 endpoint, Thaw's native read",
        "section": "The S3 gateway (`thaw gateway`)",
        "command": [
            "./scripts/python-env.sh release",
            f".venv/bin/python -m thaw_bench.scripts.s3_gateway --size-mib {mib} --objects {args.objects} "
            f"--repeats {args.repeats} --rounds {args.rounds} --out results/s3-gateway.json",
        ],
        "commit": commit,
        "commit_is": "the build measured",
        "date": time.strftime("%Y-%m-%d"),
        "machine": "2 vCPUs, 24 GiB RAM, Firecracker VM; quiet (nothing else running, sched_autogroup off)",
        "ratios": {
            "gateway vs native remote": f"{large['thaw_gateway_1'] / large['thaw_native_remote']:.2f}",
            "gateway vs SeaweedFS, 1 client": f"{large['thaw_gateway_1'] / large['seaweed_1']:.2f}",
            "gateway vs SeaweedFS, 8 clients": f"{large['thaw_gateway_8'] / large['seaweed_8']:.2f}",
            **{
                f"small {label} ops/s vs SeaweedFS ({wt})": f"{d[op] / ss[op]:.2f}"
                for wt, d in (("cache-through", gs), ("async-through", ga))
                for label, op in SMALL_OPS
            },
        },
        "async_checkpoints_done_s_after_last_put": [round(x, 1) for x in drained],
        "async_checkpoints_server_cpu_ms_per_object_after_last_put": [round(x, 2) for x in drain_cpu],
        "rows": rows,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
