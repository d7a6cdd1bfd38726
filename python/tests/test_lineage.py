"""thaw.lineage against a live cluster: a step records its lineage before it
writes, its outputs are tied to it, and a rerun (in this process and as the
recorded command) runs the same function with the same configuration."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import thaw
from thaw import errors

from .procs import alive_workers, lossy_cluster
from .test_migration import wait_for


def grep(inputs: list[str], outputs: list[str], *, pattern: str) -> int:
    """A step body: the lines of each input holding ``pattern``, to the output
    of the same index."""
    fs = thaw.ThawFileSystem(write_type="async-through")
    n = 0
    for src, dst in zip(inputs, outputs, strict=True):
        with fs.open(src, "rb") as f:
            lines = [line for line in f.read().splitlines(keepends=True) if pattern.encode() in line]
        with fs.open(dst, "wb") as f:
            f.write(b"".join(lines))
        n += len(lines)
    return n


def test_a_step_records_its_lineage_then_runs_and_a_rerun_repeats_it(
    client: thaw.Client, root: str, cluster: thaw.LocalCluster
) -> None:
    logs = b"".join(f"{i} {'ERROR' if i % 3 == 0 else 'ok'} line\n".encode() for i in range(300))
    client.write_bytes(f"{root}/logs/a", logs, write_type="async-through")
    client.write_bytes(f"{root}/logs/b", logs[::-1], write_type="async-through")
    outputs = [f"{root}/errors/a", f"{root}/errors/b"]
    step = thaw.lineage.step(inputs=[f"{root}/logs/a", f"{root}/logs/b"], outputs=outputs, kind="narrow")
    run = step(grep)
    assert run(pattern="ERROR") == 100 + len([x for x in logs[::-1].splitlines() if b"ERROR" in x])
    entry = step.lineage
    assert entry is not None
    assert entry["kind"] == "narrow" and entry["command"][1:] == ["-m", "thaw", "rerun"]
    assert [i["path"] for i in entry["inputs"]] == [f"{root}/logs/a", f"{root}/logs/b"]
    first = client.cat(outputs[0])
    assert first.count(b"\n") == 100
    tied = thaw.lineage.get(outputs[0])
    assert tied["lineage_id"] == entry["lineage_id"]
    assert all(o["fid"] > 0 for o in tied["outputs"])
    assert client.stat(outputs[1])["lineage_id"] == entry["lineage_id"]
    assert entry["lineage_id"] in [x["lineage_id"] for x in thaw.lineage.ls()]
    # A rerun, in this process: same function, same configuration, same bytes.
    client.rm(outputs[0])
    thaw.lineage.rerun(entry["lineage_id"])
    assert client.cat(outputs[0]) == first
    # As the recorded command, in a fresh interpreter (a new entry: the rerun
    # above replaced the outputs the first one wrote, which drops an entry).
    again = thaw.lineage.step(inputs=[f"{root}/logs/a"], outputs=[f"{root}/again/a"], kind="narrow")
    again(grep)(pattern="ERROR")
    assert again.lineage is not None
    fid = client.stat(f"{root}/again/a")["file_id"]
    env = dict(os.environ, THAW_MASTER=cluster.master, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    command = [*again.lineage["command"], "--lineage", str(again.lineage["lineage_id"])]
    subprocess.run(command, env=env, check=True, timeout=60)
    assert client.cat(f"{root}/again/a") == first
    assert client.stat(f"{root}/again/a")["file_id"] != fid, "the rerun wrote the output again"


def test_bad_steps_are_refused_before_anything_is_recorded(client: thaw.Client, root: str) -> None:
    client.write_bytes(f"{root}/in", b"x", write_type="must-cache")
    before = len(thaw.lineage.ls())
    with pytest.raises(ValueError, match="module level"):
        thaw.lineage.step(inputs=[f"{root}/in"], outputs=[f"{root}/out"])(lambda i, o: None)
    with pytest.raises(TypeError, match="configuration"):
        thaw.lineage.step(inputs=[f"{root}/in"], outputs=[f"{root}/out"])(grep)(pattern=object())
    with pytest.raises(FileNotFoundError):
        thaw.lineage.step(inputs=[f"{root}/missing"], outputs=[f"{root}/out"])(grep)(pattern="x")
    client.write_bytes(f"{root}/exists", b"e", write_type="must-cache")
    with pytest.raises(errors.AlreadyExists):
        thaw.lineage.submit([f"{root}/in"], [f"{root}/exists"], ["true"])
    with pytest.raises(ValueError, match="a cycle"):
        thaw.lineage.submit([f"{root}/in"], [f"{root}/in"], ["true"])
    with pytest.raises(ValueError, match="not runnable"):
        thaw.lineage.submit([f"{root}/in"], [f"{root}/o"], ["/definitely/not/here"])
    with pytest.raises(ValueError, match="limit"):
        thaw.lineage.submit([f"{root}/in"], [f"{root}/o"], ["true"], config=b"x" * (2 << 20))
    with pytest.raises(ValueError, match="needs command"), thaw.lineage.step([f"{root}/in"], [f"{root}/o"]):
        pass
    assert len(thaw.lineage.ls()) == before
    # The context-manager form records on entering.
    with thaw.lineage.step(inputs=[f"{root}/in"], outputs=[f"{root}/o"], command=["true"], config=b"c") as s:
        client.write_bytes(f"{root}/o", b"written in the block", write_type="async-through")
    assert s.lineage is not None and s.lineage["config"] == b"c"
    assert thaw.lineage.get(f"{root}/o")["lineage_id"] == s.lineage["lineage_id"]


def test_a_python_pipeline_written_at_memory_speed_is_rebuilt_after_its_worker_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A master and two workers as processes; checkpoints at 1 KiB/s never
    # finish, so the outputs live only in worker 0's memory when it is killed.
    # The master reruns `python -m thaw rerun`, which imports this module.
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    addr, procs = lossy_cluster(tmp_path, env=env)
    try:
        client = thaw.Client(addr, host="h0")  # written beside worker 0
        wait_for(lambda: alive_workers(client) == 2, timeout=30)
        logs = b"".join(f"{i} {'ERROR' if i % 5 == 0 else 'ok'} {'x' * 80}\n".encode() for i in range(20_000))
        client.write_bytes("/logs", logs, write_type="cache-through")
        monkeypatch.setenv("THAW_HOST", "h0")
        errors_step = thaw.lineage.step(inputs=["/logs"], outputs=["/errors"], kind="narrow", client=client)
        errors_step(grep)(pattern="ERROR")
        fatal = thaw.lineage.step(inputs=["/errors"], outputs=["/fatal"], kind="narrow", client=client)
        fatal(grep)(pattern="0 ERROR")
        want = (client.cat("/errors"), client.cat("/fatal"))
        assert want[1].count(b"\n") == 2000
        assert not client.stat("/errors")["persisted"] and not client.stat("/fatal")["persisted"]
        procs[1].kill()  # kill -9 of worker 0
        procs[1].wait()
        wait_for(lambda: client.stat("/fatal")["lost"], timeout=30)
        # Proactive: the master reruns both steps, in order; a reader waits.
        remote = thaw.Client(addr, host="elsewhere")
        assert remote.cat("/fatal") == want[1]
        assert remote.cat("/errors") == want[0]
        # Counted as each rerun's process exits (just after its last write).
        wait_for(lambda: remote.status()["persistence"]["recomputations_done"] == 2)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def upper(inputs: list[str], outputs: list[str], *, record: str) -> None:
    """A narrow step body: each input upper-cased to the output of the same
    index, ``.../part-N`` written beside host h{N % 2}; a rerun by the master
    (``THAW_RECOVER_LINEAGE`` set) notes in ``record`` each output it produced."""
    for src, dst in zip(inputs, outputs, strict=True):
        n = int(dst.rsplit("-", 1)[1])
        c = thaw.Client(host=f"h{n % 2}")
        c.write_bytes(dst, c.cat(src).upper(), write_type="async-through")
        if os.environ.get("THAW_RECOVER_LINEAGE"):
            with open(record, "a") as f:
                f.write(f"{n}\n")


def test_a_narrow_step_reruns_on_the_lost_partitions_alone(tmp_path: Path) -> None:
    # Four partitions, 0 and 2 beside worker 0 (killed before any checkpoint):
    # the master's rerun (`python -m thaw rerun`) gets THAW_REBUILD_OUTPUTS=0,2
    # and calls the function with those two partitions only.
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    addr, procs = lossy_cluster(tmp_path, env=env)
    try:
        client = thaw.Client(addr)
        wait_for(lambda: alive_workers(client) == 2, timeout=30)
        ins = [f"/in/part-{n}" for n in range(4)]
        outs = [f"/up/part-{n}" for n in range(4)]
        for n, p in enumerate(ins):
            client.write_bytes(p, f"{n} line {'x' * 60}\n".encode() * 4000, write_type="cache-through")
        record = tmp_path / "record"
        step = thaw.lineage.step(inputs=ins, outputs=outs, kind="narrow", client=client)
        step(upper)(record=str(record))
        assert step.lineage is not None
        want = [client.cat(p) for p in outs]
        assert want[2].startswith(b"2 LINE XXX")
        assert not any(client.stat(p)["persisted"] for p in outs)
        procs[1].kill()  # kill -9 of worker 0
        procs[1].wait()
        wait_for(lambda: client.stat(outs[0])["lost"], timeout=30)
        assert [client.cat(p) for p in outs] == want
        lineage = step.lineage["lineage_id"]
        wait_for(lambda: thaw.lineage.get(lineage, client=client)["reruns"] == 1)
        assert thaw.lineage.get(lineage, client=client)["last_rerun_outputs"] == [0, 2]
        assert record.read_text().split() == ["0", "2"]
        # The same subset, asked for by hand: a bad index is a clear error.
        with pytest.raises(ValueError, match="4 outputs: no output \\[7\\]"):
            thaw.lineage.rerun(lineage, [1, 7], client=client)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_the_module_docstring_example_runs_as_written(tmp_path: Path) -> None:
    """thaw.lineage's own example, run by doctest against a fresh cluster: the
    step records its lineage (keyword arguments as JSON) and writes its output."""
    import doctest

    with thaw.LocalCluster(ufs=tmp_path / "ufs", workers=1) as c:
        result = doctest.testmod(thaw.lineage, optionflags=doctest.ELLIPSIS, verbose=False)
        assert result.attempted >= 5, result
        assert result.failed == 0, result
        entry = thaw.lineage.get("/errors/day1", client=thaw.Client(c.master))
    assert entry["kind"] == "narrow"
    assert [i["path"] for i in entry["inputs"]] == ["/logs/day1"]


def test_a_rerun_in_this_process_rebuilds_its_output_and_leaves_other_threads_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a Dask worker does with a step's rerun (thaw.dask.recompute): runs it
    # in its own interpreter, in a context whose writes rebuild the lost output,
    # while its other threads write as usual.
    import threading

    from thaw._context import recovering
    from thaw.dask.recompute import in_process, run_recomputation

    flags = ["--recompute", "reactive", "--recompute-executor", "external"]
    addr, procs = lossy_cluster(tmp_path, flags)
    try:
        client = thaw.Client(addr, host="h0")
        wait_for(lambda: alive_workers(client) == 2, timeout=30)
        logs = b"".join(f"{i} {'ERROR' if i % 4 == 0 else 'ok'} line\n".encode() for i in range(20_000))
        client.write_bytes("/logs", logs, write_type="cache-through")
        monkeypatch.setenv("THAW_HOST", "h0")
        thaw.lineage.step(inputs=["/logs"], outputs=["/errors"], kind="narrow", client=client)(grep)(
            pattern="ERROR"
        )
        want, lineage_id = client.cat("/errors"), client.stat("/errors")["lineage_id"]
        procs[1].kill()  # kill -9 of the Thaw worker holding /errors
        procs[1].wait()
        wait_for(lambda: client.stat("/errors")["lost"], timeout=30)
        # A write in a recovering context is a rebuild (refused here: no rerun
        # started yet, reactive mode waits for a read); the same write from
        # another thread at once is not.
        seen: dict[str, str] = {}

        def write(name: str, recovery: int) -> None:
            try:
                if recovery:
                    with recovering(recovery):
                        thaw.Client(addr).write_bytes("/errors", b"x", overwrite=False)
                else:
                    thaw.Client(addr).write_bytes("/errors", b"x", overwrite=False)
            except Exception as e:
                seen[name] = str(e)

        threads = [threading.Thread(target=write, args=a) for a in (("rebuild", lineage_id), ("plain", 0))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert "not being rerun by this master" in seen["rebuild"], seen
        assert "not being rerun" not in seen["plain"], seen
        client.recompute("/errors", wait=False)
        tasks: list[dict[str, object]] = []
        wait_for(lambda: tasks.extend(client.native().claim_recomputations("test", 1)) or tasks, timeout=30)
        assert in_process(tasks[0])
        outcome = run_recomputation(tasks[0])
        assert (outcome["error"], outcome["where"]) == ("", "in-process"), outcome
        client.native().recomputation_done(tasks[0]["lineage_id"], tasks[0]["attempt"], "")
        assert client.cat("/errors") == want
        assert not client.stat("/errors")["lost"]
    finally:
        for p in procs:
            p.kill()
            p.wait()
