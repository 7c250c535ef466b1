"""Sharded (tensor-parallel, TVM disco) Relax builds: one executable every rank runs, each on its
own slice of the weights (params_shard<r>.bin), with collectives (runtime.disco.allreduce, ...)
between them. The weights must be one packed tuple (nn.Module's param_mode "packed"), bound by
position as kdflow binds an LLM's params.bin. The collectives need NCCL, so TVM's CPU VM cannot
run the sharded module: the references are the unsharded model's outputs, run here on the CPU."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _relax
from ._folder import Staging
from .errors import DATA_ERROR, USAGE, ExportError

NO_NODE_REFERENCES = ("sharded build: no node references (reference/nodes.json): the references come from the "
                      "unsharded model, whose intermediate results have other shapes than any rank's")


def is_sharded(params: Any) -> bool:
    """A list (or tuple) of per-rank param dicts, rather than one dict or (name, array) pairs."""
    return isinstance(params, (list, tuple)) and len(params) > 0 and all(isinstance(p, Mapping) for p in params)


def check_shards(shards: Sequence[Dict[str, np.ndarray]]) -> List[str]:
    """The names every rank's dict holds, in order: the same names in the same order (the packed
    tuple's), and each name of one shape and dtype on every rank (an even split)."""
    if not shards:
        raise ExportError("params: an empty list of shards; give one dict of arrays per rank", USAGE)
    names = list(shards[0])
    if not names:
        raise ExportError("params: shard 0 holds no arrays; give each rank's weights", USAGE)
    for r, p in enumerate(shards[1:], 1):
        if list(p) != names:
            extra = sorted(set(p) - set(names))
            missing = sorted(set(names) - set(p))
            what = (f"lacks {', '.join(missing[:3])}" if missing else
                    f"has {', '.join(extra[:3])} that shard 0 has not" if extra else "orders them otherwise")
            raise ExportError(f"params: shard {r} {what}: every rank's dict names the same weights in the same "
                              "(the packed tuple's) order", USAGE)
        for n in names:
            a, b = shards[0][n], p[n]
            if a.shape != b.shape or a.dtype != b.dtype:
                raise ExportError(f"params: {n!r} is {b.dtype}{list(b.shape)} on rank {r} and {a.dtype}"
                                  f"{list(a.shape)} on rank 0: each rank's slice of a weight has one shape and "
                                  "dtype (an even split)", USAGE)
    return names


def packed_count(tvm: Any, mod: Any, function: str) -> Optional[int]:
    """How many tensors `function`'s packed params tuple holds: its one parameter after
    `num_input`, a tuple; None when the function has no such parameter."""
    weights = _weight_params(tvm, mod, function)
    if len(weights) != 1:
        return None
    t = _relax.var_type(weights[0])
    fields = getattr(t, "fields", None)
    if t is None or "Tuple" not in type(t).__name__ or fields is None:
        return None
    return len(fields)


def _weight_params(tvm: Any, mod: Any, function: str) -> List[Any]:
    f = _relax.relax_functions(tvm, mod).get(function)
    if f is None:
        return []
    n = _relax._num_input(f)
    return list(f.params)[n:] if n is not None else []


def check_packed(tvm: Any, mod: Any, function: str, names: Sequence[str]) -> None:
    """The module takes the shards' weights as one packed tuple of as many tensors."""
    fns = _relax.relax_functions(tvm, mod)
    if function not in fns:
        raise ExportError(f"a sharded build runs {function!r} for its references, which the module has not "
                          f"(its functions: {', '.join(fns) or 'none'}); pass function=", USAGE)
    n = packed_count(tvm, mod, function)
    if n is None:
        raise ExportError(f"a sharded build keeps its weights out of the executable, as one packed tuple: export "
                          f"{function!r} with param_mode \"packed\" (nn.Module.export_tvm spec {{\"$\": "
                          "{\"param_mode\": \"packed\"}}), so that each rank's params bind by position", USAGE)
    if n != len(names):
        raise ExportError(f"{function!r} takes a packed tuple of {n} tensors; each shard holds {len(names)}", USAGE)


def write_shard_params(tvm: Any, shards: Sequence[Dict[str, np.ndarray]], st: Staging,
                       info: Dict[str, Any]) -> None:
    """params_shard<r>.bin for each rank (TVM's params format, as params.bin holds a single
    GPU's: the packed params by name, in the tuple's order), and no params.bin."""
    save = getattr(tvm.runtime, "save_param_dict", None)
    if save is None:
        raise ExportError("a sharded build writes params_shard<r>.bin with tvm.runtime.save_param_dict, which this "
                          "TVM has not", DATA_ERROR)
    files = []
    for r, p in enumerate(shards):
        name = f"params_shard{r}.bin"
        st.write_bytes(name, bytes(save({k: _relax.to_tvm(tvm, a) for k, a in p.items()})))
        files.append(name)
    info["shards"] = len(shards)
    info["params_shards"] = {"files": files, "names": list(shards[0])}


def _signature(tvm: Any, mod: Any, function: str) -> List[Tuple[str, Any]]:
    return [(n, _relax._tensor_sig(tvm, s)) for n, s in _relax.main_inputs(tvm, mod, function)]


def check_same_inputs(tvm: Any, sharded: Any, unsharded: Any, function: str) -> None:
    """The unsharded model takes the inputs the sharded one takes (names, shapes, dtypes): the
    same arrays are fed to both."""
    a, b = _signature(tvm, sharded, function), _signature(tvm, unsharded, function)
    if a != b:
        raise ExportError(f"the reference model's {function!r} takes inputs {_fmt(b)}, the sharded one {_fmt(a)}: "
                          "the unsharded model takes the same inputs", USAGE)


def _fmt(sig: List[Tuple[str, Any]]) -> str:
    return "(" + ", ".join(f"{n}: {s[1]}{s[0]}" if s else n for n, s in sig) + ")"


def unsharded_args(tvm: Any, mod: Any, params: Dict[str, np.ndarray], function: str) -> Tuple[Any, List[Any]]:
    """The unsharded module with the weights it names bound, and the extra arguments its
    `function` takes after the inputs (the packed tuple, in `params`' order, where it has one)."""
    bmod, bound = _relax.bind_params(tvm, mod, params)
    rest = {k: a for k, a in params.items() if k not in bound}
    if not _weight_params(tvm, bmod, function):
        if rest:
            raise ExportError(f"the reference params name {', '.join(sorted(rest)[:3])}, which {function!r} of the "
                              "reference model does not take", USAGE)
        return bmod, []
    n = packed_count(tvm, bmod, function)
    if n is None or n != len(rest):
        raise ExportError(f"the reference model's {function!r} takes weights that its params do not give "
                          f"({len(rest)} arrays for {n if n is not None else 'unpacked'} weights): give the full "
                          "weights, in the packed tuple's order", USAGE)
    return bmod, [[_relax.to_tvm(tvm, a) for a in rest.values()]]


def reference(tvm: Any, mod: Any, params: Dict[str, np.ndarray], function: str, inputs: Sequence[np.ndarray],
              st: Staging, ranks: int) -> Dict[str, Any]:
    """Runs the unsharded `mod` with its full `params` on TVM's VM on the CPU with the sharded
    build's inputs and writes its outputs as output_<i>.npy (every rank's result, for a
    tensor-parallel model that ends replicated)."""
    bmod, extra = unsharded_args(tvm, mod, params, function)
    ex = tvm.relax.build(bmod, tvm.target.Target("llvm"), exec_mode="bytecode")
    VM = getattr(tvm.relax, "VirtualMachine", None) or tvm.runtime.vm.VirtualMachine
    vm = VM(ex, tvm.cpu())
    res = vm[function](*[_relax.to_tvm(tvm, a) for a in inputs], *extra)
    outputs = _relax.flatten_outputs(res)
    for i, o in enumerate(outputs):
        st.write_npy(f"output_{i}.npy", o)
    return {"outputs": len(outputs), "nodes": 0, "node_tensors": 0,
            "from": f"the unsharded model ({function}) with the full weights, on TVM's CPU VM (llvm); the "
                    f"{ranks} ranks' outputs are each compared with these"}


def same_functions(tvm: Any, sharded: Any, unsharded: Any) -> None:
    """An LLM's sharded and unsharded modules: the same VM functions, each with the same inputs
    (the packed params aside), so a session of one is a session of the other."""
    a, b = _relax.relax_functions(tvm, sharded), _relax.relax_functions(tvm, unsharded)
    if sorted(a) != sorted(b):
        raise ExportError(f"reference_make's module has functions {', '.join(sorted(b))}, the sharded one "
                          f"{', '.join(sorted(a))}: the unsharded model has the same functions", USAGE)
    for name in a:
        if _relax._num_input(a[name]) is None:
            continue
        check_same_inputs(tvm, sharded, unsharded, name)


def note(info: Dict[str, Any], text: str) -> None:
    info.setdefault("notes", []).append(text)
