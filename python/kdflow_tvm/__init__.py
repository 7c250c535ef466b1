"""kdflow_tvm: turn a TVM model into the folder kdflow reads, in one call.

    import kdflow_tvm
    ex = kdflow_tvm.build(mod, target="cuda", out="my_model", params=weights, inputs=True)
    # then: kdflow show my_model; kdflow replay my_model --backend cpu

`build` compiles a Relay (TVM 0.8 - 0.19) or Relax (TVM 0.20+) module for CUDA with the C host,
writes every file kdflow's readers take (model.so included, known TVM defects worked around and
said so in build_info.json), the inputs, TVM's own outputs on the CPU for those inputs
(output_<i>.npy) and the result of every node (reference/nodes.json, docs/schema.md), and
returns what TVM's build returned. `export` writes the same files from a build already made
with the C host. A tensor-parallel (TVM disco) model is built once for every rank, with one
params dict per rank (params_shard<r>.bin) and references from the unsharded model. Needs only
the user's TVM and numpy; no GPU.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _folder, _relax, _relay, _session, _shards, _tvm
from .errors import DATA_ERROR, USAGE, ExportError

__all__ = ["build", "export", "llm_session", "ExportError", "__version__"]
__version__ = "1.0"

ArrayLike = Any
Params = Union[None, Mapping[str, ArrayLike], Sequence[Tuple[str, ArrayLike]]]
#: One params dict, or one per rank of a sharded (tensor-parallel) build.
ParamsOrShards = Union[Params, Sequence[Mapping[str, ArrayLike]]]
#: reference=: True or False, or (the unsharded module, its full params) for a sharded build.
Reference = Union[bool, Tuple[Any, Params]]


def _log(quiet: bool, msg: str) -> None:
    if not quiet:
        print(f"kdflow_tvm: {msg}", file=sys.stderr, flush=True)


def _params(params: Params) -> Dict[str, np.ndarray]:
    if params is None:
        return {}
    items = params.items() if isinstance(params, Mapping) else params
    out: Dict[str, np.ndarray] = {}
    for k, val in items:
        if hasattr(val, "data") and not isinstance(val, np.ndarray) and hasattr(val.data, "numpy"):
            val = val.data  # a tvm.relax.frontend.nn.Parameter with data
        a = _folder.as_numpy(val)
        if a.dtype == object:
            raise ExportError(f"param {k!r} has no data (an nn.Parameter never given values?): pass arrays", USAGE)
        out[str(k)] = a
    return out


def _resolve_inputs(sigs: Sequence[Tuple[str, Sequence[Any], str]], inputs: Any, seed: int) -> Dict[str, np.ndarray]:
    """The arrays to write as input_<name>.npy: given, or random of each input's shape."""
    names = [s[0] for s in sigs]
    if isinstance(inputs, Mapping):
        out = {}
        for k, val in inputs.items():
            if k not in names:
                raise ExportError(f"inputs names {k!r}, which is not an input of the model (its inputs: "
                                  f"{', '.join(names) or 'none'})", USAGE)
            out[k] = _folder.as_numpy(val)
        missing = [n for n in names if n not in out]
        if missing:
            raise ExportError(f"inputs lacks {', '.join(missing)}: give every input, or inputs=True for random ones",
                              USAGE)
        for name, dims, dtype in sigs:
            a = out[name]
            if len(a.shape) != len(dims) or any(isinstance(d, int) and d != s for d, s in zip(dims, a.shape)):
                raise ExportError(f"input {name!r}: array of shape {tuple(a.shape)}, the model wants "
                                  f"({', '.join(map(str, dims))})", USAGE)
            if str(a.dtype) != dtype:
                out[name] = a.astype(dtype)
        return out
    rng = np.random.default_rng(seed)
    out = {}
    for name, dims, dtype in sigs:
        sym = [d for d in dims if not isinstance(d, int)]
        if sym:
            raise ExportError(f"input {name!r} has symbolic shape ({', '.join(map(str, dims))}): pass "
                              f"inputs={{{name!r}: array}} to say its size", USAGE)
        out[name] = _folder.random_array(dims, dtype, rng)
    return out


def _shards_of(params: ParamsOrShards) -> Optional[List[Dict[str, np.ndarray]]]:
    """Each rank's params, where `params` is a list of dicts (a sharded build); else None."""
    if not _shards.is_sharded(params):
        return None
    assert isinstance(params, (list, tuple))
    shards = [_params(p) for p in params]
    _shards.check_shards(shards)
    return shards


def _reference_model(reference: Reference, sharded: bool) -> Tuple[bool, Optional[Tuple[Any, Dict[str, np.ndarray]]]]:
    """(whether to write references, the unsharded (module, params) they come from)."""
    if isinstance(reference, bool):
        return reference, None
    if not (isinstance(reference, tuple) and len(reference) == 2):
        raise ExportError("reference: True, False, or (unsharded_mod, full_params) for a sharded build", USAGE)
    if not sharded:
        raise ExportError("reference=(model, params) is for a sharded build (params=[rank0_params, ...]); a single "
                          "GPU's build runs its own module for the references", USAGE)
    return True, (reference[0], _params(reference[1]))


def build(mod: Any, target: Any = "cuda", out: Optional[str] = None, params: ParamsOrShards = None,
          inputs: Any = None, reference: Reference = True, arch: Optional[str] = None,
          exec_mode: str = "bytecode", *, function: str = "main", force: bool = False,
          seed: int = 42, quiet: bool = False) -> Any:
    """Build `mod` for CUDA with the C host and write `out` as kdflow reads it.

    mod: a Relay IRModule (TVM 0.8 - 0.19) or a Relax IRModule (TVM 0.20+).
    params: weights by name (dict or (name, array) pairs): bound as constants (Relax) or passed
        to relay.build (Relay). A list of dicts, one per rank, is a sharded (tensor-parallel,
        TVM disco) Relax build: the module, built once for every rank, takes its weights as one
        packed tuple (nn.Module's param_mode "packed"); rank r's dict (the same names, shapes
        and dtypes on every rank, in the tuple's order) is written as params_shard<r>.bin.
    inputs: a dict of arrays by input name, or True for random ones (seed `seed`); with
        reference=True and no inputs, random ones are made. A sharded build's ranks all take
        the same inputs.
    reference: also build for the CPU and run with TVM: output_<i>.npy, and reference/ with
        every node's result (nodes.json), which kdflow replay compares node by node. A sharded
        build's collectives need NCCL, so TVM's CPU VM cannot run it: give (unsharded_mod,
        full_params), whose outputs for the same inputs become output_<i>.npy (no node
        references: the unsharded model's intermediate results have other shapes).
    arch: CUDA architecture (sm_90, ...): default the present GPU's, else sm_90.
    exec_mode: Relax only, "bytecode" or "compiled".
    function: the Relax function run for the references (a module without it gets none).
    force: replace a folder that is not empty.
    Returns what TVM's build returned (a relax executable or Relay's factory module).
    """
    if out is None:
        raise ExportError("out: name the folder to write", USAGE)
    tvm = _tvm.import_tvm()
    v = _tvm.check_supported(tvm)
    arch_given = arch is not None
    if arch is None:
        arch, arch_source = _tvm.gpu_arch()
    else:
        arch_source = "given"
    _tvm.check_arch(arch)
    shards = _shards_of(params)
    p = _params(params) if shards is None else {}
    reference, ref_model = _reference_model(reference, shards is not None)
    if _relax.is_relax_module(tvm, mod):
        frontend = "relax"
    elif _relay.is_relay_module(tvm, mod):
        frontend = "relay"
        if v >= _tvm.RELAX_FIRST and not _tvm.has_relay(tvm):
            raise ExportError("a Relay module needs TVM 0.8 - 0.19; this TVM has no Relay", DATA_ERROR)
    else:
        raise ExportError("mod is neither a Relay nor a Relax IRModule", USAGE)
    if shards is not None and frontend != "relax":
        raise ExportError("a sharded build (params=[rank0_params, ...]) is a Relax model (TVM 0.20+): Relay has no "
                          "collectives", USAGE)
    tgt = _tvm.cuda_target(tvm, v, target, arch)
    st = _folder.Staging(out, force)  # refuses a non-empty folder before any build work
    info: Dict[str, Any] = {
        "producer": f"kdflow_tvm {__version__}", "tvm": str(tvm.__version__), "frontend": frontend,
        "target": str(tgt), "host": "c", "arch": arch, "arch_source": arch_source if not arch_given else "given",
    }
    if frontend == "relax":
        bmod, bound = _relax.bind_params(tvm, mod, p)
        bmod, renamed = _relax.identifier_params(tvm, bmod)
        if renamed:
            info["renamed_params"] = renamed
            info.setdefault("notes", []).append(
                "parameters renamed for TVM's code generators, which print names as C identifiers as they are "
                "(a '/', space or non-ASCII letter in a name gives code no compiler takes): " +
                "; ".join(f"{fn}: " + ", ".join(f"{a!r} -> {b!r}" for a, b in m.items()) for fn, m in renamed.items()))
            if isinstance(inputs, Mapping):  # given by the model's names
                inputs = {renamed.get(function, {}).get(k, k): a for k, a in inputs.items()}
        weights = _relax.unbound_weights(tvm, bmod, function)
        rmod = None
        if shards is not None:
            _shards.check_packed(tvm, bmod, function, list(shards[0]))
            if ref_model is not None:
                rmod = _relax.identifier_params(tvm, ref_model[0])[0]
                _shards.check_same_inputs(tvm, bmod, rmod, function)
        elif weights and reference:
            raise ExportError(f"function {function!r} takes weights {', '.join(weights[:4])}"
                              f"{' ...' if len(weights) > 4 else ''} that params does not give: pass params="
                              "{name: array} (or reference=False)", USAGE)
        info.update({"exec_mode": exec_mode, "params_bound": bound,
                     "functions": _relax_signatures(tvm, bmod)})
        _log(quiet, f"building for CUDA ({arch}, host c, {exec_mode}) with TVM {tvm.__version__}")
        ex = _relax.build(tvm, v, bmod, tgt, exec_mode)
        sigs = [(n, *(_relax._tensor_sig(tvm, s) or ([], "?"))) for n, s in _relax.main_inputs(tvm, bmod, function)]
        has_fn = function in _relax.relax_functions(tvm, bmod)
        with st:
            _relax.write_files(tvm, v, ex, st, info)
            if shards is not None:
                _shards.write_shard_params(tvm, shards, st, info)
            elif p and not bound:
                _write_params(tvm, p, st, info)
            arrays = _write_inputs(sigs, inputs, reference and has_fn, seed, st, info)
            back = {b: a for a, b in renamed.get(function, {}).items()}
            for i in info.get("inputs", []):
                if i["name"] in back:
                    i["model_name"] = back[i["name"]]
            if shards is not None and reference:
                if ref_model is not None and rmod is not None:
                    _log(quiet, "running the unsharded model on TVM's CPU VM (llvm) for the reference outputs")
                    info["reference"] = _shards.reference(tvm, rmod, ref_model[1], function,
                                                          [arrays[s[0]] for s in sigs], st, len(shards))
                    _shards.note(info, _shards.NO_NODE_REFERENCES)
                else:
                    _shards.note(info, "no reference: a sharded build's collectives need NCCL, which TVM's CPU VM "
                                       "has not; pass reference=(unsharded_mod, full_params)")
            elif reference and has_fn:
                _log(quiet, "running TVM on the CPU (llvm) for the reference outputs and every call's result")
                info["reference"] = _relax.reference(tvm, bmod, function, [arrays[s[0]] for s in sigs], st, tgt)
            elif reference:
                info.setdefault("notes", []).append(
                    f"no reference: the module has no function {function!r} (pass function=)")
            st.write_json("build_info.json", info)
        _log(quiet, f"wrote {out}")
        return ex
    # Relay
    _log(quiet, f"building for CUDA ({arch}, host c) with TVM {tvm.__version__} (Relay)")
    lib = _relay.build(tvm, mod, tgt, p or None, info=info)
    sigs = _relay.main_inputs(tvm, mod, p)
    with st:
        _relay.write_files(tvm, lib, st, info)
        arrays = _write_inputs(sigs, inputs, reference, seed, st, info)
        if reference:
            _log(quiet, "running TVM on the CPU (llvm) for the reference outputs and every node's result")
            info["reference"] = _relay.reference(tvm, mod, p, arrays, lib, st)
        st.write_json("build_info.json", info)
    _log(quiet, f"wrote {out}")
    return lib


def export(built: Any, out: str, *, inputs: Optional[Mapping[str, ArrayLike]] = None,
           params: ParamsOrShards = None, force: bool = False, arch: Optional[str] = None,
           quiet: bool = False) -> None:
    """Write `out` from a build the user already made with the C host (a Relax executable from
    relax.build/tvm.compile, or Relay's factory module from relay.build). No references (the
    model itself is not at hand): pass the module to `build` for those. `params` as `build`
    takes them: a list of dicts, one per rank, for a sharded build (params_shard<r>.bin)."""
    tvm = _tvm.import_tvm()
    v = _tvm.check_supported(tvm)
    info: Dict[str, Any] = {"producer": f"kdflow_tvm {__version__}", "tvm": str(tvm.__version__), "host": "c",
                            "exported_from": "a build made by the caller"}
    if arch:
        info["arch"] = _tvm.check_arch(arch)
    shards = _shards_of(params)
    p = _params(params) if shards is None else {}
    if hasattr(built, "get_graph_json"):
        if shards is not None:
            raise ExportError("a sharded build (params=[rank0_params, ...]) is a Relax build: Relay has no "
                              "collectives", USAGE)
        info["frontend"] = "relay"
        _relay.check_c_host(built)
        with _folder.Staging(out, force) as st:
            _relay.write_files(tvm, built, st, info)
            _write_given_inputs(inputs, st, info)
            st.write_json("build_info.json", info)
    else:
        info["frontend"] = "relax"
        _relax.check_c_host(built)
        with _folder.Staging(out, force) as st:
            _relax.write_files(tvm, v, built, st, info)
            if shards is not None:
                _shards.write_shard_params(tvm, shards, st, info)
            elif p:
                _write_params(tvm, p, st, info)
            _write_given_inputs(inputs, st, info)
            st.write_json("build_info.json", info)
    _log(quiet, f"wrote {out}")


def _relax_signatures(tvm: Any, mod: Any) -> Dict[str, Any]:
    out = {}
    for name, f in _relax.relax_functions(tvm, mod).items():
        out[name] = {"params": [{"name": _relax.var_name(q), "type": str(_relax.var_type(q))} for q in f.params],
                     "num_input": _relax._num_input(f)}
    return out


def _write_params(tvm: Any, p: Dict[str, np.ndarray], st: _folder.Staging, info: Dict[str, Any]) -> None:
    """Weights not bound into the executable (packed params of an LLM build): params.bin by name."""
    save = getattr(tvm.runtime, "save_param_dict", None)
    if save is None:
        info.setdefault("notes", []).append("params not written: this TVM has no runtime.save_param_dict")
        return
    st.write_bytes("params.bin", bytes(save({k: _relax.to_tvm(tvm, a) for k, a in p.items()})))
    info["params_file"] = {"file": "params.bin", "names": sorted(p)}


def _write_inputs(sigs: Sequence[Tuple[str, Sequence[Any], str]], inputs: Any, need: bool, seed: int,
                  st: _folder.Staging, info: Dict[str, Any]) -> Dict[str, np.ndarray]:
    if inputs is None and not need:
        return {}
    if inputs is None or inputs is False:
        inputs = True
        info["inputs_random"] = f"numpy default_rng({seed}): standard normal floats, integers in [0, 2)"
    elif inputs is True:
        info["inputs_random"] = f"numpy default_rng({seed}): standard normal floats, integers in [0, 2)"
    arrays = _resolve_inputs(sigs, inputs, seed)
    for name, a in arrays.items():
        st.write_npy(_folder.input_file(name), a)
    info["inputs"] = [{"name": n, "file": _folder.input_file(n), "dtype": str(arrays[n].dtype),
                       "shape": list(arrays[n].shape)} for n, _, _ in sigs]
    return arrays


def _write_given_inputs(inputs: Optional[Mapping[str, ArrayLike]], st: _folder.Staging, info: Dict[str, Any]) -> None:
    if not inputs:
        return
    info["inputs"] = []
    for name, val in inputs.items():
        a = _folder.as_numpy(val)
        st.write_npy(_folder.input_file(str(name)), a)
        info["inputs"].append({"name": str(name), "file": _folder.input_file(str(name)), "dtype": str(a.dtype),
                               "shape": list(a.shape)})


def llm_session(make: Callable[[], Tuple[Any, Mapping[str, ArrayLike]]], out: str,
                session: Union[str, Mapping[str, Any]] = "prefill:7,decode:2", *, seed: int = 11,
                tokens_file: str = "input_ids.npy", quiet: bool = False,
                reference_make: Optional[Callable[[], Tuple[Any, Mapping[str, ArrayLike]]]] = None) -> List[int]:
    """TVM's own run of an LLM session, for `kdflow replay DIR --session SESSION` to compare with.

    make: returns (IRModule, params in the packed tuple's order) of the model with TVM's paged
        KV cache (embed, prefill, decode, create_tir_paged_kv_cache, as TVM's LLM tutorial
        builds it). It is called under the llvm target: the KV cache's kernels are chosen by
        the current target, so the module is made again for the CPU.
    out: the folder `build`/`export` wrote for the CUDA build; input_ids.npy (every forward's
        tokens, in order: prefill tokens at random with `seed`, decode tokens greedy) and
        output_<step>.npy (TVM's logits of each forward: output_prefill.npy,
        output_decode_0.npy, ...) are written into it.
    session: as `kdflow --session` takes it ("prefill:N,decode:M[,...]", a session file or
        its content).
    reference_make: for a sharded (tensor-parallel) model, whose collectives TVM's CPU VM
        cannot run: returns (IRModule, full params in the packed tuple's order) of the same
        model unsharded, which runs the session instead (`make`'s module is only compared with
        it: the same functions with the same inputs); build_info.json says so.
    Returns the tokens."""
    tvm = _tvm.import_tvm()
    _tvm.check_supported(tvm)
    if not out or not os.path.isdir(out):
        raise ExportError(f"{out}: not a folder (write the CUDA build there first: build or export)", USAGE)
    spec = _session.parse(session)
    target = tvm.target.Target("llvm")
    _log(quiet, f"building the session's model for the CPU (llvm) with TVM {tvm.__version__}")
    with target:
        if reference_make is not None:
            sharded, _ = make()
            mod, params = reference_make()
            _shards.same_functions(tvm, sharded, mod)
        else:
            mod, params = make()
        ex = tvm.compile(mod, target)
    _log(quiet, f"running {len([f for f in _session.forwards(spec) if f[1] in ('prefill', 'decode', 'batch_decode')])} forwards "
                "on TVM's VM")
    tokens = _session.run(tvm, ex, _params(params), spec, out, tokens_file=tokens_file, seed=seed)
    if reference_make is not None:
        _session.add_note(out, f"session references ({tokens_file}, output_<step>.npy): TVM's run of the unsharded "
                               "model (llm_session's reference_make) with the full weights on the CPU; every rank's "
                               "logits are compared with these")
    return tokens
