# Copied unchanged from ../shared/tools/oracle/tvm26_files.py (the executing oracle of TVM 0.21-0.26 host C, kept
# beside this checkout's session oracle, llm_session_oracle.py, which extends it); only these
# three comment lines were added.
"""Decoders for TVM 0.21-0.26 (tvm-ffi) build files, and the files the executing oracle reads.

usage: python3 tvm26_files.py DIR
  writes DIR/vm_exec.json (the decoded VM executable, from DIR/vm_exec.bin) and, when DIR has no
  device.tvm_meta.json, DIR/device.tvm_meta.json and device_<i>.tvm_meta.json (the CUDA modules'
  function tables, decoded from the library blob: DIR/blob.bin if present, else the
  __tvm_ffi__library_bin symbol of DIR/model.so). Then:
  python3 ffi_oracle_more.py DIR $TVM_HOME/3rdparty/tvm-ffi/include \
      $TVM_HOME/3rdparty/tvm-ffi/3rdparty/dlpack/include $TVM_HOME/include -o DIR/truth.json
Needs only Python and numpy (no TVM).
"""
import json
import os
import struct
import sys

import numpy as np

# ----------------------------------------------------------------------------- binary readers
class _Reader:
    def __init__(self, b, o=0):
        self.b, self.o = b, o

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.o)
        self.o += struct.calcsize("<" + fmt)
        return v if len(v) > 1 else v[0]

    def raw(self, n):
        v = self.b[self.o:self.o + n]
        self.o += n
        return v

    def str(self):
        return self.raw(self.take("Q")).decode()

    def bytes(self):
        return self.raw(self.take("Q"))

    def vec(self, fmt):
        n = self.take("Q")
        return [self.take(fmt) for _ in range(n)]


# tvm-ffi static type indices (include/tvm/ffi/c_api.h) used as constant tags from v0.22
TAG_NAMES = {70: "Tensor", 5: "DLDataType", 69: "Shape", 65: "String", 1: "Int", 3: "Float"}
MAGIC_V1, MAGIC_V2 = 0xD225DE2F4214151D, 0xD225DE2F4214151E


def decode_vm_exec(blob):
    """Decode VMExecutable::SaveToBytes (v0.26: raw payload; magic V2 => memory-scope section)."""
    r = _Reader(blob)
    out = {}
    first = struct.unpack_from("<Q", blob, 0)[0]
    if first not in (MAGIC_V1, MAGIC_V2):  # v0.20-style dmlc string: u64 length first
        assert first == len(blob) - 8, (first, len(blob))
        out["outer_len"] = r.take("Q")
    magic = r.take("Q")
    out["magic"] = hex(magic)
    out["version"] = r.str()
    funcs = []
    for _ in range(r.take("Q")):
        kind = r.take("i")
        name = r.str()
        start, end, nargs, nregs = r.take("qqqq")
        pnames = [r.str() for _ in range(r.take("Q"))]
        funcs.append({"kind": kind, "name": name, "start_instr": start, "end_instr": end,
                      "num_args": nargs, "register_file_size": nregs, "param_names": pnames})
    out["func_table"] = funcs
    if magic == MAGIC_V2:
        scopes = []
        for _ in range(r.take("Q")):
            key = r.take("q")
            scopes.append({"key": key, "scope": r.str()})
        out["memory_scopes"] = scopes
    consts = []
    for _ in range(r.take("Q")):
        tag = r.take("i")
        if tag == 70:  # Tensor via SaveDLTensor
            magic_t, _res = r.take("QQ")
            dev = r.take("ii")
            ndim = r.take("i")
            code, bits, lanes = r.take("BBH")
            shape = [r.take("q") for _ in range(ndim)]
            nbytes = r.take("q")
            data = r.raw(nbytes)
            c = {"tag": "Tensor", "tag_value": tag, "tensor_magic": hex(magic_t), "dev": list(dev),
                 "dtype": [code, bits, lanes], "shape": shape, "nbytes": nbytes}
            if code == 2 and bits == 32 and lanes == 1:
                a = np.frombuffer(data, dtype=np.float32)
                c["first"] = [float(x) for x in a[:4]]
                c["sum"] = float(a.astype(np.float64).sum())
            consts.append(c)
        elif tag == 5:
            consts.append({"tag": "DLDataType", "tag_value": tag, "value": list(r.take("BBH"))})
        elif tag == 69:
            consts.append({"tag": "Shape", "tag_value": tag, "value": [r.take("q") for _ in range(r.take("Q"))]})
        elif tag == 65:
            consts.append({"tag": "String", "tag_value": tag, "value": r.raw(r.take("Q")).decode()})
        elif tag == 1:
            consts.append({"tag": "Int", "tag_value": tag, "value": r.take("q")})
        elif tag == 3:
            consts.append({"tag": "Float", "tag_value": tag, "value": r.take("d")})
        else:
            raise ValueError(f"unknown constant tag {tag} at {r.o}")
    out["constants"] = consts
    offs = r.vec("q")
    data = r.vec("q")
    out["instr_offset"] = offs
    VMASK = (1 << 56) - 1

    def arg(w):
        kind = (w >> 56) & 0xFF
        v = w & VMASK
        if v >> 55:
            v -= 1 << 56
        k = ["Reg", "Imm", "Const", "Func"][kind] if kind < 4 else str(kind)
        if k == "Reg" and v == (1 << 54):
            return "void"
        if k == "Reg" and v == (1 << 54) + 1:
            return "%vm"
        return f"{k}:{v}"

    instrs = []
    for i, o in enumerate(offs):
        op = data[o]
        if op == 1:
            dst, fidx, na = data[o + 1], data[o + 2], data[o + 3]
            instrs.append({"pc": i, "op": "Call", "dst": dst, "func": funcs[fidx]["name"] if fidx < len(funcs) else fidx,
                           "args": [arg(w) for w in data[o + 4:o + 4 + na]]})
        elif op == 2:
            instrs.append({"pc": i, "op": "Ret", "result": data[o + 1]})
        elif op == 3:
            instrs.append({"pc": i, "op": "Goto", "offset": data[o + 1]})
        elif op == 4:
            instrs.append({"pc": i, "op": "If", "cond": data[o + 1], "false_offset": data[o + 2]})
        else:
            instrs.append({"pc": i, "op": op})
    out["instructions"] = instrs
    out["trailing_bytes"] = len(blob) - r.o
    return out


def decode_cuda_module(b):
    """CUDAModuleNode::SaveToBytes (v0.26): str fmt, Map<str, FunctionInfo> fmap, Bytes code.
    FunctionInfo: str name, Array<DLDataType>, Array<str> launch_param_tags, Array<i32> arg_extra_tags."""
    r = _Reader(b)
    fmt = r.str()
    fmap = {}
    for _ in range(r.take("Q")):
        key = r.str()
        name = r.str()
        arg_types = [r.take("BBH") for _ in range(r.take("Q"))]
        tags = [r.str() for _ in range(r.take("Q"))]
        extra = [r.take("i") for _ in range(r.take("Q"))]
        fmap[key] = {"name": name, "arg_types": [_dtype_str(t) for t in arg_types],
                     "launch_param_tags": tags, "arg_extra_tags": extra}
    code = r.bytes()
    assert r.o == len(b), (r.o, len(b))
    return fmt, fmap, code


def _dtype_str(t):
    code, bits, lanes = t
    base = {0: "int", 1: "uint", 2: "float", 3: "handle", 4: "bfloat", 6: "bool"}.get(code, f"code{code}")
    s = "handle" if code == 3 else f"{base}{bits}"
    return s if lanes == 1 else f"{s}x{lanes}"


def decode_blob(b):
    """runtime.ModulePackImportsToTensor payload (v0.22+ __tvm_ffi__library_bin):
    u64 nbytes, vec<u64> import_tree_row_ptr, vec<u64> child_indices, then per module group:
    str kind, and for every kind but "_lib" its SaveToBytes as a u64-length string."""
    r = _Reader(b)
    nbytes = r.take("Q")
    assert nbytes == len(b) - 8, (nbytes, len(b))
    row_ptr = r.vec("Q")
    child = r.vec("Q")
    mods = []
    for _ in range(len(row_ptr) - 1):
        kind = r.str()
        ent = {"kind": kind}
        if kind != "_lib":
            payload = r.bytes()
            ent["nbytes"] = len(payload)
            ent["payload"] = payload
        mods.append(ent)
    assert r.o == len(b), (r.o, len(b))
    return {"nbytes": nbytes, "import_tree_row_ptr": row_ptr, "import_tree_child_indices": child}, mods



def _blob_from_model_so(path):
    """The __tvm_ffi__library_bin payload of an exported library, read from the ELF file itself."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:4] != b"\x7fELF" or b[4] != 2 or b[5] != 1:
        raise ValueError(f"{path}: not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", b, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    for name_, type_, _fl, addr, off, size, link, _inf, _al, entsize in secs:
        if type_ not in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
            continue
        stroff = secs[link][4]
        for j in range(size // entsize):
            st_name, _info, _other, shndx, value, _sz = struct.unpack_from("<IBBHQQ", b, off + j * entsize)
            end = b.index(b"\0", stroff + st_name)
            if b[stroff + st_name:end] in (b"__tvm_ffi__library_bin", b"__tvm_ffi_library_bin"):
                sec = secs[shndx]
                at = value - sec[3] + sec[4]
                n, = struct.unpack_from("<Q", b, at)
                return b[at:at + 8 + n]
    raise ValueError(f"{path}: no __tvm_ffi__library_bin symbol")


def main(d):
    with open(os.path.join(d, "vm_exec.bin"), "rb") as f:
        blob = f.read()
    with open(os.path.join(d, "vm_exec.json"), "w") as f:
        json.dump(decode_vm_exec(blob), f, indent=1)
    if os.path.exists(os.path.join(d, "device.tvm_meta.json")):
        return
    bpath = os.path.join(d, "blob.bin")
    if os.path.exists(bpath):
        packed = open(bpath, "rb").read()
    else:
        packed = _blob_from_model_so(os.path.join(d, "model.so"))
    _, mods = decode_blob(packed)
    merged = {"func_info": {}}
    for i, m in enumerate(x for x in mods if x["kind"] == "cuda"):
        fmt, fmap, _code = decode_cuda_module(m["payload"])
        with open(os.path.join(d, f"device_{i}.tvm_meta.json"), "w") as f:
            json.dump({"func_info": fmap}, f, indent=1)
        merged["func_info"].update(fmap)
    with open(os.path.join(d, "device.tvm_meta.json"), "w") as f:
        json.dump(merged, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
