"""Real builds of the constructs issue 40 names, for build_models.py (each a function writing one
model folder through the exporter, as a user would):
- input names that are not file names (Caffe2's gpu_0/data_0, TensorFlow's input_1:0, PyTorch's
  input.1, a space, a non-ASCII letter), through the command line;
- each VM builtin a build reaches beyond the memory planner's: tensor_to_shape (an ONNX Expand
  whose shape is an input), read_if_cond (an If on an input), make_prim_value (0.26+) or
  call_tir_dyn (0.20 - 0.25) (an embedding of symbolic shape), make_closure and invoke_closure
  (a lifted inner function), ensure_zero_offset;
- a build with no kernel (ONNX sequence operators).
Every builder returns nothing; the folder is what kdflow reads. EXPECT says what check_models.py
asserts of each beyond the common checks."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Callable, Dict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# What check_models.py asserts beyond the common checks, per model: the VM builtins its bytecode
# must call (vm_calls.json, TVM's own text), values an input's buffer records, and "no_kernel".
EXPECT: Dict[str, Dict[str, Any]] = {
    "names": {"inputs": ["gpu_0_data_0", "input_1:0", "input_1", "a_b", "_t_"],
              "files": ["input_gpu_0_data_0.npy", "input_input_1%3A0.npy", "input_input_1.npy",
                        "input_a_b.npy", "input__t_.npy"]},
    # Relay keeps every name in graph.json (its fused functions name their parameters p0, p1, ...).
    "relay_names": {"inputs": ["gpu_0/data_0", "input_1:0", "input.1", "a b", "\u00e9t\u00e9"],
                    "files": ["input_gpu_0%2Fdata_0.npy", "input_input_1%3A0.npy", "input_input.1.npy",
                              "input_a%20b.npy", "input_%C3%A9t%C3%A9.npy"]},
    "names_relax": {"inputs": ["x:0", "y-1", "z.2"],
                    "files": ["input_x%3A0.npy", "input_y-1.npy", "input_z.2.npy"]},
    "expand_shape_input": {"builtins": ["vm.builtin.tensor_to_shape"], "values_used": {"shape": [3, 8]},
                           "oracle_skip": "the oracle does not model vm.builtin.tensor_to_shape"},
    "if_input": {"builtins": ["vm.builtin.read_if_cond"], "values_used": {"c": [1]},
                 "oracle_skip": "the oracle does not follow the VM's If"},
    "embedding_symbolic": {"builtins_any": ["vm.builtin.make_prim_value", "vm.builtin.call_tir_dyn"]},
    "closure": {"builtins": ["vm.builtin.make_closure", "vm.builtin.invoke_closure"],
                "oracle_skip": "the oracle does not model vm.builtin.invoke_closure"},
    "ensure_zero_offset": {"builtins": ["vm.builtin.ensure_zero_offset"],
                           "oracle_skip": "the oracle's vm.builtin.ensure_zero_offset returns no tensor"},
    "gather_shape_of": {},
    "sequence_no_kernel": {"no_kernel": True},
}


def _tensor(relax: Any, shape: Any, dtype: str) -> Any:
    """A tensor's annotation: TensorStructInfo (TVM 0.20 - 0.26), TensorType (0.27)."""
    make = getattr(relax, "TensorStructInfo", None)
    return make(shape, dtype) if make is not None else relax.TensorType(shape=list(shape), dtype=dtype)


def _vm_text(tvm: Any, ex: Any) -> str:
    from tvm import relax
    vmex = ex if hasattr(ex, "as_text") else relax.VMExecutable(ex.mod)
    return str(vmex.as_text())


def _write_vm_calls(tvm: Any, ex: Any, out: str) -> None:
    """vm_calls.json: TVM's own text of the executable, per function its callees (as
    build_models.vm_calls), so the checks rest on what TVM emitted, not on kdflow."""
    import json
    sys.path.insert(0, HERE)
    from build_models import vm_calls
    with open(os.path.join(out, "vm_calls.json"), "w") as f:
        json.dump(vm_calls(_vm_text(tvm, ex)), f, indent=1)


def _build(tvm: Any, mod: Any, out: str, **kw: Any) -> None:
    import kdflow_tvm
    ex = kdflow_tvm.build(mod, "cuda", out=out, arch="sm_90", quiet=True, **kw)
    _write_vm_calls(tvm, ex, out)


def _onnx(nodes: Any, inputs: Any, outputs: Any, inits: Any = ()) -> Any:
    from onnx import helper
    graph = helper.make_graph(nodes, "kdflow_builtin_test", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def names(out: str) -> None:
    """Input names as frameworks write them, through the command line users run; the --shape of
    one is given by its encoded name. TVM's ONNX importer renames input.1 to input_1 itself, and
    the exporter renames the names TVM's code generators cannot print (gpu_0/data_0, a space, a
    non-ASCII letter): what remains (input_1:0) is kept in the build and encoded in its file."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array((rng.standard_normal((16, 8)) / 4).astype("float32"), "fc/w:0")
    f32 = TensorProto.FLOAT
    model = _onnx(
        [helper.make_node("MatMul", ["gpu_0/data_0", "fc/w:0"], ["h 1"]),
         helper.make_node("Add", ["h 1", "input_1:0"], ["s.1"]),
         helper.make_node("Mul", ["s.1", "input.1"], ["m"]),
         helper.make_node("Sub", ["m", "a b"], ["d"]),
         helper.make_node("Add", ["d", "\u00e9t\u00e9"], ["e/out"])],
        [helper.make_tensor_value_info("gpu_0/data_0", f32, [2, 16]),
         helper.make_tensor_value_info("input_1:0", f32, [2, 8]),
         helper.make_tensor_value_info("input.1", f32, [2, 8]),
         helper.make_tensor_value_info("a b", f32, [2, 8]),
         helper.make_tensor_value_info("\u00e9t\u00e9", f32, [2, 8])],
        [helper.make_tensor_value_info("e/out", f32, [2, 8])], [w])
    path = out + ".onnx"
    onnx.save(model, path)
    cmd = [sys.executable, "-m", "kdflow_tvm", "onnx", path, "-o", out, "--shape", "gpu_0%2Fdata_0=2x16",
           "--arch", "sm_90", "-q"]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"names: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")


def names_relax(tvm: Any, out: str) -> None:
    """A Relax module whose parameter names TVM prints well but no file system likes alike:
    x:0 is input_x%3A0.npy; y-1 and z.2 are their own encodings."""
    from tvm import relax
    bb = relax.BlockBuilder()
    x = relax.Var("x:0", _tensor(relax, (4, 8), "float32"))
    y = relax.Var("y-1", _tensor(relax, (4, 8), "float32"))
    z = relax.Var("z.2", _tensor(relax, (4, 8), "float32"))
    with bb.function("main", [x, y, z]):
        with bb.dataflow():
            s = bb.emit(relax.op.add(x, y))
            o = bb.emit_output(relax.op.multiply(s, z))
        bb.emit_func_output(o)
    _build(tvm, bb.get(), out, inputs=True)


def expand_shape_input(tvm: Any, out: str) -> None:
    """ONNX Expand whose target shape is an input tensor: vm.builtin.tensor_to_shape reads it on
    the host, so the flow depends on its values ([3, 8] here)."""
    from onnx import TensorProto, helper
    from tvm.relax.frontend.onnx import from_onnx
    model = _onnx([helper.make_node("Expand", ["x", "shape"], ["y0"]), helper.make_node("Relu", ["y0"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8]),
                   helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["d0", "d1"])])
    rng = np.random.default_rng(9)
    _build(tvm, from_onnx(model), out,
           inputs={"x": rng.standard_normal((1, 8)).astype("float32"), "shape": np.array([3, 8], "int64")})


def if_input(tvm: Any, out: str) -> None:
    """An If on an input (vm.builtin.read_if_cond on a 0-d bool tensor): the branch taken
    depends on its value."""
    from tvm import relax
    bb = relax.BlockBuilder()
    c = relax.Var("c", _tensor(relax, (), "bool"))
    x = relax.Var("x", _tensor(relax, (4,), "float32"))
    with bb.function("main", [c, x]):
        then_ = relax.SeqExpr([], relax.op.add(x, x))
        else_ = relax.SeqExpr([], relax.op.multiply(x, x))
        y = bb.emit(relax.If(c, then_, else_))
        bb.emit_func_output(y)
    mod = relax.transform.Normalize()(bb.get())
    rng = np.random.default_rng(2)
    _build(tvm, mod, out, inputs={"c": np.array(True), "x": rng.standard_normal(4).astype("float32")})


def embedding_symbolic(tvm: Any, out: str) -> None:
    """An embedding of symbolic (batch, seq_len): TVM 0.26+ passes the dimensions to the kernel
    as scalars (vm.builtin.make_prim_value), 0.20 - 0.25 through vm.builtin.call_tir_dyn."""
    from tvm.relax.frontend import nn

    class Embed(nn.Module):
        def __init__(self) -> None:
            self.tokens = nn.Embedding(64, 16)

        def forward(self, ids: Any) -> Any:
            return self.tokens(ids)

    mod, specs = Embed().export_tvm(spec={"forward": {"ids": nn.spec.Tensor(["batch", "seq_len"], "int32")}})
    f = mod["forward"].with_attr("global_symbol", "main")
    rng = np.random.default_rng(4)
    params = {n: rng.standard_normal([int(d) for d in p.shape]).astype(p.dtype) for n, p in specs}
    _build(tvm, tvm.IRModule({"main": f}), out, params=params,
           inputs={"ids": rng.integers(0, 64, (2, 5)).astype("int32")})


def closure(tvm: Any, out: str) -> None:
    """A nested function with a free variable, lifted (relax.transform.LambdaLift): main makes a
    closure (vm.builtin.make_closure) and calls it (vm.builtin.invoke_closure)."""
    from tvm import relax
    bb = relax.BlockBuilder()
    x = relax.Var("x", _tensor(relax, (4,), "float32"))
    y = relax.Var("y", _tensor(relax, (4,), "float32"))
    inner = relax.Function([y], relax.op.add(x, y), _tensor(relax, (4,), "float32"))
    with bb.function("main", [x]):
        g = bb.emit(inner)
        z = bb.emit(relax.Call(g, [x]))
        bb.emit_func_output(z)
    mod = relax.transform.LambdaLift()(relax.transform.Normalize()(bb.get()))
    _build(tvm, mod, out, inputs=True)


def ensure_zero_offset(tvm: Any, out: str) -> None:
    """R.memory.ensure_zero_offset between two kernels (vm.builtin.ensure_zero_offset)."""
    from tvm import relax
    bb = relax.BlockBuilder()
    x = relax.Var("x", _tensor(relax, (4,), "float32"))
    with bb.function("main", [x]):
        y = bb.emit(relax.op.add(x, x))
        z = bb.emit(relax.op.memory.ensure_zero_offset(y))
        o = bb.emit(relax.op.multiply(z, x))
        bb.emit_func_output(o)
    _build(tvm, bb.get(), out, inputs=True)


def sequence_no_kernel(tvm: Any, out: str) -> None:
    """ONNX sequence operators, every operation a VM builtin: SequenceAt(SequenceConstruct(a,
    b), 1) is b itself. The build has no kernel and no device module."""
    from onnx import TensorProto, helper, numpy_helper
    from tvm.relax.frontend.onnx import from_onnx
    f32 = TensorProto.FLOAT
    model = _onnx([helper.make_node("SequenceConstruct", ["a", "b"], ["seq"]),
                   helper.make_node("SequenceAt", ["seq", "i"], ["y"])],
                  [helper.make_tensor_value_info("a", f32, [2, 3]), helper.make_tensor_value_info("b", f32, [2, 3])],
                  [helper.make_tensor_value_info("y", f32, [2, 3])],
                  [numpy_helper.from_array(np.array(1, dtype=np.int64), "i")])
    _build(tvm, from_onnx(model), out, inputs=True)


def gather_shape_of(tvm: Any, out: str) -> None:
    """ONNX Gather, the embedding lookup of ONNX files: TVM 0.20 - 0.25's importer takes the
    table's shape (vm.builtin.shape_of), makes it a host tensor (relax.run.shape_to_tensor) and
    wraps negative ids with it; 0.26+ folds all of it."""
    from onnx import TensorProto, helper, numpy_helper
    from tvm.relax.frontend.onnx import from_onnx
    rng = np.random.default_rng(6)
    table = numpy_helper.from_array(rng.standard_normal((64, 16)).astype("float32"), "table")
    model = _onnx([helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)],
                  [helper.make_tensor_value_info("ids", TensorProto.INT64, [8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 16])], [table])
    _build(tvm, from_onnx(model), out, inputs={"ids": np.array([0, 5, -1, 63, 2, -64, 7, 1], "int64")})


def models(tvm: Any) -> Dict[str, Callable[[str], None]]:
    return {
        "names": names,
        "names_relax": lambda out: names_relax(tvm, out),
        "expand_shape_input": lambda out: expand_shape_input(tvm, out),
        "if_input": lambda out: if_input(tvm, out),
        "embedding_symbolic": lambda out: embedding_symbolic(tvm, out),
        "closure": lambda out: closure(tvm, out),
        "ensure_zero_offset": lambda out: ensure_zero_offset(tvm, out),
        "sequence_no_kernel": lambda out: sequence_no_kernel(tvm, out),
        "gather_shape_of": lambda out: gather_shape_of(tvm, out),
    }
