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


# The session file check_models.py replays: two sequences, a prefill in chunks (the paged
# prefill and the merge of TVM's runtime), a removal whose pages the next sequence reuses, and
# a batch decode of two sequences in one forward (batch_decode).
SESSION_FILE: Dict[str, Any] = {
    "kv_cache": {"prefill_chunk_size": 4},
    "steps": [
        {"op": "add_sequence", "seq": 0}, {"op": "prefill", "seq": 0, "tokens": 10},
        {"op": "add_sequence", "seq": 1}, {"op": "prefill", "seq": 1, "tokens": 3},
        {"op": "decode", "seq": 0}, {"op": "decode", "seq": 1}, {"op": "remove_sequence", "seq": 0},
        {"op": "add_sequence", "seq": 2}, {"op": "prefill", "seq": 2, "tokens": 5},
        {"op": "decode", "seq": 2}, {"op": "decode", "seq": 1}, {"op": "decode", "seq": [2, 1]},
    ],
}

# A session across page boundaries (16 tokens a page): sequence 7's prefill fills three pages
# (45 tokens), its decodes cross into a fourth at position 48; sequence 8 then takes fresh pages
# beside it and both decode. Its labels (seq_7_..., seq_8_...) differ from SESSION_FILE's.
LONG_SESSION: Dict[str, Any] = {
    "kv_cache": {"prefill_chunk_size": 64},
    "steps": [
        {"op": "add_sequence", "seq": 7}, {"op": "prefill", "seq": 7, "tokens": 45},
        {"op": "decode", "seq": 7}, {"op": "decode", "seq": 7}, {"op": "decode", "seq": 7}, {"op": "decode", "seq": 7},
        {"op": "add_sequence", "seq": 8}, {"op": "prefill", "seq": 8, "tokens": 20},
        {"op": "decode", "seq": 8}, {"op": "decode", "seq": 7},
    ],
}

# Forks and popn (TVM's two-level page table): sequence 3 forked from 0 inside its second page
# (copy_single_page of 4 tokens per layer, a new parent block; two depths), both decoded alone
# and in one batch (depth 0 shared by both), sequence 4 forked from 0 inside its first page,
# prefilled and decoded; popn within a block (pages freed), and one reaching into a shared block
# (the runtime forks again internally and copies).
FORK_SESSION: Dict[str, Any] = {
    "kv_cache": {"max_total_seq_len": 256, "max_batch_size": 2},
    "steps": [
        {"op": "add_sequence", "seq": 0}, {"op": "prefill", "seq": 0, "tokens": 20},
        {"op": "fork_sequence", "seq": 3, "parent": 0},
        {"op": "decode", "seq": 3}, {"op": "decode", "seq": 0}, {"op": "decode", "seq": [0, 3]},
        {"op": "fork_sequence", "seq": 4, "parent": 0, "pos": 5},
        {"op": "prefill", "seq": 4, "tokens": 6}, {"op": "decode", "seq": 4},
        {"op": "popn", "seq": 0, "n": 3}, {"op": "decode", "seq": 0},
        {"op": "popn", "seq": 3, "n": 8}, {"op": "decode", "seq": 3},
        {"op": "remove_sequence", "seq": 0}, {"op": "decode", "seq": [3, 4]},
    ],
}


def record(tvm: Any, make: Callable[[], Tuple[Any, Dict[str, np.ndarray]]], out_json: str, prefill: int = 7,
           decode: int = 2, page_size: int = 16) -> None:
    """Builds the module `make()` returns (llm_model.decoder_lm, called under the llvm target) for
    llvm and runs two sessions as `kdflow extract --session` runs them, creating the cache alike:
    prefill:`prefill`,decode:`decode`, SESSION_FILE and LONG_SESSION (written beside `out_json`
    as session.json and session_long.json). Writes the runtime's kernel calls of the first to
    `out_json`, of the second to kv_truth_session_file.json and of the third to
    kv_truth_session_long.json; beside them each session's token ids (input_ids.npy,
    input_ids_session_file.npy, input_ids_session_long.npy: each forward's tokens in order; decode tokens greedy) and TVM's
    logits of each forward, output_<label>.npy (output_prefill.npy, output_decode_0.npy,
    output_seq_1_prefill_chunk_0.npy, ...), which `kdflow replay --session` reads."""
    import tvm_ffi
    from kdflow_tvm import _session

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

    with open(os.path.join(folder, "session.json"), "w") as f:
        json.dump(SESSION_FILE, f, indent=1)
    with open(os.path.join(folder, "session_long.json"), "w") as f:
        json.dump(LONG_SESSION, f, indent=1)
    with open(os.path.join(folder, "session_fork.json"), "w") as f:
        json.dump(FORK_SESSION, f, indent=1)
    tvm_ffi.register_global_func("vm.builtin.paged_attention_kv_cache_create", hooked, override=True)
    try:
        # The exporter's own run of a session (kdflow_tvm.llm_session), with the runtime's
        # kernel calls recorded on the way.
        for spec, calls_file, tokens_file in ((f"prefill:{prefill},decode:{decode},page_size:{page_size}", out_json,
                                               "input_ids.npy"),
                                              (SESSION_FILE, os.path.join(folder, "kv_truth_session_file.json"),
                                               "input_ids_session_file.npy"),
                                              (LONG_SESSION, os.path.join(folder, "kv_truth_session_long.json"),
                                               "input_ids_session_long.npy"),
                                              (FORK_SESSION, os.path.join(folder, "kv_truth_session_fork.json"),
                                               "input_ids_session_fork.npy")):
            events.clear()
            # The fork session's forwards are labelled like the session file's (seq 0, batch
            # decode 0): its references go into their own folder, listed in forward order.
            into = os.path.join(folder, "session_fork") if spec is FORK_SESSION else folder
            os.makedirs(into, exist_ok=True)
            _session.run(tvm, ex, params, _session.parse(spec), into, tokens_file=tokens_file,
                         on_step=lambda label: step.__setitem__(0, label))
            if spec is FORK_SESSION:
                outs = ["output_" + label.replace(" ", "_") + ".npy"
                        for label, op, _, _ in _session.forwards(_session.parse(spec))
                        if op in ("prefill", "decode", "batch_decode")]
                with open(os.path.join(into, "expect.json"), "w") as f:
                    json.dump(outs, f)
            with open(calls_file, "w") as f:
                json.dump({"tvm": str(tvm.__version__), "calls": list(events)}, f, indent=1)
    finally:
        tvm_ffi.register_global_func("vm.builtin.paged_attention_kv_cache_create", original, override=True)
