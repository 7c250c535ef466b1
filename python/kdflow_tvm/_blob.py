"""Decoders for the bytes a TVM 0.22+ (tvm-ffi) build packs into its library: the module tree
that `runtime.ModulePackImportsToTensor` returns (the `__tvm_ffi__library_bin` symbol of an
exported model.so) and the CUDA module's own serialisation (its function table and code).

Written from TVM's sources (v0.26.0: src/runtime/.../library_module.cc `ProcessLibraryBin`,
src/runtime/cuda/cuda_module.cc `SaveToBytes`); needs nothing but the standard library.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple


class BlobError(ValueError):
    """The bytes do not have the layout this module decodes."""


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise BlobError(f"{self.what}: truncated at byte {self.pos} (wanted {n} more)")

    def u64(self) -> int:
        self._need(8)
        (v,) = struct.unpack_from("<Q", self.data, self.pos)
        self.pos += 8
        return int(v)

    def i32(self) -> int:
        self._need(4)
        (v,) = struct.unpack_from("<i", self.data, self.pos)
        self.pos += 4
        return int(v)

    def dtype(self) -> Tuple[int, int, int]:
        self._need(4)
        code, bits, lanes = struct.unpack_from("<BBH", self.data, self.pos)
        self.pos += 4
        return int(code), int(bits), int(lanes)

    def raw(self, n: int) -> bytes:
        self._need(n)
        v = self.data[self.pos:self.pos + n]
        self.pos += n
        return v

    def bytes_(self) -> bytes:
        return self.raw(self.u64())

    def str_(self) -> str:
        try:
            return self.bytes_().decode("utf-8")
        except UnicodeDecodeError as e:
            raise BlobError(f"{self.what}: a string at byte {self.pos} is not UTF-8") from e

    def count(self, item_bytes: int) -> int:
        n = self.u64()
        if n * item_bytes > len(self.data) - self.pos:
            raise BlobError(f"{self.what}: a count of {n} at byte {self.pos - 8} exceeds the data")
        return n


@dataclass
class PackedModule:
    kind: str                 # "relax.VMExecutable", "_lib", "cuda", ...
    payload: Optional[bytes]  # that module's SaveToBytes (None for "_lib": the host code itself)


@dataclass
class LibraryBlob:
    row_ptr: List[int]
    children: List[int]
    modules: List[PackedModule] = field(default_factory=list)


def decode_library_blob(data: bytes) -> LibraryBlob:
    """The packed import tree of a TVM 0.22+ library: u64 total size, the import tree in CSR form
    (row pointers, child indices), then per module its kind and (but for `_lib`) its bytes."""
    r = _Reader(data, "library blob")
    total = r.u64()
    if total != len(data) - 8:
        raise BlobError(f"library blob: says {total} bytes, holds {len(data) - 8}")
    row_ptr = [r.u64() for _ in range(r.count(8))]
    children = [r.u64() for _ in range(r.count(8))]
    if not row_ptr:
        raise BlobError("library blob: empty import tree")
    blob = LibraryBlob(row_ptr, children)
    for _ in range(len(row_ptr) - 1):
        kind = r.str_()
        blob.modules.append(PackedModule(kind, None if kind == "_lib" else r.bytes_()))
    if r.pos != len(data):
        raise BlobError(f"library blob: {len(data) - r.pos} bytes left after the last module")
    return blob


_DTYPE_CODES = {0: "int", 1: "uint", 2: "float", 3: "handle", 4: "bfloat", 6: "bool"}


def dtype_name(code: int, bits: int, lanes: int) -> str:
    """A DLDataType as TVM writes it in a .tvm_meta.json ("float32", "handle", "int32x4")."""
    if code == 3:
        base = "handle"
    else:
        base = f"{_DTYPE_CODES.get(code, f'code{code}_')}{bits}"
    return base if lanes == 1 else f"{base}x{lanes}"


@dataclass
class CudaModule:
    fmt: str                    # "cubin" (TVM labels nvcc's fatbin so), "ptx", "fatbin", or "cuda" (source)
    func_info: Dict[str, dict]  # the function table, as a .tvm_meta.json's "func_info"
    code: bytes


def decode_cuda_module(data: bytes) -> CudaModule:
    """CUDAModuleNode::SaveToBytes (TVM 0.22+): format, the function table
    (name, arg dtypes, launch parameter tags, per-argument extra tags), then the code."""
    r = _Reader(data, "CUDA module")
    fmt = r.str_()
    table: Dict[str, dict] = {}
    for _ in range(r.count(8)):
        key = r.str_()
        name = r.str_()
        arg_types = [dtype_name(*r.dtype()) for _ in range(r.count(4))]
        tags = [r.str_() for _ in range(r.count(8))]
        extra = [r.i32() for _ in range(r.count(4))]
        table[key] = {"name": name, "arg_types": arg_types, "launch_param_tags": tags,
                      "arg_extra_tags": extra}
    code = r.bytes_()
    if r.pos != len(data):
        raise BlobError(f"CUDA module: {len(data) - r.pos} bytes left after the code")
    return CudaModule(fmt, table, code)


def library_blob_from_elf(path: str) -> bytes:
    """The `__tvm_ffi__library_bin` bytes of an exported library (read from the ELF symbol table)."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:4] != b"\x7fELF" or len(b) < 64 or b[4] != 2 or b[5] != 1:
        raise BlobError(f"{path}: not a little-endian ELF64 file")
    (shoff,) = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", b, 0x3A)
    if shoff + shnum * shentsize > len(b):
        raise BlobError(f"{path}: section headers past the end of the file")
    secs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    for _n, stype, _f, _a, off, size, link, _i, _al, entsize in secs:
        if stype not in (2, 11) or entsize == 0 or link >= len(secs):
            continue
        stroff = secs[link][4]
        for j in range(size // entsize):
            st_name, _info, _other, shndx, value, _sz = struct.unpack_from("<IBBHQQ", b, off + j * entsize)
            end = b.find(b"\0", stroff + st_name)
            if b[stroff + st_name:end] in (b"__tvm_ffi__library_bin", b"__tvm_ffi_library_bin"):
                if shndx >= len(secs):
                    break
                sec = secs[shndx]
                at = value - sec[3] + sec[4]
                (n,) = struct.unpack_from("<Q", b, at)
                return b[at:at + 8 + n]
    raise BlobError(f"{path}: no __tvm_ffi__library_bin symbol")
