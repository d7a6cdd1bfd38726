"""The order tests start in, for both packages' test sessions (bench/tests
imports it too)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``early(seconds)`` (the longest) start first, longest first.
    On two xdist workers a long test started last runs alone at the end while
    the other worker idles; started first, the short ones fill in beside it."""

    def seconds(item: pytest.Item) -> float:
        mark = item.get_closest_marker("early")
        return float(mark.args[0]) if mark and mark.args else 0.0

    items.sort(key=seconds, reverse=True)
