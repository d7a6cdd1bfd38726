"""The Python client against a live cluster: byte-exact round trips, zero-copy
reads of local blocks, cold reads from the under-store, errors, the GIL."""

from __future__ import annotations

import hashlib
import io
import os
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import thaw
from thaw import errors

from .conftest import BLOCK

SIZES = [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 17]
WRITE_TYPES = ["must-cache", "async-through", "cache-through", "through", "replicated:2"]


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.mark.parametrize("write_type", WRITE_TYPES)
def test_round_trip_every_size_and_write_type(client: thaw.Client, root: str, write_type: str) -> None:
    remote = thaw.Client(client.master, short_circuit=False)
    for size in SIZES:
        data = os.urandom(size)
        path = f"{root}/{write_type}-{size}"
        info = client.write_bytes(path, data, write_type=write_type)
        assert info["length"] == size
        assert info["write_type"] == write_type.split(":")[0].replace("replicated", "replicated-disk")
        for c in (client, remote):
            with c.open(path) as f:
                assert sha(f.read()) == sha(data), (c, size)
            assert sha(c.cat(path)) == sha(data)


def test_seek_read_readinto_readline(client: thaw.Client, root: str) -> None:
    lines = [f"line {i} {'x' * (i % 97)}\n".encode() for i in range(40_000)]
    data = b"".join(lines)
    assert len(data) > 2 * BLOCK
    client.write_bytes(f"{root}/lines.txt", data)
    with client.open(f"{root}/lines.txt") as f:
        assert isinstance(f, thaw.ThawFile)
        assert f.seekable() and f.readable() and f.size == len(data)
        assert list(f) == lines  # readline across block boundaries
        assert f.read() == b""
        f.seek(BLOCK - 10)
        assert f.read(20) == data[BLOCK - 10 : BLOCK + 10]
        assert f.tell() == BLOCK + 10
        f.seek(-5, io.SEEK_END)
        assert f.read() == data[-5:]
        f.seek(7)
        buf = bytearray(BLOCK + 3)
        assert f.readinto(buf) == BLOCK + 3
        assert bytes(buf) == data[7 : BLOCK + 10]
        arr = np.zeros(1000, dtype=np.uint8)
        f.seek(len(data) - 400)
        assert f.readinto(arr) == 400
        assert arr[:400].tobytes() == data[-400:]
        with pytest.raises(OSError):
            f.seek(-1)
    with pytest.raises(ValueError):
        f.read(1)
    # Text mode and line iteration through fsspec.
    fs = thaw.ThawFileSystem(client.master)
    with fs.open(f"{root}/lines.txt", "rt") as t:
        assert t.readline() == lines[0].decode()


def test_read_buffer_maps_local_blocks_without_copying(client: thaw.Client, root: str) -> None:
    data = os.urandom(2 * BLOCK + 100)
    client.write_bytes(f"{root}/z", data, write_type="must-cache")
    with client.open(f"{root}/z") as f:
        f.seek(BLOCK + 10)
        a = f.read_buffer(1000)
        f.seek(BLOCK + 10)
        b = f.read_buffer(1000)
        assert isinstance(a, thaw._native.BlockBuffer)
        assert bytes(memoryview(a)) == data[BLOCK + 10 : BLOCK + 1010]
        # Both buffers point into the same mapping of the block file: no copy.
        pa_a, pa_b = pa.py_buffer(a), pa.py_buffer(b)
        assert pa_a.address == pa_b.address
        assert np.frombuffer(a, dtype=np.uint8).ctypes.data == pa_a.address
        with pytest.raises(TypeError):
            memoryview(a)[0] = 1  # read-only
        # A range across block boundaries: the block files mapped side by side.
        f.seek(BLOCK - 10)
        c = f.read_buffer(BLOCK + 20)
        assert isinstance(c, thaw._native.BlockBuffer)
        assert bytes(memoryview(c)) == data[BLOCK - 10 : 2 * BLOCK + 10]
        f.seek(BLOCK - 5)
        assert pa.py_buffer(f.read_buffer(10)).address == pa.py_buffer(c).address + 5  # same mapping
        assert f.stats()["zero_copy"] == 2000 + BLOCK + 20 + 10
    # Blocks whose length is not a multiple of the page size cannot sit side by
    # side: such a range comes back as a copy.
    with client.open(f"{root}/odd", "wb", block_size=1000) as w:
        w.write(data[:5000])
    with client.open(f"{root}/odd") as f:
        f.seek(990)
        assert isinstance(f.read_buffer(100), bytes)
        assert isinstance(f.read_buffer(10), thaw._native.BlockBuffer)
        f.seek(990)
        assert bytes(memoryview(f.read_buffer(20))) == data[990:1010]
    # The buffer outlives the file and its mapping cache.
    assert bytes(memoryview(a)) == data[BLOCK + 10 : BLOCK + 1010]
    # Without short-circuit nothing is local: bytes, streamed.
    remote = thaw.Client(client.master, short_circuit=False)
    with remote.open(f"{root}/z") as f:
        got = f.read_buffer(100)
        assert isinstance(got, bytes) and got == data[:100]
        assert f.stats()["remote_mem"] > 0


def test_cold_file_is_read_from_the_under_store_and_left_in_memory(
    client: thaw.Client, root: str, ufs_dir: Path
) -> None:
    data = os.urandom(3 * BLOCK + 5)
    (ufs_dir / "cold.bin").write_bytes(data)
    info = client.stat(f"{root}/cold.bin")
    assert info["persisted"] and info["in_memory_bytes"] == 0
    with client.open(f"{root}/cold.bin") as f:
        first = f.read_buffer(BLOCK)  # a worker on this host fills block 0 into MEM
        assert isinstance(first, thaw._native.BlockBuffer)
        rest = f.read()
        assert bytes(memoryview(first)) + rest == data
        assert f.stats()["under_store"] > 0
    st = client.stat(f"{root}/cold.bin", blocks=True)
    assert st["in_memory_bytes"] == len(data)
    # Cold blocks were filled into both workers of this host, not all into one.
    assert len({r["address"] for b in st["blocks"] for r in b["replicas"]}) == 2
    with client.open(f"{root}/cold.bin") as f:
        assert f.read() == data
        assert f.stats()["short_circuit"] == len(data)


def test_errors_are_python_exceptions_with_the_server_message(client: thaw.Client, root: str) -> None:
    with pytest.raises(FileNotFoundError) as e:
        client.open(f"{root}/missing")
    assert isinstance(e.value, thaw.ThawError) and isinstance(e.value, errors.NotFound)
    assert "missing" in str(e.value)
    client.mkdir(f"{root}/d")
    with pytest.raises(IsADirectoryError):
        client.open(f"{root}/d")
    client.write_bytes(f"{root}/d/f", b"x")
    with pytest.raises(FileExistsError):
        client.open(f"{root}/d/f", "xb")
    with pytest.raises(FileExistsError):
        client.mkdir(f"{root}/d")
    with pytest.raises(NotADirectoryError):
        client.ls(f"{root}/d/f/g")
    with pytest.raises(OSError) as e2:
        client.rm(f"{root}/d")
    assert isinstance(e2.value, errors.DirectoryNotEmpty)
    # The hint names the Python argument, not the CLI's flag.
    assert "recursive=True" in str(e2.value) and "thaw fs" not in str(e2.value), e2.value
    with pytest.raises(FileNotFoundError, match=r"does not exist \(pass parents=True"):
        client.mkdir(f"{root}/no/such/parent")
    for bad in (f"{root}/../etc/passwd", "relative/path", f"{root}/a\0b"):
        with pytest.raises(ValueError) as e3:
            client.stat(bad)
        assert isinstance(e3.value, errors.InvalidArgument)
    with pytest.raises(ValueError, match="write type"):
        client.open(f"{root}/w", "wb", write_type="fast")
    with pytest.raises(ValueError, match="mode"):
        client.open(f"{root}/d/f", "ab")
    dead = thaw.Client("127.0.0.1:1")
    with pytest.raises(ConnectionError) as e4:
        dead.stat("/")
    assert isinstance(e4.value, errors.Unavailable) and "127.0.0.1:1" in str(e4.value)
    with pytest.raises(ValueError):
        thaw.Client(client.master, read_cache="tape")


def test_a_failed_write_leaves_nothing(client: thaw.Client, root: str) -> None:
    with pytest.raises(RuntimeError), client.open(f"{root}/half", "wb") as f:
        f.write(os.urandom(BLOCK + 5))
        raise RuntimeError("the job failed mid-write")
    assert not client.exists(f"{root}/half")
    w = client.open(f"{root}/dropped", "wb")
    w.write(b"abc")
    del w
    assert not client.exists(f"{root}/dropped")
    with client.open(f"{root}/done", "wb") as f:
        f.write(memoryview(b"hello "))
        f.write(bytearray(b"world"))
    assert client.cat(f"{root}/done") == b"hello world"


def test_put_and_get_trees_with_progress(client: thaw.Client, root: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    files = {"a.bin": os.urandom(BLOCK * 2 + 3), "sub/b.bin": os.urandom(10), "sub/empty": b""}
    for name, data in files.items():
        (src / name).write_bytes(data)
    infos = client.put(src, f"{root}/tree", progress=False)
    assert sorted(i["path"] for i in infos) == sorted(f"{root}/tree/{n}" for n in files)
    dst = tmp_path / "dst"
    assert client.get(f"{root}/tree", dst, progress=False) == sum(map(len, files.values()))
    for name, data in files.items():
        assert (dst / name).read_bytes() == data
    # A bar that is asked for is driven by the native copy loop.
    seen: list[int] = []

    class Bar:
        def __init__(self, total: int, desc: str, enabled: bool | None, files: int = 1) -> None:
            self.update_fn = seen.append

        def __enter__(self) -> Bar:
            return self

        def __exit__(self, *a: object) -> None:
            pass

    import thaw.client as tc

    real = tc.Progress
    tc.Progress = Bar  # type: ignore[assignment,misc]
    try:
        client.get(f"{root}/tree/a.bin", tmp_path / "one.bin", progress=True)
    finally:
        tc.Progress = real  # type: ignore[misc]
    assert sum(seen) == len(files["a.bin"])
    # A failed get leaves no partial local file.
    with pytest.raises(FileNotFoundError):
        client.get(f"{root}/tree/nope", tmp_path / "nope.bin")
    assert not list(tmp_path.glob("*nope*"))


def test_put_and_get_go_into_existing_directories_as_cp_does(
    client: thaw.Client, root: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "b.bin").write_bytes(b"b")
    (tmp_path / "one.txt").write_bytes(b"one")
    client.mkdir(f"{root}/into", parents=True)
    # A file and a tree into an existing directory keep their names, as the CLI's do.
    client.put(tmp_path / "one.txt", f"{root}/into", progress=False)
    client.put(src, f"{root}/into", progress=False)
    client.put(tmp_path / "one.txt", f"{root}/fresh/", progress=False)
    assert client.cat(f"{root}/into/one.txt") == b"one"
    assert client.cat(f"{root}/into/src/sub/b.bin") == b"b"
    assert client.cat(f"{root}/fresh/one.txt") == b"one"
    out = tmp_path / "out"
    out.mkdir()
    client.get(f"{root}/into/one.txt", out, progress=False)
    client.get(f"{root}/into/src", out, progress=False)
    assert (out / "one.txt").read_bytes() == b"one"
    assert (out / "src" / "sub" / "b.bin").read_bytes() == b"b"


def test_reads_release_the_gil(client: thaw.Client, root: str) -> None:
    size = 64 << 20
    client.write_bytes(f"{root}/big", os.urandom(size), write_type="must-cache")
    remote = thaw.Client(client.master, short_circuit=False)
    ticks = 0
    stop = threading.Event()

    def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            time.sleep(0.0005)
            ticks += 1

    t = threading.Thread(target=ticker)
    t.start()
    try:
        with remote.open(f"{root}/big") as f:
            before = ticks
            start = time.monotonic()
            data = f.read()  # one native call
            elapsed = time.monotonic() - start
            during = ticks - before
    finally:
        stop.set()
        t.join()
    assert len(data) == size
    # A ticker waking every 0.5 ms kept running while the read was in Rust; with
    # the GIL held it could not have woken at all.
    assert during >= min(5, int(elapsed / 0.0005) // 4), (during, elapsed)


def test_status_is_plain_data(client: thaw.Client, cluster: thaw.LocalCluster) -> None:
    s = client.status()
    assert len(s["workers"]) == 2 and all(w["alive"] for w in s["workers"])
    mem = next(t for t in s["workers"][0]["tiers"] if t["tier"] == "MEM")
    assert mem["capacity"] == 512 << 20
    assert s["ufs"]
    assert cluster.status()["default_block_size"] == BLOCK


def test_one_client_serves_many_threads(client: thaw.Client, root: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    files = {f"{root}/p{i}": os.urandom(BLOCK + i * 4099) for i in range(8)}
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda kv: client.write_bytes(*kv), files.items()))
        got = dict(zip(files, pool.map(client.cat, files), strict=True))
    assert got == files
    # One file object shared by threads: each positional read is whole.
    path, data = next(iter(files.items()))
    with client.open(path) as f:
        r = f._r
        with ThreadPoolExecutor(4) as pool:
            parts = list(pool.map(lambda o: r.read_at(o, 4096), range(0, len(data), 4096)))
    assert b"".join(parts) == data


def test_progress_bars_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from thaw._progress import Progress

    monkeypatch.setattr("sys.stderr.isatty", lambda: False)
    assert not Progress(10 << 30, "x", None, 1000).shown
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert not Progress(1 << 20, "small", None, 1).shown
    with Progress(1 << 30, "large", None) as big, Progress(1000, "many", None, 100) as many:
        assert big.shown and many.shown
    assert not Progress(1 << 30, "off", False).shown


def test_existence_questions_under_a_file_answer_no(client: thaw.Client, root: str) -> None:
    client.write_bytes(f"{root}/f", b"x")
    fs = thaw.ThawFileSystem(client.master)
    assert not client.exists(f"{root}/f/g")
    assert not fs.exists(f"{root}/f/g") and not fs.isdir(f"{root}/f/g") and not fs.isfile(f"{root}/f/g")
    assert fs.isfile(f"{root}/f") and fs.isdir(root) and fs.size(f"{root}/f") == 1
    dead = thaw.ThawFileSystem("127.0.0.1:1")
    with pytest.raises(ConnectionError):
        dead.isfile("/x")  # an unreachable cluster is an error, not "no such file"


def test_async_through_persists_in_the_background_and_persist_waits_for_it(
    client: thaw.Client, root: str, ufs_dir: Path
) -> None:
    fs = thaw.ThawFileSystem(client=client, write_type="async-through")
    data = os.urandom(3 * BLOCK + 5)
    with fs.open(f"thaw://{root}/part-0", "wb") as f:
        f.write(data)
    info = fs.info(f"{root}/part-0")
    assert info["write_type"] == "async-through"
    assert info["persistence"] in ("not-persisted", "persisting", "persisted")
    done = fs.persist(f"{root}/part-0")
    assert done["persistence"] == "persisted" and done["persisted"]
    assert sha((ufs_dir / "part-0").read_bytes()) == sha(data)
    # Temporary: memory only until asked; the status totals count it.
    with fs.open(f"{root}/scratch", "wb", temporary=True) as f:
        f.write(b"intermediate")
    time.sleep(1.5)  # three heartbeats: time enough for any checkpoint to start
    scratch = client.stat(f"{root}/scratch")
    assert (scratch["persistence"], scratch["temporary"]) == ("not-persisted", True)
    assert not (ufs_dir / "scratch").exists()
    totals = client.status()["persistence"]
    assert totals["not_persisted"] >= 1 and totals["checkpoints_done"] >= 1
    assert client.persist(f"{root}/scratch")["persisted"]
    assert (ufs_dir / "scratch").read_bytes() == b"intermediate"
    with pytest.raises(IsADirectoryError):
        client.persist(root)
    with pytest.raises(FileNotFoundError):
        client.persist(f"{root}/missing")
    with pytest.raises(ValueError, match="temporary applies to async-through"):
        client.write_bytes(f"{root}/bad", b"x", write_type="must-cache", temporary=True)


def test_a_directory_past_one_page_lists_whole_by_every_python_path(
    client: thaw.Client, root: str, ufs_dir: Path
) -> None:
    """2,500 files put straight into the under-store (the first page brings
    them in): ``iter_ls`` yields them page by page, ``ls`` and fsspec's
    ``ls``/``find`` hold them all, in name order; a directory deleted between
    pages raises instead of ending short."""
    wide = ufs_dir / "wide"
    wide.mkdir()
    names = [f"f{i:04}" for i in range(2500)]
    for n in names:
        (wide / n).write_bytes(b"")
    assert [e["name"] for e in client.iter_ls(f"{root}/wide", page=1000)] == names
    assert [e["name"] for e in client.ls(f"{root}/wide")] == names
    fs = thaw.ThawFileSystem(master=client.master)
    assert [p.rsplit("/", 1)[1] for p in fs.ls(f"thaw://{root}/wide", detail=False)] == names
    assert len(fs.find(f"thaw://{root}")) == 2500

    it = client.iter_ls(f"{root}/wide", page=1000)
    first = [next(it) for _ in range(1000)]
    assert first[-1]["name"] == "f0999"
    client.rm(f"{root}/wide", recursive=True)
    with pytest.raises(FileNotFoundError):
        next(it)
