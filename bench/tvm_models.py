"""Builds adversarial models for bench.py with the TVM this Python imports, through the exporter:
    python3 bench/tvm_models.py OUT_DIR
then  python3 bench/bench.py build/kdflow build/kdflow_dump_headers OUT --samples OUT_DIR/fp16_mobilenet,...
  fp16_mobilenet   a MobileNet-style network in float16 everywhere (depthwise and pointwise
                   convolutions, 13 blocks at 112x112 down to 7x7): the half-precision device code
  inception_concat 6 inception-style blocks at Inception-v3's 35x35x288 stage, each concatenating 4
                   branches (1x1, 3x3, 5x5, 1x1),
                   so every block is a deep concatenation of convolutions
  deep_mlp         48 linear layers with residual adds and layer norms: many launches, small kernels
No references (reference=False): these are for extract's speed, not for replay. Each model is
built in a process of its own (a crash inside TVM costs that model only); exit 1 names those
that failed."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import numpy as np  # noqa: E402

import kdflow_tvm  # noqa: E402
from kdflow_tvm import _tvm  # noqa: E402


def main() -> int:
    out = sys.argv[1]
    tvm = _tvm.import_tvm()
    from tvm.relax.frontend import nn

    class DwBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, dtype: str) -> None:
            self.dw = nn.Conv2D(cin, cin, 3, stride=stride, padding=1, groups=cin, dtype=dtype)
            self.pw = nn.Conv2D(cin, cout, 1, dtype=dtype)

        def forward(self, x: Any) -> Any:
            return nn.relu(self.pw(nn.relu(self.dw(x))))

    class MobileNet(nn.Module):
        def __init__(self, dtype: str) -> None:
            self.stem = nn.Conv2D(3, 32, 3, stride=2, padding=1, dtype=dtype)
            cfg = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1), (256, 512, 2)] + \
                  [(512, 512, 1)] * 5 + [(512, 1024, 2), (1024, 1024, 1)]
            self.blocks = nn.ModuleList([DwBlock(a, b, s, dtype) for a, b, s in cfg])
            self.fc = nn.Linear(1024, 1000, dtype=dtype)

        def forward(self, x: Any) -> Any:
            y = nn.relu(self.stem(x))
            for b in self.blocks:
                y = b(y)
            y = nn.op.sum(y, axis=[2, 3]) * (1.0 / 49)  # global average pool (7x7)
            return nn.softmax(self.fc(y), axis=-1)

    class Inception(nn.Module):
        def __init__(self, cin: int) -> None:
            self.b1 = nn.Conv2D(cin, 64, 1)
            self.b3a = nn.Conv2D(cin, 48, 1)
            self.b3 = nn.Conv2D(48, 96, 3, padding=1)
            self.b5a = nn.Conv2D(cin, 32, 1)
            self.b5 = nn.Conv2D(32, 64, 5, padding=2)
            self.bp = nn.Conv2D(cin, 64, 1)

        def forward(self, x: Any) -> Any:
            pooled = x  # nn has no pooling op: the fourth branch is a 1x1 convolution of the input
            return nn.concat([nn.relu(self.b1(x)), nn.relu(self.b3(nn.relu(self.b3a(x)))),
                              nn.relu(self.b5(nn.relu(self.b5a(x)))), nn.relu(self.bp(pooled))], dim=1)

    class InceptionNet(nn.Module):
        def __init__(self) -> None:
            self.stem = nn.Conv2D(3, 288, 3, padding=1)
            self.blocks = nn.ModuleList([Inception(288) for _ in range(6)])  # 64 + 96 + 64 + 64 = 288

        def forward(self, x: Any) -> Any:
            y = self.stem(x)
            for b in self.blocks:
                y = b(y)
            return y

    class DeepMLP(nn.Module):
        def __init__(self) -> None:
            self.layers = nn.ModuleList([nn.Linear(256, 256) for _ in range(48)])
            self.norms = nn.ModuleList([nn.LayerNorm(256) for _ in range(48)])

        def forward(self, x: Any) -> Any:
            for lin, norm in zip(self.layers, self.norms):
                x = x + nn.relu(lin(norm(x)))
            return x

    models = {
        "fp16_mobilenet": (MobileNet("float16"), {"x": nn.spec.Tensor((1, 3, 224, 224), "float16")}),
        "inception_concat": (InceptionNet(), {"x": nn.spec.Tensor((1, 3, 35, 35), "float32")}),
        "deep_mlp": (DeepMLP(), {"x": nn.spec.Tensor((8, 256), "float32")}),
    }
    names = [n for n in models if len(sys.argv) <= 2 or n in sys.argv[2:]]
    if len(names) > 1:
        # One process per model: a crash inside TVM (TVM 0.27 segfaults in its tensorize pass on
        # fp16_mobilenet) costs that model only.
        failed = []
        for name in names:
            if subprocess.run([sys.executable, os.path.abspath(__file__), out, name], check=False).returncode != 0:
                failed.append(name)
                print(f"tvm_models: {name} failed to build (its output above); going on", file=sys.stderr, flush=True)
        if failed:
            print(f"tvm_models: not built: {' '.join(failed)}", file=sys.stderr, flush=True)
        return 1 if failed else 0
    for name in names:
        module, spec = models[name]
        rng = np.random.default_rng(zlib.crc32(name.encode()))  # the same weights however it is run
        mod, specs = module.export_tvm(spec={"forward": spec})
        mod = tvm.IRModule({"main": mod["forward"].with_attr("global_symbol", "main")})
        params = {n: (rng.standard_normal([int(d) for d in p.shape]) * 0.05).astype(p.dtype) for n, p in specs}
        print(f"tvm_models: {name}", file=sys.stderr, flush=True)
        kdflow_tvm.build(mod, "cuda", out=os.path.join(out, name), params=params, inputs=True, reference=False,
                         arch="sm_90", force=True, quiet=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
