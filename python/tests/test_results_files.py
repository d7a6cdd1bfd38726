"""BENCHMARKS.md, docs/reliability.md and results/ agree: every results file parses
and says how it was made (command, commit, date), its commit is in the history, and
every number of a table in those pages is in the results file the table links to."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
BENCHMARKS = ROOT / "BENCHMARKS.md"
# The pages whose tables are records of measurements, each linking its results files.
RECORDS = [BENCHMARKS, ROOT / "docs" / "reliability.md"]

RESULTS_LINE = re.compile(r"^Results: \[results/([a-z0-9-]+\.json)\]\((?:\.\./)?results/\1\)")
ROW_LINK = re.compile(r"\((?:\.\./)?results/([a-z0-9-]+\.json)\)")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
NOT_A_RESULT = "<!-- not a result"


def _files() -> list[Path]:
    return sorted(RESULTS.glob("*.json"))


def _numbers(text: str) -> set[str]:
    """The numbers a reader sees: link targets and markup left out."""
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return set(NUMBER.findall(text))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _tables(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line index of each pipe table."""
    spans, i = [], 0
    while i < len(lines):
        if lines[i].startswith("|"):
            j = i
            while j + 1 < len(lines) and lines[j + 1].startswith("|"):
                j += 1
            spans.append((i, j))
            i = j + 1
        else:
            i += 1
    return spans


def _next_text(lines: list[str], after: int) -> str:
    for line in lines[after + 1 :]:
        if line.strip():
            return line
    return ""


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_a_results_file_says_how_it_was_made(path: Path) -> None:
    data = json.loads(path.read_text())
    for key in ("title", "section", "command", "commit", "date", "machine"):
        assert data.get(key), f"{path.name}: no {key!r}"
    assert data.get("rows") or data.get("figures"), f"{path.name}: no rows or figures"
    assert re.fullmatch(r"[0-9a-f]{7,40}", data["commit"]), f"{path.name}: commit {data['commit']!r}"
    assert re.match(r"\d{4}-\d{2}-\d{2}", data["date"]), f"{path.name}: date {data['date']!r}"
    headings = {m.group(1) for page in RECORDS for m in re.finditer(r"^#{2,4} (.*)$", page.read_text(), re.M)}
    assert data["section"] in headings, f"{path.name}: section {data['section']!r} is no heading of {RECORDS}"


def _shallow() -> bool:
    out = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return out.returncode != 0 or out.stdout.strip() != "false"


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_a_results_file_names_a_commit_in_the_history(path: Path) -> None:
    if _shallow():
        pytest.skip("shallow or no git checkout: the commits the results name may be outside it")
    data = json.loads(path.read_text())
    commits = [data["commit"], *data.get("builds", {}).values()]
    for c in commits:
        cmd = ["git", "cat-file", "-e", f"{c}^{{commit}}"]
        found = subprocess.run(cmd, cwd=ROOT, capture_output=True, check=False)
        assert found.returncode == 0, f"{path.name}: commit {c} is not in the history"


def _check_tables(page: Path) -> set[str]:
    """Checks every table of `page` against the results file it links; returns the
    names of the results files the page links (after a table, or after prose)."""
    lines = page.read_text().split("\n")
    name_of = page.relative_to(ROOT)
    linked = {m.group(1) for m in map(RESULTS_LINE.match, lines) if m}
    for first, last in _tables(lines):
        after = _next_text(lines, last)
        table = lines[first : last + 1]
        m = RESULTS_LINE.match(after)
        if m:
            name = m.group(1)
            stored = (RESULTS / name).read_text()
            missing = sorted(n for n in _numbers("\n".join(table)) if n not in stored)
            assert not missing, f"{name_of} line {first + 1}: {missing} not in results/{name}"
            continue
        if any(ROW_LINK.search(row) for row in table[2:]):
            # A summary: each row's figures are in the results files that row links.
            for k, row in enumerate(table[2:], start=first + 3):
                names = ROW_LINK.findall(row)
                assert names, f"{name_of} line {k}: a summary row without a results file"
                stored = "".join((RESULTS / n).read_text() for n in names)
                figures = " ".join(_cells(row)[1:-1])
                missing = sorted(n for n in _numbers(figures) if n not in stored)
                assert not missing, f"{name_of} line {k}: {missing} not in {names}"
                linked.update(names)
            continue
        assert after.startswith(NOT_A_RESULT), (
            f"{name_of} line {first + 1}: a table with no results file (or {NOT_A_RESULT} ... -->)"
        )
    return linked


@pytest.mark.parametrize("page", RECORDS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_table_links_its_results_and_the_numbers_agree(page: Path) -> None:
    _check_tables(page)


def test_every_results_file_is_linked_from_a_page_of_records() -> None:
    linked = set().union(*(_check_tables(p) for p in RECORDS))
    unlinked = sorted({p.name for p in _files()} - linked)
    pages = [str(p.relative_to(ROOT)) for p in RECORDS]
    assert not unlinked, f"results files no page of {pages} links: {unlinked}"


def test_the_links_inside_benchmarks_lead_somewhere() -> None:
    text = BENCHMARKS.read_text()
    anchors = {_anchor(m.group(1)) for m in re.finditer(r"^#{1,4} (.*)$", text, re.M)}
    for target in re.findall(r"\]\(#([^)]+)\)", text):
        assert target in anchors, f"BENCHMARKS.md links #{target}, which is no heading"
    for target in re.findall(r"\]\((results/[^)#]+)\)", text):
        assert (ROOT / target).exists(), f"BENCHMARKS.md links {target}, which does not exist"


def test_a_wrong_number_is_caught() -> None:
    """The number check fails when a table and its file disagree."""
    assert "0.84" not in "0.83 | 9094"
    assert _numbers("| **0.83** | 9,094 MiB/s | [x](results/a-1.json) |") == {"0.83", "9,094"}


def test_a_results_line_links_its_file_from_the_root_or_from_docs() -> None:
    assert RESULTS_LINE.match("Results: [results/a-1.json](results/a-1.json) · run: `x`")
    assert RESULTS_LINE.match("Results: [results/a-1.json](../results/a-1.json) · run: `x`")
    assert not RESULTS_LINE.match("Results: [results/a-1.json](../results/b-2.json)")
