"""An independent reference for MLC-LLM's multi-head latent attention (DeepSeek-V2; written
here, not MLC's code).

MLC's DeepSeek-V2 keeps one latent row per token in an MLA cache (kv_lora_rank values, then the
rotary key) and attends in two ways: `prefill` by TVM's ragged kernel over keys and values
decompressed through `kv_b_proj`, `decode` by the MLA paged kernel over the latent rows with
`kv_b_proj`'s halves absorbed (`w_uk` into the query, `w_uv` into the output). TVM has no CPU
kernels for the MLA cache, so TVM cannot run the model on the CPU as MLC builds it.

The CPU reference computes the same mathematics another way: every layer's keys and values
decompressed (`kv_b_proj`, the rotary key broadcast to every head), kept in TVM's ordinary
multi-head paged cache (RoPE none: the model applies YaRN itself, as MLC's does), values padded
with zeros to the key's width so that one head dimension serves both, the padding cut from the
output. MLC's MLA kernels, its absorbed weights and its cache layout are not used: where the
build's decode is right, its absorbed `w_uk`/`w_uv` must equal `kv_b_proj`'s halves, which
`absorbed_weights` makes true of the test's weights, as MLC's loader does of real ones.

`dense_mla()` is a context manager that swaps DeepSeek-V2's attention `forward` and its cache
creation while the reference module is exported; the CUDA build keeps MLC's.
"""

from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np

MODULE = "mlc_llm.model.deepseek_v2.deepseek_v2_model"


def _decompressed_forward(self: Any, hidden_states: Any, paged_kv_cache: Any, layer_id: int,
                          query_positions: Any, forward_mode: str) -> Tuple[Any, Any]:
    from tvm.relax.frontend.nn import op
    del forward_mode  # the multi-head cache attends to the new tokens and the cached ones alike
    b, s, _ = hidden_states.shape
    h, nope, rope, v_dim = self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim
    qk = nope + rope
    if self.q_lora_rank is None:
        q = self.q_proj(hidden_states)
    else:
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))
    q_nope, q_pe = op.split(op.reshape(q, (b, s, h, qk)), [nope], axis=-1)
    latent = self.kv_a_proj_with_mqa(hidden_states).reshape(b, s, 1, self.kv_lora_rank + rope)
    latent, k_pe = op.split(latent, [self.kv_lora_rank], axis=-1)
    latent = self.kv_a_layernorm(latent)
    q_pe, k_pe = self.rotary_emb(q_pe, k_pe, query_positions)
    kv = op.reshape(self.kv_b_proj(latent), (b, s, h, nope + v_dim))
    k_nope, v = op.split(kv, [nope], axis=-1)
    k = op.concat([k_nope, op.broadcast_to(k_pe, (b, s, h, rope))], dim=-1)
    q = op.concat([q_nope, q_pe], dim=-1)
    if qk > v_dim:
        v = op.concat([v, op.zeros((b, s, h, qk - v_dim), v.dtype)], dim=-1)
    qkv = op.concat([q, k, v], dim=2)  # (b, s, 3h, qk)
    out = paged_kv_cache.attention_with_fused_qkv(layer_id, qkv, h, sm_scale=self.softmax_scale)
    if qk > v_dim:
        out = op.split(out, [v_dim], axis=-1)[0]
    return self.o_proj(out.reshape(b, s, h * v_dim)), paged_kv_cache


def _multi_head_cache(self: Any, max_batch_size: Any, max_total_seq_len: Any, prefill_chunk_size: Any,
                      page_size: Any, support_sliding_window: Any) -> Any:
    from mlc_llm.nn import PagedKVCache, RopeMode
    heads = self.num_attention_heads // self.tensor_parallel_shards
    qk = self.qk_nope_head_dim + self.qk_rope_head_dim
    return PagedKVCache.create_generic(
        attn_kind="mha", max_batch_size=max_batch_size, max_total_seq_len=max_total_seq_len,
        prefill_chunk_size=prefill_chunk_size, page_size=page_size, support_sliding_window=support_sliding_window,
        num_hidden_layers=self.num_hidden_layers, num_attention_heads=heads, num_key_value_heads=heads,
        qk_head_dim=qk, v_head_dim=qk, rope_mode=RopeMode.NONE, rope_scale=1, rope_theta=self.rope_theta,
        dtype=self.dtype)


def is_mla(model_type: str) -> bool:
    return model_type == "deepseek_v2"


@contextmanager
def dense_mla() -> Iterator[None]:
    """DeepSeek-V2's attention decompressed into TVM's multi-head cache inside the `with`."""
    import importlib
    mod = importlib.import_module(MODULE)
    saved = [(mod.DeepseekV2Attention, "forward", mod.DeepseekV2Attention.forward),
             (mod.DeepseekV2ForCausalLM, "create_paged_kv_cache", mod.DeepseekV2ForCausalLM.create_paged_kv_cache)]
    mod.DeepseekV2Attention.forward = _decompressed_forward
    mod.DeepseekV2ForCausalLM.create_paged_kv_cache = _multi_head_cache
    try:
        yield
    finally:
        for cls, name, fn in saved:
            setattr(cls, name, fn)


def absorbed_weights(cfg: Any, weights: List[Tuple[str, np.ndarray]]) -> List[Tuple[str, np.ndarray]]:
    """Each layer's `w_uk` and `w_uv` cut from its `kv_b_proj` as MLC's loader cuts them from a
    checkpoint's (deepseek_v2_loader.py): kv_b_proj [heads × (nope + v), rank] as
    [heads, nope + v, rank]; w_uk its first nope rows transposed [heads, rank, nope], w_uv the
    rest [heads, v, rank]."""
    named: Dict[str, np.ndarray] = dict(weights)
    h, nope, v, rank = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.v_head_dim, cfg.kv_lora_rank
    out = []
    for name, w in weights:
        if name.endswith(".w_uk") or name.endswith(".w_uv"):
            kv_b = named[name.rsplit(".", 1)[0] + ".kv_b_proj.weight"].reshape(h, nope + v, rank)
            cut = kv_b[:, :nope, :].transpose(0, 2, 1) if name.endswith(".w_uk") else kv_b[:, nope:, :]
            assert cut.shape == w.shape, f"{name}: {cut.shape} from kv_b_proj, the model wants {w.shape}"
            w = np.ascontiguousarray(cut.astype(w.dtype))
        out.append((name, w))
    return out
