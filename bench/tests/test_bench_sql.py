"""The SQL workload (thaw_bench.sql) on a small emulated cluster: three nodes
with fast emulated disks, TPC-H at scale factor 0.01 in 256 KiB blocks (the big
tables span several part files), three queries under the cold and DYRS
configurations, one second of queue ahead of them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb
import pytest

from thaw_bench import sql
from thaw_bench.cluster import ClusterSpec, EmulatedCluster
from thaw_bench.configs import CONFIGS, SCENARIOS

# Its queries' submit and start times are checked against the one-slot queue's
# pacing: run alone, after the parallel run (scripts/test.sh).
pytestmark = pytest.mark.serial

QUERIES = [3, 6, 14]
# The tables each query reads, by the TPC-H specification (the hook must find
# them in the plan by itself).
TABLES = {3: {"customer", "orders", "lineitem"}, 6: {"lineitem"}, 14: {"lineitem", "part"}}
RUN_KEYS = {
    "run", "config", "config_label", "scenario", "scenario_label", "policy", "priority", "wall_s",
    "pages_dropped", "preload", "jobs", "tasks", "samples", "interference", "migrations",
}  # fmt: skip
JOB_KEYS = {
    "job", "kind", "submit", "end", "duration", "input_bytes", "shuffle_bytes", "output_bytes", "maps",
    "blocks", "failed_tasks", "migration", "trace", "start", "run_s", "in_memory_at_start",
}  # fmt: skip


@pytest.fixture(scope="module")
def bench(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[EmulatedCluster, sql.TpchData, list[Any]]]:
    tmp = tmp_path_factory.mktemp("bench-sql")
    spec = ClusterSpec(nodes=3, racks=2, disk="400MiB/s", block_size="256KiB", heartbeat_ms=100)
    with EmulatedCluster(spec, root=tmp / "cluster") as cluster:
        cluster.start("none")
        data = sql.place_tpch(cluster, tmp / "tpch", 0.01)
        runs = sql.run_sql(
            cluster,
            [CONFIGS["cold"], CONFIGS["dyrs"]],
            SCENARIOS["homogeneous"],
            tmp / "out",
            sf=0.01,
            queries=QUERIES,
            ahead=1.0,
            data=data,
        )
        yield cluster, data, runs


def by_config(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["config"]: r for r in runs}


def test_run_dicts_have_the_runner_shape(bench: tuple[EmulatedCluster, sql.TpchData, list[Any]]) -> None:
    _, data, runs = bench
    assert [r["config"] for r in runs] == ["cold", "dyrs"]
    for run in runs:
        assert run.keys() >= RUN_KEYS
        assert [j["job"] for j in run["jobs"]] == ["q03", "q06", "q14"]
        assert run["samples"], "the sampler ran"
        for j in run["jobs"]:
            assert j.keys() >= JOB_KEYS
            assert j["kind"] == "sql" and j["failed_tasks"] == 0 and j["error"] is None
            # One slot: each query starts after the one before ends, all after the job
            # ahead (1 s); each was submitted before that job ended (its submit time,
            # the inputs' migrate call included, was 0.531 s in one run: not a bound).
            assert j["submit"] < 1.0 <= j["start"]
            assert j["duration"] == pytest.approx(j["end"] - j["submit"], abs=1e-3)
            assert j["run_s"] == pytest.approx(j["end"] - j["start"], abs=1e-3)
        starts = [j["start"] for j in run["jobs"]]
        ends = [j["end"] for j in run["jobs"]]
        assert all(s >= e for s, e in zip(starts[1:], ends[:-1], strict=False))
        assert (data.local.parent / "out" / f"{run['run']}.json").is_file()


def test_results_equal_duckdb_on_local_files(bench: tuple[EmulatedCluster, sql.TpchData, list[Any]]) -> None:
    cluster, data, runs = bench
    for run in runs:
        assert all(j["correct"] is True and j["rows"] > 0 for j in run["jobs"]), run["jobs"]
    # Independently of the harness's check: plain DuckDB on the local part files.
    con = duckdb.connect()
    for t in data.tables:
        con.execute(f"CREATE VIEW {t} AS FROM read_parquet('{data.local}/{t}/*.parquet')")
    for n in QUERIES:
        local = con.execute(sql.tpch_query(n)).fetchall()
        through_thaw = sql.run_query(cluster, data, sql.tpch_query(n), f"check-{n}")
        assert local and sql.same_rows(through_thaw.rows, local)
    con.close()


def test_hook_plans_exactly_the_tables_files(bench: tuple[EmulatedCluster, sql.TpchData, list[Any]]) -> None:
    cluster, data, runs = bench
    assert len(data.tables["lineitem"]) > 1, "lineitem should span several part files"
    for run in runs:
        for j in run["jobs"]:
            n = j["query"]
            want = [p for t in sorted(TABLES[n]) for p in data.tables[t]]
            assert sorted(j["files"]) == sorted(want)
            assert set(j["tables"]) == TABLES[n] == duckdb.get_table_names(sql.tpch_query(n))
            assert j["input_bytes"] == sum(data.sizes[p] for p in want)
    # Tables named in a CTE or a subquery, and files named in the query itself.
    compiler = sql.Compiler(cluster, data)
    try:
        region = data.tables["region"][0]
        files = compiler.inputs(
            "WITH n AS (SELECT * FROM nation) SELECT count(*) FROM n, "
            f"read_parquet('thaw://{region}') r WHERE n_regionkey = r_regionkey "
            "AND n_nationkey IN (SELECT s_nationkey FROM supplier)"
        )
        assert sorted(files) == sorted(data.tables["nation"] + [region] + data.tables["supplier"])
    finally:
        compiler.close()


def test_hook_migrates_every_query_while_queued(
    bench: tuple[EmulatedCluster, sql.TpchData, list[Any]],
) -> None:
    cluster, _, runs = bench
    for run in runs:
        for j in run["jobs"]:
            # migrate was called at submission, and the master knew the job while it waited.
            assert j["migration_at_submit"]["job_id"] == j["job"]
            assert j["migration_at_submit"]["blocks"] == len(j["blocks"]) > 0
            assert j["migration_at_start"] is not None and j["migration_at_start"]["job_id"] == j["job"]
    cold, dyrs = by_config(runs)["cold"], by_config(runs)["dyrs"]
    assert cold["migrations"] == []
    assert all(j["in_memory_at_start"] == 0 for j in cold["jobs"])
    done = [e for e in dyrs["migrations"] if e["outcome"] == "done"]
    inputs = {b for j in dyrs["jobs"] for b in j["blocks"]}
    assert done and {e["block_id"] for e in done} <= inputs
    # A second of lead-time moves a few MiB over 400 MiB/s disks.
    assert all(j["in_memory_at_start"] == 1.0 for j in dyrs["jobs"]), [
        j["migration_at_start"] for j in dyrs["jobs"]
    ]
    # Every query's blocks were evicted at its end: no query's job still runs.
    names = {j["job_id"] for j in cluster.client().jobs()["jobs"] if j["state"] == "running"}
    assert not names & {"q03", "q06", "q14"}


def test_reads_carry_the_query_job(bench: tuple[EmulatedCluster, sql.TpchData, list[Any]]) -> None:
    cluster, data, runs = bench
    for run in runs:
        for j in run["jobs"]:
            assert j["job_stats"]["job_id"] == j["job"] and j["job_stats"]["reads"] > 0
            assert sum(j["read_sources"].values()) > 0
    dyrs = by_config(runs)["dyrs"]
    from_memory = sum(
        j["read_sources"][k] for j in dyrs["jobs"] for k in ("short_circuit", "zero_copy", "remote_mem")
    )
    assert from_memory > 0
    # DuckDB scans with its own threads (outside any Python context): every
    # read of the query, from any of them, still carries its job id.
    client = cluster.client()
    anonymous = client.job_stats("")["reads"]
    result = sql.run_query(cluster, data, sql.tpch_query(6), "attributed", threads=2)
    stats = client.job_stats("attributed")
    assert stats["reads"] >= result.opens > 0
    assert client.job_stats("")["reads"] == anonymous
