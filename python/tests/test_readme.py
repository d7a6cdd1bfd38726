"""The README's examples run as written: its Python example, and every shell
example with `thaw` commands (```sh or ```console blocks), each as a bash script
in an empty directory against real servers.

A shell example may be preceded by an HTML comment the test reads (and a reader of
the rendered README does not see)::

    <!-- readme-test
    skip (set-up)            the block only sets things up (make demo, make test): not run
    cluster                  a local cluster runs first (2 workers, 1 MiB blocks),
                             THAW_MASTER names it
    s3: BUCKET/KEY           a SeaweedFS serves BUCKET with an object at KEY; its
                             credentials are in the environment, and its endpoint
                             replaces the README's http://127.0.0.1:8333
    before: COMMAND          run first (files the example reads)
    after: COMMAND           run last (checks what it wrote)
    replace: OLD=NEW ...     rewrite paths and addresses of a real deployment
                             (/etc/thaw, 10.0.0.1) to ones this machine has
    expect: TEXT             the output contains TEXT (backslash escapes allowed)
    -->

Every port a README example names (19998, 19999, 29998) is swapped for a free one,
so the examples run beside other clusters on this machine. Servers an example starts
in the background are stopped when it ends."""

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
README = (ROOT / "README.md").read_text()
PORTS = ("19998", "19999", "29998")
S3_ENDPOINT = "http://127.0.0.1:8333"
BLOCK = re.compile(r"(?:<!-- readme-test(?P<tags>.*?)-->\n)?```(?P<lang>sh|console)\n(?P<body>.*?)```", re.S)


@dataclass
class Example:
    line: int
    body: str
    flags: set[str] = field(default_factory=set)
    values: dict[str, list[str]] = field(default_factory=dict)

    def value(self, key: str) -> list[str]:
        return self.values.get(key, [])


def _commands(body: str) -> list[str]:
    lines = [ln.strip().removeprefix("$ ") for ln in body.splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def _examples() -> list[Example]:
    out = []
    for m in BLOCK.finditer(README):
        body = m.group("body")
        if not any(re.match(r"(\S+=\S+ )*thaw\b", c) for c in _commands(body)):
            continue
        ex = Example(README[: m.start("body")].count("\n") + 1, body)
        for raw in (m.group("tags") or "").strip().removeprefix(":").splitlines():
            tag = raw.strip()
            key, sep, value = tag.partition(":")
            if sep and key.strip() in ("s3", "before", "after", "replace", "expect"):
                ex.values.setdefault(key.strip(), []).append(value.strip())
            elif tag:
                ex.flags.add(tag)
        out.append(ex)
    return out


EXAMPLES = _examples()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_every_shell_example_runs_or_is_only_set_up() -> None:
    assert len(EXAMPLES) >= 6, [e.line for e in EXAMPLES]
    for ex in EXAMPLES:
        unknown = ex.flags - {"skip (set-up)", "cluster"}
        assert not unknown, f"README line {ex.line}: unknown readme-test tags {unknown}"
        if "skip (set-up)" in ex.flags:
            # Only set-up may be skipped: building, installing, the test run itself.
            assert all(c.startswith("make ") for c in _commands(ex.body)), f"README line {ex.line}"


@contextlib.contextmanager
def _fixtures(ex: Example, tmp: Path, env: dict[str, str]) -> Iterator[dict[str, str]]:
    """What the example's tags ask for; yields text replacements."""
    replace = {p: str(_free_port()) for p in PORTS}
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


@pytest.mark.parametrize(
    "ex", [e for e in EXAMPLES if "skip (set-up)" not in e.flags], ids=lambda e: f"README-line-{e.line}"
)
def test_the_readme_shell_example_runs(ex: Example, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THAW_", "AWS_"))}
    bins = [str(Path(find_binary()).parent), str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join([*bins, env["PATH"]])
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
    assert p.returncode == 0, f"README line {ex.line}:\n{script}\n{said}"
    for want in ex.value("expect"):
        assert want.encode().decode("unicode_escape") in stdout, stdout


def test_the_readme_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert blocks, "no Python example in the README"
    out = subprocess.run(
        [sys.executable, "-c", blocks[0]], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "'job_id': 'daily-report'" in out.stdout
