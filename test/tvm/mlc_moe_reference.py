"""An independent reference for MLC-LLM's mixture-of-experts models (written here; not MLC's code).

MLC's MoE blocks (mixtral, qwen2_moe, qwen3_moe, deepseek, deepseek_v2, minicpm's MoE) route each token to its top-k experts with
GPU-only TIR kernels: `top{k}_softmax` / `gating_topk`, `moe_cumsum`, `get_indices`,
`get_indptr`, `scatter_output`, and the experts' `moe_gemv` (one token) and `group_gemm`
(several, sorted by expert). TVM cannot run those on the CPU, so the CPU reference of such a
model computes the same mathematics another way: every expert on every token (dense), each
token's output the sum of its top-k experts' outputs weighted as MLC's gating defines them
(softmax over the k chosen logits when `norm_topk_prob`, else the softmax over all experts'
logits at the chosen ones). The selection is one comparison per expert pair, ties broken by the
lower index; no sorting, scattering or grouped GEMM of MLC's is reused.

`dense_moe()` is a context manager that swaps the blocks' `forward` for the dense one while the
reference module is exported; the CUDA build keeps MLC's kernels.
"""

from contextlib import contextmanager
from typing import Any, Iterator, List, Tuple


def _routing(te: Any, tir: Any, k: int, norm: bool) -> Any:
    """TE: gate logits [n, E] -> routing weights [n, E] (zero off each token's top k)."""

    def f(g: Any) -> Any:
        n, e_count = g.shape
        j = te.reduce_axis((0, e_count), "j")
        rank = te.compute(
            (n, e_count),
            lambda t, e: te.sum(tir.Select(tir.Or(g[t, j] > g[t, e], tir.And(g[t, j] == g[t, e], j < e)), 1, 0),
                                axis=j),
            name="expert_rank")
        chosen = te.compute((n, e_count), lambda t, e: rank[t, e] < k, name="chosen")
        neg = tir.const(-3.0e38, g.dtype)
        j2 = te.reduce_axis((0, e_count), "j2")
        top = te.compute((n,), lambda t: te.max(tir.Select(chosen[t, j2] if norm else tir.const(True, "bool"),
                                                            g[t, j2], neg), axis=j2), name="top_logit")
        ex = te.compute((n, e_count), lambda t, e: te.exp(g[t, e] - top[t]), name="exp_logit")
        j3 = te.reduce_axis((0, e_count), "j3")
        total = te.compute((n,), lambda t: te.sum(tir.Select(chosen[t, j3] if norm else tir.const(True, "bool"),
                                                              ex[t, j3], tir.const(0, g.dtype)), axis=j3),
                           name="exp_sum")
        return te.compute((n, e_count),
                          lambda t, e: tir.Select(chosen[t, e], ex[t, e] / total[t], tir.const(0, g.dtype)),
                          name="routing_weight")

    return f


def _experts(block: Any) -> Tuple[Any, Any, int]:
    """The block's (gate-and-up experts, down experts, expert count), as each MLC model names them."""
    count = getattr(block, "num_local_experts", None) or getattr(block, "num_routed_experts", None) or block.num_experts
    if hasattr(block, "e1_e3"):  # mixtral, minicpm
        return block.e1_e3, block.e2, count
    return block.moe_gate_up_proj, block.moe_down_proj, count  # qwen2_moe, qwen3_moe, deepseek(_v2)


def _dense_forward(self: Any, x: Any) -> Any:
    import tvm
    from tvm import te
    from tvm.relax.frontend.nn import op
    try:
        from tvm import tirx as tir
    except ImportError:
        from tvm import tir
    del tvm
    b, s, h = x.shape
    n = b * s
    x2 = x.reshape(n, h)
    up, down, e_count = _experts(self)
    k = self.num_experts_per_tok
    norm = bool(getattr(self, "norm_topk_prob", True))  # mixtral's gating always renormalises
    # DeepSeek-V2: softmax scores, greedy top-k, scaled (group-limited selection is not modelled here).
    if getattr(self, "topk_method", "greedy") != "greedy" or getattr(self, "scoring_func", "softmax") != "softmax":
        raise NotImplementedError(f"dense MoE reference: top-k method {self.topk_method}, scoring {self.scoring_func}")
    weights = op.tensor_expr_op(_routing(te, tir, k, norm), "dense_moe_routing", args=[self.gate(x2)])
    if getattr(self, "routed_scaling_factor", 1.0) != 1.0:
        weights = weights * self.routed_scaling_factor
    act = getattr(self, "act_fn", op.silu)
    hu = op.matmul(x2, op.permute_dims(up.weight, [0, 2, 1]))  # [E, n, 2I]
    x1, x3 = op.split(hu, indices_or_sections=2, axis=-1)
    y = op.matmul(act(x1) * x3, op.permute_dims(down.weight, [0, 2, 1]))  # [E, n, h]
    if weights.dtype != x.dtype:  # a float32 gate (DeepSeek-V2's) in a float16 model: MLC casts the weights too
        weights = weights.astype(x.dtype)
    w = op.permute_dims(weights, [1, 0]).reshape(e_count, n, 1)
    out = op.sum(y * w, axis=0)  # [n, h]
    if hasattr(self, "shared_expert"):  # qwen2_moe: a shared expert, gated by a sigmoid
        out = out + op.sigmoid(self.shared_expert_gate(x2)) * self.shared_expert(x2)
    if hasattr(self, "shared_experts"):  # deepseek: shared experts, added
        out = out + self.shared_experts(x2)
    return out.reshape(b, s, h)


MOE_BLOCKS: List[Tuple[str, str]] = [
    ("mlc_llm.model.mixtral.mixtral_model", "MixtralMoE"),
    ("mlc_llm.model.qwen2_moe.qwen2_moe_model", "Qwen2MoeSparseMoeBlock"),
    ("mlc_llm.model.qwen3_moe.qwen3_moe_model", "Qwen3MoeSparseMoeBlock"),
    ("mlc_llm.model.deepseek.deepseek_model", "DeepseekMoE"),
    ("mlc_llm.model.minicpm.minicpm_model", "MiniCPMMoE"),
    ("mlc_llm.model.deepseek_v2.deepseek_v2_model", "DeepseekV2MoE"),
]


@contextmanager
def dense_moe() -> Iterator[None]:
    """MLC's MoE blocks compute densely (see the module's text) inside the `with`."""
    import importlib
    saved = []
    for module, name in MOE_BLOCKS:
        cls = getattr(importlib.import_module(module), name)
        saved.append((cls, cls.forward))
        cls.forward = _dense_forward
    try:
        yield
    finally:
        for cls, fwd in saved:
            cls.forward = fwd
