"""fsspec's own test suite for filesystem implementations, against a live cluster."""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Iterator

import fsspec.tests.abstract as abstract
import pytest

import thaw


class ThawFixtures(abstract.AbstractFixtures):
    @pytest.fixture
    def fs(self, cluster: thaw.LocalCluster) -> thaw.ThawFileSystem:
        return thaw.ThawFileSystem(cluster.master)

    @pytest.fixture
    def fs_join(self):  # type: ignore[no-untyped-def]
        return posixpath.join

    @pytest.fixture
    def fs_path(self, fs: thaw.ThawFileSystem) -> Iterator[str]:
        path = f"/fsspec-{uuid.uuid4().hex[:10]}"
        fs.mkdir(path)
        yield path
        if fs.exists(path):
            fs.rm(path, recursive=True)


class TestThawCopy(abstract.AbstractCopyTests, ThawFixtures):
    pass


class TestThawGet(abstract.AbstractGetTests, ThawFixtures):
    pass


class TestThawPut(abstract.AbstractPutTests, ThawFixtures):
    pass


class TestThawOpen(abstract.AbstractOpenTests, ThawFixtures):
    pass


class TestThawPipe(abstract.AbstractPipeTests, ThawFixtures):
    pass
