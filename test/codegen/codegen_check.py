#!/usr/bin/env python3
"""kdflow codegen, checked against kdflow replay on the fake CUDA driver.

For one build (`one [options] -- ARGS...`, ARGS as kdflow codegen and replay take them: DIR, --flow,
--params, --session ...) or for every bundled sample with a golden flow (`samples`):

1. `kdflow codegen ARGS -o OUT` writes the program;
2. it is built with CMake and the system compiler, -Wall -Wextra -Werror, and (where clang-format
   is installed) its sources are in the style of its .clang-format;
3. `run` runs once on the fake driver, and `kdflow replay ARGS --warmup 0 --repeat 1` too,
   each writing the fake's log;
4. compare_fake_logs.py compares the two logs: the same allocations, uploads and steps (a
   sharded build, --ranks N: every rank of the program alike, and each agreeing with its own
   thread of the replay, which runs every rank on the fake's one device);
5. with --plant, two pointer arguments of one launch are swapped in run.cpp, the program
   rebuilt and run again: the comparison must now fail (the check can fail).

The fake runs no kernel, so `run` and replay both report differing outputs (exit 1), or
nothing compared; any other exit is a failure. Exit 0 when every build passed, 1 otherwise.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "compare_fake_logs.py")


def sh(cmd, env=None, cwd=None):
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


class Checker:
    def __init__(self, kdflow, fake, fake_cublas, work, plant):
        self.kdflow, self.fake, self.fake_cublas, self.work, self.plant = kdflow, fake, fake_cublas, work, plant
        self.failures = []
        self.seconds = {"generate": 0.0, "build": 0.0, "run": 0.0}

    def env(self, log):
        e = dict(os.environ)
        e["KDFLOW_CUDA_LIBRARY"] = self.fake
        e["KDFLOW_CUBLAS_LIBRARY"] = self.fake_cublas
        e["KDFLOW_FAKE_CUDA_LOG"] = log
        e.pop("KDFLOW_FAKE_CUDA_FAULT", None)
        return e

    def fail(self, name, why):
        self.failures.append(f"{name}: {why}")
        print(f"codegen: FAIL {name}: {why}", flush=True)
        return False

    def build(self, prog):
        t = time.time()
        rc, out = sh(["cmake", "-S", prog, "-B", os.path.join(prog, "build"), "-DCMAKE_BUILD_TYPE=",
                      "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror"])
        if rc == 0:
            rc, out = sh(["cmake", "--build", os.path.join(prog, "build")])
        self.seconds["build"] += time.time() - t
        return rc, out

    def run_program(self, prog, log):
        if os.path.exists(log):
            os.remove(log)
        t = time.time()
        rc, out = sh([os.path.join(prog, "build", "run")], env=self.env(log), cwd="/")
        self.seconds["run"] += time.time() - t
        return rc, out

    def check(self, name, args, ranks=1):
        prog = os.path.join(self.work, name)
        if os.path.isdir(prog):
            shutil.rmtree(prog)
        t = time.time()
        rc, out = sh([self.kdflow, "codegen", *args, "-o", prog, "-q"])
        self.seconds["generate"] += time.time() - t
        if rc != 0:
            return self.fail(name, f"kdflow codegen exited {rc}: {out.strip()}")
        rc, out = self.build(prog)
        if rc != 0:
            return self.fail(name, "the program does not build warning-free:\n" + out[-3000:])
        if shutil.which("clang-format") and os.environ.get("KDFLOW_CODEGEN_FORMAT_CHECK", "1") == "1":
            rc, out = sh(["clang-format", "--dry-run", "--Werror", "run.cpp", "kdflow_support.h"], cwd=prog)
            if rc != 0:
                return self.fail(name, "run.cpp is not in its .clang-format style:\n" + out[-2000:])
        plog, rlog = os.path.join(self.work, name + ".program.log"), os.path.join(self.work, name + ".replay.log")
        rc, out = self.run_program(prog, plog)
        if rc not in (0, 1):
            return self.fail(name, f"run exited {rc}: {out.strip()[-2000:]}")
        rc, out = sh([self.kdflow, "replay", *args, "--dry-run", "-q"])
        m = re.search(r"(\d+) launches", out)
        launches = int(m.group(1)) if m else 0
        rank_args = []
        if ranks > 1:
            # A sharded program: every rank makes the flow's steps on its own allocations, and
            # each rank's part agrees with that rank's thread in kdflow replay (below).
            rc, out = sh([sys.executable, COMPARE, plog, "-", "--ranks", str(ranks), "--min-steps", str(launches)])
            if rc != 0:
                return self.fail(name, out.strip())
            print(f"codegen: ok {name}: {out.strip().replace('compare_fake_logs: ', '')}", flush=True)
            rank_args = ["--ranks", str(ranks)]
        if os.path.exists(rlog):
            os.remove(rlog)
        t = time.time()
        rc, out = sh([self.kdflow, "replay", *args, "--warmup", "0", "--repeat", "1", "-q"], env=self.env(rlog))
        self.seconds["run"] += time.time() - t
        if rc not in (0, 1, 3):
            return self.fail(name, f"kdflow replay exited {rc}: {out.strip()[-2000:]}")
        rc, out = sh([sys.executable, COMPARE, plog, rlog, "--runs", "2", "--min-steps", str(launches), *rank_args])
        if rc != 0:
            return self.fail(name, out.strip())
        print(f"codegen: ok {name}: {out.strip().replace('compare_fake_logs: ', '')}", flush=True)
        if self.plant and not self.planted(name, prog, plog, rlog, rank_args):
            return False
        return True

    def planted(self, name, prog, plog, rlog, rank_args):
        """Two pointer arguments of one launch swapped: the comparison must fail."""
        path = os.path.join(prog, "run.cpp")
        with open(path) as f:
            text = f.read()
        lines = text.split("\n")
        for i in range(len(lines) - 1):
            a = re.match(r"(\s*p\d+\.ptr\(\d+, )(r\.mem\.[^)]+)(\);.*)", lines[i])
            b = re.match(r"(\s*p\d+\.ptr\(\d+, )(r\.mem\.[^)]+)(\);.*)", lines[i + 1])
            if a and b and a.group(2) != b.group(2):
                lines[i] = a.group(1) + b.group(2) + a.group(3)
                lines[i + 1] = b.group(1) + a.group(2) + b.group(3)
                break
        else:
            print(f"codegen: {name}: no launch with two pointer arguments to swap", flush=True)
            return True
        with open(path, "w") as f:
            f.write("\n".join(lines))
        rc, out = self.build(prog)
        if rc != 0:
            return self.fail(name, "the planted program does not build: " + out[-2000:])
        rc, out = self.run_program(prog, plog + ".planted")
        rc, out = sh([sys.executable, COMPARE, plog + ".planted", rlog, "--runs", "2", *rank_args])
        if rc == 0:
            return self.fail(name, "two arguments swapped in run.cpp, and the logs still agree")
        print(f"codegen: ok {name}: the planted swap is found ({out.strip().splitlines()[1].strip()})", flush=True)
        return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["samples", "one"])
    ap.add_argument("--kdflow", required=True)
    ap.add_argument("--fake", required=True, help="the fake libcuda (libkdflow_fake_cuda.so)")
    ap.add_argument("--fake-cublas", required=True)
    ap.add_argument("--work", required=True, help="a folder for the programs and logs")
    ap.add_argument("--plant", action="store_true", help="also check that a planted difference is found")
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--shared", default=None, help="../shared/samples: params the bundled samples lack")
    ap.add_argument("--name", default="build")
    ap.add_argument("--ranks", type=int, default=1, help="one: the build's ranks (a sharded build)")
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    a.args = rest
    os.makedirs(a.work, exist_ok=True)
    c = Checker(os.path.abspath(a.kdflow), os.path.abspath(a.fake), os.path.abspath(a.fake_cublas),
                os.path.abspath(a.work), a.plant)
    if a.mode == "one":
        c.check(a.name, a.args, a.ranks)
    else:
        shared = a.shared or os.path.join(os.path.dirname(a.repo), "shared", "samples")
        samples = os.path.join(a.repo, "samples")
        skipped = []
        for m in sorted(os.listdir(samples)):
            d, golden = os.path.join(samples, m), os.path.join(a.repo, "test", "golden", m + ".json")
            if not os.path.isdir(d) or not os.path.exists(golden):
                continue
            args = [d, "--flow", golden]
            has_params = any(os.path.exists(os.path.join(d, f)) for f in ("params.bin", "vm_exec.bin"))
            if not has_params:
                p = os.path.join(shared, m, "params.bin")
                if not os.path.exists(p):
                    skipped.append(m)
                    continue
                args += ["--params", p]
            c.check(m, args)
        if skipped:
            print(f"codegen: SKIPPED {len(skipped)} samples with params in neither samples/<m> nor {shared}: "
                  f"{' '.join(skipped)}", flush=True)
    print("codegen: seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in c.seconds.items()), flush=True)
    if c.failures:
        print(f"codegen: {len(c.failures)} failed", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
