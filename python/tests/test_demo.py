"""``python -m thaw.demo`` on a small data set: its accounting, not its timings.
Both runs give the same query result; the baseline's query finds its inputs
cold and reads them all from the under-store; the migrated one finds them in
memory and reads nothing from the under-store."""

from __future__ import annotations

import pytest

from thaw import demo


@pytest.mark.parametrize("under_store", ["directory", "s3"])
def test_the_demo_moves_the_queued_jobs_inputs_into_memory(
    capsys: pytest.CaptureFixture[str], under_store: str
) -> None:
    # 8 files of ~2 MiB, one block each, at 64 MiB/s per worker: migrated within
    # a second or so of submission (the first heartbeats bind it), well inside
    # the three seconds the job waits in the queue. With "s3" the under-store
    # is a bucket on a local SeaweedFS.
    extra = ["--s3"] if under_store == "s3" else []
    args = ["--size", "16MiB", "--block-size", "4MiB", "--ufs-speed", "64MiB/s", "--ahead", "3"]
    r = demo.main(args + extra)
    out = capsys.readouterr().out
    assert r["ufs"].startswith("s3://thaw-demo/") == (under_store == "s3")
    base, mig = r["runs"]
    assert (base.policy, mig.policy) == ("none", "dyrs")
    assert len(base.rows) == 3 and base.rows == mig.rows == r["local_rows"]
    assert base.blocks == mig.blocks == r["files"] == 8 and base.bytes == mig.bytes == r["bytes"]

    # Baseline: nothing in memory when the query started, every block read
    # from the under-store while it ran, and no migration.
    assert base.blocks_in_memory == 0 and base.bytes_in_memory == 0
    assert base.ufs_during_query >= base.bytes
    assert base.migration is None

    # Migrated: the whole input in memory when the query started, nothing read
    # from the under-store while it ran; the migration started after submission.
    assert mig.blocks_in_memory == mig.blocks and mig.bytes_in_memory == mig.bytes
    assert mig.ufs_during_query == 0
    assert mig.migration is not None and 0 <= mig.migration[0] <= mig.migration[1]

    # Both queries' reads carried the job's id, on the workers.
    for run in (base, mig):
        assert run.stats["job_id"] == "report" and run.stats["reads"] > 0 and run.stats["workers"]
        assert run.queue_wait > 0 and run.query > 0 and run.end_to_end >= run.queue_wait + run.query

    assert "speed is emulated" in out and 'policy "dyrs"' in out and "faster" in out
    assert f"{mig.blocks} of {mig.blocks} blocks (100%)" in out
    assert "too short" not in out


def test_every_option_of_the_demo_has_help() -> None:
    ap = demo.parser()
    missing = [a.option_strings for a in ap._actions if not a.help]
    assert not missing, f"options without help: {missing}"
    text = ap.format_help()
    for option in ("--workers", "--ufs-speed", "--block-size"):
        assert option in text
    assert "workers of each run" in text and "bandwidth per worker" in text and "block size of" in text
