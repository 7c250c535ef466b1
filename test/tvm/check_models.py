"""Checks kdflow on the models build_models.py made with a real TVM:
    python3 test/tvm/check_models.py KDFLOW MODELS_DIR [SHARED_DIR]
For every model: extract, show and costs succeed; the launches equal the executing oracle's
(SHARED_DIR/tools/oracle, when present and TVM's headers are found: $TVM_HOME, or the
installed tvm_ffi package); replay --backend cpu matches TVM's outputs and every node's result.
Then a flow with two same-size inputs of one kernel swapped must fail and name that node.
Sharded (tensor-parallel) builds (sharded_models.py) get check_sharded instead: what TVM built
is asserted; what kdflow extract says of them is recorded in the model's folder, not asserted.
Every model's program from kdflow codegen (issue 42) is built warning-free and its driver calls
compared with replay's on the fake driver ($KDFLOW_FAKE_CUDA, $KDFLOW_FAKE_CUBLAS;
test/codegen/codegen_check.py); skipped with a line where the fake driver is not built.
Exits 77 (ctest: skipped) when MODELS_DIR holds no models (build_models.py skipped)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from urllib.parse import unquote
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "llm_oracle"))
from check_llm_oracle import check_llm_oracle  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from builtin_models import EXPECT  # noqa: E402
from sharded_models import EXPECT as SHARDED  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "codegen"))
from codegen_check import Checker  # noqa: E402

failures: List[str] = []
codegen: Dict[str, Any] = {}


def check_codegen(kdflow: str, d: str, args: List[str], ranks: int = 1) -> None:
    """kdflow codegen's program for this build: built with -Wall -Wextra -Werror, run on the fake
    driver, its allocations, uploads and launches those of replay's first run (a sharded build:
    the same on every rank)."""
    if "checker" not in codegen:
        fake, blas = os.environ.get("KDFLOW_FAKE_CUDA", ""), os.environ.get("KDFLOW_FAKE_CUBLAS", "")
        if not (os.path.exists(fake) and os.path.exists(blas) and shutil.which("cmake")):
            print("skip  codegen: the fake CUDA driver (KDFLOW_FAKE_CUDA, KDFLOW_FAKE_CUBLAS) or cmake is missing; "
                  "no program is built")
            codegen["checker"] = None
        else:
            codegen["checker"] = Checker(kdflow, fake, blas, tempfile.mkdtemp(prefix="kdflow_codegen."), plant=False)
    c = codegen["checker"]
    if c is None:
        return
    before = len(c.failures)
    c.check(os.path.basename(d), [d, *args], ranks)
    expect(len(c.failures) == before, f"{os.path.basename(d)}: kdflow codegen's program "
           f"({c.failures[-1] if len(c.failures) > before else ''})")


def run(cmd: List[str], **kw) -> subprocess.CompletedProcess:
    """Runs a command. Every CPU replay runs with --poison (issue 52): fresh allocations, locals and
    shared memory as NaN bytes, so that a kernel reading memory nothing wrote differs from TVM's
    result instead of passing on zeros (KDFLOW_TEST_POISON=0 leaves it out)."""
    if (len(cmd) > 1 and cmd[1] == "replay" and "cpu" in cmd and "--poison" not in cmd and
            kw.get("env", os.environ).get("KDFLOW_TEST_POISON", "1") != "0"):
        cmd = [*cmd, "--poison"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, **kw)


# Models whose TVM build is known to be wrong (issue 52), each with the node kdflow must name, the
# elements that differ (every run the same) and the words of its diagnosis.
TVM_DEFECTS: Dict[str, Dict[str, Any]] = {
    # 56 blocks, each thread reading 34 of its local's 476 floats where it wrote them.
    "group_conv": {"node": "fused_conv2d_multiply_add", "differ": 56 * (476 - 34), "elements": 136 * 14 * 14},
}


def check_tvm_defect(kdflow: str, d: str, want: Dict[str, Any]) -> None:
    """A build whose kernel reads memory its thread never wrote: replay on the CPU names the node, the
    same elements every run (fresh zeros per block, not what the last block left), and under --poison
    says every one of them is NaN: the kernel read memory nothing wrote."""
    name = os.path.basename(d)
    base = [kdflow, "replay", d, "--backend", "cpu", "-q", "--repeat", "1", "--warmup", "0"]
    plain = dict(os.environ, KDFLOW_TEST_POISON="0")
    runs = [run(base, env=plain) for _ in range(2)]
    first = [re.search(r"nodes: first node that differs from TVM's result: node \d+ (\S+), output 0: (\d+) of (\d+) "
                       r"elements differ, max abs (\S+)", r.stdout) for r in runs]
    expect(all(r.returncode == 1 for r in runs) and all(first) and first[0].group(1) == want["node"] and
           int(first[0].group(2)) > 0 and first[0].groups() == first[1].groups(),
           f"{name}: replay --backend cpu names node {want['node']} as the first that differs from TVM's, with the "
           f"same elements and values on two runs ({[m.group(0) if m else r.stdout[-200:] for m, r in zip(first, runs)]})")
    expect("run again with --poison" in runs[0].stderr, f"{name}: replay suggests --poison ({runs[0].stderr.strip()})")
    r = run(base)
    m = re.search(r"node \d+ (\S+), output 0: (\d+) of (\d+) elements differ.*every one NaN where TVM's is a number",
                  r.stdout)
    expect(r.returncode == 1 and m is not None and m.group(1) == want["node"] and
           int(m.group(2)) == want["differ"] and int(m.group(3)) == want["elements"] and
           f"{want['differ']} of the elements that differ are NaN under --poison: the kernel that wrote them read "
           "memory nothing wrote" in r.stderr,
           f"{name}: replay --poison: {want['differ']} of {want['elements']} elements of {want['node']} are NaN, "
           f"memory nothing wrote ({(m.group(0) if m else r.stdout.strip()[-300:])} {r.stderr.strip()[-300:]})")


def expect(ok: bool, what: str) -> None:
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def oracle_includes() -> Optional[Tuple[str, str, str]]:
    home = os.environ.get("TVM_HOME")
    if home and os.path.isdir(os.path.join(home, "include")):
        ffi = os.path.join(home, "3rdparty", "tvm-ffi")
        return (os.path.join(ffi, "include"), os.path.join(ffi, "3rdparty", "dlpack", "include"),
                os.path.join(home, "include"))
    try:
        import tvm_ffi  # type: ignore[import-not-found]
        import tvm  # type: ignore[import-not-found]
        base = os.path.dirname(tvm_ffi.__file__)
        tbase = os.path.dirname(tvm.__file__)
        inc = (os.path.join(base, "include"), os.path.join(base, "include"), os.path.join(tbase, "include"))
        if all(os.path.isdir(p) for p in inc) and os.path.exists(os.path.join(base, "include", "dlpack", "dlpack.h")):
            return inc
    except Exception:
        pass
    return None


def check_oracle(kdflow: str, d: str, flow: str, shared: Optional[str], tmp: str) -> None:
    name = os.path.basename(d)
    oracle = os.path.join(shared, "tools", "oracle") if shared else ""
    inc = oracle_includes()
    if not shared or not os.path.isdir(oracle) or inc is None:
        print(f"skip  {name}: oracle comparison (needs ../shared/tools/oracle and TVM's headers)")
        return
    why = EXPECT.get(name, {}).get("oracle_skip")
    if why:
        print(f"skip  {name}: oracle comparison ({why}); replay checks every node against TVM's instead")
        return
    od = os.path.join(tmp, name + ".oracle")
    shutil.copytree(d, od)
    # The oracle reads input_<name>.npy with the name as it is: give it those files beside the
    # encoded ones (docs/schema.md, "Names in file names").
    for f in os.listdir(od):
        if f.startswith("input_") and "%" in f:
            raw = "input_" + unquote(f[len("input_"):-len(".npy")]) + ".npy"
            if "/" not in raw:
                shutil.copy(os.path.join(od, f), os.path.join(od, raw))
    r = run([sys.executable, os.path.join(oracle, "tvm26_files.py"), od])
    expect(r.returncode == 0, f"{name}: tvm26_files.py ({r.stderr.strip()[-200:]})")
    r = run([sys.executable, os.path.join(oracle, "ffi_oracle_more.py"), od, *inc, "-o", os.path.join(od, "truth.json")])
    if r.returncode != 0 and "undefined symbol: TVMBackendGetFuncFromEnv" in r.stdout + r.stderr:
        # TVM 0.21 - 0.25's host code looks kernels up with TVMBackendGetFuncFromEnv, which the
        # oracle's stand-in runtime (written for 0.26) does not define.
        print(f"skip  {name}: oracle comparison (the oracle's runtime has no TVMBackendGetFuncFromEnv, which TVM "
              f"0.21 - 0.25's host code calls); replay checks every node against TVM's instead")
        return
    expect(r.returncode == 0, f"{name}: the executing oracle ran ({(r.stdout + r.stderr).strip()[-300:]})")
    if r.returncode != 0:
        return
    r = run([sys.executable, os.path.join(shared, "tools", "compare_relax_truth.py"), flow, od])
    last = (r.stdout.strip().splitlines() or [""])[-1]
    m = re.search(r"(\d+)/(\d+) launches exact", last)
    launches = sum(len(n["kernels"]) for n in json.load(open(flow))["nodes"])
    expect(r.returncode == 0 and m is not None and m.group(1) == m.group(2) and int(m.group(2)) == launches,
           f"{name}: launches against the oracle ({launches} in the flow): {last or r.stderr.strip()[-300:]}")


def check_relay_oracle(d: str, flow: str, shared: Optional[str]) -> None:
    """A Relay build (TVM 0.8 - 0.19): the oracle for graph.json + host.c (trace.py, with TVM's
    C runtime headers from $TVM_HOME) against the flow, every launch exact."""
    name = os.path.basename(d)
    home = os.environ.get("TVM_HOME", "")
    inc = (os.path.join(home, "include"), os.path.join(home, "3rdparty", "dlpack", "include"))
    oracle = os.path.join(shared, "tools", "oracle", "trace.py") if shared else ""
    if not home or not os.path.exists(oracle) or not all(os.path.isdir(p) for p in inc):
        print(f"skip  {name}: oracle comparison (needs ../shared/tools/oracle and $TVM_HOME's headers)")
        return
    r = run([sys.executable, oracle, d, *inc])
    expect(r.returncode == 0, f"{name}: the executing oracle (trace.py) ran ({r.stderr.strip()[-300:]})")
    if r.returncode != 0:
        return
    truth = flow + ".truth.json"
    with open(truth, "w") as f:
        f.write(r.stdout)
    r = run([sys.executable, os.path.join(shared, "tools", "compare_truth.py"), flow, truth])
    last = (r.stdout.strip().splitlines() or [""])[-1]
    m = re.search(r"(\d+)/(\d+) launches exact", last)
    launches = sum(len(n["kernels"]) for n in json.load(open(flow))["nodes"])
    expect(r.returncode == 0 and m is not None and m.group(1) == m.group(2) and int(m.group(2)) == launches > 0,
           f"{name}: launches against the oracle ({launches} in the flow): {last or r.stderr.strip()[-300:]}")


def check_relay_references(d: str) -> None:
    """reference/nodes.json of a Relay build lists every function node of graph.json (each with
    all its outputs); only nodes that launch nothing (__nop, __copy) are left out, said."""
    name = os.path.basename(d)
    g = json.load(open(os.path.join(d, "graph.json")))
    ref = json.load(open(os.path.join(d, "reference", "nodes.json")))
    want = {i: int(n["attrs"].get("num_outputs", 1)) for i, n in enumerate(g["nodes"])
            if n["op"] == "tvm_op" and n["attrs"]["func_name"] not in ("__nop", "__copy")}
    got = {e["graph_node"]: len(e["outputs"]) for e in ref["nodes"]}
    left = [u for u in ref["unmatched"] if u["function"] not in ("__nop", "__copy")]
    expect(got == want and not left and len(want) > 0,
           f"{name}: reference/nodes.json has TVM's CPU result of all {len(want)} function nodes of graph.json "
           f"(listed {len(got)}; not listed: {left[:2]})")


def vm_function(d: str) -> List[str]:
    """["--function", NAME] for a build without main (build_info.json lists its functions)."""
    info = json.load(open(os.path.join(d, "build_info.json")))
    names = list(info.get("functions", {}))
    return [] if not names or "main" in names else ["--function", names[0]]


def check_model(kdflow: str, d: str, shared: Optional[str], tmp: str) -> None:
    name = os.path.basename(d)
    flow = os.path.join(tmp, name + ".json")
    fn = vm_function(d)
    if fn:
        r = run([kdflow, "extract", d, "-q", "-o", flow])
        expect(r.returncode == 64 and f"its VM functions: {fn[1]}(" in r.stderr and r.stderr.count("\n") == 1,
               f"{name}: without --function, extract lists the VM functions in one line, exit 64 ({r.stderr.strip()})")
    r = run([kdflow, "extract", d, "-q", "-o", flow, *fn])
    expect(r.returncode == 0, f"{name}: extract ({r.stderr.strip()})")
    if r.returncode != 0:
        return
    relay = json.load(open(os.path.join(d, "build_info.json"))).get("frontend") == "relay"
    if os.path.exists(os.path.join(d, "model.so")) and not relay:
        r = run([kdflow, "inspect", os.path.join(d, "model.so")])
        expect(r.returncode == 0 and "__tvm_ffi__library_bin (TVM 0.22+, tvm-ffi)" in r.stdout.splitlines()[0],
               f"{name}: inspect names model.so's blob symbol ({r.stdout.splitlines()[0] if r.stdout else r.stderr})")
        listed = (fn[1] if fn else "main") + "("
        expect(listed in r.stdout, f"{name}: inspect lists the VM function {listed}...) with its parameters")
    for cmd in ("show", "costs"):
        r = run([kdflow, cmd, d, *fn])
        expect(r.returncode == 0 and r.stdout.strip() != "", f"{name}: {cmd} ({r.stderr.strip()})")
    host = open(os.path.join(d, "host.c"), errors="replace").read()
    if relay:
        check_relay_oracle(d, flow, shared)
        check_relay_references(d)
    elif fn:
        print(f"skip  {name}: oracle comparison (the oracle runs only the VM function main)")
    elif "(half*)" in host and " half;" not in host:
        # The oracle compiles TVM's host.c with gcc as it is, and TVM's float16 host C uses half
        # without declaring it (the exporter forces a declaration in for model.so).
        print(f"skip  {name}: oracle comparison (the oracle cannot compile TVM's float16 host.c: half undeclared)")
    else:
        check_oracle(kdflow, d, flow, shared, tmp)
    df = json.load(open(flow))
    with_kernels = [n for n in df["nodes"] if n["op"] == "tvm_op" and n["kernels"]]
    # KDFLOW_CPU_FIBERS=log: each kernel's way of running on stderr. TVM's kernels here (barriers,
    # warp-shuffle reductions, cumsum's warp-synchronous steps, float16) all run as loops over
    # their threads (region fission, lib/replay/cpu/region_fission.h): none as fibers.
    # A float16 Relay build: TVM's CPU build sums in float16 in another order than the CUDA
    # kernel's reduction tree; both lie a few float16 ulps (1e-3 at 1) from the exact result.
    half = relay and "float16" in json.load(open(os.path.join(d, "graph.json")))["attrs"]["dltype"][1]
    tol = ["--rtol", "1e-2", "--atol", "1e-2"] if half else []
    r = run([kdflow, "replay", d, "--backend", "cpu", "-q", "--repeat", "1", "--warmup", "0", *fn, *tol],
            env=dict(os.environ, KDFLOW_CPU_FIBERS="log"))
    fibers = re.findall(r"replay: cpu: kernel (\S+) runs each block as fibers(.*)", r.stderr)
    expect(r.returncode != 0 or not fibers,
           f"{name}: replay --backend cpu runs no kernel as one fiber per thread ({fibers[:3]})")
    m = re.search(r"nodes: (\d+) nodes \((\d+) buffers\) compared with TVM's own results.*: all match", r.stdout)
    outputs_ok = re.findall(r"^\d+\s+\S+output_\d+\.npy.*\s(ok|UNINFORMATIVE)", r.stdout, re.M)
    # A node TVM's CPU build names otherwise (a CUDA-only dispatch such as
    # gpu_2d_continuous_cumsum) has no reference: replay says so, and the outputs still check it.
    unreferenced = len(re.findall(r"^nodes: not compared: node \d+ .*: no reference for it$", r.stdout, re.M))
    if relay:  # every node with kernels compared with TVM's result of its own function
        expect(m is not None and int(m.group(1)) == len(with_kernels) > 0 and "not compared" not in r.stdout,
               f"{name}: replay --backend cpu compares all {len(with_kernels)} nodes with kernels "
               f"({m.group(0) if m else r.stdout.strip()[-300:]})")
    expect(r.returncode == 0 and m is not None and int(m.group(1)) + unreferenced == len(with_kernels) and
           (int(m.group(1)) > 0 or not df["kernels"]) and len(outputs_ok) == len(df["outputs"]) and
           "UNINFORMATIVE" not in r.stdout,
           f"{name}: replay --backend cpu: outputs and {len(with_kernels) - unreferenced} of {len(with_kernels)} "
           f"nodes (the others have no reference, said) match TVM's "
           f"({(m.group(0) if m else r.stdout.strip()[-300:] + r.stderr.strip())})")


def check_llm(kdflow: str, d: str, tmp: str) -> None:
    """A language model with TVM's paged KV cache: embed, prefill and decode extract; the flow's
    calls, in order, are those of TVM's own text of each VM function (vm_calls.json: host
    functions, and the KV cache's attention as a runtime call; host-only shape functions
    aside); show and costs work; replay refuses the KV cache's attention in one line."""
    name = os.path.basename(d)
    expected = json.load(open(os.path.join(d, "vm_calls.json")))

    def flat(fn: str, region: str = "") -> List[Tuple[str, str]]:
        """TVM's calls of `fn` in order, a CUDA-graph capture function's inlined where it runs
        (run_or_capture: once, its kernels executing), each with the capture it is in."""
        out: List[Tuple[str, str]] = []
        for c in expected[fn]:
            if c.startswith("vm.builtin.cuda_graph.run_or_capture("):
                out += flat(c[c.index("(") + 1:-1], c[c.index("(") + 1:-1])
            elif c.startswith("vm.builtin.cuda_graph.get_cached_alloc("):
                out += flat(c[c.index("(") + 1:-1], region)
            elif (not c.startswith("vm.builtin.") or "attention_kv_cache" in c) and \
                    not c.startswith("shape_func") and c != "compute_symbolic_expr":
                out.append((c, region))
        return out

    shapes = {"embed": ["--input-shape", "input_ids=7"], "prefill": ["--input-shape", "x=1x7x64"], "decode": []}
    for fn, extra in shapes.items():
        flow = os.path.join(tmp, f"{name}_{fn}.json")
        r = run([kdflow, "extract", d, "-q", "--function", fn, *extra, "-o", flow])
        expect(r.returncode == 0, f"{name}: extract --function {fn} ({r.stderr.strip()})")
        if r.returncode != 0:
            continue
        df = json.load(open(flow))
        got = [(n["function"], n.get("cuda_graph", "").split("#")[0]) for n in df["nodes"]
               if n["op"] == "tvm_op" and n["function"] != "__nop"]
        want = flat(fn)
        in_graphs = sum(1 for _, g in got if g)
        expect(got == want and len(got) > 0,
               f"{name} {fn}: {len(got)} calls in TVM's order, "
               f"{[f for f, _ in got].count('vm.builtin.attention_kv_cache_attention_with_fused_qkv')} of them the KV "
               f"cache's attention, {in_graphs} in CUDA-graph captures (TVM: {want if got != want else 'same'})")
        got = [f for f, _ in got]
        kernels = sum(len(n["kernels"]) for n in df["nodes"])
        expect(kernels > 0 and len(df["library_calls"]) == got.count("vm.builtin.attention_kv_cache_attention_with_fused_qkv"),
               f"{name} {fn}: {kernels} kernels, {len(df['library_calls'])} runtime calls")
        for cmd in ("show", "costs"):
            r = run([kdflow, cmd, flow])
            expect(r.returncode == 0 and r.stdout.strip() != "", f"{name} {fn}: {cmd} ({r.stderr.strip()})")
    # A session: create the cache, embed and prefill 7 tokens, then embed and decode twice.
    flow = os.path.join(tmp, f"{name}_session.json")
    r = run([kdflow, "extract", d, "-q", "--session", "prefill:7,decode:2", "-o", flow])
    expect(r.returncode == 0, f"{name}: extract --session prefill:7,decode:2 ({r.stderr.strip()})")
    if r.returncode == 0:
        df = json.load(open(flow))
        got = []
        for n in df["nodes"]:
            if n["op"] != "tvm_op" or n["function"] in ("__nop", "vm.builtin.paged_attention_kv_cache_create"):
                continue
            # The calls TVM's KV cache runtime makes inside one attention are that VM call.
            call = (n.get("runtime_call", n["function"]), n.get("session_step", ""), n.get("layer", -1), n["id"])
            if got and "runtime_call" in n and got[-1][0] == call[0] and got[-1][2] == call[2] and \
                    got[-1][1] == call[1]:
                continue
            got.append(call)
        got = [(f, step) for f, step, _, _ in got]
        want = [(c, "prefill") for c, _ in flat("embed") + flat("prefill")]
        for k in range(2):
            want += [(c, f"decode {k}") for c, _ in flat("embed") + flat("decode")]
        inputs = [b["name"] for b in df["buffers"] if b["kind"] == "input"]
        expect(got == want and len(df["outputs"]) == 3 and
               inputs == ["input_ids[prefill]", "input_ids[decode 0]", "input_ids[decode 1]"],
               f"{name} session: {len(got)} calls in TVM's order, each marked with its step; 3 token inputs, "
               f"3 logits outputs (TVM: {want if got != want else 'same'}; inputs {inputs})")
        check_kv_runtime(name, df, os.path.join(os.path.dirname(d), "llm", "kv_truth.json"))
        check_session_replay(kdflow, d, tmp)
        check_without_weights(kdflow, d, tmp, df, "prefill:7,decode:2", [])
        last = [n for n in df["nodes"] if n["op"] == "tvm_op" and n.get("session_step") == "decode 1"][-1]
        r = run([kdflow, "explain", flow, f"n{last['id']}"])
        graph = last.get("cuda_graph")
        expect(r.returncode == 0 and "session step  decode 1" in r.stdout and
               (graph is None or f"CUDA graph    {graph}" in r.stdout),
               f"{name} session: explain names node n{last['id']}'s step{' and CUDA graph' if graph else ''} "
               f"({r.stderr.strip()})")
        for cmd in ("show", "costs"):
            r = run([kdflow, cmd, flow])
            marks = ["[decode 1]"] if cmd == "show" else ["session step prefill:", "session step decode 1:"]
            expect(r.returncode == 0 and all(m in r.stdout for m in marks),
                   f"{name} session: {cmd} shows the steps apart ({r.stderr.strip()})")
        # The attention's FLOPs from the runtime's arguments and the copied page tables: 4 query
        # heads of 16, 4·4·16 FLOPs a (query, key) pair; prefill of 7 causal: 28 pairs, the
        # second decode: 1 query over 9 keys.
        r = run([kdflow, "costs", flow])
        rows = {(ln.split()[0]): ln.split() for ln in r.stdout.splitlines() if "kv_cache." in ln}
        ragged = [v for v in rows.values() if v[2] == "kv_cache.prefill_ragged"]
        decode = [v for v in rows.values() if v[2] == "kv_cache.decode"]
        expect(len(ragged) == 2 and len(decode) == 4 and all("0.00717" in v for v in ragged) and
               sum("0.00205" in v for v in decode) == 2 and sum("0.0023" in v for v in decode) == 2,
               f"{name} session: costs gives each attention the FLOPs of its (query, key) pairs "
               f"(prefill {[v[5:7] for v in ragged]}, decode {[v[5:7] for v in decode]})")
    # A session file: two sequences, a prefill in chunks (paged prefill and merge), a removal
    # whose pages the next sequence reuses (kv_truth.py's SESSION_FILE, run by TVM alike).
    session_file = os.path.join(d, "session.json")
    file_flow = os.path.join(tmp, f"{name}_session_file.json")
    r = run([kdflow, "extract", d, "-q", "--session", session_file, "-o", file_flow])
    expect(r.returncode == 0, f"{name}: extract --session session.json ({r.stderr.strip()})")
    if r.returncode == 0:
        check_kv_runtime(name + " (session file)", json.load(open(file_flow)),
                         os.path.join(os.path.dirname(d), "llm", "kv_truth_session_file.json"))
        r = run([kdflow, "replay", d, "--session", session_file, "--backend", "cpu", "-q", "--repeat", "1",
                 "--input", "input_ids=" + os.path.join(d, "input_ids_session_file.npy")])
        rows = ok_rows(r.stdout)
        expect(r.returncode == 0 and len(rows) == 11,
               f"{name} session file: replay --backend cpu computes TVM's logits of all 11 forwards, the chunks "
               f"merged with the cached pages' attention and a batch decode of two sequences included "
               f"({len(rows)} of 11; exit {r.returncode}: "
               f"{r.stderr.strip()[-300:]})")
    # Across page boundaries (16 tokens a page): a 45-token prefill, decodes into a fourth page, a
    # second sequence beside it.
    check_session_spec(kdflow, d, tmp, os.path.join(d, "session_long.json"),
                       os.path.join(os.path.dirname(d), "llm", "kv_truth_session_long.json"),
                       "input_ids_session_long.npy", LONG_FORWARDS, None)
    # Forks (inside a page: copy_single_page; two depths of pages, merged) and popn.
    check_session_spec(kdflow, d, tmp, os.path.join(d, "session_fork.json"),
                       os.path.join(os.path.dirname(d), "llm", "kv_truth_session_fork.json"),
                       "input_ids_session_fork.npy", FORK_FORWARDS, None, "session_fork")
    embed = np.zeros((1, 1, 64), dtype="float32")
    np.save(os.path.join(tmp, "x.npy"), embed)
    r = run([kdflow, "replay", d, "--function", "decode", "--backend", "cpu", "-q", "--input",
             "x=" + os.path.join(tmp, "x.npy")])
    expect(r.returncode == 69 and "TVM's KV cache does this attention inside its runtime" in r.stderr and
           r.stderr.count("\n") == 1, f"{name}: replay refuses the KV cache's attention in one line, exit 69 "
           f"({r.returncode}: {r.stderr.strip()})")


def ok_rows(stdout: str) -> List[str]:
    """The rows of replay's output table that matched their reference (output_<step>.npy)."""
    return [ln for ln in stdout.splitlines() if "output_" in ln and ln.split()[-1:] == ["ok"]]


LONG_FORWARDS = 8  # kv_truth.LONG_SESSION: prefill 45, four decodes, prefill 20, two decodes
FORK_FORWARDS = 9  # kv_truth.FORK_SESSION: forwards between its forks and popn


def check_session_spec(kdflow: str, d: str, tmp: str, spec: str, truth: str, tokens: str, forwards: int,
                       tolerance: Optional[float], refs: str = "") -> None:
    """One session of a language model: extracted, its KV cache runtime calls against TVM's
    runtime running the same model (`truth`), and its replay on the CPU back end against TVM's
    logits (within `tolerance`, float16's precision; else replay's defaults, rtol 1e-3 and atol
    1e-5). `refs`: a folder of d holding the token ids and TVM's logits (expect.json: the
    files in forward order), when they are not d's own output_<step>.npy."""
    name = os.path.basename(d)
    tol = ["--rtol", str(tolerance), "--atol", str(tolerance)] if tolerance else []
    if refs:
        r_dir = os.path.join(d, refs)
        tol += ["--expect", *[os.path.join(r_dir, f) for f in json.load(open(os.path.join(r_dir, "expect.json")))]]
        tokens = os.path.join(refs, tokens)
    within = f"within {tolerance}" if tolerance else "within replay's default tolerances"
    flow = os.path.join(tmp, f"{name}_{os.path.basename(truth)}")
    r = run([kdflow, "extract", d, "-q", "--session", spec, "-o", flow])
    expect(r.returncode == 0, f"{name}: extract --session {os.path.basename(spec)} ({r.stderr.strip()})")
    if r.returncode != 0:
        return
    check_kv_runtime(f"{name} ({os.path.basename(spec)})", json.load(open(flow)), truth)
    r = run([kdflow, "replay", d, "--session", spec, "--backend", "cpu", "-q", "--repeat", "1", "--input",
             "input_ids=" + os.path.join(d, tokens), *tol])
    rows = ok_rows(r.stdout)
    expect(r.returncode == 0 and len(rows) == forwards,
           f"{name} {os.path.basename(spec)}: replay --backend cpu gives TVM's logits of all {forwards} "
           f"forwards {within} ({len(rows)} match; exit {r.returncode}: {r.stderr.strip()[-300:]})")


def check_without_weights(kdflow: str, d: str, tmp: str, df: dict, spec: str, dims: List[str]) -> None:
    """The session extracted without the params file (--no-params: the packed params' shapes
    read from the build, `dims` binding their symbolic dimensions) is the flow with it: the same
    nodes, kernels with the same launches and arguments, the same buffers but for the params'
    names (an nn build states none; MLC-LLM's _metadata does)."""
    name = os.path.basename(d)
    flow = os.path.join(tmp, f"{name}_noweights.json")
    r = run([kdflow, "extract", d, "-q", "--session", spec, "--no-params", *dims, "-o", flow])
    expect(r.returncode == 0, f"{name} {spec} without weights: extract --no-params ({r.stderr.strip()[-300:]})")
    if r.returncode != 0:
        return
    nw = json.load(open(flow))

    def shape(f: dict) -> Tuple[Any, ...]:
        return (f["kernels"], [(n.get("function"), n["inputs"], n["outputs"]) for n in f["nodes"]],
                [(b["kind"], b["shape"], b["dtype"], b.get("bytes")) for b in f["buffers"]])
    params = [b["name"] for b in df["buffers"] if b["kind"] == "param"]
    expect(shape(nw) == shape(df) and len(params) > 0,
           f"{name} {spec} without weights: the flow with the params file's, {len(df['kernels'])} kernels and "
           f"{len(params)} params alike")


def check_llm_sessions(kdflow: str, d: str, tmp: str, tolerance: Optional[float]) -> None:
    """A language model of another size or precision (llm_f16: TVM's half host code, half4 in
    shared memory; llm_mqa: 3 layers, one KV head, head dim 32): its four sessions (prefill:7,
    decode:2, the session file, the long session across pages, forks and popn) against TVM's
    runtime and logits."""
    for spec, truth, tokens, forwards in (("prefill:7,decode:2", "kv_truth.json", "input_ids.npy", 3),
                                          (os.path.join(d, "session.json"), "kv_truth_session_file.json",
                                           "input_ids_session_file.npy", 11),
                                          (os.path.join(d, "session_long.json"), "kv_truth_session_long.json",
                                           "input_ids_session_long.npy", LONG_FORWARDS),
                                          (os.path.join(d, "session_fork.json"), "kv_truth_session_fork.json",
                                           "input_ids_session_fork.npy", FORK_FORWARDS)):
        check_session_spec(kdflow, d, tmp, spec, os.path.join(d, truth), tokens, forwards, tolerance,
                           "session_fork" if "fork" in spec else "")


def check_session_replay(kdflow: str, d: str, tmp: str) -> None:
    """The session replayed on the CPU back end, every kernel (the KV cache runtime's too, with
    its auxiliary arrays copied between steps) from the CUDA source: each step's logits against
    TVM's own run of the same model on the CPU (kv_truth.py wrote the tokens and logits). With
    other tokens the logits must differ: the comparison can fail."""
    name = os.path.basename(d)
    r = run([kdflow, "replay", d, "--session", "prefill:7,decode:2", "--backend", "cpu", "-q", "--repeat", "1"])
    rows = ok_rows(r.stdout)
    expect(r.returncode == 0 and len(rows) == 3,
           f"{name} session: replay --backend cpu computes TVM's logits of prefill and both decode steps "
           f"({len(rows)} of 3 match; exit {r.returncode}: {r.stderr.strip()[-300:]})")
    tokens = np.load(os.path.join(d, "input_ids.npy"))
    other = os.path.join(tmp, f"{name}_other_ids.npy")
    np.save(other, ((tokens + 1) % 256).astype("int32"))
    r = run([kdflow, "replay", d, "--session", "prefill:7,decode:2", "--backend", "cpu", "-q", "--repeat", "1",
             "--input", "input_ids=" + other])
    expect(r.returncode == 1, f"{name} session: with other token ids the logits differ from TVM's (exit {r.returncode})")
    r = run([kdflow, "replay", d, "--session", "prefill:7,decode:2", "--backend", "cpu", "-q", "--nodes", "n20..n30",
             "--inputs-from", tmp])
    expect(r.returncode == 69 and "copies data from the host between kernels" in r.stderr and
           r.stderr.count("\n") == 1, f"{name} session: --nodes is refused in one line, exit 69 "
           f"({r.returncode}: {r.stderr.strip()})")
    # --mode dag: the CPU back end runs eagerly and still reports the DAG, host copies ordered in it
    # (graph and dag launches of a session run on the fake driver in the unit tests and on a GPU
    # in scripts/gpu-check.sh).
    r = run([kdflow, "replay", d, "--session", "prefill:7,decode:2", "--backend", "cpu", "--mode", "dag",
             "--repeat", "1"])
    rows = ok_rows(r.stdout)
    expect(r.returncode == 0 and len(rows) == 3 and re.search(r"longest chain \d+ of 94 steps", r.stdout) is not None,
           f"{name} session: --mode dag on the CPU back end: eager runs match and the DAG counts 91 kernels and "
           f"3 host copies ({r.returncode}: {r.stdout[-400:]} {r.stderr.strip()[-300:]})")


def check_kv_runtime(name: str, df: dict, truth_path: str) -> None:
    """The calls kdflow models TVM's KV cache runtime making (nodes with runtime_call), against
    what the real runtime called when TVM ran the same model and session on the CPU
    (kv_truth.py): the same host functions in the same order and step; every tensor argument
    with the same shape and dtype, the auxiliary arrays at the same byte offsets with the same
    values (from the flow's host copies), the cache's own buffers the same memory exactly when
    the runtime passed the same memory; every scalar equal."""
    if not os.path.exists(truth_path):
        expect(False, f"{name} session: {truth_path} is missing (build_models.py writes it)")
        return
    truth = json.load(open(truth_path))["calls"]
    nodes = [n for n in df["nodes"] if n.get("runtime_call")]
    calls = [n for n in nodes if n["runtime_role"] != "aux copy"]
    copies = {c["graph_node"]: c for c in df.get("host_copies", [])}
    steps = sorted({n["session_step"] for n in nodes})
    want_steps = sorted({c["step"] for c in truth})
    # Forks and popn call the runtime (copy_single_page) outside a forward: no copy there.
    forwards = [st for st in steps if not st.startswith(("fork_sequence ", "popn "))]
    expect(len(copies) == len(forwards) and steps == want_steps and
           all(n["id"] in copies for n in nodes if n["runtime_role"] == "aux copy"),
           f"{name} session: one copy of the KV cache's auxiliary arrays per forward ({len(copies)} copies, "
           f"{len(forwards)} forwards, {len(steps)} steps; TVM's runtime ran {len(want_steps)})")
    got_seq = [(n["session_step"], n["runtime_role"]) for n in calls]
    want_seq = [(c["step"], c["role"]) for c in truth]
    expect(got_seq == want_seq, f"{name} session: {len(calls)} KV cache runtime calls in TVM's order "
           f"(TVM's runtime: {len(truth)}; first difference "
           f"{next(((g, w) for g, w in zip(got_seq, want_seq) if g != w), None)})")
    if got_seq != want_seq:
        return
    copy_of_step = {}
    for n in nodes:
        if n["runtime_role"] == "aux copy":
            copy_of_step[n["session_step"]] = copies[n["id"]]
    bad: List[str] = []
    same_kdflow, same_tvm = {}, {}
    bufs = df["buffers"]
    base = {}  # step → the address of the aux buffer's start (q_rope_position_map, offset 0)
    for n, t in zip(calls, truth):
        if t["role"] == "split rotary":
            base.setdefault(t["step"], t["args"][1]["address"])
    # A step with no rotary split (MLA's): its first auxiliary argument anchors the others.
    for n, t in zip(calls, truth):
        for a, w in zip(n["runtime_args"], t["args"]):
            if t["step"] not in base and w["kind"] == "tensor" and "address" in w and "buffer" in a and \
                    bufs[a["buffer"]]["name"] == "kv_cache.aux":
                base[t["step"]] = w["address"] - a["offset"]
    for n, t in zip(calls, truth):
        where = f"{n['session_step']} {n['runtime_role']} (n{n['id']})"
        if len(n["runtime_args"]) != len(t["args"]):
            bad.append(f"{where}: {len(n['runtime_args'])} arguments, TVM {len(t['args'])}")
            continue
        for i, (a, w) in enumerate(zip(n["runtime_args"], t["args"])):
            if w["kind"] == "tensor":
                tensor = a.get("tensor", {})
                if a.get("dtype") != "DLTensor*" or tensor.get("shape") != w["shape"] or \
                        tensor.get("dtype") != w["dtype"]:
                    bad.append(f"{where} arg {i}: {tensor}, TVM {w['dtype']}{w['shape']}")
                    continue
                b = bufs[a["buffer"]]
                if b["name"] == "kv_cache.aux":
                    c = copy_of_step[n["session_step"]]
                    first = (a["offset"] - c["offset"]) // 4
                    got = c["values"][first:first + int(np.prod(w["shape"]))]
                    if got != w.get("values"):
                        bad.append(f"{where} arg {i}: values {got}, TVM {w.get('values')}")
                    if "address" in w and w["address"] - base[t["step"]] != a["offset"]:
                        bad.append(f"{where} arg {i}: at byte {a['offset']} of the aux buffer, "
                                   f"TVM {w['address'] - base[t['step']]}")
                elif b["name"].startswith("kv_cache.") and "address" in w:
                    key = (b["storage_id"], a["offset"])
                    if same_kdflow.setdefault(key, w["address"]) != w["address"] or \
                            same_tvm.setdefault(w["address"], key) != key:
                        bad.append(f"{where} arg {i}: {b['name']} is not the memory TVM's runtime passed")
            elif w["kind"] in ("int", "float"):
                v = a.get("value")
                if v is None or isinstance(v, str) or abs(float(v) - float(w["value"])) > 1e-6 * max(1.0, abs(float(w["value"]))):
                    bad.append(f"{where} arg {i}: {v}, TVM {w['value']}")
    expect(not bad and len(calls) > 0,
           f"{name} session: every argument of the {len(calls)} KV cache runtime calls is what TVM's runtime passed, "
           f"auxiliary arrays at their offsets with their values ({len(bad)} differ: {bad[:4]})")


def check_swap(kdflow: str, d: str, tmp: str) -> None:
    """Two read arguments of one kernel, distinct buffers of the same size, swapped in the flow."""
    name = os.path.basename(d)
    flow = os.path.join(tmp, name + ".json")
    df = json.load(open(flow))
    size = {b["id"]: b["bytes"] for b in df["buffers"]}
    kinds = {b["id"]: b["kind"] for b in df["buffers"]}
    for k in df["kernels"]:
        reads = [i for i, a in enumerate(k["args"]) if a.get("access") == "read" and "buffer" in a]
        pairs = [(i, j) for i in reads for j in reads if i < j and k["args"][i]["buffer"] != k["args"][j]["buffer"]
                 and size[k["args"][i]["buffer"]] == size[k["args"][j]["buffer"]]
                 and "param" not in (kinds[k["args"][i]["buffer"]], kinds[k["args"][j]["buffer"]])]
        if not pairs:
            continue
        i, j = pairs[0]
        a, b = k["args"][i], k["args"][j]
        a["buffer"], b["buffer"] = b["buffer"], a["buffer"]
        a.pop("footprint", None), b.pop("footprint", None)
        bad = os.path.join(tmp, name + ".swapped.json")
        json.dump(df, open(bad, "w"))
        r = run([kdflow, "replay", d, "--flow", bad, "--backend", "cpu", "-q", "--repeat", "1", "--warmup", "0"])
        node = k["graph_node"]
        expect(r.returncode == 1 and f"node {node} " in r.stderr and "first node whose result differs" in r.stderr,
               f"{name}: kernel {k['name']}'s arguments {i} and {j} swapped: replay fails naming node {node} "
               f"({r.stderr.strip()[-300:]})")
        return
    expect(False, f"{name}: no kernel with two same-size read arguments to swap")


def check_builtin_model(kdflow: str, d: str, want: Dict[str, Any], tmp: str) -> None:
    """What builtin_models.EXPECT says of a model beyond check_model: the builtins TVM's own text
    of the executable calls (so the build is of the class it stands for), input names and their
    files, the input values a flow depends on (and replay refusing other values), no kernel."""
    name = os.path.basename(d)
    flow = os.path.join(tmp, name + ".json")
    df = json.load(open(flow))
    calls = sum(json.load(open(os.path.join(d, "vm_calls.json"))).values(), []) \
        if os.path.exists(os.path.join(d, "vm_calls.json")) else []
    for b in want.get("builtins", []):
        expect(b in calls, f"{name}: TVM's executable calls {b}")
    if "builtins_any" in want:
        expect(any(b in calls for b in want["builtins_any"]),
               f"{name}: TVM's executable calls one of {want['builtins_any']}")
    inputs = [df["buffers"][b]["name"] for b in df["inputs"]]
    if "inputs" in want:
        files = sorted(f for f in os.listdir(d) if f.startswith("input_"))
        expect(inputs == want["inputs"] and files == sorted(want["files"]),
               f"{name}: inputs {inputs} (want {want['inputs']}), stored as {files}")
        # Each named on the command line by its encoded file name: the same replay.
        spec = [a for i in inputs for a in ("--input", f"{enc(i)}={os.path.join(d, 'input_' + enc(i) + '.npy')}")]
        r = run([kdflow, "replay", d, "--backend", "cpu", "-q", "--repeat", "1", "--warmup", "0", *spec])
        expect(r.returncode == 0 and "all match" in r.stdout,
               f"{name}: replay with --input ENCODED_NAME=FILE for every input ({r.stderr.strip()[-300:]})")
    for inp, values in want.get("values_used", {}).items():
        got = [df["buffers"][b].get("values_used") for b in df["inputs"] if df["buffers"][b]["name"] == inp]
        expect(got == [values], f"{name}: input {inp}'s buffer records the values the flow depends on ({got})")
        other = os.path.join(tmp, f"{name}.{inp}.other.npy")
        a = np.load(os.path.join(d, f"input_{enc(inp)}.npy"))
        np.save(other, (a + 1).astype(a.dtype) if a.dtype != bool else ~a)
        r = run([kdflow, "replay", d, "--backend", "cpu", "-q", "--repeat", "1", "--input", f"{inp}={other}"])
        expect(r.returncode == 65 and "the flow was extracted for" in r.stderr and r.stderr.count("\n") == 1,
               f"{name}: replay refuses {inp} with other values in one line, exit 65 ({r.stderr.strip()[-300:]})")
        r = run([kdflow, "show", flow])
        expect(f"{inp}: the flow depends on its values" in r.stdout, f"{name}: show says the flow depends on {inp}")
    if want.get("no_kernel"):
        r = run([kdflow, "show", d])
        expect(not df["kernels"] and r.returncode == 0 and "no kernel" in r.stdout,
               f"{name}: a flow with no kernel, and show says so ({len(df['kernels'])} kernels)")
        for cmd in ("costs", "view"):
            out = ["-o", os.path.join(tmp, name + ".html")] if cmd == "view" else []
            r = run([kdflow, cmd, d, *out])
            expect(r.returncode == 0, f"{name}: {cmd} of a flow with no kernel succeeds ({r.stderr.strip()[-200:]})")


def enc(name: str) -> str:
    """The file-name encoding of docs/schema.md (kdflow_tvm._folder.encode_name)."""
    keep = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
    return "".join(chr(c) if c in keep else f"%{c:02X}" for c in name.encode())


def check_params_beside(kdflow: str, d: str, tmp: str) -> None:
    """A Relax folder with a params.bin of other names beside vm_exec.bin replays by default from
    the executable's constant pool (the weights the build really uses)."""
    name = os.path.basename(d)
    try:
        # Through the exporter's import: TVM 0.26 built from its tag needs tvm-ffi told to skip
        # object types its Python does not register (../shared/TOOLCHAIN.md).
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                        "python"))
        from kdflow_tvm import _tvm  # type: ignore[import-not-found]
        tvm = _tvm.import_tvm()
        save = tvm.runtime.save_param_dict
        make = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
    except Exception as e:
        print(f"skip  {name}: params.bin beside the executable (no TVM to write one: {type(e).__name__})")
        return
    c = os.path.join(tmp, name + ".with_params")
    shutil.copytree(d, c)
    with open(os.path.join(c, "params.bin"), "wb") as f:
        f.write(bytes(save({"l1.weight": make(np.zeros((64, 100), "float32"))})))
    r = run([kdflow, "replay", c, "--backend", "cpu", "-q", "--repeat", "1", "--warmup", "0"])
    expect(r.returncode == 0 and "all match" in r.stdout,
           f"{name}: replays by default with a params.bin of the user's names beside vm_exec.bin "
           f"({r.stderr.strip()[-300:]})")


# ------------------------------------------------------------------ sharded builds (issue 41)
def check_sharded(kdflow: str, d: str, want: Dict[str, Any], tmp: str) -> None:
    """A sharded (tensor-parallel, TVM disco) build of sharded_models.py. Asserted, of what TVM and
    the exporter wrote: one params_shard<r>.bin per rank and no params.bin, build_info's "shards";
    the collectives each VM function calls, by kind and count, in TVM's own text of the
    executable (vm_calls.json; host.c's call sites in compiled mode); the references (the
    unsharded model's outputs) and no node references. Then kdflow on it (check_sharded_kdflow)."""
    name = os.path.basename(d)
    info = json.load(open(os.path.join(d, "build_info.json")))
    ranks = want["ranks"]
    shards = sorted(f for f in os.listdir(d) if f.startswith("params"))
    expect(info.get("shards") == ranks and shards == [f"params_shard{r}.bin" for r in range(ranks)],
           f"{name}: {ranks} ranks: params_shard0..{ranks - 1}.bin and no params.bin, build_info shards "
           f"{info.get('shards')} ({shards})")
    if want.get("compiled"):
        host = open(os.path.join(d, "host.c"), errors="replace").read()
        sites = re.findall(r"TVMFFIEnvModLookupFromImports\([^,]+, \"(runtime\.disco\.[\w.]+)\"", host)
        got = {fn: {c: sites.count(c) for c in sorted(set(sites))} for fn in want["collectives"]}
        where = "host.c's call sites"
    else:
        calls = json.load(open(os.path.join(d, "vm_calls.json")))
        got = {fn: {c: calls.get(fn, []).count(c) for c in sorted(set(calls.get(fn, []))) if c.startswith("runtime.disco.")}
               for fn in want["collectives"]}
        where = "TVM's text of the executable"
    expect(got == want["collectives"],
           f"{name}: the collectives each VM function calls, in {where}: {got} (want {want['collectives']})")
    refs = _session_refs(want["session"]) if want.get("session") else ["output_0.npy"]
    missing = [f for f in refs if not os.path.exists(os.path.join(d, f))]
    expect(not missing and not os.path.exists(os.path.join(d, "reference", "nodes.json")),
           f"{name}: the unsharded model's references {refs} and no node references (missing {missing})")
    check_sharded_kdflow(kdflow, d, want, got, tmp)


def _kdflow_session() -> Any:
    """kdflow_tvm's session reader (python/ of this repository; needs no TVM)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "python"))
    from kdflow_tvm import _session  # type: ignore[import-not-found]
    return _session


def _session_forwards(spec: str, extend: bool = False) -> Dict[str, int]:
    """How many times a session runs each VM function: every forward embeds its tokens first. A
    spec ("prefill:7,decode:2") or a session file (read as kdflow_tvm reads it); `extend`: the
    build has an extend function, which MLC's engine, kdflow and kdflow_tvm call for a prefill
    of a sequence prefilled before, or forked."""
    n: Dict[str, int] = {"prefill": 0, "decode": 0}
    if ":" in spec and not os.path.exists(spec):
        for part in spec.split(","):
            key, _, value = part.partition(":")
            if key == "prefill":
                n["prefill"] += 1
            elif key == "decode":
                n["decode"] += int(value)
        n["embed"] = n["prefill"] + n["decode"]
        return n
    _session = _kdflow_session()
    for fn in _session.vm_functions(_session.forwards(_session.parse(spec)), extend):
        if fn:
            n[fn] = n.get(fn, 0) + 1
            n["embed"] = n.get("embed", 0) + 1
    return n


def _session_refs(spec: str) -> List[str]:
    """The references llm_session writes for a session: its tokens and each forward's logits."""
    if ":" in spec and not os.path.exists(spec):
        n = _session_forwards(spec)
        return ["input_ids.npy"] + ["output_prefill.npy"] * (n["prefill"] > 0) + \
            [f"output_decode_{i}.npy" for i in range(n["decode"])]
    _session = _kdflow_session()
    return ["input_ids.npy"] + ["output_" + label.replace(" ", "_") + ".npy"
                                for label, op, _, _ in _session.forwards(_session.parse(spec))
                                if op in ("prefill", "decode", "batch_decode")]


def check_sharded_astra_sim(kdflow: str, d: str, want: Dict[str, Any], tmp: str) -> None:
    """The sharded flow's Chakra traces (one per rank, PREFIX.<r>.et) run to the end in ASTRA-sim
    (scripts/astra-sim.sh, roofline on and off): one finished line per rank, and each rank's
    collectives as COMM nodes of the trace. Skipped with a line where ../shared/astra-sim is absent."""
    name = os.path.basename(d)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env_sh = os.path.join(os.path.dirname(root), "shared", "astra-sim", "env.sh")
    if not os.path.exists(env_sh) and not shutil.which("AstraSim_Analytical_Congestion_Unaware"):
        print(f"skip  {name}: ASTRA-sim (no ../shared/astra-sim)", flush=True)
        return
    prefix = os.path.join(tmp, f"{name}.trace")
    extra = ["--session", want["session"]] if want.get("session") else []
    r = run([kdflow, "extract", d, "-q", "--format", "chakra", "-o", prefix + ".et", *extra])
    files = [f"{prefix}.{k}.et" for k in range(want["ranks"])]
    expect(r.returncode == 0 and all(os.path.exists(f) for f in files),
           f"{name}: extract --format chakra writes one trace per rank, {os.path.basename(files[0])} ... "
           f"(exit {r.returncode}{': ' + (r.stdout + r.stderr).strip()[:200] if r.returncode else ''})")
    if r.returncode != 0:
        return
    a = run(["bash", os.path.join(root, "scripts", "astra-sim.sh"), prefix + ".et"],
            env=dict(os.environ, KDFLOW_ASTRA_SIM_ENV=env_sh))
    lines = [ln for ln in a.stdout.splitlines() if ln.startswith("roofline")]
    expect(a.returncode == 0 and len(lines) == 2 and all(f"{want['ranks']} NPUs" in ln for ln in lines),
           f"{name}: ASTRA-sim runs every rank's trace to the end, roofline on and off: "
           f"{'; '.join(lines) or (a.stdout + a.stderr).strip()[-300:]}")


def check_sharded_kdflow(kdflow: str, d: str, want: Dict[str, Any], tvm_calls: Dict[str, Dict[str, int]],
                         tmp: str) -> None:
    """kdflow on a sharded build (issue 41). Extract (each VM function of an LLM, and its session):
    the flow states the ranks, and its collectives are exactly the calls TVM's executable makes,
    by kind and count (a session: each function's calls times the forwards that run it), each with
    bytes = elements x element size, an allreduce reading a per-rank partial and leaving the same
    bytes on every rank. Replay on the CPU back end, every rank in one process: every rank's
    outputs equal the unsharded model's; and with every rank given rank 0's shard it must fail."""
    name = os.path.basename(d)
    ranks = want["ranks"]
    runs = [(fn, ["--function", fn, *extra]) for fn, extra in want.get("functions", {}).items()]
    if want.get("session"):
        runs.append(("session", ["--session", want["session"]]))
    if not runs:
        runs = [("main", [])]
    flows: Dict[str, Dict[str, Any]] = {}
    for label, extra in runs:
        flow = os.path.join(tmp, f"{name}.{label}.json")
        r = run([kdflow, "extract", d, "-q", "-o", flow, *extra])
        expect(r.returncode == 0, f"{name}: kdflow extract {' '.join(extra)} (exit {r.returncode}: "
                                  f"{(r.stdout + r.stderr).strip()[:300]})")
        if r.returncode != 0:
            continue
        df = json.load(open(flow))
        flows[label] = df
        if label == "session":
            per = _session_forwards(want["session"], extend="extend" in tvm_calls)
            want_calls: Dict[str, int] = {}
            for fn, times in per.items():
                for c, k in tvm_calls.get(fn, {}).items():
                    want_calls[c] = want_calls.get(c, 0) + k * times
        else:
            want_calls = dict(tvm_calls.get(label, {}))
        got_calls: Dict[str, int] = {}
        sizes_ok = True
        allreduce_ok = True
        size = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8}
        bufs = df["buffers"]
        for c in df["library_calls"]:
            if "collective" not in c:
                continue
            got_calls["runtime.disco." + c["collective"]] = got_calls.get("runtime.disco." + c["collective"], 0) + 1
            sizes_ok = sizes_ok and c["bytes"] == c["elements"] * size.get(c["dtype"], 0) > 0
            if c["collective"] == "allreduce":
                allreduce_ok = allreduce_ok and bool(bufs[c["send"]].get("per_rank")) and \
                    not bufs[c["recv"]].get("per_rank")
        expect(df.get("ranks") == ranks and got_calls == want_calls,
               f"{name} ({label}): the flow's ranks {df.get('ranks')} (want {ranks}) and collectives {got_calls} "
               f"equal TVM's calls {want_calls}")
        expect(sizes_ok and allreduce_ok,
               f"{name} ({label}): every collective's bytes = elements x element size; each allreduce reads a "
               f"per-rank partial and writes what every rank holds alike")
    # Replay every rank on the CPU back end against the unsharded model's outputs.
    base = ["--session", want["session"]] if want.get("session") else []
    r = run([kdflow, "replay", d, "--backend", "cpu", "--repeat", "1", "--warmup", "0", *base])
    out = r.stdout + r.stderr
    rows = re.findall(r"^r(\d+):(\d+)\s.*\bok\b", out, re.M)
    outputs = len(_session_refs(want["session"])) - 1 if want.get("session") else 1
    expect(r.returncode == 0 and len(rows) == ranks * outputs and {int(a) for a, _ in rows} == set(range(ranks)),
           f"{name}: replay --backend cpu of all {ranks} ranks: every rank's {outputs} output(s) equal the unsharded "
           f"model's (exit {r.returncode}, {len(rows)} ok rows){'' if r.returncode == 0 else ': ' + out.strip()[-400:]}")
    check_sharded_astra_sim(kdflow, d, want, tmp)
    if want.get("compiled"):
        return
    # A wrong shard must fail: every rank given rank 0's params.
    wrong = os.path.join(tmp, f"{name}.same_shard")
    shutil.rmtree(wrong, ignore_errors=True)
    shutil.copytree(d, wrong)
    for rk in range(1, ranks):
        shutil.copyfile(os.path.join(wrong, "params_shard0.bin"), os.path.join(wrong, f"params_shard{rk}.bin"))
    r = run([kdflow, "replay", wrong, "--backend", "cpu", "--repeat", "1", "--warmup", "0", *base])
    shutil.rmtree(wrong, ignore_errors=True)
    expect(r.returncode == 1 and "MISMATCH" in r.stdout,
           f"{name}: replay with every rank given rank 0's shard fails (exit {r.returncode}, want 1)")


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    kdflow, models = sys.argv[1], sys.argv[2]
    shared = sys.argv[3] if len(sys.argv) == 4 and os.path.isdir(sys.argv[3]) else None
    if not os.path.exists(os.path.join(models, "stamp")):
        print(f"check_models: skipped: {models} has no models (build_models.py skipped: no TVM)", file=sys.stderr)
        return 77
    print(f"check_models: {open(os.path.join(models, 'stamp')).read().strip()}")
    tmp = tempfile.mkdtemp(prefix="kdflow_tvm_check.")
    try:
        names = sorted(n for n in os.listdir(models) if os.path.isdir(os.path.join(models, n)))
        for n in names:
            if n in SHARDED:  # issue 41: TVM's side and kdflow's (extract, replay across ranks)
                check_sharded(kdflow, os.path.join(models, n), SHARDED[n], tmp)
                session = ["--session", "prefill:7,decode:2"] if SHARDED[n].get("session") else []
                check_codegen(kdflow, os.path.join(models, n), session, SHARDED[n]["ranks"])
                continue
            if n.startswith("llm"):
                check_codegen(kdflow, os.path.join(models, n), ["--session", "prefill:7,decode:2"])
            if n.startswith("llm"):  # every launch of its sessions against the executing oracle
                check_llm_oracle(kdflow, os.path.join(models, n), tmp, expect, oracle_includes())
            if n in ("llm", "llm_graph"):
                check_llm(kdflow, os.path.join(models, n), tmp)
                continue
            if n in ("llm_f16", "llm_mqa"):
                check_llm_sessions(kdflow, os.path.join(models, n), tmp, 0.05 if n == "llm_f16" else None)
                continue
            if n in TVM_DEFECTS:
                check_tvm_defect(kdflow, os.path.join(models, n), TVM_DEFECTS[n])
                continue
            check_model(kdflow, os.path.join(models, n), shared, tmp)
            check_codegen(kdflow, os.path.join(models, n), vm_function(os.path.join(models, n)))
            if n in EXPECT:
                check_builtin_model(kdflow, os.path.join(models, n), EXPECT[n], tmp)
        if os.path.isdir(os.path.join(models, "relay_cnn")):  # Relay (TVM 0.19): the fire module's concat
            check_swap(kdflow, os.path.join(models, "relay_cnn"), tmp)
        elif os.path.isdir(os.path.join(models, "two_branch")):  # not in 027s (the sharded models only)
            check_swap(kdflow, os.path.join(models, "two_branch"), tmp)
            check_params_beside(kdflow, os.path.join(models, "mlp"), tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if codegen.get("checker"):
            c = codegen["checker"]
            print("codegen: seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in c.seconds.items()))
            shutil.rmtree(c.work, ignore_errors=True)
    if failures:
        print(f"check_models: {len(failures)} failed", file=sys.stderr)
        return 1
    print("check_models: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
