"""``thaw.sizes.parse_size``: the one size parser of ``thaw demo`` and the harness."""

from __future__ import annotations

import pytest

from thaw.sizes import parse_size


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("512MiB", 512 << 20),
        ("1GiB", 1 << 30),
        ("1.5GiB", 3 << 29),
        ("100KiB", 100 << 10),
        ("16mib", 16 << 20),
        (" 2 MiB ", 2 << 20),
        ("10MB", 10**7),
        ("3kb", 3000),
        ("64b", 64),
        ("4096", 4096),
        (4096, 4096),
    ],
)
def test_sizes_as_written_on_command_lines(text: str | int, want: int) -> None:
    assert parse_size(text) == want


def test_a_size_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError):
        parse_size("lots")
