"""The results document (``results.json``): the header every experiment starts
it with (:func:`new_document`: what ran, when, with which command and
parameters), and how the report (:mod:`thaw_bench.report`) and the figures
(:mod:`thaw_bench.figures`) both read it: runs grouped by scenario and
configuration, map tasks, the block size."""

from __future__ import annotations

import datetime
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

Run = dict[str, Any]
Results = dict[str, Any]

MiB = 1 << 20

#: Row order of the tables: baseline, upper bound, then the schemes.
CONFIG_ORDER = ("cold", "ram", "instant", "ignem", "ignem-fifo", "dyrs", "naive", "dyrs-sjf")

#: Migration outcomes that left the block in memory. The workers report
#: "done" (also when the block was there already); "read-first", "evicted",
#: "failed: ..." and "given up: ..." did not migrate it.
MIGRATED = frozenset({"done", "ok"})


def command_line(argv: list[str] | None = None) -> str:
    """The command that ran, as results record it: ``python -m thaw_bench`` and
    ``argv`` (default: this process's arguments)."""
    return "python -m thaw_bench " + shlex.join(sys.argv[1:] if argv is None else argv)


def new_document(experiment: str, title: str, params: dict[str, Any], command: str | None = None) -> Results:
    """A results document's header: the experiment, its title, the date and time
    it started, the command (default: :func:`command_line`'s), its parameters."""
    return {
        "experiment": experiment,
        "title": title,
        "date": datetime.date.today().isoformat(),
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": command or command_line(),
        "params": params,
    }


def natural(s: str) -> list[Any]:
    """node2 before node10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s)]


def _config_rank(name: str, seen: list[str]) -> tuple[int, int]:
    if name in CONFIG_ORDER:
        return (0, CONFIG_ORDER.index(name))
    return (1, seen.index(name))


def block_size(results: Results) -> int | None:
    """The block size of the run: from the parameters, else the largest map
    split (a full block)."""
    bs = (results.get("params") or {}).get("block_size")
    if isinstance(bs, int | float) and bs > 0:
        return int(bs)
    expected = [
        int(t.get("expected") or 0)
        for run in results.get("runs", [])
        for t in run.get("tasks") or []
        if t.get("kind") == "map"
    ]
    return max(expected) if expected and max(expected) > 0 else None


def map_tasks(run: Run) -> list[dict[str, Any]]:
    """The run's map tasks."""
    return [t for t in run.get("tasks") or [] if t.get("kind") == "map"]


def group_runs(results: Results) -> dict[str, dict[str, list[Run]]]:
    """Runs by scenario (first-seen order) then config (:data:`CONFIG_ORDER`
    first). Several runs of one pair (one per variant) are pooled."""
    groups: dict[str, dict[str, list[Run]]] = {}
    seen: list[str] = []
    for run in results.get("runs", []):
        cfg = run.get("config", "?")
        if cfg not in seen:
            seen.append(cfg)
        groups.setdefault(run.get("scenario", "?"), {}).setdefault(cfg, []).append(run)
    return {
        s: {c: by_cfg[c] for c in sorted(by_cfg, key=lambda c: _config_rank(c, seen))}
        for s, by_cfg in groups.items()
    }


def first_label(runs: list[Run], key: str, default: str) -> str:
    """The first of the runs' ``key`` (a label), else ``default``."""
    return next((r[key] for r in runs if r.get(key)), default)


def checkout_commit() -> str:
    """The harness checkout's commit (short), or "" outside one or without git."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True
        )
    except OSError:
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""
