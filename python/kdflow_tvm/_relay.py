"""Relay builds (TVM 0.8 - 0.19): relay.build for CUDA with the C host, the files kdflow reads,
and TVM's results on the CPU: the outputs from the graph executor and every node's from the
debug executor, each mapped onto the CUDA build's graph node it stands for.

Written against the Python API of the 0.8 - 0.19 releases (python/tvm/relay/build_module.py,
python/tvm/contrib/debugger/debug_executor.py at those tags)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
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
          disabled: Sequence[str] = ()) -> Any:
    from tvm import relay  # type: ignore[import-not-found]
    with tvm.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
        return relay.build(mod, target=target, params=params)


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
def _graph_signatures(graph: Dict[str, Any]) -> List[Tuple[Any, ...]]:
    """A structural key per node: what it computes (function or input name), from which nodes'
    keys, with which output types. Equal keys in two builds' graphs mean the same node."""
    nodes = graph["nodes"]
    row = graph.get("node_row_ptr") or list(range(len(nodes) + 1))
    attrs = graph.get("attrs", {})
    shapes = attrs.get("shape", [None, []])[1]
    dtypes = attrs.get("dltype", [None, []])[1]
    keys: List[Tuple[Any, ...]] = []
    for i, n in enumerate(nodes):
        outs = tuple((tuple(shapes[e]) if e < len(shapes) else (),
                      dtypes[e] if e < len(dtypes) else "") for e in range(row[i], row[i + 1]))
        if n.get("op") == "null":
            keys.append(("null", n.get("name"), outs))
        else:
            fn = (n.get("attrs") or {}).get("func_name", n.get("name"))
            ins = tuple((keys[e[0]], e[1]) for e in n.get("inputs", []))
            keys.append(("op", fn, ins, outs))
    return keys


def map_nodes(cuda_graph: Dict[str, Any], cpu_graph: Dict[str, Any]) -> Dict[int, int]:
    """CUDA graph node index -> CPU graph node index, for the nodes the two builds share."""
    ck, pk = _graph_signatures(cuda_graph), _graph_signatures(cpu_graph)
    free: Dict[Tuple[Any, ...], List[int]] = {}
    for j, k in enumerate(pk):
        free.setdefault(k, []).append(j)
    out = {}
    for i, k in enumerate(ck):
        if k[0] == "op" and free.get(k):
            out[i] = free[k].pop(0)
    return out


def reference(tvm: Any, mod: Any, params: Dict[str, np.ndarray], inputs: Dict[str, np.ndarray],
              cuda_graph_json: str, st: Staging) -> Dict[str, Any]:
    # AlterOpLayout is left out of the CPU build: on x86 it rewrites convolutions to NCHWc,
    # which would give the CPU graph other nodes than the CUDA graph; the results are the same.
    cpu = build(tvm, mod, tvm.target.Target("llvm"), params, disabled=["AlterOpLayout"])
    try:
        from tvm.contrib.debugger import debug_executor as dbg  # type: ignore[import-not-found]
    except ImportError:
        from tvm.contrib.debugger import debug_runtime as dbg  # type: ignore[import-not-found]  # 0.7
    dump = tempfile.mkdtemp(prefix="kdflow_tvm_dbg.")
    try:
        dev = tvm.cpu()
        m = dbg.create(cpu.get_graph_json(), cpu.get_lib(), dev, dump_root=dump)
        cp = cpu.get_params()
        if cp:
            m.set_input(**cp)
        for k, a in inputs.items():
            m.set_input(k, a)
        cg = json.loads(cuda_graph_json)
        pg = json.loads(cpu.get_graph_json())
        mapping = map_nodes(cg, pg)
        row = pg.get("node_row_ptr") or list(range(len(pg["nodes"]) + 1))
        wanted = {j: i for i, j in mapping.items()}  # CPU node -> CUDA node
        got = _node_outputs(tvm, m, pg, row, set(wanted))
        outputs = [as_numpy(m.get_output(i)) for i in range(m.get_num_outputs())]
        for i, o in enumerate(outputs):
            st.write_npy(f"output_{i}.npy", o)
        nodes, unmatched = [], []
        for i, n in enumerate(cg["nodes"]):
            if n.get("op") == "null":
                continue
            fn = (n.get("attrs") or {}).get("func_name", n.get("name"))
            if i not in mapping:
                unmatched.append({"graph_node": i, "function": fn,
                                  "reason": "the CPU build has no node with the same function, inputs and types"})
                continue
            outs = []
            for out_index, arr in enumerate(got.get(mapping[i], [])):
                fname = f"n{i}_{out_index}.npy"  # relative to reference/
                st.write_npy("reference/" + fname, arr)
                outs.append({"output": out_index, "file": fname, "dtype": str(arr.dtype), "shape": list(arr.shape)})
            nodes.append({"graph_node": i, "function": fn, "outputs": outs})
        st.write_json("reference/nodes.json", {
            "format": "kdflow-node-reference/1",
            "frontend": "relay",
            "function": "main",
            "target": "llvm",
            "tvm": str(tvm.__version__),
            "how": "TVM's debug executor on the CPU build (AlterOpLayout off), each node's outputs mapped onto the "
                   "CUDA graph's node with the same function, inputs and output types",
            "nodes": nodes,
            "unmatched": unmatched,
        })
        return {"outputs": len(outputs), "nodes": len(nodes), "unmatched": len(unmatched)}
    finally:
        shutil.rmtree(dump, ignore_errors=True)


def _node_outputs(tvm: Any, m: Any, graph: Dict[str, Any], row: List[int], nodes: set) -> Dict[int, List[np.ndarray]]:
    """Each wanted node's outputs as TVM's debug executor computed them. Entries share storage,
    so each node's outputs are read right after it runs: execute_node(i) node by node and
    get_node_output(i, k) (which TVM allows only for the node just executed), as the debug
    executor's own _run_per_layer does in every release from 0.8 to 0.19."""
    out: Dict[int, List[np.ndarray]] = {}
    for i in range(len(graph["nodes"])):
        m._execute_node(i)
        if i in nodes:
            out[i] = [as_numpy(m._get_node_output(i, k)).copy() for k in range(row[i + 1] - row[i])]
    return out
