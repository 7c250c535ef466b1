"""What TVM's own paged KV cache runtime calls for MLA layers in a session, recorded by running it
(written here; the recording is TVM's behaviour, not kdflow's).

TVM builds no CPU kernels for an MLA cache (kv_cache.py: "MLA is not supported in TIR kernels"),
so kv_truth.py's way (the model built for llvm, its kernels wrapped) cannot run. The runtime
itself (paged_kv_cache.cc, in the wheel's libtvm) needs no kernel to run, only functions to
call: here the cache is created through `vm.builtin.paged_attention_kv_cache_create` on the
CPU with a recorder in every kernel slot, in the layout TVM's kv_cache.py gives an MLA cache
(MHA's paged slots empty, the MLA paged kernel at 22, two merges at 23), and driven as MLC-LLM's
DeepSeek-V2 drives it in each forward: begin_forward, get_query_positions, then per layer
append_mla_kv and self_attention (prefill), cross_attention (decode) or both merged by
merge_attn_output_inplace (extend: a sequence prefilled before, or forked, as MLC's engine
chooses), end_forward; forks and sequences as the session says. Every call the runtime makes is logged in order with its
arguments, as kv_truth.py logs them; the recorders compute nothing, and the tensors handed to the
builtins hold zeros (the runtime reads only their shapes).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

import numpy as np

from kv_truth import _describe


def record(tvm: Any, session: Dict[str, Any], out_json: str, *, layers: int, heads: int, latent: int, rope: int,
           nope: int, v_dim: int, dtype: str = "float32", sm_scale: float = 0.25) -> int:
    """Runs `session` (a session file's content) on TVM's runtime with an MLA cache of `layers`
    layers, `heads` query heads, latent rows of `latent` + `rope`, and the model's own heads of
    `nope` + `rope` (queries and keys) and `v_dim` (values) for self-attention; writes the calls to
    `out_json` ({"tvm", "calls": [{"step", "role", "args"}]}) and returns how many."""
    import tvm_ffi
    from kdflow_tvm import _session

    fw = _session.forwards(session)
    batch, total, chunk, page = _session.cache_args(session, fw)
    events: List[Dict[str, Any]] = []
    step = ["create"]

    def recorder(role: str) -> Any:
        def logged(*args: Any) -> None:
            events.append({"step": step[0], "role": role, "args": [_describe(tvm_ffi, a) for a in args]})
        return tvm_ffi.convert(logged)

    dev = tvm.cpu()

    def zeros(*shape: int, dt: str = dtype) -> Any:
        return tvm.runtime.tensor(np.zeros(shape, dtype=dt), device=dev)

    shape = tvm_ffi.Shape
    create = tvm.get_global_func("vm.builtin.paged_attention_kv_cache_create")
    qk = latent + rope
    cache = create(
        shape([batch, total, chunk, page, 0, 1024]), shape([0, layers]), heads, 1, qk, latent,
        shape([1] * layers), False, 0, 1.0, 10000.0, 0, zeros(),
        recorder("transpose append"), recorder("transpose append mla"),
        ["tirx", recorder("prefill ragged")], [], [], [], [], [], [],
        ["tirx", recorder("mla prefill")], [recorder("merge"), recorder("merge general")],
        recorder("split rotary"), recorder("copy single page"), recorder("debug get kv"), recorder("compact copy"))
    begin = tvm.get_global_func("vm.builtin.kv_state_begin_forward")
    end = tvm.get_global_func("vm.builtin.kv_state_end_forward")
    positions = tvm.get_global_func("vm.builtin.attention_kv_cache_get_query_positions")
    append = tvm.get_global_func("vm.builtin.attention_kv_cache_append_mla_kv")
    self_attn = tvm.get_global_func("vm.builtin.attention_kv_cache_self_attention")
    cross_attn = tvm.get_global_func("vm.builtin.attention_kv_cache_cross_attention")
    merge = tvm.get_global_func("vm.builtin.attention_kv_cache_merge_attn_output_inplace")
    # MLC's engine: a sequence prefilled before, or forked, prefills by `extend`
    for (label, op, seqs, n), function in zip(fw, _session.vm_functions(fw, extend=True)):
        step[0] = label
        if _session.bookkeeping(tvm, cache, op, seqs, n):
            continue
        if op in ("prefill", "decode", "batch_decode"):
            lengths = [1] * len(seqs) if op == "batch_decode" else [n]
            t = sum(lengths)
            extend = function == "extend"
            begin(cache, shape(seqs), shape(lengths))
            positions(cache)
            for layer in range(layers):
                append(cache, layer, zeros(t, qk))
                if op == "prefill":  # "prefill" and "extend": self-attention over the new tokens
                    o1, lse1 = zeros(t, heads, v_dim), zeros(t, heads, dt="float32")
                    self_attn(cache, layer, sm_scale, zeros(t, heads, nope + rope), zeros(t, heads, nope + rope),
                              zeros(t, heads, v_dim), o1, lse1)
                if op != "prefill" or extend:  # "decode" and "extend": the latent pages
                    lse2 = zeros(t, heads, dt="float32")
                    cross_attn(cache, layer, sm_scale, zeros(t, heads, qk), zeros(t, heads, latent), lse2)
                if extend:  # the two merged, w_uv applied to the second (MLC's model)
                    merge(cache, o1, lse1, zeros(t, heads, v_dim), lse2)
            end(cache)
        else:
            raise ValueError(f"mla_kv_truth: session op {op} is not driven here")
    with open(out_json, "w") as f:
        json.dump({"tvm": str(tvm.__version__), "calls": events}, f, indent=1)
    return len(events)
