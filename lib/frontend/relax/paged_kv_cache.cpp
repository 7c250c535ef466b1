// paged_kv_cache.cpp — the model of TVM v0.26.0's paged KV cache (paged_kv_cache.h). Line
// references are to src/runtime/vm/paged_kv_cache.cc (PKV) and attn_utils.h (AU) at v0.26.0,
// as docs/notes/tvm-0.26-paged-kv-cache.md reads them.
#include "frontend/relax/paged_kv_cache.h"

#include <algorithm>

#include <fmt/format.h>

namespace kdflow {
namespace {

Error refuse(const std::string& what) {
  return Error{"TVM's paged KV cache " + what + ": kdflow models v0.26.0's TIR cache for MHA layers only",
               ExitCode::Unavailable};
}

/// The runtime's 16-byte alignment of each array in the merged buffer (AU: ceil(n/4)*4).
int64_t aligned(int64_t n) { return (n + 3) / 4 * 4; }

}  // namespace

Expected<PagedKvCacheModel> PagedKvCacheModel::create(const KvCacheConfig& c) {
  if (c.page_size <= 0 || c.max_total_seq_len <= 0 || c.prefill_chunk_size <= 0 || c.max_batch_size <= 0)
    return Error{fmt::format("the KV cache's configuration [max_batch_size {}, max_total_seq_len {}, "
                             "prefill_chunk_size {}, page_size {}] has a value below 1",
                             c.max_batch_size, c.max_total_seq_len, c.prefill_chunk_size, c.page_size),
                 ExitCode::DataError};
  if (c.num_layers <= 0 || c.num_qo_heads <= 0 || c.num_kv_heads <= 0 || c.qk_head_dim <= 0 ||
      c.num_qo_heads % c.num_kv_heads != 0)
    return Error{fmt::format("the KV cache has {} layers, {} query heads and {} KV heads of dimension {}",
                             c.num_layers, c.num_qo_heads, c.num_kv_heads, c.qk_head_dim),
                 ExitCode::DataError};
  if (c.v_head_dim != c.qk_head_dim) return refuse("with v_head_dim != qk_head_dim (MLA)");
  if (c.rope_mode < 0 || c.rope_mode > 2) return refuse(fmt::format("with rope_mode {}", c.rope_mode));
  for (const std::string* f : {&c.transpose_append, &c.prefill_ragged, &c.prefill_paged, &c.decode, &c.merge,
                               &c.split_rotary})
    if (f->empty()) return refuse("without one of its TIR kernels (transpose-append, prefill, decode, merge, rotary)");
  // Bound what the model allocates: pages × layers, and the token capacity.
  if (c.max_total_seq_len > (int64_t(1) << 24) || c.prefill_chunk_size > (int64_t(1) << 20) ||
      c.max_batch_size > 4096 || c.num_layers > 4096)
    return Error{fmt::format("the KV cache's configuration (max_total_seq_len {}, prefill_chunk_size {}, "
                             "max_batch_size {}, {} layers) is beyond what kdflow models",
                             c.max_total_seq_len, c.prefill_chunk_size, c.max_batch_size, c.num_layers),
                 ExitCode::DataError};
  PagedKvCacheModel m;
  m.cfg_ = c;
  // PKV ctor: free_page_ids_ = [NP-1, ..., 0], used as a stack: page 0 is handed out first.
  for (int64_t p = c.num_pages() - 1; p >= 0; --p) m.free_pages_.push_back(p);
  return m;
}

std::vector<int64_t> PagedKvCacheModel::buffer_shape(KvBuffer b) const {
  const KvCacheConfig& c = cfg_;
  const int64_t C = c.prefill_chunk_size;
  switch (b) {
    case KvBuffer::Pages: return {c.num_pages(), 2, c.num_kv_heads, c.page_size, c.qk_head_dim};
    case KvBuffer::TempQ: return {C, c.num_qo_heads, c.qk_head_dim};
    case KvBuffer::TempK: return {C, c.num_kv_heads, c.qk_head_dim};
    case KvBuffer::TempV: return {C, c.num_kv_heads, c.v_head_dim};
    case KvBuffer::TempO: return {C, c.num_qo_heads, c.v_head_dim};
    case KvBuffer::TempLse:
    case KvBuffer::MergedLse: return {C, c.num_qo_heads};
    case KvBuffer::Aux: return {kKvAuxElements};
    case KvBuffer::CompactAux:
      return {aligned(c.max_batch_size + 1) + aligned(2 * std::min(256 * c.max_batch_size, C))};
  }
  return {};
}

DType PagedKvCacheModel::buffer_dtype(KvBuffer b) const {
  switch (b) {
    case KvBuffer::TempLse:
    case KvBuffer::MergedLse: return DType{kDLFloat, 32, 1};
    case KvBuffer::Aux:
    case KvBuffer::CompactAux: return DType{kDLInt, 32, 1};
    default: return cfg_.dtype;
  }
}

Status PagedKvCacheModel::add_sequence(int64_t seq_id) {
  for (const Sequence& s : seqs_)
    if (s.id == seq_id) return Error{fmt::format("sequence {} is already in the KV cache", seq_id), ExitCode::DataError};
  Sequence s;
  s.id = seq_id;
  s.block = static_cast<int64_t>(blocks_.size());
  blocks_.emplace_back();
  seqs_.push_back(s);
  dirty_ = true;
  return Status::ok();
}

Status PagedKvCacheModel::remove_sequence(int64_t seq_id) {
  auto it = std::find_if(seqs_.begin(), seqs_.end(), [&](const Sequence& s) { return s.id == seq_id; });
  if (it == seqs_.end())
    return Error{fmt::format("sequence {} cannot be removed: it is not in the KV cache", seq_id), ExitCode::DataError};
  if (in_forward_) return Error{"a sequence removed inside a forward", ExitCode::DataError};
  Block& b = blocks_[static_cast<size_t>(it->block)];
  for (int64_t p : b.page_ids) free_pages_.push_back(p);
  b = Block{};
  seqs_.erase(it);
  dirty_ = true;
  return Status::ok();
}

Status PagedKvCacheModel::reserve(Block& b, int64_t n) {
  // PKV ReserveAppendLengthInSeq: pages until ceil((len + n) / P), each popped from the free list.
  const int64_t target = (b.seq_length + n + cfg_.page_size - 1) / cfg_.page_size;
  while (static_cast<int64_t>(b.page_ids.size()) < target) {
    if (free_pages_.empty())
      return Error{fmt::format("the KV cache is full: {} pages of {} tokens (max_total_seq_len {}) hold no more",
                               cfg_.num_pages(), cfg_.page_size, cfg_.max_total_seq_len),
                   ExitCode::DataError};
    b.page_ids.push_back(free_pages_.back());
    free_pages_.pop_back();
  }
  b.seq_length += n;
  return Status::ok();
}

Status PagedKvCacheModel::begin_forward(const std::vector<int64_t>& seq_ids, const std::vector<int64_t>& lengths) {
  if (seq_ids.empty() || seq_ids.size() != lengths.size())
    return Error{fmt::format("begin_forward with {} sequences and {} lengths", seq_ids.size(), lengths.size()),
                 ExitCode::DataError};
  if (static_cast<int64_t>(seq_ids.size()) > cfg_.max_batch_size)
    return Error{fmt::format("a forward of {} sequences; the cache was created for {}", seq_ids.size(),
                             cfg_.max_batch_size),
                 ExitCode::DataError};
  std::vector<Sequence*> seqs;
  int64_t total = 0;
  bool decode = true;
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    auto it = std::find_if(seqs_.begin(), seqs_.end(), [&](const Sequence& s) { return s.id == seq_ids[i]; });
    if (it == seqs_.end())
      return Error{fmt::format("begin_forward names sequence {}, which was never added", seq_ids[i]),
                   ExitCode::DataError};
    if (lengths[i] <= 0)
      return Error{fmt::format("begin_forward appends {} tokens to sequence {}", lengths[i], seq_ids[i]),
                   ExitCode::DataError};
    seqs.push_back(&*it);
    total += lengths[i];
    decode = decode && lengths[i] == 1;
  }
  if (total > cfg_.prefill_chunk_size)
    return Error{fmt::format("a forward of {} tokens is more than the KV cache's prefill_chunk_size {} (TVM's runtime "
                             "refuses it: split the prefill into chunks)",
                             total, cfg_.prefill_chunk_size),
                 ExitCode::DataError};
  const int64_t P = cfg_.page_size;
  // PKV BeginForward step 1: the rotary offset of the ragged part is the length before.
  std::vector<int64_t> k_ragged;
  for (size_t i = 0; i < seqs.size(); ++i) {
    k_ragged.push_back(seqs[i]->length);
    seqs[i]->length += lengths[i];
  }
  // Steps 2-4: one depth (every sequence is one block: forks are not modelled); the chunks are
  // the sequences' blocks, so the decode kernel serves an all-ones forward (ratio < 32).
  append_before_attn_ = decode;
  if (append_before_attn_)
    for (size_t i = 0; i < seqs.size(); ++i)
      if (Status s = reserve(blocks_[seqs[i]->block], lengths[i]); !s) return s;
  // Step 7: the page table of depth 0 (before this round's tokens in a prefill).
  std::vector<int64_t> qo_indptr{0}, page_indptr{0}, page_indices, last_page_len, k_rope;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Block& b = blocks_[seqs[i]->block];
    qo_indptr.push_back(qo_indptr.back() + lengths[i]);
    page_indptr.push_back(page_indptr.back() + static_cast<int64_t>(b.page_ids.size()));
    page_indices.insert(page_indices.end(), b.page_ids.begin(), b.page_ids.end());
    last_page_len.push_back(b.seq_length == 0 ? 0 : (b.seq_length - 1) % P + 1);
    k_rope.push_back(b.start_pos);
  }
  has_pages_ = !page_indices.empty();
  if (!append_before_attn_)
    for (size_t i = 0; i < seqs.size(); ++i)
      if (Status s = reserve(blocks_[seqs[i]->block], lengths[i]); !s) return s;
  // Step 10: per token, the query's rotary position and where its K and V are appended.
  std::vector<int64_t> q_rope, append_pos;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Block& b = blocks_[seqs[i]->block];
    for (int64_t pos = 0; pos < lengths[i]; ++pos) {
      q_rope.push_back(k_ragged[i] + pos);
      const int64_t in_block = b.seq_length - lengths[i] + pos;
      append_pos.push_back(b.page_ids[static_cast<size_t>(in_block / P)] * P + in_block % P);
    }
  }
  std::vector<int64_t> cur_indptr{0};
  for (int64_t n : lengths) cur_indptr.push_back(cur_indptr.back() + n);
  // SyncAuxArrayToDevice's order (PKV ~2320); each array starts at a multiple of 4 elements,
  // an empty one takes no room.
  aux_.clear();
  int64_t off = 0;
  auto put = [&](const std::string& name, std::vector<int64_t> v) {
    KvAuxArray a;
    a.name = name;
    a.offset = off;
    off += aligned(static_cast<int64_t>(v.size()));
    a.values = std::move(v);
    aux_.push_back(std::move(a));
  };
  put("q_rope_position_map", q_rope);
  put("qo_indptr[0]", qo_indptr);
  put("page_indptr[0]", page_indptr);
  put("page_indices[0]", page_indices);
  put("last_page_len[0]", last_page_len);
  put("k_rope_pos_offset[0]", k_rope);
  put("cur_append_length_indptr", cur_indptr);
  put("k_ragged_rope_pos_offset", k_ragged);
  put("append_position_map", append_pos);
  put("kv_transfer_remote_position_map", std::vector<int64_t>(static_cast<size_t>(total), -1));
  put("kv_transfer_recver_id", std::vector<int64_t>(static_cast<size_t>(total), -1));
  aux_length_ = off;
  total_tokens_ = total;
  batch_ = static_cast<int64_t>(seqs.size());
  in_forward_ = true;
  dirty_ = true;
  return Status::ok();
}

Status PagedKvCacheModel::end_forward() {
  if (!in_forward_) return Error{"end_forward without begin_forward", ExitCode::DataError};
  in_forward_ = false;
  return Status::ok();
}

const KvAuxArray& PagedKvCacheModel::array(const std::string& name) const {
  for (const KvAuxArray& a : aux_)
    if (a.name == name) return a;
  return aux_.front();  // unreachable: every name is put by begin_forward
}

KvArg PagedKvCacheModel::aux_arg(const std::string& name) const {
  const KvAuxArray& a = array(name);
  KvArg x;
  x.kind = KvArg::Kind::Buffer;
  x.buffer = KvBuffer::Aux;
  x.shape = {static_cast<int64_t>(a.values.size())};
  x.aux_offset = a.offset;
  x.aux_name = name;
  return x;
}

Expected<std::vector<KvCall>> PagedKvCacheModel::attention_with_fused_qkv(int64_t layer, int64_t qkv_rows,
                                                                          double sm_scale) {
  const KvCacheConfig& c = cfg_;
  if (!in_forward_) return Error{"attention without kv_state_begin_forward", ExitCode::DataError};
  const int64_t local = layer - c.layer_begin;
  if (local < 0 || local >= c.num_layers)
    return Error{fmt::format("attention of layer {}, outside the cache's layers [{}, {})", layer, c.layer_begin,
                             c.layer_begin + c.num_layers),
                 ExitCode::DataError};
  const int64_t T = total_tokens_;
  if (qkv_rows < T)
    return Error{fmt::format("qkv holds {} tokens, the forward appends {}", qkv_rows, T), ExitCode::DataError};
  const int64_t Hq = c.num_qo_heads, Hkv = c.num_kv_heads, D = c.qk_head_dim;
  auto buf = [&](KvBuffer b, std::vector<int64_t> shape, bool writes) {
    KvArg a;
    a.kind = KvArg::Kind::Buffer;
    a.buffer = b;
    a.layer = local;
    a.shape = std::move(shape);
    a.writes = writes;
    return a;
  };
  auto integer = [](int64_t v) {
    KvArg a;
    a.kind = KvArg::Kind::Int;
    a.i = v;
    return a;
  };
  auto real = [](double v) {
    KvArg a;
    a.kind = KvArg::Kind::Float;
    a.f = v;
    return a;
  };
  KvArg qkv;
  qkv.kind = KvArg::Kind::Qkv;
  qkv.shape = {T, Hq + 2 * Hkv, D};
  auto out = [&](bool in_place) {
    KvArg o;
    o.kind = KvArg::Kind::Output;
    o.shape = {T, Hq, D};
    o.writes = true;
    o.keeps = in_place;
    return o;
  };
  const KvArg pages = buf(KvBuffer::Pages, buffer_shape(KvBuffer::Pages), false);
  auto pages_written = [&] {
    KvArg p = pages;
    p.writes = p.keeps = true;
    return p;
  };
  auto merged_lse_in_place = [&] {
    KvArg a = buf(KvBuffer::MergedLse, {T, Hq}, true);
    a.keeps = true;
    return a;
  };
  std::vector<KvCall> calls;
  // The first attention after begin_forward sends the arrays (ComputeStreamWaitForCopyStream).
  if (dirty_) {
    KvCall copy;
    copy.role = "aux copy";
    KvArg dst = buf(KvBuffer::Aux, {aux_length_}, true);
    copy.args.push_back(dst);
    calls.push_back(std::move(copy));
    dirty_ = false;
  }
  const std::vector<int64_t> q_shape{T, Hq, D}, kv_shape{T, Hkv, D};
  calls.push_back(KvCall{c.split_rotary, "split rotary",
                         {qkv, aux_arg("q_rope_position_map"), buf(KvBuffer::TempQ, q_shape, true),
                          buf(KvBuffer::TempK, kv_shape, true), buf(KvBuffer::TempV, kv_shape, true),
                          integer(c.rope_mode == 1 ? 1 : 0)}});
  auto append = [&] {
    return KvCall{c.transpose_append, "transpose append",
                  {pages_written(), buf(KvBuffer::TempK, kv_shape, false), buf(KvBuffer::TempV, kv_shape, false),
                   aux_arg("append_position_map")}};
  };
  if (append_before_attn_) calls.push_back(append());
  const KvArg q = buf(KvBuffer::TempQ, q_shape, false);
  // Rotary embedding was applied by the split kernel unless the mode is inline.
  const int64_t rotary_mode = c.rope_mode == 2 ? 1 : 0;
  bool first = true;
  if (!append_before_attn_) {
    calls.push_back(KvCall{c.prefill_ragged, "prefill ragged",
                           {q, aux_arg("cur_append_length_indptr"), buf(KvBuffer::TempK, kv_shape, false),
                            buf(KvBuffer::TempV, kv_shape, false), aux_arg("cur_append_length_indptr"),
                            aux_arg("q_rope_position_map"), aux_arg("k_ragged_rope_pos_offset"), out(false),
                            buf(KvBuffer::MergedLse, {T, Hq}, true), integer(1), integer(rotary_mode),
                            real(c.rope_scale), real(c.rope_theta), real(sm_scale)}});
    first = false;
  }
  if (has_pages_) {
    KvArg o = first ? out(false) : buf(KvBuffer::TempO, {T, Hq, D}, true);
    KvArg lse = buf(first ? KvBuffer::MergedLse : KvBuffer::TempLse, {T, Hq}, true);
    if (append_before_attn_) {
      calls.push_back(KvCall{c.decode, "decode",
                             {q, pages, aux_arg("page_indptr[0]"), aux_arg("page_indices[0]"),
                              aux_arg("last_page_len[0]"), aux_arg("k_rope_pos_offset[0]"),
                              aux_arg("q_rope_position_map"), o, lse, integer(rotary_mode), real(c.rope_scale),
                              real(c.rope_theta), real(sm_scale)}});
    } else {
      calls.push_back(KvCall{c.prefill_paged, "prefill paged",
                             {q, aux_arg("qo_indptr[0]"), pages, aux_arg("page_indptr[0]"),
                              aux_arg("page_indices[0]"), aux_arg("last_page_len[0]"),
                              aux_arg("k_rope_pos_offset[0]"), aux_arg("q_rope_position_map"), o, lse, integer(0),
                              integer(rotary_mode), real(c.rope_scale), real(c.rope_theta), real(sm_scale)}});
    }
    if (!first) {
      calls.push_back(KvCall{c.merge, "merge",
                             {out(true), merged_lse_in_place(),
                              buf(KvBuffer::TempO, {T, Hq, D}, false), buf(KvBuffer::TempLse, {T, Hq}, false)}});
    }
    first = false;
  }
  if (first) return Error{"an attention with neither new tokens nor cached pages", ExitCode::DataError};
  if (!append_before_attn_) calls.push_back(append());
  return calls;
}

}  // namespace kdflow
