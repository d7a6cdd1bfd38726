"""``python -m thaw_bench paper`` (``make bench-paper``): every experiment of the
five papers in one command, as a registry of sections (:data:`SECTIONS`) run in
order, each timed, each naming the paper figure it replays, each writing into
``OUT/<section>/``, and an index of them all (``OUT/index.md``, ``index.json``).

A section is a function ``run(bench, quick) -> path or paths`` (the results
files it wrote) and a :class:`Section` entry naming it; adding an experiment is
one entry in :data:`SECTIONS`. ``quick=True`` asks for a small configuration (a
few jobs, one repeat, small sizes: a smoke test of every experiment, no
figures, ``make bench-paper-quick`` and ``bench/tests/test_paper_quick.py``);
``quick=False`` for the sizes and repeats of the BENCHMARKS.md tables, chosen to
aim at 90 minutes for the whole run on this machine (BENCHMARKS.md, "Every
experiment in one command", has each section's measured time).

A section that raises is recorded as failed with its error and the rest still
run; the command exits non-zero if any failed. A section marked ``network``
runs on emulated hosts (:mod:`thaw_bench.netlab`, root only): without root it
is recorded as skipped, with the reason, and does not fail the run. A section
must return at least one results file, and each must exist, or it failed.

``--only a,b`` and ``--skip a,b`` choose sections by name; ``--repeats N``
overrides every section's repeats (sections that have them; for a fast
full-size pass that gives each section's time per repeat); ``--network SPEC``
the network sections' links (default :data:`thaw_bench.locality.NETWORK`).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import experiments as ex
from . import locality as loc
from . import tachyon, trace_analysis
from .cava.experiments import cava
from .cava.workloads import PRESETS
from .devices import devices
from .do_not_harm import do_not_harm
from .netlab import NetLabError, require_root
from .results import checkout_commit, command_line
from .scheduled import scheduled
from .workloads import SWIM_TRACES

MiB = 1 << 20

#: What a section returns: the results files it wrote.
Written = Path | Sequence[Path]


@dataclass(frozen=True)
class Section:
    """One experiment of ``make bench-paper``: its name (also its results
    directory under OUT), the paper figures it replays, the function that runs
    it, and whether it needs emulated hosts with a network (root)."""

    name: str
    paper: str
    run: Callable[[ex.Bench, bool], Written]
    network: bool = False


def _reps(bench: ex.Bench, full: int, quick: bool) -> int:
    """A section's repeats: 1 when quick, else ``--repeats`` if given, else ``full``."""
    if quick:
        return 1
    return bench.repeats if bench.repeats is not None else full


def _small(bench: ex.Bench, nodes: int = 3) -> ex.Bench:
    """The quick configuration's cluster: ``nodes`` nodes, smaller memory."""
    return dataclasses.replace(
        bench, spec=dataclasses.replace(bench.spec, nodes=nodes, mem_capacity="128MiB")
    )


def _report(report: Path) -> list[Path]:
    """An :mod:`experiments` function's files: ``results.json`` beside its report."""
    return [report.parent / "results.json", report]


def traces(bench: ex.Bench, quick: bool) -> Written:
    """Ignem II-C's and DYRS II's analyses over both SWIM traces (computation
    only; the quick run does FB-2009 alone)."""
    chosen = SWIM_TRACES[:1] if quick else SWIM_TRACES
    trace_analysis.run(chosen, bench.out, command_line())
    return [bench.out / "traces" / "results.json", bench.out / "traces" / "report.md"]


#: SWIM's configurations in :func:`swim`: the baseline, the two bounds
#: (inputs in RAM, instant migration), Ignem and its prioritisation-off
#: ablation, DYRS (the paper's FIFO), DYRS with smallest job first (the
#: master's default), its naive load balancing, and DYRS with placement.
SWIM_CONFIGS = ["cold", "ram", "instant", "ignem", "ignem-fifo", "dyrs", "dyrs-sjf", "naive", "dyrs-place"]


#: The quick SWIM replays: FB-2009's first 20 jobs, a quarter of the bytes
#: (14 MiB of input, two jobs reading most of it), arrivals 5x closer.
QUICK_SWIM: dict[str, Any] = {"jobs": 20, "byte_scale": 1 / 1024, "time_scale": 1 / 4000, "startup": 1.0}


def swim(bench: ex.Bench, quick: bool) -> Written:
    """FB-2009's first 200 jobs with a 1 s start-up, homogeneous and with a slow
    node, under every configuration of :data:`SWIM_CONFIGS`."""
    if quick:
        configs = ["instant", "dyrs"]
        return _report(ex.swim(_small(bench), **QUICK_SWIM, configs=configs, scenarios=["slow-node"]))
    return _report(ex.swim(bench, configs=SWIM_CONFIGS, repeats=_reps(bench, 2, quick), startup=1.0))


def swim_queueing(bench: ex.Bench, quick: bool) -> Written:
    """The same replay with queueing for slots as the only lead-time."""
    if quick:
        quick_swim = {**QUICK_SWIM, "startup": 0.0}
        return _report(ex.swim(_small(bench), **quick_swim, configs=["ignem"], scenarios=["homogeneous"]))
    return _report(ex.swim(bench, configs=["cold", "ram", "ignem", "dyrs"], repeats=_reps(bench, 1, quick)))


def swim_fb2010(bench: ex.Bench, quick: bool) -> Written:
    """The other SWIM trace, FB-2010: its first 200 jobs with a slow node, 1 s
    start-up, inputs scaled by 1/16384 (421 MiB: FB-2010's inputs are 53 times
    FB-2009's), as one replay of BENCHMARKS.md's "SWIM over two traces, two
    byte scales and two cluster sizes". Quick: its first 4 jobs (26 MiB at 1/4096)."""
    trace = SWIM_TRACES[1]
    if quick:
        small = _small(bench)
        quick_swim = {**QUICK_SWIM, "jobs": 4, "byte_scale": 1 / 4096}
        return _report(ex.swim(small, **quick_swim, configs=["dyrs"], scenarios=["slow-node"], trace=trace))
    configs = ["cold", "ram", "ignem", "dyrs", "dyrs-sjf"]
    return _report(
        ex.swim(bench, 200, 1 / 16384, configs=configs, scenarios=["slow-node"], trace=trace,
                repeats=_reps(bench, 3, quick), startup=1.0)
    )  # fmt: skip


def devices_section(bench: ex.Bench, quick: bool) -> Written:
    """Ignem, Figs. 1-2: block reads and map tasks from HDD, SSD and RAM
    (:mod:`thaw_bench.devices`)."""
    return _report(devices(bench, quick=quick, repeats=_reps(bench, 3, quick)))


def do_not_harm_section(bench: ex.Bench, quick: bool) -> Written:
    """Ignem, section III-A3: the do-not-harm rule on and off, memory too small
    for the queued jobs (:mod:`thaw_bench.do_not_harm`)."""
    return _report(do_not_harm(bench, quick=quick, repeats=_reps(bench, 3, quick)))


def scheduled_section(bench: ex.Bench, quick: bool) -> Written:
    """The scheduled-caching poster: on-disk, in-memory and scheduled caching
    on SWIM (:mod:`thaw_bench.scheduled`)."""
    return _report(scheduled(bench, quick=quick, repeats=_reps(bench, 3, quick)))


def swim_network(bench: ex.Bench, quick: bool) -> Written:
    """DYRS with and without memory-locality placement on emulated hosts, so a
    read from another node's memory crosses a shaped link."""
    if quick:
        return _report(
            ex.swim(_small(bench), **QUICK_SWIM, configs=["dyrs-place"], scenarios=["homogeneous"])
        )
    # Five repeats of the two, no bound: the placement gain is under a tenth of
    # a job's time, so it needs the repeats more than a third configuration.
    configs = ["dyrs", "dyrs-place"]
    repeats = _reps(bench, 5, quick)
    return _report(ex.swim(bench, configs=configs, scenarios=["homogeneous"], repeats=repeats, startup=1.0))


def sort(bench: ex.Bench, quick: bool) -> Written:
    """A sort job cold, in RAM, under Ignem and DYRS, and with 5 s of added lead-time."""
    if quick:
        return _report(ex.single(_small(bench), "sort", [8 * MiB], [0.0], ["ignem"]))
    configs = ["cold", "ram", "ignem", "dyrs"]
    return _report(
        ex.single(bench, "sort", [128 * MiB, 256 * MiB], [0.0, 5.0], configs, repeats=_reps(bench, 1, quick))
    )


def wordcount(bench: ex.Bench, quick: bool) -> Written:
    """Wordcount over input sizes, with and without 5 s of added lead-time."""
    if quick:
        return _report(ex.single(_small(bench), "wordcount", [8 * MiB], [0.0], ["ram"]))
    sizes, configs = [64 * MiB, 128 * MiB, 256 * MiB], ["cold", "ram", "ignem"]
    return _report(ex.single(bench, "wordcount", sizes, [0.0, 5.0], configs, repeats=_reps(bench, 1, quick)))


def interference(bench: ex.Bench, quick: bool) -> Written:
    """A sort under DYRS with the same interference spread differently in time."""
    if quick:
        return _report(ex.interference(_small(bench), 8 * MiB, lead=1.0, scenarios=["alt10x2"]))
    return _report(ex.interference(bench, 256 * MiB, lead=5.0, repeats=_reps(bench, 1, quick)))


def sql(bench: ex.Bench, quick: bool) -> Written:
    """TPC-H queries queued, migrated after planning, one slow node."""
    if quick:
        return _report(ex.sql(_small(bench), sf=0.01, queries=[6], configs=["dyrs"], ahead=1.0))
    return _report(ex.sql(bench, sf=0.1, repeats=_reps(bench, 1, quick)))


def locality(bench: ex.Bench, quick: bool) -> Written:
    """Map tasks' time with the input at each memory-locality level, on emulated hosts."""
    if quick:
        return _report(loc.locality(bench, ["grep", "sort"], blocks=4, repeats=1, iters=5))
    # 2 MiB blocks, as `python -m thaw_bench locality` and its BENCHMARKS.md table.
    wide = dataclasses.replace(bench, spec=dataclasses.replace(bench.spec, block_size="2MiB"))
    return _report(loc.locality(wide, None, blocks=12, repeats=_reps(bench, 3, quick)))


def cava_section(bench: ex.Bench, quick: bool) -> Written:
    """The kinds' cache affinity and W1-W6 under the paper's five policies, with
    memory-locality placement (CAVA's own harness, :mod:`thaw_bench.cava`)."""
    out, run = bench.out, {"say": bench.say, "command": command_line(), "root": bench.root}
    if quick:
        scale = dataclasses.replace(PRESETS["tiny"], workloads=("W1",), timeout=120.0)
        cava(out, scale, experiments=("workloads",), policies=["no-cache", "cava"], **run)
    else:
        repeats = _reps(bench, 1, quick)
        experiments = ("affinity", "workloads")
        cava(out, PRESETS["full"], experiments=experiments, repeats=repeats, affinity_repeats=repeats, **run)
    return [out / "results.json", out / "report.md"]


def tachyon_section(bench: ex.Bench, quick: bool) -> Written:
    """Write throughput by write type, the checkpoint order, the log pipeline
    (through, must-cache, cache-through, async-through, async-through with a
    worker killed) and who gets the slots while a lost file is rebuilt."""
    return tachyon.paper(bench.out, bench.say, quick=quick)


#: ``make bench-paper``'s sections, in the order they run. Add an experiment
#: with one line: ``Section("name", "paper, figure", fn)``, ``fn(bench, quick)``
#: returning the results files it wrote (``network=True`` if it needs emulated
#: hosts: it then gets ``bench.spec.network`` set, and is skipped without root).
# fmt: off
SECTIONS: tuple[Section, ...] = (
    Section("traces", "Ignem II-C, DYRS II: memory sufficiency over the SWIM traces", traces),
    Section("devices", "Ignem Figs. 1-2: block reads and map tasks from HDD, SSD and RAM", devices_section),
    Section("swim", "Ignem Tables I-II, Fig. 7, IV-C5; DYRS Table I, Fig. 10 (1 s start-up)", swim),
    Section("swim-queueing", "Ignem Table I, DYRS Table I: queueing as the only lead-time", swim_queueing),
    Section("swim-fb2010", "DYRS Table I on the FB-2010 trace, a slow node", swim_fb2010),
    Section("scheduled", "Scheduled caching: on-disk vs in-memory vs scheduled (SWIM)", scheduled_section),
    Section("swim-network", "CAVA Alg. 1: SWIM placement on a shaped network", swim_network, network=True),
    Section("do-not-harm", "Ignem III-A3: the do-not-harm rule on and off", do_not_harm_section),
    Section("sort", "Ignem Table III; DYRS Fig. 11 (added lead-time)", sort),
    Section("wordcount", "Ignem Fig. 8: wordcount by input size and lead-time", wordcount),
    Section("interference", "DYRS Table II: interference patterns", interference),
    Section("sql", "DYRS Fig. 4: TPC-H on DuckDB", sql),
    Section("locality", "CAVA Fig. 3: memory-locality levels", locality, network=True),
    Section("cava", "CAVA Table I (affinity); W1-W6: Figs. 5-7, Table IV", cava_section),
    Section("tachyon", "Tachyon Fig. 1, 2.7 (checkpoint order), Fig. 2 (pipeline, kill), 4", tachyon_section),
)
# fmt: on


def select(sections: Sequence[Section], only: list[str] | None, skip: list[str] | None) -> list[Section]:
    """``sections`` in order, those of ``only`` (if given) less those of
    ``skip``; an unknown name is an error naming the known ones."""
    names = [s.name for s in sections]
    for given in (only or [], skip or []):
        bad = [n for n in given if n not in names]
        if bad:
            raise ValueError(f"unknown section {', '.join(bad)}: expected some of {', '.join(names)}")
    return [s for s in sections if (only is None or s.name in only) and s.name not in (skip or [])]


def _paths(written: Written | None) -> list[Path]:
    if written is None:
        return []
    return [written] if isinstance(written, Path) else list(written)


def _attempt(section: Section, bench: ex.Bench, quick: bool) -> dict[str, Any]:
    """Runs the section in this process: ``status`` ok with its ``files``
    (relative to the paper's OUT, ``bench.out.parent``), or failed with its error."""
    try:
        files = _paths(section.run(bench, quick))
        missing = [str(p) for p in files if not Path(p).exists()]
        if not files:
            raise RuntimeError("the section returned no results file")
        if missing:
            raise RuntimeError(f"the section returned results files that do not exist: {', '.join(missing)}")
        return {"status": "ok", "files": [_rel(p, bench.out.parent) for p in files]}
    except (Exception, SystemExit) as e:
        error = f"{type(e).__name__}: {e}"[:2000]
        return {"status": "failed", "files": [], "error": error, "traceback": traceback.format_exc()[-4000:]}


def _child(section: Section, bench: ex.Bench, quick: bool, conn: Any) -> None:
    """A network section's process: its own say, then its record through ``conn``."""
    t0 = time.time()

    def say(msg: str) -> None:
        print(f"[{section.name} {time.time() - t0:7.1f}s] {msg}", flush=True)

    conn.send(_attempt(section, dataclasses.replace(bench, say=say), quick))
    conn.close()


def _in_child(section: Section, bench: ex.Bench, quick: bool) -> dict[str, Any]:
    """Runs a network section in a fresh process (spawned: no thread of this
    one's): the harness moves into the lab's driver namespace with setns(2),
    which needs a process with one thread, and must not leave this one there
    for the sections after it."""
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(section, dataclasses.replace(bench, say=print), quick, theirs))
    proc.start()
    theirs.close()
    try:
        rec = ours.recv()
    except EOFError:
        rec = {"status": "failed", "files": [], "error": "the section's process ended without a result"}
    proc.join()
    if proc.exitcode not in (0, None) and rec["status"] == "ok":
        rec = {"status": "failed", "files": [], "error": f"the section's process exited {proc.exitcode}"}
    return rec


def run_section(section: Section, bench: ex.Bench, quick: bool, network: str) -> dict[str, Any]:
    """Runs one section into ``bench.out / section.name`` (a network section in
    a process of its own); its record for the index: status (ok, failed,
    skipped), seconds, files written, error."""
    rec: dict[str, Any] = {"section": section.name, "paper": section.paper, "results_dir": section.name}
    spec = dataclasses.replace(bench.spec, network=network if section.network else None)
    mine = dataclasses.replace(bench, out=bench.out / section.name, spec=spec)
    if section.network:
        try:
            require_root()
        except NetLabError as e:
            bench.say(f"== {section.name}: skipped ({e})")
            return {**rec, "status": "skipped", "seconds": 0.0, "files": [], "reason": str(e)}
    bench.say(f"== {section.name}: {section.paper}" + (" (quick)" if quick else ""))
    t0 = time.monotonic()
    rec.update(_in_child(section, mine, quick) if section.network else _attempt(section, mine, quick))
    rec["seconds"] = round(time.monotonic() - t0, 1)
    if rec["status"] == "failed":
        bench.say(f"   {section.name} FAILED: {rec['error'][:500]}")
    bench.say(f"   {section.name}: {rec['status']} in {rec['seconds']:.0f} s")
    return rec


def _rel(p: Path, root: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(root.resolve()))
    except ValueError:
        return str(p)


def run_paper(
    bench: ex.Bench, sections: Sequence[Section], *, quick: bool = False, network: str = loc.NETWORK,
    command: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Runs ``sections`` in order; writes the index after each (a run cut short
    still leaves one); returns the index document."""
    doc: dict[str, Any] = {
        "title": "make bench-paper" + (" --quick" if quick else "") + ": every paper's experiment",
        "command": command or command_line(),
        "commit": checkout_commit(),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "network": network,
        "machine": f"{os.cpu_count()} CPUs, load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}",
        "sections": [],
    }
    t0 = time.monotonic()
    for section in sections:
        doc["sections"].append(run_section(section, bench, quick, network))
        doc["total_seconds"] = round(time.monotonic() - t0, 1)
        write_index(doc, bench.out)
    doc["finished"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    write_index(doc, bench.out)
    return doc


def write_index(doc: dict[str, Any], out: Path) -> Path:
    """``out/index.json`` and ``out/index.md``: every section, its paper
    figures, its status, its results directory and files, its time, the total."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "index.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        f"# {doc['title']}",
        "",
        f"Command: `{doc['command']}` · build `{doc['commit']}` · started {doc['started']}",
        f"· {doc['machine']}",
        "",
        "| section | paper | status | results | seconds |",
        "|---|---|---|---|---:|",
    ]
    for s in doc["sections"]:
        status = s["status"] + (f": {s.get('error') or s.get('reason')}" if s["status"] != "ok" else "")
        files = ", ".join(f"[{f}]({f})" for f in s["files"]) or f"{s['results_dir']}/"
        lines.append(
            f"| {s['section']} | {s['paper']} | {' '.join(status.replace('|', '/').split())} | {files} "
            f"| {s['seconds']:.0f} |"
        )
    lines += ["", f"Total: {doc.get('total_seconds', 0):.0f} s ({doc.get('total_seconds', 0) / 60:.1f} min)."]
    path = out / "index.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _names(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``paper`` subcommand's own options (the cluster's come from the common ones)."""
    names = ", ".join(s.name for s in SECTIONS)
    p.add_argument("--only", type=_names, default=None, help=f"run only these sections (of {names})")
    p.add_argument("--skip", type=_names, default=None, help="run every section but these")
    p.add_argument(
        "--quick", action="store_true", help="every section in a small configuration (a smoke test, minutes)"
    )
    p.set_defaults(repeats=None, out=Path("bench-out/paper"))


def main_args(a: argparse.Namespace, bench: ex.Bench, argv: list[str] | None = None) -> int:
    """Runs the chosen sections; prints the index; 1 if any failed, 2 on bad options."""
    try:
        chosen = select(SECTIONS, a.only, a.skip)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.repeats is not None and a.repeats < 1:
        print("error: --repeats must be at least 1", file=sys.stderr)
        return 2
    bench = dataclasses.replace(bench, repeats=a.repeats, figures=not a.quick)
    doc = run_paper(
        bench, chosen, quick=a.quick, network=a.network or loc.NETWORK, command=command_line(argv)
    )
    print((bench.out / "index.md").read_text())
    failed = [s["section"] for s in doc["sections"] if s["status"] == "failed"]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0
