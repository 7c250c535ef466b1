"""MLC-LLM's architectures, shrunk, built exactly as `mlc_llm compile` builds them, into folders
kdflow reads, with TVM's CPU references of a session.

Each architecture starts from one of MLC's presets (mlc_llm/model/model_preset.py, the model's
config.json), shrunk through the keys its config class reads (ARCHS; every class names them
differently), then goes through MLC's own `interface/compile.py::_compile` (q0f32; FlashInfer,
cuBLAS, cutlass, faster-transformer and CUDA graphs off, which is its O0 on a machine without
those libraries; its metadata, variable bounds and additional TIRs; the `mlc_llm` pipeline) for
`cuda -arch=sm_90`, and is written with kdflow_tvm.export. The session's references
(input_ids.npy, output_<step>.npy) are TVM's own run of the same model, made again for `llvm`,
on its CPU VM (kdflow_tvm.llm_session); where TVM cannot run a model there (MLC's MoE and MLA
kernels have no CPU schedule, RWKV has no paged KV cache) build() says why.

    python test/tvm/mlc_models.py [--stamp] OUT_DIR [NAME ... | ci]   # OUT_DIR/mlc_<NAME>, every NAME by default

Needs MLC-LLM's Python source made to run on TVM 0.27 (../shared/mlc_llm beside the checkout,
or MLC_LLM_SHIM=its folder; its README.md) and a Python with apache-tvm 0.27 and tqdm.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import glob
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)

ARCH = "sm_90"
SESSION = "prefill:6,decode:1"
#: MLC's --overrides for every model (ModelConfigOverride); an architecture's `override` replaces
#: these, None leaving the config's own value.
SIZES: Dict[str, Optional[int]] = {"context_window_size": 128, "prefill_chunk_size": 16, "max_batch_size": 4,
                                   "tensor_parallel_shards": 1}
#: 2 layers, hidden 64, 4 heads of 16, 2 KV heads, MLP 128, vocab 256: the shrink in HF's names.
HF = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
      "head_dim": 16, "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 128}
#: The same for GPT-2's family of names.
GPT = {"n_layer": 2, "n_embd": 64, "n_head": 4, "n_inner": 128, "vocab_size": 256, "n_positions": 128}
#: Architectures with one KV head per query head (no KV-heads key) take heads of 32, hidden 128:
#: TVM's decode kernel (tvm/relax/frontend/nn/llm/_decode_kernels.py) makes its block
#: (D / 2, 1, 1024 / (D / 2)) for float32 and one query head per KV head, so head_dim 16 gives
#: blockDim.z 128, above CUDA's 64: a kernel CUDA refuses to launch (kdflow says so).
MHA_NOTE = "hidden 128, 4 heads of 32 (one KV head per query head: with 16, TVM's decode block is z 128 > 64)"
MHA = dict(HF, hidden_size=128, head_dim=32)
GPT_MHA = dict(GPT, n_embd=128)
#: A CLIP vision tower of 2 layers, hidden 64, 4 patches (28 x 28 pixels in patches of 14).
CLIP = {"hidden_size": 64, "image_size": 28, "intermediate_size": 128, "num_attention_heads": 4,
        "num_hidden_layers": 2, "patch_size": 14, "projection_dim": 64, "vocab_size": 256, "layer_norm_eps": 1e-5}


class Arch(NamedTuple):
    """How one architecture is shrunk."""
    preset: str                                   #: MODEL_PRESETS key: config.json of a real model
    config: Dict[str, Any]                        #: merged into the preset (dicts key by key; a callable
                                                  #: value gets the preset's value and returns the new one)
    override: Dict[str, Optional[int]] = {}       #: MLC's --overrides, on top of SIZES
    fix: Optional[Callable[[Any], None]] = None   #: on the config object, for what neither can say
    note: str = ""                                #: what needed special care
    shards: int = 1                               #: tensor_parallel_shards: ranks of a sharded build
    quantization: str = "q0f32"                   #: MLC's quantization (QUANTIZATION's key)
    session: Any = SESSION                        #: the references' session: a spec, or a session file's
                                                  #: content (session.json); mlc_build.json says which


def _every(factors: List[float], n: int) -> List[float]:
    """n of LongRoPE's per-frequency factors, evenly spaced from first to last (the lowest to the
    highest frequency keep their scaling)."""
    return [float(factors[round(i * (len(factors) - 1) / (n - 1))]) for i in range(n)]


def _longrope(rs: Dict[str, Any]) -> Dict[str, Any]:
    return dict(rs, long_factor=_every(rs["long_factor"], 8), short_factor=_every(rs["short_factor"], 8))


#: LongRoPE (Phi-3.5): factors for head_dim 16 (8 each); original_max_position_embeddings 4 so
#: that a prefill of more than 4 tokens takes the long factors and a decode the short ones (the
#: fused RoPE kernel branches on the forward's token count), max_position_embeddings 128 (the
#: preset's ratio is 32, so is this one).
PHI3 = dict(HF, rope_scaling=_longrope, max_position_embeddings=128, original_max_position_embeddings=4)


def _gemma3_sliding_every_other(cfg: Any) -> None:
    """Gemma 3 makes every layer but each 6th a sliding-window one (a class attribute, not read
    from config.json): every other here, so that 2 layers have one of each."""
    cfg.text_config.sliding_window_pattern = 2


def _phi3v_small_vision(cfg: Any) -> None:
    """Phi3VConfig always takes its default CLIP tower (336 px, 24 layers of 1024) unless given a
    CLIPVisionConfig object, which config.json cannot be; the image features' width follows it.
    Its crops are 336 px (phi3v_model.py has the number in its code): patches of 84, 4 x 4 of
    them, merged 2 x 2 into 4 image tokens."""
    from mlc_llm.model.vision import CLIPVisionConfig
    cfg.vision_config = CLIPVisionConfig.from_dict(dict(CLIP, image_size=336, patch_size=84))
    cfg.img_processor = dict(cfg.img_processor, image_dim_out=CLIP["hidden_size"], num_img_tokens=4)


#: A session (a session file, written as session.json beside the build) past the 1,024-token
#: window TVM's runtime gives sliding-window layers: sequence 0 prefills 1,100 tokens, decodes
#: (its window leaves out tokens 0-76: 4 pages and 13 tokens of a fifth), prefills 8 more on its
#: cached pages (a sliding layer's paged prefill is causal) and decodes; then sequence 1 prefills
#: 30 tokens and both decode in one batch (each sequence's own window pages).
LONG_SESSION: Dict[str, Any] = {"kv_cache": {}, "steps": [
    {"op": "add_sequence", "seq": 0}, {"op": "prefill", "seq": 0, "tokens": 1100}, {"op": "decode", "seq": 0},
    {"op": "prefill", "seq": 0, "tokens": 8}, {"op": "decode", "seq": 0},
    {"op": "add_sequence", "seq": 1}, {"op": "prefill", "seq": 1, "tokens": 30}, {"op": "decode", "seq": [0, 1]}]}
#: A session as MLC's engine runs a model with a sliding window (mistral: sliding_window_size 64
#: and attention_sink_size 4 here): the cache created with support_sliding_window, each sequence
#: given its window (enable_sliding_window_for_seq). Sequence 0 prefills 100 tokens in chunks of
#: 16 (past its window: the oldest tokens after the 4 sinks are dropped, their pages freed),
#: decodes twice, prefills 20 more and decodes; sequence 1 prefills 30; both decode in one batch.
WINDOW_SESSION: Dict[str, Any] = {"kv_cache": {"support_sliding_window": 1, "prefill_chunk_size": 16}, "steps": [
    {"op": "add_sequence", "seq": 0}, {"op": "enable_sliding_window", "seq": 0, "window": 64, "sink": 4},
    {"op": "prefill", "seq": 0, "tokens": 100}, {"op": "decode", "seq": 0}, {"op": "decode", "seq": 0},
    {"op": "prefill", "seq": 0, "tokens": 20}, {"op": "decode", "seq": 0},
    {"op": "add_sequence", "seq": 1}, {"op": "enable_sliding_window", "seq": 1, "window": 64, "sink": 4},
    {"op": "prefill", "seq": 1, "tokens": 30}, {"op": "decode", "seq": [0, 1]}]}
#: A session over MLC's MLA cache (deepseek_v2) that takes each of its paths, as MLC's engine
#: drives it: a sequence's first prefill calls `prefill` (self-attention over the new tokens),
#: a later one, or a forked sequence's, `extend` (self-attention and the latent pages, merged),
#: each within the build's prefill_chunk_size (16). Sequence 0 prefills 16 tokens (one full
#: page), decodes (the MLA kernel over the latent pages) and extends by 5; sequence 2 forks from
#: it at 20, inside its second page (copy_single_page), decodes over two depths (merged) and
#: extends by 3 over both; sequence 1 prefills 13; batch decodes of shared and separate blocks.
MLA_SESSION: Dict[str, Any] = {"kv_cache": {}, "steps": [
    {"op": "add_sequence", "seq": 0}, {"op": "prefill", "seq": 0, "tokens": 16}, {"op": "decode", "seq": 0},
    {"op": "prefill", "seq": 0, "tokens": 5}, {"op": "fork_sequence", "seq": 2, "parent": 0, "pos": 20},
    {"op": "decode", "seq": 2}, {"op": "prefill", "seq": 2, "tokens": 3}, {"op": "decode", "seq": [0, 2]},
    {"op": "add_sequence", "seq": 1}, {"op": "prefill", "seq": 1, "tokens": 13},
    {"op": "decode", "seq": [1, 0, 2]}, {"op": "decode", "seq": 1}]}
#: DeepSeek-V2's shrink (deepseek_v2_lite's preset): MLA of a latent 64 and a rotary key of 16
#: (a latent row of 80), heads of nope 16 + rope 16 and values of 16, 16 experts, top 2.
DEEPSEEK_V2: Dict[str, Any] = dict(HF, num_key_value_heads=4, n_routed_experts=16, moe_intermediate_size=32,
                                   kv_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=16,
                                   num_experts_per_tok=2)
#: Top-2 of 16 experts: with fewer, TVM's GEMV of the router (dlight, block (32, 16)) stores
#: NT_matmul_ptr[threadIdx.y] unguarded, 16 floats into an output of one per expert (its defect,
#: which kdflow refuses by its static bounds: mixtral_8 keeps it, for that check).
MOE = {"num_experts_per_tok": 2}
EXPERTS = 16
MINICPM = "dim_model_base 16: the logits' divisor is hidden_size // dim_model_base (the preset's 256 makes it 0)"
#: Every decoder model_type of MODEL_PRESETS (bert, an encoder, left out), by its name, and
#: minicpm_moe (model_type minicpm, MiniCPM-MoE's preset). phi3_v and llava build with MLC's image
#: crop, pad and repeat ported to TVM 0.27 (mlc_vision_port.py); rwkv5 (its wkv TIR) does not
#: build on TVM 0.27 yet; it stays listed.
#: The sharded builds' shrink: 8 query heads sharing 4 KV heads (head_dim 16), so that 4 ranks
#: still hold whole KV heads (MLC asserts num_key_value_heads % tensor_parallel_shards == 0) with
#: the grouping of the unsharded shrink (2 query heads per KV head) on every rank.
HF_TP = dict(HF, num_attention_heads=8, num_key_value_heads=4)
TP_NOTE = "8 query heads, 4 KV heads; the unsharded model (tensor_parallel_shards 1) is the reference"
ARCHS: Dict[str, Arch] = {
    "llama": Arch("llama3_1_8b", HF, note="Llama 3.1's rope_scaling (llama3) kept"),
    "mistral": Arch("mistral_7b", dict(HF, sliding_window_size=64), {"context_window_size": None},
                    session=WINDOW_SESSION,
                    note="sliding window 64 and attention sink 4; context_window_size stays -1 as MLC "
                         "sets it for a sliding-window model; the session slides as MLC's engine drives it "
                         "(WINDOW_SESSION)"),
    "ministral3": Arch("ministral3_3b_2512", {"text_config": HF}, note="sizes in text_config (merged "
                       "over the top level); YaRN rope_parameters kept"),
    "gpt2": Arch("gpt2", GPT_MHA, note=MHA_NOTE),
    "gpt_bigcode": Arch("gpt_bigcode", GPT, note="multi-query: 1 KV head by construction"),
    "mixtral": Arch("Mixtral-8x7B-v0.1", dict(HF, num_local_experts=EXPERTS, **MOE)),
    "mixtral_8": Arch("Mixtral-8x7B-v0.1", dict(HF, num_local_experts=8, **MOE),
                      note="8 experts: TVM's router GEMV writes 16 outputs into 8 (its defect; kdflow refuses)"),
    "gpt_neox": Arch("redpajama_3b_v1", MHA, note=MHA_NOTE),
    "phi-msft": Arch("phi-1_5", dict(GPT, rotary_dim=8, n_head_kv=2), note="rotary_dim 8 of head_dim 16 (the "
                     "preset's 32 of 64); n_head_kv 2 (the preset's None is one per query head)"),
    "phi3": Arch("phi-3_5", PHI3, note="LongRoPE factors subsampled to head_dim 16"),
    "phi3_v": Arch("phi-3_5-vision", PHI3, fix=_phi3v_small_vision, note="LongRoPE as phi3; vision "
                   "tower set on the config object"),
    "qwen": Arch("qwen", {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 4, "kv_channels": 32,
                          "intermediate_size": 256, "vocab_size": 256, "seq_length": 128},
                 note="intermediate_size 256: QWen's MLP is intermediate_size // 2 wide; " + MHA_NOTE),
    "qwen2": Arch("qwen2_0_5b", HF, note="tied embeddings"),
    "qwen2_moe": Arch("qwen2moe", dict(HF, num_experts=EXPERTS, moe_intermediate_size=32,
                                       shared_expert_intermediate_size=128, **MOE)),
    "deepseek_v2": Arch("deepseek_v2_lite", DEEPSEEK_V2,
                        session=MLA_SESSION,
                        note="MLA: kv_lora_rank 64, rope 16, nope 16, v 16 (a latent row of 80: TVM's GEMV, "
                             "blocks of 16 rows, stores unguarded past a width not a multiple of 16); "
                             "layer 0 dense, layer 1 MoE (first_k_dense_replace 1), 2 shared experts; "
                             "YaRN kept"),
    "stablelm": Arch("stablelm", HF, note="partial_rotary_factor 0.25 kept (rotary 4 of 16)"),
    "baichuan": Arch("baichuan", MHA, note=MHA_NOTE),
    "internlm": Arch("internlm", MHA, note=MHA_NOTE),
    "gemma": Arch("gemma_2b", HF),
    "gemma2": Arch("gemma2_2b", dict(HF, query_pre_attn_scalar=16, sliding_window=128),
                   note="MLC makes gemma2's context window its sliding_window (no sliding layers): 128; "
                        "soft-capping kept"),
    "gemma3_text": Arch("gemma3_1b_it", dict(HF, query_pre_attn_scalar=16, sliding_window=32),
                        {"context_window_size": 2048, "prefill_chunk_size": 1104},
                        fix=_gemma3_sliding_every_other, session=LONG_SESSION,
                        note="a sliding-window layer 0 and a full-attention layer 1 (pattern 2); TVM's "
                             "runtime slides such layers over 1,024 tokens whatever sliding_window says, so "
                             "the session (LONG_SESSION) is longer than that"),
    "rwkv5": Arch("rwkv5_3b", {"num_hidden_layers": 2, "hidden_size": 64, "head_size": 16, "intermediate_size": 128,
                               "vocab_size": 256}, note="an RNN state, not a paged KV cache"),
    "orion": Arch("orion", HF),
    "llava": Arch("llava", {"vocab_size": 256, "image_token_index": 255, "vision_config": CLIP,
                            "text_config": lambda _: dict(HF, rms_norm_eps=1e-5)},
                  note="text_config replaced whole (its _name_or_path would load Llama-2-7B's preset)"),
    "chatglm": Arch("chatglm", {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "kv_channels": 16,
                                "multi_query_group_num": 2, "ffn_hidden_size": 128, "vocab_size": 256,
                                "padded_vocab_size": 256, "seq_length": 128}),
    "qwen3": Arch("qwen3_0.6b", HF),
    "internlm2": Arch("internlm2", HF),
    "starcoder2": Arch("starcoder2", HF),
    "cohere": Arch("aya-23", HF),
    "minicpm": Arch("minicpm_2b", dict(HF, dim_model_base=16), note=MINICPM),
    "minicpm_moe": Arch("minicpm-moe-8x2b", dict(HF, dim_model_base=16, num_experts=EXPERTS, **MOE),
                        note="model_type minicpm, MoE; " + MINICPM),
    "deepseek": Arch("deepseek", dict(HF, n_routed_experts=EXPERTS, moe_intermediate_size=32, **MOE),
                     note="layer 0 dense, layer 1 MoE (first_k_dense_replace 1), 2 shared experts"),
    "gptj": Arch("gpt_j", dict(GPT_MHA, rotary_dim=8), note="rotary_dim 8 of head_dim 32 (the preset's 64 of 256); "
                 + MHA_NOTE),
    "olmo2": Arch("olmo2_7b", HF),
    # What most MLC users run: 4-bit group quantization, float16 (MLC's weight conversion
    # quantizes params() made in float16 with its own quantize function).
    "llama_q4f16": Arch("llama3_1_8b", HF, quantization="q4f16_1", note="q4f16_1: int4 weights in groups of 32 "
                        "with float16 scales; float16 activations"),
    # Tensor parallelism as MLC shards a model: each rank's weights are its slices of the full
    # ones (the params' shard_strategy, cut by MLC's own shard functions: shard_params).
    "llama_tp2": Arch("llama3_1_8b", HF_TP, shards=2, note=TP_NOTE),
    "llama_tp4": Arch("llama3_1_8b", HF_TP, shards=4, note=TP_NOTE),
    "mixtral_tp2": Arch("Mixtral-8x7B-v0.1", dict(HF_TP, num_local_experts=EXPERTS, **MOE), shards=2,
                        note="experts' intermediate split across ranks; " + TP_NOTE),
    "mixtral_tp4": Arch("Mixtral-8x7B-v0.1", dict(HF_TP, num_local_experts=EXPERTS, **MOE), shards=4,
                        note="experts' intermediate split across ranks; " + TP_NOTE),
    # DeepSeek-V2's MLA beyond the CI build: its q through a low-rank projection (q_lora_rank,
    # DeepSeek-V2 proper), 3 layers, float16; and sharded over 2 ranks (8 heads, 4 a rank).
    "deepseek_v2_f16": Arch("deepseek_v2_lite", dict(DEEPSEEK_V2, q_lora_rank=32, num_hidden_layers=3),
                            quantization="q0f16", session=MLA_SESSION,
                            note="q_lora_rank 32 (q_a_proj, its norm, q_b_proj), 3 layers, float16"),
    "deepseek_v2_tp2": Arch("deepseek_v2_lite", dict(DEEPSEEK_V2, num_attention_heads=8, num_key_value_heads=8),
                            shards=2, session=MLA_SESSION, note="8 heads, 4 a rank; " + TP_NOTE),
}


def _merge(base: Dict[str, Any], over: Dict[str, Any]) -> Dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if callable(v):
            out[k] = v(out.get(k))
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _mlc() -> None:
    """MLC-LLM's Python importable on TVM 0.27, with its two workarounds, and its image crop and
    pad (llava, phi3_v) ported to TVM 0.27 (mlc_vision_port.py)."""
    src = os.environ.get("MLC_LLM_SHIM", os.path.join(ROOT, "..", "shared", "mlc_llm"))
    if src not in sys.path:
        sys.path.insert(0, src)
    import mlc_shim
    mlc_shim.setup()
    mlc_shim.disable_matmul_tensorization()
    mlc_shim.fix_tvm027_longrope()
    import mlc_vision_port
    if not _PORTED:
        _PORTED.append(mlc_vision_port.ported_vision())
        _PORTED[0].__enter__()


_PORTED: List[Any] = []  # the ported image kernels' context, entered once per process


class _Applied:
    """The overrides, already applied (with the fix after them): _compile's own apply would
    rebuild the config from a dict and drop what the fix set on the object."""

    def apply(self, config: Any) -> Any:
        return config


def model_config(name: str, shards: Optional[int] = None) -> Tuple[Any, Any]:
    """(MLC's Model, its config shrunk) of ARCHS[name]: the preset merged with the shrink, read by
    the architecture's config class, MLC's --overrides applied (tensor_parallel_shards: `shards`,
    else the arch's), then the fix."""
    _mlc()
    from mlc_llm.interface.compiler_flags import ModelConfigOverride
    from mlc_llm.model import MODELS
    from mlc_llm.model.model_preset import MODEL_PRESETS
    arch = ARCHS[name]
    preset = MODEL_PRESETS[arch.preset]
    model = MODELS[preset["model_type"]]
    cfg = model.config.from_dict(_merge(preset, arch.config))
    sizes = dict(SIZES, **arch.override, tensor_parallel_shards=shards or arch.shards)
    cfg = ModelConfigOverride(**{k: v for k, v in sizes.items()
                                 if k in {f.name for f in dataclasses.fields(cfg)}}).apply(cfg)
    if arch.fix:
        arch.fix(cfg)
    return model, cfg


def _export(model: Any, cfg: Any, target: Any, quant: str = "q0f32") -> Tuple[Any, List[Tuple[str, Any]]]:
    """MLC's Relax module of the model for `target` (as _compile makes it) and its named params."""
    from mlc_llm import op as op_ext
    from mlc_llm.quantization import QUANTIZATION
    q = QUANTIZATION[quant]
    with target:
        op_ext.enable(target=target, flashinfer=False, faster_transformer=False, cutlass=False)
        nn_model, _ = model.quantize[q.kind](cfg, q)
        mod, named, _ext = nn_model.export_tvm(spec=nn_model.get_default_spec(), allow_extern=True)
    return mod, named


def quantized_params(model: Any, cfg: Any, quant: str, named: List[Tuple[str, Any]]) -> List[Tuple[str, np.ndarray]]:
    """The quantized model's params (`named`, in their order) as MLC's weight conversion makes
    them: params() of the unquantized model in the quantization's model dtype (q4f16_1:
    float16), each weight then quantized by MLC's own quantize function (its quant_map's
    map_func, run on the CPU); the others as they are."""
    import tvm
    from mlc_llm.quantization import QUANTIZATION
    q = QUANTIZATION[quant]
    plain = QUANTIZATION[f"q0{q.model_dtype.replace('float', 'f')}"]  # q0f16 / q0f32: the same dtype unquantized
    with tvm.target.Target("llvm"):
        _, qmap = model.quantize[q.kind](cfg, q)
    _, full_named = _export(model, cfg, tvm.target.Target("llvm"), plain.name)
    full = dict(params(cfg, full_named))
    out: Dict[str, np.ndarray] = {}
    for name, w in full.items():
        if name in qmap.param_map:
            parts = qmap.map_func[name](tvm.runtime.tensor(w))
            for qname, t in zip(qmap.param_map[name], parts):
                out[qname] = t.numpy()
        else:
            out[name] = w
    missing = [n for n, _ in named if n not in out]
    assert not missing, f"quantized params not made: {missing[:3]}"
    return [(n, out[n]) for n, _ in named]


def params(cfg: Any, named: List[Tuple[str, Any]], seed: int = 0) -> List[Tuple[str, np.ndarray]]:
    """Deterministic weights of the named params, symbolic dims (vocab_size) read from the config:
    matrices N(0, 1/fan_in) so that activations keep their size through the layers, norm
    scales 1 + N(0, 0.1^2), other vectors N(0, 0.02^2)."""
    rng = np.random.default_rng(seed)
    out = []
    for name, p in named:
        shape = [d if isinstance(d, int) else int(getattr(cfg, str(d))) for d in p.shape]
        if "float" not in str(p.dtype):
            a = np.zeros(shape, dtype=str(p.dtype))
        elif len(shape) >= 2:
            a = rng.standard_normal(shape) / np.sqrt(shape[-1])
        elif any("norm" in part or part.startswith("ln") for part in name.split(".")[:-1]):
            a = 1 + 0.1 * rng.standard_normal(shape)
        else:
            a = 0.02 * rng.standard_normal(shape)
        out.append((name, np.asarray(a, dtype=str(p.dtype))))
    return out


def shard_params(tvm: Any, named: List[Tuple[str, Any]], full: List[Tuple[str, np.ndarray]],
                 shards: int) -> List[Dict[str, np.ndarray]]:
    """Each rank's params of a sharded model, as MLC's weight conversion cuts them
    (support/preshard.py): a param with a shard_strategy (tp.ShardSingleDim) goes through the
    strategy's own TIR function (gen_tir: the full weight to [shards, *the rank's shape]), run on
    the CPU; the others are whole on every rank. `named`: the sharded model's params (their
    attrs), `full`: the unsharded model's weights, in the same order."""
    assert [n for n, _ in named] == [n for n, _ in full], "the sharded and unsharded params differ in names"
    ranks: List[Dict[str, np.ndarray]] = [{} for _ in range(shards)]
    funcs: Dict[Any, Any] = {}
    for (name, p), (_, w) in zip(named, full):
        strategy = p.attrs.get("shard_strategy")
        if strategy is None:
            for r in ranks:
                r[name] = w
            continue
        shape = [int(d) for d in p.shape]
        key = (strategy.name, strategy.dim, tuple(strategy.segs or ()), tuple(shape), str(p.dtype))
        if key not in funcs:
            funcs[key] = tvm.compile(strategy.gen_tir(shards, p), target="llvm")
        out = tvm.runtime.empty((shards, *shape), str(p.dtype), tvm.cpu())
        funcs[key](tvm.runtime.tensor(w), out)
        cut = out.numpy()
        for r in range(shards):
            ranks[r][name] = np.ascontiguousarray(cut[r])
    return ranks


def _cpu_model(model: Any, cfg: Any, names: List[str], quant: str = "q0f32") -> Any:
    """The model for llvm, its KV cache creation made concrete by MLC's own pass (the one step of
    its pipeline TVM's default one lacks), MoE blocks computed densely (mlc_moe_reference.py:
    MLC's MoE kernels have no CPU schedule)."""
    from mlc_llm.compiler_pass.dispatch_kv_cache_creation import DispatchKVCacheCreation
    from tvm.target import Target
    import mlc_mla_reference
    import mlc_moe_reference
    llvm = Target("llvm")
    with mlc_moe_reference.dense_moe(), mlc_mla_reference.dense_mla():
        mod, again = _export(model, cfg, llvm, quant)
    assert [n for n, _ in again] == names, "the llvm export's params differ"
    # The image encoder (llava, phi3_v) is no part of a session, and TVM 0.27 does not build it
    # for llvm (InternalError: unknown device id): the reference leaves it out.
    if any(gv.name_hint == "image_embed" for gv in mod.functions):
        from tvm import relax
        del mod[mod.get_global_var("image_embed")]
        # and the kernels only it called (DeadCodeElimination keeps them: they are public)
        used = {gv.name_hint for f in mod.functions.values() if isinstance(f, relax.Function)
                for gv in relax.analysis.all_global_vars(f)}
        for gv in [gv for gv, f in mod.functions.items()
                   if not isinstance(f, relax.Function) and gv.name_hint not in used]:
            del mod[gv]
    return DispatchKVCacheCreation(llvm, False, {})(mod)


def build(tvm: Any, name: str, out: str) -> Dict[str, Any]:
    """ARCHS[name] built for CUDA into `out` by MLC's _compile, then its session references
    (SESSION) from TVM's CPU VM where TVM can run the model there (`tvm`: the imported package,
    as test/tvm's other builders take it; MLC imports its own). A sharded build (Arch.shards > 1)
    is exported with each rank's slice of the unsharded model's weights (shard_params,
    params_shard<r>.bin), its references are the unsharded model's session, and every rank of it
    run on TVM's CPU VM (sharded_models.check_session_ranks) must give them. Returns what was
    done: name, model_type, preset, functions, params, shards, build_s, reference (bool),
    reference_s or why_no_reference (TVM's one-line error)."""
    import kdflow_tvm
    from tvm import relax
    from tvm.target import Target
    model, cfg = model_config(name)
    from mlc_llm.interface.compile import CompileArgs, _compile
    from mlc_llm.interface.compiler_flags import OptimizationFlags
    from mlc_llm.quantization import QUANTIZATION
    shards, session, quant = ARCHS[name].shards, ARCHS[name].session, ARCHS[name].quantization

    t0 = time.time()
    target = Target({"kind": "cuda", "arch": ARCH}, host={"kind": "c"})
    built: Dict[str, Any] = {}

    def build_func(mod: Any, args: Any, pipeline: Any = None) -> None:
        built["ex"] = relax.build(mod, target=args.target, relax_pipeline=pipeline)
        built["functions"] = sorted(gv.name_hint for gv, f in mod.functions.items() if isinstance(f, relax.Function))

    args = CompileArgs(config=Path(out), quantization=QUANTIZATION[quant], model=model, target=target,
                       opt=OptimizationFlags(), build_func=build_func, system_lib_prefix="", output=Path(out),
                       overrides=_Applied(), debug_dump=None)
    _compile(args, cfg)
    # A session file's content is written beside the build (session.json) and named by its path.
    session_spec = os.path.join(out, "session.json") if isinstance(session, dict) else session
    _, named = _export(model, cfg, Target("llvm"), quant)
    full_cfg = cfg if shards == 1 else model_config(name, shards=1)[1]
    if quant != "q0f32":
        assert shards == 1, "a quantized sharded build is not made here"
        weights = quantized_params(model, cfg, quant, named)
    else:
        weights = params(full_cfg, named if shards == 1 else _export(model, full_cfg, Target("llvm"))[1])
    import mlc_mla_reference
    if mlc_mla_reference.is_mla(model.name):  # decode's absorbed weights are kv_b_proj's, as MLC's loader makes them
        weights = mlc_mla_reference.absorbed_weights(full_cfg, weights)
    names = [n for n, _ in weights]
    if shards == 1:
        kdflow_tvm.export(built["ex"], out, force=True, arch=ARCH, params=weights, quiet=True)
    else:
        import sharded_models
        rank_params = shard_params(tvm, named, weights, shards)
        kdflow_tvm.export(built["ex"], out, force=True, arch=ARCH, params=rank_params, quiet=True)
        sharded_models.write_vm_calls(built["ex"], out)
    info: Dict[str, Any] = {"name": name, "model_type": model.name, "preset": ARCHS[name].preset,
                            "functions": built["functions"], "params": len(weights), "shards": shards,
                            "session": "session.json" if isinstance(session, dict) else session,
                            "quantization": quant,
                            # float16 activations: the CUDA kernels (on kdflow's CPU back end) and TVM's
                            # llvm ones round differently; logits of std ~1 differ by ~1e-2
                            "tolerance": {"rtol": 0.01, "atol": 0.02} if "f16" in quant else None,
                            "build_s": round(time.time() - t0, 1), "reference": False}

    if isinstance(session, dict):
        import json
        with open(session_spec, "w") as f:
            json.dump(session, f, indent=1)
    t1 = time.time()
    moe = any("expert" in n or "moe" in n or ".e1_e3." in n for n in names)
    try:
        if shards == 1:
            kdflow_tvm.llm_session(lambda: (_cpu_model(model, cfg, names, quant), dict(weights)), out, session_spec,
                                   quiet=True)
        else:
            kdflow_tvm.llm_session(lambda: (_cpu_model(model, cfg, names), rank_params[0]), out, session_spec, quiet=True,
                                   reference_make=lambda: (_cpu_model(model, full_cfg, names), dict(weights)))
        info.update(reference=True, reference_s=round(time.time() - t1, 1),
                    reference_kind="TVM's CPU run" +
                    (", MoE computed densely (mlc_moe_reference.py)" if moe else "") +
                    (", MLA decompressed into TVM's multi-head cache (mlc_mla_reference.py)"
                     if mlc_mla_reference.is_mla(model.name) else ""))
    except Exception as e:  # TVM's own failure to build or run it on the CPU: the reason is the result
        for f in glob.glob(os.path.join(out, "output_*.npy")) + glob.glob(os.path.join(out, "input_ids.npy")):
            os.unlink(f)
        info["why_no_reference"] = _one_line(e)
        return info
    if mlc_mla_reference.is_mla(model.name):  # TVM's runtime on the MLA cache, recorded (mla_kv_truth.py)
        import mla_kv_truth
        attn = model.model(cfg).model.layers[0].self_attn
        spec = session if isinstance(session, dict) else None
        assert spec is not None, "an MLA build's session is a session file (MLC's prefill self-attends only)"
        info["kv_truth_calls"] = mla_kv_truth.record(
            tvm, spec, os.path.join(out, "kv_truth.json"), layers=cfg.num_hidden_layers, heads=attn.num_heads,
            latent=cfg.kv_lora_rank, rope=cfg.qk_rope_head_dim, nope=cfg.qk_nope_head_dim, v_dim=cfg.v_head_dim,
            sm_scale=attn.softmax_scale, dtype=QUANTIZATION[quant].model_dtype)
    if shards > 1:  # the sharding itself: every rank of the sharded model on the CPU gives the references
        import sharded_models
        llvm = Target("llvm")
        with llvm:
            ex = tvm.compile(_cpu_model(model, cfg, names), llvm)
        sharded_models.check_session_ranks(tvm, ex, rank_params, session_spec, out, f"mlc_{name}")
        info["ranks_checked"] = "every rank's session on TVM's CPU VM gives the unsharded references"
    return info


def _one_line(e: BaseException) -> str:
    """The exception's most telling line: TVM's errors put their message last, its script
    parser's after "error:" above the source it quotes."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith("error:")] or lines[-1:]
    return f"{type(e).__name__}: {said[0] if said else ''}"[:300]


#: What CI builds (run.sh mlc; KDFLOW_MLC_MODELS=all for every one): Llama 3's RoPE scaling and
#: its 4-bit quantization, tied embeddings and biases, GPT-2's positions from the KV cache,
#: LongRoPE, soft-capping, GLM's layout, sliding windows (mistral's per sequence, gemma3's per
#: layer) past the window, MoE with a shared expert, TVM's router defect, a dense model sharded
#: over 4 ranks and an MoE one over 2 (llama_tp2 and mixtral_tp4 with KDFLOW_MLC_MODELS=all),
#: DeepSeek-V2's MLA cache with a fork, the two image encoders (llava's, phi3_v's with shape
#: parameters).
CI = ["llama", "llama_q4f16", "mistral", "qwen2", "gpt2", "phi3", "gemma2", "gemma3_text", "chatglm", "qwen2_moe",
      "mixtral_8", "llama_tp4", "mixtral_tp2", "deepseek_v2", "llava", "phi3_v"]


def _stamp(tvm: Any, names: List[str]) -> str:
    """What a folder of builds depends on: TVM, test/tvm's and the exporter's sources (as
    build_models.py hashes them), MLC's patched code."""
    import hashlib
    from build_models import sources_hash
    h = hashlib.sha256()
    src = os.environ.get("MLC_LLM_SHIM", os.path.join(ROOT, "..", "shared", "mlc_llm"))
    for f in ("mlc_shim.py", "mlc_llm_tvm027.patch"):
        path = os.path.join(src, f)
        h.update(f.encode() + (open(path, "rb").read() if os.path.exists(path) else b""))
    return f"tvm {tvm.__version__} sources {sources_hash()} mlc {h.hexdigest()[:16]} {' '.join(names)}\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", help="the folders go to OUT_DIR/mlc_<NAME>, each with mlc_build.json (build())")
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"of ARCHS (default: all): {' '.join(ARCHS)}; "
                    "ci: those of CI")
    ap.add_argument("--stamp", action="store_true", help="build nothing when OUT_DIR/stamp says these builds are "
                    "up to date (the same TVM, sources and names); write it when every one built")
    a = ap.parse_args(argv)
    names = CI if a.names == ["ci"] else a.names or list(ARCHS)
    unknown = [n for n in names if n not in ARCHS]
    if unknown:
        ap.error(f"not in ARCHS: {' '.join(unknown)}")
    logging.disable(logging.INFO)  # MLC logs every override and its memory estimate
    import json
    import shutil
    import tvm
    stamp_file = os.path.join(a.out_dir, "stamp")
    stamp = _stamp(tvm, names)
    if a.stamp:
        if os.path.exists(stamp_file) and open(stamp_file).read() == stamp:
            print(f"mlc_models: {a.out_dir} is up to date ({stamp.strip()})", file=sys.stderr)
            return 0
        shutil.rmtree(a.out_dir, ignore_errors=True)
    os.makedirs(a.out_dir, exist_ok=True)
    failed = 0
    for name in names:
        out = os.path.join(a.out_dir, f"mlc_{name}")
        t0 = time.time()
        try:
            info = build(tvm, name, out)
        except Exception as e:  # one architecture's failure is its line; the others still build
            failed += 1
            print(f"mlc_{name}: FAILED after {time.time() - t0:.0f} s: {_one_line(e)}", flush=True)
            continue
        with open(os.path.join(out, "mlc_build.json"), "w") as f:
            json.dump(info, f, indent=1)
        ref = (f"reference in {info['reference_s']} s" if info["reference"]
               else f"no reference: {info['why_no_reference']}")
        print(f"mlc_{name}: {info['model_type']} ({info['preset']}) built in {info['build_s']} s, {ref}", flush=True)
    if a.stamp and not failed:
        with open(stamp_file, "w") as f:
            f.write(stamp)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
