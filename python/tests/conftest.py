"""One local cluster (real `thaw local` process, 2 workers, 1 MiB blocks) for the
whole test session, with its under-store directory for files placed "cold"."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import thaw
from tests.ordering import pytest_collection_modifyitems  # noqa: F401 (a pytest hook)

BLOCK = 1 << 20


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[thaw.LocalCluster]:
    ufs = tmp_path_factory.mktemp("ufs")
    with thaw.LocalCluster(ufs=ufs, workers=2, block_size=BLOCK, mem_capacity="512MiB") as c:
        yield c


@pytest.fixture
def client(cluster: thaw.LocalCluster) -> thaw.Client:
    return thaw.Client(cluster.master)


@pytest.fixture
def root(client: thaw.Client) -> Iterator[str]:
    """A fresh directory in Thaw for one test, removed afterwards."""
    path = f"/t-{uuid.uuid4().hex[:10]}"
    client.mkdir(path)
    yield path
    with contextlib.suppress(FileNotFoundError):
        client.rm(path, recursive=True)


@pytest.fixture
def ufs_dir(cluster: thaw.LocalCluster, root: str) -> Path:
    """The under-store directory behind ``root`` (files put here are cold)."""
    return Path(cluster.ufs) / root.lstrip("/")
