"""Lineage (Tachyon, section 2.3-2.5): which program derives which files from which.

A program that reads files A1..An and writes B1..Bm tells Thaw so before it
writes: the inputs by file id (FID, immutable: a renamed input is still the same
input, a replaced one is not), the output paths, the command that reruns it, and
its configuration as bytes that only the program's wrapper understands. Files
then written at the output paths are tied to the entry, so a file lost before
its checkpoint can be rebuilt by running the program again.

>>> import thaw
>>> fs = thaw.ThawFileSystem()   # the cluster THAW_MASTER names
>>> fs.pipe("/logs/day1", b"ok\\nERROR disk full\\nok\\n")
>>> @thaw.lineage.step(inputs=["/logs/day1"], outputs=["/errors/day1"], kind="narrow")
... def grep(inputs, outputs, *, pattern):
...     with fs.open(inputs[0], "rb") as src, fs.open(outputs[0], "wb") as dst:
...         dst.writelines(line for line in src if pattern.encode() in line)
>>> grep(pattern="ERROR")   # records the lineage (its keyword arguments: JSON), then runs the step
>>> fs.cat("/errors/day1")
b'ERROR disk full\\n'

:func:`step` is the framework wrapper of Tachyon, section 2.4 for Python (and Dask)
code: the function's module and name, its inputs and outputs, and its keyword
arguments (JSON) are the configuration; ``python -m thaw rerun
--lineage N`` is the command that runs it again. :func:`submit` records any
other program (a shell pipeline, a Spark job) with its own command line.

A lineage's ``kind`` is its dependency (section 2.4): ``"narrow"`` (output i
from input i alone: a map, a filter) or ``"wide"`` (every output from every
input: a shuffle, a join; the default). To rebuild lost outputs, the master
reruns a narrow step on the lost partitions alone, a wide one whole; the rerun
is told which outputs to produce (``THAW_REBUILD_OUTPUTS``), and a narrow
step's function is then called with just those partitions' inputs and outputs.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ._context import current_step_master
from .client import Client

__all__ = ["get", "ls", "rerun", "step", "submit"]

F = TypeVar("F", bound=Callable[..., Any])

#: Format of the configuration :func:`step` records.
STEP_FORMAT = "thaw.lineage.step/1"


def _client(client: Client | None) -> Client:
    return client or Client()


def _fid(c: Client, x: int | str) -> int:
    if isinstance(x, bool):
        raise TypeError("an input is a FID (int) or a path (str)")
    if isinstance(x, int):
        return x
    info = c.stat(x)
    if info["type"] == "directory":
        raise IsADirectoryError(f"input {x} is a directory: name its files")
    return int(info["file_id"])


def submit(
    inputs: Sequence[int | str],
    outputs: Sequence[str],
    command: Sequence[str],
    config: bytes = b"",
    kind: str = "wide",
    *,
    client: Client | None = None,
) -> dict[str, Any]:
    """Records a lineage entry before its outputs are written. ``inputs``: FIDs,
    or paths taken as the FIDs of the files there now; ``outputs``: paths that
    do not exist yet; ``command``: the argv that reruns the program (runnable
    on the master's host); ``config``: opaque bytes (at most 1 MiB); ``kind``:
    "narrow" (output i from input i alone) or "wide". Returns the entry."""
    c = _client(client)
    fids = [_fid(c, x) for x in inputs]
    return c.native().submit_dependency(fids, list(outputs), list(command), bytes(config), kind)


def get(what: int | str, *, client: Client | None = None) -> dict[str, Any]:
    """A lineage entry by id, or the one that wrote the file at a path."""
    c = _client(client)
    if isinstance(what, int):
        return c.native().lineage(what, "")
    return c.native().lineage(0, what)


def ls(*, client: Client | None = None) -> list[dict[str, Any]]:
    """Every lineage entry."""
    return _client(client).native().lineages()


def _where(fn: Callable[..., Any]) -> dict[str, str]:
    """How a rerun finds ``fn``: its module (or, for a script, its file) and name."""
    name = fn.__qualname__
    if "<locals>" in name or "<lambda>" in name:
        raise ValueError(
            f"{name}: a lineage step must be defined at module level, so that a rerun can import it"
        )
    module = fn.__module__
    if module == "__main__":
        path = getattr(sys.modules["__main__"], "__file__", None)
        if not path:
            raise ValueError(f"{name} is defined in an interactive session: a rerun could not find it")
        return {"file": os.path.abspath(path), "name": name}
    return {"module": module, "name": name}


class step:
    """Declares a step's inputs, outputs and how to rerun it, in one line.

    As a decorator of ``fn(inputs, outputs, **kwargs)`` (module level): each
    call records a lineage entry (the function, the paths and the keyword
    arguments, which must be JSON, are the configuration), then runs ``fn``
    with the inputs' and outputs' paths. As a context manager, with
    ``command`` (and ``config``) given: records the entry on entering; the
    block writes the outputs.
    """

    def __init__(
        self,
        inputs: Sequence[int | str] = (),
        outputs: Sequence[str] = (),
        *,
        kind: str = "wide",
        command: Sequence[str] | None = None,
        config: bytes = b"",
        client: Client | None = None,
    ) -> None:
        if not outputs:
            raise ValueError("a lineage step needs at least one output")
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.kind = kind
        self.command = list(command) if command is not None else None
        self.config = config
        self.client = client
        self.lineage: dict[str, Any] | None = None

    def __call__(self, fn: F) -> F:
        where = _where(fn)

        @functools.wraps(fn)
        def run(**kwargs: Any) -> Any:
            c = _client(self.client)
            try:
                recorded = json.dumps(kwargs, sort_keys=True)
            except TypeError as e:
                why = f"{fn.__qualname__}: a step's keyword arguments are its configuration: {e}"
                raise TypeError(why) from e
            fids = [_fid(c, x) for x in self.inputs]
            config = {
                "format": STEP_FORMAT,
                "function": where,
                "kwargs": json.loads(recorded),
            }
            command = self.command or [sys.executable, "-m", "thaw", "rerun"]
            self.lineage = c.native().submit_dependency(
                fids, self.outputs, command, json.dumps(config).encode(), self.kind
            )
            inputs = [i["path"] for i in self.lineage["inputs"]]
            token = current_step_master.set(c.master)
            try:
                return fn(inputs, [o["path"] for o in self.lineage["outputs"]], **kwargs)
            finally:
                current_step_master.reset(token)

        run.lineage_step = self  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    def __enter__(self) -> step:
        if self.command is None:
            raise ValueError("step(...) as a context manager needs command= (the argv that reruns the block)")
        self.lineage = submit(
            self.inputs, self.outputs, self.command, self.config, self.kind, client=self.client
        )
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _load(where: dict[str, str]) -> Callable[..., Any]:
    if "module" in where:
        obj: Any = importlib.import_module(where["module"])
    else:
        spec = importlib.util.spec_from_file_location("__thaw_step__", where["file"])
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {where['file']}")
        obj = importlib.util.module_from_spec(spec)
        sys.modules["__thaw_step__"] = obj
        spec.loader.exec_module(obj)
    for part in where["name"].split("."):
        obj = getattr(obj, part)
    # The decorated name is the recording wrapper; run the function itself.
    return getattr(obj, "__wrapped__", obj)


def rerun(lineage_id: int, outputs: Sequence[int] | None = None, *, client: Client | None = None) -> Any:
    """Runs a :func:`step`'s function again, as its lineage recorded it, on
    its inputs' paths as of now. ``outputs``: the indices of the outputs to
    produce (the master's rerun passes the lost ones, ``THAW_REBUILD_OUTPUTS``);
    a narrow step's function is called with those partitions alone (input i
    and output i, for each i, in order), a wide step's runs whole. ``None``:
    every output."""
    entry = get(lineage_id, client=client)
    try:
        config = json.loads(entry["config"])
        assert config["format"] == STEP_FORMAT
    except (ValueError, KeyError, AssertionError) as e:
        raise ValueError(f"lineage {lineage_id} was not recorded by thaw.lineage.step: {e}") from e
    ins, outs = entry["inputs"], [o["path"] for o in entry["outputs"]]
    if outputs is not None and entry["kind"] == "narrow":
        picked = sorted(set(outputs))
        bad = [i for i in picked if not 0 <= i < len(outs)]
        if bad:
            raise ValueError(f"lineage {lineage_id} has {len(outs)} outputs: no output {bad}")
        ins, outs = [ins[i] for i in picked], [outs[i] for i in picked]
    gone = [i["fid"] for i in ins if not i["path"]]
    if gone:
        raise FileNotFoundError(f"lineage {lineage_id}: inputs {gone} no longer exist")
    fn = _load(config["function"])
    inputs = [i["path"] for i in ins]
    token = current_step_master.set(_client(client).master)
    try:
        return fn(inputs, outs, **config["kwargs"])
    finally:
        current_step_master.reset(token)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m thaw", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rerun", help="run a thaw.lineage.step again")
    r.add_argument("--lineage", type=int, default=int(os.environ.get("THAW_LINEAGE_ID", "0") or 0))
    r.add_argument(
        "--outputs",
        default=os.environ.get("THAW_REBUILD_OUTPUTS"),
        help="the outputs to produce, 0-based indices, comma separated (default: THAW_REBUILD_OUTPUTS, "
        "else every output); a narrow step runs on those partitions alone",
    )
    args = p.parse_args(argv)
    if not args.lineage:
        p.error("--lineage (or THAW_LINEAGE_ID) is required")
    outputs = None
    if args.outputs is not None:
        try:
            outputs = [int(x) for x in args.outputs.split(",") if x.strip()]
        except ValueError:
            p.error(f"--outputs {args.outputs!r}: 0-based output indices, comma separated")
    rerun(args.lineage, outputs)
    return 0
