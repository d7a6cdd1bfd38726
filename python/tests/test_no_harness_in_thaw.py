"""The user package holds nothing of the evaluation harness: the harness is the
package ``thaw_bench`` in bench/, which imports ``thaw``, never the other way."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import thaw

HARNESS = ("thaw_bench", "thaw.bench")


def test_thaw_has_no_bench_and_imports_no_harness() -> None:
    assert importlib.util.find_spec("thaw.bench") is None
    root = Path(thaw.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = ["thaw." * (node.level > 0) + (node.module or "")]
            found += [f"{path.relative_to(root)}: {n}" for n in names if n.startswith(HARNESS)]
    assert found == []
