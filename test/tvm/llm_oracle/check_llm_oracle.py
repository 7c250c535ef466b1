"""check_models.py's check of a language-model build against the executing oracle of its sessions:
every launch of `kdflow extract --session` (host program and KV-cache runtime, CUDA-graph captures
and replays) against llm_session_oracle.py, which runs the build's host C with TVM's logged
runtime arguments. Then the comparison itself is checked: a flow with one grid value changed, or
two pointer arguments of one launch swapped, must fail.

    python3 check_llm_oracle.py KDFLOW MODEL_DIR...   (alone; check_models.py calls check_llm_oracle)
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_session_truth import compare  # noqa: E402

# (session, TVM's runtime log of it, in the build folder or, for a build of the same model, llm's)
SESSIONS = (("prefill:7,decode:2", "kv_truth.json"), ("session.json", "kv_truth_session_file.json"),
            ("session_long.json", "kv_truth_session_long.json"), ("session_fork.json", "kv_truth_session_fork.json"))


def _run(cmd: List[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)


def _perturbed(flow: Dict[str, Any]) -> List[Tuple[str, int, Dict[str, Any]]]:
    """Two wrong flows: a grid value of the first KV-cache runtime launch changed; two pointer
    arguments of distinct memory in the last runtime launch that has two swapped."""
    out: List[Tuple[str, int, Dict[str, Any]]] = []
    nodes = {n["id"]: n for n in flow["nodes"]}
    bufs = {b["id"]: b for b in flow["buffers"]}
    runtime = [i for i, k in enumerate(flow["kernels"]) if nodes[k["graph_node"]].get("runtime_call")]
    if not runtime:
        return out
    bad = copy.deepcopy(flow)
    bad["kernels"][runtime[0]]["grid"][0] += 1
    out.append((f"launch {runtime[0]}'s grid x + 1", runtime[0], bad))
    for i in reversed(runtime):  # a late launch: its buffers are named by earlier ones
        ptr = [j for j, a in enumerate(flow["kernels"][i]["args"]) if "buffer" in a]
        pairs = [(a, b) for a in ptr for b in ptr if a < b and
                 bufs[flow["kernels"][i]["args"][a]["buffer"]]["storage_id"] !=
                 bufs[flow["kernels"][i]["args"][b]["buffer"]]["storage_id"]]
        if pairs:
            a, b = pairs[0]
            bad = copy.deepcopy(flow)
            args = bad["kernels"][i]["args"]
            args[a], args[b] = args[b], args[a]
            out.append((f"launch {i}'s pointer arguments {a} and {b} swapped", i, bad))
            break
    return out


def check_llm_oracle(kdflow: str, d: str, tmp: str, expect: Callable[[bool, str], None],
                     includes: Optional[Sequence[str]]) -> None:
    name = os.path.basename(d)
    if includes is None:
        print(f"skip  {name}: sessions against the executing oracle (needs TVM's headers)")
        return
    for spec, log in SESSIONS:
        arg = spec if ":" in spec else os.path.join(d, spec)
        kv_log = next((p for p in (os.path.join(d, log), os.path.join(os.path.dirname(d), "llm", log))
                       if os.path.exists(p)), None)
        if (":" not in spec and not os.path.exists(arg)) or kv_log is None:
            print(f"skip  {name} ({spec}): session against the executing oracle (no {spec} or {log})")
            continue
        start = time.time()
        tag = f"{name}.{spec.replace(':', '_').replace(',', '_')}"
        flow_path = os.path.join(tmp, f"{tag}.flow.json")
        truth_path = os.path.join(tmp, f"{tag}.truth.json")
        r = _run([kdflow, "extract", d, "-q", "--session", arg, "-o", flow_path])
        expect(r.returncode == 0, f"{name} ({spec}): extract ({r.stderr.strip()[-300:]})")
        if r.returncode != 0:
            continue
        r = _run([sys.executable, os.path.join(HERE, "llm_session_oracle.py"), d, arg, kv_log, *includes,
                  "-o", truth_path, "--work", os.path.join(tmp, f"{tag}.oracle")])
        if r.returncode != 0 and "undefined symbol: TVMBackendGetFuncFromEnv" in r.stdout + r.stderr:
            # TVM 0.21 - 0.25's host code looks kernels up with TVMBackendGetFuncFromEnv, which the
            # oracle's stand-in runtime (written for 0.26) does not define.
            print(f"skip  {name} ({spec}): session against the executing oracle (its runtime has no "
                  f"TVMBackendGetFuncFromEnv, which TVM 0.21 - 0.25's host code calls); the session's replay "
                  f"checks TVM's logits instead")
            continue
        expect(r.returncode == 0, f"{name} ({spec}): the executing oracle ran the session "
               f"({(r.stdout + r.stderr).strip()[-400:]})")
        if r.returncode != 0:
            continue
        flow = json.load(open(flow_path))
        truth = json.load(open(truth_path))
        exact, total, problems = compare(flow, truth)
        runtime = sum(1 for ln in truth["launches"] if "runtime_role" in ln)
        replays = sum(1 for ln in truth["launches"] if ln.get("replay"))
        expect(exact == total and not problems and total > 0,
               f"{name} ({spec}): against the executing oracle: {exact}/{total} launches exact ({runtime} by the KV "
               f"cache's runtime, {replays} CUDA-graph replays; {time.time() - start:.1f} s)"
               f"{': ' + '; '.join(problems[:5]) if problems else ''}")
        if spec != SESSIONS[0][0]:
            continue
        for what, i, bad in _perturbed(flow):
            e, t, p = compare(bad, truth)
            expect(e < t and p[:1] != [] and p[0].startswith(f"launch {i} "),
                   f"{name} ({spec}): with {what} the comparison fails there first ({e}/{t} exact: {p[:1]})")


def main(argv: List[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.dirname(HERE))
    from check_models import oracle_includes  # type: ignore[import-not-found]
    failures: List[str] = []

    def expect(ok: bool, what: str) -> None:
        print(("ok    " if ok else "FAIL  ") + what, flush=True)
        if not ok:
            failures.append(what)

    tmp = tempfile.mkdtemp(prefix="llm_oracle_check.")
    for d in argv[1:]:
        check_llm_oracle(argv[0], d, tmp, expect, oracle_includes())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
