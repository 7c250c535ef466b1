"""Sessions of a language model, as `kdflow extract --session` states them (docs/schema.md
"Sessions"): the spec or session file parsed, each forward labelled as kdflow labels it, and
the session run with TVM's own VM on the CPU for the references kdflow replay compares with
(input_ids.npy, output_<step>.npy)."""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple, Union

import numpy as np

from .errors import DATA_ERROR, USAGE, ExportError

Session = Dict[str, Any]
#: (label, op, seqs, tokens): op is "prefill", "decode", "batch_decode" (one token of each of
#: seqs in one forward), "add_sequence", "remove_sequence", "fork_sequence" (seqs = [child,
#: parent], tokens = the position, -1 for the parent's end) or "popn" (tokens = how many)
Forward = Tuple[str, str, List[int], int]

_CACHE_KEYS = ("max_batch_size", "max_total_seq_len", "prefill_chunk_size", "page_size")


def parse(spec: Union[str, Mapping[str, Any]]) -> Session:
    """"prefill:N,decode:M[,page_size:P,...]", a session file's path, or its content as a dict."""
    if isinstance(spec, Mapping):
        session = dict(spec)
    elif ":" not in spec or os.path.exists(spec):
        try:
            with open(spec) as f:
                session = json.load(f)
        except (OSError, ValueError) as e:
            raise ExportError(f"session {spec}: {e}", DATA_ERROR) from None
    else:
        cache: Dict[str, int] = {}
        prefill, decode = 0, 0
        for item in spec.split(","):
            key, _, value = item.partition(":")
            if not value.isdigit() or key not in ("prefill", "decode") + _CACHE_KEYS:
                raise ExportError(f"session {spec}: expected prefill:N,decode:M, got {item!r}", USAGE)
            if key == "prefill":
                prefill = int(value)
            elif key == "decode":
                decode = int(value)
            else:
                cache[key] = int(value)
        if prefill < 1:
            raise ExportError(f"session {spec}: a session starts with prefill:N (N >= 1)", USAGE)
        session = {"kv_cache": cache, "steps": [{"op": "add_sequence", "seq": 0},
                                               {"op": "prefill", "seq": 0, "tokens": prefill}] +
                   [{"op": "decode", "seq": 0}] * decode}
    steps = session.get("steps")
    if not isinstance(steps, list) or not steps:
        raise ExportError("session: expected a non-empty list of steps", DATA_ERROR)
    for i, s in enumerate(steps):
        batch = isinstance(s, dict) and s.get("op") == "decode" and isinstance(s.get("seq"), list) and \
            s["seq"] and all(isinstance(x, int) for x in s["seq"])
        if not isinstance(s, dict) or s.get("op") not in ("add_sequence", "remove_sequence", "prefill", "decode",
                                                          "fork_sequence", "popn", "enable_sliding_window") \
                or not (isinstance(s.get("seq"), int) or batch) or \
                (s["op"] == "prefill" and not isinstance(s.get("tokens"), int)) or \
                (s["op"] == "fork_sequence" and not isinstance(s.get("parent"), int)) or \
                (s["op"] == "fork_sequence" and not isinstance(s.get("pos", -1), int)) or \
                (s["op"] == "popn" and not isinstance(s.get("n"), int)) or \
                (s["op"] == "enable_sliding_window" and not isinstance(s.get("window"), int)):
            raise ExportError(f"session: step {i} is not one kdflow runs ({s!r})", DATA_ERROR)
    cache = session.get("kv_cache", {})
    keys = _CACHE_KEYS + ("support_sliding_window",)  # a session file's only
    if not isinstance(cache, dict) or any(k not in keys for k in cache):
        raise ExportError(f"session: kv_cache takes {', '.join(keys)}", DATA_ERROR)
    return {"kv_cache": dict(cache), "steps": list(steps)}


def forwards(session: Session) -> List[Forward]:
    """The session's steps in order, each forward labelled as kdflow labels it (relax_vm.cpp
    label_steps, chunk_prefills): "prefill", "decode 0", "seq 1 prefill", "prefill chunk 0"."""
    steps = session["steps"]
    several = len({s["seq"] for s in steps if s["op"] in ("add_sequence", "fork_sequence")}) > 1
    chunk = int(session.get("kv_cache", {}).get("prefill_chunk_size", 0))
    out: List[Forward] = []
    decodes: Dict[int, int] = {}
    prefills: Dict[int, int] = {}
    batches = 0
    for s in steps:
        if s["op"] == "decode" and isinstance(s["seq"], list):
            out.append((f"batch decode {batches}", "batch_decode", [int(x) for x in s["seq"]], len(s["seq"])))
            batches += 1
            continue
        seq = int(s["seq"])
        who = f"seq {seq} " if several else ""
        if s["op"] == "decode":
            k = decodes.get(seq, 0)
            decodes[seq] = k + 1
            out.append((f"{who}decode {k}", "decode", [seq], 1))
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
        elif s["op"] == "fork_sequence":
            out.append((f"fork_sequence {seq}", "fork_sequence", [seq, int(s["parent"])], int(s.get("pos", -1))))
        elif s["op"] == "popn":
            out.append((f"popn {seq}", "popn", [seq], int(s["n"])))
        elif s["op"] == "enable_sliding_window":  # seqs: [seq, window, sink]
            out.append((f"enable_sliding_window {seq}", "enable_sliding_window",
                        [seq, int(s["window"]), int(s.get("sink", 0))], 0))
        else:
            out.append((s["op"], s["op"], [seq], 0))
    return out


def cache_args(session: Session, fw: List[Forward]) -> Tuple[int, int, int, int]:
    """create_tir_paged_kv_cache's arguments as kdflow passes them (defaults: every token, the
    largest forward, page size 16)."""
    cfg = session.get("kv_cache", {})
    sizes = [n for _, op, _, n in fw if op in ("prefill", "decode", "batch_decode")]
    widest = max([n for _, op, _, n in fw if op == "batch_decode"] + [1])
    return (max(int(cfg.get("max_batch_size", 1)), widest), int(cfg.get("max_total_seq_len", sum(sizes))),
            int(cfg.get("prefill_chunk_size", max(sizes))), int(cfg.get("page_size", 16)))


def vm_functions(fw: List[Forward], extend: bool) -> List[Optional[str]]:
    """The VM function each entry of `fw` calls (None for bookkeeping: add, remove, fork, popn,
    windows): `prefill`, `decode`, `batch_decode`; where the build has an `extend` function
    (`extend`), a prefill of a sequence prefilled before, or forked, calls it, as MLC-LLM's
    engine does (serve/model.cc; DeepSeek-V2's `prefill` attends to the new tokens only)."""
    prefilled: Set[int] = set()
    out: List[Optional[str]] = []
    for _label, op, seqs, _n in fw:
        if op == "fork_sequence":
            prefilled.add(seqs[0])
        elif op == "remove_sequence":
            prefilled.discard(seqs[0])
        function: Optional[str] = op if op in ("prefill", "decode", "batch_decode") else None
        if op == "prefill":
            function = "extend" if extend and seqs[0] in prefilled else "prefill"
            prefilled.add(seqs[0])
        out.append(function)
    return out


def bookkeeping(tvm: Any, cache: Any, op: str, seqs: List[int], n: int) -> bool:
    """The cache's calls for a step that runs no VM function (add, remove, fork, popn, a
    sequence's window), as kdflow models them; False for a forward."""
    if op == "add_sequence":
        tvm.get_global_func("vm.builtin.kv_state_add_sequence")(cache, seqs[0])
    elif op == "remove_sequence":
        tvm.get_global_func("vm.builtin.kv_state_remove_sequence")(cache, seqs[0])
    elif op == "fork_sequence":
        tvm.get_global_func("vm.builtin.kv_state_fork_sequence")(cache, seqs[1], seqs[0], n)
    elif op == "popn":
        tvm.get_global_func("vm.builtin.kv_state_popn")(cache, seqs[0], n)
    elif op == "enable_sliding_window":  # as MLC's engine does for a model with a sliding window
        tvm.get_global_func("vm.builtin.attention_kv_cache_enable_sliding_window_for_seq")(cache, *seqs)
    else:
        return False
    return True


def has_function(vm: Any, name: str) -> bool:
    """Whether the VM's executable has function `name`."""
    try:
        return bool(vm.module.implements_function(name))
    except AttributeError:  # a TVM whose VM module cannot say: look the function up
        try:
            vm[name]
            return True
        except AttributeError:
            return False


def cache_arity(vm: Any) -> int:
    """How many arguments `vm`'s create_tir_paged_kv_cache takes: 4 as TVM's LLM tutorial
    builds it, 5 where the model adds support_sliding_window (MLC-LLM's models); 4 where the
    VM cannot say (a TVM without VirtualMachine._get_function_arity)."""
    arity = getattr(vm, "_get_function_arity", None)
    return 4 if arity is None else max(4, int(arity("create_tir_paged_kv_cache")))


def run(tvm: Any, ex: Any, params: Mapping[str, np.ndarray], session: Session, folder: str,
        tokens_file: str = "input_ids.npy", seed: int = 11, vocab: Optional[int] = None,
        on_step: Optional[Callable[[str], None]] = None) -> List[int]:
    """Runs `session` on TVM's VM on the CPU with the llvm executable `ex` (embed, prefill,
    decode, create_tir_paged_kv_cache; `params` in the packed tuple's order): prefill tokens at
    random (seed `seed`, below `vocab`, default the embedding's rows), each decode token the
    argmax of that sequence's last logits. Writes `folder/tokens_file` (every forward's tokens
    in order) and TVM's logits of each forward, output_<label>.npy. `on_step(label)` is called
    before each forward, fork and popn (and with "create" first). Returns the tokens."""
    import tvm_ffi
    from tvm import relax
    dev = tvm.cpu()
    vm = relax.VirtualMachine(ex, dev)
    shape = tvm_ffi.Shape
    packed = [tvm.runtime.tensor(np.asarray(v), device=dev) for v in params.values()]
    if vocab is None:
        vocab = int(next(iter(params.values())).shape[0])
    fw = forwards(session)
    if on_step:
        on_step("create")
    sliding = int(bool(session.get("kv_cache", {}).get("support_sliding_window", 0)))
    if sliding and cache_arity(vm) < 5:
        raise ExportError("session: kv_cache support_sliding_window, but this model's create_tir_paged_kv_cache "
                          "takes no such argument", USAGE)
    args = cache_args(session, fw) + (sliding,) * (cache_arity(vm) - 4)  # MLC's support_sliding_window
    cache = vm["create_tir_paged_kv_cache"](*(shape([a]) for a in args))
    begin = tvm.get_global_func("vm.builtin.kv_state_begin_forward")
    end = tvm.get_global_func("vm.builtin.kv_state_end_forward")
    view = tvm.get_global_func("vm.builtin.reshape")
    rng = np.random.default_rng(seed)
    nxt: Dict[int, int] = {}
    tokens_all: List[int] = []
    functions = vm_functions(fw, has_function(vm, "extend"))
    for (label, op, seqs, n), function in zip(fw, functions):
        if op in ("fork_sequence", "popn") and on_step:
            on_step(label)
        if bookkeeping(tvm, cache, op, seqs, n):
            if op == "fork_sequence" and seqs[1] in nxt:  # the child continues from the parent's next token
                nxt[seqs[0]] = nxt[seqs[1]]
            continue
        if on_step:
            on_step(label)
        if op == "prefill":
            tokens = rng.integers(0, vocab, size=n).astype("int32")
        elif all(s in nxt for s in seqs):
            tokens = np.array([nxt[s] for s in seqs], dtype="int32")
        else:
            raise ExportError(f"session: {label} decodes a sequence before any prefill", DATA_ERROR)
        tokens_all += [int(t) for t in tokens]
        e = vm["embed"](tvm.runtime.tensor(tokens, device=dev), packed)
        batch = op == "batch_decode"
        x = view(e, shape([e.shape[0], 1, e.shape[1]] if batch else [1, e.shape[0], e.shape[1]]))
        begin(cache, shape(seqs), shape([1] * len(seqs) if batch else [n]))
        logits, cache = vm[function](x, cache, packed)
        end(cache)
        out = logits.numpy()
        write_npy(folder, "output_" + label.replace(" ", "_") + ".npy", out)
        rows = out.reshape(len(seqs), -1) if batch else out.reshape(1, -1)
        for s, row in zip(seqs, rows):
            nxt[s] = int(np.argmax(row))
    write_npy(folder, tokens_file, np.array(tokens_all, dtype="int32"))
    return tokens_all


def add_note(folder: str, text: str) -> None:
    """`text` added to the notes of folder/build_info.json (once; written beside it, then renamed
    over it); nothing where the folder has no build_info.json."""
    path = os.path.join(folder, "build_info.json")
    if not os.path.isfile(path) or os.path.islink(path):
        return
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError) as e:
        raise ExportError(f"{path}: {e}", DATA_ERROR) from None
    if not isinstance(info, dict):
        raise ExportError(f"{path}: not a JSON object", DATA_ERROR)
    notes = info.setdefault("notes", [])
    if text in notes:
        return
    notes.append(text)
    tmp = os.path.join(folder, f".build_info.json.{os.getpid()}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(json.dumps(info, indent=1, sort_keys=False) + "\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_npy(folder: str, name: str, a: np.ndarray) -> None:
    """folder/name, replacing only a regular file: written beside it, then renamed over it."""
    path = os.path.join(folder, name)
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
        raise ExportError(f"{path}: exists and is not a regular file; not replaced", USAGE)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "xb") as f:
            np.save(f, a)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
