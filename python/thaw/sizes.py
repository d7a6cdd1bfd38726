"""Sizes as people write them on command lines: "512MiB", "1GiB", "100KiB", "4096".
One parser for the package's commands and the evaluation harness's."""

from __future__ import annotations

#: Unit suffixes, lower case; binary (KiB) before decimal (KB) so "kib" is not read as "b".
_UNITS = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9, "b": 1}


def parse_size(text: str | int) -> int:
    """Bytes from "512MiB", "1.5GiB", "10MB", "4096" (case and spaces ignored);
    an int is bytes already."""
    if isinstance(text, int):
        return text
    t = text.strip().lower().replace(" ", "")
    for unit, mult in _UNITS.items():
        if t.endswith(unit):
            return int(float(t[: -len(unit)]) * mult)
    return int(t)
