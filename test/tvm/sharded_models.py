"""Real sharded (tensor-parallel, TVM disco) builds for build_models.py, issue 41: one executable
every rank runs on its own slice of the weights (params_shard<r>.bin), with collectives between
them, each written through the exporter as a user would:
- tp_mlp (and tp_mlp_compiled): 2 ranks; column-parallel W1, gelu, row-parallel W2, then
  ccl_allreduce (sum) and a residual; each rank's weights are slices of one full random weight;
- tp_allgather: 2 ranks; each computes its rows of W·xᵀ, ccl_allgather joins them (axis 0),
  then the transpose and a softmax;
- tp_llm_2, tp_llm_4: llm_model.py's decoder split as MLC-LLM splits Llama at 2 and 4 ranks
  (grouped KV heads: 8 query heads and 4 KV heads in all), with a prefill:7,decode:2 session.
The references are the unsharded model's, with the full weights, run by TVM on the CPU (the
collectives need NCCL). Each builder checks that they are the sharded model's too, and fails
loudly where not: in numpy, that the split is exact (the sum over ranks of the row-parallel
products is the unsharded product); and by running every rank of the sharded module on TVM's CPU
VM, as threads of this process whose runtime.disco.allreduce / allgather are stand-ins meeting
at a barrier (Ranks), that each rank's outputs (an LLM's logits of every session step) are the
references. EXPECT says what check_models.check_sharded asserts of each."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
import threading
from typing import Any, Callable, Dict, List

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

HIDDEN, FFN, BATCH = 64, 128, 4
# llm_model.decoder_lm's size for both splits: 8 query heads sharing 4 KV heads (2 per KV head),
# so that 4 ranks still hold whole KV heads (2 query heads and 1 KV head each). Head dimension
# 32: TVM 0.27's CUDA build of one KV head shared by several query heads of dimension 16 fails
# in its TIR pipeline ("variable cse_v13 has been used before definition").
LLM_TP: Dict[str, int] = {"layers": 2, "hidden": 64, "heads": 8, "kv_heads": 4, "head_dim": 32, "ffn": 128,
                          "vocab": 256}

_AR = "runtime.disco.allreduce"
_AG = "runtime.disco.allgather"
# What check_models.check_sharded asserts beyond the files: the ranks (params_shard<r>.bin, the
# build_info's "shards") and, per VM function, how many calls of each collective TVM's own text
# of the executable makes (host.c's call sites in compiled mode). Per LLM layer, two allreduces
# (after the attention's output projection and after the MLP's down projection).
_LLM_CALLS = {"embed": {}, "prefill": {_AR: 2 * LLM_TP["layers"]}, "decode": {_AR: 2 * LLM_TP["layers"]},
              "batch_decode": {_AR: 2 * LLM_TP["layers"]}}
EXPECT: Dict[str, Dict[str, Any]] = {
    "tp_mlp": {"ranks": 2, "collectives": {"main": {_AR: 1}}},
    "tp_mlp_compiled": {"ranks": 2, "collectives": {"main": {_AR: 1}}, "compiled": True},
    "tp_allgather": {"ranks": 2, "collectives": {"main": {_AG: 1}}},
    "tp_llm_2": {"ranks": 2, "collectives": _LLM_CALLS, "session": "prefill:7,decode:2",
                 "functions": {"prefill": ["--input-shape", "x=1x7x64"], "decode": []}},
    "tp_llm_4": {"ranks": 4, "collectives": _LLM_CALLS, "session": "prefill:7,decode:2",
                 "functions": {"prefill": ["--input-shape", "x=1x7x64"], "decode": []}},
}


def _weights(rng: np.random.Generator, shape: Any) -> np.ndarray:
    """Fan-in scaled, as build_models.weights."""
    shape = [int(d) for d in shape]
    return (rng.standard_normal(shape) / np.sqrt(max(shape[-1], 1))).astype("float32")


def _gelu(x: np.ndarray) -> np.ndarray:
    """TVM's nn.gelu (the erf form)."""
    erf = np.vectorize(math.erf)
    return (0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))).astype(x.dtype)


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"sharded_models: {what}")


class Ranks:
    """`n` ranks of a sharded module run as threads of this process on TVM's CPU VM: while
    entered, runtime.disco.allreduce, allgather and broadcast_from_worker0 are stand-ins (every
    rank's tensor, met at a barrier, reduced or joined in rank order along axis 0, or rank 0's
    given to all, as NCCL's are), and disco's worker_id is the thread's rank. A check of the
    sharding, not a model of NCCL."""

    _NAMES = ("runtime.disco.allreduce", "runtime.disco.allgather", "runtime.disco.broadcast_from_worker0",
              "runtime.disco.worker_id")

    def __init__(self, tvm: Any, n: int) -> None:
        self.tvm, self.n = tvm, n
        self.barrier = threading.Barrier(n, timeout=300)
        self.slots: Dict[int, np.ndarray] = {}
        self.local = threading.local()
        self.saved: Dict[str, Any] = {}

    def _meet(self, send: Any) -> List[np.ndarray]:
        self.slots[self.local.rank] = send.numpy()
        self.barrier.wait()
        mine = [self.slots[r] for r in range(self.n)]
        self.barrier.wait()
        return mine

    def __enter__(self) -> "Ranks":
        import tvm_ffi
        ops = {0: np.sum, 1: np.prod, 2: np.min, 3: np.max, 4: np.mean}

        def allreduce(send: Any, kind: Any, in_group: Any, recv: Any) -> None:
            parts = self._meet(send)
            recv.copyfrom(ops[int(kind[0])](np.stack(parts), axis=0).astype(parts[0].dtype))

        def allgather(send: Any, in_group: Any, recv: Any) -> None:
            recv.copyfrom(np.concatenate(self._meet(send), axis=0))

        def broadcast(send: Any, in_group: Any, recv: Any) -> None:
            recv.copyfrom(self._meet(send)[0])

        def worker_id() -> Any:
            return tvm_ffi.Shape([self.local.rank])
        for name, f in zip(self._NAMES, (allreduce, allgather, broadcast, worker_id)):
            self.saved[name] = tvm_ffi.get_global_func(name, allow_missing=True)
            tvm_ffi.register_global_func(name, f, override=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        import tvm_ffi
        for name, f in self.saved.items():
            if f is not None:
                tvm_ffi.register_global_func(name, f, override=True)

    def run(self, body: Callable[[int], Any]) -> List[Any]:
        """body(rank) on every rank at once; each one's result, in rank order."""
        results: List[Any] = [None] * self.n
        errors: List[BaseException] = []

        def one(r: int) -> None:
            self.local.rank = r
            try:
                results[r] = body(r)
            except BaseException as e:  # noqa: B902 (reported below, the others released)
                errors.append(e)
                self.barrier.abort()
        threads = [threading.Thread(target=one, args=(r,)) for r in range(self.n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise SystemExit(f"sharded_models: running the ranks on the CPU: {type(errors[0]).__name__}: {errors[0]}")
        return results


def _check_ranks(tvm: Any, mod: Any, names: List[str], shards: List[Dict[str, np.ndarray]],
                 inputs: List[np.ndarray], out: str, what: str) -> None:
    """Every rank of the sharded `mod` (main, packed params), run on the CPU, gives output_0.npy."""
    from tvm import relax
    ex = tvm.compile(mod, "llvm")
    want = np.load(os.path.join(out, "output_0.npy"))

    def rank(r: int) -> np.ndarray:
        vm = relax.VirtualMachine(ex, tvm.cpu())
        args = [tvm.runtime.tensor(a) for a in inputs]
        return vm["main"](*args, [tvm.runtime.tensor(shards[r][n]) for n in names]).numpy()
    with Ranks(tvm, len(shards)) as ranks:
        got = ranks.run(rank)
    for r, g in enumerate(got):
        _check(np.allclose(g, want, rtol=1e-4, atol=1e-5),
               f"{what}: rank {r} of the sharded module, run on the CPU, differs from the unsharded reference "
               f"(max {np.abs(g - want).max():.3g})")


def write_vm_calls(ex: Any, out: str) -> None:
    """out/vm_calls.json: the packed functions each VM function calls, in TVM's text of the executable."""
    from tvm import relax
    sys.path.insert(0, HERE)
    from build_models import vm_calls
    vmex = ex if hasattr(ex, "as_text") else relax.VMExecutable(ex.mod)
    with open(os.path.join(out, "vm_calls.json"), "w") as f:
        json.dump(vm_calls(str(vmex.as_text())), f, indent=1)


def _packed_main(tvm: Any, module: Any, spec: Dict[str, Any]) -> Any:
    """module's forward as main, its weights one packed tuple (what a sharded build takes)."""
    mod, named = module.export_tvm(spec={"forward": {**spec, "$": {"param_mode": "packed", "effect_mode": "none"}}})
    f = mod["forward"].with_attr("global_symbol", "main")
    return tvm.IRModule({"main": f}), [n for n, _ in named]


def tp_mlp(tvm: Any, out: str, mode: str = "bytecode", ranks: int = 2) -> None:
    """x + allreduce_sum(gelu(x W1_rᵀ) W2_rᵀ): W1 (FFN, HIDDEN) split by rows (column-parallel),
    W2 (HIDDEN, FFN) by columns (row-parallel)."""
    import kdflow_tvm
    from tvm.relax.frontend import nn
    from tvm.relax.frontend.nn import op

    class MLP(nn.Module):
        def __init__(self, n: int) -> None:
            self.n = n
            self.l1 = nn.Linear(HIDDEN, FFN // n, bias=False)
            self.l2 = nn.Linear(FFN // n, HIDDEN, bias=False)

        def forward(self, x: Any) -> Any:
            y = self.l2(nn.gelu(self.l1(x)))
            return x + (op.ccl_allreduce(y, "sum") if self.n > 1 else y)

    spec = {"x": nn.spec.Tensor((BATCH, HIDDEN), "float32")}
    mod, names = _packed_main(tvm, MLP(ranks), spec)
    full_mod, full_names = _packed_main(tvm, MLP(1), spec)
    _check(names == full_names == ["l1.weight", "l2.weight"], f"tp_mlp: packed params {names}, {full_names}")
    rng = np.random.default_rng(5)
    w1, w2 = _weights(rng, (FFN, HIDDEN)), _weights(rng, (HIDDEN, FFN))
    x = rng.standard_normal((BATCH, HIDDEN)).astype("float32")
    k = FFN // ranks
    shards = [{"l1.weight": np.ascontiguousarray(w1[r * k:(r + 1) * k]),
               "l2.weight": np.ascontiguousarray(w2[:, r * k:(r + 1) * k])} for r in range(ranks)]
    ex = kdflow_tvm.build(mod, "cuda", out=out, params=shards, inputs={"x": x}, arch="sm_90", exec_mode=mode,
                          reference=(full_mod, {"l1.weight": w1, "l2.weight": w2}), quiet=True)
    write_vm_calls(ex, out)
    # The split is exact: the sum over ranks of the row-parallel products is the unsharded
    # product, and TVM's reference (the unsharded model) is that.
    parts = [_gelu(x @ s["l1.weight"].T) @ s["l2.weight"].T for s in shards]
    want = x + _gelu(x @ w1.T) @ w2.T
    _check(np.allclose(x + sum(parts), want, rtol=1e-5, atol=1e-5), "tp_mlp: the ranks' partial sums are not the "
           "unsharded product")
    got = np.load(os.path.join(out, "output_0.npy"))
    _check(np.allclose(got, x + sum(parts), rtol=1e-4, atol=1e-5),
           f"tp_mlp: TVM's unsharded output differs from the ranks' sum (max {np.abs(got - want).max():.3g})")
    _check_ranks(tvm, mod, names, shards, [x], out, "tp_mlp")


def tp_allgather(tvm: Any, out: str, ranks: int = 2) -> None:
    """softmax((allgather(W_r xᵀ))ᵀ): each rank computes its OUT/ranks rows of W xᵀ (OUT, BATCH);
    the allgather joins them in rank order along axis 0."""
    import kdflow_tvm
    from tvm.relax.frontend import nn
    from tvm.relax.frontend.nn import op
    out_dim = 32

    class Gather(nn.Module):
        def __init__(self, n: int) -> None:
            self.n = n
            self.w = nn.Parameter((out_dim // n, HIDDEN), "float32")

        def forward(self, x: Any) -> Any:
            h = op.matmul(self.w, op.permute_dims(x))
            if self.n > 1:
                h = op.ccl_allgather(h, self.n)
            return op.softmax(op.permute_dims(h), axis=-1)

    spec = {"x": nn.spec.Tensor((BATCH, HIDDEN), "float32")}
    mod, names = _packed_main(tvm, Gather(ranks), spec)
    full_mod, _ = _packed_main(tvm, Gather(1), spec)
    rng = np.random.default_rng(6)
    w = _weights(rng, (out_dim, HIDDEN))
    x = rng.standard_normal((BATCH, HIDDEN)).astype("float32")
    k = out_dim // ranks
    shards = [{"w": np.ascontiguousarray(w[r * k:(r + 1) * k])} for r in range(ranks)]
    ex = kdflow_tvm.build(mod, "cuda", out=out, params=shards, inputs={"x": x}, arch="sm_90",
                          reference=(full_mod, {"w": w}), quiet=True)
    write_vm_calls(ex, out)
    gathered = np.concatenate([s["w"] @ x.T for s in shards], axis=0)
    _check(np.allclose(gathered, w @ x.T, rtol=1e-5, atol=1e-6), "tp_allgather: the ranks' rows joined are not Wxᵀ")
    z = gathered.T - gathered.T.max(axis=-1, keepdims=True)
    want = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    got = np.load(os.path.join(out, "output_0.npy"))
    _check(np.allclose(got, want, rtol=1e-4, atol=1e-6),
           f"tp_allgather: TVM's unsharded output differs from the ranks' rows joined (max {np.abs(got - want).max():.3g})")
    _check_ranks(tvm, mod, names, shards, [x], out, "tp_allgather")


def shard_llm(params: Dict[str, np.ndarray], size: Dict[str, int], ranks: int, r: int) -> Dict[str, np.ndarray]:
    """Rank r's slice of llm_model.decoder_lm's full params, in the packed tuple's order: qkv's
    rows of the rank's query heads, then of its KV heads' keys and values (column-parallel);
    up's rows and down's columns of its ffn/ranks units; out's columns of its query heads
    (row-parallel); the rest whole."""
    h, kv, d, f = size["heads"], size["kv_heads"], size["head_dim"], size["ffn"]
    hq, hk, fr = h // ranks, kv // ranks, f // ranks
    out: Dict[str, np.ndarray] = {}
    for name, a in params.items():
        if name.endswith(".qkv.weight"):
            q = a[r * hq * d:(r + 1) * hq * d]
            k = a[h * d + r * hk * d:h * d + (r + 1) * hk * d]
            v = a[(h + kv) * d + r * hk * d:(h + kv) * d + (r + 1) * hk * d]
            out[name] = np.concatenate([q, k, v], axis=0)
        elif name.endswith(".out.weight"):
            out[name] = a[:, r * hq * d:(r + 1) * hq * d]
        elif name.endswith(".up.weight"):
            out[name] = a[r * fr:(r + 1) * fr]
        elif name.endswith(".down.weight"):
            out[name] = a[:, r * fr:(r + 1) * fr]
        else:
            out[name] = a
    return {n: np.ascontiguousarray(a) for n, a in out.items()}


def _check_llm_split(full: Dict[str, np.ndarray], shards: List[Dict[str, np.ndarray]], size: Dict[str, int]) -> None:
    """Per layer, in numpy: the ranks' qkv rows are the unsharded projection's at their heads;
    the sum over ranks of out's and of down's products (row-parallel, each rank's heads and ffn
    units) is the unsharded product; every rank's module shapes are the slices'."""
    rng = np.random.default_rng(8)
    h, kv, d = size["heads"], size["kv_heads"], size["head_dim"]
    n = len(shards)
    x = rng.standard_normal(size["hidden"]).astype("float32")
    att = rng.standard_normal(h * d).astype("float32")
    for i in range(size["layers"]):
        p = f"layers.{i}."
        qkv = full[p + "qkv.weight"] @ x
        heads = [qkv[j * d:(j + 1) * d] for j in range(h + 2 * kv)]
        for r, s in enumerate(shards):
            mine = s[p + "qkv.weight"] @ x
            hq, hk = h // n, kv // n
            want = heads[r * hq:(r + 1) * hq] + heads[h + r * hk:h + (r + 1) * hk] + \
                heads[h + kv + r * hk:h + kv + (r + 1) * hk]
            _check(np.allclose(mine, np.concatenate(want), rtol=1e-5, atol=1e-5),
                   f"tp_llm: rank {r}'s qkv rows of layer {i} are not its heads'")
        o = sum(s[p + "out.weight"] @ att[r * (h // n) * d:(r + 1) * (h // n) * d] for r, s in enumerate(shards))
        _check(np.allclose(o, full[p + "out.weight"] @ att, rtol=1e-4, atol=1e-5),
               f"tp_llm: layer {i}: the ranks' out products do not sum to the unsharded one")

        def silu(v: np.ndarray) -> np.ndarray:
            return v / (1.0 + np.exp(-v))
        m = sum(s[p + "down.weight"] @ silu(s[p + "up.weight"] @ x) for s in shards)
        _check(np.allclose(m, full[p + "down.weight"] @ silu(full[p + "up.weight"] @ x), rtol=1e-4, atol=1e-5),
               f"tp_llm: layer {i}: the ranks' MLP products do not sum to the unsharded one")


def tp_llm(tvm: Any, out: str, ranks: int) -> None:
    """llm_model.decoder_lm split over `ranks` (LLM_TP's size), built for CUDA and exported with
    each rank's slice of the unsharded model's weights; vm_calls.json; the session prefill:7,
    decode:2 run by TVM on the CPU with the unsharded model (llm_session's reference_make)."""
    import kdflow_tvm
    sys.path.insert(0, HERE)
    import llm_model
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90"}, host={"kind": "c"})
    with target:
        mod, rank_params = llm_model.decoder_lm(tvm, **LLM_TP, shards=ranks)
        ex = tvm.compile(mod, target)
        _, full = llm_model.decoder_lm(tvm, **LLM_TP)  # the full weights (the module is made again on the CPU)
    shards = [shard_llm(full, LLM_TP, ranks, r) for r in range(ranks)]
    for name, a in rank_params.items():  # the module's own shapes are the slices'
        _check(shards[0][name].shape == a.shape, f"tp_llm: {name} sliced {shards[0][name].shape}, the rank's "
               f"module takes {a.shape}")
    _check(list(shards[0]) == list(rank_params), "tp_llm: the slices are not in the packed tuple's order")
    _check_llm_split(full, shards, LLM_TP)
    kdflow_tvm.export(ex, out, params=shards, arch="sm_90", quiet=True)
    write_vm_calls(ex, out)
    kdflow_tvm.llm_session(lambda: llm_model.decoder_lm(tvm, **LLM_TP, shards=ranks), out, "prefill:7,decode:2",
                           reference_make=lambda: llm_model.decoder_lm(tvm, **LLM_TP), quiet=True)
    _check_llm_ranks(tvm, ranks, shards, out)


def _check_llm_ranks(tvm: Any, ranks: int, shards: List[Dict[str, np.ndarray]], out: str) -> None:
    """The session llm_session ran with the unsharded model, run by every rank of the sharded one
    (each its own KV cache of its heads) on the CPU: check_session_ranks."""
    sys.path.insert(0, HERE)
    import llm_model
    target = tvm.target.Target("llvm")
    with target:
        ex = tvm.compile(llm_model.decoder_lm(tvm, **LLM_TP, shards=ranks)[0], target)
    check_session_ranks(tvm, ex, shards, "prefill:7,decode:2", out, f"tp_llm_{ranks}")


def check_session_ranks(tvm: Any, ex: Any, shards: List[Dict[str, np.ndarray]], session: str, out: str,
                        what: str) -> None:
    """`session`, which llm_session ran with the unsharded model into `out`, run by every rank of
    the sharded llvm executable `ex` (rank r with shards[r], its own KV cache of its heads) on
    the CPU at once (Ranks): every rank runs the same tokens, and its logits of every step are
    the references (rtol and atol 1e-4)."""
    from kdflow_tvm import _session
    spec = _session.parse(session)
    files = sorted(f for f in os.listdir(out) if f.startswith("output_") and f.endswith(".npy"))
    tmp = tempfile.mkdtemp(prefix="kdflow_tp_llm.")
    try:
        def rank(r: int) -> List[int]:
            d = os.path.join(tmp, str(r))
            os.makedirs(d)
            return _session.run(tvm, ex, shards[r], spec, d)
        with Ranks(tvm, len(shards)) as rs:
            tokens = rs.run(rank)
        want_tokens = np.load(os.path.join(out, "input_ids.npy")).tolist()
        _check(bool(files), f"{what}: no references output_<step>.npy in {out}")
        for r in range(len(shards)):
            _check(tokens[r] == want_tokens, f"{what}: rank {r} ran tokens {tokens[r]}, the reference "
                   f"{want_tokens}")
            for f in files:
                g, w = np.load(os.path.join(tmp, str(r), f)), np.load(os.path.join(out, f))
                _check(g.shape == w.shape and np.allclose(g, w, rtol=1e-4, atol=1e-4),
                       f"{what}: rank {r}'s {f} differs from the unsharded model's (max "
                       f"{np.abs(g - w).max() if g.shape == w.shape else g.shape}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def models(tvm: Any) -> Dict[str, Callable[[str], None]]:
    return {
        "tp_mlp": lambda out: tp_mlp(tvm, out),
        "tp_mlp_compiled": lambda out: tp_mlp(tvm, out, mode="compiled"),
        "tp_allgather": lambda out: tp_allgather(tvm, out),
        "tp_llm_2": lambda out: tp_llm(tvm, out, 2),
        "tp_llm_4": lambda out: tp_llm(tvm, out, 4),
    }
