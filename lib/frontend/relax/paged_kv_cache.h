// paged_kv_cache.h — a model of TVM v0.26.0's paged KV cache runtime (TIR backend,
// src/runtime/vm/paged_kv_cache.cc and attn_utils.h at the tag): which host functions it
// calls for each attention of a forward, with which tensors, views and scalars, and the
// auxiliary arrays it packs and copies to the device first. Pure bookkeeping on integers:
// no TVM, no device. docs/notes/tvm-0.26-paged-kv-cache.md is the reading of the runtime it
// follows; sliding-window layers follow TVM 0.27's runtime (the wheel's source; v0.26.0's fails
// there with several sequences). Configurations the model does not cover are refused by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kdflow/support/diag.h"
#include "kdflow/support/dtype.h"

namespace kdflow {

/// What vm.builtin.paged_attention_kv_cache_create received (its 28 or 29 arguments), as
/// far as the model needs it. Functions are host function symbols ("" when absent).
struct KvCacheConfig {
  int64_t max_batch_size = 0;      ///< reserved_num_seqs R
  int64_t max_total_seq_len = 0;   ///< total token capacity
  int64_t prefill_chunk_size = 0;  ///< C: the temporary arrays hold C tokens
  int64_t page_size = 0;           ///< P
  int64_t layer_begin = 0, num_layers = 0;  ///< layer_partition [begin, begin + L)
  int64_t num_qo_heads = 0, num_kv_heads = 0, qk_head_dim = 0, v_head_dim = 0;
  int64_t rope_mode = 0;           ///< 0 none, 1 normal, 2 inline
  /// The configuration's fifth value: sequences may have a sliding window of their own
  /// (enable_sliding_window; MLC's engine for mistral). RoPE is then applied inside the
  /// attention kernels, and the pool has two more pages per sequence.
  bool support_sliding_window = false;
  /// LongRoPE (Phi-3.5): the shape of the rope_ext_factors tensor the cache was created with,
  /// which the rotary kernel then takes in place of its mode; empty: none.
  std::vector<int64_t> rope_ext_factors;
  double rope_scale = 1, rope_theta = 10000;
  DType dtype;                     ///< the KV dtype (the zeros tensor's)
  /// The attention kind of every layer of the model (create's argument 6, indexed by the
  /// global layer id): 0 MHA, 3 MHA with a sliding window (gemma3's local layers); empty: all MHA.
  /// 1: MLA (DeepSeek-V2's latent cache, pages [pages, P, qk_head_dim]); a cache is all MHA-like
  /// or all MLA (TVM's kv_cache.py makes no mix).
  std::vector<int64_t> attn_kinds;
  std::string transpose_append, prefill_ragged, prefill_paged, decode, merge, split_rotary;
  /// The sliding-window layers' paged prefill and decode kernels (arguments 18 and 19).
  std::string prefill_sliding, decode_sliding;
  /// Their window in tokens: the configuration's sixth value (TVM 0.27's
  /// layer_sliding_window_size), else 1,024 (v0.26.0's constant). Not the model's sliding_window
  /// unless the build passed it.
  int64_t layer_window = 1024;
  std::string copy_single_page;    ///< "" when the build passed none (a fork within a page is then refused)
  /// MLA caches: the latent append (argument 14), the MLA paged attention (argument 22) and the
  /// general merge (the second of argument 23's functions, MergeAttnOutputInplace's).
  std::string transpose_append_mla, mla_prefill, merge_general;

  /// Pages in the pool: ceil(capacity / P) + 1, and 2 per sequence with support_sliding_window.
  int64_t num_pages() const {
    return (max_total_seq_len + page_size - 1) / page_size + 1 + (support_sliding_window ? 2 * max_batch_size : 0);
  }
  /// The RoPE mode the runtime uses: inline where support_sliding_window is set.
  int64_t effective_rope_mode() const { return support_sliding_window && rope_mode != 0 ? 2 : rope_mode; }
  /// Whether sequences' own windows apply (the runtime's support_sliding_window_: not with
  /// sliding-window layers).
  bool sequence_windows() const { return support_sliding_window && !layer_sliding(); }
  /// Whether layer `layer` (global id) has a sliding window (AttnKind::kMHASliding).
  bool sliding(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(attn_kinds.size()) && attn_kinds[static_cast<size_t>(layer)] == 3;
  }
  /// Whether the cache's layers are MLA (AttnKind::kMLA).
  bool mla() const { return !attn_kinds.empty() && attn_kinds.front() == 1; }
  /// Whether any layer has one (the runtime's support_layer_sliding_window_).
  bool layer_sliding() const {
    for (int64_t k : attn_kinds)
      if (k == 3) return true;
    return false;
  }
};


/// The elements of the merged auxiliary buffer the runtime allocates on the device
/// (CachedPagedKVCacheAuxDataManager: 32 Mi int32, a constant in v0.26.0).
inline constexpr int64_t kKvAuxElements = 32 * 1024 * 1024;

/// One array packed into the merged auxiliary buffer by a forward's first attention.
struct KvAuxArray {
  std::string name;             ///< the runtime's name ("q_rope_position_map", "page_indptr[0]", ...)
  int64_t offset = 0;           ///< in int32 elements from the buffer's start
  std::vector<int64_t> values;  ///< int32 values
  int64_t rows = 1;             ///< the view's rows: 3 for a sliding layer's length info [3, n]
};

/// A device buffer the cache owns (allocated when it is created).
enum class KvBuffer { Pages, TempQ, TempK, TempV, TempO, TempLse, MergedLse, Aux, CompactAux };

/// One argument of a host function the runtime calls.
struct KvArg {
  /// RopeFactors: the tensor create received; Vm: the VM's tensor `slot` of the builtin's
  /// tensors in the order it takes them (MLA's q, k, v, o, lse; ...).
  enum class Kind { Qkv, Output, Buffer, Int, Float, RopeFactors, Vm };
  Kind kind = Kind::Int;
  int slot = 0;                       ///< Vm
  KvBuffer buffer = KvBuffer::Pages;  ///< Buffer
  int64_t layer = 0;                  ///< Buffer Pages: the local layer
  std::vector<int64_t> shape;         ///< Qkv, Output, Buffer: the shape the callee sees
  int64_t aux_offset = 0;             ///< Buffer Aux: the view's offset in int32 elements
  std::string aux_name;               ///< Buffer Aux: which array
  bool writes = false;                ///< the callee writes this tensor
  bool keeps = false;                 ///< it writes only part of it (or in place): the rest of what was there stays
  int64_t i = 0;                      ///< Int
  double f = 0;                       ///< Float
};

/// One step of an attention call: the auxiliary copy (function empty) or a host function call.
struct KvCall {
  std::string function;    ///< host function symbol; "" for the copy of the auxiliary arrays
  std::string role;        ///< "aux copy", "split rotary", "prefill ragged", "decode", "copy single page", ...
  std::vector<KvArg> args;
  int64_t layer = -1;      ///< a call outside an attention (copy single page): the layer of its pages
};

class PagedKvCacheModel {
 public:
  /// Checks the configuration against what the model covers; a refusal names what is not
  /// covered.
  static Expected<PagedKvCacheModel> create(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return cfg_; }
  /// The shape of a buffer the cache allocates (Pages: per layer).
  std::vector<int64_t> buffer_shape(KvBuffer b) const;
  DType buffer_dtype(KvBuffer b) const;

  Status add_sequence(int64_t seq_id);
  /// kv_state_enable_sliding_window_for_seq(seq, window, sink): the sequence keeps its first
  /// `sink` tokens (less what its earlier blocks hold) and its last window - sink.
  Status enable_sliding_window(int64_t seq_id, int64_t window, int64_t sink);
  /// kv_state_remove_sequence: the pages of its blocks no other sequence shares go back to
  /// the free list in order (the last one is handed out first).
  Status remove_sequence(int64_t seq_id);
  /// kv_state_fork_sequence(parent, child, pos): the child shares the parent's pages up to
  /// `pos` (-1: all); a fork inside a page copies that page's first tokens into a fresh page
  /// for the child, one copy_single_page call per layer (returned; the runtime makes them on its
  /// copy stream at once).
  Expected<std::vector<KvCall>> fork_sequence(int64_t parent, int64_t child, int64_t pos);
  /// kv_state_popn(seq, n): the sequence's last n tokens dropped (a fork and copy when they
  /// end inside a shared block).
  Expected<std::vector<KvCall>> popn(int64_t seq_id, int64_t n);
  /// kv_state_begin_forward(seq_ids, append_lengths): the page bookkeeping and the auxiliary
  /// arrays of the forward (host work only).
  Status begin_forward(const std::vector<int64_t>& seq_ids, const std::vector<int64_t>& lengths);
  Status end_forward();

  /// AttentionWithFusedQKV(layer, qkv, o, sm_scale): the calls the runtime makes, in order
  /// (the auxiliary copy first when the arrays are not on the device yet). `qkv_rows` is
  /// qkv's first dimension (≥ the forward's tokens).
  Expected<std::vector<KvCall>> attention_with_fused_qkv(int64_t layer, int64_t qkv_rows, double sm_scale);
  /// MLA's fine-grained calls (kv_state.cc's builtins, DeepSeek-V2 in MLC-LLM). The VM's
  /// tensors are Vm slots in the order each builtin takes them.
  /// SelfAttention(layer, q, k, v, o, lse, sm_scale): the ragged prefill over the forward's own
  /// tokens, causal, no RoPE (MLASelfAttnInternal). `rows`: q's first dimension.
  Expected<std::vector<KvCall>> self_attention(int64_t layer, int64_t rows, double sm_scale);
  /// CrossAttention(layer, q, o, lse, sm_scale): per depth with pages, the MLA paged kernel over
  /// the latent pages, merged after the first (MLACrossAttnInternal).
  Expected<std::vector<KvCall>> cross_attention(int64_t layer, int64_t rows, double sm_scale);
  /// AppendMLAKV(layer, kv): the latent rows appended at append_position_map.
  Expected<std::vector<KvCall>> append_mla_kv(int64_t layer, int64_t rows);
  /// MergeAttnOutputInplace(o1, lse1, o2, lse2): the general merge, o1 and lse1 in place.
  Expected<std::vector<KvCall>> merge_attn_output(int64_t rows);

  /// GetQueryPositions (vm.builtin.attention_kv_cache_get_query_positions): each appended
  /// token's position in its sequence is the q_rope_position_map array, tokens() int32 at
  /// offset 0 of the auxiliary buffer. The runtime waits for the auxiliary copy first, so when
  /// no attention of this forward has made it, this call does (returned); else nothing.
  Expected<std::vector<KvCall>> query_positions();

  /// The arrays the last begin_forward packed, and their total (aligned) length in elements.
  const std::vector<KvAuxArray>& aux_arrays() const { return aux_; }
  int64_t aux_length() const { return aux_length_; }
  int64_t tokens() const { return total_tokens_; }
  bool is_decode() const { return append_before_attn_; }

 private:
  /// The runtime's Block: pages, tokens, where they start in their sequences, the block
  /// before it in every sequence that uses it, and how many sequences or blocks point at it.
  struct Block {
    std::vector<int64_t> page_ids;
    int64_t seq_length = 0, start_pos = 0;
    int64_t parent = -1;
    int64_t refs = 0;
    int64_t sink_length = 0;     ///< tokens pinned at the block's start (attention sinks)
    int64_t window_offset = 0;   ///< sliding_window_offset: where the window starts in the pages
  };
  struct Sequence {
    int64_t id = 0;
    int64_t last_block = 0;  ///< index in blocks_
    int64_t length = 0;
    int64_t window = -1;     ///< sliding_window_size, -1: none
    int64_t sink = 0;        ///< last_block_attn_sink_size
  };
  /// The depths of a forward (at most 2: the runtime's kPagedKVCacheMaxBlockDepth).
  static constexpr int kMaxDepth = 2;

  int64_t free_block();
  Expected<int64_t> free_page();
  std::vector<int64_t> trace(const Sequence& s) const;
  Sequence* find(int64_t id);
  Status remove(int64_t seq_id);
  Expected<std::vector<KvCall>> fork(int64_t parent, int64_t child, int64_t pos);
  Status reserve(Sequence& s, int64_t n);
  Status slide(Sequence& s);
  const KvAuxArray& array(const std::string& name) const;
  KvArg aux_arg(const std::string& name) const;
  /// The local layer of a global one, checked to be in the cache and in a forward.
  Expected<int64_t> local_layer(int64_t layer) const;
  /// The copy of the auxiliary arrays to the device, when they are not there yet (clears dirty_).
  std::vector<KvCall> pending_aux_copy();

  KvCacheConfig cfg_;
  std::vector<int64_t> free_pages_;  ///< a stack: back() is handed out first
  std::vector<Block> blocks_;
  std::vector<int64_t> free_blocks_;  ///< a stack, as free_block_idx_
  std::vector<Sequence> seqs_;
  bool in_forward_ = false, dirty_ = false, append_before_attn_ = false;
  int64_t total_tokens_ = 0, batch_ = 0;
  int num_depths_ = 1;
  std::vector<bool> use_decode_;         ///< per depth: the decode kernel (else paged prefill)
  std::vector<bool> depth_has_pages_;    ///< per depth: its page table is not empty (cross attention runs)
  std::vector<KvAuxArray> aux_;
  int64_t aux_length_ = 0;
};

}  // namespace kdflow
