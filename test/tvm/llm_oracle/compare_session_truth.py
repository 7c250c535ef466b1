"""Compare kdflow's flow of an LLM session (`kdflow extract DIR --session ...`) with the executing
oracle's truth (llm_session_oracle.py).

usage: python3 compare_session_truth.py FLOW.json TRUTH.json

Every kernel launch in order: kernel name, the host.c function that launched it, the session
step, for a launch TVM's KV-cache runtime made its role and layer, the CUDA graph it is captured
into, grid, block, dynamic shared memory, every scalar argument's value, and every pointer
argument's memory and byte offset. Memory is compared up to a consistent renaming, as
../shared/tools/compare_relax_truth.py maps storages: the oracle's memory (a storage, an input, a
packed param, a constant, one piece of the cache's memory, the auxiliary buffer) and kdflow's (a
buffer's storage_id) must correspond one to one over the whole session, offsets equal; the first
correspondence fixes the name, any later contradiction is a mismatch. Inputs must be kdflow
inputs, params params, constants constants (constant_index equal). Prints one line per mismatch
(at most 20) and a last line "FLOW: N/M launches exact"; exit 0 only when all are.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, List, Optional, Tuple

Key = Tuple[Any, ...]


def oracle_memory(t: Dict[str, Any]) -> Optional[Key]:
    for k in ("storage", "input", "param", "const", "kv", "aux", "workspace"):
        if k in t:
            return (k, t[k])
    return None


class Renaming:
    """A one-to-one correspondence between the oracle's memory and kdflow's storage ids."""

    def __init__(self) -> None:
        self.fwd: Dict[Key, int] = {}
        self.back: Dict[int, Key] = {}

    def check(self, mine: Key, theirs: int) -> Optional[str]:
        a = self.fwd.setdefault(mine, theirs)
        b = self.back.setdefault(theirs, mine)
        if a != theirs:
            return f"oracle {mine[0]} {mine[1]} was kdflow storage {a} before, now storage {theirs}"
        if b != mine:
            return f"kdflow storage {theirs} was oracle {b[0]} {b[1]} before, now {mine[0]} {mine[1]}"
        return None


def check_arg(a: Dict[str, Any], t: Dict[str, Any], bufs: Dict[int, Dict[str, Any]], ren: Renaming) -> List[str]:
    if "i" in t or "f" in t:
        v = a.get("value")
        want = t.get("i", t.get("f"))
        if v is None or isinstance(v, str) or float(v) != float(want):
            return [f"value {v} != {want}"]
        return []
    if t.get("null") or t.get("t") == 4:
        return [] if a.get("null") else ["not a NULL pointer"]
    mem = oracle_memory(t)
    b = bufs.get(a.get("buffer", -1))
    if mem is None:
        return [f"unexpected oracle argument {t}"]
    if b is None:
        return [f"no buffer (oracle: {mem[0]} {mem[1]})"]
    bad = []
    if (a.get("offset") or 0) != t.get("offset", 0):
        bad.append(f"offset {a.get('offset')} != {t.get('offset', 0)}")
    kind = b.get("kind")
    if mem[0] == "input" and kind != "input":
        bad.append(f"kdflow {kind} {b.get('name')} for oracle input {mem[1]}")
    if mem[0] == "param" and kind != "param":
        bad.append(f"kdflow {kind} {b.get('name')} for oracle param {mem[1]} ({t.get('name', '')})")
    if mem[0] == "const" and (kind not in ("param", "constant") or b.get("constant_index") != mem[1]):
        bad.append(f"kdflow {kind} {b.get('name')} for oracle constant {mem[1]}")
    if mem[0] in ("storage", "kv", "aux", "workspace") and kind in ("input", "param", "constant"):
        bad.append(f"kdflow {kind} {b.get('name')} for oracle {mem[0]} {mem[1]}")
    why = ren.check(mem, b["storage_id"])
    if why:
        bad.append(f"{why} ({b.get('name')})")
    return bad


def compare(flow: Dict[str, Any], truth: Dict[str, Any]) -> Tuple[int, int, List[str]]:
    """(exact launches, oracle launches, problems)."""
    bufs = {b["id"]: b for b in flow.get("buffers", [])}
    nodes = {n["id"]: n for n in flow.get("nodes", [])}
    kernels = flow.get("kernels", [])
    launches = truth["launches"]
    problems: List[str] = []
    if len(kernels) != len(launches):
        problems.append(f"kdflow has {len(kernels)} launches, the oracle {len(launches)}")
    ren = Renaming()
    exact = 0
    for i, (k, t) in enumerate(zip(kernels, launches)):
        n = nodes.get(k.get("graph_node"), {})
        bad: List[str] = []
        pairs = [("kernel", k.get("name"), t["kernel"]), ("function", k.get("function"), t.get("function")),
                 ("step", n.get("session_step"), t.get("step")),
                 ("runtime role", n.get("runtime_role"), t.get("runtime_role")),
                 ("layer", n.get("layer"), t.get("layer")),
                 ("cuda graph", n.get("cuda_graph"), t.get("cuda_graph")),
                 ("grid", list(k.get("grid", [])), t["grid"]), ("block", list(k.get("block", [])), t["block"]),
                 ("smem", k.get("dynamic_shared_memory") or 0, t["smem"])]
        bad += [f"{what} {got} != oracle {want}" for what, got, want in pairs if got != want]
        args = k.get("args", [])
        if len(args) != len(t["args"]):
            bad.append(f"{len(args)} args != oracle {len(t['args'])}")
        else:
            for j, (a, ta) in enumerate(zip(args, t["args"])):
                bad += [f"arg {j}: {m}" for m in check_arg(a, ta, bufs, ren)]
        if bad:
            problems.append(f"launch {i} ({t['kernel']}, {t.get('step')}"
                            f"{', ' + t['runtime_role'] + ' layer ' + str(t['layer']) if 'runtime_role' in t else ''}): "
                            + "; ".join(bad))
        else:
            exact += 1
    return exact, len(launches), problems


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    flow = json.load(open(argv[0]))
    truth = json.load(open(argv[1]))
    exact, total, problems = compare(flow, truth)
    for p in problems[:20]:
        print(p)
    print(f"{argv[0]}: {exact}/{total} launches exact")
    return 0 if exact == total and not problems and total > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
