"""python3 -m kdflow_tvm onnx MODEL.onnx -o DIR [--shape NAME=1x3x224x224 ...] [--arch sm_90]
[--no-reference] [--exec-mode bytecode|compiled] [--force]: the folder kdflow reads, from an ONNX file."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import List, Optional

from . import __version__, _onnx, _tvm, build
from .errors import ExportError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m kdflow_tvm",
                                description="Build a model with TVM for CUDA (C host) into the folder kdflow reads.")
    p.add_argument("--version", action="version", version=f"kdflow_tvm {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    o = sub.add_parser("onnx", help="an ONNX file")
    o.add_argument("model", help="MODEL.onnx")
    o.add_argument("-o", "--out", required=True, help="output folder (new or empty)")
    o.add_argument("--shape", action="append", default=[], metavar="NAME=1x3x224x224",
                   help="an input's shape (needed where the file's is symbolic; repeatable)")
    o.add_argument("--arch", default=None, help="CUDA architecture (default: the GPU's, else sm_90)")
    o.add_argument("--exec-mode", default="bytecode", choices=["bytecode", "compiled"], help="Relax VM mode")
    o.add_argument("--no-reference", action="store_true", help="skip TVM's CPU run (outputs and every node's result)")
    o.add_argument("--seed", type=int, default=42, help="random inputs' seed")
    o.add_argument("--force", action="store_true", help="replace a folder that is not empty")
    o.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        shapes = dict(_onnx.parse_shape(s) for s in args.shape)
        tvm = _tvm.import_tvm()
        _tvm.check_supported(tvm)
        model, in_shapes, dtypes = _onnx.load(args.model, shapes)
        mod, params = _onnx.to_ir(tvm, model, in_shapes, dtypes)
        build(mod, "cuda", out=args.out, params=params or None, inputs=True, reference=not args.no_reference,
              arch=args.arch, exec_mode=args.exec_mode, force=args.force, seed=args.seed, quiet=args.quiet)
    except ExportError as e:
        print(f"kdflow_tvm: error: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        print("kdflow_tvm: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # TVM's own failure while building or running the model: one line
        last = (str(e).strip().splitlines() or [""])[-1][:300]
        print(f"kdflow_tvm: error: TVM failed on this model ({type(e).__name__}: {last}); nothing was written",
              file=sys.stderr)
        return 70
    d = shlex.quote(args.out)
    ref = "" if args.no_reference else " --backend cpu"
    print(f"next:\n  kdflow show {d}\n  kdflow costs {d}\n  kdflow extract {d} -o {shlex.quote(os.path.basename(os.path.normpath(args.out)) + '.json')}\n"
          f"  kdflow replay {d}{ref}" + ("" if args.no_reference else "   # compares every node with TVM's"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
