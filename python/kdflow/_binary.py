"""Finding and running the kdflow executable the package drives."""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import List, Optional, Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))


class KdflowError(Exception):
    """A kdflow command failed: `message` is kdflow's one line (or the last lines of its
    stderr), `status` its exit status (docs/errors.md: 64 usage, 65 bad data, 66 missing input,
    69 unavailable, 70 software, 73 cannot create, 74 I/O)."""

    def __init__(self, message: str, status: int, command: Sequence[str]) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.command = list(command)

    def __str__(self) -> str:
        return f"{self.message} (exit {self.status})"


def binary() -> str:
    """The kdflow executable: $KDFLOW_BINARY, else the one installed with this package
    (kdflow/bin/kdflow in the wheel), else a build of the checkout this package lives in
    (build/kdflow), else `kdflow` on the PATH when it is not this package's own launcher."""
    env = os.environ.get("KDFLOW_BINARY")
    if env:
        return env
    for candidate in (os.path.join(_HERE, "bin", "kdflow"),
                      os.path.join(os.path.dirname(os.path.dirname(_HERE)), "build", "kdflow")):
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("kdflow")
    if found:
        with open(found, "rb") as f:
            if f.read(2) != b"#!":  # the package's own console script would call back here
                return found
    raise KdflowError("kdflow: error: no kdflow executable (install the wheel, build the checkout, or set "
                      "KDFLOW_BINARY)", 69, [])


def run(args: Sequence[str], ok: Sequence[int] = (0,), env: Optional[dict] = None) -> subprocess.CompletedProcess:
    """Runs `kdflow ARGS`; a status outside `ok` raises KdflowError with kdflow's message."""
    cmd: List[str] = [binary(), *[str(a) for a in args]]
    e = dict(os.environ, NO_COLOR="1")
    if env:
        e.update(env)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    if p.returncode not in ok:
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ": error: " in ln]
        message = errors[-1] if errors else (lines[-1] if lines else f"kdflow exited {p.returncode}")
        raise KdflowError(message, p.returncode, cmd)
    return p
