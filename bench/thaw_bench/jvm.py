"""JVM peers for the evaluation: class paths resolved by Maven into a cache,
the harness's Java programs (bench/jvm/*.java) compiled against them, and
Alluxio 2.9.4 (master and worker from Maven Central jars, its MEM tier in
/dev/shm, a local under-store) run as processes beside a Thaw cluster, so
Hadoop clients of both are measured in one run.

Needs a JDK and Maven (scripts/ensure-jdk.sh installs them). The Alluxio
settings are those the peers' script uses (journal NOOP, heap metastore,
NOSASL, one MEM tier), with every port free-picked so it runs beside Thaw.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

CACHE = Path(os.environ.get("THAW_JVM_CACHE", Path.home() / ".cache" / "thaw" / "jvm"))
REPO = Path(__file__).resolve().parents[2]
ALLUXIO_VERSION = "2.9.4"
#: Hadoop's shaded client: what Spark and Hive put on a classpath.
HADOOP_CLIENT = [
    ("org.apache.hadoop", "hadoop-client-api", "3.4.1"),
    ("org.apache.hadoop", "hadoop-client-runtime", "3.4.1"),
]
ALLUXIO = [
    ("org.alluxio", a, ALLUXIO_VERSION)
    for a in (
        "alluxio-core-server-master",
        "alluxio-core-server-worker",
        "alluxio-underfs-local",
        "alluxio-core-client-hdfs",
    )
]
#: What JDK 17 must open for Alluxio 2.x (its netty and unsafe use).
OPENS = [
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
]


def classpath(name: str, artifacts: list[tuple[str, str, str]]) -> str:
    """The class path of `artifacts` and their dependencies, resolved once
    into the cache (Maven Central), as a ':'-joined string."""
    home = CACHE / name
    out = home / "classpath.txt"
    if not out.exists():
        home.mkdir(parents=True, exist_ok=True)
        deps = "".join(
            f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
            for g, a, v in artifacts
        )
        (home / "pom.xml").write_text(
            '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            f"<groupId>thaw.bench</groupId><artifactId>{name}</artifactId><version>1</version>"
            f"<packaging>pom</packaging><dependencies>{deps}</dependencies></project>"
        )
        subprocess.run(
            ["mvn", "-B", "-q", "-ntp", "dependency:build-classpath", f"-Dmdep.outputFile={out}"],
            cwd=home,
            check=True,
            timeout=1800,  # a first download of Alluxio's ~200 MB of jars
        )
    jars = out.read_text().strip().split(":")
    # Two SLF4J bindings arrive with Alluxio; keep the reload4j one.
    return ":".join(j for j in jars if "log4j-slf4j-impl" not in j)


def compile_program(source: str, cp: str, out: Path) -> Path:
    """Compiles bench/jvm/`source` against `cp` into `out` (a classes dir)."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["javac", "-d", str(out), "-cp", cp, str(REPO / "bench" / "jvm" / source)], check=True, timeout=300
    )
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Alluxio:
    """An Alluxio master and worker as processes (a context manager): its
    under-store is `ufs`, its MEM tier `mem` bytes in /dev/shm. `uri(path)`
    names a file for its Hadoop client (`alluxio.hadoop.FileSystem`)."""

    def __init__(self, ufs: Path, mem: int) -> None:
        self.ufs = ufs
        self.mem = mem
        self.cp = classpath(f"alluxio-{ALLUXIO_VERSION}", ALLUXIO)
        self.work = Path(tempfile.mkdtemp(prefix="thaw-bench-alluxio-"))
        self.shm = Path(tempfile.mkdtemp(prefix="thaw-bench-alluxio-", dir="/dev/shm"))
        self.port = free_port()
        self.procs: list[subprocess.Popen[bytes]] = []

    def props(self) -> dict[str, str]:
        gib = max(1, -(-self.mem // (1 << 30)))
        return {
            "alluxio.home": str(self.work),
            "alluxio.master.hostname": "localhost",
            "alluxio.worker.hostname": "localhost",
            "alluxio.user.hostname": "localhost",
            "alluxio.master.rpc.port": str(self.port),
            "alluxio.master.web.port": str(free_port()),
            "alluxio.worker.rpc.port": str(free_port()),
            "alluxio.worker.web.port": str(free_port()),
            "alluxio.master.mount.table.root.ufs": str(self.ufs),
            "alluxio.master.journal.type": "NOOP",
            "alluxio.master.metastore": "HEAP",
            "alluxio.master.update.check.enabled": "false",
            "alluxio.worker.ramdisk.size": f"{gib}GB",
            "alluxio.worker.tieredstore.levels": "1",
            "alluxio.worker.tieredstore.level0.alias": "MEM",
            "alluxio.worker.tieredstore.level0.dirs.path": str(self.shm),
            "alluxio.worker.tieredstore.level0.dirs.mediumtype": "MEM",
            "alluxio.worker.tieredstore.level0.dirs.quota": f"{gib}GB",
            "alluxio.security.authentication.type": "NOSASL",
            "alluxio.security.authorization.permission.enabled": "false",
            "alluxio.user.file.readtype.default": "CACHE",
        }

    def client_flags(self) -> list[str]:
        """JVM flags for a process using Alluxio's client (its conf and opens)."""
        conf = self.work / "conf"
        return [
            *OPENS,
            f"-Dalluxio.conf.dir={conf}",
            f"-Dalluxio.logs.dir={self.work / 'logs'}",
            f"-Dlog4j.configuration=file:{conf}/log4j.properties",
        ]

    def uri(self, path: str) -> str:
        return f"alluxio://localhost:{self.port}{path}"

    def __enter__(self) -> Alluxio:
        conf = self.work / "conf"
        (self.work / "logs").mkdir(parents=True)
        conf.mkdir(parents=True)
        (conf / "alluxio-site.properties").write_text("".join(f"{k}={v}\n" for k, v in self.props().items()))
        (conf / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, F\nlog4j.appender.F=org.apache.log4j.FileAppender\n"
            "log4j.appender.F.File=${alluxio.logs.dir}/${alluxio.logger.name}.log\n"
            "log4j.appender.F.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.F.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n\n"
        )
        try:
            for name, main, heap in (
                ("master", "alluxio.master.AlluxioMaster", "-Xmx2g"),
                ("worker", "alluxio.worker.AlluxioWorker", "-Xmx1g"),
            ):
                out = open(self.work / "logs" / f"{name}.out", "wb")
                cmd = [
                    "java",
                    heap,
                    *self.client_flags(),
                    f"-Dalluxio.logger.name={name}",
                    "-cp",
                    self.cp,
                    main,
                ]
                if name == "worker":
                    cmd.insert(2, f"-XX:MaxDirectMemorySize={max(1, self.mem >> 30) + 1}g")
                self.procs.append(
                    subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
                )
                if name == "master":
                    time.sleep(3)
            self._wait_worker()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_worker(self, timeout: float = 90.0) -> None:
        log = self.work / "logs" / "worker.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if log.exists() and "Alluxio worker started" in log.read_text(errors="replace"):
                time.sleep(6)  # the master leaves safe mode; the worker registers
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.5)
        logs = sorted((self.work / "logs").glob("*"))
        tail = "\n".join(f"--- {f.name}:\n{f.read_text(errors='replace')[-1500:]}" for f in logs)
        raise RuntimeError(f"Alluxio's worker did not start:\n{tail}")

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        shutil.rmtree(self.shm, ignore_errors=True)
        shutil.rmtree(self.work, ignore_errors=True)
