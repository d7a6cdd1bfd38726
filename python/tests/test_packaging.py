"""The user package declares what it imports: every third-party import in
``thaw`` is a dependency or in an extra, and ``import thaw``, ``thaw.lineage``
and ``thaw.dask`` need nothing beyond their declared dependencies. (Installing
into a clean venv needs the network: this checks the same without it, by
refusing the undeclared packages to a fresh interpreter.)"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

PYTHON = Path(__file__).resolve().parents[1]
PACKAGE = PYTHON / "thaw"
# The evaluation harness, leaving for its own package in issue 29.
HARNESS = PACKAGE / "bench"
# Packages some extra needs that no module of thaw is declared against alone.
OPTIONAL = {"pyarrow", "pandas", "numpy", "duckdb", "polars", "dask", "distributed", "zarr", "matplotlib"}


def declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((PYTHON / "pyproject.toml").read_text())["project"]

    def names(reqs: list[str]) -> set[str]:
        return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower() for r in reqs} - {"thaw"}

    extras = {k: names(v) for k, v in project.get("optional-dependencies", {}).items()}
    return names(project["dependencies"]), extras


def third_party_imports() -> dict[str, list[str]]:
    """Top-level third-party module -> where the package imports it."""
    out: dict[str, list[str]] = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        if HARNESS in p.parents:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                if top not in sys.stdlib_module_names and top != "thaw":
                    out.setdefault(top, []).append(f"{p.relative_to(PYTHON)}:{node.lineno}")
    return out


def test_every_import_of_the_package_is_declared() -> None:
    core, extras = declared()
    everything = core.union(*extras.values())
    missing = {m: where for m, where in third_party_imports().items() if m.lower() not in everything}
    assert not missing, f"imported but not declared in python/pyproject.toml: {missing}"
    assert {"fsspec", "tqdm"} <= core
    assert {"dask", "distributed"} <= extras["dask"]


def run_blocked(blocked: set[str], code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter that cannot import ``blocked``."""
    prelude = textwrap.dedent(
        f"""
        import sys
        BLOCKED = {sorted(blocked)!r}
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ModuleNotFoundError(f"{{name}} is not a declared dependency", name=name)
                return None
        sys.meta_path.insert(0, Block())
        """
    )
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120)


def test_thaw_and_its_lineage_import_with_the_core_dependencies_only() -> None:
    core, _ = declared()
    r = run_blocked(OPTIONAL - core, "import thaw, thaw.lineage, thaw.jobs, thaw.client, thaw.files")
    assert r.returncode == 0, r.stderr


def test_thaw_dask_imports_with_the_dask_extra_only() -> None:
    core, extras = declared()
    # dask[dataframe] brings pandas, numpy and pyarrow along.
    allowed = core | extras["dask"] | {"pandas", "numpy", "pyarrow"}
    r = run_blocked(OPTIONAL - allowed, "import thaw.dask; thaw.dask.ThawSchedulerPlugin()")
    assert r.returncode == 0, r.stderr
