"""The SWIM report's second bound and Ignem, Fig. 7's memory footprint, from a
results document's runs.

- **Reachable** (what the devices could have moved in each job's lead time):
  per job, its lead time (from its submission to its first map task's start)
  times the bandwidth a migration stream gets from the disks holding its
  blocks (every distinct DISK replica holder, under the device model, with the
  scenario's interference on them), capped at its input. A configuration's
  reachable share is the sum over its jobs over their input bytes. It lends
  each job every disk holding its blocks for its whole lead time, as though no
  other job's migrations or reads used them: an upper bound of what any
  migration policy could have had in memory by the first read, next to what
  this one had (bytes its map tasks read from memory). A share of memory reads
  well under it is the policy's miss; one close to it is physics.
- **Footprint** (Ignem, section IV-C4, Fig. 7): every worker's migrated-block
  memory (its migration buffer in use), sampled every 0.25 s, over the
  non-zero samples only, as the paper's histograms exclude an idle cluster.

A migration stream's bandwidth on a disk of bandwidth ``B`` and penalty ``p``
with ``k`` interference streams: the device gives ``B / (1 + p k)`` shared by
``k + 1`` streams; a scenario whose interference alternates (period > 0) is on
half the time, so the rate is the mean of the two.
"""

from __future__ import annotations

import statistics
from typing import Any

from thaw.sizes import parse_size

from .configs import SCENARIOS
from .results import MiB, Run, map_tasks

MEM_SOURCES = frozenset({"mem", "mem-remote"})


def stream_rates(params: dict[str, Any], scenario: str) -> dict[str, float]:
    """Bytes/s a migration stream gets from each node's disk (``node0``..) in
    ``scenario``, by the results' cluster parameters."""
    nodes = int(params.get("nodes") or 0)
    disk = parse_size(str(params.get("disk") or "12MiB/s").removesuffix("/s"))
    penalty = float(params.get("penalty") or 0.0)
    per_node = {str(k): v for k, v in (params.get("node_disks") or {}).items()}
    sc = SCENARIOS.get(scenario)
    rates = {}
    for i in range(nodes):
        bw = float(parse_size(str(per_node.get(str(i), disk)).removesuffix("/s")))
        k = sc.streams if sc and i in sc.nodes else 0
        busy = bw / ((1 + penalty * k) * (k + 1))
        on = 1.0 if not sc or sc.period <= 0 else 0.5
        rates[f"node{i}"] = on * busy + (1 - on) * bw
    return rates


def job_leads(run: Run) -> dict[str, float]:
    """Each job's lead time: its submission to its first map task's start (s)."""
    first: dict[str, float] = {}
    for t in map_tasks(run):
        j = str(t.get("job"))
        first[j] = min(first.get(j, float("inf")), float(t["start"]))
    return {
        str(j["job"]): max(0.0, first[str(j["job"])] - float(j["submit"]))
        for j in run.get("jobs", [])
        if str(j["job"]) in first
    }


def reachable(run: Run, params: dict[str, Any]) -> dict[str, Any]:
    """The run's reachable bytes (see the module doc) and what its map tasks
    read from memory, over the jobs that have map tasks and holders."""
    rates = stream_rates(params, str(run.get("scenario", "")))
    leads = job_leads(run)
    total = reach = 0.0
    per_job = {}
    for j in run.get("jobs", []):
        name, holders = str(j["job"]), j.get("holders")
        if name not in leads or holders is None:
            continue
        disks = {h for hs in holders for h in hs}
        size = float(j.get("input_bytes") or 0)
        r = min(size, leads[name] * sum(rates.get(d, 0.0) for d in disks))
        per_job[name] = {"lead_s": round(leads[name], 4), "reachable_bytes": round(r)}
        total += size
        reach += r
    maps = [t for t in map_tasks(run) if str(t.get("job")) in per_job]
    from_mem = sum(int(t.get("bytes") or 0) for t in maps if t.get("source") in MEM_SOURCES)
    return {"input_bytes": total, "reachable_bytes": reach, "mem_bytes": from_mem, "jobs": per_job}


def footprint(runs: list[Run]) -> dict[str, Any] | None:
    """Migrated-block memory per worker over the runs' non-zero samples: mean,
    median, 90th percentile and maximum (bytes), and the share of samples that
    were non-zero. None without samples."""
    samples = [int(s.get("buffer_used") or 0) for r in runs for s in r.get("samples") or []]
    used = sorted(x for x in samples if x > 0)
    if not samples:
        return None
    if not used:
        return {"mean": 0.0, "median": 0.0, "p90": 0.0, "max": 0, "nonzero_share": 0.0}
    return {
        "mean": statistics.fmean(used),
        "median": float(statistics.median(used)),
        "p90": float(used[min(len(used) - 1, int(0.9 * len(used)))]),
        "max": used[-1],
        "nonzero_share": len(used) / len(samples),
    }


def config_bounds(runs: list[Run], params: dict[str, Any]) -> dict[str, Any]:
    """A configuration's reachable share and share of input read from memory
    (bytes, over all its runs), each run's reachable share, and its footprint."""
    each = [reachable(r, params) for r in runs]
    size = sum(e["input_bytes"] for e in each)
    return {
        "reachable_share": sum(e["reachable_bytes"] for e in each) / size if size else None,
        "mem_bytes_share": sum(e["mem_bytes"] for e in each) / size if size else None,
        "run_reachable_shares": [
            e["reachable_bytes"] / e["input_bytes"] if e["input_bytes"] else None for e in each
        ],
        "mean_lead_s": statistics.fmean(x["lead_s"] for e in each for x in e["jobs"].values())
        if any(e["jobs"] for e in each)
        else None,
        "footprint": footprint(runs),
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.0f}%"


def _mib(x: float | None) -> str:
    return "-" if x is None else f"{x / MiB:.1f}"


def bounds_table(configs: dict[str, Any], reference: str = "instant") -> str:
    """The report's table of both bounds and the footprint, per configuration:
    mean lead time, reachable share, share read from memory, footprint (mean /
    median / p90 MiB of non-zero samples) and its ratio to ``reference``'s
    (Ignem, Fig. 7: "2.6x lower")."""
    ref = (configs.get(reference) or {}).get("bounds", {}).get("footprint")
    ref_speedup = (configs.get(reference) or {}).get("speedup")
    headers = [
        "Configuration",
        "Mean lead (s)",
        "Reachable in lead time",
        "Read from memory",
        "Migrated memory per worker, non-zero: mean / median / p90 (MiB)",
        "Non-zero samples",
        f"Footprint vs {reference}",
        f"Share of {reference}'s speedup",
    ]
    rows = []
    for st in configs.values():
        b = st.get("bounds") or {}
        fp = b.get("footprint")
        lead = b.get("mean_lead_s")
        cells = [
            st["config_label"],
            "-" if lead is None else f"{lead:.2f}",
            _pct(b.get("reachable_share")),
            _pct(b.get("mem_bytes_share")),
            " / ".join(_mib(fp[k]) for k in ("mean", "median", "p90")) if fp else "-",
            _pct(fp["nonzero_share"]) if fp else "-",
            f"{ref['mean'] / fp['mean']:.1f}x lower" if fp and ref and fp["mean"] and ref["mean"] else "-",
            _pct(st["speedup"] / ref_speedup) if st.get("speedup") is not None and ref_speedup else "-",
        ]
        rows.append(cells)
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


DEFINITION = (
    "Reachable in lead time: per job, its lead time (submission to its first map task's start) times "
    "the bandwidth one migration stream gets from every disk holding its blocks under the device model "
    "(the scenario's interference included), capped at its input; summed over the jobs, over their input "
    "bytes. It lends each job those disks for its whole lead time, as if nothing else used them: an upper "
    "bound on what any policy could have had in memory by the first read. Read from memory: the bytes the "
    "map tasks read from memory, over the input. Migrated memory: each worker's migration buffer in use, "
    "non-zero samples every 0.25 s (Ignem, Fig. 7).\n"
)
