"""A small decoder-only language model for kdflow's real-TVM tests (written here; not TVM output)."""

from typing import Any, Dict, Tuple
import numpy as np


def decoder_lm(tvm: Any, dtype: str = "float32", layers: int = 2, hidden: int = 64, heads: int = 4, kv_heads: int = 2,
               head_dim: int = 16, ffn: int = 128, vocab: int = 256,
               shards: int = 1) -> Tuple[Any, Dict[str, np.ndarray]]:
    """A decoder-only language model in the shape TVM's LLM builds take: nn.Module functions
    embed, prefill, decode and create_tir_paged_kv_cache, packed params, attention through TVM's
    paged KV cache (attention_with_fused_qkv). Returns (IRModule, params by name in the packed
    tuple's order). `shards` > 1: one rank's module of the model split tensor-parallel as
    MLC-LLM splits Llama (heads/shards query and kv_heads/shards KV heads, ffn/shards; qkv and up
    column-parallel, out and down row-parallel, each followed by ccl_allreduce; embedding, norms
    and head replicated); its params are random of each rank's shapes (sharded_models.py slices
    the unsharded model's instead)."""
    assert heads % shards == 0 and kv_heads % shards == 0 and ffn % shards == 0, "an even split"
    heads, kv_heads, ffn = heads // shards, kv_heads // shards, ffn // shards
    from tvm import relax, te
    from tvm.relax.frontend import nn
    from tvm.relax.frontend.nn import op
    from tvm.relax.frontend.nn.llm.kv_cache import PagedKVCache, TIRPagedKVCache
    try:
        from tvm import tirx as tir_ns
    except ImportError:
        from tvm import tir as tir_ns

    class Layer(nn.Module):
        def __init__(self) -> None:
            self.norm1 = nn.RMSNorm(hidden, -1, 1e-5, bias=False)
            self.qkv = nn.Linear(hidden, (heads + 2 * kv_heads) * head_dim, bias=False)
            self.out = nn.Linear(heads * head_dim, hidden, bias=False)
            self.norm2 = nn.RMSNorm(hidden, -1, 1e-5, bias=False)
            self.up = nn.Linear(hidden, ffn, bias=False)
            self.down = nn.Linear(ffn, hidden, bias=False)

        def forward(self, x: Any, cache: Any, index: int) -> Any:
            b, s, _ = x.shape
            qkv = op.reshape(self.qkv(self.norm1(x)), (b, s, heads + 2 * kv_heads, head_dim))
            att = cache.attention_with_fused_qkv(index, qkv, heads, sm_scale=head_dim ** -0.5)
            x = x + self._allreduce(self.out(op.reshape(att, (b, s, heads * head_dim))))
            return x + self._allreduce(self.down(op.silu(self.up(self.norm2(x)))))

        def _allreduce(self, y: Any) -> Any:
            return op.ccl_allreduce(y, "sum") if shards > 1 else y

    class LM(nn.Module):
        def __init__(self) -> None:
            self.tokens = nn.Embedding(vocab, hidden)
            self.layers = nn.ModuleList([Layer() for _ in range(layers)])
            self.norm = nn.RMSNorm(hidden, -1, 1e-5, bias=False)
            self.head = nn.Linear(hidden, vocab, bias=False)
            self.dtype = "float32"

        def _body(self, x: Any, cache: Any) -> Any:
            for i, layer in enumerate(self.layers):
                x = layer(x, cache, i)
            return self.norm(x)

        def _logits(self, h: Any) -> Any:
            y = self.head(h)
            return y if y.dtype == "float32" else y.astype("float32")

        def embed(self, input_ids: Any) -> Any:
            return self.tokens(input_ids)

        def prefill(self, x: Any, cache: Any) -> Any:
            def last(t: Any) -> Any:
                b, s, d = t.shape
                return te.compute((b, 1, d), lambda i, _, k: t[i, s - 1, k], name="last_token")
            h = op.tensor_expr_op(last, name_hint="last_token", args=[self._body(x, cache)])
            return self._logits(h), cache

        def decode(self, x: Any, cache: Any) -> Any:
            return self._logits(self._body(x, cache)), cache

        def batch_decode(self, x: Any, cache: Any) -> Any:
            return self._logits(self._body(x, cache)), cache

        def create_tir_paged_kv_cache(self, max_batch_size: Any, max_total_seq_len: Any, prefill_chunk_size: Any,
                                      page_size: Any) -> Any:
            return TIRPagedKVCache(
                attn_kind="mha", max_batch_size=max_batch_size, max_total_seq_len=max_total_seq_len,
                prefill_chunk_size=prefill_chunk_size, page_size=page_size, support_sliding_window=0,
                layer_partition=relax.ShapeExpr([0, layers]), num_hidden_layers=layers,
                num_attention_heads=heads, num_key_value_heads=kv_heads, qk_head_dim=head_dim,
                v_head_dim=head_dim, mla_original_qk_head_dim=0, mla_original_v_head_dim=0, rope_mode=1,
                rope_scale=1, rope_theta=10000, rope_scaling={}, rope_ext_factors=tir_ns.IntImm("int64", 0),
                rotary_dim=head_dim, dtype=self.dtype, target=tvm.target.Target.current(),
                enable_disaggregation=False)

    model = LM()
    model.to(dtype)
    model.dtype = dtype
    packed = {"param_mode": "packed", "effect_mode": "none"}
    spec = nn.spec.ModuleSpec.from_raw({
        "embed": {"input_ids": nn.spec.Tensor(["seq_len"], "int32"), "$": packed},
        "prefill": {"x": nn.spec.Tensor([1, "seq_len", hidden], dtype),
                    "cache": nn.spec.Object(object_type=PagedKVCache), "$": packed},
        "decode": {"x": nn.spec.Tensor([1, 1, hidden], dtype),
                   "cache": nn.spec.Object(object_type=PagedKVCache), "$": packed},
        "batch_decode": {"x": nn.spec.Tensor(["batch_size", 1, hidden], dtype),
                         "cache": nn.spec.Object(object_type=PagedKVCache), "$": packed},
        "create_tir_paged_kv_cache": {"max_batch_size": int, "max_total_seq_len": int, "prefill_chunk_size": int,
                                      "page_size": int, "$": {"param_mode": "none", "effect_mode": "none"}},
    }, model)
    mod, named = model.export_tvm(spec=spec)
    rng = np.random.default_rng(3)
    params = {}
    for name, p in named:
        shape = [int(d) for d in p.shape]
        a = 1.0 + 0.05 * rng.standard_normal(shape) if "norm" in name else rng.standard_normal(shape) / np.sqrt(shape[-1])
        params[name] = a.astype(p.dtype)
    return mod, params
