#!/usr/bin/env python3
"""bench.py KDFLOW DUMP_HEADERS OUT_DIR [--runs N] [--clang CLANG] [--scale-sample A,B] [--scales 1,4,16,64]

Times `kdflow extract` on every samples/* folder (or on the folders `--samples` names: a sample's name, or the
path of any build folder, Relay's graph.json + host.c + device.cu or Relax's vm_exec.bin + host.c +
device_<i>.cu, as bench/tvm_models.py and `python3 -m kdflow_tvm onnx` write them) — wall time and peak RSS of the process,
measured by fork/exec + wait4's rusage, median of N runs — next to `clang -fsyntax-only` on
the same sources kdflow parses (host.c as C, device.cu as CUDA device code, with the same
stand-in headers and flags as lib/frontend/clang/host_analyzer.cpp and device_analyzer.cpp): the
floor for any clang-based reader; the same extract with --no-footprints (what footprints and
operation counts cost); where the time goes in the slowest sample (extract --stage-times).
Then a scaling series per --scale-sample (default mlp and the tuned resnet18_tuned) on
synthetic models made of 1, 4, 16 and 64 renamed copies of it (bench/make_synthetic.py;
a sample past 256 KiB of source stops at 16). Prints Markdown tables.
"""
import argparse
import re, os, shutil, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_once(argv):
    """(wall seconds, CPU seconds (user + system), peak RSS MiB, exit status) of one fork/exec of argv."""
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(os.devnull, os.O_RDWR)
            os.dup2(fd, 0); os.dup2(fd, 1); os.dup2(fd, 2)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0, os.waitstatus_to_exitcode(status)


def measure(argv, runs):
    walls, cpus, rss = [], [], []
    for _ in range(runs):
        w, c, m, code = run_once(argv)
        if code != 0:
            sys.exit("bench: failed (exit %d): %s" % (code, " ".join(argv)))
        walls.append(w); cpus.append(c); rss.append(m)
    return statistics.median(walls), statistics.median(rss), statistics.median(cpus)


def clang_cmds(clang, headers, host_c, device_cu):
    host = [clang, "-fsyntax-only", "-x", "c", "-std=gnu11", "-target", "x86_64-unknown-linux-gnu", "-nostdinc",
            "-w", "-ferror-limit=1", "-I" + os.path.join(headers, "host"), host_c]
    text = open(host_c, errors="replace").read()
    if "(half*)" in text and " half;" not in text and "struct half" not in text:  # as host_analyzer.cpp does
        host[-1:-1] = ["-include", "kdflow_host_half.h"]
    dev = os.path.join(headers, "device")
    device = [clang, "-fsyntax-only", "-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib",
              "--cuda-gpu-arch=sm_80", "--cuda-path=/__kdflow__/cuda", "-std=c++17", "-target",
              "x86_64-unknown-linux-gnu", "-nostdinc", "-w", "-ferror-limit=1", "-I" + dev,
              "-include", os.path.join(dev, "kdflow_cuda_prelude.h"), device_cu]
    return host, device


def row(name, size_kb, ex, host, dev):
    floor, floor_cpu = host[0] + dev[0], host[2] + dev[2]
    return "| %s | %d | %.3f | %.3f | %.0f | %.3f | %.3f | %.3f | %.0f | %.2f | %.2f |" % (
        name, size_kb, ex[0], ex[2], ex[1], host[0], dev[0], floor, max(host[1], dev[1]), ex[0] / floor,
        ex[2] / floor_cpu)


HEAD = ("| model | host.c + device.cu (KiB) | extract wall (s) | extract CPU (s) | extract peak RSS (MiB) | "
        "clang host.c wall (s) | clang device.cu wall (s) | clang floor wall (s) | clang peak RSS (MiB) | "
        "extract / floor, wall | extract / floor, CPU |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kdflow"); ap.add_argument("dump_headers"); ap.add_argument("out")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--clang", default=None)
    ap.add_argument("--scale-sample", default="mlp,resnet18_tuned")
    ap.add_argument("--scales", default="1,4,16,64")
    ap.add_argument("--samples", default="", help="comma-separated sample names, or build folders (a path)")
    a = ap.parse_args()
    clang = a.clang or next((c for c in ("clang-15", "clang-14") if shutil.which(c)), None)
    if not clang:
        sys.exit("bench: neither clang-15 nor clang-14 is installed")
    os.makedirs(a.out, exist_ok=True)
    headers = os.path.join(a.out, "headers")
    shutil.rmtree(headers, ignore_errors=True)
    subprocess.check_call([a.dump_headers, headers])
    out_json = os.path.join(a.out, "out.json")
    version = subprocess.run([clang, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print("kdflow extract vs `%s -fsyntax-only` (%s); median of %d runs; %d CPUs, load average %.1f at start\n"
          % (clang, version, a.runs, os.cpu_count(), os.getloadavg()[0]))

    print("## Samples\n\n" + HEAD)
    samples = a.samples.split(",") if a.samples else sorted(
        d for d in os.listdir(os.path.join(ROOT, "samples"))
        if any(os.path.isfile(os.path.join(ROOT, "samples", d, f)) for f in ("graph.json", "vm_exec.bin")))
    costs = []  # (model, extract, extract --no-footprints)
    where = {}  # a --samples entry may be a build folder anywhere (bench/tvm_models.py's)
    for i, m in enumerate(samples):
        if os.sep in m:
            where[os.path.basename(os.path.normpath(m))] = os.path.abspath(m)
            samples[i] = os.path.basename(os.path.normpath(m))
    for m in samples:
        d = where.get(m, os.path.join(ROOT, "samples", m))
        h = os.path.join(d, "host.c")
        # Relax builds (TVM 0.20): kdflow parses every device_<i>.cu, one CUDA module per kernel;
        # the clang floor is then host.c plus one parse per device_<i>.cu (walls and CPU added).
        numbered = sorted((f for f in os.listdir(d) if re.fullmatch(r"device_[0-9]+\.cu", f)),
                          key=lambda f: int(f[7:-3]))
        relax = os.path.isfile(os.path.join(d, "vm_exec.bin")) or not os.path.isfile(os.path.join(d, "device.cu"))
        devs = [os.path.join(d, f) for f in numbered] if relax and numbered else [os.path.join(d, "device.cu")]
        ex = measure([a.kdflow, "extract", d, "-q", "-o", out_json], a.runs)
        hc, _ = clang_cmds(clang, headers, h, devs[0])
        dm = [measure(clang_cmds(clang, headers, h, dv)[1], a.runs) for dv in devs]
        dev = (sum(x[0] for x in dm), max(x[1] for x in dm), sum(x[2] for x in dm))
        size = (os.path.getsize(h) + sum(os.path.getsize(dv) for dv in devs)) // 1024
        print(row(m, size, ex, measure(hc, a.runs), dev), flush=True)
        costs.append((m, ex, measure([a.kdflow, "extract", d, "-q", "--no-footprints", "-o", out_json], a.runs)))

    print("\n## Footprints and operation counts: extract with and without them (--no-footprints)\n")
    print("| model | extract wall (s) | CPU (s) | --no-footprints wall (s) | CPU (s) | wall ratio | CPU ratio |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for m, ex, nf in costs:
        print("| %s | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f |" % (m, ex[0], ex[2], nf[0], nf[2], ex[0] / nf[0],
                                                                  ex[2] / nf[2]))
    if costs:
        slowest = max(costs, key=lambda c: c[1][0])[0]
        r = subprocess.run([a.kdflow, "extract", where.get(slowest, os.path.join(ROOT, "samples", slowest)), "-q",
                            "--stage-times", "-o",
                            out_json], capture_output=True, text=True)
        print("\n## Where the time goes: %s (the slowest sample; one run of extract --stage-times)\n" % slowest)
        print("```\n" + r.stderr.rstrip() + "\n```")
    if not a.scales:
        return
    for sample in a.scale_sample.split(","):
        scaling(a, sample, clang, headers, out_json)


def scaling(a, sample, clang, headers, out_json):
    src = os.path.join(ROOT, "samples", sample)
    big = sum(os.path.getsize(os.path.join(src, f)) for f in ("host.c", "device.cu")) > 256 * 1024
    scales = [int(x) for x in a.scales.split(",") if not (big and int(x) > 16)]
    print("\n## Scaling: %s repeated N times (bench/make_synthetic.py; extract --no-params --no-relay)\n" % sample)
    print(HEAD.replace("| model |", "| N |"))
    base = None
    for n in scales:
        d = os.path.join(a.out, "synthetic_%s_%dx" % (sample, n))
        subprocess.check_call([sys.executable, os.path.join(ROOT, "bench", "make_synthetic.py"), src, d, str(n)])
        h, dv = os.path.join(d, "host.c"), os.path.join(d, "device.cu")
        runs = a.runs if n < 64 else max(1, min(a.runs, 3))
        ex = measure([a.kdflow, "extract", d, "--no-params", "--no-relay", "-q", "-o", out_json], runs)
        hc, dc = clang_cmds(clang, headers, h, dv)
        size = (os.path.getsize(h) + os.path.getsize(dv)) // 1024
        print(row("%d×" % n, size, ex, measure(hc, runs), measure(dc, runs)), flush=True)
        if base is None:
            base = (n, ex[0], ex[2])
        last = (n, ex[0], ex[2])
    if base and last[0] != base[0]:
        print("\nextract %d×/%d×: wall %.1f, CPU %.1f (linear would be %.0f)" % (
            last[0], base[0], last[1] / base[1], last[2] / base[2], last[0] / base[0]))


if __name__ == "__main__":
    main()
