"""One table over several SWIM replays (DYRS, Table I, "with a slow node", asked of
more than one trace, byte scale and cluster size): per replay and configuration,
the mean job time with the spread of the repeats' means, the share of the
inputs-in-RAM bound's speedup over cold, the share of the input read from memory
beside the share the devices could have moved in each job's lead time (the
second bound, :mod:`thaw_bench.bounds`), and the small and large jobs' means.
Then, per replay and per DYRS variant present (``dyrs``, the paper's FIFO
order; ``dyrs-sjf``, smallest job first, the master's default), the verdict the
issue asks for: DYRS ahead of Ignem on the mean, and beyond the spread (every
DYRS repeat's mean under every Ignem repeat's), and DYRS's small jobs against
Ignem's.

``python -m thaw_bench.scripts.swim_matrix DIR [DIR ...] --title T --section S
--command CMD [--command CMD ...] --commit C --date D --machine M --out FILE``

Each DIR is a ``python -m thaw_bench swim`` output directory (or its
``results.json``); the replay is named from its parameters (trace, nodes, byte
scale). The output is a results file (results/README.md's format); the markdown
table goes to standard output.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..report import summarize

ORDER = ("cold", "ram", "instant", "ignem", "ignem-fifo", "dyrs", "dyrs-sjf", "naive", "dyrs-place")


def load(path: Path) -> dict[str, Any]:
    """A swim output directory's (or a given) results.json, which must hold runs."""
    if path.is_dir():
        found = sorted(path.glob("**/results.json"))
        if len(found) != 1:
            raise SystemExit(f"{path}: expected one results.json below it, found {len(found)}")
        path = found[0]
    doc = json.loads(path.read_text())
    if not doc.get("runs"):
        raise SystemExit(f"{path}: no runs")
    return doc


def replay_name(params: dict[str, Any]) -> str:
    """``FB-2010, 4 nodes, bytes 1/128``: the replay's trace, size and scale."""
    trace = str(params.get("trace") or "FB-2009").split("_")[0]
    scale = float(params.get("byte_scale") or 0)
    scale_s = f"1/{round(1 / scale)}" if scale and abs(1 / scale - round(1 / scale)) < 1e-6 else f"{scale:g}"
    return f"{trace}, {params.get('nodes')} nodes, bytes {scale_s}"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.0f}%"


def rows_of(doc: dict[str, Any]) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """The table's rows for one replay, and its verdicts (one per scenario)."""
    name = replay_name(doc.get("params") or {})
    summary = summarize(doc)
    rows: list[dict[str, str]] = []
    verdicts: list[dict[str, Any]] = []
    for scen in summary["scenarios"].values():
        configs = scen["configs"]
        for cfg in sorted(configs, key=lambda c: ORDER.index(c) if c in ORDER else len(ORDER)):
            st = configs[cfg]
            b = st.get("bounds") or {}
            means = [m for m in st["run_means"] if m is not None]
            rows.append(
                {
                    "replay": name,
                    "scenario": scen["label"],
                    "configuration": st["config_label"],
                    "mean job (s)": _s(st["mean_job_s"]),
                    "repeats' means (s)": f"{min(means):.2f}-{max(means):.2f}" if means else "-",
                    "share of RAM bound": "" if cfg in ("cold", "ram") else _pct(st.get("upper_bound_share")),
                    "read from memory": _pct(b.get("mem_bytes_share")),
                    "reachable in lead time": _pct(b.get("reachable_share")),
                    "small jobs (s)": _s(st["bins"]["small"]["mean_s"]),
                    "large jobs (s)": _s(st["bins"]["large"]["mean_s"]),
                }
            )
        for variant in ("dyrs", "dyrs-sjf"):
            if "ignem" not in configs or variant not in configs:
                continue
            d, i = configs[variant], configs["ignem"]
            dm = [m for m in d["run_means"] if m is not None]
            im = [m for m in i["run_means"] if m is not None]
            verdicts.append(
                {
                    "replay": name,
                    "scenario": scen["label"],
                    "dyrs": d["config_label"],
                    "dyrs_mean_s": round(d["mean_job_s"], 3),
                    "ignem_mean_s": round(i["mean_job_s"], 3),
                    "dyrs_ahead_on_mean": d["mean_job_s"] < i["mean_job_s"],
                    "dyrs_ahead_beyond_spread": bool(dm and im and max(dm) < min(im)),
                    "dyrs_small_s": round(d["bins"]["small"]["mean_s"] or 0.0, 3),
                    "ignem_small_s": round(i["bins"]["small"]["mean_s"] or 0.0, 3),
                    "dyrs_small_no_slower": (d["bins"]["small"]["mean_s"] or 0.0)
                    <= (i["bins"]["small"]["mean_s"] or 0.0),
                }
            )
    return rows, verdicts


def markdown(rows: list[dict[str, str]]) -> str:
    if not rows:
        return ""
    heads = list(rows[0])
    out = ["| " + " | ".join(heads) + " |", "|" + "|".join("---" for _ in heads) + "|"]
    out += ["| " + " | ".join(r[h] for h in heads) + " |" for r in rows]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m thaw_bench.scripts.swim_matrix", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("dirs", type=Path, nargs="+", help="swim output directories or results.json files")
    for name in ("title", "section", "table", "commit", "date", "machine"):
        p.add_argument(f"--{name}", required=name != "table")
    p.add_argument("--command", action="append", required=True, help="the commands run (repeatable)")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    rows: list[dict[str, str]] = []
    verdicts: list[dict[str, Any]] = []
    for d in a.dirs:
        r, v = rows_of(load(d))
        rows += r
        verdicts += v
    out: dict[str, Any] = {"title": a.title, "section": a.section}
    if a.table:
        out["table"] = a.table
    out |= {"command": a.command, "commit": a.commit, "commit_is": "the build measured", "date": a.date}
    out |= {"machine": a.machine, "rows": rows, "derived": {"dyrs_vs_ignem": verdicts}}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(markdown(rows))
    for v in verdicts:
        print(
            f"{v['replay']} ({v['scenario']}): "
            f"{v['dyrs']} {v['dyrs_mean_s']:.2f} s vs Ignem {v['ignem_mean_s']:.2f} s, "
            f"ahead on mean {v['dyrs_ahead_on_mean']}, beyond spread {v['dyrs_ahead_beyond_spread']}; "
            f"small jobs {v['dyrs_small_s']:.2f} vs {v['ignem_small_s']:.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
