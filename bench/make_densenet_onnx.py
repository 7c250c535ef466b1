#!/usr/bin/env python3
"""make_densenet_onnx.py OUT.onnx [--blocks 6,12,24,16] [--growth 32] [--init 64] [--size 224] [--seed 0]

Writes a DenseNet (Huang et al. 2017, torchvision's densenet121 layout by default) as an ONNX file
with onnx.helper and random weights, for bench.py's large builds (issue 40):
  stem      conv 7x7/2 (init channels), batchnorm, relu, maxpool 3x3/2
  blocks    per layer: batchnorm, relu, conv 1x1 (4 x growth), batchnorm, relu, conv 3x3 (growth),
            its input the concat of every earlier feature map of the block (as torch.cat exports it)
  between   batchnorm, relu, conv 1x1 (half the channels), avgpool 2x2/2
  head      batchnorm, relu, global avgpool, flatten, gemm (1000)
`--blocks 2,2 --growth 12 --init 16` is the small DenseNet-like model. Then
  PYTHONPATH=python python3 -m kdflow_tvm onnx OUT.onnx -o DIR --arch sm_90 --no-reference
builds the folder `kdflow extract` reads (minutes for densenet121)."""

from __future__ import annotations

import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, kind: str) -> str:
        self.n += 1
        return "%s_%d" % (kind, self.n)

    def const(self, value: np.ndarray) -> str:
        w = self.name("w")
        self.inits.append(numpy_helper.from_array(value.astype(np.float32), w))
        return w

    def weight(self, shape, scale: float) -> str:
        return self.const(self.rng.standard_normal(shape) * scale)

    def node(self, op: str, inputs, **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=out, **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1) -> str:
        w = self.weight((cout, cin, k, k), (2.0 / (cin * k * k)) ** 0.5)
        return self.node("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)

    def bn_relu(self, x: str, c: int) -> str:
        r = self.rng
        scale, bias = self.const(1.0 + r.standard_normal(c) * 0.1), self.const(r.standard_normal(c) * 0.1)
        mean, var = self.const(r.standard_normal(c) * 0.1), self.const(1.0 + np.abs(r.standard_normal(c)) * 0.1)
        return self.node("Relu", [self.node("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-5)])


def densenet(blocks, growth: int, init: int, size: int, seed: int) -> onnx.ModelProto:
    b = Builder(seed)
    x = b.conv("input", 3, init, 7, 2)
    x = b.bn_relu(x, init)
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = init
    for i, layers in enumerate(blocks):
        feats = [x]
        for _ in range(layers):
            cin = init if len(feats) == 1 else c
            inp = feats[0] if len(feats) == 1 else b.node("Concat", feats, axis=1)
            y = b.conv(b.bn_relu(inp, cin), cin, 4 * growth, 1)
            y = b.conv(b.bn_relu(y, 4 * growth), 4 * growth, growth, 3)
            feats.append(y)
            c = cin + growth
        x = b.node("Concat", feats, axis=1)
        init = c
        if i + 1 < len(blocks):
            x = b.conv(b.bn_relu(x, c), c, c // 2, 1)
            x = b.node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
            c //= 2
            init = c
    x = b.bn_relu(x, c)
    x = b.node("GlobalAveragePool", [x])
    x = b.node("Flatten", [x], axis=1)
    w = b.weight((1000, c), (1.0 / c) ** 0.5)
    bias = b.weight((1000,), 0.01)
    b.nodes.append(helper.make_node("Gemm", [x, w, bias], ["output"], name="fc", transB=1))
    graph = helper.make_graph(b.nodes, "densenet", [helper.make_tensor_value_info(
        "input", TensorProto.FLOAT, [1, 3, size, size])], [helper.make_tensor_value_info(
            "output", TensorProto.FLOAT, [1, 1000])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--blocks", default="6,12,24,16")
    ap.add_argument("--growth", type=int, default=32)
    ap.add_argument("--init", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    m = densenet([int(v) for v in a.blocks.split(",")], a.growth, a.init, a.size, a.seed)
    onnx.save(m, a.out)
    print("%s: %d nodes, %d initializers" % (a.out, len(m.graph.node), len(m.graph.initializer)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
