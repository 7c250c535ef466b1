"""Relax builds (TVM 0.20+): building for CUDA with the C host, writing the files kdflow reads,
and TVM's own results on the CPU (the outputs, and every VM call's through the VM's instrument
hook) as the references `kdflow replay` compares with."""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _blob, _tvm
from ._folder import Staging, as_numpy, write_model_so
from .errors import DATA_ERROR, USAGE, ExportError


def is_relax_module(tvm: Any, mod: Any) -> bool:
    relax = getattr(tvm, "relax", None)
    if relax is None:
        return False
    try:
        return any(isinstance(f, relax.Function) for _, f in mod.functions.items())
    except Exception:
        return False


def to_tvm(tvm: Any, a: np.ndarray) -> Any:
    make = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
    return make(np.ascontiguousarray(a).reshape(np.shape(a)))  # 0-d stays 0-d


def var_name(v: Any) -> str:
    """A Relax variable's name: `name_hint` (0.20 - 0.26), `name` (0.27)."""
    for attr in ("name_hint", "name"):
        try:
            n = getattr(v, attr)
        except Exception:
            continue
        if isinstance(n, str) or hasattr(n, "__str__") and not callable(n):
            return str(n)
    return str(v.vid.name_hint)


def var_type(v: Any) -> Any:
    """A Relax variable's tensor description: `struct_info` (0.20 - 0.26), `ty` (0.27)."""
    for attr in ("struct_info", "ty"):
        try:
            return getattr(v, attr)
        except Exception:
            continue
    return None


def relax_functions(tvm: Any, mod: Any) -> Dict[str, Any]:
    out = {}
    for gv, f in mod.functions.items():
        if isinstance(f, tvm.relax.Function):
            out[gv.name_hint] = f
    return dict(sorted(out.items()))


def _num_input(f: Any) -> Optional[int]:
    attrs = getattr(f, "attrs", None)
    if attrs is None:
        return None
    try:
        if "num_input" in attrs:
            return int(attrs["num_input"])
    except Exception:
        return None
    return None


def _tensor_sig(tvm: Any, sinfo: Any) -> Optional[Tuple[List[Any], str]]:
    """(shape, dtype) of a tensor's struct info or type; a dimension TVM cannot state as an int
    stays a string (its symbolic name); None for what is not a tensor of known rank."""
    if sinfo is None or "Tensor" not in type(sinfo).__name__:
        return None
    shape = getattr(sinfo, "shape", None)
    if shape is None:
        return None
    values = getattr(shape, "values", shape)
    dims: List[Any] = []
    try:
        for d in values:
            val = getattr(d, "value", d)
            dims.append(int(val) if isinstance(val, int) else str(d))
    except TypeError:
        return None
    return dims, str(sinfo.dtype)


def bind_params(tvm: Any, mod: Any, params: Dict[str, np.ndarray]) -> Tuple[Any, List[str]]:
    """Every Relax function's parameters named in `params` bound as constants (what TVM's own
    flows do before building); returns the module and the names bound."""
    if not params:
        return mod, []
    bound: set = set()
    for name, f in relax_functions(tvm, mod).items():
        names = {var_name(p) for p in f.params}
        mine = {k: to_tvm(tvm, v) for k, v in params.items() if k in names}
        if mine:
            mod = tvm.relax.transform.BindParams(name, mine)(mod)
            bound |= set(mine)
    return mod, sorted(bound)


_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]*")


def _c_name(name: str, taken: set) -> str:
    """`name` as TVM's code generators can print it: every byte but [A-Za-z0-9_] as '_', a
    leading digit (or nothing) after '_'; made unique among `taken`."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not base or base[0].isdigit():
        base = "_" + base
    new, k = base, 1
    while new in taken:
        new, k = f"{base}_{k}", k + 1
    return new


def identifier_params(tvm: Any, mod: Any) -> Tuple[Any, Dict[str, Dict[str, str]]]:
    """Every Relax function's parameters whose names TVM's C and CUDA code generators print as
    they are (they make identifiers of the names, turning only ':', '-' and '.' into '_'; a '/'
    as in Caffe2's `gpu_0/data_0`, a space or a non-ASCII letter gives code no compiler takes)
    renamed to identifiers; returns the module and, per function, {model's name: build's name}.
    A TVM defect worked around; names TVM prints well are left alone."""
    renames: Dict[str, Dict[str, str]] = {}
    for name, f in relax_functions(tvm, mod).items():
        names = [var_name(q) for q in f.params]
        if all(_C_NAME.fullmatch(n) for n in names):
            continue
        taken = set(names)
        binding = {}
        params = []
        mine: Dict[str, str] = {}
        for q, n in zip(f.params, names):
            if _C_NAME.fullmatch(n):
                params.append(q)
                continue
            new = _c_name(n, taken)
            taken.add(new)
            nv = tvm.relax.Var(new, var_type(q))
            binding[q] = nv
            params.append(nv)
            mine[n] = new
        g = f.bind_params(binding)
        ret = g.ret_struct_info if hasattr(g, "ret_struct_info") else getattr(g, "ret_ty", None)
        h = tvm.relax.Function(params, g.body, ret, g.is_pure, g.attrs)
        mod = _replace_function(mod, mod.get_global_var(name), h)
        renames[name] = mine
    return mod, renames


def _replace_function(mod: Any, gv: Any, f: Any) -> Any:
    """A copy of `mod` (the caller's module stays as it was) with `gv` bound to `f`."""
    out = mod.clone() if hasattr(mod, "clone") else mod.shallow_copy()
    out[gv] = f
    return out


def main_inputs(tvm: Any, mod: Any, function: str) -> List[Tuple[str, Any]]:
    """The inputs of `function` a caller passes: (name, struct info), without the weights a
    `num_input` attribute marks as parameters."""
    f = relax_functions(tvm, mod).get(function)
    if f is None:
        return []
    params = list(f.params)
    n = _num_input(f)
    if n is not None:
        params = params[:n]
    return [(var_name(p), var_type(p)) for p in params]


def unbound_weights(tvm: Any, mod: Any, function: str) -> List[str]:
    f = relax_functions(tvm, mod).get(function)
    if f is None:
        return []
    n = _num_input(f)
    return [var_name(p) for p in list(f.params)[n:]] if n is not None else []


def build(tvm: Any, v: Tuple[int, int], mod: Any, target: Any, exec_mode: str) -> Any:
    if exec_mode not in ("bytecode", "compiled"):
        raise ExportError(f"exec_mode {exec_mode!r}: use \"bytecode\" or \"compiled\"", USAGE)
    # Inside the target's scope: TVM 0.26's nvcc step reads the architecture from the current
    # target (tvm.support.nvcc.get_target_compute_version), and no GPU is there to ask.
    with target:
        return tvm.relax.build(mod, target, exec_mode=exec_mode)


def executable_module(ex: Any) -> Any:
    return getattr(ex, "mod", ex)


def _host_and_devices(ex_mod: Any) -> Tuple[Any, List[Any]]:
    host = None
    devices: List[Any] = []
    todo = list(_tvm.imports_of(ex_mod))
    while todo:
        m = todo.pop(0)
        kind = _tvm.module_kind(m)
        if kind in ("c", "llvm") and host is None:
            host = m
        elif kind == "cuda":
            devices.append(m)
        todo.extend(_tvm.imports_of(m))
    return host, devices


def check_c_host(ex: Any) -> None:
    host, _ = _host_and_devices(executable_module(ex))
    kind = _tvm.module_kind(host) if host is not None else None
    if kind != "c":
        raise ExportError(f"this build's host module is {kind or 'missing'!r}, not C: kdflow reads the C host; "
                          "build with tvm.target.Target(..., host=\"c\") (or use kdflow_tvm.build)", USAGE)


def write_files(tvm: Any, v: Tuple[int, int], ex: Any, st: Staging, info: Dict[str, Any]) -> None:
    """host.c, the device source, function table and code, vm_exec.bin, model.so."""
    ex_mod = executable_module(ex)
    host, devices = _host_and_devices(ex_mod)
    if host is None or _tvm.module_kind(host) != "c":
        check_c_host(ex)
    host_c = _tvm.source_of(host)
    st.write_text("host.c", host_c)
    if v >= _tvm.FFI_BLOB_FIRST:
        _write_ffi_files(tvm, ex_mod, devices, st, info)
    else:
        _write_020_files(ex_mod, devices, st, info)
    write_model_so(ex, st, info, forced_includes(host_c))


def _write_ffi_files(tvm: Any, ex_mod: Any, devices: List[Any], st: Staging, info: Dict[str, Any]) -> None:
    import tvm_ffi  # type: ignore[import-not-found]
    pack = tvm_ffi.get_global_func("runtime.ModulePackImportsToTensor")
    blob = as_numpy(pack(ex_mod)).tobytes()
    lib = _blob.decode_library_blob(blob)
    vm = [m for m in lib.modules if m.kind == "relax.VMExecutable"]
    if not vm or vm[0].payload is None:
        raise ExportError("the build's library holds no relax.VMExecutable", DATA_ERROR)
    # TVM 0.22+ no longer writes the executable or the function tables as files: both come from
    # the bytes the library packs (what model.so carries).
    st.write_bytes("vm_exec.bin", vm[0].payload)
    cudas = [m for m in lib.modules if m.kind == "cuda"]
    info["device_modules"] = []
    for i, m in enumerate(cudas):
        assert m.payload is not None
        cm = _blob.decode_cuda_module(m.payload)
        st.write_json(f"device_{i}.tvm_meta.json", {"func_info": cm.func_info})
        src = _tvm.source_of(devices[i], "cuda") if i < len(devices) else ""
        if not src and cm.fmt == "cuda":
            src = cm.code.decode("utf-8", "replace")
        st.write_text(f"device_{i}.cu", src)
        entry: Dict[str, Any] = {"index": i, "kernels": len(cm.func_info), "stored_format": cm.fmt}
        if cm.fmt in ("cubin", "fatbin", "ptx"):
            # TVM compiled with nvcc labels the fatbin it stores "cubin".
            ext = "fatbin" if cm.fmt == "cubin" and cm.code[:4] == b"\x50\xed\x55\xba" else cm.fmt
            st.write_bytes(f"device_{i}.{ext}", cm.code)
            entry["binary"] = f"device_{i}.{ext}"
        else:
            entry["binary"] = _compile_cuda(st, f"device_{i}", src, info)
        info["device_modules"].append(entry)


def _write_020_files(ex_mod: Any, devices: List[Any], st: Staging, info: Dict[str, Any]) -> None:
    # TVM 0.20: modules still save themselves; the executable as a length-prefixed string.
    ex_mod.save(st.file("vm_exec.bin"))
    info["device_modules"] = []
    for i, d in enumerate(devices):
        st.write_text(f"device_{i}.cu", _tvm.source_of(d, "cu"))
        saved = None
        for fmt in ("cubin", "fatbin", "ptx"):
            try:
                d.save(st.file(f"device_{i}.{fmt}"), fmt)
                saved = fmt
                break
            except Exception:
                continue
        info["device_modules"].append({"index": i, "binary": f"device_{i}.{saved}" if saved else None})


def _compile_cuda(st: Staging, stem: str, src: str, info: Dict[str, Any]) -> Optional[str]:
    """TVM 0.27's wheel stores CUDA source only (no CUDA runtime inside it): a cubin is made with
    nvcc where one is installed, for `kdflow replay` on a GPU; the CPU back end needs none."""
    arch = str(info.get("arch", "sm_90"))
    exe = _tvm.nvcc()
    if exe is None:
        info.setdefault("notes", []).append(
            f"{stem}.cu: TVM stored CUDA source, not a binary, and nvcc is not installed: no {stem}.cubin "
            "(replay --backend cpu needs none; for a GPU, run nvcc --cubin -arch=" + arch + ")")
        return None
    out = st.file(stem + ".cubin")
    try:
        r = subprocess.run([exe, "--cubin", f"-arch={arch}", "-O3", "-o", out, st.file(stem + ".cu")],
                           capture_output=True, text=True, timeout=900, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        info.setdefault("notes", []).append(f"{stem}.cu: nvcc failed to run ({e})")
        return None
    if r.returncode != 0:
        first = (r.stderr.strip().splitlines() or ["(no message)"])[0]
        info.setdefault("notes", []).append(f"{stem}.cu: nvcc --cubin failed: {first}")
        if os.path.exists(out):
            os.remove(out)
        return None
    info.setdefault("workarounds", []).append(
        f"{stem}.cubin: compiled here with nvcc -arch={arch} from TVM's source (TVM stored source only)")
    return stem + ".cubin"


# What export_library needs that TVM's C host does not declare (docs: samples/README.md).
ANYLIST_DECLS = """#include <tvm/ffi/c_api.h>
#ifdef __cplusplus
extern "C" {
#endif
/* Written by kdflow_tvm: TVM's C host calls these runtime functions (src/runtime/vm/builtin.cc)
   in compiled mode without declaring them. */
int TVMBackendAnyListSetPackedArg(void* anylist, int index, void* args, int arg_offset);
int TVMBackendAnyListResetItem(void* anylist, int index);
int TVMBackendAnyListMoveFromPackedReturn(void* anylist, int index, void* args, int ret_offset);
#ifdef __cplusplus
}
#endif
"""

HALF_DECL = """/* Written by kdflow_tvm: TVM's C host casts to half* without declaring half (float16
   builds); the host only passes such pointers on, so a 16-bit type is enough. */
#ifndef __cplusplus
typedef unsigned short half;
#else
typedef unsigned short half;
#endif
"""


def forced_includes(host_c: str) -> List[Tuple[str, str, str]]:
    """(file name, text, why) for each known defect of TVM's C host that export_library trips on."""
    out = []
    if "TVMBackendAnyList" in host_c and "int TVMBackendAnyListSetPackedArg" not in host_c:
        out.append(("anylist_decls.h", ANYLIST_DECLS,
                    "compiled mode: TVM's C host calls TVMBackendAnyList* without declaring them"))
    if "(half*)" in host_c and "typedef" not in host_c.split("half", 1)[0][-200:] \
            and "typedef unsigned short half" not in host_c and "struct half" not in host_c:
        out.append(("half_decl.h", HALF_DECL, "float16: TVM's C host casts to half* without declaring half"))
    return out


# ------------------------------------------------------------------------------ references
def flatten_outputs(x: Any) -> List[np.ndarray]:
    if isinstance(x, (list, tuple)):
        out: List[np.ndarray] = []
        for y in x:
            out += flatten_outputs(y)
        return out
    try:
        n = len(x)  # tvm Array / tuple object
        if not hasattr(x, "shape"):
            out = []
            for i in range(n):
                out += flatten_outputs(x[i])
            return out
    except TypeError:
        pass
    return [as_numpy(x)]


def cuda_fusion_for_cpu(tvm: Any, mod: Any, cuda_target: Any) -> Tuple[Any, str]:
    """`mod` taken through the CUDA pipeline's own legalisation, constant folding and fusion
    (TVM's relax.backend.cuda.legalize_passes without the GPU schedules), so that the CPU build
    has the CUDA build's fused functions, by the same names, for the node-by-node references.
    Falls back to the module as given (TVM's CPU pipeline; fewer nodes then match)."""
    try:
        from tvm.relax.backend.cuda import pipeline as cuda_pipeline  # type: ignore[import-not-found]
        passes = [p for p in cuda_pipeline.legalize_passes(cuda_target)
                  if "Schedule" not in str(getattr(getattr(p, "info", None), "name", ""))]
        with cuda_target:
            fused = tvm.transform.Sequential(passes)(mod)
        return fused, "the CUDA pipeline's legalize and fusion passes (no GPU schedule), then TVM's llvm build"
    except Exception as e:  # an older or newer TVM without that module or with other passes
        return mod, f"TVM's llvm build of the module as given (CUDA fusion passes unavailable: {type(e).__name__})"


def dps_outputs(tvm: Any, mod: Any) -> Dict[str, Tuple[int, int]]:
    """function name -> (inputs, outputs) of every R.call_tir in `mod`'s Relax functions: the VM
    then calls the function with the inputs, then the outputs it writes (destination passing)."""
    out: Dict[str, Tuple[int, int]] = {}
    try:
        call_tir = tvm.ir.Op.get("relax.call_tir")
    except Exception:
        return out
    for f in relax_functions(tvm, mod).values():
        blocks = getattr(getattr(f, "body", None), "blocks", None) or []
        for block in blocks:
            for b in getattr(block, "bindings", []):
                call: Any = getattr(b, "value", None)
                if getattr(call, "op", None) is None or not call.op.same_as(call_tir):
                    continue
                try:
                    name = str(call.args[0].name_hint)
                    n_in = len(call.args[1].fields)
                    # The output's description: sinfo_args (0.20 - 0.26), ty_args (0.27).
                    sargs = getattr(call, "sinfo_args", None)
                    if sargs is None:
                        sargs = call.ty_args
                    sinfo = sargs[0]
                    n_out = len(sinfo.fields) if hasattr(sinfo, "fields") else 1
                except Exception:
                    continue
                out[name] = (n_in, n_out)
    return out


# The host-only functions VMShapeLower makes (symbolic shapes on the shape heap, a scalar
# expression): they launch no kernel and are no node of kdflow's flow.
_HOST_ONLY = re.compile(r"(shape_func|compute_symbolic_expr)\d*")


def _call_tir_dyn_callees(ex: Any, function: str) -> Optional[List[str]]:
    """The functions `function`'s vm.builtin.call_tir_dyn calls call, in bytecode order (TVM's
    text of the executable: `call vm.builtin.call_tir_dyn in: f[NAME], ...`); None where the
    function branches (If, Goto), so that order is not the order they run in."""
    try:
        text = str(ex.as_text() if hasattr(ex, "as_text") else "")
    except Exception:
        return None
    out: List[str] = []
    current = False
    for line in text.splitlines():
        s = line.strip()
        if line.startswith("@"):
            current = line.rstrip().endswith(":") and line[1:].rstrip()[:-1] == function
            continue
        if not current:
            continue
        if s.startswith(("if ", "goto ")):
            return None
        m = re.match(r"call\s+vm\.builtin\.call_tir_dyn\s+in:\s*f\[([^\]]+)\]", s)
        if m:
            out.append(m.group(1))
    return out


def reference(tvm: Any, mod: Any, function: str, inputs: Sequence[np.ndarray],
              st: Staging, cuda_target: Any) -> Dict[str, Any]:
    """Builds `mod` (weights bound) for the CPU, runs `function` on TVM's VM with every VM call
    instrumented, writes output_<i>.npy and reference/nodes.json + one .npy per written tensor."""
    cpu_mod, how = cuda_fusion_for_cpu(tvm, mod, cuda_target)
    dps = dps_outputs(tvm, cpu_mod)
    ex = tvm.relax.build(cpu_mod, tvm.target.Target("llvm"), exec_mode="bytecode")
    VM = getattr(tvm.relax, "VirtualMachine", None) or tvm.runtime.vm.VirtualMachine
    vm = VM(ex, tvm.cpu())
    calls: List[Dict[str, Any]] = []
    seen: Dict[str, int] = {}
    before: List[Optional[np.ndarray]] = []

    def is_tensor(a: Any) -> bool:
        return hasattr(a, "shape") and hasattr(a, "dtype") and (hasattr(a, "numpy") or hasattr(a, "asnumpy"))

    # TVM 0.20 - 0.25 call a function with symbolic scalars through vm.builtin.call_tir_dyn(f,
    # args..., shape): the hook sees the builtin, not f. In a function without branches its
    # calls run in the order of the bytecode, which names each f.
    dyn = _call_tir_dyn_callees(ex, function)
    dyn_seen = [0, 0]  # calls begun, calls ended

    def instrument(func: Any, name: Any, before_run: Any, ret: Any, *args: Any) -> int:
        name = str(name)
        if name == "vm.builtin.call_tir_dyn" and dyn is not None:
            i = dyn_seen[0 if before_run else 1]
            dyn_seen[0 if before_run else 1] += 1
            if i >= len(dyn):
                return 0
            name, args = dyn[i], args[1:-1]
        elif name.startswith("vm.") or name.startswith("__") or _HOST_ONLY.fullmatch(name):
            return 0
        if before_run:
            before.clear()
            if name in dps:
                return 0
            before.extend(as_numpy(a).copy() if is_tensor(a) else None for a in args)
            return 0
        k = seen.get(name, 0)
        seen[name] = k + 1
        outs = []
        sig = dps.get(name)
        for j, a in enumerate(args):
            if not is_tensor(a):
                continue
            after = as_numpy(a)
            if sig is not None:
                # Destination passing: the outputs follow the inputs.
                if not sig[0] <= j < sig[0] + sig[1]:
                    continue
            else:
                # A function not called through call_tir here: the tensors the call changed.
                old = before[j] if j < len(before) else None
                if old is not None and old.shape == after.shape and old.dtype == after.dtype and \
                        np.array_equal(old, after, equal_nan=old.dtype.kind in "fc"):
                    continue
            fname = f"{len(calls):05d}_{j}.npy"  # relative to reference/
            st.write_npy("reference/" + fname, after)
            outs.append({"arg": j, "file": fname, "dtype": str(after.dtype), "shape": list(after.shape)})
        calls.append({"function": name, "occurrence": k, "outputs": outs})
        return 0

    vm.set_instrument(instrument)
    res = vm[function](*[to_tvm(tvm, a) for a in inputs])
    outputs = flatten_outputs(res)
    for i, o in enumerate(outputs):
        st.write_npy(f"output_{i}.npy", o)
    st.write_json("reference/nodes.json", {
        "format": "kdflow-node-reference/1",
        "frontend": "relax",
        "function": function,
        "target": "llvm",
        "tvm": str(tvm.__version__),
        "how": "every call of a compiled function by TVM's Relax VM on the CPU (VirtualMachine.set_instrument), "
               "after it ran: each tensor argument it changed",
        "cpu_build": how,
        "nodes": calls,
    })
    return {"outputs": len(outputs), "nodes": len(calls),
            "node_tensors": sum(len(c["outputs"]) for c in calls)}
