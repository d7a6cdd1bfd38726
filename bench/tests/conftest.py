"""The harness's tests start in the package's tests' order (longest first)."""

from __future__ import annotations

from tests.ordering import pytest_collection_modifyitems  # noqa: F401 (a pytest hook)
