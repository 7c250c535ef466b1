"""`python -m kdflow ARGS` and the `kdflow` console script: the kdflow executable itself."""
from __future__ import annotations

import os
import sys

from ._binary import KdflowError, binary


def main() -> None:
    try:
        exe = binary()
    except KdflowError as e:
        print(e.message, file=sys.stderr)
        sys.exit(e.status)
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
