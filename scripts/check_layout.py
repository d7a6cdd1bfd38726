#!/usr/bin/env python3
"""Keeps the source tree readable: fails on a source file over 800 lines and on
an import circle between modules. Run by scripts/test.sh;
stdlib only.

    scripts/check_layout.py [ROOT]      (default: the repository)

**Long files.** Sources counted: ``crates/*/src/**/*.rs``, ``python/**/*.py``,
``bench/**/*.py``, ``java/*/src/main/**/*.java``, ``bench/jvm/*.java``,
``proto/**/*.proto``. Not
counted: tests (anything under a ``tests/`` or ``src/test/`` directory,
``tests.rs``, ``test_*.py``) and generated code (a file whose first lines say
``@generated`` or ``DO NOT EDIT``; build output under ``target/``, virtual
environments). A file may be longer only if :data:`LONG_FILES` names it, with
its reason.

**Import circles.** A graph per Rust crate and per Python package; an edge
runs from a module to each module it names:

- Rust: every ``crate::...``, ``super::...`` and ``self::...`` path, in ``use``
  declarations (braces expanded) and in code, resolved to the deepest module
  that has a file of its own (``crate::master::MasterConfig`` names
  ``master.rs``; an inline ``mod tests { ... }`` is part of its file, and its
  ``super`` is the file's module). Comments and string literals do not count;
  ``mod x;`` declarations are not edges (a parent declaring its children is
  not a use). Modules are found from each crate root (``lib.rs``, ``main.rs``)
  by their ``mod`` declarations.
- Python: every ``import`` and ``from ... import`` of a module of the same
  package, at the top or inside a function (both run), resolved the same way
  (``from .client import Client`` names ``client.py``; ``from . import jobs``
  names ``jobs.py``). Imports under ``if TYPE_CHECKING:`` do not count: they
  never run.

**The ancestor rule.** An edge between a module and one of its ancestors is
not counted, in either direction: a child using its parent's items is part of
the parent (``super::Shared``, a package's ``__init__`` re-exporting its
modules, a module importing its package's shared names). A circle is a cycle
of the remaining edges, that is, between modules neither of which contains
the other. Cycles between crates cargo refuses by itself.

Known exceptions are listed below, each with its reason (:data:`LONG_FILES`,
:data:`ALLOWED_CIRCLES`); both are empty today.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

MAX_LINES = 800

#: Files allowed over MAX_LINES, with the reason (paths from the root).
LONG_FILES: dict[str, str] = {}

#: Circles allowed, by their files, with the reason.
ALLOWED_CIRCLES: dict[frozenset[str], str] = {}

_SKIP_DIRS = {
    "target",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    ".git",
    "build",
    "dist",
}
_GENERATED = re.compile(r"@generated|DO NOT EDIT")


# -- files ---------------------------------------------------------------------


def is_test(rel: str) -> bool:
    """Whether a path (from the root) is test code."""
    parts = rel.split("/")
    name = parts[-1]
    return (
        "tests" in parts[:-1]
        or "/src/test/" in f"/{rel}"
        or name == "tests.rs"
        or (name.startswith("test_") and name.endswith(".py"))
    )


def _walk(root: Path, top: str, suffix: str) -> Iterator[Path]:
    base = root / top
    if not base.is_dir():
        return
    stack = [base]
    while stack:
        d = stack.pop()
        for p in sorted(d.iterdir()):
            if p.is_dir():
                if p.name not in _SKIP_DIRS and not p.name.startswith("."):
                    stack.append(p)
            elif p.name.endswith(suffix):
                yield p


def source_files(root: Path) -> list[Path]:
    """The sources the length rule applies to (tests and generated code left out)."""
    files: list[Path] = []
    crates = root / "crates"
    if crates.is_dir():
        for crate in sorted(crates.iterdir()):
            files.extend(_walk(root, f"crates/{crate.name}/src", ".rs"))
    files.extend(_walk(root, "python", ".py"))
    files.extend(_walk(root, "bench", ".py"))
    java = root / "java"
    if java.is_dir():
        for module in sorted(java.iterdir()):
            files.extend(_walk(root, f"java/{module.name}/src/main", ".java"))
    files.extend(_walk(root, "bench/jvm", ".java"))
    files.extend(_walk(root, "proto", ".proto"))
    out = []
    for p in files:
        rel = p.relative_to(root).as_posix()
        if is_test(rel):
            continue
        head = p.read_text(errors="replace").splitlines()[:5]
        if any(_GENERATED.search(line) for line in head):
            continue
        out.append(p)
    return out


def long_files(root: Path) -> list[str]:
    out = []
    for p in source_files(root):
        rel = p.relative_to(root).as_posix()
        n = len(p.read_text(errors="replace").splitlines())
        if n > MAX_LINES and rel not in LONG_FILES:
            out.append(
                f"{rel}: {n} lines (at most {MAX_LINES}; split it, or add it to LONG_FILES with a reason)"
            )
    return out


# -- graphs and circles ----------------------------------------------------------


@dataclass
class Graph:
    """Modules (by name, each with its file) and the edges between them."""

    files: dict[str, str] = field(
        default_factory=dict
    )  # module name -> path from the root
    edges: dict[str, dict[str, int]] = field(
        default_factory=dict
    )  # from -> to -> first line
    sep: str = "::"

    def ancestor(self, a: str, b: str) -> bool:
        """Whether ``a`` contains ``b`` (or is it)."""
        return a == b or a == "" or b.startswith(a + self.sep)

    def add(self, src: str, dst: str, line: int) -> None:
        if self.ancestor(src, dst) or self.ancestor(dst, src):
            return
        self.edges.setdefault(src, {}).setdefault(dst, line)

    def deepest(self, segments: list[str]) -> str | None:
        """The deepest module with a file of its own that ``segments`` is in."""
        for k in range(len(segments), -1, -1):
            name = self.sep.join(segments[:k])
            if name in self.files:
                return name
        return None


def circles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan),
    each sorted, leaving out the edges between pairs allowed."""
    fixed = set(ALLOWED_CIRCLES)

    def succ(v: str) -> list[str]:
        return [
            w
            for w in graph.edges.get(v, {})
            if frozenset({graph.files[v], graph.files[w]}) not in fixed
        ]

    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph.files):
        if start in index:
            continue
        # Iterative Tarjan: (node, iterator over its successors).
        work: list[tuple[str, Iterator[str]]] = []
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        work.append((start, iter(succ(start))))
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(succ(w))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def describe(graph: Graph, comp: list[str]) -> str:
    """A circle as its files and the edges within it (with the line of each)."""
    inside = set(comp)
    files = ", ".join(graph.files[m] for m in comp)
    edges = [
        f"    {graph.files[a]}:{line} uses {graph.files[b]}"
        for a in comp
        for b, line in sorted(graph.edges.get(a, {}).items())
        if b in inside
    ]
    return f"import circle between {files}:\n" + "\n".join(edges)


# -- Rust --------------------------------------------------------------------------

# Comments, string and char literals: blanked (newlines kept) before paths are read.
_RUST_NOISE = re.compile(
    r"//[^\n]*|/\*.*?\*/|b?r(#*)\".*?\"\1|b?\"(?:\\.|[^\"\\])*\"|b?'(?:\\.|[^'\\])'",
    re.DOTALL,
)
_MOD_DECL = re.compile(
    r"^\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.MULTILINE
)
_INLINE_MOD = re.compile(r"\bmod\s+(\w+)\s*\{")
_USE = re.compile(r"\buse\s+([^;]*);")
_PATH = re.compile(r"(?<![\w:])\$?((?:crate|super|self)(?:\s*::\s*\w+)+)")


def _blank(m: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def strip_rust(text: str) -> str:
    return _RUST_NOISE.sub(_blank, text)


def _expand_use(tree: str) -> list[str]:
    """``a::{b, c::{d, self}}`` -> ``a::b``, ``a::c::d``, ``a::c``."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))

    def split_top(s: str) -> list[str]:
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        return parts

    def expand(prefix: str, s: str) -> list[str]:
        i = s.find("{")
        if i < 0:
            path = prefix + s
            path = path.removesuffix("::self")
            return [path.rstrip(":*").rstrip(":")]
        head, body = s[:i], s[i + 1 : s.rfind("}")]
        return [
            p for part in split_top(body) if part for p in expand(prefix + head, part)
        ]

    return expand("", tree)


def rust_modules(src: Path, root: Path) -> dict[str, Path]:
    """Module name (``a::b``; the crate root is ``""``) -> file, from the crate
    roots' ``mod`` declarations."""
    out: dict[str, Path] = {}
    for top in ("lib.rs", "main.rs"):
        if (src / top).is_file():
            todo = [("", src / top)]
            while todo:
                name, path = todo.pop()
                if name in out:
                    continue
                out[name] = path
                # Children of lib.rs, main.rs and x/mod.rs sit beside them; of x.rs, in x/.
                here = (
                    path.parent
                    if path.name in ("lib.rs", "main.rs", "mod.rs")
                    else path.with_suffix("")
                )
                for m in _MOD_DECL.finditer(
                    strip_rust(path.read_text(errors="replace"))
                ):
                    child = m.group(1)
                    for f in (here / f"{child}.rs", here / child / "mod.rs"):
                        if f.is_file():
                            todo.append((f"{name}::{child}" if name else child, f))
                            break
    return out


def rust_graph(src: Path, root: Path) -> Graph:
    g = Graph(sep="::")
    modules = rust_modules(src, root)
    g.files = {name: p.relative_to(root).as_posix() for name, p in modules.items()}
    for name, path in modules.items():
        text = strip_rust(path.read_text(errors="replace"))
        own = name.split("::") if name else []
        # Inline modules (``mod tests { ... }``): their spans, for ``super``/``self``.
        spans = []
        for m in _INLINE_MOD.finditer(text):
            depth, i = 0, m.end() - 1
            while i < len(text):
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                if depth == 0:
                    break
                i += 1
            spans.append((m.start(), i, m.group(1)))

        def module_at(
            offset: int, own: list[str] = own, spans: list[tuple[int, int, str]] = spans
        ) -> list[str]:
            return own + [n for s, e, n in spans if s <= offset <= e]

        refs: list[tuple[int, str]] = []
        used = []
        for m in _USE.finditer(text):
            used.append((m.start(), m.end()))
            body = m.group(1)
            if not re.match(r"\s*(?:::)?\s*(?:crate|super|self)\b", body):
                continue
            refs.extend((m.start(), p) for p in _expand_use(body.lstrip(": ")))
        for m in _PATH.finditer(text):
            if not any(s <= m.start() < e for s, e in used):
                refs.append((m.start(), re.sub(r"\s+", "", m.group(1))))
        for offset, ref in refs:
            segments = [s for s in ref.split("::") if s]
            at = module_at(offset)
            base: list[str] = []
            i = 0
            if segments and segments[0] == "crate":
                base, i = [], 1
            else:
                base = list(at)
                while i < len(segments) and segments[i] in ("super", "self"):
                    if segments[i] == "super":
                        base = base[:-1]
                    i += 1
            target = g.deepest(base + segments[i:])
            if target is not None and target != name:
                g.add(name, target, text.count("\n", 0, offset) + 1)
    return g


# -- Python ------------------------------------------------------------------------


def _python_package_roots(root: Path) -> list[Path]:
    out = []
    for top in ("python", "bench"):
        d = root / top
        if d.is_dir():
            out.extend(
                p
                for p in sorted(d.iterdir())
                if p.is_dir()
                and (p / "__init__.py").is_file()
                and not is_test(f"{top}/{p.name}/x")
            )
    return out


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import that runs, at any depth (not under ``if TYPE_CHECKING:``)."""
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            todo.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        todo.extend(ast.iter_child_nodes(node))


def python_graph(package: Path, root: Path) -> Graph:
    g = Graph(sep=".")
    base = package.parent
    paths: dict[str, Path] = {}
    for p in _walk(root, package.relative_to(root).as_posix(), ".py"):
        parts = list(p.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        paths[".".join(parts)] = p
    g.files = {name: p.relative_to(root).as_posix() for name, p in paths.items()}
    for name, path in paths.items():
        is_pkg = path.name == "__init__.py"
        pkg = name.split(".") if is_pkg else name.split(".")[:-1]
        try:
            tree = ast.parse(path.read_text(errors="replace"), str(path))
        except SyntaxError:
            continue
        for node in _imports(tree):
            targets: list[list[str]] = []
            if isinstance(node, ast.Import):
                targets = [a.name.split(".") for a in node.names]
            else:
                if node.level:
                    head = (
                        pkg[: len(pkg) - (node.level - 1)]
                        if node.level > 1
                        else list(pkg)
                    )
                else:
                    head = []
                mod = head + (node.module.split(".") if node.module else [])
                targets = [[*mod, a.name] for a in node.names if a.name != "*"] or [mod]
            for t in targets:
                if not t or t[0] != package.name:
                    continue
                dst = g.deepest(t)
                if dst is not None and dst != name:
                    g.add(name, dst, node.lineno)
    return g


# -- all ---------------------------------------------------------------------------


def graphs(root: Path) -> Iterable[Graph]:
    crates = root / "crates"
    if crates.is_dir():
        for crate in sorted(crates.iterdir()):
            if (crate / "src").is_dir():
                yield rust_graph(crate / "src", root)
    for package in _python_package_roots(root):
        yield python_graph(package, root)


def check(root: Path) -> list[str]:
    """Every violation under ``root``, one message each."""
    problems = long_files(root)
    for g in graphs(root):
        for comp in circles(g):
            problems.append(describe(g, comp))
    return problems


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    problems = check(root)
    for p in problems:
        print(f"check_layout: {p}", file=sys.stderr)
    if problems:
        print(
            f"check_layout: {len(problems)} problem(s); see the rules in scripts/check_layout.py",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
