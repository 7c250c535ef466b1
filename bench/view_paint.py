#!/usr/bin/env python3
"""view_paint.py KDFLOW [--runs N] [--synthetic N] — first paint of `kdflow view` pages in
headless chromium (test/view/check_view.py's checks and timings, N runs, medians), on every
sample and a synthetic graph of N copies of resnet18_tuned; prints docs/benchmarks.md's table.
Not a test: the figures depend on the machine."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kdflow")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--synthetic", type=int, default=176)
    a = ap.parse_args()
    samples = sorted(d for d in os.listdir(os.path.join(ROOT, "samples"))
                     if os.path.isdir(os.path.join(ROOT, "samples", d)))
    runs = []
    for i in range(a.runs):
        out = os.path.join(tempfile.mkdtemp(prefix="kdflow-paint-"), "times.json")
        cmd = [sys.executable, os.path.join(ROOT, "test", "view", "check_view.py"), a.kdflow, "--times", out,
               "--synthetic", str(a.synthetic)]
        for s in samples:
            cmd += ["--sample", os.path.join(ROOT, "samples", s)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        runs.append({t["sample"]: t for t in json.load(open(out))})
    print("| model | launches | page (KiB) | bytes / launch | kdflow view (s) | graph painted (ms) | search (ms) | fold all (ms) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in runs[0]:
        t = [r[name] for r in runs]
        med = lambda k: statistics.median(x.get(k, 0) or 0 for x in t)
        n = t[0]["launches"]
        print(f"| {name} | {n} | {t[0]['page_bytes'] / 1024:.0f} | "
              f"{(t[0]['page_bytes'] / n) if n else 0:.0f} | {med('view_s'):.2f} | {med('graph_painted_ms'):.0f} | "
              f"{med('search_ms'):.0f} | {med('fold_all_ms'):.0f} |")


if __name__ == "__main__":
    main()
