"""scripts/check_layout.py, the check that keeps files short and modules free of
import circles, on small trees made for each rule."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

Check = Callable[[Path], list[str]]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_layout.py"


@pytest.fixture(scope="module")
def layout() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layout", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def check(layout: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Check:
    """The check with no exceptions (the repository's do not apply to a fixture)."""
    monkeypatch.setattr(layout, "ALLOWED_CIRCLES", {})
    monkeypatch.setattr(layout, "LONG_FILES", {})
    return layout.check


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_a_rust_circle_between_sibling_modules_fails(tmp_path: Path, check: Check) -> None:
    root = write(
        tmp_path,
        {
            "crates/c/src/lib.rs": "pub mod ha;\npub mod master;\n",
            "crates/c/src/ha.rs": "use crate::master::MasterConfig;\npub struct GroupConfig;\n",
            "crates/c/src/master.rs": (
                "// use crate::nothing;  (a comment is no use)\n"
                "pub struct MasterConfig { pub group: crate::ha::GroupConfig }\n"
            ),
        },
    )
    (problem,) = check(root)
    assert "import circle" in problem
    assert "crates/c/src/ha.rs:1 uses crates/c/src/master.rs" in problem
    assert "crates/c/src/master.rs:2 uses crates/c/src/ha.rs" in problem


def test_a_rust_circle_through_grouped_uses_and_super_fails(tmp_path: Path, check: Check) -> None:
    root = write(
        tmp_path,
        {
            "crates/w/src/lib.rs": "mod store;\n",
            "crates/w/src/store.rs": "mod data;\nmod local_write;\n",
            "crates/w/src/store/data.rs": "use super::{local_write::{self, Writer}, Other};\n",
            "crates/w/src/store/local_write.rs": 'fn f() { let _ = "super::data"; super::data::g(); }\n',
        },
    )
    (problem,) = check(root)
    assert "crates/w/src/store/data.rs" in problem and "crates/w/src/store/local_write.rs" in problem


def test_a_rust_child_using_its_parent_is_no_circle(tmp_path: Path, check: Check) -> None:
    root = write(
        tmp_path,
        {
            "crates/c/src/lib.rs": "pub mod master;\npub use master::Master;\n",
            "crates/c/src/master.rs": "mod checkpoints;\npub struct Master;\nuse checkpoints::Order;\n",
            "crates/c/src/master/checkpoints.rs": (
                "use super::Master;\nuse crate::master::Master as M;\npub struct Order;\n"
                "#[cfg(test)]\nmod tests {\n    use super::Order;\n}\n"
            ),
        },
    )
    assert check(root) == []


def test_a_python_circle_through_a_function_level_import_fails(tmp_path: Path, check: Check) -> None:
    root = write(
        tmp_path,
        {
            "python/pkg/__init__.py": "from .client import Client\n",
            "python/pkg/client.py": "from . import jobs\n\nclass Client: ...\n",
            "python/pkg/jobs.py": "def client():\n    from .client import Client\n\n    return Client()\n",
        },
    )
    (problem,) = check(root)
    assert "python/pkg/client.py:1 uses python/pkg/jobs.py" in problem
    assert "python/pkg/jobs.py:2 uses python/pkg/client.py" in problem


def test_python_type_checking_imports_and_parent_packages_are_no_circle(tmp_path: Path, check: Check) -> None:
    root = write(
        tmp_path,
        {
            "python/pkg/__init__.py": "from .dask import plugin\nfrom . import client\n",
            "python/pkg/client.py": "from .jobs import current\n",
            "python/pkg/jobs.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .client import Client\n"
                "import pkg\n"
            ),
            "python/pkg/dask/__init__.py": "from .plugin import Plugin\n",
            "python/pkg/dask/plugin.py": (
                "from ..client import x\nfrom . import Plugin as P\nimport pkg.dask\n"
            ),
        },
    )
    assert check(root) == []


def test_a_long_source_file_fails_and_a_long_test_file_does_not(tmp_path: Path, check: Check) -> None:
    long = "x = 1\n" * 801
    root = write(
        tmp_path,
        {
            "python/pkg/__init__.py": "",
            "python/pkg/big.py": long,
            "python/pkg/ok.py": "x = 1\n" * 800,
            "python/tests/test_big.py": long,
            "crates/c/src/lib.rs": "mod tier;\n",
            "crates/c/src/tier.rs": "#[cfg(test)]\nmod tests;\n",
            "crates/c/src/tier/tests.rs": "// t\n" * 900,
            "crates/c/src/tests.rs": "// t\n" * 900,
            "crates/c/tests/cluster.rs": "// t\n" * 900,
            "bench/thaw_bench/gen.py": "# @generated by a tool\n" + long,
            "bench/thaw_bench/cava.py": long,
        },
    )
    problems = check(root)
    assert len(problems) == 2, problems
    assert problems[0].startswith("python/pkg/big.py: 801 lines")
    assert problems[1].startswith("bench/thaw_bench/cava.py: 801 lines")


def test_exceptions_need_their_entry(
    tmp_path: Path, layout: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write(tmp_path, {"python/pkg/__init__.py": "", "python/pkg/big.py": "x = 1\n" * 900})
    monkeypatch.setattr(layout, "LONG_FILES", {"python/pkg/big.py": "a reason"})
    assert layout.check(root) == []


def test_the_script_exits_non_zero_naming_the_files(tmp_path: Path) -> None:
    write(tmp_path, {"python/pkg/__init__.py": "", "python/pkg/big.py": "x = 1\n" * 900})
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 1
    assert "python/pkg/big.py: 900 lines" in r.stderr


def test_this_repository_passes() -> None:
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
