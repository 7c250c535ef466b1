#!/usr/bin/env python3
"""kdflow's wheel as a newcomer meets it (issue 43, docs/python.md).

    check_wheel.py WHEEL --work DIR [--samples DIR] [--tvm-requirements FILE]

1. `auditwheel show WHEEL`: the wheel is consistent with a manylinux tag (every library the
   executable needs beyond that policy's set is inside the wheel).
2. A fresh venv (no system site-packages, no PYTHONPATH, run from an empty folder, so neither the
   checkout's python/ nor its build is seen) gets `pip install WHEEL` (and TVM 0.27 from PyPI,
   pinned, where given and reachable).
3. In it: `kdflow --version` (the console script), the executable resolves every library from
   the wheel or the manylinux set (ldd), and the API on a sample: extract, show, costs, replay on
   the CPU back end (outputs compared), view, codegen.
4. With TVM: the notebook path — a model defined with nn.Module, `kdflow_tvm.build` (from the
   wheel) writes its folder, then `kdflow.extract`, `costs`, `replay(backend="cpu")` with every
   node compared against TVM's results.
5. Where this process may (root: a private mount namespace), the executable runs once more with
   the system's LLVM/Clang and Graphviz plugin folders hidden, proving it does not reach them.

Exit 0 when everything held, 1 otherwise (each failure one line), 77 when WHEEL is absent.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

MANYLINUX_LIBS = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libgcc_s.so.1",
                  "libstdc++.so.6", "ld-linux-x86-64.so.2", "linux-vdso.so.1", "libutil.so.1", "libresolv.so.2",
                  "libz.so.1", "libexpat.so.1", "libcrypt.so.1", "libnsl.so.1", "libX11.so.6", "libGL.so.1"}

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


API_SCRIPT = textwrap.dedent('''
    import importlib.util, json, os, sys
    import kdflow
    venv = sys.prefix
    # kdflow_tvm is there too; it needs the user's TVM and numpy, which this venv has not yet.
    out = {"kdflow": kdflow.__file__, "kdflow_tvm": importlib.util.find_spec("kdflow_tvm").origin,
           "binary": kdflow.binary()}
    sample = sys.argv[1]
    flow = kdflow.extract(sample)
    out["launches"] = [k.name for k in flow.launches]
    out["grid0"] = list(flow.launches[0].grid)
    out["arg0"] = flow.buffers[flow.launches[0].args[0].buffer].name
    out["show"] = kdflow.show(sample).splitlines()[0]
    out["costs_rows"] = len(kdflow.costs(sample))
    r = kdflow.replay(sample, backend="cpu")
    out["replay_status"] = r.status
    out["checks"] = r.checks
    out["kernel_times"] = len(r.kernel_times)
    out["view"] = os.path.getsize(kdflow.view(sample, "page.html"))
    out["codegen"] = sorted(os.listdir(kdflow.codegen(sample, "program")))
    try:
        kdflow.extract("no_such_folder")
    except kdflow.KdflowError as e:
        out["error"] = [e.status, e.message]
    print(json.dumps(out))
''')

TVM_SCRIPT = textwrap.dedent('''
    import json, sys
    import numpy as np, tvm, kdflow, kdflow_tvm
    from tvm.relax.frontend import nn

    class MLP(nn.Module):
        def __init__(self):
            self.l1 = nn.Linear(100, 64); self.l2 = nn.Linear(64, 10)
        def forward(self, x):
            return nn.softmax(self.l2(nn.relu(self.l1(x))), axis=-1)

    mod, specs = MLP().export_tvm(spec={"forward": {"x": nn.spec.Tensor((1, 100), "float32")}})
    mod = tvm.IRModule({"main": mod["forward"].with_attr("global_symbol", "main")})
    rng = np.random.default_rng(0)
    weights = {n: 0.1 * rng.standard_normal([int(d) for d in p.shape]).astype("float32") for n, p in specs}
    kdflow_tvm.build(mod, target="cuda", out="m27", params=weights, inputs=True)
    flow = kdflow.extract("m27")
    r = kdflow.replay("m27", backend="cpu")
    print(json.dumps({"tvm": tvm.__version__, "launches": len(flow.launches), "nodes": len(flow.nodes),
                      "costs": len(kdflow.costs("m27")), "status": r.status, "checks": r.checks,
                      "nodes_compared": r.timing.get("nodes_compared", 0),
                      "first_node_difference": r.timing.get("first_node_difference")}))
''')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheel")
    ap.add_argument("--work", required=True)
    ap.add_argument("--samples", default=os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "samples"))
    ap.add_argument("--tvm-requirements", default=None)
    ap.add_argument("--auditwheel", default="auditwheel")
    a = ap.parse_args()
    if a.tvm_requirements:
        a.tvm_requirements = os.path.abspath(a.tvm_requirements)
    if not os.path.exists(a.wheel):
        print(f"check_wheel: skipped: no wheel {a.wheel}")
        return 77
    wheel = os.path.abspath(a.wheel)
    print(f"check_wheel: {os.path.basename(wheel)}, {os.path.getsize(wheel) / 2**20:.1f} MiB")
    r = run([a.auditwheel, "show", wheel])
    text = " ".join(r.stdout.split())
    tag = text.split("consistent with the following platform tag:")[-1].split()[0].strip('".') \
        if "consistent with the following platform tag:" in text else ""
    check(r.returncode == 0 and tag.startswith("manylinux"),
          f"auditwheel show: consistent with {tag or '?'} ({text[:160]}...)")

    work = os.path.abspath(a.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    venv = os.path.join(work, "venv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KDFLOW_BINARY", "PYTHONHOME")}
    env["KDFLOW_CACHE_DIR"] = os.path.join(work, "cache")
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    t = time.time()
    r = run(["/usr/bin/python3", "-m", "venv", venv])
    check(r.returncode == 0, f"a fresh venv ({r.stdout.strip()[-200:]})")
    py = os.path.join(venv, "bin", "python")
    r = run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel], env=env, cwd=work)
    check(r.returncode == 0, f"pip install of the wheel in {time.time() - t:.0f} s ({r.stdout.strip()[-300:]})")
    if r.returncode != 0:
        return 1

    r = run(["kdflow", "--version"], env=env, cwd=work)
    check(r.returncode == 0 and r.stdout.startswith("kdflow") and
          shutil.which("kdflow", path=env["PATH"]).startswith(venv),
          f"the kdflow console script on the venv's PATH: {r.stdout.strip()}")

    r = run([py, "-c", "import kdflow; print(kdflow.binary())"], env=env, cwd=work)
    exe = r.stdout.strip()
    check(r.returncode == 0 and exe.startswith(venv) and exe.endswith("kdflow/bin/kdflow"),
          f"kdflow.binary() is the wheel's executable ({exe})")
    r = run(["ldd", exe])
    outside = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if not parts or os.path.basename(parts[0]) in MANYLINUX_LIBS:
            continue
        where = parts[2] if len(parts) > 2 and parts[1] == "=>" else parts[0]
        if "not" in parts:
            outside.append(f"{parts[0]} not found")
        elif not where.startswith(venv):
            outside.append(f"{parts[0]} => {where}")
    check(r.returncode == 0 and not outside,
          f"every library the executable loads is the wheel's or manylinux's ({'; '.join(outside[:6]) or 'yes'})")

    sample = os.path.join(a.samples, "relax_mlp")
    r = run([py, "-c", API_SCRIPT, sample], env=env, cwd=work)
    try:
        out = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        check(False, f"the API on {sample}: {r.stdout.strip()[-800:]}")
        out = None
    if out:
        check(out["kdflow"].startswith(venv) and out["kdflow_tvm"].startswith(venv),
              "kdflow and kdflow_tvm imported from the venv, not the checkout")
        check(len(out["launches"]) == 5 and out["launches"][0] == "fused_matmul_add_relu_kernel" and
              out["grid0"] == [25, 1, 1] and out["arg0"] == "fused_matmul_add_relu",
              f"kdflow.extract: 5 launches, the first fused_matmul_add_relu_kernel on grid (25, 1, 1) writing "
              f"fused_matmul_add_relu ({out['launches'][:2]}, {out['grid0']}, {out['arg0']})")
        check(out["costs_rows"] >= 5, f"kdflow.costs: {out['costs_rows']} rows")
        check(out["replay_status"] == 0 and len(out["checks"]) == 1 and out["checks"][0]["passed"] and
              not out["checks"][0]["uninformative"] and out["kernel_times"] == 5,
              f"kdflow.replay(backend='cpu'): status {out['replay_status']}, checks {out['checks']}")
        check(out["view"] > 10000, f"kdflow.view: a page of {out['view']} bytes")
        check("run.cpp" in out["codegen"] and "data" in out["codegen"], f"kdflow.codegen: {out['codegen']}")
        check(out.get("error", [0])[0] == 66 and "no_such_folder" in out["error"][1],
              f"a missing folder raises KdflowError with kdflow's line and exit 66 ({out.get('error')})")

    if a.tvm_requirements:
        t = time.time()
        r = run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", a.tvm_requirements],
                env=env, cwd=work)
        if r.returncode != 0:
            print(f"skip  the TVM model: TVM could not be installed from PyPI ({r.stdout.strip()[-200:]})")
        else:
            print(f"      TVM installed in {time.time() - t:.0f} s")
            r = run([py, "-c", TVM_SCRIPT], env=env, cwd=work)
            try:
                m = json.loads(r.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                m = None
            check(m is not None and m["launches"] >= 3 and m["costs"] >= 3 and m["status"] == 0 and
                  m["checks"] and all(c["passed"] for c in m["checks"]) and m["nodes_compared"] >= 3 and
                  m["first_node_difference"] is None,
                  f"kdflow_tvm.build then kdflow.extract/costs/replay on a model built with TVM "
                  f"{m['tvm'] if m else '?'}: {m if m else r.stdout.strip()[-800:]}")

    # The executable with the system's LLVM/Clang and Graphviz plugins hidden.
    hidden = [d for d in ("/usr/lib/llvm-15", "/usr/lib/x86_64-linux-gnu/graphviz") if os.path.isdir(d)]
    can_unshare = os.geteuid() == 0 and shutil.which("unshare") and run(["unshare", "-m", "true"]).returncode == 0
    if can_unshare and hidden:
        mounts = "; ".join(f"mount -t tmpfs none {d}" for d in hidden)
        script = (f"{mounts}; cd {work} && {exe} extract {sample} -q -o hidden.json && "
                  f"{exe} view {sample} -q -o hidden.html && {exe} replay {sample} --backend cpu -q --repeat 1 "
                  f"--warmup 0 --no-cache >/dev/null && echo hidden-ok")
        r = run(["unshare", "-m", "sh", "-c", script], env=env)
        check("hidden-ok" in r.stdout, f"extract, view and replay --backend cpu with {', '.join(hidden)} hidden "
                                      f"({r.stdout.strip()[-300:]})")
    else:
        print("skip  hiding the system's LLVM and Graphviz (needs root and a mount namespace: unshare -m)")

    if failures:
        print(f"check_wheel: {len(failures)} failed")
        return 1
    print("check_wheel: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
