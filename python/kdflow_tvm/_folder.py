"""The output folder: made whole in a staging folder beside it and renamed into place, so that an
export that fails leaves nothing behind and a folder that holds anything is never overwritten
unless the caller says force."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any, Dict, List, Optional

import numpy as np

from .errors import CANT_CREATE, USAGE, ExportError


class Staging:
    """with Staging(out, force) as s: write into s.path; on success it becomes `out`."""

    def __init__(self, out: str, force: bool = False) -> None:
        self.out = os.path.abspath(os.fspath(out))
        self.force = force
        self.path = ""
        if os.path.lexists(self.out):
            if os.path.islink(self.out) or not os.path.isdir(self.out):
                raise ExportError(f"{out}: exists and is not a folder; name a new or empty folder",
                                  CANT_CREATE)
            if os.listdir(self.out) and not force:
                raise ExportError(f"{out}: folder is not empty; name a new or empty folder, "
                                  "or pass force=True (--force) to replace it", CANT_CREATE)

    def __enter__(self) -> "Staging":
        parent = os.path.dirname(self.out)
        try:
            os.makedirs(parent, exist_ok=True)
            self.path = tempfile.mkdtemp(prefix="." + os.path.basename(self.out) + ".", dir=parent)
        except OSError as e:
            raise ExportError(f"{self.out}: cannot create the output folder ({e.strerror})", CANT_CREATE) from e
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        try:
            if os.path.isdir(self.out):
                # Empty, or force: the old folder goes only once the new one is complete.
                old = tempfile.mkdtemp(prefix="." + os.path.basename(self.out) + ".old.",
                                       dir=os.path.dirname(self.out))
                os.rmdir(old)
                os.rename(self.out, old)
                os.rename(self.path, self.out)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(self.path, self.out)
            os.chmod(self.out, 0o755)
        except OSError as e:
            shutil.rmtree(self.path, ignore_errors=True)
            raise ExportError(f"{self.out}: cannot move the finished export into place ({e.strerror})",
                              CANT_CREATE) from e

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def write_text(self, name: str, text: str) -> None:
        os.makedirs(os.path.dirname(self.file(name)), exist_ok=True)
        with open(self.file(name), "w", encoding="utf-8") as f:
            f.write(text)

    def write_bytes(self, name: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(self.file(name)), exist_ok=True)
        with open(self.file(name), "wb") as f:
            f.write(data)

    def write_json(self, name: str, obj: Any) -> None:
        self.write_text(name, json.dumps(obj, indent=1, sort_keys=False) + "\n")

    def write_npy(self, name: str, a: np.ndarray) -> None:
        os.makedirs(os.path.dirname(self.file(name)), exist_ok=True)
        np.save(self.file(name), np.ascontiguousarray(a).reshape(np.shape(a)), allow_pickle=False)


def write_model_so(built: Any, st: Staging, info: Dict[str, Any], includes: Any) -> None:
    """model.so through TVM's own export_library, each (file name, text, why) of `includes`
    written beside it and forced in (-include), and said in build_info's workarounds. A failure
    is a note, not an error: kdflow reads the folder without model.so."""
    options: List[str] = []
    for name, text, why in includes:
        st.write_text(name, text)
        options += ["-include", st.file(name)]
        info.setdefault("workarounds", []).append(f"model.so: {name} forced in ({why})")
    try:
        if options:
            built.export_library(st.file("model.so"), options=options)
        else:
            built.export_library(st.file("model.so"))
        info["model_so"] = "model.so"
    except Exception as e:
        msg = str(e).strip().splitlines()
        info["model_so"] = None
        info.setdefault("notes", []).append(
            "model.so: export_library failed (" + (msg[-1][:300] if msg else type(e).__name__) +
            "); kdflow reads the folder without it")
        if os.path.exists(st.file("model.so")):
            os.remove(st.file("model.so"))


_KEPT = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def encode_name(name: str) -> str:
    """A tensor name as a file-name part, reversibly (docs/schema.md, "Names in file names"):
    the bytes [A-Za-z0-9._-] of its UTF-8 kept, every other byte %XX (upper-case hex)."""
    return "".join(chr(b) if b in _KEPT else f"%{b:02X}" for b in name.encode("utf-8"))


def decode_name(part: str) -> str:
    """The inverse of encode_name."""
    out = bytearray()
    i = 0
    raw = part.encode("utf-8")
    while i < len(raw):
        if raw[i] == ord("%"):
            hx = raw[i + 1:i + 3]
            if len(hx) != 2 or any(c not in b"0123456789abcdefABCDEF" for c in hx):
                raise ExportError(f"{part!r}: '%' not followed by two hex digits", USAGE)
            out.append(int(hx.decode("ascii"), 16))
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", errors="surrogateescape")


def input_file(name: str) -> str:
    """The file an input is stored in: input_<encoded name>.npy (kdflow reads the same)."""
    f = f"input_{encode_name(name)}.npy"
    if len(f.encode("utf-8")) > 255:
        raise ExportError(f"input name {name[:60]!r}...: {len(f)} bytes as a file name, more than the 255 a "
                          "file system allows; rename the model's input", USAGE)
    return f


def random_array(shape: Any, dtype: str, rng: np.random.Generator) -> np.ndarray:
    dt = np.dtype(dtype) if dtype not in ("bfloat16",) else np.dtype("float32")
    shape = tuple(int(s) for s in shape)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dt)
    if dt.kind in "iu":
        return rng.integers(0, 2, size=shape).astype(dt)
    raise ExportError(f"cannot make a random input of dtype {dtype}; pass inputs as arrays")


def as_numpy(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    for attr in ("numpy", "asnumpy"):
        f = getattr(x, attr, None)
        if callable(f):
            return np.asarray(f())
    return np.asarray(x)


def params_to_numpy(params: Optional[Dict[str, Any]]) -> Dict[str, np.ndarray]:
    return {str(k): as_numpy(v) for k, v in (params or {}).items()}
