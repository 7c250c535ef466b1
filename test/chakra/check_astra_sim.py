#!/usr/bin/env python3
"""check_astra_sim.py — kdflow's Chakra traces run in ASTRA-sim (issue 41), checked by what
ASTRA-sim reports, not by its exit status (it exits 0 when a trace never finishes).

For each sample: `kdflow extract --format chakra`, the trace's own invariants (no num_ops = 0
with tensor_size > 0; num_ops / tensor_size encode duration_ns for the stated local-mem-bw;
duration_micros keeps every prefix of the launch order within 0.5 us of the exact sum), then
scripts/astra-sim.sh on 2 NPUs of share/astra-sim's network, both simulators, roofline off and
on: every NPU finishes (`sys[i] finished`) at exactly the time the trace's durations imply
(ASTRA-sim runs one compute node at a time per NPU, so a trace of compute nodes takes their sum:
duration_ns each with the roofline on; duration_micros x 1000 ns, 1 ns for 0, with it off).

For a synthetic sharded flow (kdflow/1 JSON, ranks 2, kernels with sub-microsecond measured
times, each collective kind on the chain between them), written by kdflow_chakra_from_flow: the
flow without its collectives takes the sum of its kernels; with them, that plus what ASTRA-sim's
own run of each lone collective of the same size on the same network takes (an ALL_REDUCE node,
an ALL_GATHER node, a send/receive pair). The same flow on 4 ranks runs to the end on every NPU.

Usage: check_astra_sim.py KDFLOW HELPER [--samples DIR] [--env ENV_SH] [--work DIR]. Exit 77
(skipped, with a message) where ASTRA-sim is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import chakra_pb as pb  # noqa: E402

SAMPLES = ["mlp", "attention", "resnet18_tuned", "relax_mlp", "sort_scan", "mlp_cublas"]
SCRIPT = os.path.join(ROOT, "scripts", "astra-sim.sh")
LINE = re.compile(r"^roofline (on|off), congestion (unaware|aware), (\d+) NPUs: (\d+) ns \(per NPU: ([\d ]+)\)$")

failures: list[str] = []


def check(cond: bool, what: str) -> bool:
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)
    return cond


def simulate(trace: str, npus: int | None = None, roofline: str = "both") -> dict[tuple[str, str], list[int]]:
    """scripts/astra-sim.sh on `trace`, both simulators: {(roofline, simulator): per-NPU ns}."""
    cmd = [SCRIPT, "--simulator", "both", "--roofline", roofline, trace]
    if npus:
        cmd[1:1] = ["--npus", str(npus)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=os.environ)
    out: dict[tuple[str, str], list[int]] = {}
    for line in r.stdout.splitlines():
        m = LINE.match(line)
        if m:
            out[(m.group(1), m.group(2))] = [int(x) for x in m.group(5).split()]
    check(r.returncode == 0, f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return out


def compute_nodes(t: pb.Trace) -> list[pb.Node]:
    return [n for n in t.nodes if n.type == "COMP_NODE"]


def expected_ns(t: pb.Trace, mode: str) -> int:
    """A trace of compute nodes only: ASTRA-sim runs them one at a time, so their sum."""
    if mode == "on":
        return sum(n.attr["duration_ns"] for n in compute_nodes(t))
    return sum(n.duration_micros * 1000 if n.duration_micros else 1 for n in compute_nodes(t))


def check_trace(label: str, t: pb.Trace) -> None:
    """What every trace kdflow writes must hold, whatever ASTRA-sim makes of it."""
    bw = t.meta.get("astra_sim_local_mem_bw_gbps")
    check(isinstance(bw, int) and bw > 0, f"{label}: metadata astra_sim_local_mem_bw_gbps {bw!r}")
    check(f'"local-mem-bw": {bw}' in t.meta.get("astra_sim_system", ""), f"{label}: metadata astra_sim_system")
    ids = [n.id for n in t.nodes]
    check(len(set(ids)) == len(ids), f"{label}: node ids repeat")
    known = set(ids)
    exact = rounded = 0.0
    for n in t.nodes:
        what = f"{label}: node {n.id} {n.name} ({n.type})"
        check(all(d in known for d in n.deps), f"{what}: a dependency on a node not in the trace")
        check(n.attr.get("is_cpu_op") is False, f"{what}: is_cpu_op is not false")
        if n.type == "COMP_NODE":
            ops, size, ns = n.attr.get("num_ops"), n.attr.get("tensor_size"), n.attr.get("duration_ns")
            check(isinstance(ops, int) and isinstance(size, int) and ops > 0 and size > 0,
                  f"{what}: num_ops {ops!r}, tensor_size {size!r} (ASTRA-sim's roofline needs both above 0)")
            check(ns == max(1, round(n.attr["duration_us"] * 1000)), f"{what}: duration_ns {ns} for {n.attr['duration_us']} us")
            check(size == ns * bw + bw // 2 and ops == size, f"{what}: num_ops/tensor_size {ops}/{size} do not encode {ns} ns")
            exact += n.attr["duration_us"]
            rounded += n.duration_micros
            check(abs(rounded - exact) <= 0.5 + 1e-6, f"{what}: duration_micros sum {rounded} is {exact} us off by more than 0.5")
        elif n.type == "COMM_COLL_NODE":
            check(n.attr.get("comm_type") in (0, 2), f"{what}: comm_type {n.attr.get('comm_type')} ASTRA-sim does not simulate")
            check(n.attr.get("comm_size", 0) > 0, f"{what}: comm_size")
        elif n.type in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
            for k in ("comm_src", "comm_dst", "comm_size", "comm_tag"):
                check(k in n.attr, f"{what}: no {k}")
        else:
            check(False, f"{what}: a node type kdflow does not write")


def check_samples(kdflow: str, samples_dir: str, work: str, figures: list[str]) -> None:
    for s in SAMPLES:
        d = os.path.join(samples_dir, s)
        if not os.path.isdir(d):
            check(False, f"sample {s}: {d} is missing")
            continue
        out = os.path.join(work, s + ".et")
        r = subprocess.run([kdflow, "extract", d, "-q", "-o", out], capture_output=True, text=True)
        if r.returncode == 69:  # a kdflow built without clang or protobuf
            print(f"SKIPPED samples: kdflow extract: {r.stderr.strip()}")
            return
        if not check(r.returncode == 0, f"kdflow extract {s}: exit {r.returncode}: {r.stderr.strip()}"):
            continue
        t = pb.read(out)
        check_trace(s, t)
        check(all(n.type == "COMP_NODE" for n in t.nodes), f"{s}: a one-rank flow has only compute nodes")
        got = simulate(out)
        exact_ns = sum(n.attr["duration_us"] for n in compute_nodes(t)) * 1000
        for mode in ("off", "on"):
            want = expected_ns(t, mode)
            for sim in ("unaware", "aware"):
                times = got.get((mode, sim))
                check(times == [want, want], f"{s}: roofline {mode}, congestion {sim}: {times} ns, expected {want} on each of 2 NPUs")
        figures.append(f"{s}: {len(t.nodes)} nodes, kernels {exact_ns:.0f} ns exact; ASTRA-sim roofline on "
                       f"{got.get(('on', 'unaware'), ['?'])[0]} ns, off {got.get(('off', 'unaware'), ['?'])[0]} ns")


# ---- a synthetic sharded flow

# Kernel times (us): below a microsecond, between, and above, so the roofline-on time (whole ns)
# and the roofline-off time (error-diffused whole us) both have something to keep.
KERNEL_US = [0.35, 2.7, 0.04, 12.25, 0.61]
# The communications between the kernels: (collective, extra fields, elements of float32).
COMMS = [
    ("allreduce", {"reduce_op": "sum"}, 1 << 18),   # 1 MiB
    ("allgather", {}, 1 << 14),                      # 64 KiB from each rank
    ("broadcast_from_worker0", {}, 1 << 12),         # 16 KiB
    ("send_to_worker", {"peer": 1}, 1 << 11),        # 8 KiB, rank 0 to rank 1 ...
    ("recv_from_worker", {"peer": 0}, 1 << 11),      # ... which rank 1 receives
]


def synthetic_flow(ranks: int, collectives: bool) -> tuple[dict, dict]:
    """K0 -> allreduce -> K1 -> allgather -> K2 -> broadcast -> K3 -> send/recv -> K4, every step
    reading what the one before wrote (kdflow/1; the dependencies are the RAW edges), and the
    timing file of its kernels. Without collectives: K0 -> K1 -> ... -> K4."""
    buffers, nodes, kernels, calls, deps, edges = [], [], [], [], [], []

    def buf(name: str, elements: int) -> int:
        buffers.append({"id": len(buffers), "kind": "intermediate", "storage_id": len(buffers), "name": name,
                        "dtype": "float32", "shape": [elements], "bytes": 4 * elements, "entry_id": len(buffers),
                        "node": None, "output_index": 0})
        return len(buffers) - 1

    def node(name: str, inputs: list[int], outputs: list[int]) -> int:
        nodes.append({"id": len(nodes), "op": "tvm_op", "name": name, "function": name, "inputs": inputs,
                      "outputs": outputs, "kernels": [], "workspaces": [], "library_calls": []})
        for b in inputs:
            edges.append({"kind": "read", "buffer": b, "node": len(nodes) - 1})
        for b in outputs:
            edges.append({"kind": "write", "buffer": b, "node": len(nodes) - 1})
            buffers[b]["node"] = len(nodes) - 1
        return len(nodes) - 1

    def arg(b: int, access: str) -> dict:
        return {"buffer": b, "offset": 0, "access": access, "dtype": "handle"}

    last = None  # (is library call, id, buffer it wrote)

    def dep(to: int, to_call: bool, reads: int) -> None:
        if last is None:
            return
        deps.append({"kind": "raw", "from": last[1], "to": to, "from_buffer": last[2], "to_buffer": reads,
                     **({"from_library_call": True} if last[0] else {}), **({"to_library_call": True} if to_call else {})})

    x = buf("x", 1 << 18)
    src = x
    for i, us in enumerate(KERNEL_US):
        elements = COMMS[i][2] if i < len(COMMS) else 1 << 10
        out = buf(f"k{i}_out", elements)
        n = node(f"fused_k{i}", [src], [out])
        kid = len(kernels)
        kernels.append({"id": kid, "name": f"fused_k{i}_kernel", "graph_node": n, "function": f"fused_k{i}",
                        "grid": [64, 1, 1], "block": [256, 1, 1], "dynamic_shared_memory": 0,
                        "args": [arg(out, "write"), arg(src, "read")]})
        nodes[n]["kernels"] = [kid]
        dep(kid, False, src)
        last = (False, kid, out)
        src = out
        if not collectives or i >= 3:
            continue
        kind, extra, elements = COMMS[i]
        recv_elements = elements * ranks if kind == "allgather" else elements
        recv = buf(f"{kind}_out", recv_elements)
        cn = node(f"ccl_{kind}", [src], [recv])
        cid = len(calls)
        calls.append({"id": cid, "name": f"runtime.disco.{kind}", "graph_node": cn, "function": f"ccl_{kind}",
                      "args": [arg(src, "read"), arg(recv, "write")], "after_kernel": kid, "collective": kind,
                      "in_group": False, "dtype": "float32", "elements": elements, "bytes": 4 * elements,
                      "send": src, "recv": recv, "in_place": False, **extra})
        nodes[cn]["library_calls"] = [cid]
        dep(cid, True, src)
        last = (True, cid, recv)
        src = recv
    if collectives:
        # K3's output goes to rank 1 (send_to_worker, then recv_from_worker), and K4 reads it.
        k3 = kernels[3]
        sent = k3["args"][0]["buffer"]
        got = buf("received", COMMS[3][2])
        for kind, extra, elements in COMMS[3:]:
            b = sent if kind == "send_to_worker" else got
            cn = node(f"ccl_{kind}", [b] if kind == "send_to_worker" else [], [] if kind == "send_to_worker" else [b])
            cid = len(calls)
            calls.append({"id": cid, "name": f"runtime.disco.{kind}", "graph_node": cn, "function": f"ccl_{kind}",
                          "args": [arg(b, "read" if kind == "send_to_worker" else "write"), {"value": extra["peer"], "dtype": "int32"}],
                          "after_kernel": 3, "collective": kind, "in_group": False, "dtype": "float32",
                          "elements": elements, "bytes": 4 * elements,
                          **({"send": b} if kind == "send_to_worker" else {"recv": b}), **extra})
            nodes[cn]["library_calls"] = [cid]
            if kind == "send_to_worker":
                deps.append({"kind": "raw", "from": 3, "to": cid, "from_buffer": sent, "to_buffer": sent, "to_library_call": True})
            else:
                recv_call = cid
        # K4 reads what rank 1 received (and K3's output, as before).
        deps.append({"kind": "raw", "from": recv_call, "to": 4, "from_buffer": got, "to_buffer": got, "from_library_call": True})
        kernels[4]["args"].append(arg(got, "read"))
    deps.sort(key=lambda d: (d["to_library_call"] if "to_library_call" in d else False, d["to"], d["from"]))
    flow = {"schema": "kdflow/1", "ranks": ranks, "sources": {"graph": "synthetic", "host": "", "meta": "", "params": None},
            "buffers": buffers, "kernels": kernels, "library_calls": calls, "nodes": nodes, "edges": edges,
            "dependencies": deps, "inputs": [x], "params": [], "outputs": [src]}
    timing = {"schema": "kdflow-replay-timing/1",
              "kernels": [{"kernel": i, "name": k["name"], "median_us": us} for i, (k, us) in enumerate(zip(kernels, KERNEL_US))]}
    return flow, timing


def write_flow(helper: str, work: str, name: str, ranks: int, collectives: bool) -> list[pb.Trace] | None:
    flow, timing = synthetic_flow(ranks, collectives)
    fp, tp = os.path.join(work, name + ".json"), os.path.join(work, name + ".timing.json")
    with open(fp, "w") as f:
        json.dump(flow, f, indent=1)
    with open(tp, "w") as f:
        json.dump(timing, f)
    r = subprocess.run([helper, fp, os.path.join(work, name + ".et"), tp], capture_output=True, text=True)
    if not check(r.returncode == 0, f"{name}: {helper}: exit {r.returncode}: {r.stderr.strip()}"):
        return None
    check(not os.path.exists(os.path.join(work, name + ".et")) or ranks == 1, f"{name}: {name}.et written beside the rank files")
    paths = [os.path.join(work, f"{name}.{r}.et") for r in range(ranks)] if ranks > 1 else [os.path.join(work, name + ".et")]
    if not check(all(os.path.exists(p) for p in paths), f"{name}: not every {name}.<rank>.et was written"):
        return None
    traces = [pb.read(p) for p in paths]
    for r, t in enumerate(traces):
        check_trace(f"{name}.{r}", t)
        check(t.meta.get("rank") == r and t.meta.get("ranks") == ranks, f"{name}.{r}: metadata rank/ranks {t.meta.get('rank')}/{t.meta.get('ranks')}")
    return traces


def lone(work: str, name: str, per_rank: list[list[pb.Node]]) -> str:
    for r, nodes in enumerate(per_rank):
        pb.write(os.path.join(work, f"{name}.{r}.et"), pb.Trace(version="0.0.4", nodes=nodes))
    return os.path.join(work, name + ".et")


def check_sharded(helper: str, work: str, figures: list[str]) -> None:
    with_c = write_flow(helper, work, "sharded", 2, True)
    without = write_flow(helper, work, "sharded_nocomm", 2, False)
    if not with_c or not without:
        return
    r0, r1 = with_c
    by_name = lambda t, kind: [n for n in t.nodes if n.attr.get("collective") == kind]  # noqa: E731
    # The collectives as the traces carry them.
    ar = by_name(r0, "allreduce")
    check(len(ar) == 1 and ar[0].type == "COMM_COLL_NODE" and ar[0].attr.get("comm_type") == 0
          and ar[0].attr.get("comm_size") == 4 << 18, f"allreduce: {ar}")
    ag = by_name(r1, "allgather")
    check(len(ag) == 1 and ag[0].type == "COMM_COLL_NODE" and ag[0].attr.get("comm_type") == 2
          and ag[0].attr.get("comm_size") == 4 << 14, f"allgather: {ag}")
    b0, b1 = by_name(r0, "broadcast_from_worker0"), by_name(r1, "broadcast_from_worker0")
    check(len(b0) == 1 and b0[0].type == "COMM_SEND_NODE" and b0[0].attr.get("comm_dst") == 1
          and len(b1) == 1 and b1[0].type == "COMM_RECV_NODE" and b1[0].attr.get("comm_src") == 0
          and b0[0].attr.get("comm_tag") == b1[0].attr.get("comm_tag") and b0[0].attr.get("comm_size") == b1[0].attr.get("comm_size") == 4 << 12,
          f"broadcast: rank 0 {b0}, rank 1 {b1}")
    s0, s1 = by_name(r0, "send_to_worker"), by_name(r1, "recv_from_worker")
    check(len(s0) == 1 and s0[0].type == "COMM_SEND_NODE" and len(s1) == 1 and s1[0].type == "COMM_RECV_NODE"
          and s0[0].attr.get("comm_tag") == s1[0].attr.get("comm_tag"), f"send/recv: {s0} {s1}")
    check([n.type for n in by_name(r1, "send_to_worker")] == ["COMP_NODE"], "send_to_worker on its receiver: a 1 ns placeholder")
    check([n.type for n in by_name(r0, "recv_from_worker")] == ["COMP_NODE"], "recv_from_worker on its sender: a 1 ns placeholder")

    # ASTRA-sim's own time for each lone communication, on the same network and system.
    coll = lambda i, t, size: pb.Node(id=i, name="c", type="COMM_COLL_NODE", attr={"is_cpu_op": False, "comm_type": t, "comm_size": size})  # noqa: E731
    send = lambda size: pb.Node(id=0, name="s", type="COMM_SEND_NODE", attr={"is_cpu_op": False, "comm_src": 0, "comm_dst": 1, "comm_size": size, "comm_tag": 0})  # noqa: E731
    recv = lambda size: pb.Node(id=0, name="r", type="COMM_RECV_NODE", attr={"is_cpu_op": False, "comm_src": 0, "comm_dst": 1, "comm_size": size, "comm_tag": 0})  # noqa: E731
    refs = {
        "all_reduce 1 MiB": simulate(lone(work, "lone_ar", [[coll(0, 0, 4 << 18)]] * 2), roofline="off"),
        "all_gather 64 KiB": simulate(lone(work, "lone_ag", [[coll(0, 2, 4 << 14)]] * 2), roofline="off"),
        "send/recv 16 KiB": simulate(lone(work, "lone_bc", [[send(4 << 12)], [recv(4 << 12)]]), roofline="off"),
        "send/recv 8 KiB": simulate(lone(work, "lone_p2p", [[send(4 << 11)], [recv(4 << 11)]]), roofline="off"),
    }
    got_with, got_without = simulate(os.path.join(work, "sharded.et")), simulate(os.path.join(work, "sharded_nocomm.et"))
    for sim in ("unaware", "aware"):
        comm = {k: max(v.get(("off", sim), [0])) for k, v in refs.items()}
        for mode in ("off", "on"):
            compute = expected_ns(without[0], mode)
            check(got_without.get((mode, sim)) == [compute, compute],
                  f"sharded, collectives removed, roofline {mode}, {sim}: {got_without.get((mode, sim))}, expected {compute} on each NPU")
            # Rank 0 also runs recv_from_worker's 1 ns placeholder after its send; rank 1's
            # placeholder (send_to_worker) runs while its receive waits.
            want = compute + sum(comm.values())
            check(got_with.get((mode, sim)) == [want + 1, want],
                  f"sharded, roofline {mode}, {sim}: {got_with.get((mode, sim))}, expected [{want + 1}, {want}] "
                  f"(kernels {compute} + {comm})")
        figures.append(f"2 ranks, congestion {sim}: lone " + ", ".join(f"{k} {v} ns" for k, v in comm.items()) +
                       f"; the flow: roofline on {got_with.get(('on', sim))} ns, off {got_with.get(('off', sim))} ns,"
                       f" without its collectives on {got_without.get(('on', sim))} ns")
    # Four ranks: the root sends the broadcast to each rank, unmatched messages do not hang.
    four = write_flow(helper, work, "sharded4", 4, True)
    if four:
        check([n.type for n in by_name(four[0], "broadcast_from_worker0")] == ["COMM_SEND_NODE"] * 3,
              "broadcast on 4 ranks: rank 0 sends to each")
        got4 = simulate(os.path.join(work, "sharded4.et"))
        for key in (("off", "unaware"), ("on", "unaware"), ("off", "aware"), ("on", "aware")):
            check(key in got4 and len(got4[key]) == 4, f"sharded on 4 ranks, roofline {key[0]}, {key[1]}: {got4.get(key)}")
        figures.append(f"4 ranks: roofline on {got4.get(('on', 'unaware'))} ns (congestion unaware)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kdflow")
    ap.add_argument("helper", help="kdflow_chakra_from_flow")
    ap.add_argument("--samples", default=os.path.join(ROOT, "samples"))
    ap.add_argument("--env", default=os.environ.get("KDFLOW_ASTRA_SIM_ENV", os.path.join(ROOT, "..", "shared", "astra-sim", "env.sh")))
    ap.add_argument("--work", help="keep the traces here")
    a = ap.parse_args()
    if shutil.which("AstraSim_Analytical_Congestion_Unaware") is None:
        if not os.path.isfile(a.env):
            print(f"SKIPPED: ASTRA-sim is absent ({a.env} not found, and no AstraSim_Analytical_* on PATH)")
            return 77
        r = subprocess.run(["bash", "-c", '. "$1" >/dev/null || exit 1; printf %s "$PATH"', "_", a.env],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"SKIPPED: {a.env} could not set ASTRA-sim up: {r.stderr.strip()}")
            return 77
        os.environ["PATH"] = r.stdout
    work = a.work or tempfile.mkdtemp(prefix="kdflow-chakra-")
    os.makedirs(work, exist_ok=True)
    start = time.monotonic()
    figures: list[str] = []
    try:
        check_samples(a.kdflow, a.samples, work, figures)
        check_sharded(a.helper, work, figures)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    for f in figures:
        print(f)
    print(f"check_astra_sim: {len(failures)} failures, {time.monotonic() - start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
