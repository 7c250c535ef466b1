#!/usr/bin/env python3
"""cpu_replay.py — benchmark of `kdflow replay --backend cpu` (not a test; docs/benchmarks.md).

For every sample with an input and a reference output (samples/<m>, or ../shared/samples/<m>
when the params are only there) it runs the CPU replay twice, as it is (kernels that never
synchronise run each block as a plain loop) and with KDFLOW_CPU_FIBERS=all (every block's
threads as fibers), and reports per sample: wall time, the JIT's compile time, kernel time,
the CUDA threads run (sum over launches of grid x block), time per thread, the kernels'
FLOPs counted from their code (extract's `ops`) per second, and the loop kernels' time as
loops and as fibers. Where one-thread kernels run in batches of blocks, a third run with
KDFLOW_CPU_BATCH=off (one block per call) gives their side-by-side figure. These runs pass
--no-cache, so their compile time is a compile. Output: one Markdown table per part on stdout.

--cache (issue 40) instead replays each sample twice into a fresh, empty compile cache
(KDFLOW_CACHE_DIR in a temporary folder): cold (compiled and stored) and warm (loaded from
the cache), --repeat runs each, and reports wall time and compile (or load) time side by side,
with the warm run's outputs checked equal to the cold run's.

usage: bench/cpu_replay.py KDFLOW [--samples a,b] [--repeat N] [--shared DIR] [--cache]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def sample_dirs(names, shared):
    out = []
    for m in names:
        d = os.path.join("samples", m)
        if not os.path.isfile(os.path.join(d, "output_0.npy")):
            continue
        if not (os.path.isfile(os.path.join(d, "params.bin")) or os.path.isfile(os.path.join(d, "vm_exec.bin"))):
            alt = os.path.join(shared, m)
            if not os.path.isfile(os.path.join(alt, "params.bin")):
                print(f"cpu_replay: {m}: skipped (params.bin only in {shared}, which is absent)", file=sys.stderr)
                continue
            d = alt
        out.append((m, d))
    return out


def replay(kdflow, d, repeat, fibers, tmp, batch="on", cache=None, out=None):
    timing = os.path.join(tmp, "t.json")
    env = dict(os.environ, KDFLOW_CPU_FIBERS=fibers, KDFLOW_CPU_BATCH=batch, NO_COLOR="1")
    args = [kdflow, "replay", d, "--backend", "cpu", "--warmup", "0", "--repeat", str(repeat), "--timing-json", timing]
    if cache:
        env["KDFLOW_CACHE_DIR"] = cache
    else:
        args.append("--no-cache")
    if out:
        args += ["--output-dir", out]
    t0 = time.monotonic()
    r = subprocess.run(args, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if r.returncode not in (0, 3):  # 3: ran, but every reference is one a constant would match (squeezenet)
        raise SystemExit(f"cpu_replay: {d}: replay exited {r.returncode}: {r.stderr.strip().splitlines()[-1:]}")
    way = dict(re.findall(r"replay: cpu: kernel (\S+) runs each block (as fibers|as a loop|as thread loops|as one thread|as batches)", r.stderr))
    # A module compiled, or (with a cache) loaded from it: either is the JIT's part of the run.
    compile_s = sum(float(x) for x in re.findall(
        r"(?:compiled for the host|loaded from the compile cache \(key \w+\)) in ([0-9.]+) s", r.stderr))
    with open(timing) as f:
        t = json.load(f)
    return wall, compile_s, way, t, r.stderr


def cold_warm(kdflow, samples, repeat):
    """Cold and warm replays into one fresh cache per sample; one Markdown table."""
    print("| sample | modules | kernels | cold wall s | cold compile s | warm wall s | warm load s | wall, warm / cold "
          "| cache entry KiB | outputs |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for m, d in samples:
        with tempfile.TemporaryDirectory() as tmp:
            cache = os.path.join(tmp, "cache")
            wc, cc, _, tc, ec = replay(kdflow, d, repeat, "auto", tmp, cache=cache, out=os.path.join(tmp, "cold"))
            ww, cw, _, tw, ew = replay(kdflow, d, repeat, "auto", tmp, cache=cache, out=os.path.join(tmp, "warm"))
            modules = len(re.findall(r"compiled for the host in", ec))
            hits = len(re.findall(r"loaded from the compile cache", ew))
            if hits != modules or re.search(r"compiled for the host in", ew):
                raise SystemExit(f"cpu_replay: {m}: the warm run compiled again ({hits} of {modules} modules loaded)")
            same = all(open(os.path.join(tmp, "cold", f), "rb").read() == open(os.path.join(tmp, "warm", f), "rb").read()
                       for f in sorted(os.listdir(os.path.join(tmp, "cold"))))
            kib = sum(os.path.getsize(os.path.join(cache, f)) for f in os.listdir(cache)) / 1024
            print("| %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f | %s |"
                  % (m, modules, len({k["name"] for k in tc["kernels"]}), wc, cc, ww, cw, ww / wc, kib,
                     "equal bytes" if same else "DIFFER"))
    print()
    print("%d CPU threads, load average %.1f, --repeat %d (cold: empty cache, compiled and stored; warm: the same "
          "cache, loaded)" % (os.cpu_count(), os.getloadavg()[0], repeat))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kdflow")
    ap.add_argument("--samples", default="")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shared", default="../shared/samples")
    ap.add_argument("--cache", action="store_true", help="cold against warm compile cache instead")
    a = ap.parse_args()
    names = a.samples.split(",") if a.samples else sorted(os.listdir("samples"))
    if a.cache:
        cold_warm(a.kdflow, sample_dirs(names, a.shared), a.repeat)
        return
    rows, loops, batches = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for m, d in sample_dirs(names, a.shared):
            flow = os.path.join(tmp, "flow.json")
            subprocess.run([a.kdflow, "extract", d, "-q", "-o", flow], check=True)
            with open(flow) as f:
                df = json.load(f)
            flops = {k["id"]: (k.get("ops") or {}).get("flops", 0) for k in df["kernels"]}
            wall, comp, way, t, _ = replay(a.kdflow, d, a.repeat, "auto", tmp)
            wall_f, comp_f, _, tf, _ = replay(a.kdflow, d, a.repeat, "all", tmp)
            n_batch = sum(1 for k in t["kernels"] if way.get(k["name"]) == "as batches")
            if n_batch:
                wall_o, _, _, to, _ = replay(a.kdflow, d, a.repeat, "auto", tmp, batch="off")
                one_us = sum(k["median_us"] for k in to["kernels"])
                batches.append((m, n_batch, sum(k["median_us"] for k in t["kernels"]) / 1e6, one_us / 1e6, wall, wall_o))
            ks = t["kernels"]
            threads = sum(k["grid"][0] * k["grid"][1] * k["grid"][2] * k["block"][0] * k["block"][1] * k["block"][2]
                          for k in ks)
            kern_us = sum(k["median_us"] for k in ks)
            fl = sum(flops.get(k["kernel"], 0) for k in ks)
            n_fib = sum(1 for k in ks if way.get(k["name"]) == "as fibers")
            loop_ids = {k["kernel"] for k in ks if way.get(k["name"]) == "as a loop"}
            loop_us = sum(k["median_us"] for k in ks if k["kernel"] in loop_ids)
            loop_as_fib_us = sum(k["median_us"] for k in tf["kernels"] if k["kernel"] in loop_ids)
            rows.append((m, len(ks), n_fib, threads, wall, comp, kern_us / 1e6, kern_us * 1e3 / threads,
                         fl / kern_us if kern_us else 0))
            loops.append((m, len(loop_ids), loop_us / 1e6, loop_as_fib_us / 1e6, wall_f))
    print("| sample | launches | of them fibers | CUDA threads | wall s | compile s | kernels s | ns / thread | MFLOP/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print("| %s | %d | %d | %d | %.2f | %.2f | %.3f | %.1f | %.1f |" % r)
    print()
    print("| sample | loop launches | as loops s | as fibers s | fibers / loops | wall, all as fibers s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for m, n, lo, fi, wf in loops:
        ratio = "%.1f" % (fi / lo) if lo > 0 else "-"
        print("| %s | %d | %.3f | %.3f | %s | %.2f |" % (m, n, lo, fi, ratio, wf))
    print()
    print("| sample | batched launches | kernels s | one block per call s | speed-up | wall s | wall, one block per call s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for m, n, kb, ko, wb, wo in batches:
        print("| %s | %d | %.3f | %.3f | %.1f | %.2f | %.2f |" % (m, n, kb, ko, ko / kb if kb else 0, wb, wo))
    print()
    print("%d CPU threads, load average %.1f, %d timed runs each (median per kernel)"
          % (os.cpu_count(), os.getloadavg()[0], a.repeat))


if __name__ == "__main__":
    main()
