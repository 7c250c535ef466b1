# Copied unchanged from ../shared/tools/oracle/ffi_oracle_more.py (the executing oracle of TVM 0.21-0.26 host C, kept
# beside this checkout's session oracle, llm_session_oracle.py, which extends it); only these
# three comment lines were added.
"""ffi_oracle.py extended for the models of gen_ffi_samples_more.py (symbolic shapes, tuple
results, workspaces). Same usage, same shim (ffi_shim.c, unchanged), same truth.json format:

  python3 ffi_oracle_more.py SAMPLE_DIR FFI_INCLUDE DLPACK_INCLUDE TVM_INCLUDE [--no-mirror] [-o truth.json]

Additions to ffi_oracle.Oracle (original file unchanged; this subclasses it):
  * vm.builtin.alloc_shape_heap(vm, n): a real host (kDLCPU) int64[n] Tensor object, as the VM
    makes it (src/runtime/vm/builtin.cc AllocShapeHeap), because the host.c `shape_func` reads and
    writes it (H[1] = H[0] * 1600 ...). Event {"ev": "alloc_shape_heap", "size": n}.
  * vm.builtin.match_shape(value, heap, ndim, (code, v)*ndim, err_ctx): MatchShapeCode
    0 assert == imm, 1 store to heap[v], 2 no-op, 3 assert == heap[v]; a mismatch is an "error"
    event. The "check" event gets "shape" and, where it stored something, "stored" {slot: value}.
  * vm.builtin.make_shape(heap, ndim, (code, v)*ndim): MakeShapeCode 0 imm, 1 heap[v]; returns a
    ShapeObj. Event {"ev": "make_shape", "shape": [...]}.
  * vm.builtin.match_prim_value / make_prim_value (same codes, one value).
  * tuples (make_tuple results, e.g. the result of a two-output main) are described element by
    element: {"t": 8, "ti": 71, "tuple": [<value>, ...]}.
  * top-level "shape_heap": the heap contents at the end (null without a heap).
Workspaces (TVMBackendAllocWorkspace / FreeWorkspace, e.g. topk, the GPU cumsum) were already
handled by ffi_shim.c + ffi_oracle.py: events alloc_workspace / free_workspace, fake pointers
0x7000_0000_0000 + 2^32 * i, named {"workspace": i, "offset": o} in launch args.
"""
import ctypes
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ffi_oracle as F  # noqa: E402
from ffi_oracle import (TI_ARRAY, TI_DLTENSOR, TI_INT, TI_NONE, TI_SHAPE, TI_TENSOR, DLDataType,  # noqa: E402
                        DLDevice, DLTensor, TensorObj)


class OracleMore(F.Oracle):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.heap = None  # (tensor address, ctypes int64 array)

    # ------------------------------------------------------------------ values
    def describe(self, ti, v):
        if ti == TI_ARRAY and v in self.objs and "tuple" in self.objs[v]:
            return {"t": 8, "ti": TI_ARRAY, "tuple": [self.describe(t, x) for t, x in self.objs[v]["tuple"]]}
        return super().describe(ti, v)

    def _shape_of(self, ti, v):
        if ti == TI_TENSOR:
            dl = TensorObj.from_address(v).dl
            return [dl.shape[i] for i in range(dl.ndim)]
        if ti == TI_DLTENSOR:
            dl = DLTensor.from_address(v)
            return [dl.shape[i] for i in range(dl.ndim)]
        if ti == TI_SHAPE:
            return list(self.objs[v]["shape"])
        raise TypeError(f"match_shape on type_index {ti}")

    def _heap_data(self, ti, v):
        if ti == TI_NONE or self.heap is None:
            return None
        if ti == TI_TENSOR and v == self.heap[0]:
            return self.heap[1]
        raise ValueError(f"unexpected shape heap value ({ti}, {v:#x})")

    # ------------------------------------------------------------------ builtins
    def builtin(self, name, args):
        if name == "vm.builtin.alloc_shape_heap":
            n = args[1][1]
            arr = (ctypes.c_int64 * max(1, n))()
            sh = (ctypes.c_int64 * 1)(n)
            st = (ctypes.c_int64 * 1)(1)
            o = TensorObj(self._header(TI_TENSOR),
                          DLTensor(ctypes.addressof(arr), DLDevice(1, 0), 1, DLDataType(0, 64, 1), sh, st, 0))
            self.keep += [arr, sh, st, o]
            addr = ctypes.addressof(o)
            self.tensors[addr] = {"shape_heap": True, "shape": [n], "dtype": [0, 64, 1]}
            self.heap = (addr, arr)
            self.events.append({"ev": "alloc_shape_heap", "size": n})
            return TI_TENSOR, addr
        if name == "vm.builtin.match_shape":
            shape = self._shape_of(*args[0])
            heap = self._heap_data(*args[1])
            ndim = args[2][1]
            ev = {"ev": "check", "call": name, "shape": shape}
            if len(shape) != ndim:
                raise ValueError(f"match_shape: ndim {len(shape)} != {ndim}")
            stored = {}
            for i in range(ndim):
                code, val = args[3 + 2 * i][1], args[4 + 2 * i][1]
                if code == 0 and shape[i] != val:
                    raise ValueError(f"match_shape: shape[{i}] = {shape[i]} != {val}")
                if code == 1:
                    heap[val] = shape[i]
                    stored[str(val)] = shape[i]
                if code == 3 and shape[i] != heap[val]:
                    raise ValueError(f"match_shape: shape[{i}] = {shape[i]} != heap[{val}] = {heap[val]}")
            if stored:
                ev["stored"] = stored
            self.events.append(ev)
            return None
        if name == "vm.builtin.make_shape":
            heap = self._heap_data(*args[0])
            ndim = args[1][1]
            shape = []
            for i in range(ndim):
                code, val = args[2 + 2 * i][1], args[3 + 2 * i][1]
                shape.append(val if code == 0 else heap[val])
            self.events.append({"ev": "make_shape", "shape": shape})
            return TI_SHAPE, self.new_obj({"shape": shape}, TI_SHAPE)
        if name == "vm.builtin.match_prim_value":
            value, heap, code, reg = args[0][1], self._heap_data(*args[1]), args[2][1], args[3][1]
            if code == 0 and value != reg or code == 3 and value != heap[reg]:
                raise ValueError(f"match_prim_value: {value} vs code {code} reg {reg}")
            if code == 1:
                heap[reg] = value
            self.events.append({"ev": "check", "call": name, "value": value})
            return None
        if name == "vm.builtin.make_prim_value":
            heap, code, reg = self._heap_data(*args[0]), args[1][1], args[2][1]
            return TI_INT, (reg if code == 0 else heap[reg])
        return super().builtin(name, args)


def main():
    sample, ffi_inc, dl_inc, tvm_inc = sys.argv[1:5]
    mirror = "--no-mirror" not in sys.argv
    out = sys.argv[sys.argv.index("-o") + 1] if "-o" in sys.argv else os.path.join(sample, "truth.json")
    o = OracleMore(sample, ffi_inc, dl_inc, tvm_inc, mirror)
    result = None
    try:
        result = o.run()
    except Exception as e:  # noqa
        o.events.append({"ev": "fatal", "error": repr(e)})
    doc = {"oracle": "tools/oracle/ffi_oracle_more.py (ffi_oracle.py + symbolic-shape builtins, tuple results; "
                     "TVM v0.26 host C + ffi_shim.c, gcc, no GPU)",
           "tensor_dltensor_offset_in_host_c": o.tensor_offset,
           "value_types": "t: v0.20 type code (0 int, 2 float, 3 handle, 4 null, 5 dtype, 8 object, 11 str, "
                          "13 tensor); ti: the tvm-ffi type_index of the value",
           "mirror_return": mirror, "result": result,
           "shape_heap": list(o.heap[1]) if o.heap else None, "events": o.events}
    json.dump(doc, open(out, "w"), indent=1)
    n = sum(1 for e in o.events if e["ev"] == "launch")
    nws = sum(1 for e in o.events if e["ev"] == "alloc_workspace")
    bad = [e for e in o.events if e["ev"] in ("fatal", "error", "unknown_call")]
    print(f"{out}: {n} launches, {o.n_storage} storages, {nws} workspaces, {len(bad)} errors, result={result}")
    for e in bad:
        print("  ", e)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
