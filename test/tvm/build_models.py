"""Builds the real test models of test/tvm with the TVM this Python imports, through the
exporter (python/kdflow_tvm), once per TVM and per change of this file or of the exporter:
    python3 test/tvm/build_models.py OUT_DIR
Each model is a folder OUT_DIR/<name> as kdflow reads it; OUT_DIR/stamp names the TVM and the
sources' hash. Exits 77 (ctest: skipped) with a message when TVM or onnx cannot be imported."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from typing import Any, Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

import numpy as np  # noqa: E402

import kdflow_tvm  # noqa: E402
from kdflow_tvm import _tvm  # noqa: E402

sys.path.insert(0, HERE)
import builtin_models  # noqa: E402
import sharded_models  # noqa: E402

SKIP = 77


def sources_hash() -> str:
    h = hashlib.sha256()
    for d in (HERE, os.path.join(ROOT, "python", "kdflow_tvm")):
        for f in sorted(os.listdir(d)):
            if f.endswith(".py"):
                with open(os.path.join(d, f), "rb") as fh:
                    h.update(f.encode() + fh.read())
    return h.hexdigest()[:16]


def weights(rng: np.random.Generator, shape: Any) -> np.ndarray:
    """Small weights (fan-in scaled), so that outputs are not saturated softmaxes."""
    shape = [int(d) for d in shape]
    fan_in = shape[-1] if len(shape) > 1 else shape[0]
    return (rng.standard_normal(shape) / np.sqrt(max(fan_in, 1))).astype("float32")


def as_main(tvm: Any, mod: Any, name: str = "forward") -> Any:
    f = mod[name].with_attr("global_symbol", "main")
    return tvm.IRModule({"main": f})


def nn_model(tvm: Any, module: Any, spec: Dict[str, Any], seed: int = 1):
    mod, specs = module.export_tvm(spec={"forward": spec})
    rng = np.random.default_rng(seed)
    params = {n: weights(rng, p.shape).astype(p.dtype) for n, p in specs}
    return as_main(tvm, mod), params


def models(tvm: Any) -> Dict[str, Callable[[str], None]]:
    from tvm.relax.frontend import nn

    class MLP(nn.Module):
        def __init__(self) -> None:
            self.l1 = nn.Linear(100, 64)
            self.l2 = nn.Linear(64, 10)

        def forward(self, x: Any) -> Any:
            return nn.softmax(self.l2(nn.relu(self.l1(x))), axis=-1)

    class MLP16(nn.Module):
        """float16 everywhere: TVM 0.26+'s C host casts to half* without declaring half."""

        def __init__(self) -> None:
            self.l1 = nn.Linear(64, 32, dtype="float16")
            self.l2 = nn.Linear(32, 16, dtype="float16")

        def forward(self, x: Any) -> Any:
            return self.l2(nn.relu(self.l1(x)))

    class TwoBranch(nn.Module):
        """Two same-size tensors into one kernel (a - b): a swap of them must be caught."""

        def __init__(self) -> None:
            self.a = nn.Linear(64, 64)
            self.b = nn.Linear(64, 64)
            self.c = nn.Linear(64, 16)

        def forward(self, x: Any) -> Any:
            y1 = nn.relu(self.a(x))
            y2 = nn.sigmoid(self.b(x))
            return self.c(y1 - y2 * 2.0)

    class TwoOutputs(nn.Module):
        def __init__(self) -> None:
            self.a = nn.Linear(32, 24)
            self.b = nn.Linear(32, 8)

        def forward(self, x: Any) -> Any:
            return nn.relu(self.a(x)), nn.softmax(self.b(x), axis=-1)

    class CNN(nn.Module):
        def __init__(self) -> None:
            self.conv1 = nn.Conv2D(3, 8, 3, padding=1)
            self.conv2 = nn.Conv2D(8, 8, 3, padding=1)

        def forward(self, x: Any) -> Any:
            y = nn.relu(self.conv1(x))
            z = nn.relu(self.conv2(y))
            return z + y

    class ScanView(nn.Module):
        """A view of the input first (vm.builtin.reshape), then a cumsum (TVM dispatches it to
        gpu_2d_continuous_cumsum, a warp-synchronous scan in shared memory), then views of
        intermediates around a softmax."""

        def __init__(self) -> None:
            self.lin = nn.Linear(64, 32)

        def forward(self, x: Any) -> Any:
            z = nn.cumsum(nn.reshape(x, (64, 64)), axis=1)
            h = self.lin(z * (1.0 / 64))
            return nn.reshape(nn.softmax(nn.reshape(h, (32, 64)), axis=-1), (2048,))

    class Block(nn.Module):
        """A transformer block with a symbolic sequence length."""

        def __init__(self) -> None:
            self.norm = nn.LayerNorm(32)
            self.q = nn.Linear(32, 32)
            self.k = nn.Linear(32, 32)
            self.v = nn.Linear(32, 32)
            self.o = nn.Linear(32, 32)
            self.up = nn.Linear(32, 64)
            self.down = nn.Linear(64, 32)

        def forward(self, x: Any) -> Any:
            h = self.norm(x)
            q, k, v = self.q(h), self.k(h), self.v(h)
            att = nn.softmax(nn.matmul(q, nn.permute_dims(k, [0, 2, 1])) * (1.0 / 32 ** 0.5), axis=-1)
            x = x + self.o(nn.matmul(att, v))
            return x + self.down(nn.relu(self.up(x)))

    class GroupConv(nn.Module):
        """Issue 52: a 1x1 convolution of 4 groups of 34 channels on 14x14, as ShuffleNet's (the
        ONNX suite's light_shufflenet.onnx). TVM 0.27 builds it as one kernel that keeps the block's
        34x14 tile in a per-thread local array (476 floats): each thread writes its column and reads
        a row other threads wrote, so 442 of every 476 results are memory its thread never wrote, on
        a GPU as on the CPU. check_models.py expects kdflow to say so (TVM_DEFECTS)."""

        def __init__(self) -> None:
            self.conv = nn.Conv2D(136, 136, 1, groups=4, bias=False)

        def forward(self, x: Any) -> Any:
            return self.conv(x) * 0.5 + 1.0

    def build(name: str, module: Any, spec: Dict[str, Any], inputs: Any = True, mode: str = "bytecode",
              keep_forward: bool = False) -> Callable[[str], None]:
        def run(out: str) -> None:
            if keep_forward:  # as nn.Module exports it: no main (kdflow --function forward)
                mod, specs = module.export_tvm(spec={"forward": spec})
                params = {n: weights(np.random.default_rng(1), p.shape).astype(p.dtype) for n, p in specs}
                kdflow_tvm.build(mod, "cuda", out=out, params=params, inputs=inputs, arch="sm_90", exec_mode=mode,
                                 function="forward", quiet=True)
                return
            mod, params = nn_model(tvm, module, spec)
            kdflow_tvm.build(mod, "cuda", out=out, params=params, inputs=inputs, arch="sm_90", exec_mode=mode,
                             quiet=True)
        return run

    rng = np.random.default_rng(7)
    return {
        "mlp": build("mlp", MLP(), {"x": nn.spec.Tensor((1, 100), "float32")}),
        "mlp_compiled": build("mlp", MLP(), {"x": nn.spec.Tensor((1, 100), "float32")}, mode="compiled"),
        "mlp_forward_compiled": build("mlp", MLP(), {"x": nn.spec.Tensor((1, 100), "float32")}, mode="compiled",
                                      keep_forward=True),
        "mlp_fp16": build("mlp_fp16", MLP16(), {"x": nn.spec.Tensor((4, 64), "float16")}),
        "two_branch": build("two_branch", TwoBranch(), {"x": nn.spec.Tensor((1, 64), "float32")}),
        "two_outputs": build("two_outputs", TwoOutputs(), {"x": nn.spec.Tensor((2, 32), "float32")}),
        "scan_view": build("scan_view", ScanView(), {"x": nn.spec.Tensor((1, 4096), "float32")}),
        "scan_view_compiled": build("scan_view", ScanView(), {"x": nn.spec.Tensor((1, 4096), "float32")},
                                    mode="compiled"),
        "cnn": build("cnn", CNN(), {"x": nn.spec.Tensor((1, 3, 16, 16), "float32")}),
        "group_conv": build("group_conv", GroupConv(), {"x": nn.spec.Tensor((1, 136, 14, 14), "float32")}),
        "block": build("block", Block(), {"x": nn.spec.Tensor((1, "n", 32), "float32")},
                       inputs={"x": rng.standard_normal((1, 8, 32)).astype("float32")}),
        "onnx": onnx_model,
        "llm": lambda out: llm_model_build(tvm, out),
        "llm_graph": lambda out: llm_model_build(tvm, out, cuda_graph=True),
        "llm_f16": lambda out: llm_model_build(tvm, out, dtype="float16"),
        # Another size: 3 layers, hidden 128, 4 query heads sharing 1 KV head (MQA), head dim 32.
        "llm_mqa": lambda out: llm_model_build(tvm, out, size=LLM_MQA),
        # Names that are not file names, each VM builtin a build reaches, a build with no kernel.
        **builtin_models.models(tvm),
        # Tensor-parallel (disco) builds: params_shard<r>.bin, collectives, the unsharded references.
        # TVM 0.26 builds them alike (run.sh gives 0.26 a subset: tp_llm_2 alone takes 3 minutes there).
        **(sharded_models.models(tvm) if _tvm.version_tuple(tvm) >= (0, 26) else {}),
    }


def vm_calls(text: str) -> Dict[str, List[str]]:
    """Per VM function, the callees of its `call` instructions in order, from TVM's own text
    of the executable (VMExecutable.as_text): what kdflow's decoding must reproduce."""
    out: Dict[str, List[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("@") and line.rstrip().endswith(":"):
            current = line[1:].rstrip()[:-1]
            out[current] = []
        elif current and line.strip().startswith("call"):
            callee = line.split()[1]
            if callee.startswith("vm.builtin.cuda_graph."):  # the closure it runs: f[NAME]
                start = line.find("f[")
                callee += "(" + line[start + 2:line.find("]", start)] + ")" if start >= 0 else ""
            out[current].append(callee)
        elif not line.strip():
            current = None
    return out


LLM_MQA: Dict[str, int] = {"layers": 3, "hidden": 128, "heads": 4, "kv_heads": 1, "head_dim": 32, "ffn": 256,
                           "vocab": 320}


def llm_model_build(tvm: Any, out: str, cuda_graph: bool = False, dtype: str = "float32",
                    size: Optional[Dict[str, int]] = None) -> None:
    """A small language model with TVM's paged KV cache (llm_model.py), exported, and beside it
    vm_calls.json: each VM function's calls as TVM prints them. `cuda_graph`: built with
    relax.backend.use_cuda_graph (regions of each function run through capture functions);
    `dtype`: of its weights, activations and KV cache (float16: TVM's half host and half4 code);
    `size`: llm_model.decoder_lm's layers, hidden, heads, kv_heads, head_dim, ffn, vocab."""
    import json
    sys.path.insert(0, HERE)
    import llm_model
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90"}, host={"kind": "c"})
    config = {"relax.backend.use_cuda_graph": True} if cuda_graph else {}
    with target, tvm.transform.PassContext(config=config):
        mod, params = llm_model.decoder_lm(tvm, dtype=dtype, **(size or {}))
        ex = tvm.compile(mod, target)
    kdflow_tvm.export(ex, out, params=params, arch="sm_90", quiet=True)
    from tvm import relax
    vmex = ex if hasattr(ex, "as_text") else relax.VMExecutable(ex.mod)
    with open(os.path.join(out, "vm_calls.json"), "w") as f:
        json.dump(vm_calls(vmex.as_text()), f, indent=1)
    if not cuda_graph:
        # What TVM's KV cache runtime itself calls in a session (the same model, run on the CPU),
        # with the session's tokens and TVM's logits of each step.
        import kv_truth
        kv_truth.record(tvm, lambda: llm_model.decoder_lm(tvm, dtype=dtype, **(size or {})),
                        os.path.join(out, "kv_truth.json"))
    else:  # the same model and weights: the same session's tokens and logits
        src = os.path.join(os.path.dirname(out), "llm")
        for f in sorted(os.listdir(src)):
            if f.startswith(("input_ids", "output_", "session")) and f.endswith((".npy", ".json")):
                shutil.copy(os.path.join(src, f), os.path.join(out, f))
        shutil.copytree(os.path.join(src, "session_fork"), os.path.join(out, "session_fork"))


def onnx_model(out: str) -> None:
    """An ONNX file written with onnx.helper, through the command line users run."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(weights(rng, (48, 24)), "w1")  # MatMul: (K, N)
    b1 = numpy_helper.from_array(weights(rng, (24,)), "b1")
    w2 = numpy_helper.from_array(weights(rng, (24, 24)), "w2")  # Gemm transB: (N, K)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("Gemm", ["r", "w2"], ["g"], transB=1),
        helper.make_node("Sigmoid", ["g"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "kdflow_onnx_test",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 48])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 24])],
                              [w1, b1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = out + ".onnx"
    onnx.save(model, path)
    cmd = [sys.executable, "-m", "kdflow_tvm", "onnx", path, "-o", out, "--shape", "x=4x48", "--arch", "sm_90", "-q"]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"onnx: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")


def relay_models(tvm: Any) -> Dict[str, Callable[[str], None]]:
    """Relay models (TVM 0.8 - 0.19, built with relay.build through the exporter): an MLP, a CNN
    with SqueezeNet's fire module (conv2d, max_pool2d, two expand convolutions concatenated, a
    reshape-only flatten that TVM runs as __nop), a float16 MLP, a model with three outputs, a
    two-output node and a function two nodes call, and the ONNX file through the command line (Relay's importer). Small: TVM
    0.19 here is an -O0 build."""
    from tvm import relay

    def model(make: Callable[[Callable[..., Any]], Any], seed: int) -> Callable[[str], None]:
        def run(out: str) -> None:
            rng = np.random.default_rng(seed)
            params: Dict[str, np.ndarray] = {}

            def w(name: str, shape: Any, dtype: str = "float32") -> Any:
                params[name] = weights(rng, shape).astype(dtype)
                return relay.var(name, shape=shape, dtype=dtype)
            y = make(w)
            mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y))
            kdflow_tvm.build(mod, "cuda", out=out, params=params, inputs=True, arch="sm_90", quiet=True)
        return run

    def mlp(w: Callable[..., Any]) -> Any:
        x = relay.var("x", shape=(1, 100), dtype="float32")
        h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w("w1", (64, 100))), w("b1", (64,))))
        return relay.nn.log_softmax(relay.nn.bias_add(relay.nn.dense(h, w("w2", (10, 64))), w("b2", (10,))))

    def mlp_fp16(w: Callable[..., Any]) -> Any:
        # One row: with 4 (padded to 8) TVM picks its tensor-core dense (nvcuda::wmma), which
        # kdflow's CPU back end does not run.
        x = relay.var("x", shape=(1, 64), dtype="float16")
        h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w("w1", (32, 64), "float16")), w("b1", (32,), "float16")))
        return relay.nn.bias_add(relay.nn.dense(h, w("w2", (16, 32), "float16")), w("b2", (16,), "float16"))

    def cnn(w: Callable[..., Any]) -> Any:
        x = relay.var("data", shape=(1, 3, 16, 16), dtype="float32")
        y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w("c1w", (8, 3, 3, 3)), padding=(1, 1)),
                                            w("c1b", (8,))))
        y = relay.nn.max_pool2d(y, pool_size=(3, 3), strides=(2, 2), ceil_mode=True)
        s = relay.nn.relu(relay.nn.conv2d(y, w("squeeze", (4, 8, 1, 1))))        # the fire module
        e1 = relay.nn.relu(relay.nn.conv2d(s, w("expand1", (8, 4, 1, 1))))
        e3 = relay.nn.relu(relay.nn.conv2d(s, w("expand3", (8, 4, 3, 3)), padding=(1, 1)))
        y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(relay.concatenate([e1, e3], axis=1)))
        return relay.nn.softmax(relay.nn.dense(y, w("fc", (10, 16))))

    def outputs(w: Callable[..., Any]) -> Any:
        # split: a node with two outputs, read by fused functions as one tuple parameter; two
        # nodes calling one function (the same dense); three outputs, one a reshape TVM runs
        # as __nop.
        x = relay.var("x", shape=(2, 32), dtype="float32")
        parts = relay.split(relay.nn.dense(x, w("w", (32, 32))), 2, axis=1)
        b = relay.sigmoid(parts[1])
        a = relay.nn.relu(parts[0]) * b
        return relay.Tuple([relay.nn.dense(a, w("wa", (16, 16))), relay.nn.dense(b, w("wb", (16, 16))),
                            relay.reshape(b, (32,))])

    return {"relay_mlp": model(mlp, 1), "relay_cnn": model(cnn, 2), "relay_mlp_fp16": model(mlp_fp16, 3),
            "relay_outputs": model(outputs, 4), "onnx": onnx_model,
            # Input names frameworks write, kept as they are in graph.json, files encoded.
            "relay_names": builtin_models.names}


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    try:
        tvm = _tvm.import_tvm()
        import importlib
        importlib.import_module("onnx")  # the ONNX model needs it
    except Exception as e:
        print(f"build_models: skipped: {e}", file=sys.stderr)
        return SKIP
    skip = os.environ.get("KDFLOW_TVM_SKIP", "").split()
    stamp = (f"tvm {tvm.__version__} sources {sources_hash()} models {os.environ.get('KDFLOW_TVM_MODELS', 'all')}"
             f"{' but ' + ' '.join(skip) if skip else ''}\n")
    stamp_file = os.path.join(out, "stamp")
    if os.path.exists(stamp_file) and open(stamp_file).read() == stamp:
        print(f"build_models: {out} is up to date ({stamp.strip()})", file=sys.stderr)
        return 0
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    relay_era = _tvm.version_tuple(tvm) < _tvm.RELAX_FIRST  # TVM 0.8 - 0.19: the Relay models
    # KDFLOW_TVM_MODELS: the names to build (run.sh gives TVM 0.25 a subset); default all.
    # KDFLOW_TVM_SKIP: names not to build (run.sh builds the sharded models in a test of their own).
    only = os.environ.get("KDFLOW_TVM_MODELS", "").split()
    for name, run in (relay_models(tvm) if relay_era else models(tvm)).items():
        if (only and name not in only) or name in skip:
            continue
        print(f"build_models: {name} (TVM {tvm.__version__})", file=sys.stderr, flush=True)
        run(os.path.join(out, name))
    with open(stamp_file, "w") as f:
        f.write(stamp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
