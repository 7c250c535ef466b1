"""ONNX files: imported with Relax's importer (TVM 0.20+) or Relay's (0.8 - 0.19), every input
shape known (given with --shape where the file leaves it symbolic)."""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Sequence, Tuple

from . import _folder, _tvm
from .errors import NO_INPUT, UNAVAILABLE, USAGE, DATA_ERROR, ExportError


def parse_shape(text: str) -> Tuple[str, List[int]]:
    """NAME=1x3x224x224 (a scalar: NAME=)."""
    m = re.fullmatch(r"(.+)=((?:\d+(?:x\d+)*)?)", text)
    if not m:
        raise ExportError(f"--shape {text!r}: write NAME=1x3x224x224", USAGE)
    dims = [int(d) for d in m.group(2).split("x")] if m.group(2) else []
    return m.group(1), dims


_ONNX_NP = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
            9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


def _decoded(name: str) -> str:
    try:
        return _folder.decode_name(name)
    except ExportError:
        return name


def load(path: str, shapes: Dict[str, List[int]]) -> Tuple[Any, Dict[str, List[int]], Dict[str, str]]:
    """The model, every graph input's shape and dtype (initialisers are not inputs)."""
    if not os.path.isfile(path):
        raise ExportError(f"{path}: no such file", NO_INPUT)
    try:
        import onnx  # type: ignore[import-not-found]
    except ImportError as e:
        raise ExportError("onnx is not importable: pip install onnx (1.13 or newer)", UNAVAILABLE) from e
    try:
        model = onnx.load(path)
    except Exception as e:
        raise ExportError(f"{path}: not an ONNX model ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
                          DATA_ERROR) from e
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    # A name as the file names it (gpu_0%2Fdata_0) stands for the name itself.
    shapes = {(n if n in names or "%" not in n else _decoded(n)): d for n, d in shapes.items()}
    unknown = [n for n in shapes if n not in names]
    if unknown:
        raise ExportError(f"--shape names {unknown[0]!r}, which is not an input of {path} "
                          f"(its inputs: {', '.join(names) or 'none'})", USAGE)
    out_shapes: Dict[str, List[int]] = {}
    dtypes: Dict[str, str] = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        dtypes[i.name] = _ONNX_NP.get(tt.elem_type, "float32")
        if i.name in shapes:
            out_shapes[i.name] = shapes[i.name]
            continue
        dims = []
        for d in tt.shape.dim:
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(int(d.dim_value))
            else:
                sym = d.dim_param or "?"
                raise ExportError(f"{path}: input {i.name!r} has a symbolic dimension {sym!r}; give its shape with "
                                  f"--shape {i.name}=" + "x".join(str(x.dim_value) if x.dim_value > 0 else "N"
                                                                for x in tt.shape.dim), USAGE)
        out_shapes[i.name] = dims
    return model, out_shapes, dtypes


def to_ir(tvm: Any, model: Any, shapes: Dict[str, List[int]], dtypes: Dict[str, str]) -> Tuple[Any, Dict[str, Any]]:
    """(IRModule, params): Relax's importer where TVM has Relax, else Relay's."""
    v = _tvm.version_tuple(tvm)
    if v >= _tvm.RELAX_FIRST:
        from tvm.relax.frontend.onnx import from_onnx  # type: ignore[import-not-found]
        try:
            mod = from_onnx(model, shape_dict=shapes, dtype_dict=dtypes)
        except Exception as e:
            raise ExportError(f"TVM's ONNX importer failed: {type(e).__name__}: "
                              f"{(str(e).strip().splitlines() or [''])[-1][:300]}", DATA_ERROR) from e
        # Inference form of training-only ops (batch norm, dropout), as TVM's tutorials do.
        try:
            mod = tvm.relax.transform.DecomposeOpsForInference()(mod)
        except Exception:
            pass
        return mod, {}
    from tvm import relay  # type: ignore[import-not-found]
    try:
        mod, params = relay.frontend.from_onnx(model, shape=shapes, dtype=dtypes, freeze_params=True)
    except TypeError:
        mod, params = relay.frontend.from_onnx(model, shape=shapes, dtype=dtypes)
    except Exception as e:
        raise ExportError(f"TVM's ONNX importer failed: {type(e).__name__}: "
                          f"{(str(e).strip().splitlines() or [''])[-1][:300]}", DATA_ERROR) from e
    return mod, {k: v for k, v in params.items()}


def input_names(shapes: Dict[str, Sequence[int]]) -> List[str]:
    return list(shapes)
