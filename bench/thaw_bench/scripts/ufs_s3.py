"""Benchmark: a file's cold read, migration and warm read through Thaw, with the
under-store a local directory and with it an S3 bucket (SeaweedFS on this
machine, ``thaw.seaweed``), side by side in one invocation (issue 17).

For each under-store and each of ``--repeats`` rounds, a fresh ``LocalCluster``
(1 worker, 64 MiB blocks), the under-store's pages dropped from the page cache
(the local file's, and the files of SeaweedFS's volumes; again before the
migration), then:

- ``cold read``: ``ThawFile.readinto`` of the whole file, in a job, nothing in
  memory (read-through: the worker fetches each block and caches it);
- ``warm read``: the same again, from worker memory (short-circuit);
- ``migration``: on another fresh cluster, ``thaw.job(inputs=[file])`` until
  every block is in memory (the worker's migrations from the under-store);
- ``direct``: the same bytes read without Thaw, for reference: the local file
  with ``readinto`` (cold), the object with pyarrow's own S3 client.

``--ufs-speed`` also runs the S3 cold read under the workers' emulated device
model (e.g. ``100MiB/s``): the pacing applies to an object store too.

``--hdfs`` adds an HDFS row: Hadoop's MiniDFSCluster (one DataNode, in one JVM,
``thaw.minihdfs``) as the under-store, the file written there through Thaw
(``through``), its DataNode's block files dropped from the page cache before
each cold read. No direct read: pyarrow's HDFS client needs libhdfs and a JVM.

    python -m thaw_bench.scripts.ufs_s3 --size 1GiB --repeats 3 --hdfs --out bench-out/ufs-s3.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import thaw
from thaw.demo import drop_pages
from thaw.minihdfs import MiniHdfs
from thaw.seaweed import SeaweedS3
from thaw.sizes import parse_size

BUF = 8 << 20
BUCKET = "bench"


def read_thaw(client: thaw.Client, path: str, buf: bytearray) -> tuple[float, int]:
    view = memoryview(buf)
    total = 0
    t0 = time.perf_counter()
    with client.open(path) as f:
        while n := f.readinto(view):
            total += n
    return time.perf_counter() - t0, total


def read_local(path: Path, buf: bytearray) -> tuple[float, int]:
    view = memoryview(buf)
    total = 0
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(view):
            total += n
    return time.perf_counter() - t0, total


def read_s3_direct(server: SeaweedS3, key: str) -> tuple[float, int]:
    fs = server.filesystem()
    total = 0
    t0 = time.perf_counter()
    with fs.open_input_stream(f"{BUCKET}/{key}") as f:
        while chunk := f.read(BUF):
            total += len(chunk)
    return time.perf_counter() - t0, total


def one_round(
    kind: str,
    mount: str | Path,
    env: dict[str, str] | None,
    size: int,
    buf: bytearray,
    device_model: str | None,
    cold: Callable[[], None],
) -> dict[str, float]:
    common: dict[str, Any] = {
        "ufs": mount,
        "env": env,
        "workers": 1,
        "block_size": "64MiB",
        "mem_capacity": size + (256 << 20),
        "migration_buffer": size + (128 << 20),
        "device_model": device_model,
    }
    out: dict[str, float] = {}
    with thaw.LocalCluster(**common) as c:
        client = thaw.Client(c.master, f"bench-{kind}")
        secs, n = read_thaw(client, "/data/file.bin", buf)
        assert n == size, (n, size)
        out["cold read"] = secs
        secs, n = read_thaw(client, "/data/file.bin", buf)
        assert n == size
        out["warm read"] = secs
    if device_model is not None:
        return out
    cold()  # the cold read above brought the bytes into the page cache again
    return out | {"migration": migrate(common, kind)}


def migrate(common: dict[str, Any], kind: str) -> float:
    with thaw.LocalCluster(**common) as c:
        client = thaw.Client(c.master)
        t0 = time.perf_counter()
        with thaw.job(f"mig-{kind}", inputs=["/data/file.bin"], client=client) as j:
            j.wait(timeout=600)
            secs = time.perf_counter() - t0
            p = j.progress()
            assert p is not None and p["blocks_in_memory"] == p["blocks"], p
        return secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ufs-speed", default="100MiB/s", help="emulated under-store speed for the paced row")
    ap.add_argument("--hdfs", action="store_true", help="add an HDFS row (MiniDFSCluster)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    size = parse_size(args.size)
    buf = bytearray(BUF)
    results: dict[str, dict[str, list[float]]] = {"local": {}, "s3": {}, "s3-paced": {}}
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="thaw-bench-s3-"))
        server = stack.enter_context(SeaweedS3([BUCKET]))
        hdfs = stack.enter_context(MiniHdfs()) if args.hdfs else None
        ufs = Path(tmp, "ufs")
        (ufs / "data").mkdir(parents=True)
        local_file = ufs / "data" / "file.bin"
        with open(local_file, "wb") as f:
            for _ in range(size // BUF):
                f.write(os.urandom(BUF))
        with (
            open(local_file, "rb") as src,
            server.filesystem().open_output_stream(f"{BUCKET}/data/file.bin") as dst,
        ):
            while chunk := src.read(BUF):
                dst.write(chunk)
        weed_data = server.data_dir
        runs: list[tuple[str, str | Path, dict[str, str] | None, str | None]] = [
            ("local", ufs, None, None),
            ("s3", server.uri(BUCKET), server.env, None),
            ("s3-paced", server.uri(BUCKET), server.env, f"ufs={args.ufs_speed}"),
        ]
        if hdfs is not None:
            with thaw.LocalCluster(ufs=hdfs.uri("/bench"), workers=1) as c:
                thaw.Client(c.master).put(local_file, "/data/file.bin", write_type="through", progress=False)
            runs.append(("hdfs", hdfs.uri("/bench"), None, None))
            results["hdfs"] = {}
        for r in range(args.repeats):
            for kind, mount, env, model in runs if r % 2 == 0 else reversed(runs):

                def cold() -> None:
                    drop_pages(local_file)
                    drop_pages(weed_data, "*")
                    if hdfs is not None:
                        drop_pages(hdfs.data_dir, "*")

                cold()
                for k, v in one_round(kind, mount, env, size, buf, model, cold).items():
                    results[kind].setdefault(k, []).append(v)
            drop_pages(local_file)
            results["local"].setdefault("direct", []).append(read_local(local_file, buf)[0])
            drop_pages(weed_data, "*")
            secs, n = read_s3_direct(server, "data/file.bin")
            assert n == size
            results["s3"].setdefault("direct", []).append(secs)
    mib = size / (1 << 20)
    table: dict[str, dict[str, float]] = {
        kind: {k: mib / statistics.median(v) for k, v in ops.items()} for kind, ops in results.items()
    }
    print(f"{args.size} file, medians of {args.repeats} rounds, MiB/s (1 worker, 64 MiB blocks)\n")
    print("| under-store | cold read | migration | warm read | direct read (no Thaw) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    names = {
        "local": "local directory",
        "s3": "S3 (SeaweedFS)",
        "s3-paced": f"S3, paced at {args.ufs_speed}",
        "hdfs": "HDFS (MiniDFSCluster, 1 DataNode)",
    }
    for kind, row in table.items():
        cells = [
            f"{row[k]:,.0f}" if k in row else "-" for k in ("cold read", "migration", "warm read", "direct")
        ]
        print(f"| {names[kind]} | " + " | ".join(cells) + " |")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(
            json.dumps({"size": size, "seconds": results, "mib_per_s": table}, indent=1)
        )


if __name__ == "__main__":
    main()
