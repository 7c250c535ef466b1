#!/usr/bin/env python3
"""time-errors.py DATASET.jsonl — the time model's errors on a measured dataset (issue 50).

DATASET: `kdflow costs ... --per-kernel --format jsonl --timing T.json` rows (scripts/gpu-check.sh
writes OUT/dataset.jsonl), each with `predicted_us` and `measured_us`. Prints per kernel the
median and p90 absolute relative error, the share within 10% and 25%, the signed bias (median of
(predicted - measured) / measured) and the time-weighted error (sum |p - m| / sum m); per model the
sums and their ratio. Rows without both times are counted and left out. Exit 0; 2 on bad usage."""

from __future__ import annotations

import json
import sys
from typing import Dict, List, Tuple


def quantile(xs: List[float], q: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    i = min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))
    return s[i]


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    rel: List[float] = []
    signed: List[float] = []
    abs_sum = measured_sum = 0.0
    skipped = 0
    models: Dict[str, Tuple[float, float, int]] = {}
    with open(argv[1]) as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            p, m = row.get("predicted_us"), row.get("measured_us")
            if not isinstance(p, (int, float)) or not isinstance(m, (int, float)) or m <= 0:
                skipped += 1
                continue
            rel.append(abs(p - m) / m)
            signed.append((p - m) / m)
            abs_sum += abs(p - m)
            measured_sum += m
            name = str(row.get("model", "?"))
            ps, ms, n = models.get(name, (0.0, 0.0, 0))
            models[name] = (ps + p, ms + m, n + 1)
    n = len(rel)
    print(f"kernels: {n} with a prediction and a measured time ({skipped} left out)")
    if n:
        print(f"per kernel: median |error| {100 * quantile(rel, 0.5):.1f}%, p90 {100 * quantile(rel, 0.9):.1f}%, "
              f"within 10%: {100 * sum(r <= 0.10 for r in rel) / n:.0f}%, within 25%: "
              f"{100 * sum(r <= 0.25 for r in rel) / n:.0f}%, bias (median signed) {100 * quantile(signed, 0.5):+.1f}%, "
              f"time-weighted {100 * abs_sum / measured_sum:.1f}%")
    print("| model | kernels | predicted µs | measured µs | predicted / measured |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (ps, ms, k) in models.items():
        print(f"| {name} | {k} | {ps:.1f} | {ms:.1f} | {ps / ms:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
