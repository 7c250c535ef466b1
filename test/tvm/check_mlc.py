"""kdflow on MLC-LLM's architectures as MLC builds them (mlc_models.py), against TVM's references.

    check_mlc.py KDFLOW MODELS_DIR        # MODELS_DIR/mlc_<NAME>, each with mlc_build.json

For every architecture built: the session of its references (mlc_build.json; mlc_models.SESSION
unless the architecture needs a longer one) extracts, `show` and `costs` read
it, `--function decode` extracts, and `replay --backend cpu` computes TVM's logits of every
forward (the references are TVM's own CPU run; for MoE models with the experts computed densely,
mlc_moe_reference.py, and each MoE node checked on its replayed inputs, mlc_moe_nodes.py; for
DeepSeek-V2's MLA with its attention decompressed into TVM's multi-head cache,
mlc_mla_reference.py, and every call of TVM's runtime on the MLA cache against its recording,
mla_kv_truth.py). What
must fail fails: another token sequence gives other logits, and a
build with TVM's known defect (EXPECT_REFUSED) is refused in one line naming the kernel. The
session without the params file (--no-params: the shapes from the build) gives the same flow.
Programs from kdflow codegen (CODEGEN) are built and run on the fake driver. Sharded builds
(tensor_parallel_shards 2 and 4) are checked as test/tvm's own sharded models are
(check_models.check_sharded): every rank's replay against the unsharded model's logits. Exits 1
when a check fails, 77 when nothing was built.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_models  # noqa: E402
from check_models import check_codegen, check_without_weights, expect, ok_rows, run  # noqa: E402
from mlc_models import SESSION  # noqa: E402

#: Builds kdflow must refuse, each with the words of its one line: TVM's own defects.
EXPECT_REFUSED: Dict[str, Tuple[int, List[str]]] = {
    # The router's GEMV (dlight, block (32, 16)) stores NT_matmul_ptr[threadIdx.y] unguarded: 16
    # floats into the 8 of the gate's output.
    # The line names the store and the thread: enough to file it upstream.
    "mlc_mixtral_8": (65, [r"out of bounds: kernel \d+ \(NT_matmul\w*_kernel\) argument 0 writes bytes \[0, 64\) "
                           r"of buffer \d+ \('NT_matmul\w*', 32 bytes\); its highest byte, 63, is written at "
                           r"device_\d+\.cu:\d+ by thread \(0, 15, 0\) of block \(0, 0, 0\)"]),
}
#: Architectures whose build exercises one thing more: the session without weights, codegen.
WITHOUT_WEIGHTS = "mlc_llama"
CODEGEN = ("mlc_qwen2", "mlc_mixtral_tp2", "mlc_deepseek_v2")
#: The image encoders (`image_embed`) extracted alone: an image of 40 x 36 (NHWC, uint8), and
#: phi3_v's sizes (shape parameters: resized to 336 x 336, one crop). TVM builds neither for
#: llvm (MLC's image kernels are GPU TIR), so there is no reference to replay against.
IMAGE_EMBED = {
    "mlc_llava": ["--input-shape", "pixel_values=1x40x36x3"],
    "mlc_phi3_v": ["--input-shape", "pixel_values=1x400x300x3", "--input-shape", "resized_height=336",
                   "--input-shape", "resized_width=336", "--input-shape", "crop_height=1",
                   "--input-shape", "crop_width=1"],
}


def tp_calls(layers: int, extend: bool = False) -> Dict[str, Dict[str, int]]:
    """The collectives MLC's sharded decoders call, per VM function of a session, as their model
    code writes them (e.g. mlc_llm/model/llama/llama_model.py, mixtral_model.py): an allreduce
    after each layer's attention output and after its MLP or MoE, in prefill, decode,
    batch_decode and (`extend`: DeepSeek-V2) extend; embed broadcasts worker 0's token ids
    (prefill's logit positions are not a collective: it takes the last token)."""
    ar, bc = "runtime.disco.allreduce", "runtime.disco.broadcast_from_worker0"
    calls = {"embed": {bc: 1}, "prefill": {ar: 2 * layers}, "decode": {ar: 2 * layers},
             "batch_decode": {ar: 2 * layers}}
    if extend:
        calls["extend"] = {ar: 2 * layers}
    return calls


def check_sharded(kdflow: str, d: str, info: Dict[str, object], tmp: str) -> None:
    """A sharded build (tensor_parallel_shards): check_models.check_sharded with MLC's calls (the
    ranks, TVM's collectives and kdflow's, extract of the session and --function decode, CPU
    replay of every rank against the unsharded model's logits, a wrong shard failing, ASTRA-sim
    on the ranks' Chakra traces); the session without weights (--no-params --shards N) the same
    flow; codegen's program for CODEGEN."""
    session = str(info.get("session", SESSION))  # a spec, or a session file beside the build
    if ":" not in session:
        session = os.path.join(d, session)
    extend = "extend" in json.load(open(os.path.join(d, "vm_calls.json")))
    want = {"ranks": info["shards"], "collectives": tp_calls(2, extend), "session": session,
            "functions": {"decode": []}}
    check_models.check_sharded(kdflow, d, want, tmp)
    # What an MLC user has: the build without per-rank weights (MLC shards them when it loads).
    flow = os.path.join(tmp, f"{os.path.basename(d)}_session.json")
    if run([kdflow, "extract", d, "-q", "--session", session, "-o", flow]).returncode == 0:
        check_without_weights(kdflow, d, tmp, json.load(open(flow)), session,
                              ["--param-dim", "vocab_size=256", "--shards", str(info["shards"])])
    if os.path.basename(d) in CODEGEN:
        check_codegen(kdflow, d, ["--session", session], int(str(info["shards"])))
    if os.path.exists(flow) and any(re.fullmatch(r"top\d+(_softmax)?", n.get("function", ""))
                                    for n in json.load(open(flow))["nodes"]):
        check_moe_nodes(kdflow, d, session, tmp, int(str(info["shards"])))


def check_moe_nodes(kdflow: str, d: str, session: str, tmp: str, ranks: int = 1,
                    replay_args: Sequence[str] = ()) -> None:
    """Every MoE node of the session, on the replay's inputs, is what MLC's code says it computes
    (mlc_moe_nodes.py): the gating, the routing plan, the experts' GEMMs and GEMVs, the scatter
    and each weighted sum; and with one token's experts swapped in the dump, the top-k node is
    named. A sharded build's every rank, on its own dump and weights (each rank holds a slice of
    every expert; its weighted sums are partials the allreduce adds)."""
    import mlc_moe_nodes
    try:
        checked = mlc_moe_nodes.run_check_ranks(kdflow, d, session, tmp, ranks, replay_args)
    except SystemExit as e:  # its extract or replay failed: this build's failure, not the run's end
        expect(False, f"{os.path.basename(d)}: the MoE nodes' check: {e}")
        return
    for r, (flow, counts, failures) in enumerate(checked):
        check_moe_rank(os.path.basename(d) + (f" rank {r}" if ranks > 1 else ""), flow, counts, failures, tmp)


def check_moe_rank(name: str, flow: Any, counts: Dict[str, int], failures: List[str], tmp: str) -> None:
    import mlc_moe_nodes
    kinds = ("topk", "get_indices", "indptr", "group_gemm", "moe_gemv", "scatter", "weighted_sum")
    # Every top-k's weights feed a checked weighted sum, or one named here as not checked (fused
    # with more than an add: MiniCPM's depth scale).
    unchecked = mlc_moe_nodes.unsummed(flow, flow.summed)
    for line in unchecked:
        print(f"skip  {name}: {line}")
    expect(not failures and all(counts.get(k, 0) > 0 for k in kinds if k != "weighted_sum")
           and counts.get("weighted_sum", 0) + len(unchecked) == counts["topk"],
           f"{name}: every MoE node equals NumPy's result on its replayed inputs: {counts}"
           f"{'; ' + '; '.join(failures[:3]) if failures else ''}")
    bad = mlc_moe_nodes.check_corrupted(flow, tmp)
    expect(bool(bad) and re.search(r"\(top\d+(_softmax)?, (seq \d+ )?prefill\)", bad[0]) is not None,
           f"{name}: with one token's two experts swapped in the dump, the top-k node is named: "
           f"{bad[0] if bad else 'nothing found'}")


def check_one(kdflow: str, d: str, info: Dict[str, object], tmp: str) -> None:
    name = os.path.basename(d)
    session = str(info.get("session", SESSION))  # the references' (mlc_build.json): a spec or a file beside
    if ":" not in session:
        session = os.path.join(d, session)
    if int(str(info.get("shards", 1))) > 1:
        check_sharded(kdflow, d, info, tmp)
        return
    flow = os.path.join(tmp, f"{name}_session.json")
    if name in EXPECT_REFUSED:
        code, words = EXPECT_REFUSED[name]
        r = run([kdflow, "extract", d, "-q", "--session", session, "-o", flow])
        lines = r.stderr.strip().splitlines()
        expect(r.returncode == code and len(lines) == 1 and all(re.search(w, lines[0]) for w in words)
               and not os.path.exists(flow),
               f"{name}: TVM's defect refused in one line, exit {code}, no flow written "
               f"(exit {r.returncode}: {r.stderr.strip()[-400:]})")
        r = run([kdflow, "extract", d, "-q", "--session", session, "--allow-oob", "-o", flow])
        expect(r.returncode == 0, f"{name}: --allow-oob writes the flow anyway ({r.stderr.strip()[-300:]})")
        return
    r = run([kdflow, "extract", d, "-q", "--session", session, "-o", flow])
    expect(r.returncode == 0, f"{name}: extract --session {session} ({r.stderr.strip()[-300:]})")
    if r.returncode != 0:
        return
    df = json.load(open(flow))
    steps = sorted({n.get("session_step", "") for n in df["nodes"]} - {""})
    forwards = len([f for f in os.listdir(d) if f.startswith("output_") and f.endswith(".npy")])
    expect(len(df["kernels"]) > 0 and len(df["outputs"]) == forwards and any("prefill" in t for t in steps)
           and any("decode" in t for t in steps),
           f"{name}: the session's {len(df['kernels'])} kernels in steps {steps}, {forwards} logits outputs")
    truth = os.path.join(d, "kv_truth.json")  # an MLA build: TVM's runtime recorded (mla_kv_truth.py)
    if os.path.exists(truth):
        check_models.check_kv_runtime(name, df, truth)
    for cmd in ("show", "costs"):
        r = run([kdflow, cmd, flow])
        expect(r.returncode == 0 and r.stdout.strip() != "", f"{name}: {cmd} ({r.stderr.strip()[-200:]})")
    # Every attention the KV cache's runtime runs (ragged, paged, decode, their sliding-window
    # kernels, MLA's) has FLOPs by formula, from its arguments and the copied page tables.
    rows = [ln.split() for ln in r.stdout.splitlines()
            if re.search(r"kv_cache\.(prefill_ragged|prefill_paged|decode|mla_prefill)", ln)]
    unknown = [row[:3] for row in rows if not re.fullmatch(r"[0-9.]+", row[5] if len(row) > 5 else "")]
    expect(bool(rows) and not unknown,
           f"{name}: costs gives each of the {len(rows)} attentions its FLOPs by formula (without: {unknown[:3]})")
    r = run([kdflow, "extract", d, "-q", "--function", "decode", "-o", os.path.join(tmp, f"{name}_decode.json")])
    expect(r.returncode == 0, f"{name}: extract --function decode ({r.stderr.strip()[-300:]})")
    if name in IMAGE_EMBED:
        image = os.path.join(tmp, f"{name}_image_embed.json")
        r = run([kdflow, "extract", d, "-q", "--function", "image_embed", *IMAGE_EMBED[name], "-o", image])
        kernels = len(json.load(open(image))["kernels"]) if r.returncode == 0 else 0
        expect(r.returncode == 0 and kernels > 0,
               f"{name}: extract --function image_embed (the image encoder): {kernels} kernels "
               f"({r.stderr.strip()[-300:]})")
    if name == WITHOUT_WEIGHTS:
        check_without_weights(kdflow, d, tmp, df, session, ["--param-dim", "vocab_size=256"])
    if name in CODEGEN:
        check_codegen(kdflow, d, ["--session", session])
    if not info.get("reference"):
        print(f"skip  {name}: replay: no reference ({info.get('why_no_reference')})")
        return
    tol = info.get("tolerance") or {}
    base = [kdflow, "replay", d, "--session", session, "--backend", "cpu", "-q", "--repeat", "1", "--warmup", "0",
            *(["--rtol", str(tol["rtol"]), "--atol", str(tol["atol"])] if isinstance(tol, dict) and tol else [])]
    r = run(base)
    rows = ok_rows(r.stdout)
    expect(r.returncode == 0 and len(rows) == forwards,
           f"{name}: replay --backend cpu gives {info.get('reference_kind')}'s logits of every forward "
           f"({len(rows)} of {forwards} match; exit {r.returncode}: {r.stderr.strip()[-300:]})")
    if r.returncode != 0:
        return
    if any(re.fullmatch(r"top\d+(_softmax)?", n.get("function", "")) for n in df["nodes"]):  # MoE gating
        check_moe_nodes(kdflow, d, session, tmp, 1, base[base.index("--warmup") + 2:])
    # The comparison can fail: other prefill tokens, other logits.
    tokens = np.load(os.path.join(d, "input_ids.npy"))
    other = os.path.join(tmp, f"{name}_other_ids.npy")
    np.save(other, ((tokens + 1) % 256).astype("int32"))
    r = run([*base, "--input", "input_ids=" + other])
    expect(r.returncode == 1, f"{name}: with other token ids the logits differ from TVM's (exit {r.returncode})")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    kdflow, models = sys.argv[1], sys.argv[2]
    names = sorted(n for n in os.listdir(models) if os.path.exists(os.path.join(models, n, "mlc_build.json")))
    if not names:
        print(f"check_mlc: skipped: {models} has no MLC builds", file=sys.stderr)
        return 77
    tmp = tempfile.mkdtemp(prefix="kdflow_mlc_check.")
    try:
        for n in names:
            check_one(kdflow, os.path.join(models, n), json.load(open(os.path.join(models, n, "mlc_build.json"))), tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        c = check_models.codegen.get("checker")
        if c:
            shutil.rmtree(c.work, ignore_errors=True)
    if check_models.failures:
        print(f"check_mlc: {len(check_models.failures)} failed", file=sys.stderr)
        return 1
    print(f"check_mlc: all passed ({len(names)} builds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
