"""Unit tests of sharded (tensor-parallel) builds in kdflow_tvm, without TVM: the per-rank params
checked and written as params_shard<r>.bin, the packed tuple a sharded module must take, the
unsharded reference model's arguments, and the note llm_session adds for a sharded model. A
small stand-in for TVM's Relax objects (functions, variables, tensor and tuple types) replaces
TVM; the real builds are test/tvm/sharded_models.py."""

from __future__ import annotations

import json
import os
import tempfile
import types
import unittest
from typing import Any, Dict, List, Optional

import numpy as np

import kdflow_tvm
from kdflow_tvm import _session, _shards
from kdflow_tvm.errors import USAGE, ExportError


# ----------------------------------------------------------------------------- a stand-in TVM
class Function:
    def __init__(self, params: List[Any], num_input: Optional[int] = None) -> None:
        self.params = params
        self.attrs = {"num_input": num_input} if num_input is not None else None


class GlobalVar:
    def __init__(self, name: str) -> None:
        self.name_hint = name


class Var:
    def __init__(self, name: str, ty: Any) -> None:
        self.name_hint = name
        self.struct_info = ty


class TensorType:
    def __init__(self, shape: List[int], dtype: str = "float32") -> None:
        self.shape = [types.SimpleNamespace(value=d) for d in shape]
        self.dtype = dtype


class TupleType:
    def __init__(self, fields: List[Any]) -> None:
        self.fields = fields


class Module:
    def __init__(self, **functions: Function) -> None:
        self.functions = {GlobalVar(n): f for n, f in functions.items()}


def fake_tvm(saved: Optional[List[Dict[str, Any]]] = None) -> Any:
    """What _shards and _relax touch of TVM: relax.Function, runtime.tensor, save_param_dict."""
    def save(d: Dict[str, Any]) -> bytes:
        if saved is not None:
            saved.append(d)
        return json.dumps({k: list(np.shape(v)) for k, v in d.items()}).encode()
    runtime = types.SimpleNamespace(tensor=lambda a: np.array(a), save_param_dict=save)
    return types.SimpleNamespace(relax=types.SimpleNamespace(Function=Function), runtime=runtime)


def packed_module(n: int, inputs: Optional[List[Var]] = None, name: str = "main") -> Module:
    x = inputs if inputs is not None else [Var("x", TensorType([4, 64]))]
    tup = Var("packed_params", TupleType([TensorType([8, 8]) for _ in range(n)]))
    return Module(**{name: Function([*x, tup], num_input=len(x))})


def shard(r: int, names: List[str] = ["l1.weight", "l2.weight"], rows: int = 4) -> Dict[str, np.ndarray]:
    return {n: np.full((rows, 8), float(r), dtype="float32") for n in names}


# ----------------------------------------------------------------------------- the tests
class ShardParamsTest(unittest.TestCase):
    def test_a_list_of_dicts_is_sharded_and_nothing_else(self) -> None:
        self.assertTrue(_shards.is_sharded([shard(0), shard(1)]))
        self.assertTrue(_shards.is_sharded((shard(0),)))
        for one in (None, {}, shard(0), [("w", np.zeros(2))], [], "params"):
            self.assertFalse(_shards.is_sharded(one), one)

    def test_the_same_names_in_the_same_order_of_one_shape_on_every_rank(self) -> None:
        self.assertEqual(_shards.check_shards([shard(0), shard(1), shard(2)]), ["l1.weight", "l2.weight"])
        cases = {"lacks l2.weight": [shard(0), shard(1, ["l1.weight"])],
                 "has b that shard 0 has not": [shard(0), shard(1, ["l1.weight", "l2.weight", "b"])],
                 "orders them otherwise": [shard(0), shard(1, ["l2.weight", "l1.weight"])],
                 "float32[3, 8] on rank 1": [shard(0), shard(1, rows=3)]}
        for what, shards in cases.items():
            with self.assertRaises(ExportError) as e:
                _shards.check_shards(shards)
            self.assertIn(what, str(e.exception))
            self.assertEqual(e.exception.code, USAGE)
        with self.assertRaises(ExportError):
            _shards.check_shards([{}])

    def test_params_of_each_rank_converted(self) -> None:
        got = kdflow_tvm._shards_of([{"w": [[1, 2]]}, {"w": [[3, 4]]}])  # type: ignore[attr-defined]
        assert got is not None
        self.assertEqual([s["w"].tolist() for s in got], [[[1, 2]], [[3, 4]]])
        self.assertIsNone(kdflow_tvm._shards_of({"w": [1]}))  # type: ignore[attr-defined]

    def test_reference_model_only_for_sharded_builds(self) -> None:
        rm = kdflow_tvm._reference_model  # type: ignore[attr-defined]
        self.assertEqual(rm(True, False), (True, None))
        self.assertEqual(rm(False, True), (False, None))
        on, model = rm(("mod", {"w": [1.0]}), True)
        self.assertTrue(on)
        assert model is not None
        self.assertEqual(model[0], "mod")
        self.assertEqual(model[1]["w"].tolist(), [1.0])
        with self.assertRaises(ExportError) as e:
            rm(("mod", {}), False)
        self.assertIn("is for a sharded build", str(e.exception))
        with self.assertRaises(ExportError):
            rm("yes", True)

    def test_one_params_file_per_rank_and_no_params_bin(self) -> None:
        saved: List[Dict[str, Any]] = []
        info: Dict[str, Any] = {}
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out")
            with kdflow_tvm._folder.Staging(out) as st:
                _shards.write_shard_params(fake_tvm(saved), [shard(0), shard(1)], st, info)
            self.assertEqual(sorted(os.listdir(out)), ["params_shard0.bin", "params_shard1.bin"])
            with open(os.path.join(out, "params_shard1.bin")) as f:
                self.assertEqual(json.load(f), {"l1.weight": [4, 8], "l2.weight": [4, 8]})
        self.assertEqual(info["shards"], 2)
        self.assertEqual(info["params_shards"], {"files": ["params_shard0.bin", "params_shard1.bin"],
                                                 "names": ["l1.weight", "l2.weight"]})
        # Each rank's own values, by name, in the packed tuple's order.
        self.assertEqual([list(s) for s in saved], [["l1.weight", "l2.weight"]] * 2)
        self.assertEqual([float(s["l2.weight"][0, 0]) for s in saved], [0.0, 1.0])


class PackedTest(unittest.TestCase):
    def test_weights_as_one_packed_tuple(self) -> None:
        tvm = fake_tvm()
        self.assertEqual(_shards.packed_count(tvm, packed_module(2), "main"), 2)
        _shards.check_packed(tvm, packed_module(2), "main", ["l1.weight", "l2.weight"])
        with self.assertRaises(ExportError) as e:
            _shards.check_packed(tvm, packed_module(3), "main", ["l1.weight", "l2.weight"])
        self.assertIn("packed tuple of 3 tensors; each shard holds 2", str(e.exception))

    def test_weights_not_packed_are_refused_with_the_fix(self) -> None:
        tvm = fake_tvm()
        plain = Module(main=Function([Var("x", TensorType([4, 64])), Var("w", TensorType([8, 64]))]))
        self.assertIsNone(_shards.packed_count(tvm, plain, "main"))
        with self.assertRaises(ExportError) as e:
            _shards.check_packed(tvm, plain, "main", ["w"])
        self.assertIn('"param_mode": "packed"', str(e.exception))
        with self.assertRaises(ExportError) as e:
            _shards.check_packed(tvm, packed_module(2, name="forward"), "main", ["a", "b"])
        self.assertIn("pass function=", str(e.exception))

    def test_the_reference_model_takes_the_same_inputs(self) -> None:
        tvm = fake_tvm()
        _shards.check_same_inputs(tvm, packed_module(2), packed_module(1), "main")
        other = packed_module(1, [Var("x", TensorType([4, 32]))])
        with self.assertRaises(ExportError) as e:
            _shards.check_same_inputs(tvm, packed_module(2), other, "main")
        self.assertIn("(x: float32[4, 32])", str(e.exception))

    def test_unsharded_arguments_are_the_full_weights_in_order(self) -> None:
        tvm = fake_tvm()
        full = {"l1.weight": np.ones((8, 8), "float32"), "l2.weight": np.zeros((8, 8), "float32")}
        mod, extra = _shards.unsharded_args(tvm, packed_module(2), full, "main")
        self.assertEqual(len(extra), 1)
        self.assertEqual([float(a[0, 0]) for a in extra[0]], [1.0, 0.0])
        with self.assertRaises(ExportError) as e:
            _shards.unsharded_args(tvm, packed_module(3), full, "main")
        self.assertIn("2 arrays for 3 weights", str(e.exception))
        bare = Module(main=Function([Var("x", TensorType([4]))]))
        with self.assertRaises(ExportError):
            _shards.unsharded_args(tvm, bare, full, "main")
        self.assertEqual(_shards.unsharded_args(tvm, bare, {}, "main")[1], [])

    def test_an_llm_and_its_reference_have_the_same_functions(self) -> None:
        tvm = fake_tvm()
        a = Module(prefill=packed_module(2, name="prefill").functions.popitem()[1],
                   create=Function([Var("n", TensorType([1], "int64"))]))
        b = Module(prefill=packed_module(5, name="prefill").functions.popitem()[1],
                   create=Function([Var("n", TensorType([1], "int64"))]))
        _shards.same_functions(tvm, a, b)  # the packed params differ in size: not compared
        with self.assertRaises(ExportError) as e:
            _shards.same_functions(tvm, a, Module(prefill=b.functions.popitem()[1]))
        self.assertIn("reference_make's module has functions prefill", str(e.exception))


class SessionNoteTest(unittest.TestCase):
    def test_the_note_is_added_once_and_the_rest_kept(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "build_info.json"), "w") as f:
                json.dump({"shards": 2, "notes": ["earlier"]}, f)
            _session.add_note(d, "from the unsharded model")
            _session.add_note(d, "from the unsharded model")
            with open(os.path.join(d, "build_info.json")) as f:
                info = json.load(f)
            self.assertEqual(info, {"shards": 2, "notes": ["earlier", "from the unsharded model"]})
            self.assertEqual(os.listdir(d), ["build_info.json"])
        with tempfile.TemporaryDirectory() as d:
            _session.add_note(d, "nothing to add to")
            self.assertEqual(os.listdir(d), [])


if __name__ == "__main__":
    unittest.main()
