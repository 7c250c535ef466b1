"""The kdflow Python API (python/kdflow) against the checkout's build and samples: the flow's
typed objects from golden JSON (no executable needed), and extract, costs, replay, view, codegen
and the error type through the executable (skipped with a reason where it is not built)."""
from __future__ import annotations

import os
import tempfile
import unittest

import kdflow
from kdflow import KdflowError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
GOLDEN = os.path.join(ROOT, "test", "golden")


def write_npy_f32(path: str, values: list, shape: tuple) -> None:
    """A float32 .npy (format 1.0) without numpy."""
    import struct
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % ", ".join(str(d) for d in shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%df" % len(values), *values))


def have_binary() -> bool:
    try:
        return os.access(kdflow.binary(), os.X_OK)
    except KdflowError:
        return False


class FlowObjects(unittest.TestCase):
    def test_mlp_cublas_golden(self) -> None:
        flow = kdflow.load(os.path.join(GOLDEN, "mlp_cublas.json"))
        self.assertEqual(flow.schema, "kdflow/1")
        self.assertEqual(len(flow.launches), 6)
        self.assertEqual(len(flow.library_calls), 4)
        self.assertEqual(flow.collectives, [])
        first = flow.launches[0]
        self.assertEqual(len(first.grid), 3)
        self.assertTrue(all(isinstance(d, int) for d in first.grid + first.block))
        names = {b.name for b in flow.buffers}
        for a in first.args:
            if a.buffer is not None:
                self.assertIn(flow.buffers[a.buffer].name, names)
        node = flow.nodes[first.node]
        self.assertIn(first.id, node.kernels)
        self.assertEqual(flow.library_calls[0].name, "tvm.contrib.cublas.matmul")

    def test_scalars_keep_their_expression(self) -> None:
        flow = kdflow.load(os.path.join(GOLDEN, "ffi_batch_mlp.json"))
        scalars = [a for k in flow.launches for a in k.args if a.buffer is None]
        self.assertTrue(scalars)
        self.assertEqual((scalars[0].value, scalars[0].expr, scalars[0].dtype), (8, "n", "int64"))


@unittest.skipUnless(have_binary(), "no kdflow executable (build the checkout or set KDFLOW_BINARY)")
class ThroughTheExecutable(unittest.TestCase):
    sample = os.path.join(SAMPLES, "relax_mlp")

    def test_extract_matches_the_golden_flow(self) -> None:
        flow = kdflow.extract(self.sample)
        golden = kdflow.load(os.path.join(GOLDEN, "relax_mlp.json"))
        self.assertEqual([k.name for k in flow.launches], [k.name for k in golden.launches])
        self.assertEqual([k.grid for k in flow.launches], [k.grid for k in golden.launches])

    def test_costs_rows(self) -> None:
        rows = kdflow.costs(self.sample)
        self.assertGreaterEqual(len(rows), 5)
        self.assertTrue(all(isinstance(r, dict) for r in rows))

    def test_replay_on_the_cpu_compares_the_output(self) -> None:
        r = kdflow.replay(self.sample, backend="cpu")
        self.assertEqual(r.status, 0, r.stdout + r.stderr)
        self.assertEqual(len(r.checks), 1)
        self.assertTrue(r.checks[0]["passed"])
        self.assertEqual(r.checks[0]["reference"], "output_0.npy")
        self.assertEqual(len(r.kernel_times), 5)

    def test_replay_with_a_wrong_reference_is_a_result(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            wrong = os.path.join(tmp, "wrong.npy")
            write_npy_f32(wrong, [-3.0 + 0.2 * i for i in range(10)], (1, 10))
            r = kdflow.replay(self.sample, backend="cpu", extra=["--expect", wrong])
        self.assertEqual(r.status, 1)
        self.assertFalse(r.passed)
        self.assertFalse(r.checks[0]["passed"])
        self.assertGreater(r.checks[0]["mismatches"], 0)

    def test_view_and_codegen_write_their_outputs(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            page = kdflow.view(self.sample, os.path.join(tmp, "page.html"))
            self.assertGreater(os.path.getsize(page), 10000)
            program = kdflow.codegen(self.sample, os.path.join(tmp, "program"))
            self.assertTrue(os.path.exists(os.path.join(program, "run.cpp")))

    def test_errors_carry_kdflows_line_and_status(self) -> None:
        with self.assertRaises(KdflowError) as e:
            kdflow.extract(os.path.join(SAMPLES, "no_such_model"))
        self.assertEqual(e.exception.status, 66)
        self.assertIn("no_such_model", e.exception.message)
        self.assertNotIn("\n", e.exception.message)


if __name__ == "__main__":
    unittest.main()
