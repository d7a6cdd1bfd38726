"""Benchmark: the Hadoop read path. One JVM reads a file whole through
``FileSystem.open`` (``read(byte[4 MiB])`` to the end, bench/jvm/HadoopRead.java),
for each of:

- ``tmpfs``: Hadoop's ``RawLocalFileSystem`` on the same bytes in /dev/shm
  (the local baseline: a page-cache copy, nothing else);
- ``thaw-local``: ``thaw://`` from Thaw memory on the worker's own host
  (short-circuit: the client reads the block's file in the MEM tier);
- ``thaw-remote``: the same file, the client on another host as far as Thaw
  knows (``THAW_HOST``), streamed from the worker over loopback;
- ``alluxio``: Alluxio 2.9.4's Hadoop client (``alluxio.hadoop.FileSystem``,
  read type CACHE, short-circuit on: its default) against an Alluxio master
  and worker started beside Thaw, MEM tier in /dev/shm; ``alluxio-remote``
  the warm file with short-circuit off (through its worker, as a client on
  another host reads).

Cold reads: a new file in each system's under-store (a local directory) with
its pages dropped (posix_fadvise DONTNEED), read through each system's Hadoop
client, which caches it in memory; the warm reads then read that file again.
Rounds alternate the systems' order; the report gives medians and ratios
(targets: thaw-local >= 0.8x tmpfs; thaw >= 1.5x Alluxio warm and cold;
remote against remote).

    python -m thaw_bench.scripts.hadoop_read --size 1GiB --repeats 5 --out bench-out/hadoop-read.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import thaw
from thaw.sizes import parse_size
from thaw_bench import jvm


def write_file(path: Path, size: int, seed: int) -> None:
    """`size` pseudo-random bytes (repeating a 64 MiB random chunk), pages dropped."""
    import random

    chunk = random.Random(seed).randbytes(min(size, 64 << 20))
    with open(path, "wb") as f:
        left = size
        while left > 0:
            f.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def run_jvm(
    cp: str, flags: list[str], uris: list[str], size: int, env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Reads `uris` in one JVM; each must give `size` bytes."""
    cmd = ["java", "-Xmx2g", *flags, "-cp", cp, "HadoopRead", *uris]
    # A read that hangs fails the run (10 minutes: a cold 1 GiB at Alluxio's ~300 MiB/s takes ~4 s).
    env = {**os.environ, **(env or {})}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, timeout=600)
    got = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if len(got) != len(uris):
        raise RuntimeError(f"HadoopRead read {len(got)} of {len(uris)} files: {out.stderr[-2000:]}")
    short = [g for g in got if g["bytes"] != size]
    if short:
        raise RuntimeError(f"reads that did not return the whole file ({size} bytes): {short}")
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--jar", default=str(jvm.REPO / "java" / "thaw-hadoop" / "target" / "thaw-hadoop-0.1.0.jar")
    )
    ap.add_argument("--no-alluxio", action="store_true", help="leave Alluxio out (no Maven download)")
    ap.add_argument("--out", default="bench-out/hadoop-read.json")
    args = ap.parse_args()
    size = parse_size(args.size)
    if not Path(args.jar).exists():
        raise SystemExit(f"{args.jar} is missing: build it first (make java)")

    work = Path(tempfile.mkdtemp(prefix="thaw-bench-hadoop-"))
    shm = Path(tempfile.mkdtemp(prefix="thaw-bench-hadoop-", dir="/dev/shm"))
    ufs_thaw, ufs_alluxio = work / "ufs-thaw", work / "ufs-alluxio"
    ufs_thaw.mkdir()
    ufs_alluxio.mkdir()
    classes = work / "classes"
    hadoop_cp = jvm.classpath("hadoop-client-3.4.1", jvm.HADOOP_CLIENT)
    jvm.compile_program("HadoopRead.java", hadoop_cp, classes)
    thaw_cp = f"{classes}:{args.jar}:{hadoop_cp}"
    rounds: dict[str, list[float]] = {}
    try:
        write_file(shm / "data", size, 1)
        with open(shm / "data", "rb") as f:  # tmpfs: in memory already
            f.read(1)
        mem = size * 2 + (256 << 20)
        with thaw.LocalCluster(ufs=ufs_thaw, workers=1, mem_capacity=mem) as cluster:
            master = cluster.master
            alluxio = None if args.no_alluxio else jvm.Alluxio(ufs_alluxio, mem).__enter__()
            try:
                alluxio_cp = "" if alluxio is None else f"{classes}:{alluxio.cp}"
                for r in range(args.repeats):
                    name = f"cold{r}"
                    write_file(ufs_thaw / name, size, 100 + r)
                    if alluxio is not None:
                        write_file(ufs_alluxio / name, size, 100 + r)
                    systems = ["tmpfs", "thaw", "alluxio"] if r % 2 == 0 else ["alluxio", "thaw", "tmpfs"]
                    for s in systems:
                        if s == "tmpfs":
                            got = run_jvm(thaw_cp, [], [f"raw://{shm}/data"], size)
                            rounds.setdefault("tmpfs", []).append(got[0]["mib_s"])
                        elif s == "thaw":
                            uri = f"thaw://{master}/{name}"
                            got = run_jvm(thaw_cp, [], [uri, uri], size)
                            rounds.setdefault("thaw-cold", []).append(got[0]["mib_s"])
                            rounds.setdefault("thaw-local", []).append(got[1]["mib_s"])
                            far = {"THAW_HOST": "elsewhere", "THAW_SHORT_CIRCUIT": "0"}
                            got = run_jvm(thaw_cp, [], [uri], size, env=far)
                            rounds.setdefault("thaw-remote", []).append(got[0]["mib_s"])
                        elif alluxio is not None:
                            uri = alluxio.uri(f"/{name}")
                            got = run_jvm(alluxio_cp, alluxio.client_flags(), [uri, uri], size)
                            rounds.setdefault("alluxio-cold", []).append(got[0]["mib_s"])
                            rounds.setdefault("alluxio-warm", []).append(got[1]["mib_s"])
                            # Through its worker (gRPC), as a client on another host reads.
                            far_flags = [
                                *alluxio.client_flags(),
                                "-Dalluxio.user.short.circuit.enabled=false",
                            ]
                            got = run_jvm(alluxio_cp, far_flags, [uri], size)
                            rounds.setdefault("alluxio-remote", []).append(got[0]["mib_s"])
                    for ufs in (ufs_thaw, ufs_alluxio):
                        (ufs / name).unlink(missing_ok=True)
                    print(
                        f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in rounds.items()),
                        flush=True,
                    )
            finally:
                if alluxio is not None:
                    alluxio.__exit__(None, None, None)
    finally:
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rounds.items()}
    ratios = {
        "thaw-local / tmpfs": med["thaw-local"] / med["tmpfs"],
        "thaw-remote / tmpfs": med["thaw-remote"] / med["tmpfs"],
    }
    if "alluxio-warm" in med:
        ratios["thaw-local / alluxio-warm"] = med["thaw-local"] / med["alluxio-warm"]
        ratios["thaw-remote / alluxio-remote"] = med["thaw-remote"] / med["alluxio-remote"]
        ratios["thaw-cold / alluxio-cold"] = med["thaw-cold"] / med["alluxio-cold"]
    result = {
        "benchmark": "hadoop-read",
        "size": size,
        "repeats": args.repeats,
        "unit": "MiB/s",
        "rounds": rounds,
        "median": med,
        "ratios": ratios,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    for k, v in med.items():
        print(f"{k:14s} {v:8.0f} MiB/s (median of {len(rounds[k])})")
    for k, v in ratios.items():
        print(f"{k:28s} {v:.2f}x")


if __name__ == "__main__":
    main()
