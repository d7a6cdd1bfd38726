"""Workloads: jobs as the harness runs them, and their input data.

A :class:`TraceJob` is a SWIM trace line as the file gives it (:func:`read_trace`,
also what :mod:`thaw_bench.trace_analysis` reads). A :class:`JobSpec` is what a
trace line says about a job (input, shuffle and output bytes, submission time),
scaled, plus its kind of map and reduce work:

- ``swim``: the SWIM replay of the Facebook traces (Ignem, section IV-B1, DYRS, section
  V-B2): maps read their block and checksum it, emit the job's shuffle bytes,
  reducers write the job's output bytes.
- ``sort``: 8-byte keys, range-partitioned by maps, sorted by reducers; shuffle
  and output equal the input (Ignem, section IV-D, DYRS, section V-F).
- ``wordcount``: maps count the words of their block, reducers merge counts
  (Ignem, section IV-E).

Input files are written as parts of a few blocks each, 3 replicas on DISK tiers,
with the writer's position rotating over the nodes so blocks spread as HDFS
spreads them (first replica on the writer's node).
"""

from __future__ import annotations

import math
import os
import random
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thaw.client import Client

#: The papers' trace (repository-relative default).
DEFAULT_TRACE = "FB-2009_samples_24_times_1hr_0.tsv"

#: Both SWIM day-long traces shipped with the package (SWIM's workloads repository:
#: 24 one-hour samples each, of a 600-machine cluster in 2009 and of the same cluster
#: grown to 3000 machines in 2010).
SWIM_TRACES = ("FB-2009_samples_24_times_1hr_0.tsv", "FB-2010_samples_24_times_1hr_0.tsv")

#: Blocks per input part file (a Hive table's part files; HDFS places blocks
#: one by one, Thaw places a file's blocks on the same replica holders).
PART_BLOCKS = 4


@dataclass
class JobSpec:
    name: str
    kind: str  # swim | sort | wordcount
    submit_at: float  # seconds after the run starts
    input_bytes: int
    shuffle_bytes: int
    output_bytes: int
    inputs: list[str] = field(default_factory=list)  # Thaw paths of the input parts
    trace: dict[str, Any] = field(default_factory=dict)  # the unscaled trace line
    #: Lead-time added on purpose (DYRS, section V-F4): the submitter calls migrate,
    #: then submits the job's tasks this many seconds later.
    lead_time: float = 0.0
    #: A label for single-job sweeps ("256MiB, +5s").
    variant: str = ""

    def reducers(self, block_size: int, nodes: int) -> int:
        """Reduce tasks: one per 32 blocks of shuffle, at most one per node (Tez
        sizes reducers by shuffle bytes); none for a job without shuffle. Few:
        each (map, reducer) pair is a Dask task, and the two cores running the
        whole emulated cluster must not spend themselves on task bookkeeping."""
        if self.shuffle_bytes <= 0:
            return 0
        return max(1, min(nodes, math.ceil(self.shuffle_bytes / (32 * block_size))))


def find_trace(name: str = DEFAULT_TRACE) -> Path:
    """The trace file: a path, or a name under ``$THAW_TRACES``, the traces
    shipped with the package (SWIM's FB-2009 and FB-2010 day-long traces, SWIM's
    BSD licence beside them), or a shared traces directory beside the repository."""
    p = Path(name)
    if p.is_file():
        return p
    here = Path(__file__).resolve()
    roots = [os.environ.get("THAW_TRACES", ""), str(here.parent / "traces")]
    roots += [str(parent / "shared" / "traces") for parent in here.parents]
    for r in roots:
        if r and (Path(r) / name).is_file():
            return Path(r) / name
    raise FileNotFoundError(f"trace {name!r} not found (give a path, or set THAW_TRACES)")


@dataclass(frozen=True)
class TraceJob:
    """One job of a SWIM trace as the file gives it (unscaled): its id, submission
    time and gap to the previous job (s), map input, shuffle and reduce output
    bytes."""

    id: str
    submit: float
    gap: float
    input: int
    shuffle: int
    output: int


def read_trace(trace: str | os.PathLike[str] = DEFAULT_TRACE) -> list[TraceJob]:
    """Every job of a SWIM trace (a path or a name :func:`find_trace` finds), in
    file order. Columns, tab-separated (SWIM's workloads repository): job id,
    submit time s, inter-job gap s, map input, shuffle, reduce output bytes; a
    seventh (the input path of the ``_withInputPaths`` variant) is ignored.
    Blank lines are skipped; a line with fewer columns, or a field that is not a
    number, is an error naming the file and line."""
    path = Path(find_trace(str(trace)))
    out: list[TraceJob] = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 6:
            raise ValueError(f"{path}:{n}: {len(cols)} tab-separated columns, a SWIM trace line has 6")
        try:
            submit, gap = float(cols[1]), float(cols[2])
            inp, shuf, outp = (int(float(x)) for x in cols[3:6])
        except ValueError:
            raise ValueError(f"{path}:{n}: not a number in {cols[1:6]}") from None
        if min(inp, shuf, outp) < 0:
            raise ValueError(f"{path}:{n}: negative byte count in {cols[3:6]}")
        out.append(TraceJob(cols[0], submit, gap, inp, shuf, outp))
    return out


def trace_label(trace: str | os.PathLike[str]) -> str:
    """A trace's name as a report titles it: "the Facebook 2010 trace
    (FB-2010_samples_24_times_1hr_0.tsv)" for SWIM's Facebook samples, the
    file's name for any other."""
    name = Path(trace).name
    m = re.match(r"FB-(\d{4})_", name)
    return f"the Facebook {m.group(1)} trace ({name})" if m else f"the trace {name}"


def trace_tag(trace: str | os.PathLike[str]) -> str:
    """A short tag for a trace's results directory: "" for the default trace
    (its results keep their historical place), else the file's stem up to its
    first underscore ("FB-2010")."""
    name = Path(trace).name
    return "" if name == DEFAULT_TRACE else re.sub(r"[^A-Za-z0-9.-]", "-", Path(name).stem.split("_")[0])


def swim_jobs(
    trace: str | os.PathLike[str] = DEFAULT_TRACE,
    jobs: int = 200,
    byte_scale: float = 1 / 128,
    time_scale: float = 1 / 100,
    write_scale: float = 1.0,
) -> list[JobSpec]:
    """The first ``jobs`` jobs of a SWIM trace (:func:`read_trace`), sizes times
    ``byte_scale``, submission times times ``time_scale``, the first job at 0.
    Shuffle and output bytes are scaled by ``write_scale`` more (this machine's
    two cores emulate seven nodes' CPUs; the papers' shuffles and writes ran on
    48)."""
    out: list[JobSpec] = []
    records = read_trace(trace)[:jobs]
    t0 = records[0].submit if records else 0.0
    for r in records:
        sizes = ((r.input, 1.0), (r.shuffle, write_scale), (r.output, write_scale))
        # A job that reads anything reads at least a byte after scaling.
        scaled = [max(1, round(x * byte_scale * k)) if x > 0 else 0 for x, k in sizes]
        out.append(
            JobSpec(
                name=f"swim-{r.id}",
                kind="swim",
                submit_at=(r.submit - t0) * time_scale,
                input_bytes=scaled[0],
                shuffle_bytes=scaled[1],
                output_bytes=scaled[2],
                trace={
                    "id": r.id,
                    "submit": r.submit,
                    "input": float(r.input),
                    "shuffle": float(r.shuffle),
                    "output": float(r.output),
                },
            )
        )
    return out


def single_job(
    kind: str, size: int, name: str | None = None, submit_at: float = 0.0, lead_time: float = 0.0
) -> JobSpec:
    """A standalone sort or wordcount job over ``size`` input bytes."""
    name = name or f"{kind}-{size}"
    if kind == "sort":
        return JobSpec(name, "sort", submit_at, size, size, size, lead_time=lead_time)
    if kind == "wordcount":
        # Counts are a small fraction of the text (the paper's corpus: ~2%).
        return JobSpec(name, "wordcount", submit_at, size, size // 50, size // 100, lead_time=lead_time)
    raise ValueError(f"unknown job kind {kind!r}: expected sort or wordcount")


_WORDS = (
    b"the of and to in a is that for it as was with be by on not he this are or his from at which but "
    b"have an they you were her she there been one all we their has would when if so no will can more "
    b"memory disk block cache job task read write migrate evict lead time cluster worker master node "
).split()


_CORPUS_SIZE = 8 << 20
_corpus: bytes | None = None


def _text_corpus() -> bytes:
    """An 8 MiB text corpus (the paper concatenated a 400 MB corpus onto itself
    to reach each input size; this does the same with a generated one)."""
    global _corpus
    if _corpus is None:
        rnd = random.Random(2009)
        _corpus = b" ".join(rnd.choices(_WORDS, k=_CORPUS_SIZE // 4))[:_CORPUS_SIZE]
    return _corpus


def _content(kind: str, size: int, seed: int) -> bytes:
    """Input bytes: text for wordcount (a slice of the repeated corpus), random
    keys otherwise."""
    if kind == "wordcount":
        corpus = _text_corpus()
        start = seed % len(corpus)
        reps = (start + size) // len(corpus) + 1
        return (corpus * reps)[start : start + size] if reps > 1 else corpus[start : start + size]
    return random.Random(seed).randbytes(size)


def place_inputs(
    client: Client, jobs: list[JobSpec], block_size: int, nodes: list[str], root: str = "/inputs"
) -> int:
    """Writes every job's input as part files of :data:`PART_BLOCKS` blocks, 3
    replicas each on DISK tiers, the writer's node rotating; fills
    ``JobSpec.inputs``. Returns the bytes written (once, not per replica)."""
    written = 0
    part_size = PART_BLOCKS * block_size
    k = 0
    for job in jobs:
        job.inputs = []
        left = job.input_bytes
        i = 0
        while left > 0:
            n = min(part_size, left)
            path = f"{root}/{job.name}/part-{i:05d}"
            host = nodes[k % len(nodes)]
            k += 1
            writer = Client(client.master, host=host)
            data = _content(job.kind, n, seed=zlib.crc32(f"{job.name}/{i}".encode()))
            with writer.open(
                path, "wb", write_type=f"replicated:{min(3, len(nodes))}", block_size=block_size
            ) as f:
                f.write(data)
            job.inputs.append(path)
            written += n
            left -= n
            i += 1
    return written
