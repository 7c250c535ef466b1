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

usage: bench/tvm_cpu_compare.py KDFLOW [--models a,b] [--repeat N] [--keep DIR] [--timing-json DIR]
models: cnn (two 3x3 convolutions on 1x3x32x32), mnist (mnist-8's layout, 1x1x28x28), encoder (one transformer encoder block,
64 tokens x 128), mlp (three dense layers, batch 8); full size, not run by default (minutes to
build): googlenet (Inception-v1 on 1x3x224x224), resnet50 (ResNet-50 on 1x3x224x224).
--timing-json DIR also writes each replay's per-kernel times (DIR/<model>.json) and prints the
kernels that take most of kdflow's time.
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

    class MNIST(nn.Module):
        """The ONNX model zoo's mnist-8 as laid out (not its weights): 5x5 convolutions of 8 and
        16 channels with 2x2 and 3x3 max pooling, then a dense layer; 1x1x28x28 → 10. A model
        this small measures per-launch and per-run overhead more than kernels."""

        def __init__(self) -> None:
            self.c1 = nn.Conv2D(1, 8, 5, padding=2)
            self.c2 = nn.Conv2D(8, 16, 5, padding=2)
            self.fc = nn.Linear(256, 10)

        def forward(self, x: Any) -> Any:
            y = max_pool(nn.relu(self.c1(x)), 2, 2, 0)
            y = max_pool(nn.relu(self.c2(y)), 3, 3, 0)
            return self.fc(nn.op.reshape(y, (1, 256)))

    # Full-size CNNs (issue 40: the goal is at most 2x of TVM on every model both run, these
    # included). relax.frontend.nn has no pooling: wrap_nested around Relax's own operators.
    def max_pool(x: Any, k: int, s: int, p: int) -> Any:
        return nn.op.wrap_nested(tvm.relax.op.nn.max_pool2d(x._expr, k, s, p), "max_pool")

    def avg_pool_all(x: Any) -> Any:  # global average pooling, then flatten
        b, c, h, w = (int(d) for d in x.shape)
        return nn.op.reshape(nn.op.sum(x, axis=[2, 3]) * (1.0 / (h * w)), (b, c))

    class InceptionV1Block(nn.Module):
        def __init__(self, cin: int, b1: int, b3r: int, b3: int, b5r: int, b5: int, bp: int) -> None:
            self.b1 = nn.Conv2D(cin, b1, 1)
            self.b3r, self.b3 = nn.Conv2D(cin, b3r, 1), nn.Conv2D(b3r, b3, 3, padding=1)
            self.b5r, self.b5 = nn.Conv2D(cin, b5r, 1), nn.Conv2D(b5r, b5, 5, padding=2)
            self.bp = nn.Conv2D(cin, bp, 1)

        def forward(self, x: Any) -> Any:
            r = nn.relu
            return nn.op.concat([r(self.b1(x)), r(self.b3(r(self.b3r(x)))), r(self.b5(r(self.b5r(x)))),
                                 r(self.bp(max_pool(x, 3, 1, 1)))], dim=1)

    class GoogLeNet(nn.Module):
        """Inception-v1 (Szegedy et al. 2014) as published: 5x5 branches, no batch norm (at
        inference it folds into the convolutions), no auxiliary heads; 1x3x224x224 → 1000."""

        def __init__(self) -> None:
            self.c1 = nn.Conv2D(3, 64, 7, stride=2, padding=3)
            self.c2 = nn.Conv2D(64, 64, 1)
            self.c3 = nn.Conv2D(64, 192, 3, padding=1)
            cfg = [(192, 64, 96, 128, 16, 32, 32), (256, 128, 128, 192, 32, 96, 64), None,
                   (480, 192, 96, 208, 16, 48, 64), (512, 160, 112, 224, 24, 64, 64),
                   (512, 128, 128, 256, 24, 64, 64), (512, 112, 144, 288, 32, 64, 64),
                   (528, 256, 160, 320, 32, 128, 128), None,
                   (832, 256, 160, 320, 32, 128, 128), (832, 384, 192, 384, 48, 128, 128)]
            self.pools = [i for i, c in enumerate(cfg) if c is None]
            self.blocks = nn.ModuleList([InceptionV1Block(*c) for c in cfg if c is not None])
            self.fc = nn.Linear(1024, 1000)

        def forward(self, x: Any) -> Any:
            y = max_pool(nn.relu(self.c1(x)), 3, 2, 1)
            y = max_pool(nn.relu(self.c3(nn.relu(self.c2(y)))), 3, 2, 1)
            i = 0
            for at in range(len(self.blocks) + len(self.pools)):
                if at in self.pools:
                    y = max_pool(y, 3, 2, 1)
                    continue
                y = self.blocks[i](y)
                i += 1
            return self.fc(avg_pool_all(y))

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, mid: int, stride: int) -> None:
            self.a = nn.Conv2D(cin, mid, 1)
            self.b = nn.Conv2D(mid, mid, 3, stride=stride, padding=1)
            self.c = nn.Conv2D(mid, mid * 4, 1)
            self.down = nn.Conv2D(cin, mid * 4, 1, stride=stride) if stride != 1 or cin != mid * 4 else None

        def forward(self, x: Any) -> Any:
            y = self.c(nn.relu(self.b(nn.relu(self.a(x)))))
            return nn.relu(y + (self.down(x) if self.down is not None else x))

    class ResNet50(nn.Module):
        """ResNet-50 (He et al. 2015, torchvision's v1.5 layout, batch norm folded into the
        convolutions' biases); 1x3x224x224 → 1000."""

        def __init__(self) -> None:
            self.stem = nn.Conv2D(3, 64, 7, stride=2, padding=3)
            blocks, cin = [], 64
            for mid, n, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
                for j in range(n):
                    blocks.append(Bottleneck(cin, mid, stride if j == 0 else 1))
                    cin = mid * 4
            self.blocks = nn.ModuleList(blocks)
            self.fc = nn.Linear(2048, 1000)

        def forward(self, x: Any) -> Any:
            y = max_pool(nn.relu(self.stem(x)), 3, 2, 1)
            for b in self.blocks:
                y = b(y)
            return self.fc(avg_pool_all(y))

    def make(module: Callable[[], Any], shape: Tuple[int, ...]) -> Callable[[], Any]:
        def f() -> Tuple[Any, Dict[str, np.ndarray], Dict[str, np.ndarray]]:
            mod, params = export(module(), {"x": nn.spec.Tensor(shape, "float32")})
            return mod, params, {"x": rng.standard_normal(shape).astype("float32")}
        return f

    return {"cnn": make(CNN, (1, 3, 32, 32)), "mnist": make(MNIST, (1, 1, 28, 28)), "encoder": make(Encoder, (1, 64, 128)), "mlp": make(MLP, (8, 256)),
            "googlenet": make(GoogLeNet, (1, 3, 224, 224)), "resnet50": make(ResNet50, (1, 3, 224, 224))}


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


def time_kdflow(kdflow: str, d: str, repeat: int, timing_json: str = "") -> Tuple[float, float, str]:
    """Median seconds per run of kdflow replay --backend cpu (end to end), the JIT's compile
    seconds, and whether the outputs matched TVM's. `timing_json`: also write replay's
    per-kernel times there, and each kernel's way of running (KDFLOW_CPU_FIBERS=auto logs it)
    beside it (.ways.txt)."""
    env = dict(os.environ, NO_COLOR="1")
    # --no-cache: the compile seconds reported are a compile, not a load from the compile cache.
    cmd = [kdflow, "replay", d, "--backend", "cpu", "--warmup", "1", "--repeat", str(repeat), "--no-cache"]
    if timing_json:
        cmd += ["--timing-json", timing_json]
        env["KDFLOW_CPU_FIBERS"] = "auto"  # set at all: each kernel's way of running is logged
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if timing_json:
        with open(timing_json + ".ways.txt", "w") as f:
            f.write("".join(l + "\n" for l in r.stderr.splitlines() if " runs each block " in l))
    if r.returncode not in (0, 1):
        raise SystemExit(f"tvm_cpu_compare: {d}: replay exited {r.returncode}: {r.stderr.strip()[-300:]}")
    m = re.search(r"eager end to end: ([0-9.]+) us per run", r.stdout)
    if not m:
        raise SystemExit(f"tvm_cpu_compare: {d}: no end-to-end time in replay's output")
    compile_s = sum(float(x) for x in re.findall(r"compiled for the host in ([0-9.]+) s", r.stderr))
    return float(m.group(1)) / 1e6, compile_s, "match" if r.returncode == 0 else "DIFFER"


def top_kernels(timing_json: str, n: int = 10) -> List[str]:
    """Lines naming the kernels (by fused function) that take most of a replay's kernel time,
    with how each runs on the CPU (from the .ways.txt time_kdflow wrote beside the JSON)."""
    import json
    with open(timing_json) as f:
        t = json.load(f)
    ways: Dict[str, str] = {}
    if os.path.exists(timing_json + ".ways.txt"):
        for line in open(timing_json + ".ways.txt"):
            m = re.search(r"kernel (\S+) runs each block (.*)$", line.strip())
            if m:
                ways[m.group(1)] = m.group(2)
    by_fn: Dict[str, List[Any]] = {}
    for k in t["kernels"]:
        e = by_fn.setdefault(k["name"], [0.0, 0, k["grid"], k["block"]])
        e[0] += k["median_us"]
        e[1] += 1
    total = t["kernel_sum_median_us"] or 1.0
    rows = sorted(by_fn.items(), key=lambda kv: -kv[1][0])
    out = [f"  kernel sum {total / 1e3:.1f} ms; eager run {t.get('eager_run_median_us', 0) / 1e3:.1f} ms; "
           f"{len(t['kernels'])} launches of {len(by_fn)} kernels"]
    for name, (us, launches, grid, block) in rows[:n]:
        out.append(f"  {us / 1e3:8.1f} ms {100 * us / total:5.1f}%  x{launches} grid {grid} block {block}  {name}: "
                   f"{ways.get(name, '?')}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("kdflow")
    ap.add_argument("--models", default="cnn,mnist,encoder,mlp")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--keep", default="", help="write the CUDA builds here (default: a temporary folder)")
    ap.add_argument("--timing-json", default="", help="write replay's per-kernel times here as <model>.json and "
                    "print the kernels that take most of kdflow's time")
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
            tj = ""
            if a.timing_json:
                os.makedirs(a.timing_json, exist_ok=True)
                tj = os.path.join(a.timing_json, name + ".json")
            k_s, compile_s, ok = time_kdflow(a.kdflow, d, a.repeat, tj)
            if tj:
                print(f"tvm_cpu_compare: {name}: kdflow's kernels, most time first:", file=sys.stderr)
                for line in top_kernels(tj):
                    print(line, file=sys.stderr)
            t0 = time.monotonic()
            t_s = time_tvm(tvm, mod, inputs, a.repeat)
            print(f"tvm_cpu_compare: {name}: TVM llvm build and timing in {time.monotonic() - t0:.1f} s", file=sys.stderr)
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
