"""Every figure README.md and the docs/*.md pages quote comes from a results file
under results/ (one per benchmark table: its command, commit, date and figures).

The rule, so that a writer knows what counts:

- A figure is a number in prose followed by a unit of measurement: a percentage
  (`95.8%`), a ratio (`0.94x`, or with the multiplication sign), a rate (`5,370 MiB/s`, `639 ops/s`: any
  unit ending in `/s`) or a duration (`1,990 ms`, `0.2 s`, `35 µs`, `3 seconds`,
  `10 minutes`). A range (`0.80-0.89x`) is two figures.
- Sizes (`64 MiB`, `1 GiB`) are not figures: they describe data, not a
  measurement.
- Code is not prose: fenced blocks and `inline code` hold commands, settings and
  sample output (`--lease` defaults to `10m`, `--timeout` (`5 s`)), so a setting is
  written as code and is never taken for a measurement. HTML comments and link
  targets are skipped too.
- BENCHMARKS.md is a record of measurements itself (its tables are checked against
  results/ by test_results_files.py); it is not checked here. docs/reliability.md
  is checked both ways.

A figure is found when its number, as a value (`0.80` and `0.8` are equal;
thousands commas ignored; a percentage also as a fraction, `95.8%` as `0.958`),
appears as a number in some file under results/. ALLOWED lists the few numbers
with a unit in prose that are not measurements, each with its reason. Each figure
is a test of its own, named by its page and line, so a missing one says where it
is quoted."""

from __future__ import annotations

import functools
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RESULTS = ROOT / "results"

NUMBER = r"\d[\d,]*(?:\.\d+)?"
TIMES, EN_DASH = "\u00d7", "\u2013"
UNIT = rf"%|[x{TIMES}](?![\w])|[A-Za-zµ]*/s\b|ms\b|µs\b|us\b|ns\b|s\b|seconds?\b|minutes?\b|hours?\b"
FIGURE = re.compile(rf"(?<![\w.\-])(?P<a>{NUMBER})(?:\s?[-{EN_DASH}]\s?(?P<b>{NUMBER}))?\s?(?P<unit>{UNIT})")

# (page, quoted text) of numbers with a unit in prose that are not measurements,
# with the reason. None today: the pages write settings as code.
ALLOWED: dict[tuple[str, str], str] = {}


def _prose(text: str) -> str:
    """The page without code, comments and link targets; lines kept in place."""

    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    text = re.sub(r"```.*?```", blank, text, flags=re.S)
    text = re.sub(r"<!--.*?-->", blank, text, flags=re.S)
    text = re.sub(r"`[^`]+`", blank, text)  # a code span may cross a line break
    return re.sub(r"\]\([^)\s]*\)", blank, text)


def _value(number: str) -> Decimal:
    return Decimal(number.replace(",", "")).normalize()


def figures(text: str) -> list[tuple[int, str, Decimal, str]]:
    """(line, quoted text, value, unit) of every figure in the page's prose."""
    prose = _prose(text)
    out = []
    for m in FIGURE.finditer(prose):
        line = prose[: m.start()].count("\n") + 1
        for part in ("a", "b"):
            if m.group(part):
                out.append((line, m.group(0), _value(m.group(part)), m.group("unit")))
    return out


@functools.cache
def recorded(root: Path = RESULTS) -> frozenset[Decimal]:
    """Every number in a results file under `root`, as a value."""
    out: set[Decimal] = set()
    for f in root.rglob("*") if root.is_dir() else []:
        if f.is_file() and f.suffix in (".json", ".md"):
            for n in re.findall(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?", f.read_text()):
                try:
                    out.add(Decimal(n.replace(",", "")).normalize())
                except InvalidOperation:
                    continue
    return frozenset(out)


def found(value: Decimal, unit: str, have: frozenset[Decimal]) -> bool:
    forms = {value, (value / 100).normalize()} if unit == "%" else {value}
    return bool(forms & have)


QUOTED = [
    pytest.param(name, line, quoted, value, unit, id=f"{name}:{line}:{value:f}{unit}")
    for p in PAGES
    for name in [str(p.relative_to(ROOT))]
    for line, quoted, value, unit in figures(p.read_text())
    if (name, quoted) not in ALLOWED
]


def test_the_rule_finds_figures_and_skips_settings() -> None:
    page = (
        "CAVA keeps 95.8% of it, LRU 83.1%; reads run at 0.80-0.89x of tmpfs and 5,370 MiB/s,\n"
        "a failover takes 1,990 ms. Blocks are 64 MiB; `--timeout` (`5 s`) is a setting.\n"
        "<!-- 12.5% in a comment --> [a link](x-2s.md)\n```sh\nsleep 0.2 s\n```\n"
    )
    got = [(line, value, unit) for line, _, value, unit in figures(page)]
    want = [(1, "95.8", "%"), (1, "83.1", "%"), (1, "0.8", "x"), (1, "0.89", "x"), (1, "5370", "MiB/s")]
    assert got == [(line, _value(v), unit) for line, v, unit in [*want, (2, "1990", "ms")]]


def test_a_figure_matches_its_value_in_any_form(tmp_path: Path) -> None:
    (tmp_path / "cava.json").write_text(
        '{"command": "python -m thaw.bench cava", "commit": "abc1234", "date": "2026-11-26",'
        ' "figures": {"hot_cached_mean": {"cava": 0.958, "lru": 83.1}, "cat_vs_tmpfs": 0.8,'
        ' "failover_ms": 1990}}'
    )
    (tmp_path / "notes.txt").write_text("0.44")  # not a results file
    have = recorded(tmp_path)
    for line, _, value, unit in figures("95.8% and 83.1%, 0.80x, 1,990 ms"):
        assert found(value, unit, have), (line, value)
    assert not found(_value("0.44"), "x", have) and not found(_value("95.9"), "%", have)


@pytest.mark.parametrize("page,line,quoted,value,unit", QUOTED)
def test_the_figure_comes_from_a_results_file(
    page: str, line: int, quoted: str, value: Decimal, unit: str
) -> None:
    assert found(value, unit, recorded()), (
        f"{page}:{line} quotes {quoted!r}, which no file under results/ records: "
        "cite the results file's figure exactly, or move the number into code if it is a setting"
    )
