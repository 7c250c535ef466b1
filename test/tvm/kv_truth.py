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
# prefill and the merge of TVM's runtime), a removal whose pages the next sequence reuses.
SESSION_FILE: Dict[str, Any] = {
    "kv_cache": {"prefill_chunk_size": 4},
    "steps": [
        {"op": "add_sequence", "seq": 0}, {"op": "prefill", "seq": 0, "tokens": 10},
        {"op": "add_sequence", "seq": 1}, {"op": "prefill", "seq": 1, "tokens": 3},
        {"op": "decode", "seq": 0}, {"op": "decode", "seq": 1}, {"op": "remove_sequence", "seq": 0},
        {"op": "add_sequence", "seq": 2}, {"op": "prefill", "seq": 2, "tokens": 5},
        {"op": "decode", "seq": 2}, {"op": "decode", "seq": 1},
    ],
}


def forwards(session: Dict[str, Any]) -> List[Tuple[str, str, int, int]]:
    """The session's forwards as kdflow labels them (relax_vm.cpp label_steps, chunk_prefills):
    (label, "prefill" | "decode", seq, tokens)."""
    steps = session["steps"]
    several = len({s["seq"] for s in steps if s["op"] == "add_sequence"}) > 1
    chunk = session.get("kv_cache", {}).get("prefill_chunk_size", 0)
    out: List[Tuple[str, str, int, int]] = []
    decodes: Dict[int, int] = {}
    prefills: Dict[int, int] = {}
    for s in steps:
        who = f"seq {s['seq']} " if several else ""
        if s["op"] == "decode":
            k = decodes.get(s["seq"], 0)
            decodes[s["seq"]] = k + 1
            out.append((f"{who}decode {k}", "decode", s["seq"], 1))
        elif s["op"] == "prefill":
            k = prefills.get(s["seq"], 0)
            prefills[s["seq"]] = k + 1
            label = who + ("prefill" if k == 0 else f"prefill {k}")
            n = s["tokens"]
            if chunk and n > chunk:
                for i, done in enumerate(range(0, n, chunk)):
                    out.append((f"{label} chunk {i}", "prefill", s["seq"], min(chunk, n - done)))
            else:
                out.append((label, "prefill", s["seq"], n))
        else:
            out.append((s["op"], s["op"], s["seq"], 0))
    return out


def record(tvm: Any, make: Callable[[], Tuple[Any, Dict[str, np.ndarray]]], out_json: str, prefill: int = 7,
           decode: int = 2, page_size: int = 16) -> None:
    """Builds the module `make()` returns (llm_model.decoder_lm, called under the llvm target) for
    llvm and runs two sessions as `kdflow extract --session` runs them, creating the cache alike:
    prefill:`prefill`,decode:`decode` and SESSION_FILE (written beside `out_json` as
    session.json). Writes the runtime's kernel calls of the first to `out_json` and of the second
    to kv_truth_session_file.json; beside them each session's token ids (input_ids.npy,
    input_ids_session_file.npy: each forward's tokens in order; decode tokens greedy) and TVM's
    logits of each forward, output_<label>.npy (output_prefill.npy, output_decode_0.npy,
    output_seq_1_prefill_chunk_0.npy, ...), which `kdflow replay --session` reads."""
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

    simple = {"steps": [{"op": "add_sequence", "seq": 0}, {"op": "prefill", "seq": 0, "tokens": prefill}] +
              [{"op": "decode", "seq": 0}] * decode}
    with open(os.path.join(folder, "session.json"), "w") as f:
        json.dump(SESSION_FILE, f, indent=1)
    tvm_ffi.register_global_func("vm.builtin.paged_attention_kv_cache_create", hooked, override=True)
    try:
        dev = tvm.cpu()
        vm = relax.VirtualMachine(ex, dev)
        shape = tvm_ffi.Shape
        packed = [tvm.runtime.tensor(v, device=dev) for v in params.values()]
        add_seq = tvm.get_global_func("vm.builtin.kv_state_add_sequence")
        remove_seq = tvm.get_global_func("vm.builtin.kv_state_remove_sequence")
        begin = tvm.get_global_func("vm.builtin.kv_state_begin_forward")
        end = tvm.get_global_func("vm.builtin.kv_state_end_forward")
        view = tvm.get_global_func("vm.builtin.reshape")
        for session, calls_file, tokens_file in ((simple, out_json, "input_ids.npy"),
                                                 (SESSION_FILE, os.path.join(folder, "kv_truth_session_file.json"),
                                                  "input_ids_session_file.npy")):
            events.clear()
            fw = forwards(session)
            cfg = session.get("kv_cache", {})
            total = sum(n for _, op, _, n in fw if op in ("prefill", "decode"))
            largest = max(n for _, op, _, n in fw if op in ("prefill", "decode"))
            step[0] = "create"
            cache = vm["create_tir_paged_kv_cache"](shape([1]), shape([cfg.get("max_total_seq_len", total)]),
                                                    shape([cfg.get("prefill_chunk_size", largest)]),
                                                    shape([page_size]))
            rng = np.random.default_rng(11)
            nxt: Dict[int, int] = {}
            all_tokens: List[int] = []
            for label, op, seq, n in fw:
                if op == "add_sequence":
                    add_seq(cache, seq)
                    continue
                if op == "remove_sequence":
                    remove_seq(cache, seq)
                    continue
                step[0] = label
                tokens = rng.integers(0, 256, size=n).astype("int32") if op == "prefill" else \
                    np.array([nxt[seq]], dtype="int32")
                all_tokens += [int(t) for t in tokens]
                e = vm["embed"](tvm.runtime.tensor(tokens, device=dev), packed)
                x = view(e, shape([1, e.shape[0], e.shape[1]]))
                begin(cache, shape([seq]), shape([n]))
                logits, cache = vm[op](x, cache, packed)
                end(cache)
                out = logits.numpy()
                np.save(os.path.join(folder, "output_" + label.replace(" ", "_") + ".npy"), out)
                nxt[seq] = int(np.argmax(out.reshape(-1)))  # greedy: the sequence's next token
            np.save(os.path.join(folder, tokens_file), np.array(all_tokens, dtype="int32"))
            with open(calls_file, "w") as f:
                json.dump({"tvm": str(tvm.__version__), "calls": list(events)}, f, indent=1)
    finally:
        tvm_ffi.register_global_func("vm.builtin.paged_attention_kv_cache_create", original, override=True)
