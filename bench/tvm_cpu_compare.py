#!/usr/bin/env python3
"""tvm_cpu_compare.py — kdflow's CPU replay against TVM's own CPU build of the same model
(issue 31; not a test: docs/benchmarks.md).

What a user would run instead of `kdflow replay --backend cpu` to get the numbers on a
machine without a GPU is TVM's llvm build of the same model on TVM's VM. For each model this
script, with the TVM its Python imports (use the 0.27 release from PyPI, which is built
optimised; ../shared/tvm is built at -O0, which slows its runtime though not its kernels):
  1. builds the model for CUDA with the C host through the exporter (kdflow_tvm.build, with its
     references), and times `kdflow replay DIR --backend cpu` (end to end per run, the median
     of --repeat timed runs after one warm-up; the JIT's compile time is reported apart);
  2. builds the same IRModule, with the same weights bound, for llvm with tvm.compile and
     times its `main` on relax.VirtualMachine with time_evaluator (median of --repeat);
  3. reports both, side by side in one run, and kdflow's time over TVM's.

usage: bench/tvm_cpu_compare.py KDFLOW [--models a,b] [--repeat N] [--keep DIR]
models: cnn (two 3x3 convolutions on 1x3x32x32), encoder (one transformer encoder block,
64 tokens x 128), mlp (three dense layers, batch 8)
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import numpy as np  # noqa: E402

import kdflow_tvm  # noqa: E402
from kdflow_tvm import _tvm  # noqa: E402


def models(tvm: Any) -> Dict[str, Callable[[], Tuple[Any, Dict[str, np.ndarray], Dict[str, np.ndarray]]]]:
    """name → () → (Relax IRModule with main, params by name, inputs by name)."""
    from tvm.relax.frontend import nn
    rng = np.random.default_rng(7)

    def export(module: Any, spec: Dict[str, Any]) -> Tuple[Any, Dict[str, np.ndarray]]:
        mod, named = module.export_tvm(spec={"forward": spec}, debug=False)
        params = {n: (rng.standard_normal([int(d) for d in p.shape]) / 8).astype(p.dtype) for n, p in named}
        mod = tvm.relax.transform.BindParams("forward", params)(mod)
        # The exporter and the VM both run "main".
        gv = mod.get_global_var("forward")
        fn = mod[gv]
        mod = tvm.IRModule({"main": fn.with_attr("global_symbol", "main")})
        return mod, params

    class CNN(nn.Module):
        def __init__(self) -> None:
            self.c1 = nn.Conv2D(3, 16, 3, padding=1)
            self.c2 = nn.Conv2D(16, 16, 3, padding=1)

        def forward(self, x: Any) -> Any:
            return nn.relu(self.c2(nn.relu(self.c1(x))))

    class Encoder(nn.Module):
        def __init__(self, d: int = 128, heads: int = 4, ffn: int = 512) -> None:
            self.heads = heads
            self.n1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.o = nn.Linear(d, d)
            self.n2 = nn.LayerNorm(d)
            self.up = nn.Linear(d, ffn)
            self.down = nn.Linear(ffn, d)

        def forward(self, x: Any) -> Any:
            from tvm.relax.frontend.nn import op
            b, s, d = x.shape
            h = self.heads
            q, k, v = op.split(self.qkv(self.n1(x)), 3, axis=2)
            q = op.reshape(q, (b, s, h, d // h))
            k = op.reshape(k, (b, s, h, d // h))
            v = op.reshape(v, (b, s, h, d // h))
            a = op.reshape(op.scaled_dot_product_attention(q, k, v), (b, s, d))
            x = x + self.o(a)
            return x + self.down(op.gelu(self.up(self.n2(x))))

    class MLP(nn.Module):
        def __init__(self) -> None:
            self.l1 = nn.Linear(256, 512)
            self.l2 = nn.Linear(512, 512)
            self.l3 = nn.Linear(512, 10)

        def forward(self, x: Any) -> Any:
            return self.l3(nn.relu(self.l2(nn.relu(self.l1(x)))))

    def make(module: Callable[[], Any], shape: Tuple[int, ...]) -> Callable[[], Any]:
        def f() -> Tuple[Any, Dict[str, np.ndarray], Dict[str, np.ndarray]]:
            mod, params = export(module(), {"x": nn.spec.Tensor(shape, "float32")})
            return mod, params, {"x": rng.standard_normal(shape).astype("float32")}
        return f

    return {"cnn": make(CNN, (1, 3, 32, 32)), "encoder": make(Encoder, (1, 64, 128)), "mlp": make(MLP, (8, 256))}


def time_tvm(tvm: Any, mod: Any, inputs: Dict[str, np.ndarray], repeat: int) -> float:
    """Median seconds of one run of main, TVM's llvm build on its VM."""
    from tvm import relax
    ex = tvm.compile(mod, target="llvm")
    dev = tvm.cpu()
    vm = relax.VirtualMachine(ex, dev)
    args = [tvm.runtime.tensor(a, device=dev) for a in inputs.values()]
    vm["main"](*args)  # warm-up
    f = vm.time_evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=0)
    return float(np.median(f(*args).results))


def time_kdflow(kdflow: str, d: str, repeat: int) -> Tuple[float, float, str]:
    """Median seconds per run of kdflow replay --backend cpu (end to end), the JIT's compile
    seconds, and whether the outputs matched TVM's."""
    env = dict(os.environ, NO_COLOR="1")
    # --no-cache: the compile seconds reported are a compile, not a load from the compile cache.
    r = subprocess.run([kdflow, "replay", d, "--backend", "cpu", "--warmup", "1", "--repeat", str(repeat), "--no-cache"],
                       env=env, capture_output=True, text=True, check=False)
    if r.returncode not in (0, 1):
        raise SystemExit(f"tvm_cpu_compare: {d}: replay exited {r.returncode}: {r.stderr.strip()[-300:]}")
    m = re.search(r"eager end to end: ([0-9.]+) us per run", r.stdout)
    if not m:
        raise SystemExit(f"tvm_cpu_compare: {d}: no end-to-end time in replay's output")
    compile_s = sum(float(x) for x in re.findall(r"compiled for the host in ([0-9.]+) s", r.stderr))
    return float(m.group(1)) / 1e6, compile_s, "match" if r.returncode == 0 else "DIFFER"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("kdflow")
    ap.add_argument("--models", default="cnn,encoder,mlp")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--keep", default="", help="write the CUDA builds here (default: a temporary folder)")
    a = ap.parse_args()
    tvm = _tvm.import_tvm()
    table = models(tvm)
    rows: List[Tuple[str, float, float, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = a.keep or tmp
        for name in a.models.split(","):
            mod, params, inputs = table[name]()
            d = os.path.join(base, name)
            t0 = time.monotonic()
            kdflow_tvm.build(mod, "cuda", out=d, inputs=inputs, arch="sm_90", force=True, quiet=True)
            print(f"tvm_cpu_compare: {name}: built for CUDA in {time.monotonic() - t0:.1f} s", file=sys.stderr)
            k_s, compile_s, ok = time_kdflow(a.kdflow, d, a.repeat)
            t_s = time_tvm(tvm, mod, inputs, a.repeat)
            rows.append((name, k_s, compile_s, t_s, ok))
    print(f"| model | kdflow replay --backend cpu, ms per run | its JIT compile s | TVM {tvm.__version__} llvm on its VM, "
          "ms per run | kdflow / TVM | outputs |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, k_s, c_s, t_s, ok in rows:
        print(f"| {name} | {k_s * 1e3:.2f} | {c_s:.2f} | {t_s * 1e3:.2f} | {k_s / t_s:.1f}x | {ok} |")
    print()
    print(f"{os.cpu_count()} CPU threads, load average {os.getloadavg()[0]:.1f}, median of {a.repeat} timed runs each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
