"""Which job a read carries: the innermost block, per thread, and the process's
single active job for pools that do not copy contexts."""

from __future__ import annotations

import threading

import thaw


def test_innermost_job_wins_and_exits_restore() -> None:
    assert thaw.current_job_id() is None
    with thaw.job("outer"):
        assert thaw.current_job_id() == "outer"
        with thaw.job("inner") as j:
            assert thaw.current_job_id() == "inner" == j.id
        assert thaw.current_job_id() == "outer"
    assert thaw.current_job_id() is None


def test_unique_ids_and_bad_names() -> None:
    a, b = thaw.job("q", unique=True), thaw.job("q", unique=True)
    assert a.id != b.id and a.id.startswith("q-")
    for bad in ("", "has space", "x" * 201):
        try:
            thaw.job(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} accepted")


def test_threads_see_their_own_job_or_the_one_active_job() -> None:
    seen: dict[str, str | None] = {}

    def plain(name: str) -> None:
        seen[name] = thaw.current_job_id()

    def own(name: str) -> None:
        with thaw.job(name):
            barrier.wait()
            seen[name] = thaw.current_job_id()
            if name == "job-a":
                # Two threads' jobs active at once: a context-less thread belongs
                # to neither.
                t = threading.Thread(target=plain, args=("ambiguous",))
                t.start()
                t.join()
            barrier.wait()

    with thaw.job("only"):
        t = threading.Thread(target=plain, args=("pool-thread",))
        t.start()
        t.join()
    assert seen["pool-thread"] == "only"
    barrier = threading.Barrier(2)
    ts = [threading.Thread(target=own, args=(n,)) for n in ("job-a", "job-b")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert seen["job-a"] == "job-a" and seen["job-b"] == "job-b"
    assert seen["ambiguous"] is None


def test_a_client_carries_the_job_of_the_block_unless_given_its_own(client: thaw.Client) -> None:
    pinned = thaw.Client(client.master, job_id="pinned")
    fs = thaw.ThawFileSystem(client.master, job_id="nightly")
    with thaw.job("blockjob"):
        assert client.job_id == "blockjob"
        assert pinned.job_id == "pinned" and fs.client.job_id == "nightly"
    assert client.job_id == ""


def test_nested_jobs_name_context_less_threads_by_the_innermost() -> None:
    seen = []
    with thaw.job("outer"), thaw.job("inner"):
        t = threading.Thread(target=lambda: seen.append(thaw.current_job_id()))
        t.start()
        t.join()
    assert seen == ["inner"]
