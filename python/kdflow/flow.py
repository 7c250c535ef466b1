"""The kernel-level dataflow graph (kdflow/1 JSON, docs/schema.md) as typed Python objects.

Each object keeps the JSON it came from in `raw` (every field schema.md documents, also those
not lifted into attributes here)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple


@dataclass
class Buffer:
    """A tensor the model's kernels read or write: a graph entry, a workspace, a param, an input."""
    id: int
    name: str
    kind: str                       # "input" | "param" | "intermediate" | "output" | "workspace"
    dtype: str
    shape: List[int]
    bytes: int
    storage_id: Optional[int]       # buffers sharing a storage id share memory (TVM's pooling)
    per_rank: bool                  # a sharded build: the bytes may differ between ranks
    raw: Dict[str, Any] = field(repr=False)


@dataclass
class Arg:
    """One argument of a launch or library call: a buffer (with its byte offset and what the
    kernel does through it) or a scalar (its value and the host expression it came from)."""
    buffer: Optional[int]
    offset: int
    access: str                     # "read" | "write" | "readwrite" | "unknown" (scalars: "")
    dtype: str
    value: Any
    expr: Optional[str]
    raw: Dict[str, Any] = field(repr=False)


@dataclass
class Launch:
    """A kernel launch, in launch order (`id`)."""
    id: int
    name: str
    node: int
    function: str
    grid: Tuple[int, int, int]
    block: Tuple[int, int, int]
    dynamic_shared_memory: int
    args: List[Arg]
    raw: Dict[str, Any] = field(repr=False)


@dataclass
class LibraryCall:
    """A call into a library (cuBLAS) or, in a sharded build, a collective between ranks."""
    id: int
    name: str
    node: int
    after_kernel: int
    args: List[Arg]
    collective: Optional[str]       # "allreduce", "allgather", ... (None: not a collective)
    bytes: Optional[int]            # a collective: the bytes each rank sends
    raw: Dict[str, Any] = field(repr=False)


@dataclass
class Node:
    """A graph node (Relay) or VM call (Relax): the kernels and library calls it makes."""
    id: int
    name: str
    op: str
    function: str
    inputs: List[int]
    outputs: List[int]
    kernels: List[int]
    library_calls: List[int]
    ops: List[str]                  # the Relay/Relax operators fused into the function
    session_step: str
    raw: Dict[str, Any] = field(repr=False)


@dataclass
class Flow:
    """What `kdflow extract` writes: every launch in order with the buffer behind each argument."""
    schema: str
    ranks: int
    buffers: List[Buffer]
    launches: List[Launch]
    library_calls: List[LibraryCall]
    nodes: List[Node]
    inputs: List[int]
    params: List[int]
    outputs: List[int]
    summary: Dict[str, Any]
    sources: Dict[str, Any]
    raw: Dict[str, Any] = field(repr=False)

    @property
    def collectives(self) -> List[LibraryCall]:
        return [c for c in self.library_calls if c.collective]

    def buffer(self, name: str) -> Buffer:
        """The first buffer of that name."""
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)


def _arg(a: Dict[str, Any]) -> Arg:
    return Arg(buffer=a.get("buffer"), offset=int(a.get("offset", 0) or 0), access=a.get("access", ""),
               dtype=a.get("dtype", ""), value=a.get("value"), expr=a.get("expr"), raw=a)


def _dims(v: Any) -> Tuple[int, int, int]:
    v = list(v or [1, 1, 1]) + [1, 1, 1]
    return int(v[0]), int(v[1]), int(v[2])


def from_json(d: Dict[str, Any]) -> Flow:
    """A Flow from the parsed kdflow/1 JSON."""
    buffers = [Buffer(id=b["id"], name=b.get("name", ""), kind=b.get("kind", ""), dtype=b.get("dtype", ""),
                      shape=list(b.get("shape", [])), bytes=int(b.get("bytes", 0)), storage_id=b.get("storage_id"),
                      per_rank=bool(b.get("per_rank", False)), raw=b) for b in d.get("buffers", [])]
    launches = [Launch(id=k["id"], name=k["name"], node=k.get("graph_node", -1), function=k.get("function", ""),
                       grid=_dims(k.get("grid")), block=_dims(k.get("block")),
                       dynamic_shared_memory=int(k.get("dynamic_shared_memory", 0)),
                       args=[_arg(a) for a in k.get("args", [])], raw=k) for k in d.get("kernels", [])]
    calls = [LibraryCall(id=c["id"], name=c["name"], node=c.get("graph_node", -1),
                         after_kernel=c.get("after_kernel", -1), args=[_arg(a) for a in c.get("args", [])],
                         collective=c.get("collective"), bytes=c.get("bytes"), raw=c)
             for c in d.get("library_calls", [])]
    nodes = [Node(id=n["id"], name=n.get("name", ""), op=n.get("op", ""), function=n.get("function", ""),
                  inputs=list(n.get("inputs", [])), outputs=list(n.get("outputs", [])),
                  kernels=list(n.get("kernels", [])), library_calls=list(n.get("library_calls", [])),
                  ops=[o.get("name", "") if isinstance(o, dict) else str(o) for o in n.get("relay_ops", [])],
                  session_step=n.get("session_step", ""), raw=n) for n in d.get("nodes", [])]
    return Flow(schema=d.get("schema", ""), ranks=int(d.get("ranks", 1)), buffers=buffers, launches=launches,
                library_calls=calls, nodes=nodes, inputs=list(d.get("inputs", [])), params=list(d.get("params", [])),
                outputs=list(d.get("outputs", [])), summary=dict(d.get("summary", {})),
                sources=dict(d.get("sources", {})), raw=d)
