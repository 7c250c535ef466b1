"""What TVM's own paged KV cache runtime calls in a session, recorded by running it (written
here; the recording is TVM's behaviour, not kdflow's).

The language model of llm_model.py is built for `llvm` with the same TVM and run on the CPU
VM as TVM's LLM tutorial drives it: create the cache, add sequence 0, then per step
begin_forward, embed, prefill or decode, end_forward. Before the VM exists, the global
`vm.builtin.paged_attention_kv_cache_create` is replaced by a function that wraps each kernel
handle the cache receives in a recorder and then calls TVM's own constructor, so the real C++
runtime (paged_kv_cache.cc) runs and every host function it calls is logged in order with its
arguments: tensors (shape, dtype, byte offset, the values of small int32 arrays) and scalars.
The runtime calls the CPU kernels with the same arguments as the CUDA ones (one argument list
per constructor slot), so the log is what a CUDA build's runtime passes.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

# Constructor argument index → the role kdflow names (paged_kv_cache.cc, v0.26.0).
ROLES = {13: "transpose append", 15: "prefill ragged", 16: "prefill paged", 17: "decode", 23: "merge",
         24: "split rotary", 25: "copy single page", 27: "compact copy"}


def _describe(tvm_ffi: Any, a: Any) -> Dict[str, Any]:
    if isinstance(a, tvm_ffi.Tensor):
        d: Dict[str, Any] = {"kind": "tensor", "shape": [int(s) for s in a.shape], "dtype": str(a.dtype)}
        try:  # where its first element lives (data + byte_offset), through DLPack
            d["address"] = int(np.from_dlpack(a).__array_interface__["data"][0])
        except Exception:  # noqa: BLE001 - a dtype numpy cannot view
            pass
        if str(a.dtype) == "int32" and int(np.prod(d["shape"] or [1])) <= 4096:
            d["values"] = [int(x) for x in a.numpy().reshape(-1)]
        return d
    if isinstance(a, bool) or isinstance(a, int):
        return {"kind": "int", "value": int(a)}
    if isinstance(a, float):
        return {"kind": "float", "value": a}
    return {"kind": type(a).__name__}


def record(tvm: Any, make: Callable[[], Tuple[Any, Dict[str, np.ndarray]]], out_json: str, prefill: int = 7,
           decode: int = 2, page_size: int = 16) -> None:
    """Builds the module `make()` returns (llm_model.decoder_lm, called under the llvm target) for llvm, runs prefill:`prefill`,decode:`decode` with the
    cache created as `kdflow extract --session prefill:N,decode:M` creates it, and writes the
    runtime's kernel calls to `out_json`; beside it, the session's token ids (input_ids.npy: the
    prefill's, then each decode step's, greedy) and TVM's logits of each step (output_prefill.npy,
    output_decode_<k>.npy), which `kdflow replay --session` reads."""
    import tvm_ffi
    from tvm import relax

    folder = os.path.dirname(os.path.abspath(out_json))

    target = tvm.target.Target("llvm")
    with target:
        mod, params = make()
        ex = tvm.compile(mod, target)
    events: List[Dict[str, Any]] = []
    step = ["create"]
    original = tvm.get_global_func("vm.builtin.paged_attention_kv_cache_create")

    def wrap(f: Any, role: str) -> Any:
        def logged(*args: Any) -> Any:
            events.append({"step": step[0], "role": role, "args": [_describe(tvm_ffi, a) for a in args]})
            return f(*args)
        return tvm_ffi.convert(logged)

    def hooked(*args: Any) -> Any:
        args = list(args)
        for i, role in ROLES.items():
            a = args[i]
            if isinstance(a, tvm_ffi.Function):
                args[i] = wrap(a, role)
            elif isinstance(a, (tvm_ffi.Array, list, tuple)):
                args[i] = [wrap(x, role) if isinstance(x, tvm_ffi.Function) else x for x in a]
        return original(*args)

    tvm_ffi.register_global_func("vm.builtin.paged_attention_kv_cache_create", hooked, override=True)
    try:
        dev = tvm.cpu()
        vm = relax.VirtualMachine(ex, dev)
        shape = tvm_ffi.Shape
        packed = [tvm.runtime.tensor(v, device=dev) for v in params.values()]
        cache = vm["create_tir_paged_kv_cache"](shape([1]), shape([prefill + decode]), shape([prefill]),
                                                shape([page_size]))
        add_seq = tvm.get_global_func("vm.builtin.kv_state_add_sequence")
        begin = tvm.get_global_func("vm.builtin.kv_state_begin_forward")
        end = tvm.get_global_func("vm.builtin.kv_state_end_forward")
        view = tvm.get_global_func("vm.builtin.reshape")
        add_seq(cache, 0)
        rng = np.random.default_rng(11)
        tokens = rng.integers(0, 256, size=prefill).astype("int32")
        all_tokens: List[int] = []
        for k in range(-1, decode):
            step[0] = "prefill" if k < 0 else f"decode {k}"
            all_tokens += [int(t) for t in tokens]
            e = vm["embed"](tvm.runtime.tensor(tokens, device=dev), packed)
            x = view(e, shape([1, e.shape[0], e.shape[1]]))
            begin(cache, shape([0]), shape([len(tokens)]))
            logits, cache = vm["prefill" if k < 0 else "decode"](x, cache, packed)
            end(cache)
            out = logits.numpy()
            np.save(os.path.join(folder, "output_prefill.npy" if k < 0 else f"output_decode_{k}.npy"), out)
            tokens = np.array([int(np.argmax(out.reshape(-1)))], dtype="int32")  # greedy: the next token
        np.save(os.path.join(folder, "input_ids.npy"), np.array(all_tokens, dtype="int32"))
    finally:
        tvm_ffi.register_global_func("vm.builtin.paged_attention_kv_cache_create", original, override=True)
    with open(out_json, "w") as f:
        json.dump({"tvm": str(tvm.__version__), "session": f"prefill:{prefill},decode:{decode}",
                   "calls": events}, f, indent=1)
