"""Does a user's script that reads through Thaw with pandas exit cleanly? Runs
``python -c "pd.read_parquet('thaw://...'); print(len(df))"`` in a fresh process
``--runs`` times against a ``LocalCluster``, beside the same script reading a
local file through a plain Python file object (pyarrow's own exit-time bug,
apache/arrow#34314), and counts runs that abort, fail or hang (20 s).

    python -m thaw_bench.scripts.clean_exit [--runs 100]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import pandas as pd

import thaw


def count_bad(code: str, args: list[str], runs: int, env: dict[str, str]) -> tuple[int, list[str]]:
    bad, why = 0, []
    for _ in range(runs):
        try:
            r = subprocess.run(
                [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=20
            )
        except subprocess.TimeoutExpired:
            bad += 1
            why.append("hung at exit")
            continue
        if r.returncode != 0 or r.stdout.strip() != "1000":
            bad += 1
            why.append(f"exit {r.returncode}: {r.stderr.strip()[-120:]}")
    return bad, why


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args()
    df = pd.DataFrame({"x": range(1000), "y": [f"v{i}" for i in range(1000)]})
    env = {k: v for k, v in os.environ.items() if not k.startswith("THAW_")}
    with thaw.LocalCluster(workers=1) as c, tempfile.TemporaryDirectory() as tmp:
        df.to_parquet("thaw:///t.parquet", storage_options={"master": c.master})
        local = os.path.join(tmp, "t.parquet")
        df.to_parquet(local)
        cases = {
            "thaw:// through fsspec": (
                "import pandas as pd, sys; "
                "df = pd.read_parquet('thaw:///t.parquet', storage_options={'master': sys.argv[1]}); "
                "print(len(df))",
                [c.master],
            ),
            "local file, Python file object": (
                "import pandas as pd, sys; df = pd.read_parquet(open(sys.argv[1], 'rb')); print(len(df))",
                [local],
            ),
        }
        for name, (code, extra) in cases.items():
            bad, why = count_bad(code, extra, args.runs, env)
            print(f"{name}: {bad} of {args.runs} runs did not exit cleanly", flush=True)
            for w in sorted(set(why)):
                print(f"    {w}")


if __name__ == "__main__":
    main()
