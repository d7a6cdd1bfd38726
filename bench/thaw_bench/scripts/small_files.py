"""Warm-up of a dataset of small files (issue 33, item 3): ``thaw migrate --wait``
of a directory of N files of SIZE from a local under-store into memory (the CLI a
user types, spawn to exit), beside a parallel direct read of the same files
(``find | xargs -0 -P 8 cat > /dev/null``) and, unless ``--no-alluxio``, Alluxio
2.9.4's ``load`` of the same directory (``FileSystemShell load``, its own
in-process client), its master and worker started on the same under-store
directory for that round only (idle, their JVMs still took most of a core
from the rounds beside them). The files' pages are dropped (posix_fadvise DONTNEED)
before every run of every system, so each reads the disk; the order of the
systems rotates between rounds. Between runs Thaw evicts the job and waits for
its MEM tier to empty; Alluxio frees the directory.

    python -m thaw_bench.scripts.small_files --files 100000 --size 64KiB --repeats 3 \\
        --out bench-out/small-files.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from thaw_bench import jvm

PER_DIR = 1000


def parse_size(s: str) -> int:
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for u, m in units.items():
        if s.endswith(u):
            return int(float(s[: -len(u)]) * m)
    return int(s)


def write_files(root: Path, n: int, size: int) -> None:
    """`n` files of `size` bytes, PER_DIR to a directory, each different."""
    buf = os.urandom(size + 4096)
    for i in range(n):
        d = root / f"d{i // PER_DIR:04d}"
        if i % PER_DIR == 0:
            d.mkdir(parents=True, exist_ok=True)
        off = (i * 64) % 4096
        (d / f"f{i:07d}.bin").write_bytes(buf[off : off + size])


def drop_pages(root: Path) -> None:
    for dirpath, _, names in os.walk(root):
        for name in names:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def find_thaw() -> str:
    """The `thaw` binary, as `thaw.cluster.find_binary` looks for it (this
    script drives only the CLI, so it does not import the native package):
    THAW_BIN, else beside this Python, else the newest build here, else PATH."""
    env = os.environ.get("THAW_BIN")
    if env:
        return env
    beside = Path(sys.executable).parent / "thaw"
    if beside.is_file():
        return str(beside)
    builds = [p for p in (jvm.REPO / "target" / b / "thaw" for b in ("release", "debug")) if p.is_file()]
    if builds:
        return str(max(builds, key=lambda p: p.stat().st_mtime))
    found = shutil.which("thaw")
    if found is None:
        raise SystemExit("no thaw binary: build it (cargo build --release -p thaw-cli) or set THAW_BIN")
    return found


class Thaw:
    """`thaw local` with one worker, driven through the CLI."""

    def __init__(self, binary: str, ufs: Path, mem: int, state: Path) -> None:
        port = jvm.free_port()
        self.binary = binary
        self.env = {**os.environ, "THAW_MASTER": f"127.0.0.1:{port}"}
        cmd = [binary, "local", "--ufs", str(ufs), "--port", str(port), "--state-dir", str(state)]
        cmd += ["--mem-capacity", f"{mem >> 20}MiB", "--exit-with-stdin"]
        pipe = subprocess.PIPE
        self.proc = subprocess.Popen(cmd, stdin=pipe, stdout=pipe, text=True, env=self.env)
        if self.proc.stdout is None or "master at" not in self.proc.stdout.readline():
            raise SystemExit("thaw local did not start")
        deadline = time.monotonic() + 30
        while not self.mem_used_is_zero():
            if time.monotonic() > deadline:
                raise SystemExit("thaw local's worker did not register")
            time.sleep(0.2)

    def run(self, *args: str) -> str:
        out = subprocess.run([self.binary, *args], capture_output=True, text=True, env=self.env)
        if out.returncode != 0:
            raise SystemExit(f"thaw {' '.join(args)} failed: {out.stderr}")
        return out.stdout

    def mem_used_is_zero(self) -> bool:
        try:
            status = json.loads(self.run("status", "--json"))
        except (SystemExit, json.JSONDecodeError):
            return False
        workers = status.get("workers", [])
        tiers = [t for w in workers for t in w.get("tiers", []) if t.get("tier") == "MEM"]
        return bool(workers) and bool(tiers) and all(t.get("used", 1) == 0 for t in tiers)

    def migrate(self, job: str, path: str, files: int, size: int) -> float:
        t0 = time.perf_counter()
        info = json.loads(self.run("migrate", "--wait", "--json", "--job", job, path))
        secs = time.perf_counter() - t0
        if info["blocks_in_memory"] != files or info["bytes_in_memory"] != files * size:
            raise SystemExit(f"not all of {path} is in memory: {info}")
        self.run("--job", job, "evict")
        deadline = time.monotonic() + 120
        while not self.mem_used_is_zero():
            if time.monotonic() > deadline:
                raise SystemExit("thaw's MEM tier did not empty after evict")
            time.sleep(0.2)
        return secs

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def xargs_read(root: Path) -> float:
    t0 = time.perf_counter()
    cmd = f"find '{root}' -type f -print0 | xargs -0 -P 8 -n 256 cat > /dev/null"
    subprocess.run(cmd, shell=True, check=True)
    return time.perf_counter() - t0


def alluxio_load(alluxio: jvm.Alluxio, path: str) -> float:
    shell = ["java", "-Xmx2g", *alluxio.client_flags(), "-Dalluxio.logger.name=shell", "-cp", alluxio.cp]
    shell += ["alluxio.cli.fs.FileSystemShell"]
    uri = alluxio.uri(path)
    t0 = time.perf_counter()
    subprocess.run([*shell, "load", uri], check=True, stdout=subprocess.DEVNULL)
    secs = time.perf_counter() - t0
    subprocess.run([*shell, "free", uri], check=True, stdout=subprocess.DEVNULL)
    time.sleep(2)
    return secs


def alluxio_round(ufs: Path, mem: int) -> float:
    """Starts Alluxio, times its load of /small, stops it."""
    with jvm.Alluxio(ufs, mem) as alluxio:
        return alluxio_load(alluxio, "/small")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--size", default="64KiB")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-alluxio", action="store_true", help="leave Alluxio out (no Maven download)")
    ap.add_argument("--out", help="write the rounds and medians here (JSON)")
    args = ap.parse_args()
    # A kill still stops the clusters and removes the files (the `finally`s).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    size = parse_size(args.size)
    work = Path(tempfile.mkdtemp(prefix="thaw-bench-small-"))
    try:
        run(args, work, size)
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)


def run(args: argparse.Namespace, work: Path, size: int) -> None:
    total = args.files * size
    ufs = work / "ufs"
    print(f"writing {args.files} files of {size} B under {ufs}/small ...", flush=True)
    write_files(ufs / "small", args.files, size)
    mem = total + total // 2 + (256 << 20)
    rounds: dict[str, list[float]] = {}
    thaw = Thaw(find_thaw(), ufs, mem, work / "state")
    try:
        systems = ["thaw", "xargs", *([] if args.no_alluxio else ["alluxio"])]
        for r in range(args.repeats):
            for s in systems[r % len(systems) :] + systems[: r % len(systems)]:
                drop_pages(ufs / "small")
                if s == "thaw":
                    secs = thaw.migrate(f"small-{r}", "/small", args.files, size)
                elif s == "xargs":
                    secs = xargs_read(ufs / "small")
                else:
                    secs = alluxio_round(ufs, mem)
                rounds.setdefault(s, []).append(secs)
                mib_s = total / secs / (1 << 20)
                print(f"round {r + 1}: {s:8} {secs:7.2f} s  {mib_s:7.0f} MiB/s", flush=True)
    finally:
        thaw.close()
    med = {s: statistics.median(v) for s, v in rounds.items()}
    out: dict[str, Any] = {
        "files": args.files,
        "size": size,
        "rounds_s": rounds,
        "median_s": med,
        "median_mib_s": {s: total / v / (1 << 20) for s, v in med.items()},
        "files_per_s": {s: args.files / v for s, v in med.items()},
        "thaw_vs_xargs": med["xargs"] / med["thaw"],
    }
    if "alluxio" in med:
        out["thaw_vs_alluxio"] = med["alluxio"] / med["thaw"]
    print(json.dumps(out, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
