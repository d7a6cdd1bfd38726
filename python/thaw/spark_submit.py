"""``thaw-spark-submit``: Tachyon's framework wrapper for Spark (section 2.4).

Records a Spark job's lineage with Thaw, then runs ``spark-submit``:

    thaw-spark-submit --input thaw:///logs/day1.csv --output thaw:///errors/part-00000-c000.csv \\
        -- --master spark://HOST:7077 --jars thaw-hadoop.jar,thaw-spark.jar job.py

The lineage holds the inputs by file id (a directory: each file under it), the
output files, the program that reruns it (``python -m thaw.spark_submit
rerun``, runnable on the master's host) and, as its configuration (bytes only
this wrapper reads), the ``spark-submit`` command line with the Spark
defaults file and environment it ran with. A file the job then writes at an
output path belongs to the lineage: written ``async-through`` (or
``must-cache``), it is in memory only until its checkpoint, and if its worker
dies first, Thaw's workflow manager reruns the wrapper, which resubmits the
same Spark job with the same configuration; its writes rebuild the lost files
in place (same file ids), checked block by block against the first run.

Output paths must be the files the job writes. Spark names them with a random
job id and writes them under ``_temporary`` first; the wrapper makes the job
use ``io.thaw.spark.LineageCommitProtocol`` (thaw-spark's jar), which writes
each task's file directly as ``part-NNNNN<suffix>`` (``part-00000-c000.csv``,
``part-00001-c000.snappy.parquet``): task *i* of the write stage writes part
*i*. The job should write with mode ``overwrite`` or ``append``: a rerun then
keeps the existing outputs (the protocol skips overwrite's delete when Thaw
reruns it) and rebuilds the lost ones.

Deviation from the paper: Tachyon's wrapper was a patch to each framework
(300 lines to Spark); this one wraps the unmodified ``spark-submit``, so it
works for any Spark application, Scala, Java or Python, at the cost of the
application naming its output files up front.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from . import lineage
from .client import Client

#: Format of the configuration the wrapper records.
FORMAT = "thaw.spark_submit/1"
#: The commit protocol that writes each task's file at its final path.
COMMIT_PROTOCOL = "io.thaw.spark.LineageCommitProtocol"
#: Environment a rerun needs as the first run had it (when set).
RECORDED_ENV = ("SPARK_HOME", "JAVA_HOME", "HADOOP_CONF_DIR", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
#: What Thaw's workflow manager sets for a rerun, passed on to Spark's executors.
RERUN_ENV = ("THAW_MASTER", "THAW_RECOVER_LINEAGE", "THAW_JOB_ID", "THAW_TOKEN", "THAW_TLS_CA")


def thaw_path(p: str) -> str:
    """The namespace path of ``thaw://[authority]/a/b`` or ``/a/b``."""
    u = urlparse(p)
    if u.scheme and u.scheme != "thaw":
        raise ValueError(f"{p}: not a thaw:// path")
    path = u.path if u.scheme else p
    if not path.startswith("/"):
        raise ValueError(f"{p}: a Thaw path is absolute")
    return path


def find_spark_submit(explicit: str | None = None) -> str:
    """``spark-submit``: the one named, else $SPARK_HOME's, else on PATH, else pyspark's."""
    candidates = []
    if explicit:
        candidates.append(explicit)
    if os.environ.get("SPARK_HOME"):
        candidates.append(os.path.join(os.environ["SPARK_HOME"], "bin", "spark-submit"))
    on_path = shutil.which("spark-submit")
    if on_path:
        candidates.append(on_path)
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.origin:
        candidates.append(os.path.join(os.path.dirname(spec.origin), "bin", "spark-submit"))
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    raise FileNotFoundError("spark-submit not found: pass --spark-submit, set SPARK_HOME, or install pyspark")


def input_files(client: Client, paths: Sequence[str]) -> list[str]:
    """The files named, a directory as every file under it (name order)."""
    out: list[str] = []
    for p in paths:
        path = thaw_path(p)
        info = client.stat(path)
        if info["type"] != "directory":
            out.append(path)
            continue
        for entry in client.ls(path):
            child = entry["path"]
            if entry["type"] == "directory":
                out.extend(input_files(client, [child]))
            elif not os.path.basename(child).startswith(("_", ".")):
                out.append(child)
    return out


def spark_defaults() -> str:
    """The Spark defaults file spark-submit would read now ("" if none)."""
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(os.environ["SPARK_HOME"], "conf") if os.environ.get("SPARK_HOME") else ""
    )
    f = Path(conf_dir) / "spark-defaults.conf" if conf_dir else None
    return f.read_text() if f is not None and f.is_file() else ""


def spark_argv(config: dict[str, Any], defaults_file: str | None, rerun_env: dict[str, str]) -> list[str]:
    """The spark-submit command line of a run: the recorded one, the commit
    protocol first (the application's own settings may not replace it), and
    for a rerun the variables Spark's executors need to rebuild in place."""
    argv = [config["spark_submit"], "--conf", f"spark.sql.sources.commitProtocolClass={COMMIT_PROTOCOL}"]
    if defaults_file:
        argv += ["--properties-file", defaults_file]
    for k, v in sorted(rerun_env.items()):
        argv += ["--conf", f"spark.executorEnv.{k}={v}"]
    return argv + list(config["args"])


def submit(
    inputs: Sequence[str],
    outputs: Sequence[str],
    args: Sequence[str],
    *,
    kind: str = "wide",
    spark_submit: str | None = None,
    client: Client | None = None,
) -> tuple[dict[str, Any], int]:
    """Records the lineage, then runs spark-submit; returns the lineage and
    spark-submit's exit status."""
    if not args:
        raise ValueError("no spark-submit arguments: thaw-spark-submit [options] -- SPARK-SUBMIT-ARGS")
    c = client or Client()
    config = {
        "format": FORMAT,
        "spark_submit": find_spark_submit(spark_submit),
        "args": list(args),
        "cwd": os.getcwd(),
        "env": {k: os.environ[k] for k in RECORDED_ENV if os.environ.get(k)},
        "spark_defaults": spark_defaults(),
    }
    entry = lineage.submit(
        input_files(c, inputs),
        [thaw_path(o) for o in outputs],
        [sys.executable, "-m", "thaw.spark_submit", "rerun"],
        json.dumps(config).encode(),
        kind,
        client=c,
    )
    return entry, run(config, {})


def run(config: dict[str, Any], rerun_env: dict[str, str]) -> int:
    """Runs spark-submit as ``config`` recorded it; its exit status."""
    with tempfile.TemporaryDirectory(prefix="thaw-spark-submit-") as tmp:
        defaults = None
        if config.get("spark_defaults"):
            defaults = os.path.join(tmp, "spark-defaults.conf")
            Path(defaults).write_text(config["spark_defaults"])
        env = {**os.environ, **config.get("env", {})}
        argv = spark_argv(config, defaults, rerun_env)
        cwd = config.get("cwd") if os.path.isdir(config.get("cwd", "")) else None
        return subprocess.run(argv, env=env, cwd=cwd, check=False).returncode


def rerun() -> int:
    """The lineage's command: resubmits the Spark job Thaw's workflow manager
    reruns (``THAW_LINEAGE_CONFIG`` holds the recorded configuration)."""
    where = os.environ.get("THAW_LINEAGE_CONFIG")
    if not where:
        raise SystemExit("thaw.spark_submit rerun: THAW_LINEAGE_CONFIG is not set (Thaw's rerun sets it)")
    config = json.loads(Path(where).read_bytes())
    if config.get("format") != FORMAT:
        raise SystemExit(f"{where}: not a thaw-spark-submit lineage (format {config.get('format')!r})")
    env = {k: os.environ[k] for k in RERUN_ENV if os.environ.get(k)}
    return run(config, env)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["rerun"]:
        return rerun()
    p = argparse.ArgumentParser(
        prog="thaw-spark-submit",
        description="Records a Spark job's lineage with Thaw (Tachyon, section 2.4), then runs spark-submit.",
        usage="%(prog)s [--input PATH]... --output FILE... [--kind wide|narrow] -- SPARK-SUBMIT-ARGS...",
    )
    p.add_argument("--input", action="append", default=[], help="a file or directory the job reads")
    p.add_argument(
        "--output",
        action="append",
        default=[],
        required=True,
        help="a file the job writes (part-NNNNN<suffix> under its output directory)",
    )
    p.add_argument("--kind", choices=("wide", "narrow"), default="wide", help="output i from input i alone?")
    p.add_argument("--master", help="Thaw's master (default: THAW_MASTER)")
    p.add_argument("--spark-submit", help="spark-submit to run (default: $SPARK_HOME's, PATH's, pyspark's)")
    if "--" not in argv:
        p.error("put spark-submit's arguments after --")
    cut = argv.index("--")
    args = p.parse_args(argv[:cut])
    entry, status = submit(
        args.input,
        args.output,
        argv[cut + 1 :],
        kind=args.kind,
        spark_submit=args.spark_submit,
        client=Client(args.master) if args.master else None,
    )
    print(f"thaw-spark-submit: lineage {entry['lineage_id']}; spark-submit exited {status}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
