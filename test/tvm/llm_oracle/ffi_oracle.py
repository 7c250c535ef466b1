# Copied unchanged from ../shared/tools/oracle/ffi_oracle.py (the executing oracle of TVM 0.21-0.26 host C, kept
# beside this checkout's session oracle, llm_session_oracle.py, which extends it); only these
# three comment lines were added.
"""Executing oracle for TVM v0.26 Relax VM builds (Target cuda, host "c", tvm-ffi ABI); no GPU,
no TVM needed.

usage: python3 ffi_oracle.py SAMPLE_DIR FFI_INCLUDE DLPACK_INCLUDE TVM_INCLUDE [--no-mirror] [-o truth.json]

SAMPLE_DIR holds host.c, vm_exec.json (the decoded VMExecutable, from gen_ffi_samples.py) and
device.tvm_meta.json. host.c is compiled with gcc together with ffi_shim.c into a shared library
(FFI_INCLUDE = tvm-ffi's include/, for tvm/ffi/c_api.h and tvm/ffi/extra/c_env_api.h;
TVM_INCLUDE = TVM's include/, for tvm/runtime/base.h and c_backend_api.h which host.c also
includes) and loaded with ctypes. Then:
  * bytecode mode ("main" has kind 1): the VM instructions are interpreted here; a Call to a
    vm.builtin.* function is emulated, a Call to a function defined in host.c is a real C call of
    its exported symbol __tvm_ffi_<name>(self, TVMFFIAny* args, num_args, TVMFFIAny* result);
  * compiled mode ("main" has kind 2): TVM's __tvm_ffi___vmtir__main(ctx, regs, consts, funcs) in
    host.c is called with anylists (TVMFFIAny arrays) built here, and drives everything itself.
Every packed call the host C makes (kernel launches, builtins) comes back through the shim's
TVMFFIFunctionCall to `handler` below. Tensors are real tvm-ffi Tensor objects as the generated
code reads them: a 24-byte TVMFFIObject header (type_index 70 = kTVMFFITensor) followed by the
DLTensor. Their data pointers are fake device addresses that name their origin: input i,
constant k, storage s (alloc_storage), workspace w.

--no-mirror: do not copy a packed call's result into stack slot num_args. exec_mode="compiled"
moves each builtin's result into its register with TVMBackendAnyListMoveFromPackedReturn(r, idx,
stack, num_args), which reads that slot, but the v0.26 C host keeps the result in a local
(`TVMFFIAny result_N`) and leaves the slot at the None it set before the call. By default the
shim mirrors the result there (what the LLVM host's convention gives); --no-mirror shows what the
real runtime would do with this C host.

truth.json keeps the event format of the v0.20 oracle (shared/samples/relax_mlp/truth.json);
each described value has "t" in the v0.20 type-code convention (0 int, 2 float, 3 handle,
4 null, 5 dtype, 8 object, 11 string, 13 tensor), which the existing compare tools read, and
"ti", the tvm-ffi type_index the value really had.
"""
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

INPUT_BASE, CONST_BASE, STORAGE_BASE, WS_BASE = 0x100000000000, 0x200000000000, 0x300000000000, 0x700000000000
STRIDE = 1 << 32
VM_CTX = 0x0C0000000000

# tvm-ffi static type indices (include/tvm/ffi/c_api.h)
TI_NONE, TI_INT, TI_BOOL, TI_FLOAT, TI_PTR, TI_DTYPE, TI_DEVICE, TI_DLTENSOR, TI_RAWSTR = 0, 1, 2, 3, 4, 5, 6, 7, 8
TI_SMALLSTR, TI_STR, TI_FUNC, TI_SHAPE, TI_TENSOR, TI_ARRAY = 11, 65, 68, 69, 70, 71
TI_STORAGE = 200  # a dynamic type index standing for vm.Storage (>= kTVMFFIDynObjectBegin 128)
# v0.20 type codes used in truth.json "t"
LEGACY_T = {TI_INT: 0, TI_BOOL: 0, TI_FLOAT: 2, TI_PTR: 3, TI_NONE: 4, TI_DTYPE: 5, TI_STR: 11, TI_SMALLSTR: 11,
            TI_RAWSTR: 11, TI_TENSOR: 13, TI_DLTENSOR: 7}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class TVMFFIObject(ctypes.Structure):
    _fields_ = [("combined_ref_count", ctypes.c_uint64), ("type_index", ctypes.c_int32),
                ("padding", ctypes.c_uint32), ("deleter", ctypes.c_void_p)]


class TensorObj(ctypes.Structure):  # tvm::ffi::TensorObj : Object, DLTensor
    _fields_ = [("header", TVMFFIObject), ("dl", DLTensor)]


class ShapeObj(ctypes.Structure):  # ShapeObj : Object, TVMFFIShapeCell
    _fields_ = [("header", TVMFFIObject), ("data", ctypes.POINTER(ctypes.c_int64)), ("size", ctypes.c_size_t)]


class BytesObj(ctypes.Structure):  # StringObj : Object, TVMFFIByteArray
    _fields_ = [("header", TVMFFIObject), ("data", ctypes.c_char_p), ("size", ctypes.c_size_t)]


class TVMFFIAny(ctypes.Structure):
    _fields_ = [("type_index", ctypes.c_int32), ("zero_padding", ctypes.c_uint32), ("v_int64", ctypes.c_int64)]


HANDLER_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(TVMFFIAny), ctypes.c_int,
                             ctypes.POINTER(TVMFFIAny))
WS_T = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p)
FFI_FUNC_T = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(TVMFFIAny), ctypes.c_int32,
                              ctypes.POINTER(TVMFFIAny))


def f64_bits(x):
    return ctypes.c_int64.from_buffer_copy(ctypes.c_double(x)).value


def bits_f64(v):
    return ctypes.c_double.from_buffer_copy(ctypes.c_int64(v)).value


class Oracle:
    def __init__(self, sample, ffi_inc, dlpack_inc, tvm_inc, mirror=True):
        self.sample = sample
        self.vm = json.load(open(os.path.join(sample, "vm_exec.json")))
        meta = json.load(open(os.path.join(sample, "device.tvm_meta.json")))
        self.kernels = set(meta["func_info"].keys())
        self.owner = self.kernel_owners()
        self.tensor_offset = self.tensor_cell_offset()
        self.events = []
        self.keep = []  # keep ctypes objects alive
        self.objs = {}  # object address -> python description (shapes, storages, tuples, strings)
        self.tensors = {}  # Tensor object address -> description
        self.n_storage = 0
        self.n_ws = 0
        tmp = tempfile.mkdtemp(prefix="ffi_oracle_")
        so = os.path.join(tmp, "host.so")
        cmd = ["gcc", "-shared", "-fPIC", "-O0", "-w", "-o", so, os.path.join(sample, "host.c"),
               os.path.join(HERE, "ffi_shim.c"), "-I", ffi_inc, "-I", dlpack_inc, "-I", tvm_inc]
        subprocess.run(cmd, check=True)
        self.so = so
        self.lib = ctypes.CDLL(so)
        self.cb = HANDLER_T(self.handler)
        self.wscb = WS_T(self.workspace)
        self.lib.oracle_set_handler(self.cb, self.wscb)
        self.lib.oracle_last_error.restype = ctypes.c_char_p
        self.lib.oracle_set_mirror_return(1 if mirror else 0)

    def tensor_cell_offset(self):
        """The offset host.c adds to a kTVMFFITensor (70) argument's object pointer to reach its
        DLTensor: `if ((x_type_index == 70)) { condval = ((void*)((char*)(args[i].v_ptr) + 24)); }`.
        The Tensor objects built here put the DLTensor right after a TVMFFIObject header, so the
        offset read from host.c must be sizeof(TVMFFIObject)."""
        text = open(os.path.join(self.sample, "host.c"), errors="replace").read()
        offs = set(int(x) for x in re.findall(r"_type_index == 70\)\) \{\s*\w+ = \(\(void\*\)\(\(char\*\)\(\(\(TVMFFIAny\*\)args\)\[\d+\]\.v_ptr\) \+ (\d+)\)\)", text))
        if offs and offs != {ctypes.sizeof(TVMFFIObject)}:
            raise RuntimeError(f"host.c reads the DLTensor of a Tensor object at {offs}, expected {ctypes.sizeof(TVMFFIObject)}")
        return sorted(offs)

    def kernel_owners(self):
        """kernel name -> the host.c function that looks it up (for the launch events)."""
        owner, func = {}, None
        for line in open(os.path.join(self.sample, "host.c"), errors="replace"):
            m = re.match(r"\s*(?:TVM_DLL\s+)?(?:int32_t|int)\s+(\w+)\s*\(.*\)\s*\{\s*$", line)
            if m:
                func = m.group(1)
            for lit in re.findall(r'ModLookupFromImports\([^,]*,\s*"([^"]+)"', line):
                if lit in self.kernels and func:
                    owner.setdefault(lit, func[len("__tvm_ffi_"):] if func.startswith("__tvm_ffi_") else func)
        return owner

    # ------------------------------------------------------------------ values
    def _header(self, type_index):
        return TVMFFIObject(1, type_index, 0, None)

    def new_obj(self, desc, type_index):
        if type_index == TI_SHAPE:
            arr = (ctypes.c_int64 * max(1, len(desc["shape"])))(*desc["shape"])
            o = ShapeObj(self._header(TI_SHAPE), arr, len(desc["shape"]))
            self.keep.append(arr)
        elif type_index == TI_STR:
            s = ctypes.c_char_p(desc["string"].encode())
            o = BytesObj(self._header(TI_STR), s, len(desc["string"].encode()))
            self.keep.append(s)
        else:
            o = TVMFFIObject(1, type_index, 0, None)
        self.keep.append(o)
        addr = ctypes.addressof(o)
        self.objs[addr] = dict(desc, type_index=type_index)
        return addr

    def new_tensor(self, data, shape, dtype, origin):
        sh = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        st = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            st[i] = st[i + 1] * shape[i + 1]
        stv = (ctypes.c_int64 * max(1, len(shape)))(*st)
        o = TensorObj(self._header(TI_TENSOR), DLTensor(data, DLDevice(2, 0), len(shape), DLDataType(*dtype), sh, stv, 0))
        self.keep += [o, sh, stv]
        addr = ctypes.addressof(o)
        self.tensors[addr] = dict(origin, shape=list(shape), dtype=list(dtype))
        return addr

    def describe_ptr(self, p):
        if p is None or p == 0:
            return {"null": True}
        for base, key in ((INPUT_BASE, "input"), (CONST_BASE, "const"), (STORAGE_BASE, "storage"), (WS_BASE, "workspace")):
            if base <= p < base + (1 << 44):
                return {key: (p - base) // STRIDE, "offset": (p - base) % STRIDE}
        return {"ptr": p}

    def describe(self, ti, v):
        t = {"t": LEGACY_T.get(ti, 8 if ti >= 64 else ti), "ti": ti}
        if ti == TI_TENSOR:
            return dict(t, tensor=self.tensors.get(v, {"addr": v}))
        if ti == TI_DLTENSOR:
            return dict(t, tensor=self.tensors.get(v - ctypes.sizeof(TVMFFIObject), {"addr": v}))
        if ti == TI_PTR:
            return dict(t, **self.describe_ptr(v))
        if ti in (TI_INT, TI_BOOL):
            return dict(t, i=v)
        if ti == TI_FLOAT:
            return dict(t, f=bits_f64(v))
        if ti == TI_DTYPE:
            return dict(t, dtype=[v & 0xFF, (v >> 8) & 0xFF, (v >> 16) & 0xFFFF])
        if ti == TI_NONE:
            return t
        if ti == TI_STR:
            return dict(t, s=self.objs.get(v, {}).get("string"))
        if ti == TI_SMALLSTR:
            return dict(t, s="<small str>")
        if ti >= 64:
            return dict(t, obj={k: x for k, x in self.objs.get(v, {"addr": v}).items() if k != "type_index"})
        return dict(t, raw=v)

    # ------------------------------------------------------------------ packed calls
    def workspace(self, alloc, dev_type, dev_id, nbytes, ptr):
        if alloc:
            p = WS_BASE + self.n_ws * STRIDE
            self.n_ws += 1
            self.events.append({"ev": "alloc_workspace", "workspace": self.n_ws - 1, "bytes": nbytes, "dev": dev_type})
            return p
        self.events.append({"ev": "free_workspace", **self.describe_ptr(ptr)})
        return 0

    def handler(self, name, args, n, result):
        name = name.decode()
        vals = [(args[i].type_index, args[i].v_int64) for i in range(n)]
        try:
            r = self.builtin(name, vals)
        except Exception as e:  # noqa
            self.events.append({"ev": "error", "call": name, "error": repr(e)})
            return -1
        if r is not None:
            result[0].type_index = r[0]
            result[0].zero_padding = 0
            result[0].v_int64 = r[1]
        return 0

    def builtin(self, name, args):
        """Emulate one packed call; returns (type_index, int64 payload) or None for None."""
        if name in self.kernels:
            ev = {"ev": "launch", "kernel": name}
            if name in self.owner:
                ev["function"] = self.owner[name]
            ev["args"] = [self.describe(ti, v) for ti, v in args]
            self.events.append(ev)
            return None
        if name == "__tvm_set_device":
            return None
        if name == "vm.builtin.alloc_storage":
            shape = self.objs[args[1][1]]["shape"]
            nbytes = 1
            for s in shape:
                nbytes *= s
            sid = self.n_storage
            self.n_storage += 1
            h = self.new_obj({"storage": sid, "bytes": nbytes}, TI_STORAGE)
            self.events.append({"ev": "alloc_storage", "storage": sid, "bytes": nbytes,
                                "args": [self.describe(ti, v) for ti, v in args[2:]]})
            return TI_STORAGE, h
        if name == "vm.builtin.alloc_tensor":
            st = self.objs[args[0][1]]
            off = args[1][1]
            shape = self.objs[args[2][1]]["shape"]
            x = args[3][1]
            dtype = (x & 0xFF, (x >> 8) & 0xFF, (x >> 16) & 0xFFFF)
            addr = self.new_tensor(STORAGE_BASE + st["storage"] * STRIDE + off, shape, dtype,
                                   {"storage": st["storage"], "offset": off})
            ev = {"ev": "alloc_tensor", "storage": st["storage"], "offset": off, "shape": shape, "dtype": list(dtype)}
            if len(args) > 4:
                ev["extra_args"] = [self.describe(ti, v) for ti, v in args[4:]]
            self.events.append(ev)
            return TI_TENSOR, addr
        if name == "vm.builtin.null_value":
            return TI_NONE, 0
        if name == "vm.builtin.copy":
            return args[0]
        if name == "vm.builtin.reshape":
            src = self.tensors[args[0][1]]
            t = TensorObj.from_address(args[0][1]).dl
            shape = self.objs[args[1][1]]["shape"]
            addr = self.new_tensor(t.data, shape, (t.dtype.code, t.dtype.bits, t.dtype.lanes),
                                   {k: v for k, v in src.items() if k not in ("shape", "dtype")})
            self.events.append({"ev": "reshape", "from": src, "shape": shape})
            return TI_TENSOR, addr
        if name == "vm.builtin.make_tuple":
            return TI_ARRAY, self.new_obj({"tuple": list(args)}, TI_ARRAY)
        if name == "vm.builtin.tuple_getitem":
            return tuple(self.objs[args[0][1]]["tuple"][args[1][1]])
        if name.startswith("vm.builtin.check_") or name.startswith("vm.builtin.match_"):
            self.events.append({"ev": "check", "call": name})
            return None
        self.events.append({"ev": "unknown_call", "call": name, "args": [self.describe(ti, v) for ti, v in args]})
        return None

    # ------------------------------------------------------------------ constants and entry
    def const_values(self):
        vals = []
        for k, c in enumerate(self.vm["constants"]):
            if c["tag"] == "Tensor":
                vals.append((TI_TENSOR, self.new_tensor(CONST_BASE + k * STRIDE, c["shape"], tuple(c["dtype"]), {"const": k})))
            elif c["tag"] == "Shape":
                vals.append((TI_SHAPE, self.new_obj({"shape": c["value"]}, TI_SHAPE)))
            elif c["tag"] == "DLDataType":
                a, b, l = c["value"]
                vals.append((TI_DTYPE, a | (b << 8) | (l << 16)))
            elif c["tag"] == "Int":
                vals.append((TI_INT, c["value"]))
            elif c["tag"] == "String":
                vals.append((TI_STR, self.new_obj({"string": c["value"]}, TI_STR)))
            elif c["tag"] == "Float":
                vals.append((TI_FLOAT, f64_bits(c["value"])))
            else:
                raise ValueError(c)
        return vals

    def input_values(self, func):
        import numpy as np

        vals = []
        for i, pname in enumerate(func["param_names"]):
            a = np.load(os.path.join(self.sample, f"input_{pname}.npy"))
            code, bits = {"f": 2, "i": 0, "u": 1}[a.dtype.kind], a.dtype.itemsize * 8
            vals.append((TI_TENSOR, self.new_tensor(INPUT_BASE + i * STRIDE, list(a.shape), (code, bits, 1),
                                                    {"input": i, "name": pname})))
        return vals

    def call_c(self, fname, args):
        n = len(args)
        arr = (TVMFFIAny * (n + 1))()
        for i, (ti, v) in enumerate(args):
            arr[i].type_index, arr[i].zero_padding, arr[i].v_int64 = ti, 0, v
        res = TVMFFIAny(TI_NONE, 0, 0)
        f = FFI_FUNC_T(ctypes.cast(getattr(self.lib, "__tvm_ffi_" + fname), ctypes.c_void_p).value)
        err = f(None, arr, n, ctypes.byref(res))
        if err != 0:
            raise RuntimeError(f"{fname} returned {err}: {self.lib.oracle_last_error()}")
        return res.type_index, res.v_int64

    def has_c(self, name):
        try:
            getattr(self.lib, "__tvm_ffi_" + name)
            return True
        except AttributeError:
            return False

    def run(self, entry="main"):
        funcs = self.vm["func_table"]
        fi = next(f for f in funcs if f["name"] == entry)
        consts = self.const_values()
        inputs = self.input_values(fi)
        if fi["kind"] == 2:
            return self.run_compiled(fi, funcs, consts, inputs)
        return self.run_bytecode(fi, funcs, consts, inputs)

    def run_compiled(self, fi, funcs, consts, inputs):
        regs = (TVMFFIAny * fi["register_file_size"])()
        for i, (ti, v) in enumerate(inputs):
            regs[i].type_index, regs[i].v_int64 = ti, v
        cl = (TVMFFIAny * max(1, len(consts)))()
        for i, (ti, v) in enumerate(consts):
            cl[i].type_index, cl[i].v_int64 = ti, v
        fl = (TVMFFIAny * len(funcs))()
        for i, f in enumerate(funcs):
            # function-pool entries: the shim's "function handle" is the name (see ffi_shim.c)
            s = ctypes.c_char_p(f["name"].encode())
            self.keep.append(s)
            fl[i].type_index, fl[i].v_int64 = TI_FUNC, ctypes.cast(s, ctypes.c_void_p).value
        self.keep += [regs, cl, fl]
        args = [(TI_PTR, VM_CTX)] + [(TI_PTR, ctypes.addressof(a)) for a in (regs, cl, fl)]
        self.events.append({"ev": "enter", "func": "__vmtir__" + fi["name"]})
        self.call_c("__vmtir__" + fi["name"], args)
        r = regs[fi["num_args"]]
        return self.describe(r.type_index, r.v_int64)

    def run_bytecode(self, fi, funcs, consts, inputs):
        regs = [(TI_NONE, 0)] * fi["register_file_size"]
        regs[:len(inputs)] = inputs
        for ins in self.vm["instructions"][fi["start_instr"]:fi["end_instr"]]:
            if ins["op"] == "Ret":
                return self.describe(*regs[ins["result"]])
            if ins["op"] != "Call":
                raise NotImplementedError(ins)
            args = []
            for a in ins["args"]:
                if a == "%vm":
                    args.append((TI_PTR, VM_CTX))
                elif a == "void":
                    args.append((TI_NONE, 0))
                else:
                    kind, val = a.split(":")
                    val = int(val)
                    args.append({"Reg": lambda: regs[val], "Imm": lambda: (TI_INT, val), "Const": lambda: consts[val],
                                 "Func": lambda: (TI_PTR, val)}[kind]())
            name = ins["func"]
            self.events.append({"ev": "call", "pc": ins["pc"], "func": name, "dst": ins["dst"]})
            if not name.startswith("vm.builtin") and self.has_c(name):
                r = self.call_c(name, args)
            else:
                r = self.builtin(name, args) or (TI_NONE, 0)
            if ins["dst"] < len(regs):
                regs[ins["dst"]] = r
        return None


def main():
    sample, ffi_inc, dl_inc, tvm_inc = sys.argv[1:5]
    mirror = "--no-mirror" not in sys.argv
    out = sys.argv[sys.argv.index("-o") + 1] if "-o" in sys.argv else os.path.join(sample, "truth.json")
    o = Oracle(sample, ffi_inc, dl_inc, tvm_inc, mirror)
    result = None
    try:
        result = o.run()
    except Exception as e:  # noqa
        o.events.append({"ev": "fatal", "error": repr(e)})
    doc = {"oracle": "tools/oracle/ffi_oracle.py (TVM v0.26 host C + ffi_shim.c, gcc, no GPU)",
           "tensor_dltensor_offset_in_host_c": o.tensor_offset,
           "value_types": "t: v0.20 type code (0 int, 2 float, 3 handle, 4 null, 5 dtype, 8 object, 11 str, "
                          "13 tensor); ti: the tvm-ffi type_index of the value",
           "mirror_return": mirror, "result": result, "events": o.events}
    json.dump(doc, open(out, "w"), indent=1)
    n = sum(1 for e in o.events if e["ev"] == "launch")
    bad = [e for e in o.events if e["ev"] in ("fatal", "error", "unknown_call")]
    print(f"{out}: {n} launches, {o.n_storage} storages, {len(bad)} errors, result={result}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
