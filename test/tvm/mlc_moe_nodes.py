"""MLC-LLM's mixture-of-experts kernels checked node by node, on the replayed inputs (issue 51).

TVM cannot run MLC's MoE kernels on the CPU, so no TVM reference exists for their nodes. This
check takes the replay's own dump (`kdflow replay --dump-dir`: every buffer each kernel wrote)
and, for each MoE node, recomputes in NumPy what MLC's code says the node computes
(mlc_llm/op/moe_misc.py, moe_matmul.py), from the node's inputs as the replay had them, and
compares it with what the node wrote:

- softmax: the softmax of its input over the last axis;
- top-k gating (`top{k}`, `top{k}_softmax`): each row's k largest scores, largest first, ties to
  the lower expert; the scores themselves, or their softmax over the k (norm_topk_prob);
- the expert mask ([experts, tokens], 1 where a token chose the expert) and its cumsum;
- `get_indices` (each routed instance's position in expert order, and its token),
  `get_expert_instance_indptr` (where each expert's rows start);
- `take` (rows gathered), `group_gemm` (each expert's rows times its weight),
  `moe_gemv` (one token's chosen experts), `scatter_output` (rows put back);
- the weighted sum of the experts' outputs by the gating weights.

A node's input is the dump of the kernel that last wrote its buffer before the node, a weight
from params.bin, or unknown (a library call's result, an input): a node with an unknown input is
not checked, and an MoE node not checked is a failure. Integers must be equal, floats within
rtol 1e-4 and atol 1e-5 (float16 nodes: 1e-2 and 1e-2). The check can fail: check_corrupted() swaps one token's two chosen
experts in a copy of the dump and expects the top-k node to be named.

    python mlc_moe_nodes.py KDFLOW BUILD_DIR SESSION     # exit 0 when every MoE node matches
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

#: The MoE node kinds, by the node's function name; every node of these must be checked.
KINDS: List[Tuple[str, str]] = [
    ("topk", r"top\d+(_softmax)?"),
    ("expert_mask", r".*expert_mask.*"),
    ("cumsum", r"gpu_2d_continuous_cumsum|cumsum\d*"),
    ("get_indices", r"get_indices\d*"),
    ("indptr", r"get_expert_instance_indptr\d*"),
    ("group_gemm", r"group_gemm\d*"),
    ("moe_gemv", r"moe_gemv\d*"),
    ("scatter", r"scatter_output\d*"),
    ("softmax", r"softmax\d*"),
    ("take", r"take\d*"),
]
#: Kinds that exist only in an MoE block: a build with none of these has nothing to check.
MOE_ONLY = {"topk", "expert_mask", "get_indices", "indptr", "group_gemm", "moe_gemv", "scatter"}


def _safe(name: str) -> str:
    """replay's dump_file_name: [A-Za-z0-9_.-] kept, at most 160 characters."""
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in name[:160])


def _softmax(x: np.ndarray) -> np.ndarray:
    z = x.astype("float64")
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def _topk(scores: np.ndarray, k: int) -> np.ndarray:
    """Each row's k largest, largest first, ties to the lower index (MLC's strict > scan)."""
    return np.argsort(-scores, axis=-1, kind="stable")[:, :k].astype("int32")


class Flow:
    """A session's flow and its replay's dump: every buffer's value before each node."""

    def __init__(self, flow: Dict[str, Any], dump: str, params: Dict[str, np.ndarray]) -> None:
        self.flow, self.dump, self.params = flow, dump, params
        self.summed: List[int] = []  # the weighted sums check_nodes checked
        self.buffers = flow["buffers"]
        self.kernels = {k["id"]: k for k in flow["kernels"]}
        self.producer: Dict[int, Dict[str, Any]] = {}
        for n in flow["nodes"]:
            for b in n["outputs"]:
                self.producer[b] = n
        # (kernel id, buffer id, file) of every dumped write, in launch order.
        self.writes: List[Tuple[int, int, str]] = []
        for k in sorted(flow["kernels"], key=lambda k: k["id"]):
            for j, a in enumerate(k["args"]):
                if "buffer" in a and a.get("access") in ("write", "readwrite"):
                    f = os.path.join(dump, f"{k['id']}_{_safe(k['name'])}_arg{j}.npy")
                    if os.path.exists(f):
                        self.writes.append((k["id"], a["buffer"], f))

    def _chain(self, b: int) -> List[int]:
        out = [b]
        while "view_of" in self.buffers[out[-1]]:
            out.append(self.buffers[out[-1]]["view_of"])
        return out

    def value(self, b: int, before: int) -> Optional[np.ndarray]:
        """Buffer b as the kernel `before` (a kernel id) reads it: the latest dump of b or what
        it views, reshaped to b; a param; None when unknown."""
        meta = self.buffers[b]
        chain = self._chain(b)
        last = None
        for kid, buf, f in self.writes:
            if kid >= before:
                break
            if buf in chain:
                last = (buf, f)
        if last is None:
            root = self.buffers[chain[-1]]
            if root["kind"] == "param" and root.get("name") in self.params:
                a = self.params[root["name"]]
            else:
                return None
        else:
            a = np.load(last[1])
        raw = np.ascontiguousarray(a).view(np.uint8).reshape(-1)
        off = sum(int(self.buffers[c].get("view_offset", 0)) for c in chain[:chain.index(last[0]) if last else -1])
        n = int(np.prod(meta["shape"])) * np.dtype(meta["dtype"]).itemsize
        if off + n > raw.size:
            return None
        return raw[off:off + n].view(meta["dtype"]).reshape(meta["shape"])

    def written(self, b: int, node: Dict[str, Any]) -> Optional[np.ndarray]:
        """Output b of `node` as its last kernel left it."""
        last = max(node["kernels"]) + 1
        return self.value(b, last)


def _kind(function: str) -> Optional[str]:
    for kind, pattern in KINDS:
        if re.fullmatch(pattern, function):
            return kind
    return None


def _role(ins: List[Tuple[Dict[str, Any], np.ndarray]], *, integer: bool, ndim: Optional[int] = None,
          param: Optional[bool] = None) -> np.ndarray:
    """The one input of this dtype class (and rank, and param-ness)."""
    hits = [a for m, a in ins if np.issubdtype(a.dtype, np.integer) == integer
            and (ndim is None or a.ndim == ndim) and (param is None or (m["kind"] == "param") == param)]
    if len(hits) != 1:
        raise ValueError(f"{len(hits)} inputs of that role")
    return hits[0]


class Checker:
    """Each MoE node's expected outputs from its replayed inputs."""

    def __init__(self, flow: Flow) -> None:
        self.f = flow
        self.experts = 0  # from the last expert mask: [experts, tokens]
        self.k = 0  # the experts per token of the last weighted sum's top-k

    def expected(self, node: Dict[str, Any], kind: str, ins: List[Tuple[Dict[str, Any], np.ndarray]],
                 outs: List[Dict[str, Any]]) -> List[Optional[np.ndarray]]:
        """One array per output (None: that output is not compared, e.g. a workspace)."""
        fn = node["function"]
        if kind == "softmax":
            x = _role(ins, integer=False)
            return [_softmax(x).astype(outs[0]["dtype"])]
        if kind == "topk":
            k = int(re.match(r"top(\d+)", fn).group(1))
            x = _role(ins, integer=False)
            s = x.reshape(-1, x.shape[-1])
            idx = _topk(s, k)
            chosen = np.take_along_axis(s, idx, axis=-1)
            val = _softmax(chosen) if fn.endswith("_softmax") else chosen
            return [val.astype(o["dtype"]) if not o["dtype"].startswith("int") else idx for o in outs]
        if kind == "expert_mask":
            idx = _role(ins, integer=True)
            e, n = outs[0]["shape"][-2], outs[0]["shape"][-1]
            self.experts = int(e)
            mask = np.zeros((e, n), "int32")
            for t in range(n):
                for x in idx.reshape(n, -1)[t]:
                    mask[x, t] = 1
            return [mask.reshape(outs[0]["shape"])]
        if kind == "cumsum":
            x = _role(ins, integer=True)
            return [np.cumsum(x.reshape(-1)).astype(o["dtype"]).reshape(o["shape"])
                    if int(np.prod(o["shape"])) == x.size and ".ws" not in o.get("name", "") else None for o in outs]
        if kind == "get_indices":
            cs = _role(ins, integer=True, ndim=1)
            idx = _role(ins, integer=True, ndim=2)
            n, k = idx.shape
            rev, tok = np.zeros(n * k, "int32"), np.zeros(n * k, "int32")
            for b in range(n):
                for j in range(k):
                    p = cs[idx[b, j] * n + b] - 1
                    rev[p], tok[p] = b * k + j, b
            return [rev, tok]
        if kind == "indptr":
            cs = _role(ins, integer=True).reshape(-1)
            e = self.experts
            if e <= 0:
                raise ValueError("no expert mask before it")
            n = cs.size // e
            length = int(np.prod(outs[0]["shape"]))
            if length == e + 1:
                ptr = np.array([0] + [cs[i * n - 1] for i in range(1, e + 1)])
            else:
                ptr = np.array([cs[(i + 1) * n - 1] for i in range(e)])
            return [ptr.astype(outs[0]["dtype"])]
        if kind == "take":
            data = _role(ins, integer=False)
            idx = _role(ins, integer=True)
            rows = data.reshape(-1, data.shape[-1])
            return [rows[idx.reshape(-1)].reshape(outs[0]["shape"]).astype(outs[0]["dtype"])]
        if kind == "group_gemm":
            w = _role(ins, integer=False, ndim=3)
            x = _role(ins, integer=False, ndim=2)
            ptr = _role(ins, integer=True).reshape(-1)
            if ptr.size == w.shape[0]:
                ptr = np.concatenate([[0], ptr])
            out = np.zeros((x.shape[0], w.shape[1]), "float64")
            for e in range(w.shape[0]):
                lo, hi = int(ptr[e]), int(ptr[e + 1])
                out[lo:hi] = x[lo:hi].astype("float64") @ w[e].T.astype("float64")
            return [out.astype(outs[0]["dtype"]).reshape(outs[0]["shape"])]
        if kind == "moe_gemv":
            w = _role(ins, integer=False, ndim=3)
            x = _role(ins, integer=False, ndim=2)
            idx = _role(ins, integer=True).reshape(-1)
            rows = [x[0] if x.shape[0] == 1 else x[i] for i in range(idx.size)]
            out = np.stack([w[e].astype("float64") @ r.astype("float64") for e, r in zip(idx, rows)])
            return [out.astype(outs[0]["dtype"]).reshape(outs[0]["shape"])]
        if kind == "scatter":
            x = _role(ins, integer=False)
            idx = _role(ins, integer=True).reshape(-1)
            out = np.zeros_like(x)
            out[idx] = x
            return [out.reshape(outs[0]["shape"])]
        if kind == "weighted_sum":  # ins: (gating weights, experts' outputs), as weighted_sum() orders them
            w, y = ins[0][1].reshape(-1).astype("float64"), ins[1][1]
            k = self.k
            s = (y.reshape(w.size, -1).astype("float64") * w[:, None]).reshape(w.size // k, k, -1).sum(axis=1)
            if len(ins) == 3:  # fused with the residual's add (mixtral's decode)
                s = s.reshape(-1) + ins[2][1].reshape(-1).astype("float64")
            return [s.astype(outs[0]["dtype"]).reshape(outs[0]["shape"])]
        raise ValueError(f"no semantics for {kind}")

    def _source(self, b: int) -> Optional[Dict[str, Any]]:
        """The node that computed buffer b, through __nop views."""
        p = self.f.producer.get(b)
        while p is not None and p.get("function") == "__nop":
            p = self.f.producer.get(p["inputs"][0]) if p["inputs"] else None
        return p

    def weighted_sum(self, node: Dict[str, Any]) -> Optional[List[int]]:
        """A fused node summing the experts' outputs by the gating weights: of its inputs, one a
        top-k node's weights, one a scatter's or moe_gemv's output, and maybe a third added
        (the residual, where the name says ..._sum..._add). Its inputs in that order (and
        self.k the top-k's k), or None."""
        ins = node["inputs"]
        if len(ins) not in (2, 3) or (len(ins) == 3 and not re.search(r"_sum\d*(_reshape\d*)*_add\d*$", node["function"])):
            return None
        src = [self._source(b) for b in ins]
        kinds = [_kind(p["function"]) if p is not None and p.get("function") else None for p in src]
        w = [i for i, k in enumerate(kinds) if k == "topk" and not self.f.buffers[ins[i]]["dtype"].startswith("int")]
        y = [i for i, k in enumerate(kinds) if k in ("scatter", "moe_gemv")]
        if len(w) != 1 or len(y) != 1:
            return None
        self.k = int(re.match(r"top(\d+)", src[w[0]]["function"]).group(1))
        rest = [ins[i] for i in range(len(ins)) if i not in (w[0], y[0])]
        return [ins[w[0]], ins[y[0]], *rest]


def unsummed(flow: Flow, summed: List[int]) -> List[str]:
    """The top-k nodes whose weights feed no checked weighted sum (`summed`: those nodes' ids):
    one line each, naming the node that consumes them (fused with more than an add: MiniCPM
    scales the sum by a constant of its config)."""
    c = Checker(flow)
    out = []
    for node in flow.flow["nodes"]:
        if not node.get("kernels") or not node.get("function") or _kind(node["function"]) != "topk":
            continue
        users = [n for n in flow.flow["nodes"] if n.get("kernels") and any(
            (c._source(b) or {}).get("id") == node["id"] for b in n["inputs"])
            and n["id"] not in summed and _kind(n.get("function", "")) is None]
        if users and not any(n["id"] in summed for n in flow.flow["nodes"] if any(
                (c._source(b) or {}).get("id") == node["id"] for b in n["inputs"])):
            out.append(f"node {node['id']} ({node['name']}): its weights are summed in {users[0]['name']}, "
                       "not checked (fused with more than the sum and an add)")
    return out


def check_nodes(flow: Flow) -> Tuple[Dict[str, int], List[str]]:
    """Every MoE node of the flow: ({kind: nodes checked}, [one line per failure]); the
    weighted sums checked are counts["weighted_sum"], their nodes' ids flow.summed."""
    c = Checker(flow)
    counts: Dict[str, int] = {}
    failures: List[str] = []
    flow.summed = []
    for node in flow.flow["nodes"]:
        if not node.get("kernels") or not node.get("function"):
            continue
        kind = _kind(node["function"])
        inputs = node["inputs"]
        if kind is None:
            order = c.weighted_sum(node)
            if order is None:
                continue
            kind, inputs = "weighted_sum", order
            flow.summed.append(node["id"])
        where = f"node {node['id']} ({node['name']}, {node.get('session_step', '')})"
        first = min(node["kernels"])
        ins = [(flow.buffers[b], flow.value(b, first)) for b in inputs]
        if any(a is None for _, a in ins):
            if kind in MOE_ONLY or kind == "weighted_sum":
                failures.append(f"{where}: an input is not known from the dump (a library call's or an input)")
            continue
        outs = [flow.buffers[b] for b in node["outputs"]]
        try:
            want = c.expected(node, kind, ins, outs)
        except (ValueError, IndexError) as e:
            failures.append(f"{where}: its inputs are not those of a {kind} node ({e})")
            continue
        for b, meta, w in zip(node["outputs"], outs, want):
            if w is None:
                continue
            got = flow.written(b, node)
            if got is None:
                failures.append(f"{where}: output {meta['name']} was not dumped")
                continue
            if np.issubdtype(w.dtype, np.integer):
                bad = int((got.reshape(-1) != w.reshape(-1)).sum())
            else:
                # float16 nodes (a q0f16 / q4f16 build) against NumPy's float32: float16's rounding
                tol = dict(rtol=1e-2, atol=1e-2) if got.dtype == np.float16 else dict(rtol=1e-4, atol=1e-5)
                bad = int((~np.isclose(got.reshape(-1).astype("float32"), w.reshape(-1), **tol)).sum())
            if bad:
                failures.append(f"{where}: {meta['name']} differs from {kind}'s NumPy result in {bad} of {w.size} "
                                f"elements (max {np.abs(got.astype('float64') - w.astype('float64')).max():.3g})")
        counts[kind] = counts.get(kind, 0) + 1
    return counts, failures


def load_params(d: str, file: str = "params.bin") -> Dict[str, np.ndarray]:
    """params.bin (or a rank's params_shard<r>.bin) by name (TVM's save_param_dict, which
    kdflow_tvm writes); {} without one."""
    path = os.path.join(d, file)
    if not os.path.exists(path):
        return {}
    import tvm
    return {k: v.numpy() for k, v in tvm.runtime.load_param_dict(open(path, "rb").read()).items()}


def run_check(kdflow: str, d: str, session: str, tmp: str) -> Tuple[Flow, Dict[str, int], List[str]]:
    """Extract the session, replay it on the CPU with --dump-dir, check every MoE node."""
    return run_check_ranks(kdflow, d, session, tmp, 1)[0]


def run_check_ranks(kdflow: str, d: str, session: str, tmp: str, ranks: int,
                    replay_args: Sequence[str] = ()) -> List[Tuple[Flow, Dict[str, int], List[str]]]:
    """run_check for each rank of a sharded build (`ranks` > 1): one replay of every rank, its
    dump in DUMP/rank<r>, each rank's MoE nodes on its own dump and its params_shard<r>.bin
    (its slice of each expert's weights)."""
    flow_file = os.path.join(tmp, "moe_flow.json")
    dump = os.path.join(tmp, "moe_dump")
    shutil.rmtree(dump, ignore_errors=True)
    r = subprocess.run([kdflow, "extract", d, "-q", "--session", session, "-o", flow_file],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"mlc_moe_nodes: extract: {r.stderr.strip()[-300:]}")
    r = subprocess.run([kdflow, "replay", d, "--session", session, "--backend", "cpu", "-q", "--repeat", "1",
                        "--warmup", "0", "--dump-dir", dump, *replay_args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"mlc_moe_nodes: replay --dump-dir (exit {r.returncode}): {r.stderr.strip()[-300:]}")
    df = json.load(open(flow_file))
    out = []
    for r in range(ranks):
        flow = Flow(df, os.path.join(dump, f"rank{r}") if ranks > 1 else dump,
                    load_params(d, f"params_shard{r}.bin" if ranks > 1 else "params.bin"))
        counts, failures = check_nodes(flow)
        out.append((flow, counts, failures))
    return out


def check_corrupted(flow: Flow, tmp: str) -> List[str]:
    """The check can fail: in a copy of the dump, the first top-k node's indices of token 0 are
    swapped (its two experts exchanged); the failures check_nodes then reports."""
    node = next(n for n in flow.flow["nodes"] if n.get("kernels") and _kind(n["function"]) == "topk")
    idx_buf = next(b for b in node["outputs"] if flow.buffers[b]["dtype"].startswith("int"))
    copy = os.path.join(tmp, "moe_dump_corrupted")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(flow.dump, copy)
    bad = Flow(flow.flow, copy, flow.params)
    f = next(f for kid, b, f in bad.writes if b == idx_buf and kid in node["kernels"])
    a = np.load(f)
    a.reshape(-1)[[0, 1]] = a.reshape(-1)[[1, 0]]
    np.save(f, a)
    return check_nodes(bad)[1]


def main(argv: List[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    kdflow, d, session = argv
    tmp = tempfile.mkdtemp(prefix="kdflow_moe_nodes.")
    try:
        flow, counts, failures = run_check(kdflow, d, session, tmp)
        print(f"{os.path.basename(d)}: MoE nodes checked: {counts}")
        for line in unsummed(flow, flow.summed):
            print("not checked:", line)
        for line in failures:
            print("FAIL", line)
        corrupted = check_corrupted(flow, tmp)
        print(f"corrupted top-k indices: {corrupted[:2]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures or not corrupted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
