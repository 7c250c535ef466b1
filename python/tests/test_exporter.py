"""Unit tests of kdflow_tvm's parts that need no TVM: the blob decoders (on bytes laid out as
TVM 0.26's CUDAModuleNode::SaveToBytes and ModulePackImportsToTensor write them, built here by
hand as labelled unit fixtures), the output folder's safety, inputs, and ONNX shape options.
The real builds are test/tvm (ctest "tvm 027" / "tvm 026")."""

from __future__ import annotations

import os
import struct
import tempfile
import unittest

import numpy as np

from kdflow_tvm import _blob, _folder, _onnx, _tvm
from kdflow_tvm import _relax, _relay
from kdflow_tvm import _resolve_inputs  # type: ignore[attr-defined]
from kdflow_tvm.errors import CANT_CREATE, USAGE, ExportError


def s(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def cuda_module_bytes(fmt: str, code: bytes) -> bytes:
    out = s(fmt) + struct.pack("<Q", 1) + s("k0") + s("k0")
    out += struct.pack("<Q", 2) + struct.pack("<BBH", 3, 64, 1) + struct.pack("<BBH", 2, 32, 1)
    out += struct.pack("<Q", 2) + s("blockIdx.x") + s("threadIdx.x")
    out += struct.pack("<Q", 2) + struct.pack("<ii", 0, 0)
    return out + struct.pack("<Q", len(code)) + code


def library_bytes(mods: list) -> bytes:
    body = struct.pack("<Q", 3) + struct.pack("<QQQ", 0, 1, 1)   # row pointers
    body += struct.pack("<Q", 1) + struct.pack("<Q", 1)          # children
    for kind, payload in mods:
        body += s(kind)
        if kind != "_lib":
            body += struct.pack("<Q", len(payload)) + payload
    return struct.pack("<Q", len(body)) + body


class BlobTest(unittest.TestCase):
    def test_cuda_module(self) -> None:
        m = _blob.decode_cuda_module(cuda_module_bytes("cubin", b"\x50\xed\x55\xba" + b"x" * 12))
        self.assertEqual(m.fmt, "cubin")
        self.assertEqual(m.func_info["k0"]["arg_types"], ["handle", "float32"])
        self.assertEqual(m.func_info["k0"]["launch_param_tags"], ["blockIdx.x", "threadIdx.x"])
        self.assertEqual(len(m.code), 16)

    def test_truncated_module_is_an_error(self) -> None:
        good = cuda_module_bytes("cuda", b"__global__ void k0() {}")
        for n in (3, 20, len(good) - 1):
            with self.assertRaises(_blob.BlobError):
                _blob.decode_cuda_module(good[:n])
        with self.assertRaises(_blob.BlobError):
            _blob.decode_cuda_module(good + b"!")

    def test_library_blob(self) -> None:
        lib = _blob.decode_library_blob(library_bytes([("relax.VMExecutable", b"VM"), ("_lib", b"")]))
        self.assertEqual([m.kind for m in lib.modules], ["relax.VMExecutable", "_lib"])
        self.assertEqual(lib.modules[0].payload, b"VM")
        self.assertIsNone(lib.modules[1].payload)

    def test_library_blob_size_must_agree(self) -> None:
        b = bytearray(library_bytes([("relax.VMExecutable", b"VM"), ("_lib", b"")]))
        b[0] += 1
        with self.assertRaises(_blob.BlobError):
            _blob.decode_library_blob(bytes(b))

    def test_huge_count_is_refused_not_allocated(self) -> None:
        data = s("cuda") + struct.pack("<Q", 1 << 60)
        with self.assertRaises(_blob.BlobError):
            _blob.decode_cuda_module(data)

    def test_dtype_names(self) -> None:
        self.assertEqual(_blob.dtype_name(2, 16, 1), "float16")
        self.assertEqual(_blob.dtype_name(0, 32, 4), "int32x4")
        self.assertEqual(_blob.dtype_name(3, 64, 1), "handle")

    def test_not_elf(self) -> None:
        with tempfile.NamedTemporaryFile(suffix=".so") as f:
            f.write(b"not an elf file at all" * 4)
            f.flush()
            with self.assertRaises(_blob.BlobError):
                _blob.library_blob_from_elf(f.name)


class FolderTest(unittest.TestCase):
    def test_non_empty_folder_is_refused_and_kept(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            keep = os.path.join(d, "mine.txt")
            open(keep, "w").write("user data")
            with self.assertRaises(ExportError) as e:
                _folder.Staging(d)
            self.assertEqual(e.exception.code, CANT_CREATE)
            self.assertIn("--force", str(e.exception))
            self.assertEqual(open(keep).read(), "user data")

    def test_a_file_is_never_replaced(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "x")
            open(f, "w").write("keep")
            with self.assertRaises(ExportError):
                _folder.Staging(f, force=True)
            self.assertEqual(open(f).read(), "keep")

    def test_failure_leaves_nothing(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out")
            with self.assertRaises(RuntimeError):
                with _folder.Staging(out) as st:
                    st.write_text("host.c", "int x;")
                    raise RuntimeError("build failed")
            self.assertEqual(os.listdir(d), [])

    def test_success_and_force(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out")
            with _folder.Staging(out) as st:
                st.write_npy("input_x.npy", np.arange(3, dtype="float32"))
            self.assertEqual(sorted(os.listdir(out)), ["input_x.npy"])
            with _folder.Staging(out, force=True) as st:
                st.write_text("host.c", "")
            self.assertEqual(sorted(os.listdir(out)), ["host.c"])
            self.assertEqual(sorted(os.listdir(d)), ["out"])

    def test_every_input_name_is_a_file_name_and_round_trips(self) -> None:
        # Caffe2, TensorFlow, PyTorch and hand-made names; kdflow's C++ encoder gives the same.
        cases = {"gpu_0/data_0": "input_gpu_0%2Fdata_0.npy", "input_1:0": "input_input_1%3A0.npy",
                 "input.1": "input_input.1.npy", "a b": "input_a%20b.npy", "%41": "input_%2541.npy",
                 "": "input_.npy", "..": "input_...npy", "x\0": "input_x%00.npy",
                 "\u00e9t\u00e9": "input_%C3%A9t%C3%A9.npy", "a=b\\c": "input_a%3Db%5Cc.npy"}
        for name, file in cases.items():
            self.assertEqual(_folder.input_file(name), file)
            self.assertEqual(_folder.decode_name(_folder.encode_name(name)), name)
            self.assertNotIn("/", file)
        with tempfile.TemporaryDirectory() as d:
            for name in cases:
                with open(os.path.join(d, _folder.input_file(name)), "wb"):
                    pass
            self.assertEqual(len(os.listdir(d)), len(cases))

    def test_bad_encodings_and_overlong_names_are_refused(self) -> None:
        for bad in ("%", "%4", "%G1", "%+1"):
            with self.assertRaises(ExportError):
                _folder.decode_name(bad)
        with self.assertRaises(ExportError):
            _folder.input_file("/" * 100)


class ParamNameTest(unittest.TestCase):
    def test_names_tvm_prints_well_are_kept_and_others_become_identifiers(self) -> None:
        # TVM's code generators turn ':', '-' and '.' into '_' themselves; '/', spaces and
        # non-ASCII letters reach host.c and device.cu as they are.
        for ok in ("x", "input_1:0", "y-1", "z.2", "_a"):
            self.assertTrue(_relax._C_NAME.fullmatch(ok), ok)
        for bad in ("gpu_0/data_0", "a b", "\u00e9t\u00e9", "0x", ""):
            self.assertFalse(_relax._C_NAME.fullmatch(bad), bad)
        self.assertEqual(_relax._c_name("gpu_0/data_0", set()), "gpu_0_data_0")
        self.assertEqual(_relax._c_name("0x", set()), "_0x")
        self.assertEqual(_relax._c_name("", set()), "_")
        self.assertEqual(_relax._c_name("a b", {"a_b", "a_b_1"}), "a_b_2")

    def test_host_only_functions_are_not_references(self) -> None:
        for host in ("shape_func", "shape_func1", "compute_symbolic_expr"):
            self.assertTrue(_relax._HOST_ONLY.fullmatch(host))
        self.assertFalse(_relax._HOST_ONLY.fullmatch("fused_shape_func_add"))

    def test_zero_dimensional_arrays_stay_zero_dimensional(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out")
            with _folder.Staging(out) as st:
                st.write_npy("input_c.npy", np.array(True))
            self.assertEqual(np.load(os.path.join(out, "input_c.npy")).shape, ())


class InputsTest(unittest.TestCase):
    def test_random_inputs_of_each_shape_and_dtype(self) -> None:
        a = _resolve_inputs([("x", [2, 3], "float32"), ("ids", [4], "int64")], True, 1)
        self.assertEqual(a["x"].shape, (2, 3))
        self.assertEqual(a["ids"].dtype, np.int64)

    def test_symbolic_shape_needs_arrays(self) -> None:
        with self.assertRaises(ExportError) as e:
            _resolve_inputs([("x", ["n", 100], "float32")], True, 1)
        self.assertIn("inputs=", str(e.exception))
        got = _resolve_inputs([("x", ["n", 100], "float32")], {"x": np.zeros((8, 100), "float32")}, 1)
        self.assertEqual(got["x"].shape, (8, 100))

    def test_wrong_shape_or_name(self) -> None:
        with self.assertRaises(ExportError):
            _resolve_inputs([("x", [2, 3], "float32")], {"x": np.zeros((3, 2))}, 1)
        with self.assertRaises(ExportError):
            _resolve_inputs([("x", [2, 3], "float32")], {"y": np.zeros((2, 3))}, 1)


class OptionsTest(unittest.TestCase):
    def test_shape_option(self) -> None:
        self.assertEqual(_onnx.parse_shape("x=1x3x224x224"), ("x", [1, 3, 224, 224]))
        self.assertEqual(_onnx.parse_shape("s="), ("s", []))
        with self.assertRaises(ExportError) as e:
            _onnx.parse_shape("x:1,3")
        self.assertEqual(e.exception.code, USAGE)

    def test_only_cuda_targets(self) -> None:
        for t in ("llvm", {"kind": "rocm"}, "vulkan -foo=1"):
            with self.assertRaises(ExportError) as e:
                _tvm.check_cuda_target(t)
            self.assertIn("not CUDA", str(e.exception))
        _tvm.check_cuda_target("cuda -arch=sm_80")
        _tvm.check_cuda_target({"kind": "cuda"})

    def test_arch(self) -> None:
        self.assertEqual(_tvm.check_arch("sm_90a"), "sm_90a")
        with self.assertRaises(ExportError):
            _tvm.check_arch("hopper")


def relay_graph() -> dict:
    """A Relay graph.json as TVM 0.19 writes it for a small CNN: conv, a two-output split, a
    reshape-only node (__nop), a function TVM's build does not describe, and one reading it."""
    nodes = [
        {"op": "null", "name": "x", "inputs": []},
        {"op": "null", "name": "p0", "inputs": []},
        {"op": "tvm_op", "name": "f_conv", "attrs": {"func_name": "f_conv"}, "inputs": [[0, 0, 0], [1, 0, 0]]},
        {"op": "tvm_op", "name": "f_split", "attrs": {"func_name": "f_split"}, "inputs": [[2, 0, 0]]},
        {"op": "tvm_op", "name": "reshape_nop", "attrs": {"func_name": "__nop"}, "inputs": [[3, 1, 0]]},
        {"op": "tvm_op", "name": "f_add", "attrs": {"func_name": "f_add"}, "inputs": [[3, 0, 0], [4, 0, 0]]},
        {"op": "tvm_op", "name": "f_ext", "attrs": {"func_name": "f_ext"}, "inputs": [[5, 0, 0]]},
        {"op": "tvm_op", "name": "f_after", "attrs": {"func_name": "f_after"}, "inputs": [[6, 0, 0]]},
        {"op": "tvm_op", "name": "f_tail", "attrs": {"func_name": "f_tail"}, "inputs": [[5, 0, 0]]},
    ]
    return {"nodes": nodes, "arg_nodes": [0, 1], "heads": [[7, 0, 0], [8, 0, 0]],
            "node_row_ptr": [0, 1, 2, 3, 5, 6, 7, 8, 9, 10]}


class RelayReferenceTest(unittest.TestCase):
    """_relay.node_plan: which nodes of a Relay build's graph.json get TVM's CPU result (each
    function node, every output) and why the others do not."""

    def test_every_function_node_and_output(self) -> None:
        entries, skipped = _relay.node_plan(relay_graph(), ["f_conv", "f_split", "f_add", "f_after", "f_tail"])
        self.assertEqual(entries, [(2, 0), (3, 0), (3, 1), (5, 0), (8, 0)])
        self.assertEqual([(s["graph_node"], s["function"]) for s in skipped],
                         [(4, "__nop"), (6, "f_ext"), (7, "f_after")])
        self.assertIn("launches no kernel", skipped[0]["reason"])
        self.assertIn("no Relay function", skipped[1]["reason"])
        self.assertIn("reads node 6", skipped[2]["reason"])

    def test_all_known(self) -> None:
        entries, skipped = _relay.node_plan(relay_graph(), ["f_conv", "f_split", "f_add", "f_ext", "f_after",
                                                           "f_tail"])
        self.assertEqual([i for i, k in entries if k == 0], [2, 3, 5, 6, 7, 8])
        self.assertEqual([s["function"] for s in skipped], ["__nop"])

    def test_htanh_guard(self) -> None:
        prelude = ("#if (__CUDA_ARCH__ >= 530)\nCUDA_UNSUPPORTED_HALF_MATH_BINARY(hpow, powf)\n"
                   "CUDA_UNSUPPORTED_HALF_MATH_UNARY(htanh, tanhf)\nCUDA_UNSUPPORTED_HALF_MATH_UNARY(htan, tanf)\n")
        fixed = _relay.fix_cuda_source(prelude)
        self.assertIn("#if ((__CUDACC_VER_MAJOR__ < 12) || ((__CUDACC_VER_MAJOR__ == 12) && "
                      "(__CUDACC_VER_MINOR__ < 8)))\nCUDA_UNSUPPORTED_HALF_MATH_UNARY(htanh, tanhf)\n#endif\n", fixed)
        self.assertEqual(fixed.count("htanh"), 1)
        self.assertEqual(_relay.fix_cuda_source(fixed), fixed)
        self.assertEqual(_relay.fix_cuda_source("__global__ void k() {}"), "__global__ void k() {}")


if __name__ == "__main__":
    unittest.main()


class SessionTest(unittest.TestCase):
    """Sessions as kdflow states them (relax_vm.cpp parse_session, label_steps, chunk_prefills;
    the C++ side is tested by test/pipeline/relax.cpp with the same cases)."""

    def test_spec(self) -> None:
        from kdflow_tvm import _session
        s = _session.parse("prefill:7,decode:2")
        fw = _session.forwards(s)
        self.assertEqual([f[0] for f in fw], ["add_sequence", "prefill", "decode 0", "decode 1"])
        self.assertEqual(_session.cache_args(s, fw), (1, 9, 7, 16))
        c = _session.parse("prefill:10,decode:1,prefill_chunk_size:4")
        self.assertEqual([(f[0], f[3]) for f in _session.forwards(c) if f[1] == "prefill"],
                         [("prefill chunk 0", 4), ("prefill chunk 1", 4), ("prefill chunk 2", 2)])
        for bad in ("prefill:0", "prefill:7,beam:2", "decode:x,prefill:1"):
            with self.assertRaises(ExportError) as e:
                _session.parse(bad)
            self.assertEqual(e.exception.code, USAGE)

    def test_file_labels(self) -> None:
        from kdflow_tvm import _session
        s = _session.parse({"steps": [{"op": "add_sequence", "seq": 0}, {"op": "prefill", "seq": 0, "tokens": 5},
                                      {"op": "add_sequence", "seq": 3}, {"op": "prefill", "seq": 3, "tokens": 2},
                                      {"op": "decode", "seq": 0}, {"op": "remove_sequence", "seq": 3},
                                      {"op": "decode", "seq": 0}]})
        self.assertEqual([f[0] for f in _session.forwards(s)],
                         ["add_sequence", "seq 0 prefill", "add_sequence", "seq 3 prefill", "seq 0 decode 0",
                          "remove_sequence", "seq 0 decode 1"])
        with self.assertRaises(ExportError):
            _session.parse({"steps": [{"op": "fork_sequence", "seq": 0}]})

    def test_cache_arity(self) -> None:
        """create_tir_paged_kv_cache takes a 5th argument (support_sliding_window) in MLC-LLM's
        models; 4 where the VM cannot say."""
        from kdflow_tvm import _session

        class VM:
            def __init__(self, n: int) -> None:
                self.n = n

            def _get_function_arity(self, name: str) -> int:
                return self.n if name == "create_tir_paged_kv_cache" else -1

        self.assertEqual([_session.cache_arity(VM(n)) for n in (4, 5)], [4, 5])
        self.assertEqual(_session.cache_arity(object()), 4)

    def test_write_npy_replaces_only_a_regular_file(self) -> None:
        from kdflow_tvm import _session
        with tempfile.TemporaryDirectory() as d:
            _session.write_npy(d, "output_prefill.npy", np.zeros(3, dtype="float32"))
            _session.write_npy(d, "output_prefill.npy", np.ones(3, dtype="float32"))
            self.assertEqual(float(np.load(os.path.join(d, "output_prefill.npy")).sum()), 3.0)
            os.symlink("/etc/hostname", os.path.join(d, "input_ids.npy"))
            with self.assertRaises(ExportError):
                _session.write_npy(d, "input_ids.npy", np.zeros(1, dtype="int32"))
            self.assertEqual(sorted(os.listdir(d)), ["input_ids.npy", "output_prefill.npy"])
