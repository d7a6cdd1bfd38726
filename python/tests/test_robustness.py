"""What goes wrong in real programs: threads touching one writer, forks, wrapped
writers failing mid-way, buffers of any dtype, clusters left by killed owners."""

from __future__ import annotations

import faulthandler
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import fsspec
import numpy as np
import pytest

import thaw

from .conftest import BLOCK


def test_a_writer_polled_from_another_thread_does_not_deadlock(client: thaw.Client, root: str) -> None:
    w = client.open(f"{root}/polled", "wb")
    chunk = b"x" * (1 << 20)
    stop = threading.Event()
    polls = 0

    def poll() -> None:
        nonlocal polls
        while not stop.is_set():
            w.tell()
            repr(w)
            polls += 1

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    faulthandler.dump_traceback_later(60, exit=True)  # a deadlock fails loudly, not by hanging CI
    try:
        for _ in range(40):
            w.write(chunk)
        w.close()
    finally:
        faulthandler.cancel_dump_traceback_later()
        stop.set()
        t.join()
    assert polls > 0
    assert client.stat(f"{root}/polled")["length"] == 40 * len(chunk)


def test_inherited_objects_refuse_io_in_a_forked_child_and_the_parent_is_unharmed(
    client: thaw.Client, root: str
) -> None:
    data = os.urandom(2 * BLOCK)
    client.write_bytes(f"{root}/f", data)
    remote = thaw.Client(client.master, short_circuit=False)
    f = remote.open(f"{root}/f")
    f.read(10)
    w = client.open(f"{root}/w", "wb")
    w.write(b"abc")
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what using inherited objects did, then exit normally
        os.close(r)
        out = []
        try:
            f.seek(BLOCK)
            f.read(100)
            out.append("read worked")
        except thaw.ThawError as e:
            out.append("refused" if "fork" in str(e) else f"other: {e}")
        fresh = thaw.Client(client.master).cat(f"{root}/f")
        out.append("fresh ok" if fresh == data else "fresh bad")
        # Dropping inherited objects (as an exiting interpreter does) must neither
        # abort the parent's write nor take its sockets out of its event loop.
        import gc

        del f, w, remote
        thaw._connect._natives.clear()
        gc.collect()
        os.write(wfd, ",".join(out).encode())
        os.close(wfd)
        os._exit(0)  # not sys.exit: this child is a fork of the test runner
    os.close(wfd)
    with os.fdopen(r) as pipe:
        report = pipe.read()
    os.waitpid(pid, 0)
    assert report == "refused,fresh ok"
    # The parent's reader, writer and client still work.
    f.seek(BLOCK)
    assert f.read(100) == data[BLOCK : BLOCK + 100]
    w.write(b"def")
    w.close()
    assert client.cat(f"{root}/w") == b"abcdef"


def test_a_forked_child_exiting_leaves_the_parents_cluster_alone(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import os, sys, thaw
        c = thaw.LocalCluster(workers=1)
        thaw.Client().write_bytes("/a", b"1")
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # runs atexit in the child
        os.waitpid(pid, 0)
        print(c.running, os.path.exists(c._tmp), thaw.Client().cat("/a"))
        c.close()
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "b'1'"]


@pytest.mark.parametrize("how", ["fsspec.open", "text mode", "raw"])
def test_a_write_failing_inside_any_wrapper_leaves_nothing(
    cluster: thaw.LocalCluster, root: str, how: str
) -> None:
    fs = thaw.ThawFileSystem(cluster.master)
    path = f"{root}/partial-{how.replace(' ', '-')}"
    with pytest.raises(RuntimeError):
        if how == "fsspec.open":
            with fsspec.open(f"thaw://{cluster.master}{path}", "wb") as f:
                f.write(b"x" * 100)
                raise RuntimeError("failed mid-write")
        elif how == "text mode":
            with fs.open(path, "w") as f:
                f.write("x" * 100)
                raise RuntimeError("failed mid-write")
        else:
            with fs.open(path, "wb") as f:
                f.write(b"x" * 100)
                raise RuntimeError("failed mid-write")
    assert not fs.exists(path)


def test_a_file_written_while_handling_an_older_exception_is_kept(client: thaw.Client, root: str) -> None:
    try:
        raise ValueError("the job's own error")
    except ValueError:
        with client.open(f"{root}/error-report", "wb") as f:
            f.write(b"what went wrong")
    assert client.cat(f"{root}/error-report") == b"what went wrong"


def test_buffers_of_any_dtype_go_in_and_out(client: thaw.Client, root: str) -> None:
    arr = np.arange(1_000_000, dtype=np.float64)
    with client.open(f"{root}/arr.pkl", "wb") as f:
        pickle.dump(arr, f, protocol=5)  # hands write() a PickleBuffer of float64
    with client.open(f"{root}/arr.pkl") as f:
        assert np.array_equal(pickle.load(f), arr)
    with client.open(f"{root}/raw", "wb") as f:
        f.write(arr)
    out = np.empty_like(arr)
    with client.open(f"{root}/raw") as f:
        assert f.readinto(out) == arr.nbytes
    assert np.array_equal(out, arr)
    with client.open(f"{root}/raw") as f, pytest.raises(BufferError):
        f.readinto(np.empty((100, 100))[:, ::2])  # not contiguous


def test_killed_owner_leaves_no_scratch_directory(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import time, thaw
        c = thaw.LocalCluster(workers=1)
        print(c.pid, c._tmp, flush=True)
        time.sleep(600)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        _, tmp = owner.stdout.readline().split()
        assert Path(tmp).exists()
        owner.send_signal(signal.SIGTERM)  # skips atexit
        owner.wait()
        deadline = time.monotonic() + 20
        while Path(tmp).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(tmp).exists()
    finally:
        owner.kill()


def test_a_cluster_that_fails_early_leaves_no_scratch_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv("THAW_BIN", str(tmp_path / "no-such-binary"))
    with pytest.raises(thaw.ThawError):
        thaw.LocalCluster()
    monkeypatch.delenv("THAW_BIN")
    with pytest.raises(thaw.ThawError):
        thaw.LocalCluster(mem_capacity="lots")
    assert list(tmp_path.iterdir()) == []


def test_a_python_writer_killed_mid_write_loses_its_file_after_its_lease(tmp_path: Path) -> None:
    with thaw.LocalCluster(ufs=tmp_path / "ufs", block_size=BLOCK, writer_lease_ms=1000) as c:
        client = thaw.Client(c.master)
        script = textwrap.dedent(
            f"""
            import sys, time, thaw
            w = thaw.Client({c.master!r}).open("/half.bin", "wb")
            w.write(b"x" * (3 * {BLOCK}))
            w.flush()
            print("written", flush=True)
            time.sleep(600)
            """
        )
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
            info = client.stat("/half.bin")
            assert not info["complete"]
            assert f"pid {proc.pid}" in info["writer"], info
        finally:
            proc.kill()
            proc.wait()
        deadline = time.monotonic() + 15
        while client.exists("/half.bin"):
            assert time.monotonic() < deadline, "the dead writer's file is still there"
            time.sleep(0.1)
        with client.open("/half.bin", "wb") as w:
            w.write(b"whole")
        assert client.cat("/half.bin") == b"whole"
