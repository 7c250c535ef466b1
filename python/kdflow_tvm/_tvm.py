"""What the exporter needs to know about the TVM it runs under: importing it, its release,
whether it has Relay or Relax, and the CUDA target with the C host it builds for."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Any, Optional, Tuple

from .errors import UNAVAILABLE, USAGE, ExportError

# Relay's graph executor: 0.8 - 0.19. Relax's VM: 0.20 on; tvm-ffi host ABI from 0.21, whose
# packed library kdflow and this package read from 0.22 (0.21's differs and has no release
# on PyPI). Newer releases are tried, and said to be untested.
RELAY_RANGE = ((0, 8), (0, 19))
RELAX_FIRST = (0, 20)
FFI_BLOB_FIRST = (0, 22)
NEWEST_TESTED = (0, 27)


def import_tvm() -> Any:
    """`tvm`, or one line saying how to get one."""
    if "tvm" in sys.modules:
        return sys.modules["tvm"]
    try:
        # A TVM built without some optional parts (MetaSchedule's C++ in ../shared/tvm) stops
        # at import unless tvm-ffi skips object types its library does not have.
        import tvm_ffi.registry as _reg  # type: ignore[import-not-found]
        if hasattr(_reg, "_SKIP_UNKNOWN_OBJECTS"):
            _reg._SKIP_UNKNOWN_OBJECTS = True
    except ImportError:
        pass
    try:
        import tvm  # type: ignore[import-not-found]
    except Exception as e:  # ImportError, or a library that fails to load
        raise ExportError(
            f"TVM is not importable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}): "
            "install it (pip install apache-tvm) or put your TVM build on PYTHONPATH", UNAVAILABLE) from e
    return tvm


def version_tuple(tvm: Any) -> Tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", str(getattr(tvm, "__version__", "")))
    if not m:
        raise ExportError(f"cannot tell this TVM's release from its version {getattr(tvm, '__version__', None)!r}",
                          UNAVAILABLE)
    return int(m.group(1)), int(m.group(2))


def has_relay(tvm: Any) -> bool:
    import importlib
    try:
        importlib.import_module("tvm.relay")
        return True
    except Exception:
        return False


def check_supported(tvm: Any) -> Tuple[int, int]:
    v = version_tuple(tvm)
    if v < RELAY_RANGE[0]:
        raise ExportError(f"TVM {tvm.__version__} is older than 0.8, the first release kdflow reads; "
                          "build with TVM 0.8 or newer", UNAVAILABLE)
    if v == (0, 21):
        raise ExportError("TVM 0.21's packed library layout is not supported by this exporter; "
                          "use 0.20, or 0.22 or newer", UNAVAILABLE)
    return v


def gpu_arch() -> Tuple[str, str]:
    """The CUDA architecture to build for when none is given: a present GPU's, else sm_90."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20, check=False).stdout
            cap = out.strip().splitlines()[0].strip() if out.strip() else ""
            if re.fullmatch(r"\d+\.\d+", cap):
                return "sm_" + cap.replace(".", ""), "the GPU present (nvidia-smi compute_cap " + cap + ")"
        except (OSError, subprocess.SubprocessError):
            pass
    return "sm_90", "no GPU present: the default sm_90 (Hopper); pass arch= to build for another"


def check_arch(arch: str) -> str:
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise ExportError(f"arch {arch!r} is not a CUDA architecture such as sm_90", USAGE)
    return arch


def check_cuda_target(target: Any) -> None:
    """The exporter builds for CUDA only: a target string or dict naming another kind is refused."""
    kind = None
    if isinstance(target, str):
        kind = target.split()[0] if target.split() else ""
        if kind.startswith("{"):
            kind = None
    elif isinstance(target, dict):
        kind = str(target.get("kind", ""))
    else:
        kind = str(getattr(getattr(target, "kind", None), "name", ""))
    if kind is not None and kind != "cuda":
        raise ExportError(f"target {kind!r} is not CUDA: kdflow reads CUDA builds; use target=\"cuda\"", USAGE)


def cuda_target(tvm: Any, v: Tuple[int, int], target: Any, arch: str) -> Any:
    """The user's CUDA target with the C host (the host code kdflow interprets), arch set."""
    check_cuda_target(target)
    attrs: dict = {}
    if isinstance(target, dict):
        attrs = {k: val for k, val in target.items() if k not in ("kind", "host")}
    elif not isinstance(target, str):
        # A tvm.target.Target: keep its attributes but its host.
        try:
            attrs = {str(k): val for k, val in dict(target.attrs).items()}
        except Exception:
            attrs = {}
        try:
            libs = list(target.libs)
            if libs:
                attrs["libs"] = libs
        except Exception:
            pass
    else:
        # "cuda -arch=sm_80 -libs=cublas": the options as attributes.
        for tok in target.split()[1:]:
            if tok.startswith("-") and "=" in tok:
                k, val = tok.lstrip("-").split("=", 1)
                attrs[k] = val.split(",") if k in ("libs", "keys", "mattr") else val
    attrs["arch"] = arch
    if v >= (0, 21):
        return tvm.target.Target({"kind": "cuda", **_json_attrs(attrs)}, host={"kind": "c"})
    opts = " ".join(f"-{k}={','.join(map(str, val)) if isinstance(val, list) else val}"
                    for k, val in attrs.items() if k not in ("keys",))
    return tvm.target.Target(f"cuda {opts}".strip(), host="c")


def _json_attrs(attrs: dict) -> dict:
    out = {}
    for k, val in attrs.items():
        if hasattr(val, "value"):
            val = val.value
        if isinstance(val, (list, tuple)):
            val = [str(x) for x in val]
        elif not isinstance(val, (int, float, bool, str)):
            val = str(val)
        out[k] = val
    return out


def host_kind(built: Any) -> Optional[str]:
    """The kind of a build's host module ("c", "llvm", ...), or None when it cannot be told."""
    for attr in ("mod", "module", "lib"):
        m = getattr(built, attr, None)
        if m is not None and not callable(m):
            built = m
            break
    get_lib = getattr(built, "get_lib", None)
    if callable(get_lib):
        built = get_lib()
    return module_kind(built)


def module_kind(m: Any) -> Optional[str]:
    for attr in ("kind", "type_key"):
        try:
            k = getattr(m, attr)
            return str(k() if callable(k) else k)
        except Exception:
            continue
    return None


def imports_of(m: Any) -> list:
    for attr in ("imports", "imported_modules"):
        try:
            v = getattr(m, attr)
            return list(v() if callable(v) else v)
        except Exception:
            continue
    return []


def source_of(m: Any, fmt: str = "") -> str:
    for name in ("inspect_source", "get_source"):
        f = getattr(m, name, None)
        if callable(f):
            try:
                return str(f(fmt))
            except Exception:
                continue
    return ""


def nvcc() -> Optional[str]:
    p = shutil.which("nvcc")
    if p:
        return p
    for d in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
        if d and os.access(os.path.join(d, "bin", "nvcc"), os.X_OK):
            return os.path.join(d, "bin", "nvcc")
    return None
