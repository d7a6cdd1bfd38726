"""CAVA's seven kinds of application (CAVA, section III-B, Fig. 3 and Table I) in one
registry, :data:`KINDS`: each kind's affinity class as Table I gives it, its
off-line profiled affinity (section V-A, Static-CA), the type of file it reads
(Table II: text, DB, web graph), and its work on one input block. Everything that
lists the kinds (the workloads, the tasks, the reports) iterates over this
registry; :func:`make_input` writes a file of each type.

The work is real: each kind computes its result over the block's records and
yields its output in pieces (written through to the under-store by the task).
What a kind costs in CPU and writes per input byte is what gives it its cache
affinity here, as in the paper's decision tree (Fig. 4: CPU and writes against
the mean of the applications measured lately). Chosen to keep Table I's
classes and the order of Fig. 3 / the Static-CA values:

- ``grep`` (text, high): counts a word, writing the count (a few bytes). Bound
  by its read.
- ``selection`` (DB, high): ``WHERE adRevenue > x`` over visit records (about
  0.2% of rows selected and written). Little CPU, little output.
- ``aggregation`` (DB, high): ``SUM(adRevenue), COUNT(*) GROUP BY sourceIP``
  by a sort-based group-by (``np.unique``), one row per group written (a few %
  of the input). CPU well below the mean: Table I puts Aggregation's CPU
  (26.04%) a hair under the average (26.45%); here it is kept clearly under,
  so that the class does not flip with the machine's noise.
- ``sort`` (text, medium): sorts the block's 8-byte records in
  :data:`PIECES` runs, each written out as a map's spill (writes above the
  mean, CPU below).
- ``join`` (DB, medium): Pavlo et al.'s join task, as CAVA's HiveQL join: the
  visits of a date range joined to a rankings table (a map-side join: the
  table is rebuilt from its seed in every task, as a broadcast side is
  loaded) by a sorted-key probe, then ``SUM(adRevenue), AVG(pageRank) GROUP
  BY sourceIP``, its rows written. CPU above the mean, writes below.
- ``wordcount`` (text, medium): splits the block into words and counts each
  word's occurrences and the words' lengths (two of the paper's four types),
  writing the counts (small). The most CPU per byte of the text kinds
  (Table I: 51%, the highest), so its cache hits save a small share
  (Fig. 3: "Wordcount and Pagerank gain relatively small improvements").
- ``pagerank`` (graph, low): PageRank iterations over the block as an edge
  list, writing its ranks every quarter of them: CPU and writes above the
  mean.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

#: Pieces a task writes its output in: a map task's spills (sort), PageRank's
#: iterations each writing their ranks; so writes go out (and are counted for
#: the classifier) while the task runs, not all at its end.
PIECES = 4

#: The file types of CAVA, Table II: applications of one type can share files.
FILE_TYPES = ("text", "db", "graph")

#: Visit records (the DB files): Pavlo et al.'s UserVisits, fixed-width.
VISIT = np.dtype([("source", "<u4"), ("dest", "<u4"), ("date", "<u4"), ("revenue", "<f4")])
#: Distinct source IPs and pages in the DB files; days of visit dates.
SOURCES, PAGES, DAYS = 1 << 14, 1 << 20, 3650
#: Selection's predicate: revenue above this (of 0-1000, uniform): ~0.2% of rows.
SELECT_ABOVE = 998.0
#: Join's date range (days): about a third of the visits.
JOIN_DAYS = (1000, 2200)
#: The rankings table every join task rebuilds (its seed: the same in every task).
RANKINGS_SEED = 7

#: The words of the text files (and the one grep counts).
VOCABULARY = 4096
#: Capitalized, unlike every other word: each occurrence is the whole word.
GREP_WORD = b"Thaw"


def _grep(data: bytes, _iters: int) -> Iterator[bytes]:
    yield b"%s\t%d\n" % (GREP_WORD, data.count(GREP_WORD))


def _sort(data: bytes, _iters: int) -> Iterator[bytes]:
    keys = np.frombuffer(data[: len(data) // 8 * 8], dtype=np.uint64)
    for run in np.array_split(keys, PIECES):
        yield bytes(run[np.argsort(run, kind="stable")].tobytes())


def _wordcount(data: bytes, _iters: int) -> Iterator[bytes]:
    words = data.split()
    counts = Counter(words)
    lengths = Counter(len(w) for w in words)
    out = [b"%s\t%d\n" % (w, n) for w, n in sorted(counts.items())]
    out += [b"#len%d\t%d\n" % (n, c) for n, c in sorted(lengths.items())]
    yield b"".join(out)


def _visits(data: bytes) -> np.ndarray:
    return np.frombuffer(data[: len(data) // VISIT.itemsize * VISIT.itemsize], dtype=VISIT)


def _selection(data: bytes, _iters: int) -> Iterator[bytes]:
    rows = _visits(data)
    rows = rows[rows["revenue"] > SELECT_ABOVE]
    out = np.empty(len(rows), dtype=[("dest", "<u4"), ("revenue", "<f4")])
    out["dest"], out["revenue"] = rows["dest"], rows["revenue"]
    yield bytes(out.tobytes())


def _group_sum(keys: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Sort-based GROUP BY: the distinct keys, each group's row count, and the
    sum of each of ``values`` per group."""
    groups, inverse, count = np.unique(keys, return_inverse=True, return_counts=True)
    return groups, count, [np.bincount(inverse, weights=v, minlength=len(groups)) for v in values]


def _aggregation(data: bytes, _iters: int) -> Iterator[bytes]:
    rows = _visits(data)
    groups, count, (total,) = _group_sum(rows["source"], rows["revenue"].astype(np.float64))
    out = np.empty(len(groups), dtype=[("source", "<u4"), ("count", "<u4"), ("revenue", "<f8")])
    out["source"], out["count"], out["revenue"] = groups, count, total
    yield bytes(out.tobytes())


def rankings() -> tuple[np.ndarray, np.ndarray]:
    """The join's Rankings table: page ids (sorted) and their pageRank."""
    rng = np.random.default_rng(RANKINGS_SEED)
    pages = np.sort(rng.choice(PAGES * 2, size=PAGES, replace=False).astype(np.uint32))
    return pages, rng.integers(1, 10_000, size=PAGES).astype(np.float64)


def _join(data: bytes, _iters: int) -> Iterator[bytes]:
    rows = _visits(data)
    pages, rank = rankings()
    rows = rows[(rows["date"] >= JOIN_DAYS[0]) & (rows["date"] < JOIN_DAYS[1])]
    at = np.searchsorted(pages, rows["dest"])
    hit = at < len(pages)
    hit[hit] = pages[at[hit]] == rows["dest"][hit]
    rows, at = rows[hit], at[hit]
    groups, count, (revenue, ranks) = _group_sum(rows["source"], rows["revenue"].astype(np.float64), rank[at])
    out = np.empty(len(groups), dtype=[("source", "<u4"), ("revenue", "<f8"), ("avg_rank", "<f8")])
    out["source"], out["revenue"], out["avg_rank"] = groups, revenue, ranks / np.maximum(count, 1)
    # ORDER BY totalRevenue DESC (the query's second step reads the top row).
    yield bytes(out[np.argsort(-out["revenue"], kind="stable")].tobytes())


def _pagerank(data: bytes, iters: int) -> Iterator[bytes]:
    words = np.frombuffer(data[: len(data) // 8 * 8], dtype=np.uint32)
    n = 1 << 14
    src, dst = words[0::2] & (n - 1), words[1::2] & (n - 1)
    degree = np.bincount(src, minlength=n).astype(np.float64)
    degree[degree == 0] = 1.0
    rank = np.full(n, 1.0 / n)
    size = max(1, int(len(data) * KINDS["pagerank"].write_ratio) // PIECES // 4)
    for i in range(iters):
        rank = 0.15 / n + 0.85 * np.bincount(dst, weights=(rank / degree)[src], minlength=n)
        if (i + 1) % max(1, iters // PIECES) == 0:
            yield bytes(np.resize(rank.astype(np.float32), size).tobytes())


@dataclass(frozen=True)
class AppKind:
    """A kind of application: the class CAVA, Table I gives its paper counterpart,
    the off-line affinity of section V-A, the file type it reads, its work."""

    name: str
    affinity: str  # high, medium, low
    #: CAVA, section V-A's off-line profiled affinity (Static-CA's input).
    paper_affinity: float
    file_type: str
    #: Roughly the output written per input byte (0: writes nothing).
    write_ratio: float
    like: str
    work: Callable[[bytes, int], Iterator[bytes]]


KINDS: dict[str, AppKind] = {
    k.name: k
    for k in (
        AppKind("grep", "high", 0.377, "text", 1e-6, "Grep (CPU 7%, writes 4 KB/s)", _grep),
        AppKind("wordcount", "medium", 0.198, "text", 0.01, "Wordcount (CPU 51%, writes 6 KB/s)", _wordcount),
        AppKind("sort", "medium", 0.146, "text", 1.0, "Sort (CPU 17%, writes 2.9 MB/s)", _sort),
        AppKind("aggregation", "high", 0.133, "db", 0.05, "Aggregation (CPU 26%, 169 KB/s)", _aggregation),
        AppKind("join", "medium", 0.073, "db", 0.1, "Join (CPU 30%, writes 346 KB/s)", _join),
        AppKind("selection", "high", 0.237, "db", 0.002, "Selection (CPU 18%, writes 6 KB/s)", _selection),
        AppKind("pagerank", "low", 0.041, "graph", 4.0, "Pagerank (CPU 36%, writes 1.8 MB/s)", _pagerank),
    )
}  # fmt: skip


def words() -> list[bytes]:
    """The text files' vocabulary (seeded): :data:`VOCABULARY` words of 2-10
    small letters, and :data:`GREP_WORD` (the 64th most frequent)."""
    rng = random.Random("cava-vocabulary")
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab: set[bytes] = set()
    while len(vocab) < VOCABULARY - 1:
        vocab.add("".join(rng.choice(letters) for _ in range(rng.randint(2, 10))).encode())
    out = sorted(vocab)
    return [*out[:63], GREP_WORD, *out[63:]]


def make_input(file_type: str, size: int, seed: str) -> bytes:
    """``size`` bytes of a file of ``file_type`` (seeded by ``seed``): text
    (lines of :func:`_lines` drawn at random), visit records (:data:`VISIT`),
    or an edge list of uint32 pairs."""
    rng = np.random.default_rng(list(seed.encode()))
    if file_type == "graph":
        return bytes(rng.integers(0, 1 << 32, size=(size + 3) // 4, dtype=np.uint32).tobytes()[:size])
    if file_type == "db":
        rows = np.empty((size + VISIT.itemsize - 1) // VISIT.itemsize, dtype=VISIT)
        rows["source"] = rng.integers(0, SOURCES, size=len(rows))
        rows["dest"] = rng.integers(0, PAGES * 2, size=len(rows))
        rows["date"] = rng.integers(0, DAYS, size=len(rows))
        rows["revenue"] = rng.uniform(0, 1000, size=len(rows))
        return bytes(rows.tobytes()[:size])
    if file_type != "text":
        raise ValueError(f"unknown file type {file_type!r}: expected one of {', '.join(FILE_TYPES)}")
    pool = _lines()
    picks = rng.integers(0, len(pool), size=size // 70 + 16)
    out = b"".join(pool[i] for i in picks)
    while len(out) < size:
        out += b"".join(pool[i] for i in rng.integers(0, len(pool), size=1024))
    return out[:size]


@functools.cache
def _lines() -> list[bytes]:
    """The lines text files are drawn from (seeded): 16,384 lines of 12 words
    of :func:`words`, the words' frequencies Zipf (the k-th most frequent
    word ~ 1/k)."""
    vocab = words()
    rng = np.random.default_rng(11)
    weights = 1.0 / np.arange(1, len(vocab) + 1)
    ids = rng.choice(len(vocab), size=(1 << 14, 12), p=weights / weights.sum())
    return [b" ".join(vocab[i] for i in line) + b"\n" for line in ids]
