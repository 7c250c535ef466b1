"""The executing oracle of a language-model session: every kernel launch of a whole session of a
TVM LLM build (host program and KV-cache runtime), found by running the build's host C.

usage: python3 llm_session_oracle.py DIR SESSION KV_LOG FFI_INCLUDE DLPACK_INCLUDE TVM_INCLUDE -o truth.json
           [--work WORKDIR]

DIR is the build folder (host.c, vm_exec.bin, model.so, params.bin; half_decl.h of a float16
build), read only. SESSION is `prefill:N,decode:M[,page_size:P,...]` or a session file
(docs/schema.md, "Sessions"). KV_LOG is what TVM's own paged KV-cache runtime called when TVM ran
the same model and session (test/tvm/kv_truth.py: kv_truth.json, kv_truth_session_file.json).

It extends ffi_oracle.py / ffi_oracle_more.py (copied beside it): host.c is compiled with gcc and
ffi_shim.c (with `-include half_decl.h` where the folder has one), the VM bytecode is interpreted
and every host.c function is really called, with fake device pointers that name each buffer's
origin. Added here:
  * the session driver, as TVM's LLM tutorial and kdflow_tvm.llm_session drive a build:
    create_tir_paged_kv_cache, then per forward kv_state_begin_forward, embed, a view of its
    result as (1, n, hidden) or (batch, 1, hidden), prefill / decode / batch_decode,
    kv_state_end_forward; add_sequence and remove_sequence are bookkeeping;
  * the KV-state builtins: paged_attention_kv_cache_create returns a cache object and keeps the
    host functions it was given by constructor slot (13 transpose append, 15 ragged prefill,
    16 paged prefill, 17 decode, 23 merge, 24 split rotary, ... as kv_truth.py names them);
    kv_state_* record an event;
  * attention_kv_cache_attention_with_fused_qkv(cache, layer, sm_scale, qkv, o): the calls TVM's
    runtime made in that attention (the KV_LOG's calls of this step, grouped per attention: each
    group starts with the split rotary) are made here by calling the compiled
    __tvm_ffi_<function> of host.c, the function the cache was created with for that role, with
    the logged arguments: scalars as logged, except the attention's sm_scale: a logged float
    equal to it within 1e-6 is this VM call's sm_scale, as this build's host.c computed it (TVM
    logged the llvm build's, whose compute_symbolic_expr is exact, 1/sqrt(32) = 0.1767766952...;
    the C host prints the constant with 7 digits, 1.767767e-01); tensors with the logged shape and dtype, their memory
    from the logged addresses — the logged qkv (split rotary's first argument) and output (the
    output argument of the group's first attention kernel: ragged prefill 7, paged prefill 8,
    decode 7) are this VM call's qkv and o tensors; int32 arrays are views of one auxiliary buffer
    (data = its start, byte_offset = the logged address minus the lowest one of the step, as
    TVM's CachedPagedKVCacheAuxDataManager makes them with CreateView); every other address (the
    page pools, the runtime's temporaries) is one fake buffer per distinct address. So which
    arguments are the same memory comes from TVM's run; grids, blocks and kernel arguments from
    executing host.c;
  * vm.builtin.cuda_graph.run_or_capture(vm, f, args, entry[, shape]): the first call per
    (entry, shape) runs f (its launches execute, as TVM's eager run before capture); a later call
    launches the captured graph: the same launches again, marked as a replay;
    get_cached_alloc(vm, f, entry) runs f once and returns its result after.
Fake pointers: ffi_oracle's (input i, const k, storage s, workspace w) and param i (the packed
params, from params.bin), kv j (cache memory by address), aux (the auxiliary buffer).

truth.json: {"launches": [...]} in order, each {"kernel", "function" (the host.c function that
launched it), "step", "vm_function", "grid", "block", "smem", "args", optional "runtime_role",
"layer", "cuda_graph", "replay"}; pointer args as ffi_oracle describes them ({"storage": s,
"offset": o}, {"param": i, ...}, {"kv": j, ...}, {"aux": 0, ...}), scalars {"i": v} / {"f": v};
"events": everything else the run did (runtime calls with their arguments, kv_state calls,
errors). Exit 0 when the session ran and every logged runtime call was made; 1 otherwise.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ffi_oracle as F  # noqa: E402
import tvm26_files  # noqa: E402
from ffi_oracle import (HANDLER_T, STRIDE, TI_ARRAY, TI_FLOAT, TI_INT, TI_NONE, TI_PTR, TI_SHAPE,  # noqa: E402
                        TI_TENSOR, WS_T, TensorObj)
from ffi_oracle_more import OracleMore  # noqa: E402

PARAM_BASE, KV_BASE, AUX_BASE = 0x400000000000, 0x500000000000, 0x600000000000
TI_KV_CACHE = 201  # a dynamic type index standing for the paged KV cache object
Value = Tuple[int, int]  # (tvm-ffi type_index, 64-bit payload)

# paged_attention_kv_cache_create's argument index -> the role kv_truth.py logs (paged_kv_cache.cc)
ROLES = {13: "transpose append", 15: "prefill ragged", 16: "prefill paged", 17: "decode", 23: "merge",
         24: "split rotary", 25: "copy single page", 27: "compact copy"}
# the output argument of each attention kernel role (batch_prefill_ragged_kv(q, qo_indptr, k, v,
# kv_indptr, q_rope_position, k_rope_pos_offset, output, lse, ...), batch_prefill_paged_kv(q,
# qo_indptr, pages, page_indptr, page_values, length_info, k_rope_pos_offset, q_rope_position,
# output, lse, ...), batch_decode_paged_kv(q, pages, page_indptr, page_values, length_info,
# k_rope_pos_offset, q_rope_position, output, lse, ...))
OUTPUT_ARG = {"prefill ragged": 7, "prefill paged": 8, "decode": 7}
DTYPES = {"float32": (2, 32, 1), "float16": (2, 16, 1), "bfloat16": (4, 16, 1), "int32": (0, 32, 1),
          "int64": (0, 64, 1)}
CACHE_KEYS = ("max_batch_size", "max_total_seq_len", "prefill_chunk_size", "page_size")


# ----------------------------------------------------------------------------- the session
def parse_session(spec: str) -> Dict[str, Any]:
    """`prefill:N,decode:M[,KEY:V]` or a session file, as docs/schema.md "Sessions" states them."""
    if os.path.exists(spec) or ":" not in spec:
        with open(spec) as f:
            session = json.load(f)
    else:
        cache: Dict[str, int] = {}
        prefill, decode = 0, 0
        for item in spec.split(","):
            key, _, value = item.partition(":")
            if key == "prefill":
                prefill = int(value)
            elif key == "decode":
                decode = int(value)
            elif key in CACHE_KEYS:
                cache[key] = int(value)
            else:
                raise ValueError(f"session {spec}: unknown item {item!r}")
        session = {"kv_cache": cache, "steps": [{"op": "add_sequence", "seq": 0},
                                               {"op": "prefill", "seq": 0, "tokens": prefill}] +
                   [{"op": "decode", "seq": 0}] * decode}
    for s in session["steps"]:
        if s["op"] not in ("add_sequence", "remove_sequence", "prefill", "decode", "fork_sequence", "popn"):
            raise ValueError(f"session step {s}: not emulated here")
    return session


def forwards(session: Dict[str, Any]) -> List[Tuple[str, str, List[int], int]]:
    """(label, op, seqs, tokens) per step, labelled as schema.md says: "prefill", "decode 0",
    "seq 1 prefill", "prefill chunk 0" (a prefill longer than prefill_chunk_size), "batch decode 0"."""
    steps = session["steps"]
    several = len({s["seq"] for s in steps if s["op"] in ("add_sequence", "fork_sequence")}) > 1
    chunk = int(session.get("kv_cache", {}).get("prefill_chunk_size", 0))
    out: List[Tuple[str, str, List[int], int]] = []
    decodes: Dict[int, int] = {}
    prefills: Dict[int, int] = {}
    batches = 0
    for s in steps:
        if s["op"] == "decode" and isinstance(s["seq"], list):
            out.append((f"batch decode {batches}", "batch_decode", list(s["seq"]), len(s["seq"])))
            batches += 1
            continue
        seq = int(s["seq"])
        who = f"seq {seq} " if several else ""
        if s["op"] == "decode":
            out.append((f"{who}decode {decodes.get(seq, 0)}", "decode", [seq], 1))
            decodes[seq] = decodes.get(seq, 0) + 1
        elif s["op"] == "prefill":
            k = prefills.get(seq, 0)
            prefills[seq] = k + 1
            label = who + ("prefill" if k == 0 else f"prefill {k}")
            n = int(s["tokens"])
            if chunk and n > chunk:
                for i, done in enumerate(range(0, n, chunk)):
                    out.append((f"{label} chunk {i}", "prefill", [seq], min(chunk, n - done)))
            else:
                out.append((label, "prefill", [seq], n))
        elif s["op"] in ("fork_sequence", "popn"):  # "fork_sequence C", "popn S": steps of their own
            out.append((f"{s['op']} {seq}", s["op"], [seq], 0))
        else:
            out.append((s["op"], s["op"], [seq], 0))
    return out


def cache_args(session: Dict[str, Any], fw: List[Tuple[str, str, List[int], int]]) -> List[int]:
    """create_tir_paged_kv_cache's four arguments (schema.md's defaults)."""
    cfg = session.get("kv_cache", {})
    sizes = [n for _, op, _, n in fw if op in ("prefill", "decode", "batch_decode")]
    widest = max([n for _, op, _, n in fw if op == "batch_decode"] + [1])
    return [max(int(cfg.get("max_batch_size", 1)), widest), int(cfg.get("max_total_seq_len", sum(sizes))),
            int(cfg.get("prefill_chunk_size", max(sizes))), int(cfg.get("page_size", 16))]


def read_params(path: str) -> List[Tuple[str, List[int], Tuple[int, int, int]]]:
    """params.bin (tvm.runtime.save_param_dict): names and tensors in the packed tuple's order."""
    b = open(path, "rb").read()
    r = tvm26_files._Reader(b)
    if r.take("Q") != 0xF7E58D4F05049CB7:
        raise ValueError(f"{path}: not a TVM param dict")
    r.take("Q")
    names = [r.str() for _ in range(r.take("Q"))]
    out = []
    for name in names[:r.take("Q")]:
        r.take("QQ")
        r.take("ii")
        ndim = r.take("i")
        dtype = r.take("BBH")
        shape = [r.take("q") for _ in range(ndim)]
        r.raw(r.take("q"))
        out.append((name, shape, tuple(dtype)))
    return out


# ----------------------------------------------------------------------------- the oracle
class SessionOracle(OracleMore):
    def __init__(self, work: str, ffi_inc: str, dlpack_inc: str, tvm_inc: str, kv_calls: List[Dict[str, Any]],
                 cflags: List[str]) -> None:
        # ffi_oracle.Oracle.__init__, with `cflags` added to its gcc command
        self.sample = work
        self.vm = json.load(open(os.path.join(work, "vm_exec.json")))
        meta = json.load(open(os.path.join(work, "device.tvm_meta.json")))
        self.meta = meta["func_info"]
        self.kernels = set(self.meta.keys())
        self.owner = self.kernel_owners()
        self.tensor_offset = self.tensor_cell_offset()
        self.events: List[Dict[str, Any]] = []
        self.keep: List[Any] = []
        self.objs: Dict[int, Any] = {}
        self.tensors: Dict[int, Any] = {}
        self.n_storage = 0
        self.n_ws = 0
        self.heap = None
        so = os.path.join(work, "host.so")
        cmd = ["gcc", "-shared", "-fPIC", "-O0", "-w", *cflags, "-o", so, os.path.join(work, "host.c"),
               os.path.join(HERE, "ffi_shim.c"), "-I", ffi_inc, "-I", dlpack_inc, "-I", tvm_inc]
        subprocess.run(cmd, check=True)
        self.so = so
        self.lib = ctypes.CDLL(so)
        self.cb = HANDLER_T(self.handler)
        self.wscb = WS_T(self.workspace)
        self.lib.oracle_set_handler(self.cb, self.wscb)
        self.lib.oracle_last_error.restype = ctypes.c_char_p
        self.lib.oracle_set_mirror_return(1)
        # the session's own state
        self.funcs = {f["name"]: f for f in self.vm["func_table"]}
        self.consts = self.const_values()
        self.kv_calls = kv_calls
        self.kv_used = 0
        self.ctx: Dict[str, Any] = {}
        self.roles: Dict[str, str] = {}  # role -> host function the cache was created with
        self.kv_index: Dict[int, int] = {}  # logged address of cache memory -> kv j
        self.vm_addrs: Dict[int, str] = {}  # logged addresses that were VM tensors (qkv, o)
        self.groups: Dict[str, List[List[Dict[str, Any]]]] = {}
        self.graphs: Dict[Any, Tuple[Value, List[Dict[str, Any]]]] = {}
        self.allocs: Dict[int, Value] = {}
        self.launches: List[Dict[str, Any]] = []
        self.attentions: Dict[str, int] = {}  # step -> attentions run so far

    # ------------------------------------------------------------------ values
    def describe_ptr(self, p: Optional[int]) -> Dict[str, Any]:
        if p is not None and PARAM_BASE <= p < PARAM_BASE + (1 << 44):
            return {"param": (p - PARAM_BASE) // STRIDE, "offset": (p - PARAM_BASE) % STRIDE}
        if p is not None and KV_BASE <= p < KV_BASE + (1 << 44):
            return {"kv": (p - KV_BASE) // STRIDE, "offset": (p - KV_BASE) % STRIDE}
        if p is not None and AUX_BASE <= p < AUX_BASE + (1 << 44):
            return {"aux": 0, "offset": p - AUX_BASE}
        return super().describe_ptr(p)

    def tensor(self, data: int, byte_offset: int, shape: List[int], dtype: Tuple[int, int, int],
               origin: Dict[str, Any]) -> int:
        addr = self.new_tensor(data, shape, dtype, origin)
        TensorObj.from_address(addr).dl.byte_offset = byte_offset
        return addr

    # ------------------------------------------------------------------ builtins
    def builtin(self, name: str, args: List[Value]) -> Optional[Value]:
        if name in self.kernels:
            super().builtin(name, args)
            self.record_launch(self.events[-1])
            return None
        if name == "vm.builtin.paged_attention_kv_cache_create":
            for slot, role in ROLES.items():
                fn = self.func_ref(args[slot]) if slot < len(args) else None
                if fn:
                    self.roles[role] = fn
            self.events.append({"ev": "kv_cache_create", "roles": dict(self.roles)})
            return TI_KV_CACHE, self.new_obj({"kv_cache": True}, TI_KV_CACHE)
        if name.startswith("vm.builtin.kv_state_"):
            self.events.append({"ev": "kv_state", "call": name, "args": [self.describe(*a) for a in args[1:]]})
            return None
        if name == "vm.builtin.attention_kv_cache_attention_with_fused_qkv":
            self.attention(args[1][1], args[2], args[3], args[4])
            return None
        if name == "vm.builtin.cuda_graph.run_or_capture":
            return self.run_or_capture(args)
        if name == "vm.builtin.cuda_graph.get_cached_alloc":
            entry = args[2][1]
            if entry not in self.allocs:
                self.allocs[entry] = self.run_function(self.func_ref(args[1]) or "", [])
            return self.allocs[entry]
        return super().builtin(name, args)

    def func_ref(self, v: Value) -> Optional[str]:
        """A function-pool entry (Func:k, passed as a handle k), or a tuple holding one."""
        ti, x = v
        if ti == TI_PTR and 0 <= x < len(self.vm["func_table"]):
            return self.vm["func_table"][x]["name"]
        if ti == TI_ARRAY and x in self.objs and "tuple" in self.objs[x]:
            for e in self.objs[x]["tuple"]:
                fn = self.func_ref(tuple(e))
                if fn:
                    return fn
        return None

    def record_launch(self, ev: Dict[str, Any]) -> None:
        ev.update(self.ctx)
        info = self.meta[ev["kernel"]]
        n = len(info["arg_types"])
        tags = {t: a.get("i") for t, a in zip(info["launch_param_tags"], ev["args"][n:])}
        dims = ("x", "y", "z")
        launch = {"kernel": ev["kernel"], "function": ev.get("function"),
                  "grid": [max(1, tags.get(f"blockIdx.{d}") or 1) for d in dims],
                  "block": [max(1, tags.get(f"threadIdx.{d}") or 1) for d in dims],
                  "smem": next((v for t, v in tags.items() if t.endswith("use_dyn_shared_memory")), 0) or 0,
                  "args": ev["args"][:n], **self.ctx}
        self.launches.append(launch)

    # ------------------------------------------------------------------ the KV cache's attention
    def step_groups(self, step: str) -> List[List[Dict[str, Any]]]:
        """The logged runtime calls of `step`, one group per attention (a split rotary starts one)."""
        if step not in self.groups:
            groups: List[List[Dict[str, Any]]] = []
            for c in self.kv_calls:
                if c["step"] != step:
                    continue
                if c["role"] == "split rotary" or not groups:
                    groups.append([])
                groups[-1].append(c)
            self.groups[step] = groups
        return self.groups[step]

    def attention(self, layer: int, sm_scale: Value, qkv: Value, o: Value) -> None:
        step = self.ctx.get("step", "")
        groups = self.step_groups(step)
        done = self.attentions.get(step, 0)
        self.attentions[step] = done + 1
        if done >= len(groups):
            raise RuntimeError(f"{step}: attention {done} (layer {layer}) has no logged runtime calls "
                               f"(TVM's runtime made {len(groups)} attentions in this step)")
        group = groups[done]
        if done != layer:
            raise RuntimeError(f"{step}: the {done}-th attention is layer {layer}")
        first = next((c for c in group if c["role"] in OUTPUT_ARG), None)
        if group[0]["role"] != "split rotary" or first is None:
            raise RuntimeError(f"{step} layer {layer}: logged calls {[c['role'] for c in group]}")
        anchors: Dict[int, Tuple[int, int, str]] = {}
        for addr, (ti, v), what in ((group[0]["args"][0]["address"], qkv, "qkv"),
                                    (first["args"][OUTPUT_ARG[first["role"]]]["address"], o, "o")):
            if ti != TI_TENSOR:
                raise RuntimeError(f"{step} layer {layer}: {what} is not a tensor")
            dl = TensorObj.from_address(v).dl
            anchors[addr] = (dl.data, dl.byte_offset, what)
            self.vm_addrs[addr] = what
        aux = [a["address"] for c in self.kv_calls if c["step"] == step for a in c["args"]
               if a["kind"] == "tensor" and a["dtype"] == "int32"]
        base = min(aux) if aux else 0
        sm = F.bits_f64(sm_scale[1]) if sm_scale[0] == TI_FLOAT else float(sm_scale[1])
        for c in group:
            fn = self.roles.get(c["role"])
            if fn is None:
                raise RuntimeError(f"the cache was created without a function for {c['role']}")
            args: List[Value] = []
            for a in c["args"]:
                if a["kind"] == "int":
                    args.append((TI_INT, int(a["value"])))
                elif a["kind"] == "float":
                    v = float(a["value"])
                    if abs(v - sm) <= 1e-6 * max(1.0, abs(sm)):
                        v = sm  # the attention's sm_scale, as this build's host.c computed it
                    args.append((TI_FLOAT, F.f64_bits(v)))
                elif a["kind"] == "tensor":
                    addr = a["address"]
                    if addr in anchors:
                        data, off, what = anchors[addr]
                        origin: Dict[str, Any] = {"vm_tensor": what}
                    elif a["dtype"] == "int32":
                        data, off, origin = AUX_BASE, addr - base, {"aux": 0}
                    else:
                        j = self.kv_index.setdefault(addr, len(self.kv_index))
                        data, off, origin = KV_BASE + j * STRIDE, 0, {"kv": j}
                    args.append((TI_TENSOR, self.tensor(data, off, a["shape"], DTYPES[a["dtype"]], origin)))
                else:
                    raise RuntimeError(f"{step} {c['role']}: logged argument {a}")
            self.runtime_call(fn, c["role"], layer, step, args)

    def runtime_call(self, fn: str, role: str, layer: int, step: str, args: List[Value]) -> None:
        """One call the KV cache's runtime makes: recorded, then host.c's function called."""
        self.events.append({"ev": "runtime_call", "function": fn, "role": role, "layer": layer,
                            "step": step, "args": [self.describe(*x) for x in args]})
        saved = dict(self.ctx)
        self.ctx.update(runtime_role=role, layer=layer)
        try:
            self.call_c(fn, args)
        finally:
            self.ctx = saved
        self.kv_used += 1

    def outside_calls(self, step: str) -> None:
        """The logged runtime calls of a step that runs no attention (a fork's or popn's page
        copies): each host.c function called with the logged scalars, the pages by address."""
        for layer, c in enumerate(c for c in self.kv_calls if c["step"] == step):
            fn = self.roles.get(c["role"])
            if fn is None or c["role"] != "copy single page":
                raise RuntimeError(f"{step}: logged {c['role']} outside an attention")
            args: List[Value] = []
            for a in c["args"]:
                if a["kind"] == "int":
                    args.append((TI_INT, int(a["value"])))
                elif a["kind"] == "tensor" and a["dtype"] != "int32":
                    j = self.kv_index.setdefault(a["address"], len(self.kv_index))
                    args.append((TI_TENSOR, self.tensor(KV_BASE + j * STRIDE, 0, a["shape"], DTYPES[a["dtype"]],
                                                        {"kv": j})))
                else:
                    raise RuntimeError(f"{step} {c['role']}: logged argument {a}")
            self.runtime_call(fn, c["role"], layer, step, args)

    # ------------------------------------------------------------------ CUDA graphs
    def run_or_capture(self, args: List[Value]) -> Value:
        fn = self.func_ref(args[1]) or ""
        entry = args[3][1]
        shape = None
        if len(args) > 4 and args[4][0] == TI_SHAPE:
            shape = list(self.objs[args[4][1]]["shape"])
        elif len(args) > 4 and args[4][0] == TI_INT:
            shape = [args[4][1]]
        key = (entry, tuple(shape) if shape is not None else None)
        mark = f"{fn}#{entry}" + (f"@{shape}" if shape is not None else "")
        if key in self.graphs:  # a launch of the captured graph: its kernels again
            result, launches = self.graphs[key]
            for ln in launches:
                self.launches.append(dict(ln, step=self.ctx.get("step"), vm_function=self.ctx.get("vm_function"),
                                          replay=True))
            self.events.append({"ev": "cuda_graph_launch", "graph": mark, "launches": len(launches)})
            return result
        elements = [tuple(e) for e in self.objs[args[2][1]]["tuple"]]
        start = len(self.launches)
        saved = dict(self.ctx)
        self.ctx["cuda_graph"] = mark
        try:
            result = self.run_function(fn, elements)
        finally:
            self.ctx = saved
        self.graphs[key] = (result, [dict(ln) for ln in self.launches[start:]])
        self.events.append({"ev": "cuda_graph_capture", "graph": mark, "launches": len(self.launches) - start})
        return result

    # ------------------------------------------------------------------ VM functions
    def run_function(self, name: str, inputs: List[Value]) -> Value:
        """ffi_oracle.Oracle.run_bytecode for any VM function, returning its result value."""
        fi = self.funcs[name]
        if fi["kind"] != 1:
            raise NotImplementedError(f"VM function {name} of kind {fi['kind']} (compiled mode)")
        regs: List[Value] = [(TI_NONE, 0)] * fi["register_file_size"]
        regs[:len(inputs)] = inputs
        for ins in self.vm["instructions"][fi["start_instr"]:fi["end_instr"]]:
            if ins["op"] == "Ret":
                return regs[ins["result"]]
            if ins["op"] != "Call":
                raise NotImplementedError(ins)
            args: List[Value] = []
            for a in ins["args"]:
                if a == "%vm":
                    args.append((TI_PTR, F.VM_CTX))
                elif a == "void":
                    args.append((TI_NONE, 0))
                else:
                    kind, val = a.split(":")
                    v = int(val)
                    args.append({"Reg": lambda: regs[v], "Imm": lambda: (TI_INT, v), "Const": lambda: self.consts[v],
                                 "Func": lambda: (TI_PTR, v)}[kind]())
            fname = ins["func"]
            self.events.append({"ev": "call", "pc": ins["pc"], "func": fname, "dst": ins["dst"]})
            if not fname.startswith("vm.builtin") and self.has_c(fname):
                r = self.call_c(fname, args)
            else:
                r = self.builtin(fname, args) or (TI_NONE, 0)
            if ins["dst"] < len(regs):
                regs[ins["dst"]] = r
        raise RuntimeError(f"{name}: no Ret")

    def run_session(self, session: Dict[str, Any], params: List[Tuple[str, List[int], Tuple[int, int, int]]]) -> None:
        fw = forwards(session)
        packed = [(TI_TENSOR, self.new_tensor(PARAM_BASE + i * STRIDE, shape, dtype, {"param": i, "name": name}))
                  for i, (name, shape, dtype) in enumerate(params)]
        packed_v = (TI_ARRAY, self.new_obj({"tuple": packed}, TI_ARRAY))
        self.ctx = {"step": "create", "vm_function": "create_tir_paged_kv_cache"}
        cache = self.run_function("create_tir_paged_kv_cache",
                                  [(TI_SHAPE, self.new_obj({"shape": [a]}, TI_SHAPE)) for a in cache_args(session, fw)])
        hidden = None
        n_inputs = 0
        for label, op, seqs, n in fw:
            if op in ("add_sequence", "remove_sequence"):
                self.builtin(f"vm.builtin.kv_state_{op}", [cache, (TI_INT, seqs[0])])
                continue
            if op in ("fork_sequence", "popn"):
                # The runtime's page copies of a fork inside a page (copy_single_page, one per
                # layer, on its copy stream): host.c's function called with the logged arguments.
                self.ctx = {"step": label, "vm_function": ""}
                self.outside_calls(label)
                continue
            batch = op == "batch_decode"
            lengths = [1] * len(seqs) if batch else [n]
            self.ctx = {"step": label, "vm_function": "embed"}
            self.builtin("vm.builtin.kv_state_begin_forward", [cache, (TI_SHAPE, self.new_obj({"shape": seqs}, TI_SHAPE)),
                                                               (TI_SHAPE, self.new_obj({"shape": lengths}, TI_SHAPE))])
            ids = (TI_TENSOR, self.new_tensor(F.INPUT_BASE + n_inputs * STRIDE, [n], (0, 32, 1),
                                              {"input": n_inputs, "name": f"input_ids[{label}]"}))
            n_inputs += 1
            e = self.run_function("embed", [ids, packed_v])
            dl = TensorObj.from_address(e[1]).dl
            hidden = dl.shape[1]
            view = [n, 1, hidden] if batch else [1, n, hidden]
            x = self.builtin("vm.builtin.reshape", [e, (TI_SHAPE, self.new_obj({"shape": view}, TI_SHAPE))])
            self.ctx = {"step": label, "vm_function": op}
            result = self.run_function(op, [x, cache, packed_v])
            cache = tuple(self.objs[result[1]]["tuple"][1])
            self.builtin("vm.builtin.kv_state_end_forward", [cache])
        if self.kv_used != len(self.kv_calls):
            raise RuntimeError(f"{len(self.kv_calls) - self.kv_used} of the {len(self.kv_calls)} logged runtime calls "
                               f"were not made (steps or attentions TVM ran and this session did not)")
        both = set(self.vm_addrs) & set(self.kv_index)
        if both:
            raise RuntimeError(f"logged addresses both VM tensors and cache memory: {sorted(both)[:4]}")


def prepare(folder: str, work: str) -> List[str]:
    """Copies what the oracle reads into `work` (the build folder stays untouched), writes
    vm_exec.json and device.tvm_meta.json there (tvm26_files.py); returns gcc's extra flags."""
    for f in ("host.c", "vm_exec.bin", "model.so", "half_decl.h"):
        if os.path.exists(os.path.join(folder, f)):
            shutil.copy(os.path.join(folder, f), os.path.join(work, f))
    tvm26_files.main(work)
    half = os.path.join(work, "half_decl.h")
    return ["-include", half] if os.path.exists(half) else []


def main(argv: List[str]) -> int:
    if len(argv) < 6 or "-o" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    folder, spec, kv_log, ffi_inc, dl_inc, tvm_inc = argv[:6]
    out = argv[argv.index("-o") + 1]
    work = argv[argv.index("--work") + 1] if "--work" in argv else tempfile.mkdtemp(prefix="llm_oracle.")
    os.makedirs(work, exist_ok=True)
    cflags = prepare(folder, work)
    calls = json.load(open(kv_log))["calls"]
    o = SessionOracle(work, ffi_inc, dl_inc, tvm_inc, calls, cflags)
    error = None
    try:
        o.run_session(parse_session(spec), read_params(os.path.join(folder, "params.bin")))
    except Exception as e:  # noqa: BLE001 - reported in the truth file and the exit code
        error = f"{type(e).__name__}: {e}"
        o.events.append({"ev": "fatal", "error": error})
    bad = [e for e in o.events if e["ev"] in ("fatal", "error", "unknown_call")]
    doc = {"oracle": "test/tvm/llm_oracle/llm_session_oracle.py (ffi_oracle_more.py + a session driver, the KV "
                     "cache's runtime calls made from TVM's logged arguments, CUDA-graph capture; host.c + "
                     "ffi_shim.c, gcc, no GPU)",
           "folder": os.path.abspath(folder), "session": spec, "kv_log": os.path.abspath(kv_log),
           "gcc_flags": cflags, "roles": o.roles, "runtime_calls": o.kv_used, "logged_runtime_calls": len(calls),
           "launches": o.launches, "events": o.events}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"{out}: {len(o.launches)} launches ({sum(1 for ln in o.launches if 'runtime_role' in ln)} by the KV "
          f"cache's runtime, {sum(1 for ln in o.launches if ln.get('replay'))} CUDA-graph replays), "
          f"{o.kv_used}/{len(calls)} logged runtime calls made, {len(bad)} errors")
    for e in bad[:5]:
        print("  ", json.dumps(e)[:400])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
