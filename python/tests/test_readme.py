"""The examples of README.md and of every docs/*.md page run as written: each
Python example (```python blocks) as a script, and every shell example with `thaw`
commands (```sh or ```console blocks) as a bash script in an empty directory
against real servers. Each example is a test of its own, named by its page and
line (``docs/cli.md:42``), so a failure says where to look. Relative links between
the pages resolve, anchors included.

An example may be preceded by an HTML comment the test reads (and a reader of the
rendered page does not see)::

    <!-- readme-test
    skip (set-up)            the block only sets things up (make demo, make test): not run
    cluster                  a local cluster runs first (2 workers, 1 MiB blocks),
                             THAW_MASTER names it
    s3: BUCKET/KEY           a SeaweedFS serves BUCKET with an object at KEY; its
                             credentials are in the environment, and its endpoint
                             replaces the page's http://127.0.0.1:8333
    before: COMMAND          run first (files the example reads)
    after: COMMAND           run last (checks what it wrote)
    replace: OLD=NEW ...     rewrite paths and addresses of a real deployment
                             (/etc/thaw, 10.0.0.1) to ones this machine has
    expect: TEXT             the output contains TEXT (backslash escapes allowed)
    -->

Python examples take `expect:` only; they run with the repository as their working
directory. Every port a shell example names (19998, 19999, 29998) is swapped for a
free one, so the examples run beside other clusters on this machine. Servers an
example starts in the background are stopped when it ends."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import thaw
from thaw.cluster import find_binary

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PORTS = ("19998", "19999", "29998")
S3_ENDPOINT = "http://127.0.0.1:8333"
BLOCK = re.compile(
    r"(?:<!-- readme-test(?P<tags>.*?)-->\n)?```(?P<lang>sh|console|python)\n(?P<body>.*?)```", re.S
)
KEYS = ("s3", "before", "after", "replace", "expect")


@dataclass
class Example:
    page: str
    line: int
    lang: str
    body: str
    flags: set[str] = field(default_factory=set)
    values: dict[str, list[str]] = field(default_factory=dict)

    def value(self, key: str) -> list[str]:
        return self.values.get(key, [])

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _commands(body: str) -> list[str]:
    lines = [ln.strip().removeprefix("$ ") for ln in body.splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def _examples(page: Path) -> list[Example]:
    text = page.read_text()
    name = str(page.relative_to(ROOT))
    out = []
    for m in BLOCK.finditer(text):
        lang, body = m.group("lang"), m.group("body")
        if lang != "python" and not any(re.match(r"(\S+=\S+ )*thaw\b", c) for c in _commands(body)):
            continue
        ex = Example(name, text[: m.start("body")].count("\n") + 1, lang, body)
        for raw in (m.group("tags") or "").strip().removeprefix(":").splitlines():
            tag = raw.strip()
            key, sep, value = tag.partition(":")
            if sep and key.strip() in KEYS:
                ex.values.setdefault(key.strip(), []).append(value.strip())
            elif tag:
                ex.flags.add(tag)
        out.append(ex)
    return out


EXAMPLES = [ex for page in PAGES for ex in _examples(page)]
SHELL = [e for e in EXAMPLES if e.lang != "python" and "skip (set-up)" not in e.flags]
PYTHON = [e for e in EXAMPLES if e.lang == "python"]


#: Ports each example port stands for: `thaw local --port P` puts its workers on
#: the ports after P, and `--metrics-port M` the workers' metrics on M+1, M+2...
PORT_RUN = 4


def _free_ports(count: int) -> list[int]:
    """``count`` base ports, each the first of :data:`PORT_RUN` free ports, the runs
    apart (the tests run in parallel, so a port taken after a check is possible,
    but a run that is free as a whole is much likelier to stay so)."""
    chosen: list[int] = []
    while len(chosen) < count:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        run = range(base, base + PORT_RUN)
        if base + PORT_RUN > 65535 or any(abs(base - c) < PORT_RUN for c in chosen):
            continue
        try:
            with contextlib.ExitStack() as held:
                for port in run:
                    sock = held.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        chosen.append(base)
    return chosen


def test_every_example_runs_or_is_only_set_up() -> None:
    pages = {e.page for e in EXAMPLES}
    assert "README.md" in pages and len(pages) >= 5, pages
    assert len(SHELL) >= 8 and len(PYTHON) >= 4, [e.where for e in EXAMPLES]
    for ex in EXAMPLES:
        unknown = ex.flags - {"skip (set-up)", "cluster"}
        assert not unknown, f"{ex.where}: unknown readme-test tags {unknown}"
        if ex.lang == "python":
            assert not ex.flags and set(ex.values) <= {"expect"}, (
                f"{ex.where}: a Python example takes expect: only"
            )
        if "skip (set-up)" in ex.flags:
            # Only set-up may be skipped: building, installing, the test run itself.
            assert all(c.startswith("make ") for c in _commands(ex.body)), ex.where


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes."""
    out = set()
    in_code = False
    for ln in page.read_text().splitlines():
        if ln.startswith("```"):
            in_code = not in_code
        elif not in_code and ln.startswith("#"):
            title = ln.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_links_resolve(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links that lead nowhere: {broken}"


@contextlib.contextmanager
def _fixtures(ex: Example, tmp: Path, env: dict[str, str]) -> Iterator[dict[str, str]]:
    """What the example's tags ask for; yields text replacements."""
    replace = {p: str(port) for p, port in zip(PORTS, _free_ports(len(PORTS)), strict=True)}
    for spec in ex.value("replace"):
        for pair in spec.split():
            old, new = pair.split("=", 1)
            replace[old] = new
    with contextlib.ExitStack() as stack:
        if "cluster" in ex.flags:
            c = stack.enter_context(thaw.LocalCluster(ufs=tmp / "cluster-ufs", workers=2, block_size="1MiB"))
            env["THAW_MASTER"] = c.master
        for spec in ex.value("s3"):
            from thaw.seaweed import SeaweedS3

            bucket, _, key = spec.partition("/")
            s3 = stack.enter_context(SeaweedS3([bucket]))
            env.update(s3.env)
            if key:
                with s3.filesystem().open_output_stream(f"{bucket}/{key}") as out:
                    out.write(b"day,sales\n1,42\n")
            replace[S3_ENDPOINT] = s3.endpoint
        yield replace


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THAW_", "AWS_"))}
    bins = [str(Path(find_binary()).parent), str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join([*bins, env["PATH"]])
    return env


def _check_output(ex: Example, stdout: str) -> None:
    for want in ex.value("expect"):
        assert want.encode().decode("unicode_escape") in stdout, (
            f"{ex.where}: no {want!r} in\n{stdout[-3000:]}"
        )


@pytest.mark.parametrize("ex", SHELL, ids=lambda e: e.where)
def test_the_shell_example_runs(ex: Example, tmp_path: Path) -> None:
    env = _clean_env()
    with _fixtures(ex, tmp_path, env) as replace:
        script = "\n".join([*ex.value("before"), ex.body, *ex.value("after")])
        # Longest first: a path is rewritten before any of its prefixes.
        for old in sorted(replace, key=len, reverse=True):
            script = script.replace(old, replace[old])
        # Servers started in the background go when the example ends (and on
        # a timeout, its whole process group).
        kill = "kill $(jobs -p) 2>/dev/null || true"
        stop = f"trap '{kill}; sleep 1; {kill.replace('kill', 'kill -9', 1)}' EXIT\n"
        p = subprocess.Popen(
            ["bash", "-e", "-o", "pipefail", "-c", stop + script], cwd=tmp_path, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            stdout, stderr = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            stdout, stderr = p.communicate()
    said = f"--- stdout\n{stdout[-3000:]}\n--- stderr\n{stderr[-3000:]}"
    assert p.returncode == 0, f"{ex.where}:\n{script}\n{said}"
    _check_output(ex, stdout)


@pytest.mark.parametrize("ex", PYTHON, ids=lambda e: e.where)
def test_the_python_example_runs(ex: Example) -> None:
    env = _clean_env()
    out = subprocess.run(
        [sys.executable, "-c", ex.body], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, f"{ex.where}:\n{out.stderr[-3000:]}"
    _check_output(ex, out.stdout)
