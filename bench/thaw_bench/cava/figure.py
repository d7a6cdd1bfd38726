"""CAVA, Fig. 7's figure: cached bytes of each hot file and of the cold files over
time, one panel per policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..figures import panels
from .policies import POLICIES
from .workloads import MiB


def write_figure(doc: dict[str, Any], out: Path) -> str | None:
    """The timeline figure (PNG) into ``out``; its file name, or None without a
    timeline."""
    tl = doc.get("timeline") or {}
    runs = tl.get("runs") or {}
    if not runs:
        return None
    fig, axes = panels(len(runs), 3, width=4.6, height=3.2, sharey=True)
    for ax, (pol, data) in zip(axes, runs.items(), strict=False):
        for i, (name, ys) in enumerate(data["series"].items()):
            style = "--" if name == "cold files" else "-"
            ax.plot(data["t"], [y / MiB for y in ys], style, label=name.rsplit("/", 1)[-1], color=f"C{i}")
        ax.axhline(tl.get("memory_bytes", 0) / MiB, color="#999999", lw=0.8)
        ax.set_title(f"{tl.get('workload')}: {POLICIES[pol].label if pol in POLICIES else pol}", fontsize=9)
        ax.set_xlabel("Time (s)")
        ax.set_ylabel("Cached (MiB)")
        ax.legend(fontsize=7)
    name = "cached-over-time.png"
    fig.savefig(out / name, dpi=100)
    return name
