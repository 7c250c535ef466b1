"""The one error type the exporter raises: one line a user can act on, and the exit code the
command line returns for it (the same sysexits codes kdflow itself uses, docs/errors.md)."""

from __future__ import annotations

USAGE = 2          # a wrong argument: a target that is not CUDA, a shape that does not parse
DATA_ERROR = 65    # the model or build cannot be exported as it is (symbolic shapes not given, ...)
NO_INPUT = 66      # a file named on the command line is missing
UNAVAILABLE = 69   # TVM (or onnx) is not importable, or this TVM release is not supported
SOFTWARE = 70      # TVM itself failed on the model (the command line's last resort)
CANT_CREATE = 73   # the output folder exists and is not empty, or cannot be written


class ExportError(Exception):
    """An error with a one-line message naming what to do, and its exit code."""

    def __init__(self, message: str, code: int = DATA_ERROR) -> None:
        super().__init__(" ".join(message.split()))
        self.code = code
