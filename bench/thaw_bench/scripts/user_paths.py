"""Benchmark: the Python user's paths for a file in worker memory on this host,
each next to the same operation on a tmpfs file (issue 13, part 4; target 0.8).

Pairs, each the median of ``--repeats`` alternating rounds (the order swapped
every round) after one warm-up of each side, in one process:

- ``readinto``: ``ThawFile.readinto`` of the whole file into one 4 MiB
  bytearray vs ``readinto`` of the tmpfs file (``open(..., buffering=0)``)
  into the same buffer;
- ``read``: ``ThawFile.read(4 MiB)`` to the end vs the tmpfs file's ``read``;
- ``get``: ``Client.get`` to a new tmpfs file vs ``shutil.copyfile`` (what
  ``cp`` does: an in-kernel copy) between tmpfs files;
- ``put``: ``Client.put(write_type="must-cache")`` of the tmpfs file (into the
  worker's memory) vs ``shutil.copyfile`` to a new tmpfs file.

    python -m thaw_bench.scripts.user_paths --size 1GiB --repeats 5 --out bench-out/python-user-paths.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import thaw
from thaw.sizes import parse_size

BUF = 4 << 20
TARGET = 0.8


def readinto_all(f: object, buf: bytearray) -> int:
    total = 0
    view = memoryview(buf)
    while n := f.readinto(view):  # type: ignore[attr-defined]
        total += n
    return total


def read_all(f: object) -> int:
    total = 0
    while chunk := f.read(BUF):  # type: ignore[attr-defined]
        total += len(chunk)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="bench-out/python-user-paths.json")
    args = ap.parse_args()
    size = parse_size(args.size)

    shm = Path(tempfile.mkdtemp(prefix="thaw-bench-", dir="/dev/shm"))
    ufs = Path(tempfile.mkdtemp(prefix="thaw-bench-ufs-"))
    try:
        src = shm / "src.bin"
        with open(src, "wb") as f:
            for _ in range(size // BUF):
                f.write(os.urandom(BUF))
            f.write(os.urandom(size % BUF))
        out = shm / "out.bin"
        with thaw.LocalCluster(ufs=ufs, workers=1, mem_capacity=4 * size + (512 << 20)) as cluster:
            client = thaw.Client(cluster.master)
            client.put(src, "/file.bin", write_type="must-cache", progress=False)
            assert client.stat("/file.bin")["in_memory_bytes"] == size
            buf = bytearray(BUF)

            def thaw_readinto() -> None:
                with client.open("/file.bin") as f:
                    assert readinto_all(f, buf) == size
                    assert f.stats()["short_circuit"] == size, f.stats()

            def tmpfs_readinto() -> None:
                with open(src, "rb", buffering=0) as f:
                    assert readinto_all(f, buf) == size

            def thaw_read() -> None:
                with client.open("/file.bin") as f:
                    assert read_all(f) == size

            def tmpfs_read() -> None:
                with open(src, "rb", buffering=0) as f:
                    assert read_all(f) == size

            def thaw_get() -> None:
                assert client.get("/file.bin", out, progress=False) == size
                out.unlink()

            def copy() -> None:
                shutil.copyfile(src, out)
                out.unlink()

            def thaw_put() -> None:
                client.put(src, "/put.bin", write_type="must-cache", progress=False)
                client.rm("/put.bin")

            pairs: dict[str, tuple[Callable[[], None], Callable[[], None], str]] = {
                "readinto": (thaw_readinto, tmpfs_readinto, "readinto of a tmpfs file, same 4 MiB buffer"),
                "read": (thaw_read, tmpfs_read, "read(4 MiB) of a tmpfs file"),
                "get": (thaw_get, copy, "shutil.copyfile between tmpfs files (cp)"),
                "put": (thaw_put, copy, "shutil.copyfile between tmpfs files (cp)"),
            }
            # The bytes a get and a put move are the file's.
            client.get("/file.bin", out, progress=False)
            assert out.read_bytes() == src.read_bytes()
            out.unlink()
            client.put(src, "/check.bin", write_type="must-cache", progress=False)
            with client.open("/check.bin") as f:
                assert f.read() == src.read_bytes()
            client.rm("/check.bin")

            results = {}
            for name, (t, b, label) in pairs.items():
                t()
                b()
                ts: list[float] = []
                bs: list[float] = []
                for r in range(args.repeats):
                    order = [(t, ts), (b, bs)] if r % 2 == 0 else [(b, bs), (t, ts)]
                    for fn, into in order:
                        start = time.perf_counter()
                        fn()
                        into.append(time.perf_counter() - start)
                mt, mb = statistics.median(ts), statistics.median(bs)
                results[name] = {
                    "baseline": label,
                    "thaw_GB_per_s": size / mt / 1e9,
                    "baseline_GB_per_s": size / mb / 1e9,
                    "ratio": mb / mt,
                    "target": TARGET,
                    "thaw_seconds": ts,
                    "baseline_seconds": bs,
                }
                verdict = "met" if mb / mt >= TARGET else "MISSED"
                print(
                    f"{name:<9} thaw {size / mt / 1e9:6.2f} GB/s  baseline {size / mb / 1e9:6.2f} GB/s"
                    f"  ratio {mb / mt:.2f}  target >= {TARGET}: {verdict}   ({label})",
                    flush=True,
                )
        summary = {"file_bytes": size, "repeats": args.repeats, "statistic": "median", "results": results}
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        Path(args.out).write_text(json.dumps(summary, indent=2))
    finally:
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(ufs, ignore_errors=True)


if __name__ == "__main__":
    main()
