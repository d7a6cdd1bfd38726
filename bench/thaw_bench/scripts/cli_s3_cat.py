"""``thaw fs cat`` of an S3 object through ``thaw local --ufs s3://...`` (the CLI
path a user types), cold, beside pyarrow's own S3 client reading the same object;
SeaweedFS (``thaw.seaweed``) on this machine, its pages dropped before each cold read.

    python -m thaw_bench.scripts.cli_s3_cat [--size-mib 512]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time

from thaw.cluster import find_binary
from thaw.demo import drop_pages
from thaw.seaweed import SeaweedS3

CHUNK = 8 << 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=512)
    ap.add_argument("--port", type=int, default=19955)
    args = ap.parse_args()
    binary = find_binary()
    with SeaweedS3(["cli"]) as s3, tempfile.TemporaryDirectory() as state:
        fs = s3.filesystem()
        with fs.open_output_stream("cli/data/obj.bin") as out:
            for _ in range(args.size_mib * (1 << 20) // CHUNK):
                out.write(os.urandom(CHUNK))
        env = {**os.environ, **s3.env, "THAW_MASTER": f"127.0.0.1:{args.port}"}
        cmd = [binary, "local", "--ufs", s3.uri("cli"), "--port", str(args.port), "--state-dir", state]
        cmd += ["--mem-capacity", f"{2 * args.size_mib}MiB", "--exit-with-stdin"]
        local = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        try:
            if local.stdout is None or "master at" not in local.stdout.readline():
                raise SystemExit("thaw local did not start")
            drop_pages(s3.data_dir, "*")
            t0 = time.perf_counter()
            with open(os.devnull, "wb") as null:
                subprocess.run([binary, "fs", "cat", "/data/obj.bin"], stdout=null, check=True, env=env)
            cold = time.perf_counter() - t0
            drop_pages(s3.data_dir, "*")
            t0 = time.perf_counter()
            with fs.open_input_stream("cli/data/obj.bin") as f:
                while f.read(CHUNK):
                    pass
            direct = time.perf_counter() - t0
        finally:
            local.terminate()
            local.wait(30)
    mib = args.size_mib
    print(f"{mib} MiB object: thaw fs cat, cold {mib / cold:.0f} MiB/s ({cold:.2f} s); ", end="")
    print(f"pyarrow's S3 client {mib / direct:.0f} MiB/s ({direct:.2f} s); ratio {direct / cold:.2f}x")


if __name__ == "__main__":
    main()
