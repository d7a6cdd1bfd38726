"""A Thaw cluster and a Spark standalone cluster side by side, as processes, for
the Spark tests: a Thaw master, and on each of two loopback hosts (127.0.0.2,
127.0.0.3) a Thaw worker and a Spark worker with the same host name, so Spark's
locality levels and Thaw's block locations speak of the same hosts on one
machine. Spark comes from the ``pyspark`` wheel (its jars and ``spark-class``);
Thaw's jars from the Maven build (``java/*/target`` of this checkout). For the
Spark tests (python/tests/test_spark_*.py) and the evaluation harness
(``thaw_bench.scripts.spark_queued``), as ``thaw.minihdfs`` serves HDFS's."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thaw.cluster import find_binary
from thaw.seaweed import free_ports

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ("127.0.0.2", "127.0.0.3")
# For tests: every JVM there (Spark's master and workers, the drivers, the
# executors) lives for seconds to a minute over small data, and HotSpot's
# first compiler tier alone (C1) starts it faster and spends far less CPU
# compiling than the default C1+C2; the serial collector suits its 256-768 MiB
# heap. Measurements (the harness) keep HotSpot's defaults.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def jars() -> list[Path]:
    """thaw-hadoop's and thaw-spark's jars (empty where one is not built)."""
    out = []
    for module in ("thaw-hadoop", "thaw-spark"):
        found = [
            p
            for p in sorted((ROOT / "java" / module / "target").glob(f"{module}-*.jar"))
            if not p.name.endswith(("-sources.jar", "-tests.jar"))
        ]
        if not found:
            return []
        out.append(found[-1])
    return out


def has_class(jar: Path, name: str) -> bool:
    with zipfile.ZipFile(jar) as z:
        return name.replace(".", "/") + ".class" in z.namelist()


def skip_reason() -> str | None:
    """Why the Spark tests cannot run here, or None."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no JVM (java not on PATH, JAVA_HOME unset): scripts/test.sh installs the JDK"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (python/requirements-dev.txt pins it)"
    found = jars()
    if not found:
        return "Thaw's jars are not built: cd java && mvn -B -q -DskipTests package"
    with zipfile.ZipFile(found[0]) as z:
        if "native/linux-x86_64/libthaw_jni.so" not in z.namelist() and not os.environ.get("THAW_JNI_LIB"):
            return "thaw-hadoop's jar carries no libthaw_jni.so: build crates/thaw-jni before the jars"
    return None


def has_filesystem() -> bool:
    """Whether thaw-hadoop carries the thaw:// FileSystem (io.thaw.hadoop.ThawFileSystem)."""
    found = jars()
    return bool(found) and has_class(found[0], "io.thaw.hadoop.ThawFileSystem")


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class Clusters:
    """The two clusters' addresses and processes."""

    tmp: Path
    thaw: str = ""
    spark: str = ""
    spark_ui: str = ""
    ufs: Path = field(default_factory=Path)
    # Options of every JVM of the clusters and their applications' (drivers, executors).
    jvm_options: str = ""
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115
        self.procs[name] = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )

    def spark_json(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.spark_ui}/json/", timeout=5) as r:
            out: dict[str, Any] = json.load(r)
            return out

    def kill(self, name: str) -> None:
        p = self.procs.pop(name)
        p.kill()
        p.wait()

    def stop(self) -> None:
        for p in reversed(list(self.procs.values())):
            p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _master_urls(c: Clusters) -> tuple[str, str] | None:
    """The Spark master's address and its web UI's, once its log names both."""
    log = c.log("spark-master")
    master = re.search(r"Starting Spark master at (spark://\S+)", log)
    ui = re.search(r"Bound MasterWebUI to \S+, and started at http://[^:\s]+:(\d+)", log)
    if not (master and ui):
        return None
    return master.group(1), f"http://127.0.0.1:{ui.group(1)}"


def _wait(what: str, ok: Any, timeout: float, clusters: Clusters) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ok():
                return
        except OSError:
            pass
        time.sleep(0.25)
    logs = "\n".join(f"--- {n}\n{clusters.log(n)[-2000:]}" for n in clusters.procs)
    raise TimeoutError(f"{what} not up within {timeout} s\n{logs}")


@contextmanager
def clusters(
    tmp: Path,
    thaw_master_flags: tuple[str, ...] = (),
    thaw_worker_flags: tuple[str, ...] = (),
    block_size: str = "1MiB",
    mem_capacity: str = "1GiB",
    masters: int = 1,
    jvm_options: str = TEST_JVM_OPTIONS,
) -> Iterator[Clusters]:
    """A Thaw master and two workers, a Spark master and two workers (one
    core and 1 GiB each), the pairs on 127.0.0.2 and 127.0.0.3.

    ``masters``: 1, or a group of highly available masters (processes
    ``thaw-master1``... on 127.0.0.1; ``Clusters.thaw`` names them all, and
    :func:`leader` tells which one serves).

    ``jvm_options``: of every JVM, the Spark daemons' and (through
    :func:`session_conf`) the drivers' and executors'; "" for HotSpot's
    defaults (for measurements)."""
    import thaw

    c = Clusters(tmp=tmp, ufs=tmp / "ufs", jvm_options=jvm_options)
    c.ufs.mkdir()
    try:
        flags = [
            "--ufs", str(c.ufs), "--bind", "127.0.0.1", "--heartbeat-ms", "200",
            "--worker-timeout-ms", "1500", "--block-size", block_size, *thaw_master_flags,
        ]  # fmt: skip
        if masters == 1:
            c.spawn(
                "thaw-master",
                [find_binary(), "master", "--journal-dir", str(tmp / "journal"), "--port", "0", *flags],
            )
            listening = re.compile(r"thaw master listening on (\S+)")
            _wait("Thaw's master", lambda: listening.search(c.log("thaw-master")), 30, c)
            c.thaw = listening.search(c.log("thaw-master")).group(1)  # type: ignore[union-attr]
        else:
            # A group's members name each other's ports before any binds.
            peers = [f"127.0.0.1:{p}" for p in free_ports(masters)]
            for i in range(1, masters + 1):
                journal = tmp / f"journal{i}"
                c.spawn(
                    f"thaw-master{i}",
                    [find_binary(), "master", "--journal-dir", str(journal), "--id", str(i),
                     "--peers", ",".join(peers), *flags],
                )  # fmt: skip
            c.thaw = ",".join(peers)
            _wait("Thaw's masters to elect a leader", lambda: leader(c) is not None, 30, c)
        for i, host in enumerate(HOSTS):
            c.spawn(
                f"thaw-worker{i}",
                [
                    find_binary(), "worker", "--master", c.thaw, "--host", host, "--bind", host,
                    "--mem-dir", str(tmp / f"mem{i}"), "--mem-capacity", mem_capacity, "--port", "0",
                    *thaw_worker_flags,
                ],
            )  # fmt: skip
        client = thaw.Client(c.thaw)
        _wait("Thaw", lambda: sum(w["alive"] for w in client.status()["workers"]) == 2, 30, c)

        home = spark_home()
        spark_class = str(home / "bin" / "spark-class")
        env = {
            "SPARK_HOME": str(home),
            "SPARK_NO_DAEMONIZE": "1",
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_DAEMON_JAVA_OPTS": jvm_options,
        }
        # Ports the master picks itself (0), read back from its log: a port
        # chosen free beforehand can be taken by the time it binds, and Spark
        # then moves to the next one without failing.
        c.spawn(
            "spark-master",
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", "0", "--webui-port", "0"],
            {**env, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "256m"},
        )  # fmt: skip
        _wait("Spark's master", lambda: _master_urls(c), 60, c)
        c.spark, c.spark_ui = _master_urls(c) or ("", "")
        for i, host in enumerate(HOSTS):
            work = tmp / f"spark-work{i}"
            work.mkdir()
            c.spawn(
                f"spark-worker{i}",
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", host, "--port", "0",
                 "--webui-port", "0", "--cores", "1", "--memory", "1g",
                 "--work-dir", str(work), c.spark],
                # The executors it starts inherit these: Thaw's client there
                # knows its host (short-circuit reads, replica order).
                {**env, "SPARK_LOCAL_IP": host, "SPARK_DAEMON_MEMORY": "256m",
                 "THAW_HOST": host, "THAW_MASTER": c.thaw},
            )  # fmt: skip
        _wait(
            "Spark",
            lambda: sum(w["state"] == "ALIVE" for w in c.spark_json()["workers"]) == 2,
            60,
            c,
        )
        yield c
    finally:
        c.stop()


def leader(c: Clusters) -> str | None:
    """The process name (``thaw-master<id>``) of the group's leader, if one leads."""
    import thaw

    try:
        masters = thaw.Client(c.thaw).status()["masters"]
    except thaw.ThawError:
        return None
    peers = c.thaw.split(",")
    lead = [peers.index(m["address"]) + 1 for m in masters if m["leader"] and m["address"] in peers]
    return f"thaw-master{lead[0]}" if lead else None


def session_conf(c: Clusters, **extra: str) -> dict[str, str]:
    """A driver's settings for these clusters: Thaw's jars, the extension and
    the job listener, two one-core executors."""
    conf = {
        "spark.master": c.spark,
        "spark.jars": ",".join(str(j) for j in jars()),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "768m",
        "spark.executor.memory": "768m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.ui.port": "0",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.extensions": "io.thaw.spark.ThawSparkExtension",
        "spark.extraListeners": "io.thaw.spark.ThawJobListener",
        "spark.hadoop.fs.thaw.master": c.thaw,
        # Jars given to spark-submit join the class path after Hadoop has read
        # its service files: name the implementation.
        "spark.hadoop.fs.thaw.impl": "io.thaw.hadoop.ThawFileSystem",
        # A new FileSystem per session: Hadoop caches one per scheme and
        # authority for the JVM's life, and `thaw:///` paths would reach an
        # earlier session's (stopped) master through it.
        "spark.hadoop.fs.thaw.impl.disable.cache": "true",
        # The cluster's 1 MiB blocks for files Spark writes (parquet asks for
        # blocks as large as its row groups, 128 MiB unless told).
        "spark.hadoop.fs.thaw.block.size": "1048576",
        "spark.hadoop.parquet.block.size": "1048576",
        "spark.pyspark.python": sys.executable,
        "spark.executorEnv.THAW_MASTER": c.thaw,
    }
    if c.jvm_options:
        conf["spark.driver.extraJavaOptions"] = c.jvm_options
        conf["spark.executor.extraJavaOptions"] = c.jvm_options
    conf.update(extra)
    return conf


def session(c: Clusters, app: str, **extra: str) -> Any:
    """A SparkSession on these clusters (``session_conf`` plus ``extra``)."""
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName(app)
    for k, v in session_conf(c, **extra).items():
        b = b.config(k, v)
    return b.getOrCreate()


def rest(spark: Any, path: str, attempts: int = 3) -> Any:
    """The driver's monitoring REST API: ``/api/v1/applications/<app>/<path>``.
    Asked again (up to ``attempts`` times) when the driver does not answer in
    time: a loaded machine slows its UI, not the query (seen in a CI run)."""
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/{path}"
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=20) as r:
                return json.load(r)
        except (TimeoutError, urllib.error.URLError):
            if attempt == attempts - 1:
                raise
            time.sleep(1)


def scan_tasks(spark: Any, description: str) -> list[dict[str, Any]]:
    """The tasks of the stages that read files in the query (the SQL
    execution) with this description, as the REST API lists them."""
    [sql] = [q for q in rest(spark, "sql?details=false") if q["description"] == description]
    tasks: list[dict[str, Any]] = []
    for job in sql["successJobIds"]:
        for stage in rest(spark, f"jobs/{job}")["stageIds"]:
            for attempt in rest(spark, f"stages/{stage}"):
                if attempt["inputBytes"] > 0:
                    tasks += rest(spark, f"stages/{stage}/{attempt['attemptId']}/taskList?length=1000")
    return tasks


def wait_for(what: str, ok: Any, timeout: float = 30.0) -> Any:
    """Polls ``ok()`` until it returns something truthy; returns it."""
    deadline = time.monotonic() + timeout
    while True:
        got = ok()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(0.1)


def spark_ms(stamp: str) -> int:
    """A REST API time (``2026-11-28T00:28:56.123GMT``) in ms since the epoch."""
    from datetime import UTC, datetime

    t = datetime.strptime(stamp.removesuffix("GMT"), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
    return int(t.timestamp() * 1000)
