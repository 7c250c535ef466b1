"""kdflow from Python: the kernel-level dataflow of a TVM build, its costs, a replay, a page.

    import kdflow
    flow = kdflow.extract("my_model")                  # every launch in order, typed (kdflow.flow)
    for k in flow.launches: print(k.id, k.name, k.grid, k.block)
    table = kdflow.costs("my_model")                   # rows of the cost dataset (DataFrame: .to_pandas())
    result = kdflow.replay("my_model", backend="cpu")  # comparisons and timings
    kdflow.view("my_model", "my_model.html")

Every function drives the kdflow executable installed with this package (kdflow/bin/kdflow; or
$KDFLOW_BINARY), so its options are the command line's (docs in `kdflow CMD --help`); a failure
raises KdflowError with kdflow's one-line message and exit status. Nothing beyond the standard
library is needed; pandas, where installed, turns tables into DataFrames.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

from ._binary import KdflowError, binary, run
from .flow import Arg, Buffer, Flow, LibraryCall, Launch, Node, from_json

__all__ = ["extract", "show", "costs", "replay", "view", "codegen", "load", "binary", "version", "KdflowError",
           "Flow", "Buffer", "Launch", "LibraryCall", "Node", "Arg", "Table", "ReplayResult"]

PathLike = Union[str, "os.PathLike[str]"]


def _build_args(session: Optional[str], function: Optional[str], shards: Optional[int],
                input_shapes: Optional[Dict[str, Sequence[int]]], extra: Sequence[str]) -> List[str]:
    args: List[str] = []
    if session:
        args += ["--session", str(session)]
    if function:
        args += ["--function", function]
    if shards:
        args += ["--shards", str(int(shards))]
    for name, shape in (input_shapes or {}).items():
        args += ["--input-shape", f"{name}={'x'.join(str(int(d)) for d in shape)}"]
    return args + [str(a) for a in extra]


def version() -> str:
    """The kdflow executable's version line."""
    return run(["--version"]).stdout.strip()


def load(path: PathLike) -> Flow:
    """A flow from a kdflow/1 JSON file (`kdflow extract ... -o flow.json`)."""
    with open(path) as f:
        return from_json(json.load(f))


def extract(folder: PathLike, session: Optional[str] = None, function: Optional[str] = None,
            shards: Optional[int] = None, input_shapes: Optional[Dict[str, Sequence[int]]] = None,
            extra: Sequence[str] = ()) -> Flow:
    """`kdflow extract FOLDER`: the flow of a build folder (or model.so), typed.

    session: an LLM session, "prefill:7,decode:2" or a session file; function: the Relax VM
    function (default main); shards: the ranks of a tensor-parallel build where no
    params_shard<r>.bin says so; input_shapes: symbolic input shapes ({"x": (8, 100)});
    extra: any other extract options, as on the command line."""
    with tempfile.TemporaryDirectory(prefix="kdflow.") as tmp:
        out = os.path.join(tmp, "flow.json")
        run(["extract", os.fspath(folder), "-q", "-o", out, *_build_args(session, function, shards, input_shapes, extra)])
        return load(out)


def show(folder: PathLike, session: Optional[str] = None, function: Optional[str] = None,
         extra: Sequence[str] = ()) -> str:
    """`kdflow show FOLDER`: the table of launches, as text."""
    return run(["show", os.fspath(folder), *_build_args(session, function, None, None, extra)]).stdout


@dataclass
class Table:
    """Rows of a kdflow dataset (dicts); `to_pandas()` where pandas is installed."""
    rows: List[Dict[str, Any]]

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.rows)

    def to_pandas(self):  # type: ignore[no-untyped-def]
        import pandas  # optional: only this method needs it
        return pandas.DataFrame(self.rows)


def costs(folder: PathLike, device: str = "h100", per_kernel: bool = False, timing: Optional[PathLike] = None,
          session: Optional[str] = None, function: Optional[str] = None, shards: Optional[int] = None) -> Table:
    """`kdflow costs FOLDER --format jsonl`: FLOPs, bytes and the roofline bound per fused
    function (or per kernel), with measured times where `timing` (a --timing-json file) is given."""
    args = ["costs", os.fspath(folder), "--format", "jsonl", "-q", "--device", device]
    if per_kernel:
        args.append("--per-kernel")
    if timing:
        args += ["--timing", os.fspath(timing)]
    args += _build_args(session, function, shards, None, ())
    out = run(args).stdout
    return Table([json.loads(line) for line in out.splitlines() if line.strip()])


@dataclass
class ReplayResult:
    """What `kdflow replay` did: `status` 0 (everything compared matched), 1 (something
    differs) or 3 (nothing could have failed: no reference, or every one a constant would
    pass); `checks` the comparisons (docs/schema.md, the timing JSON's `checks`); `timing` the
    whole kdflow-replay-timing/1 document; `stdout` what replay printed."""
    status: int
    checks: List[Dict[str, Any]]
    timing: Dict[str, Any]
    stdout: str
    stderr: str = field(repr=False, default="")

    @property
    def passed(self) -> bool:
        return self.status == 0

    @property
    def kernel_times(self) -> Table:
        return Table(list(self.timing.get("kernels", [])))


def replay(folder: Optional[PathLike] = None, backend: str = "cpu", flow: Optional[PathLike] = None,
           session: Optional[str] = None, function: Optional[str] = None, repeat: int = 1, warmup: int = 0,
           rtol: Optional[float] = None, atol: Optional[float] = None, mode: str = "eager",
           inputs: Optional[Dict[str, PathLike]] = None, extra: Sequence[str] = ()) -> ReplayResult:
    """`kdflow replay FOLDER --backend cpu` (or "cuda" on a GPU): runs the flow kernel by kernel
    and compares the outputs (and, where the folder has them, every node's result) with TVM's.
    A differing output is a result (status 1), not an exception; a run that cannot happen raises
    KdflowError."""
    args: List[str] = ["replay"]
    if folder is not None:
        args.append(os.fspath(folder))
    if flow is not None:
        args += ["--flow", os.fspath(flow)]
    args += ["--backend", backend, "--mode", mode, "--repeat", str(repeat), "--warmup", str(warmup), "-q"]
    if rtol is not None:
        args += ["--rtol", repr(float(rtol))]
    if atol is not None:
        args += ["--atol", repr(float(atol))]
    for name, path in (inputs or {}).items():
        args += ["--input", f"{name}={os.fspath(path)}"]
    args += _build_args(session, function, None, None, extra)
    with tempfile.TemporaryDirectory(prefix="kdflow.") as tmp:
        timing = os.path.join(tmp, "timing.json")
        p = run([*args, "--timing-json", timing], ok=(0, 1, 3))
        doc: Dict[str, Any] = {}
        if os.path.exists(timing):
            with open(timing) as f:
                doc = json.load(f)
        elif p.returncode != 0:
            lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
            raise KdflowError(lines[-1] if lines else f"kdflow replay exited {p.returncode}", p.returncode,
                              [binary(), *args])
    return ReplayResult(status=p.returncode, checks=list(doc.get("checks", [])), timing=doc, stdout=p.stdout,
                        stderr=p.stderr)


def view(folder: PathLike, out: PathLike, timing: Optional[PathLike] = None, session: Optional[str] = None,
         function: Optional[str] = None) -> str:
    """`kdflow view FOLDER -o OUT.html`: the interactive page (OUT.json: Model Explorer's graph).
    Returns OUT."""
    args = ["view", os.fspath(folder), "-o", os.fspath(out), "-q"]
    if timing:
        args += ["--timing", os.fspath(timing)]
    run([*args, *_build_args(session, function, None, None, ())])
    return os.fspath(out)


def codegen(folder: PathLike, out: PathLike, session: Optional[str] = None, function: Optional[str] = None,
            extra: Sequence[str] = ()) -> str:
    """`kdflow codegen FOLDER -o OUT`: the model as a standalone C++17 program (docs/codegen.md).
    Returns OUT."""
    run(["codegen", os.fspath(folder), "-o", os.fspath(out), "-q", *_build_args(session, function, None, None, extra)])
    return os.fspath(out)
