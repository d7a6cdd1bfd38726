"""The SQL workload: TPC-H queries on DuckDB over Thaw, queued, with the hook
that tells Thaw each query's inputs right after the query is compiled
(Ignem, section IV-B3 and IV-G, DYRS, section IV "Hive" and V-B1/V-D; the papers ran
TPC-DS on Hive, this runs TPC-H on DuckDB, whose TPC-H extension works offline).

Data: DuckDB's ``dbgen`` at a scale factor, each table written as parquet part
files of about :data:`~thaw_bench.workloads.PART_BLOCKS` blocks into Thaw under
``/tpch/<table>/part-N.parquet``, 3 replicas on DISK tiers, the writer's node
rotating (as :func:`~thaw_bench.workloads.place_inputs`); a local copy of the
same files is the correctness reference. Tables are views over
``read_parquet('thaw:///tpch/<table>/*.parquet')``, as a metastore's tables are
directories of files.

Queue: the queries are submitted together to a one-slot queue (as Hive queries
queued on a busy cluster), optionally behind a job that holds the slot for
``ahead`` seconds, so each query's lead-time is the time it waits for the ones
before it. At submission the hook compiles the query (DuckDB binds it:
``EXPLAIN``), takes the files the binder expanded the query's tables to, and
calls ``migrate(files, job=query, eviction="implicit")``; when the query ends,
``evict(query)``. Every read the query makes, from any DuckDB thread, carries
the query's job id (the filesystem's client is given it explicitly, since
DuckDB's threads run outside any Python context).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import math
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from thaw.client import Client, ThawFile
from thaw.errors import NotFound
from thaw.fs import ThawFileSystem

from .cluster import EmulatedCluster
from .configs import Config, Scenario
from .record import migration_events, observe, preload_inputs, run_record, write_json
from .workloads import PART_BLOCKS

TABLES = ("customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier")
#: Ten scan-heavy queries (the papers ran ten TPC-DS queries).
DEFAULT_QUERIES = (1, 3, 4, 5, 6, 10, 12, 14, 18, 19)
ROOT = "/tpch"
#: The job id of the metastore's and the compiler's reads (view binding, EXPLAIN):
#: not the query's, so they neither count as its reads nor release its blocks.
CATALOG_JOB = "sql-catalog"
#: Where the harness's coordinator (compiler and query engine) sits.
COORDINATOR = "node0"
SOURCES = ("short_circuit", "zero_copy", "remote_mem", "remote_disk", "under_store")


# -- DuckDB and TPC-H -------------------------------------------------------------


@functools.cache
def tpch_extension() -> Path:
    """The TPC-H extension file shipped by the ``duckdb-extension-tpch`` package
    (DuckDB cannot download extensions offline; LOAD takes a file)."""
    spec = importlib.util.find_spec("duckdb_extension_tpch")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the TPC-H extension is missing: pip install duckdb-extension-tpch==" + duckdb.__version__
        )
    found = sorted(
        p
        for loc in spec.submodule_search_locations
        for p in Path(loc).rglob("tpch.duckdb_extension")
        if f"v{duckdb.__version__}" in p.parts
    )
    if not found:
        raise RuntimeError(f"no tpch.duckdb_extension for DuckDB {duckdb.__version__} in {spec.origin}")
    return found[0]


def connect(threads: int | None = None, tpch: bool = False) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB database (nothing cached from another query),
    without its progress bar."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    if tpch:
        con.execute(f"LOAD '{tpch_extension()}'")
    return con


@functools.cache
def tpch_query(n: int) -> str:
    """TPC-H query ``n`` (1-22) as DuckDB's extension writes it."""
    con = connect(tpch=True)
    try:
        row = con.execute("SELECT query FROM tpch_queries() WHERE query_nr = ?", [n]).fetchone()
    finally:
        con.close()
    if row is None:
        raise ValueError(f"no TPC-H query {n}: 1-22")
    return str(row[0])


def query_name(n: int) -> str:
    return f"q{n:02d}"


# -- data -------------------------------------------------------------------------


@dataclass
class TpchData:
    """TPC-H tables placed in Thaw, and their local copy (the reference)."""

    sf: float
    local: Path
    root: str
    block_size: int
    tables: dict[str, list[str]] = field(default_factory=dict)  # table -> Thaw paths
    sizes: dict[str, int] = field(default_factory=dict)  # Thaw path -> bytes

    def thaw_views(self) -> dict[str, str]:
        return {t: f"thaw://{self.root}/{t}/*.parquet" for t in self.tables}

    def local_views(self) -> dict[str, str]:
        return {t: str(self.local / t / "*.parquet") for t in self.tables}

    def table_of(self, path: str) -> str:
        return path[len(self.root) + 1 :].split("/", 1)[0]

    @property
    def bytes(self) -> int:
        return sum(self.sizes.values())


def generate_tpch(local: Path, sf: float, part_size: int) -> dict[str, list[Path]]:
    """Writes every TPC-H table at scale factor ``sf`` as parquet part files of
    about ``part_size`` bytes under ``local/<table>/``, each part in about four
    row groups (DuckDB scans row groups in parallel). Kept and reused when
    ``local/manifest.json`` says the same ``sf`` and ``part_size``."""
    manifest = local / "manifest.json"
    want = {"sf": sf, "part_size": part_size}
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        files = {t: [local / f for f in fs] for t, fs in m.get("files", {}).items()}
        if {k: m.get(k) for k in want} == want and all(p.is_file() for fs in files.values() for p in fs):
            return files
    shutil.rmtree(local, ignore_errors=True)
    local.mkdir(parents=True)
    con = connect(tpch=True)
    try:
        con.execute(f"CALL dbgen(sf={float(sf)})")
        # One writer thread: parts hold consecutive rows, the same on every run.
        con.execute("SET threads = 1")
        out: dict[str, list[Path]] = {}
        for table in TABLES:
            (local / table).mkdir()
            row = con.execute(f"SELECT count(*) FROM {table}").fetchone()
            rows = int(row[0]) if row else 0
            # Smaller row groups compress worse: size the parts from one try, and
            # once more from what the try wrote if it missed by more than 20%.
            size, parts = _write_parts(con, table, local, rows, 1, part_size)
            for _ in range(2):
                want_parts = max(1, math.ceil(size / part_size))
                if abs(size / parts - part_size) <= 0.2 * part_size or want_parts == parts:
                    break
                for p in (local / table).glob("part-*.parquet"):
                    p.unlink()
                size, parts = _write_parts(con, table, local, rows, want_parts, part_size)
            out[table] = sorted((local / table).glob("part-*.parquet"), key=lambda p: int(p.stem[5:]))
    finally:
        con.close()
    files = {t: [str(p.relative_to(local)) for p in ps] for t, ps in out.items()}
    manifest.write_text(json.dumps({**want, "files": files}, indent=1))
    return out


def _write_parts(
    con: duckdb.DuckDBPyConnection, table: str, local: Path, rows: int, parts: int, part_size: int
) -> tuple[int, int]:
    """Writes ``table`` as ``parts`` files of consecutive rows, about four row
    groups each; returns (bytes written, parts)."""
    per_part = max(1, math.ceil(rows / parts))
    group = max(2048, math.ceil(per_part / 4))
    size = 0
    for i in range(parts):
        path = local / table / f"part-{i}.parquet"
        lo, hi = i * per_part, (i + 1) * per_part
        con.execute(
            f"COPY (SELECT * FROM {table} WHERE rowid >= {lo} AND rowid < {hi} ORDER BY rowid) "
            f"TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE {group})"
        )
        size += path.stat().st_size
    return size, parts


def place_tpch(
    cluster: EmulatedCluster,
    local: Path,
    sf: float,
    root: str = ROOT,
    progress: Callable[[str], None] | None = None,
) -> TpchData:
    """Generates the tables (see :func:`generate_tpch`; parts of
    ``PART_BLOCKS`` blocks) and writes each part into Thaw at
    ``root/<table>/part-N.parquet``, ``replicated:3`` on DISK tiers, the
    writer's node rotating so replicas spread. A part already in Thaw with the
    same length is kept. The cluster must be running."""
    say = progress or (lambda _m: None)
    client = cluster.client()
    block_size = int(client.status()["default_block_size"])
    t = time.time()
    files = generate_tpch(local, sf, PART_BLOCKS * block_size)
    say(f"  TPC-H sf {sf:g}: generated in {time.time() - t:.1f}s")
    nodes = [n.name for n in cluster.nodes]
    data = TpchData(sf, local, root, block_size)
    written = 0
    k = 0
    for table, parts in files.items():
        data.tables[table] = []
        for p in parts:
            path = f"{root}/{table}/{p.name}"
            size = p.stat().st_size
            with contextlib.suppress(FileNotFoundError):
                if client.stat(path)["length"] != size:
                    client.rm(path)
            if not client.exists(path):
                writer = cluster.client(host=nodes[k % len(nodes)])
                k += 1
                with writer.open(
                    path, "wb", write_type=f"replicated:{min(3, len(nodes))}", block_size=block_size
                ) as f:
                    f.write(p.read_bytes())
                written += size
            data.tables[table].append(path)
            data.sizes[path] = size
    say(
        f"  TPC-H sf {sf:g}: {data.bytes / 2**20:.1f} MiB in {len(data.sizes)} parts"
        f" ({written / 2**20:.1f} MiB written now)"
    )
    return data


def create_views(con: duckdb.DuckDBPyConnection, views: dict[str, str]) -> None:
    """Each table as a view over its files (a metastore's table is a directory)."""
    for table, pattern in views.items():
        con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM read_parquet('{pattern}')")


# -- Thaw for DuckDB ----------------------------------------------------------------


class _CountedFile(ThawFile):
    """A Thaw file that hands its read counters (bytes by source) over when it
    closes (the native reader forgets them then)."""

    def __init__(self, reader: Any, sink: Callable[[dict[str, int]], None]) -> None:
        super().__init__(reader)
        self._sink = sink

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):
                self._sink(self.stats())
        super().close()


class SqlFileSystem(ThawFileSystem):
    """``thaw://`` for one DuckDB database of the harness: while ``record`` is a
    list, every file list DuckDB's binder expands (``glob``: patterns and
    single paths alike) goes into it; the files opened add their bytes read by
    source to ``sources``."""

    def __init__(self, client: Client) -> None:
        super().__init__(client=client)
        self.record: list[str] | None = None
        self.sources: dict[str, int] = dict.fromkeys(SOURCES, 0)
        self.opens = 0
        self._lock = threading.Lock()

    def glob(self, path: str, maxdepth: int | None = None, **kwargs: Any) -> Any:
        out = super().glob(path, maxdepth=maxdepth, **kwargs)
        if self.record is not None:
            with self._lock:  # a list of names, or a dict by name (detail=True)
                self.record.extend(str(n) for n in out)
        return out

    def _add(self, stats: dict[str, int]) -> None:
        with self._lock:
            self.opens += 1
            for k in SOURCES:
                self.sources[k] += int(stats.get(k, 0))

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if mode != "rb":
            return super()._open(path, mode, *args, **kwargs)
        return _CountedFile(self.client.native().open(self._strip_protocol(path)), self._add)


class Compiler:
    """The hook's query compiler: a DuckDB database with the tables as views over
    Thaw, from the coordinator's position. :meth:`inputs` binds a query
    (``EXPLAIN``) and returns the Thaw files the binder expanded its tables to,
    in the order first met, each once: views, CTEs, subqueries and files named
    in the query itself alike, with no list of tables to keep up to date.

    Limits: it is the binder's list, so files that the scan then skips (row
    groups pruned by statistics, hive partitions pruned by a filter) are still
    migrated; data held inside DuckDB rather than in files is not seen; and it
    relies on DuckDB (1.5) expanding every file list of a statement through the
    registered filesystem when it binds it (no cached glob), which the tests
    check."""

    def __init__(self, cluster: EmulatedCluster, data: TpchData, host: str = COORDINATOR) -> None:
        self.fs = SqlFileSystem(cluster.client(CATALOG_JOB, host=host))
        self.con = connect(threads=1)
        self.con.register_filesystem(self.fs)
        create_views(self.con, data.thaw_views())

    def inputs(self, sql: str) -> list[str]:
        seen: list[str] = []
        self.fs.record = seen
        try:
            self.con.execute("EXPLAIN " + sql).fetchall()
        finally:
            self.fs.record = None
        return list(dict.fromkeys(ThawFileSystem._strip_protocol(p) for p in seen))

    def close(self) -> None:
        self.con.close()


@dataclass
class QueryResult:
    rows: list[tuple[Any, ...]]
    seconds: float
    sources: dict[str, int]  # bytes read by source, summed over the files opened
    opens: int


def run_query(
    cluster: EmulatedCluster, data: TpchData, sql: str, job: str, host: str = COORDINATOR, threads: int = 2
) -> QueryResult:
    """Runs ``sql`` on a fresh DuckDB database over Thaw. The views are bound
    with the catalog's job id; then the filesystem's client becomes the
    query's, so every read of the query itself (from whichever DuckDB thread)
    carries ``job``."""
    fs = SqlFileSystem(cluster.client(CATALOG_JOB, host=host))
    con = connect(threads)
    try:
        con.register_filesystem(fs)
        create_views(con, data.thaw_views())
        fs.client = cluster.client(job, host=host)
        t = time.perf_counter()
        rows = con.execute(sql).fetchall()
        seconds = time.perf_counter() - t
    finally:
        con.close()
    return QueryResult(rows, seconds, dict(fs.sources), fs.opens)


def reference_rows(data: TpchData, queries: list[int], threads: int = 2) -> dict[int, list[tuple[Any, ...]]]:
    """Each query's result on the local copy of the files (no Thaw)."""
    con = connect(threads)
    try:
        create_views(con, data.local_views())
        return {n: con.execute(tpch_query(n)).fetchall() for n in dict.fromkeys(queries)}
    finally:
        con.close()


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b)


def _key(row: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(f"{v:.6g}" if isinstance(v, float) else repr(v) for v in row)


def same_rows(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    """Equal results: the same rows (doubles equal to 1e-9 relative: parallel
    aggregation adds in any order; decimals exactly), in the same order or,
    for ties of the ORDER BY, in some order."""
    if len(a) != len(b):
        return False

    def equal(x: list[tuple[Any, ...]], y: list[tuple[Any, ...]]) -> bool:
        return all(len(r) == len(s) and all(map(_close, r, s)) for r, s in zip(x, y, strict=True))

    return equal(a, b) or equal(sorted(a, key=_key), sorted(b, key=_key))


# -- the queue ---------------------------------------------------------------------


@dataclass
class _Query:
    n: int
    name: str
    sql: str
    submit: float = 0.0
    compiled: float = 0.0
    start: float = 0.0
    end: float = 0.0
    files: list[str] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    block_bytes: int = 0
    at_submit: dict[str, Any] | None = None
    at_start: dict[str, Any] | None = None
    at_end: dict[str, Any] | None = None
    in_memory_at_start: float = 0.0
    result: QueryResult | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    correct: bool | None = None
    error: str | None = None


def _in_memory(client: Client, files: list[str]) -> tuple[int, int]:
    """(blocks with a MEM replica, blocks) of ``files``, asked of the master now."""
    mem = total = 0
    for path in files:
        for b in client.stat(path, blocks=True).get("blocks", []):
            total += 1
            mem += any(r["tier"] == "MEM" for r in b["replicas"])
    return mem, total


def run_config(
    cluster: EmulatedCluster,
    data: TpchData,
    config: Config,
    scenario: Scenario,
    queries: list[int],
    ahead: float = 2.0,
    reference: dict[int, list[tuple[Any, ...]]] | None = None,
    threads: int = 2,
    timeout: float = 1800.0,
    progress: Callable[[str], None] | None = None,
    eviction: str = "implicit",
) -> dict[str, Any]:
    """One configuration: restart Thaw with its policy, drop the disks' pages,
    (inputs-in-RAM: migrate every table and wait), then submit the queries
    together to a one-slot queue behind a job holding it ``ahead`` seconds.
    ``eviction``: the hook's mode ("implicit" as in the papers' Hive hook; the
    hook evicts every query's blocks at its end either way).
    Returns the run record of :meth:`thaw_bench.runner.Runner.run` (kind "sql",
    per query also ``start``, ``run_s``, ``in_memory_at_start``, the bytes
    read by source and by the job on the workers, ``correct``)."""
    say = progress or (lambda _m: None)
    run_name = f"sql-{scenario.name}-{config.name}"
    cluster.start(config.policy, config.priority, migration_io=config.migration_io)
    dropped = cluster.drop_pages()
    client = cluster.client(host=COORDINATOR)
    preload = None
    if config.preload:
        preload = preload_inputs(client, [data.root], timeout, say)
    names: dict[str, int] = {}
    runs: list[_Query] = []
    for n in queries:
        name = query_name(n)
        names[name] = names.get(name, 0) + 1
        runs.append(_Query(n, name if names[name] == 1 else f"{name}-{names[name]}", tpch_query(n)))
    compiler = Compiler(cluster, data)
    lease = timeout + 600

    def execute(q: _Query) -> None:
        """The query, when the slot frees: progress, run, counters, evict."""
        if config.preload:
            mem, total = _in_memory(client, q.files)
            q.in_memory_at_start = mem / max(1, total)
        else:
            q.at_start = client.job(q.name)
            if q.at_start and q.at_start.get("blocks"):
                q.in_memory_at_start = q.at_start["blocks_in_memory"] / q.at_start["blocks"]
        q.start = time.time()
        try:
            q.result = run_query(cluster, data, q.sql, q.name, threads=threads)
        except Exception as e:
            q.error = f"{type(e).__name__}: {e}"
        q.end = time.time()
        with contextlib.suppress(Exception):
            q.stats = client.job_stats(q.name)
        if not config.preload:
            with contextlib.suppress(NotFound):
                q.at_end = client.job(q.name)
                client.evict(q.name)

    futures: list[Future[None]] = []
    try:
        with observe(cluster, client, scenario) as seen:
            t0 = seen.t0
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sql-queue") as slot:
                if ahead > 0:
                    # The job ahead holds the only slot; its own work runs elsewhere on
                    # the cluster, so it leaves this machine's cores to Thaw.
                    slot.submit(time.sleep, ahead)
                for q in runs:
                    # The hook, right after compilation: the files the plan reads.
                    q.submit = time.time()
                    q.files = compiler.inputs(q.sql)
                    q.compiled = time.time()
                    for path in q.files:
                        for b in client.stat(path, blocks=True).get("blocks", []):
                            q.blocks.append(int(b["block_id"]))
                            q.block_bytes += int(b["length"])
                    if not config.preload:
                        q.at_submit = client.migrate(q.files, job=q.name, eviction=eviction, lease=lease)
                    futures.append(slot.submit(execute, q))
                for f in futures:
                    f.result(timeout=max(1.0, t0 + timeout - time.time()))
            wall = time.time() - t0
    finally:
        compiler.close()
        for q in runs:
            if not config.preload and not q.end:
                with contextlib.suppress(Exception):
                    client.evict(q.name)
        if config.preload:
            with contextlib.suppress(Exception):
                client.evict("inputs-in-ram")
    for q in runs:
        if q.result is not None and reference is not None:
            q.correct = same_rows(q.result.rows, reference[q.n])
        r = q.result
        say(
            f"  {config.name} {q.name}: waited {q.start - q.submit:.2f}s, ran {q.end - q.start:.2f}s,"
            f" {q.in_memory_at_start:.0%} in memory at start"
            + (f", ERROR {q.error}" if q.error else "" if q.correct is not False else ", WRONG RESULT")
            + (f" (query {r.seconds:.2f}s)" if r else "")
        )
    events = migration_events(client)
    return run_record(
        run_name,
        config,
        scenario,
        cluster,
        seen,
        events,
        wall=wall,
        dropped=dropped,
        preload=preload,
        ahead_s=ahead,
        eviction=None if config.preload else eviction,
        sf=data.sf,
        jobs=[_job_record(q, data, t0) for q in runs],
        tasks=[],
    )


def _job_record(q: _Query, data: TpchData, t0: float) -> dict[str, Any]:
    r = q.result
    tables = sorted({data.table_of(p) for p in q.files})
    return {
        "job": q.name, "kind": "sql", "submit": round(q.submit - t0, 4), "end": round(q.end - t0, 4),
        "duration": round(q.end - q.submit, 4), "input_bytes": sum(data.sizes.get(p, 0) for p in q.files),
        "shuffle_bytes": 0, "output_bytes": 0, "maps": 0, "blocks": q.blocks,
        "failed_tasks": int(q.error is not None),
        "migration": q.at_end, "trace": {},
        "start": round(q.start - t0, 4), "run_s": round(q.end - q.start, 4),
        "in_memory_at_start": round(q.in_memory_at_start, 4),
        "query": q.n, "tables": tables, "files": q.files, "compile_s": round(q.compiled - q.submit, 4),
        "migration_at_submit": q.at_submit, "migration_at_start": q.at_start,
        "query_s": round(r.seconds, 4) if r else None, "rows": len(r.rows) if r else None,
        "read_sources": r.sources if r else {}, "files_opened": r.opens if r else 0,
        "job_stats": {k: v for k, v in q.stats.items() if k != "workers"},
        "correct": q.correct, "error": q.error,
    }  # fmt: skip


def run_sql(
    cluster: EmulatedCluster,
    configs: list[Config],
    scenario: Scenario,
    out_dir: Path,
    sf: float = 0.1,
    queries: list[int] | tuple[int, ...] = DEFAULT_QUERIES,
    ahead: float = 2.0,
    progress: Callable[[str], None] | None = None,
    data: TpchData | None = None,
    threads: int = 2,
    timeout: float = 1800.0,
    eviction: str = "implicit",
    repeats: int = 1,
) -> list[dict[str, Any]]:
    """The SQL experiment: places TPC-H at ``sf`` once (unless ``data`` is
    given; the local copy goes under ``out_dir/tpch-sf<sf>``), then runs
    ``queries`` under each configuration (:func:`run_config`), ``repeats`` times
    (each repeat starting one configuration later; with repeats, runs are named
    ``<run>-r<N>``), writing each run dict to ``out_dir/<run>.json``. Every query's result must equal the same
    query on the local files, in every configuration: else RuntimeError (after
    all runs are written)."""
    say = progress or (lambda _m: None)
    out_dir.mkdir(parents=True, exist_ok=True)
    queries = list(queries)
    if data is None:
        if not cluster.master:
            cluster.start("none")
        data = place_tpch(cluster, out_dir / f"tpch-sf{sf:g}", sf, progress=say)
    reference = reference_rows(data, queries, threads)
    runs = []
    wrong = []
    order = [
        (rep, config)
        for rep in range(repeats)
        for config in configs[rep % len(configs) :] + configs[: rep % len(configs)]
    ]
    for rep, config in order:
        say(f"SQL {scenario.name} / {config.name}" + (f" (repeat {rep + 1})" if repeats > 1 else ""))
        run = run_config(
            cluster, data, config, scenario, queries, ahead, reference, threads, timeout, say, eviction
        )
        if repeats > 1:
            run["run"] = f"{run['run']}-r{rep}"
        run["repeat"] = rep
        write_json(out_dir / f"{run['run']}.json", run)
        runs.append(run)
        wrong += [
            f"{config.name}/{j['job']}: {j['error'] or 'wrong result'}"
            for j in run["jobs"]
            if not j["correct"]
        ]
    if wrong:
        raise RuntimeError(
            "SQL queries failed or disagree with DuckDB on the local files: " + "; ".join(wrong)
        )
    return runs
