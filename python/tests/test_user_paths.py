"""The user's paths at memory speed: ``put``/``get`` (short-circuit writes and
in-kernel copies on this host, streams otherwise) are byte exact for files of
several blocks with unaligned sizes; ``readinto`` fills a buffer at an offset
across block boundaries; a write stopped early leaves nothing behind."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import numpy as np
import pytest

import thaw

from .conftest import BLOCK


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.mark.parametrize("short_circuit", [True, False])
@pytest.mark.parametrize("write_type", ["must-cache", "cache-through"])
def test_put_and_get_are_byte_exact(
    client: thaw.Client, root: str, tmp_path: Path, short_circuit: bool, write_type: str
) -> None:
    c = thaw.Client(client.master, short_circuit=short_circuit)
    for size in (3 * BLOCK + 4321, 2 * BLOCK, 999):
        data = os.urandom(size)
        src = tmp_path / f"in-{size}"
        src.write_bytes(data)
        path = f"{root}/{write_type}-{short_circuit}-{size}"
        c.put(src, path, write_type=write_type, progress=False)
        blocks = c.stat(path, blocks=True)["blocks"]
        assert len(blocks) == -(-size // BLOCK)
        assert all(b["replicas"][0]["tier"] == "MEM" for b in blocks), blocks
        out = tmp_path / f"out-{size}"
        assert c.get(path, out, progress=False) == size
        assert sha(out.read_bytes()) == sha(data)
        with c.open(path) as f:
            assert sha(f.read()) == sha(data)


def test_readinto_at_an_offset_across_block_boundaries(client: thaw.Client, root: str) -> None:
    data = os.urandom(3 * BLOCK + 1234)
    client.write_bytes(f"{root}/f", data, write_type="must-cache")
    for short_circuit in (True, False):
        c = thaw.Client(client.master, short_circuit=short_circuit)
        with c.open(f"{root}/f") as f:
            # 2 MiB + 100 bytes from 50 bytes before the first boundary, into a
            # buffer at offset 7: crosses two block boundaries.
            buf = bytearray(7 + 2 * BLOCK + 100 + 5)
            f.seek(BLOCK - 50)
            n = f.readinto(memoryview(buf)[7 : 7 + 2 * BLOCK + 100])
            assert n == 2 * BLOCK + 100
            assert bytes(buf[7 : 7 + n]) == data[BLOCK - 50 : 3 * BLOCK + 50]
            assert buf[:7] == bytearray(7) and buf[7 + n :] == bytearray(5)
            assert f.tell() == 3 * BLOCK + 50
            # Sequential 4 MiB-sized reads into a numpy view, to the end.
            arr = np.zeros(BLOCK + 17, dtype=np.uint8)
            f.seek(0)
            got = bytearray()
            while (k := f.readinto(arr[17:])) > 0:
                got += arr[17 : 17 + k].tobytes()
            assert sha(bytes(got)) == sha(data)
            if short_circuit:
                assert f.stats()["short_circuit"] > 0
            else:
                assert f.stats()["short_circuit"] == 0


def _tier_files(client: thaw.Client, sub: str) -> set[str]:
    """Files under each worker tier's ``sub`` directory (``blocks`` or ``tmp``)."""
    out: set[str] = set()
    for w in client.status()["workers"]:
        for t in w["tiers"]:
            d = Path(t["dir"]) / sub
            if d.is_dir():
                out |= {str(d / name) for name in os.listdir(d)}
    return out


def test_a_write_stopped_early_leaves_nothing(client: thaw.Client, root: str) -> None:
    before = _tier_files(client, "blocks")
    path = f"{root}/stopped"
    with pytest.raises(RuntimeError), client.open(path, "wb", write_type="must-cache") as f:
        f.write(os.urandom(2 * BLOCK + BLOCK // 2))
        assert _tier_files(client, "tmp"), "the third block is being written in place"
        raise RuntimeError("the producer failed")
    assert not client.exists(path)
    # The open block's temp file and the two committed blocks are gone.
    deadline = time.monotonic() + 10
    left = lambda: _tier_files(client, "tmp") | (_tier_files(client, "blocks") - before)  # noqa: E731
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _tier_files(client, "tmp")
    assert not _tier_files(client, "blocks") - before
