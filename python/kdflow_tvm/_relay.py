"""Relay builds (TVM 0.8 - 0.19): relay.build for CUDA with the C host, the files kdflow reads,
and TVM's results on the CPU: every node's and the outputs from the CUDA build's own fused
functions compiled for the CPU and run in the CUDA graph's order (the outputs from TVM's CPU
build of the whole module where a node cannot be run so).

Written against the Python API of the 0.8 - 0.19 releases (python/tvm/relay/build_module.py,
python/tvm/relay/backend/executor_factory.py at those tags); run with TVM 0.19."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _tvm
from ._folder import Staging, as_numpy, write_model_so
from .errors import DATA_ERROR, USAGE, ExportError


def is_relay_module(tvm: Any, mod: Any) -> bool:
    try:
        from tvm import relay  # type: ignore[import-not-found]
    except Exception:
        return False
    try:
        return any(isinstance(f, relay.Function) for _, f in mod.functions.items())
    except Exception:
        return False


def build(tvm: Any, mod: Any, target: Any, params: Optional[Dict[str, np.ndarray]],
          disabled: Sequence[str] = (), info: Optional[Dict[str, Any]] = None) -> Any:
    from tvm import relay  # type: ignore[import-not-found]
    patched: List[bool] = []

    def postproc(code: str, *_: Any) -> str:
        fixed = fix_cuda_source(str(code))
        if fixed != code:
            patched.append(True)
        return fixed

    old = tvm.get_global_func(POSTPROC, allow_missing=True)
    if old is None:
        tvm.register_func(POSTPROC, postproc, override=True)
    try:
        with tvm.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
            lib = relay.build(mod, target=target, params=params)
    finally:
        if old is None:
            tvm._ffi.registry.remove_global_func(POSTPROC)
    if patched and info is not None:
        info.setdefault("workarounds", []).append(
            "device.cu: TVM's definition of htanh(half) guarded by nvcc's version, as TVM's later releases do "
            "(CUDA 12.8+ defines it in cuda_fp16.h: 'htanh has already been defined'), through "
            "tvm_callback_cuda_postproc")
    return lib


POSTPROC = "tvm_callback_cuda_postproc"
# TVM 0.19's CUDA prelude defines htanh(half), which CUDA 12.8 added to cuda_fp16.h: every
# float16 kernel source then fails in nvcc 12.8+ ("htanh has already been defined"). TVM's
# later releases guard the line by nvcc's version; this is that guard.
_HTANH = "CUDA_UNSUPPORTED_HALF_MATH_BINARY(hpow, powf)\nCUDA_UNSUPPORTED_HALF_MATH_UNARY(htanh, tanhf)\n"
_HTANH_GUARDED = ("CUDA_UNSUPPORTED_HALF_MATH_BINARY(hpow, powf)\n"
                  "#if ((__CUDACC_VER_MAJOR__ < 12) || ((__CUDACC_VER_MAJOR__ == 12) && (__CUDACC_VER_MINOR__ < 8)))\n"
                  "CUDA_UNSUPPORTED_HALF_MATH_UNARY(htanh, tanhf)\n"
                  "#endif\n")


def fix_cuda_source(code: str) -> str:
    """TVM's CUDA source with the known defects of its prelude fixed as TVM later fixed them."""
    return code.replace(_HTANH, _HTANH_GUARDED, 1)


def check_c_host(lib: Any) -> None:
    host = lib.get_lib() if hasattr(lib, "get_lib") else lib
    kind = _tvm.module_kind(host)
    if kind != "c":
        raise ExportError(f"this build's host module is {kind or 'missing'!r}, not C: kdflow reads the C host; "
                          "build with tvm.target.Target(\"cuda\", host=\"c\") (or use kdflow_tvm.build)", USAGE)


MODULE_CTX_DECL = """/* Written by kdflow_tvm: TVM 0.9 - 0.14's C host uses __tvm_module_ctx without defining it;
   the library loader sets it. */
#ifdef __cplusplus
extern "C" {
#endif
void* __tvm_module_ctx = 0;
#ifdef __cplusplus
}
#endif
"""


def write_files(tvm: Any, lib: Any, st: Staging, info: Dict[str, Any]) -> None:
    from tvm import relay  # type: ignore[import-not-found]
    check_c_host(lib)
    host = lib.get_lib()
    st.write_text("graph.json", lib.get_graph_json())
    host_c = _tvm.source_of(host)
    st.write_text("host.c", host_c)
    devices = [m for m in _tvm.imports_of(host) if _tvm.module_kind(m) == "cuda"]
    if not devices:
        raise ExportError("the build has no CUDA module: is the model's main function empty?", DATA_ERROR)
    info["device_modules"] = []
    for i, d in enumerate(devices):
        stem = "device" if i == 0 else f"device_{i}"
        st.write_text(stem + ".cu", _tvm.source_of(d, "cu"))
        saved = None
        for fmt in ("cubin", "fatbin", "ptx"):
            try:
                d.save(st.file(f"{stem}.{fmt}"), fmt)  # writes <stem>.tvm_meta.json beside it
                saved = f"{stem}.{fmt}"
                break
            except Exception:
                if os.path.exists(st.file(f"{stem}.{fmt}")):
                    os.remove(st.file(f"{stem}.{fmt}"))
        info["device_modules"].append({"index": i, "binary": saved})
        if not os.path.exists(st.file(stem + ".tvm_meta.json")):
            raise ExportError("TVM saved the CUDA module without its function table (.tvm_meta.json)", DATA_ERROR)
    params = lib.get_params()
    if params:
        save = getattr(relay, "save_param_dict", None) or tvm.runtime.save_param_dict
        st.write_bytes("params.bin", bytes(save(params)))
    st.write_text("relay.txt", relay_text(lib))
    write_model_so(lib, st, info, forced_includes(host_c))


def relay_text(lib: Any) -> str:
    """Each lowered function's fused Relay, as kdflow's relay.txt reader takes it."""
    meta = getattr(lib, "function_metadata", None) or {}
    parts = []
    for name in sorted(meta.keys(), key=lambda n: (n != "__tvm_main__", str(n))):
        info = meta[name]
        for tgt, f in getattr(info, "relay_primfuncs", {}).items():
            parts.append(f"// {name} ({tgt})\n{f}\n")
    return "".join(parts)


def forced_includes(host_c: str) -> List[Tuple[str, str, str]]:
    """(file name, text, why) for the known defect of TVM's C host that export_library trips on."""
    if "__tvm_module_ctx" in host_c and "void* __tvm_module_ctx" not in host_c:
        return [("module_ctx_decl.h", MODULE_CTX_DECL, "TVM's C host uses __tvm_module_ctx without defining it")]
    return []


def main_inputs(tvm: Any, mod: Any, params: Dict[str, np.ndarray]) -> List[Tuple[str, List[Any], str]]:
    from tvm import relay  # type: ignore[import-not-found]
    mod = relay.transform.InferType()(mod)
    out = []
    for p in mod["main"].params:
        if p.name_hint in params:
            continue
        t = p.checked_type
        dims = [int(d) if isinstance(d, (int, tvm.tir.IntImm)) else str(d) for d in t.shape]
        out.append((p.name_hint, dims, str(t.dtype)))
    return out


# ------------------------------------------------------------------------------ references
# TVM's CPU build of the user's module fuses and names its functions its own way (other
# layouts, constants folded into other shapes, other fused groups), so its graph's nodes are
# not the CUDA build's. The node references therefore run the CUDA build's own fused Relay
# functions (function_metadata's relay_primfuncs, the functions relay.txt prints) on the CPU:
# one Relay main, rebuilt from the CUDA graph.json node by node, calls each primitive function
# on the values of the nodes it reads and returns every node's outputs; relay.build for llvm
# keeps primitive functions as they are (FuseOps does not enter them), so each node's value is
# TVM's own CPU result of that node's function on TVM's CPU results of the nodes before it.

NO_KERNEL = ("__nop", "__copy")  # graph executor built-ins: a view or a copy, no kernel


def node_plan(graph: Dict[str, Any], functions: Sequence[str]) -> Tuple[List[Tuple[int, int]], List[Dict[str, Any]]]:
    """(every (node, output) whose value the CPU run returns, the function nodes it cannot
    compare with the reason), for a graph.json whose fused functions `functions` are known.
    A node that launches nothing (__nop, __copy) is listed as such: kdflow compares nodes with
    kernels. A node reading one that cannot be run cannot be run either."""
    nodes = graph["nodes"]
    row = graph.get("node_row_ptr") or list(range(len(nodes) + 1))
    known = set(functions)
    runnable: Dict[int, bool] = {}
    entries: List[Tuple[int, int]] = []
    skipped: List[Dict[str, Any]] = []
    for i, n in enumerate(nodes):
        if n.get("op") == "null":
            runnable[i] = True
            continue
        fn = (n.get("attrs") or {}).get("func_name", n.get("name"))
        blocked = [e[0] for e in n.get("inputs", []) if not runnable.get(e[0], False)]
        reason = ""
        if fn in NO_KERNEL:
            reason = f"{fn} launches no kernel ({'a view of its input' if fn == '__nop' else 'a copy'})"
        elif fn not in known:
            reason = "TVM's build gives no Relay function of that name (function_metadata's relay_primfuncs)"
        elif blocked:
            reason = f"it reads node {blocked[0]}, which could not be run on the CPU"
        runnable[i] = not blocked and (fn in known or fn in NO_KERNEL)
        if reason:
            skipped.append({"graph_node": i, "function": fn, "reason": reason})
        if fn in known and not blocked:
            entries.extend((i, k) for k in range(row[i + 1] - row[i]))
    return entries, skipped


def cuda_functions(lib: Any) -> Dict[str, Any]:
    """Each fused function's Relay (as TVM lowered it for the CUDA target), by its graph name."""
    meta = getattr(lib, "function_metadata", None) or {}
    out: Dict[str, Any] = {}
    for name in meta.keys():
        for _tgt, f in getattr(meta[name], "relay_primfuncs", {}).items():
            out[str(name)] = f
            break
    return out


def _leaf_count(t: Any) -> int:
    fields = getattr(t, "fields", None)
    return sum(_leaf_count(f) for f in fields) if fields is not None else 1


def _as_args(relay: Any, fn: Any, values: List[Any]) -> List[Any]:
    """The graph node's flat inputs regrouped as the function's parameters (a tuple parameter
    takes as many graph inputs as it has tensors)."""
    if len(fn.params) == len(values):
        return values
    args, at = [], 0
    for p in fn.params:
        t = p.checked_type if getattr(p, "_checked_type_", None) is not None else p.type_annotation
        n = _leaf_count(t)
        args.append(relay.Tuple(values[at:at + n]) if getattr(t, "fields", None) is not None else values[at])
        at += n
    return args


def _plain_primitive(tvm: Any, relay: Any, f: Any) -> Any:
    """The function as FuseOps made it: lowering left the CUDA schedule, target and TIR on it as
    attributes (a Schedule, which TVM cannot compare structurally, breaks the CPU build's cache)."""
    g = relay.Function(list(f.params), f.body, f.ret_type, list(f.type_params))
    return g.with_attr("Primitive", tvm.tir.IntImm("int32", 1))


def _cpu_run_of_cuda_functions(tvm: Any, graph: Dict[str, Any], functions: Dict[str, Any],
                               entries: List[Tuple[int, int]], values: Dict[str, np.ndarray]
                               ) -> Tuple[Dict[Tuple[int, int], np.ndarray], Optional[List[np.ndarray]]]:
    """Each entry's value, and the graph's outputs (None where one of them could not be run)."""
    from tvm import relay  # type: ignore[import-not-found]
    from tvm.contrib import graph_executor  # type: ignore[import-not-found]
    nodes = graph["nodes"]
    row = graph.get("node_row_ptr") or list(range(len(nodes) + 1))
    attrs = graph.get("attrs", {})
    shapes = attrs.get("shape", [None, []])[1]
    dtypes = attrs.get("dltype", [None, []])[1]
    wanted = {i for i, _ in entries}
    expr: Dict[int, Any] = {}
    params: List[Any] = []
    plain: Dict[str, Any] = {}

    def value(e: Sequence[int]) -> Any:
        j, k = int(e[0]), int(e[1])
        return relay.TupleGetItem(expr[j], k) if row[j + 1] - row[j] > 1 else expr[j]

    for i, n in enumerate(nodes):
        if n.get("op") == "null":
            v = relay.var(n["name"], shape=[int(d) for d in shapes[row[i]]], dtype=dtypes[row[i]])
            params.append(v)
            expr[i] = v
            continue
        fn = (n.get("attrs") or {}).get("func_name", n.get("name"))
        ins = n.get("inputs", [])
        if any(int(e[0]) not in expr for e in ins):
            continue
        if fn == "__nop":  # a view: the same elements in the output's shape
            expr[i] = relay.reshape(value(ins[0]), newshape=[int(d) for d in shapes[row[i]]])
        elif fn == "__copy":
            expr[i] = value(ins[0])
        elif i in wanted:
            # One function per name, however many nodes call it (its parameters bound once).
            f = plain.get(fn) or plain.setdefault(fn, _plain_primitive(tvm, relay, functions[fn]))
            expr[i] = relay.Call(f, _as_args(relay, f, [value(e) for e in ins]))
    heads = [(int(e[0]), int(e[1])) for e in graph.get("heads", [])]
    heads_run = all(j in expr for j, _ in heads)
    fields = [value(e) for e in entries] + ([value(e) for e in heads] if heads_run else [])
    main = relay.Function(params, relay.Tuple(fields))
    # opt_level 0: no pass that rewrites the program around the calls (layouts, constant folding);
    # the primitive functions are compiled for llvm as they are.
    with tvm.transform.PassContext(opt_level=0):
        cpu = relay.build(tvm.IRModule.from_expr(main), target="llvm")
    m = graph_executor.GraphModule(cpu["default"](tvm.cpu()))
    for v in params:
        m.set_input(v.name_hint, values[v.name_hint])
    m.run()
    got = [as_numpy(m.get_output(j)).copy() for j in range(len(fields))]
    return dict(zip(entries, got)), (got[len(entries):] if heads_run else None)


def reference(tvm: Any, mod: Any, params: Dict[str, np.ndarray], inputs: Dict[str, np.ndarray],
              lib: Any, st: Staging) -> Dict[str, Any]:
    # Every node and the outputs: the CUDA build's fused functions run on the CPU, node by node.
    cg = json.loads(lib.get_graph_json())
    functions = cuda_functions(lib)
    entries, skipped = node_plan(cg, list(functions))
    values = {str(k): as_numpy(v) for k, v in (lib.get_params() or {}).items()}
    values.update(inputs)
    missing = [n["name"] for n in cg["nodes"] if n.get("op") == "null" and n["name"] not in values]
    if missing:
        raise ExportError(f"the CUDA build's graph reads {missing[0]!r}, which is neither an input nor one of its "
                          "params", DATA_ERROR)
    got, outputs = _cpu_run_of_cuda_functions(tvm, cg, functions, entries, values) if entries else ({}, None)
    whole = outputs is None
    if outputs is None:
        outputs = _whole_module_outputs(tvm, mod, params, inputs)
    for i, o in enumerate(outputs):
        st.write_npy(f"output_{i}.npy", o)
    nodes: List[Dict[str, Any]] = []
    for i, k in entries:
        if k == 0:
            fn = (cg["nodes"][i].get("attrs") or {}).get("func_name", cg["nodes"][i].get("name"))
            nodes.append({"graph_node": i, "function": fn, "outputs": []})
        arr = got[(i, k)]
        fname = f"n{i}_{k}.npy"  # relative to reference/
        st.write_npy("reference/" + fname, arr)
        nodes[-1]["outputs"].append({"output": k, "file": fname, "dtype": str(arr.dtype), "shape": list(arr.shape)})
    st.write_json("reference/nodes.json", {
        "format": "kdflow-node-reference/1",
        "frontend": "relay",
        "function": "main",
        "target": "llvm",
        "tvm": str(tvm.__version__),
        "how": "the CUDA build's own fused Relay functions (relay.txt) compiled for llvm (opt_level 0, so compiled "
               "as they are) and run on the CPU in the CUDA graph's order, each on the CPU results of the nodes it "
               "reads (params: the CUDA build's); the outputs (output_<i>.npy) are "
               + ("TVM's CPU build of the whole module's, since not every node could be run" if whole
                  else "that run's values of the graph's outputs"),
        "nodes": nodes,
        "unmatched": skipped,
    })
    return {"outputs": len(outputs), "nodes": len(nodes), "unmatched": len(skipped)}


def _whole_module_outputs(tvm: Any, mod: Any, params: Dict[str, np.ndarray],
                          inputs: Dict[str, np.ndarray]) -> List[np.ndarray]:
    """TVM's CPU build of the user's module, whole (its own fusion). AlterOpLayout is left out:
    on x86 it fails on a conv2d whose channels and kernel_size are not given ("must be set or
    inferred by previous pass"); the results are the same without it."""
    from tvm.contrib import graph_executor  # type: ignore[import-not-found]
    cpu = build(tvm, mod, tvm.target.Target("llvm"), params, disabled=["AlterOpLayout"])
    m = graph_executor.GraphModule(cpu["default"](tvm.cpu()))
    for k, a in inputs.items():
        m.set_input(k, a)
    m.run()
    return [as_numpy(m.get_output(i)) for i in range(m.get_num_outputs())]
