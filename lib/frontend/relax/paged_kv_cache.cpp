// paged_kv_cache.cpp — the model of TVM v0.26.0's paged KV cache (paged_kv_cache.h). Line
// references are to src/runtime/vm/paged_kv_cache.cc (PKV) and attn_utils.h (AU) at v0.26.0,
// as docs/notes/tvm-0.26-paged-kv-cache.md reads them.
#include "frontend/relax/paged_kv_cache.h"

#include <algorithm>

#include <fmt/format.h>

namespace kdflow {
namespace {

Error refuse(const std::string& what) {
  return Error{"TVM's paged KV cache " + what + ": not modelled (kdflow models the TIR cache's MHA and MLA layers)",
               ExitCode::Unavailable};
}

/// The runtime's 16-byte alignment of each array in the merged buffer (AU: ceil(n/4)*4).
int64_t aligned(int64_t n) { return (n + 3) / 4 * 4; }

KvArg int_arg(int64_t v) {
  KvArg a;
  a.kind = KvArg::Kind::Int;
  a.i = v;
  return a;
}

KvArg float_arg(double v) {
  KvArg a;
  a.kind = KvArg::Kind::Float;
  a.f = v;
  return a;
}

/// One of the cache's buffers (Pages: layer `layer`'s, local), seen by the callee with `shape`;
/// `keeps`: written in part or in place.
KvArg buffer_arg(KvBuffer b, int64_t layer, std::vector<int64_t> shape, bool writes, bool keeps = false) {
  KvArg a;
  a.kind = KvArg::Kind::Buffer;
  a.buffer = b;
  a.layer = layer;
  a.shape = std::move(shape);
  a.writes = writes;
  a.keeps = keeps;
  return a;
}

/// The VM's tensor `slot` of a builtin, seen by the callee with `shape`.
KvArg vm_arg(int slot, std::vector<int64_t> shape, bool writes, bool keeps = false) {
  KvArg a;
  a.kind = KvArg::Kind::Vm;
  a.slot = slot;
  a.shape = std::move(shape);
  a.writes = writes;
  a.keeps = keeps;
  return a;
}

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
  if (c.mla()) {
    for (int64_t k : c.attn_kinds)
      if (k != 1) return refuse("with MLA and other layers in one cache");
    // The runtime's constructor refuses these with MLA layers.
    if (c.support_sliding_window) return Error{"an MLA cache with support_sliding_window: TVM's runtime refuses it",
                                               ExitCode::DataError};
    if (c.num_kv_heads != 1 || c.v_head_dim <= 0 || c.v_head_dim >= c.qk_head_dim)
      return Error{fmt::format("an MLA cache with {} KV heads, latent dimension {} of {} (the runtime's kernels need "
                               "1 head and a rotary part after the latent one)",
                               c.num_kv_heads, c.v_head_dim, c.qk_head_dim),
                   ExitCode::DataError};
    for (const std::string* f : {&c.transpose_append_mla, &c.prefill_ragged, &c.mla_prefill, &c.merge, &c.merge_general})
      if (f->empty())
        return refuse("with MLA layers but without one of its TIR kernels (MLA append, ragged prefill, MLA prefill, "
                      "both merges)");
  } else if (c.v_head_dim != c.qk_head_dim) {
    return refuse("with v_head_dim != qk_head_dim in MHA layers");
  }
  if (c.rope_mode < 0 || c.rope_mode > 2) return refuse(fmt::format("with rope_mode {}", c.rope_mode));
  // The runtime's own check (PagedAttentionKVCacheObj's constructor).
  if (!c.rope_ext_factors.empty() && c.effective_rope_mode() != 1)
    return Error{"rope_ext_factors with a RoPE mode other than normal: TVM's runtime refuses this cache",
                 ExitCode::DataError};
  for (const std::string* f : {&c.transpose_append, &c.prefill_ragged, &c.prefill_paged, &c.decode, &c.merge,
                               &c.split_rotary})
    if (f->empty() && !c.mla())
      return refuse("without one of its TIR kernels (transpose-append, prefill, decode, merge, rotary)");
  for (int64_t k : c.attn_kinds)
    if (k != 0 && k != 3 && !(k == 1 && c.mla()))
      return refuse(k == 1 ? "with MLA and other layers in one cache" : k == 2 ? "with linear-attention layers"
                                                                           : fmt::format("with attention kind {}", k));
  if ((c.layer_sliding() || c.support_sliding_window) && (c.prefill_sliding.empty() || c.decode_sliding.empty()))
    return refuse("with a sliding window but no sliding-window prefill or decode kernel");
  if (c.layer_sliding() && (c.layer_window <= 0 || c.layer_window > (int64_t(1) << 24)))
    return Error{fmt::format("the KV cache's layer sliding window of {} tokens (TVM's runtime requires more than 0)",
                             c.layer_window),
                 ExitCode::DataError};
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
    case KvBuffer::Pages:  // GetKVCacheShape: an MLA page holds one latent row per token
      if (c.mla()) return {c.num_pages(), c.page_size, c.qk_head_dim};
      return {c.num_pages(), 2, c.num_kv_heads, c.page_size, c.qk_head_dim};
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

int64_t PagedKvCacheModel::free_block() {
  // GetFreeBlock: the last freed block is reused (Reset), else a new one.
  if (!free_blocks_.empty()) {
    const int64_t b = free_blocks_.back();
    free_blocks_.pop_back();
    blocks_[static_cast<size_t>(b)] = Block{};
    return b;
  }
  blocks_.emplace_back();
  return static_cast<int64_t>(blocks_.size()) - 1;
}

Expected<int64_t> PagedKvCacheModel::free_page() {
  if (free_pages_.empty())
    return Error{fmt::format("the KV cache is full: {} pages of {} tokens (max_total_seq_len {}) hold no more",
                             cfg_.num_pages(), cfg_.page_size, cfg_.max_total_seq_len),
                 ExitCode::DataError};
  const int64_t p = free_pages_.back();
  free_pages_.pop_back();
  return p;
}

std::vector<int64_t> PagedKvCacheModel::trace(const Sequence& s) const {
  // Sequence::GetBlockTrace: root first.
  std::vector<int64_t> out;
  for (int64_t b = s.last_block; b != -1; b = blocks_[static_cast<size_t>(b)].parent) out.push_back(b);
  std::reverse(out.begin(), out.end());
  return out;
}

PagedKvCacheModel::Sequence* PagedKvCacheModel::find(int64_t id) {
  auto it = std::find_if(seqs_.begin(), seqs_.end(), [&](const Sequence& s) { return s.id == id; });
  return it == seqs_.end() ? nullptr : &*it;
}

Status PagedKvCacheModel::add_sequence(int64_t seq_id) {
  if (find(seq_id)) return Error{fmt::format("sequence {} is already in the KV cache", seq_id), ExitCode::DataError};
  if (in_forward_) return Error{"a sequence added inside a forward", ExitCode::DataError};
  Sequence s;
  s.id = seq_id;
  s.last_block = free_block();
  ++blocks_[static_cast<size_t>(s.last_block)].refs;  // the Sequence constructor's reference
  seqs_.push_back(s);
  dirty_ = true;
  return Status::ok();
}

Status PagedKvCacheModel::remove(int64_t seq_id) {
  Sequence* seq = find(seq_id);
  if (!seq)
    return Error{fmt::format("sequence {} cannot be removed: it is not in the KV cache", seq_id), ExitCode::DataError};
  // PKV RemoveSequence: free the blocks only this sequence holds, last first; the first shared
  // one loses a reference.
  int64_t b = seq->last_block;
  while (b != -1 && blocks_[static_cast<size_t>(b)].refs == 1) {
    for (int64_t p : blocks_[static_cast<size_t>(b)].page_ids) free_pages_.push_back(p);
    free_blocks_.push_back(b);
    b = blocks_[static_cast<size_t>(b)].parent;
  }
  if (b != -1) --blocks_[static_cast<size_t>(b)].refs;
  seqs_.erase(seqs_.begin() + (seq - seqs_.data()));
  dirty_ = true;
  return Status::ok();
}

Status PagedKvCacheModel::remove_sequence(int64_t seq_id) {
  if (in_forward_) return Error{"a sequence removed inside a forward", ExitCode::DataError};
  return remove(seq_id);
}

Expected<std::vector<KvCall>> PagedKvCacheModel::fork_sequence(int64_t parent, int64_t child, int64_t pos) {
  if (in_forward_) return Error{"a sequence forked inside a forward", ExitCode::DataError};
  if (const Sequence* p = find(parent); p && p->window != -1)
    return refuse(fmt::format("fork of sequence {}, which has a sliding window", parent));
  return fork(parent, child, pos);
}

Expected<std::vector<KvCall>> PagedKvCacheModel::fork(int64_t parent_id, int64_t child_id, int64_t pos) {
  const int64_t P = cfg_.page_size;
  Sequence* parent = find(parent_id);
  if (!parent)
    return Error{fmt::format("fork of sequence {}, which is not in the KV cache", parent_id), ExitCode::DataError};
  if (find(child_id))
    return Error{fmt::format("fork into sequence {}, which is already in the KV cache", child_id), ExitCode::DataError};
  if (pos < -1 || pos > parent->length)
    return Error{fmt::format("fork of sequence {} at position {}: it holds {} tokens", parent_id, pos, parent->length),
                 ExitCode::DataError};
  if (pos == -1) pos = parent->length;
  // PKV ForkSequence (~585). At the parent's end on a page boundary, the parent gets a new
  // empty block so that its next tokens do not go into the shared one.
  if (pos == parent->length && pos % P == 0 && blocks_[static_cast<size_t>(parent->last_block)].seq_length > 0) {
    const int64_t nb = free_block();
    blocks_[static_cast<size_t>(nb)].start_pos = parent->length;
    blocks_[static_cast<size_t>(nb)].parent = parent->last_block;
    blocks_[static_cast<size_t>(nb)].refs = 1;
    parent->last_block = nb;
  }
  const int64_t child_block = free_block();
  const std::vector<int64_t> tr = trace(*parent);
  int64_t in_block = pos;
  std::vector<KvCall> calls;
  for (int64_t forked : tr) {
    Block* fb = &blocks_[static_cast<size_t>(forked)];
    if (forked != tr.back()) {
      if (fb->seq_length <= 0 || fb->seq_length % P != 0)
        return Error{fmt::format("fork of sequence {}: a block before its last holds {} tokens (the runtime expects a "
                                 "positive multiple of the page size {})",
                                 parent_id, fb->seq_length, P),
                     ExitCode::DataError};
      if (fb->seq_length <= in_block) {
        in_block -= fb->seq_length;
        continue;
      }
    }
    const int64_t in_page = in_block % P;
    const int64_t moved = in_block - in_page;
    const int64_t moved_pages = moved / P;
    if (moved_pages == 0) {
      // Forked in the block's first page: the child hangs under the block's parent.
      const int64_t pb = fb->parent;
      if (pb != -1) ++blocks_[static_cast<size_t>(pb)].refs;
      blocks_[static_cast<size_t>(child_block)].parent = pb;
    } else {
      // A new block before the forked one takes its first moved_pages pages; both the forked
      // block and the child hang under it.
      const int64_t pb = free_block();
      fb = &blocks_[static_cast<size_t>(forked)];  // free_block may have grown the pool
      Block& nb = blocks_[static_cast<size_t>(pb)];
      nb.parent = fb->parent;
      fb->parent = pb;
      blocks_[static_cast<size_t>(child_block)].parent = pb;
      nb.refs = 2;
      nb.page_ids.assign(fb->page_ids.begin(), fb->page_ids.begin() + moved_pages);
      fb->page_ids.erase(fb->page_ids.begin(), fb->page_ids.begin() + moved_pages);
      nb.start_pos = fb->start_pos;
      fb->start_pos += moved;
      nb.seq_length = moved;
      fb->seq_length -= moved;
    }
    Block& cb = blocks_[static_cast<size_t>(child_block)];
    cb.start_pos = pos - in_page;
    cb.seq_length = in_page;
    if (in_page > 0) {
      // CopySinglePage: the forked page's first in_page tokens into a fresh page, every layer.
      if (cfg_.copy_single_page.empty())
        return Error{fmt::format("fork of sequence {} at position {}, inside a page: the runtime copies that page with "
                                 "copy_single_page, which this build did not pass to the KV cache",
                                 parent_id, pos),
                     ExitCode::Unavailable};
      const int64_t src = blocks_[static_cast<size_t>(forked)].page_ids.at(0);
      Expected<int64_t> tgt = free_page();
      if (!tgt) return tgt.error();
      blocks_[static_cast<size_t>(child_block)].page_ids.push_back(*tgt);
      for (int64_t l = 0; l < cfg_.num_layers; ++l) {
        KvCall c;
        c.function = cfg_.copy_single_page;
        c.role = "copy single page";
        c.layer = cfg_.layer_begin + l;
        c.args.push_back(buffer_arg(KvBuffer::Pages, l, buffer_shape(KvBuffer::Pages), true, true));
        for (int64_t v : {src, *tgt, in_page}) c.args.push_back(int_arg(v));
        calls.push_back(std::move(c));
      }
    }
    break;
  }
  // The child Sequence: a reference to its block, its length summed over its chain.
  Sequence s;
  s.id = child_id;
  s.last_block = child_block;
  ++blocks_[static_cast<size_t>(child_block)].refs;
  for (int64_t b : trace(s)) s.length += blocks_[static_cast<size_t>(b)].seq_length;
  seqs_.push_back(s);
  dirty_ = true;
  return calls;
}

Expected<std::vector<KvCall>> PagedKvCacheModel::popn(int64_t seq_id, int64_t n) {
  if (in_forward_) return Error{"popn inside a forward", ExitCode::DataError};
  Sequence* seq = find(seq_id);
  if (!seq) return Error{fmt::format("popn of sequence {}, which is not in the KV cache", seq_id), ExitCode::DataError};
  if (seq->window != -1) return refuse(fmt::format("popn of sequence {}, which has a sliding window", seq_id));
  if (n < 0 || n > seq->length)
    return Error{fmt::format("popn of {} tokens from sequence {}, which holds {}", n, seq_id, seq->length),
                 ExitCode::DataError};
  std::vector<KvCall> calls;
  if (n == 0) return calls;
  // PKV PopN (~782): drop whole blocks this sequence alone holds, then pages of the last one.
  int64_t b = seq->last_block;
  while (b != -1 && blocks_[static_cast<size_t>(b)].refs == 1) {
    Block& bl = blocks_[static_cast<size_t>(b)];
    if (n > bl.seq_length) {
      n -= bl.seq_length;
      seq->length -= bl.seq_length;
      for (int64_t p : bl.page_ids) free_pages_.push_back(p);
      free_blocks_.push_back(b);
      b = bl.parent;
      seq->last_block = b;
      continue;
    }
    int64_t npage = static_cast<int64_t>(bl.page_ids.size());
    const int64_t target = (bl.seq_length - n + cfg_.page_size - 1) / cfg_.page_size;
    while (npage > target) {
      free_pages_.push_back(bl.page_ids.back());
      bl.page_ids.pop_back();
      --npage;
    }
    seq->length -= n;
    bl.seq_length -= n;
    n = 0;
    break;
  }
  if (n > 0) {
    // The rest lies in shared blocks: fork a temporary sequence at the new end, drop this one,
    // and let the temporary take its id.
    const int64_t temp = -1 - seq_id;
    Expected<std::vector<KvCall>> c = fork(seq_id, temp, seq->length - n);
    if (!c) return c.error();
    calls = c.take();
    if (Status r = remove(seq_id); !r) return r.error();
    find(temp)->id = seq_id;
  }
  dirty_ = true;
  return calls;
}

Status PagedKvCacheModel::reserve(Sequence& s, int64_t n) {
  // PKV ReserveAppendLengthInSeq: pages until ceil((len - sink + window offset + n) / P), each
  // popped from the free list; a sequence with a window borrows a temporary page (-1) when
  // none is free, replaced after its window slides (SlideWindowForSequence frees pages).
  Block& b = blocks_[static_cast<size_t>(s.last_block)];
  if (b.refs != 1)
    return Error{"tokens appended to a block other sequences share (the runtime refuses it)", ExitCode::DataError};
  const bool windows = cfg_.sequence_windows();
  const int64_t target = (b.seq_length - b.sink_length + b.window_offset + n + cfg_.page_size - 1) / cfg_.page_size;
  while (static_cast<int64_t>(b.page_ids.size()) < target) {
    if (free_pages_.empty() && s.window != -1 && windows) {
      b.page_ids.push_back(-1);
      continue;
    }
    Expected<int64_t> p = free_page();
    if (!p) return p.error();
    b.page_ids.push_back(*p);
  }
  b.seq_length += n;
  if (Status st = slide(s); !st) return st;
  if (windows)
    for (int64_t& page : blocks_[static_cast<size_t>(s.last_block)].page_ids)
      if (page == -1) {
        Expected<int64_t> p = free_page();
        if (!p) return p.error();
        page = *p;
      }
  return Status::ok();
}

Status PagedKvCacheModel::slide(Sequence& s) {
  // SlideWindowForSequence: past its window, the sequence drops its oldest tokens after the
  // sinks; pages wholly left behind go back to the free list.
  if (s.window == -1 || !cfg_.sequence_windows() || s.length <= s.window) return Status::ok();
  const int64_t P = cfg_.page_size;
  const int64_t slid = s.length - s.window;
  Block& b = blocks_[static_cast<size_t>(s.last_block)];
  if (s.sink > 0 && b.sink_length == 0) {
    b.sink_length = s.sink;
    b.window_offset = s.sink;
  }
  const int64_t sink_pages = (b.sink_length + P - 1) / P;
  int64_t first = (b.window_offset + slid) / P;
  const int64_t in_page = (b.window_offset + slid) % P;
  while (first > sink_pages) {
    const int64_t page = b.page_ids[static_cast<size_t>(sink_pages)];
    if (page != -1) free_pages_.push_back(page);
    b.page_ids.erase(b.page_ids.begin() + sink_pages);
    --first;
  }
  s.length = s.window;
  b.seq_length -= slid;
  b.window_offset = first * P + in_page;
  if ((first != sink_pages - 1 && first != sink_pages) || b.seq_length < b.sink_length ||
      b.window_offset < b.sink_length ||
      (b.window_offset + (b.seq_length - b.sink_length) + P - 1) / P != static_cast<int64_t>(b.page_ids.size()))
    return Error{fmt::format("sequence {}'s sliding window: the runtime's own checks fail (window offset {}, {} "
                             "tokens, {} sinks, {} pages)",
                             s.id, b.window_offset, b.seq_length, b.sink_length, b.page_ids.size()),
                 ExitCode::DataError};
  return Status::ok();
}

Status PagedKvCacheModel::enable_sliding_window(int64_t seq_id, int64_t window, int64_t sink) {
  // EnableSlidingWindowForSeq: the blocks before the last are natural sinks.
  if (!cfg_.support_sliding_window && !cfg_.layer_sliding())
    return Error{fmt::format("sliding window for sequence {}: the KV cache was created without support_sliding_window "
                             "(TVM's runtime refuses it)",
                             seq_id),
                 ExitCode::DataError};
  Sequence* s = find(seq_id);
  if (!s) return Error{fmt::format("sliding window for sequence {}, which was never added", seq_id), ExitCode::DataError};
  if (sink < 0 || window <= 0 || sink >= window)
    return Error{fmt::format("sliding window of {} tokens with {} sinks for sequence {} (the runtime needs 0 <= sinks "
                             "< window)",
                             window, sink, seq_id),
                 ExitCode::DataError};
  if (s->window != -1)
    return Error{fmt::format("sliding window enabled twice for sequence {}", seq_id), ExitCode::DataError};
  const int64_t prefix = s->length - blocks_[static_cast<size_t>(s->last_block)].seq_length;
  s->sink = std::max<int64_t>(sink - prefix, 0);
  s->window = window;
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
  std::vector<int64_t> seqs;  // indices in seqs_ (stable: no sequence is added in a forward)
  int64_t total = 0;
  bool decode = true;
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    Sequence* s = find(seq_ids[i]);
    if (!s)
      return Error{fmt::format("begin_forward names sequence {}, which was never added", seq_ids[i]),
                   ExitCode::DataError};
    if (lengths[i] <= 0)
      return Error{fmt::format("begin_forward appends {} tokens to sequence {}", lengths[i], seq_ids[i]),
                   ExitCode::DataError};
    seqs.push_back(s - seqs_.data());
    total += lengths[i];
    decode = decode && lengths[i] == 1;
  }
  if (total > cfg_.prefill_chunk_size)
    return Error{fmt::format("a forward of {} tokens is more than the KV cache's prefill_chunk_size {} (TVM's runtime "
                             "refuses it: split the prefill into chunks)",
                             total, cfg_.prefill_chunk_size),
                 ExitCode::DataError};
  const int64_t P = cfg_.page_size;
  const size_t B = seqs.size();
  auto seq = [&](size_t i) -> Sequence& { return seqs_[static_cast<size_t>(seqs[i])]; };
  auto block = [&](int64_t b) -> Block& { return blocks_[static_cast<size_t>(b)]; };
  // PKV BeginForward step 1: the rotary offset of the ragged part is the length before (capped
  // at the window by the slides of a sequence with one), and the last block's length.
  std::vector<int64_t> k_ragged, last_before;
  for (size_t i = 0; i < B; ++i) {
    k_ragged.push_back(seq(i).length);
    last_before.push_back(block(seq(i).last_block).seq_length);
    seq(i).length += lengths[i];
  }
  // Step 2 (GetBlockIdsOnDepth): each sequence's blocks root first; depth 0 the first, depth 1
  // the second, the blocks after it "trailing" (their pages join depth 1's).
  std::vector<std::vector<int64_t>> on_depth;  // [depth][sequence] → block, -1 when it has fewer
  std::vector<std::vector<int64_t>> trailing(B);
  for (size_t i = 0; i < B; ++i) {
    const std::vector<int64_t> tr = trace(seq(i));
    const size_t kept = std::min<size_t>(tr.size(), kMaxDepth);
    if (on_depth.size() < kept) on_depth.resize(kept, std::vector<int64_t>(B, -1));
    for (size_t d = 0; d < kept; ++d) on_depth[d][i] = tr[d];
    trailing[i].assign(tr.begin() + static_cast<std::ptrdiff_t>(kept), tr.end());
  }
  for (std::vector<int64_t>& d : on_depth) d.resize(B, -1);
  num_depths_ = static_cast<int>(on_depth.size());
  // Step 3 (GetChunkedBlockIds): per depth, (block, tokens) per sequence or, at depth 0 when the
  // decode kernel is not used, consecutive sequences on one block coalesced into one chunk.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> chunks(static_cast<size_t>(num_depths_));
  use_decode_.assign(static_cast<size_t>(num_depths_), false);
  for (int d = 0; d < num_depths_; ++d) {
    const std::vector<int64_t>& ids = on_depth[static_cast<size_t>(d)];
    auto pages_of = [&](int64_t b) { return b == -1 ? int64_t(0) : static_cast<int64_t>(block(b).page_ids.size()); };
    std::vector<std::pair<int64_t, int64_t>> unco, co;
    int64_t cur = ids[0], len = lengths[0], pages_co = 0, pages_unco = pages_of(ids[0]);
    for (size_t i = 1; i < B; ++i) {
      pages_unco += pages_of(ids[i]);
      unco.emplace_back(ids[i - 1], lengths[i - 1]);
      if (ids[i] == cur) {
        len += lengths[i];
      } else {
        co.emplace_back(cur, len);
        pages_co += pages_of(cur);
        cur = ids[i];
        len = lengths[i];
      }
    }
    unco.emplace_back(ids[B - 1], lengths[B - 1]);
    co.emplace_back(cur, len);
    pages_co += pages_of(cur);
    const double ratio = pages_co > 0 ? 1.0 * static_cast<double>(pages_unco) / static_cast<double>(pages_co) : 0.0;
    const bool use_decode = decode && ratio < 32;
    const bool coalesce = d != kMaxDepth - 1;
    chunks[static_cast<size_t>(d)] = use_decode || !coalesce ? unco : co;
    use_decode_[static_cast<size_t>(d)] = use_decode;
  }
  // Step 4: the decode kernel of the last depth decides, unless sequences may slide (then the
  // tokens are appended after attention).
  const bool windows = cfg_.sequence_windows();
  append_before_attn_ = !windows && use_decode_.back();
  if (append_before_attn_)
    for (size_t i = 0; i < B; ++i)
      if (Status s = reserve(seq(i), lengths[i]); !s) return s;
  // Step 7: the page table of each depth (before this round's tokens in a prefill).
  const size_t D = static_cast<size_t>(num_depths_);
  std::vector<std::vector<int64_t>> qo_indptr(D), page_indptr(D), page_indices(D), last_page_len(D), k_rope(D);
  // With sliding-window layers (support_layer_sliding_window_), the same tables restricted to
  // each sequence's last W tokens, as TVM 0.27's runtime computes them (GetLayerSlidingWindowOffset,
  // GetLayerSlidingWindowNumPages): the window starts `offset` tokens into its first page, its
  // pages are the last ones of the sequence's list, its RoPE positions start at length - W.
  // (v0.26.0's runtime, with W fixed at 1,024, gives the same tables for one sequence of one
  // block; with several sequences it fails its own size check.)
  const bool sliding = cfg_.layer_sliding();
  const int64_t W = cfg_.layer_window;
  auto window_offset_of = [&](int64_t len) { return len <= W ? int64_t(0) : (len - W) % P; };
  auto window_pages_of = [&](int64_t len) {
    return len == 0 ? int64_t(0) : (window_offset_of(len) + std::min(len, W) + P - 1) / P;
  };
  std::vector<std::vector<int64_t>> page_indptr_sw(D), page_indices_sw(D), window_offset(D), k_rope_sw(D);
  // With sequences' own windows, every layer's length info is [3, n]: the last page's length,
  // the window's offset and the sinks of the block (of the last block at the maximum depth).
  std::vector<std::vector<int64_t>> seq_offset(D), seq_sinks(D);
  for (int d = 0; d < num_depths_; ++d) {
    const size_t du = static_cast<size_t>(d);
    qo_indptr[du] = {0};
    page_indptr[du] = {0};
    page_indptr_sw[du] = {0};
    for (size_t i = 0; i < chunks[du].size(); ++i) {
      const auto [b, len] = chunks[du][i];
      qo_indptr[du].push_back(qo_indptr[du].back() + len);
      if (b == -1) {
        page_indptr[du].push_back(page_indptr[du].back());
        page_indptr_sw[du].push_back(page_indptr_sw[du].back());
        last_page_len[du].push_back(0);
        k_rope[du].push_back(0);
        window_offset[du].push_back(0);
        k_rope_sw[du].push_back(0);
        seq_offset[du].push_back(0);
        seq_sinks[du].push_back(0);
        continue;
      }
      const Block& bl = block(b);
      int64_t pages = static_cast<int64_t>(bl.page_ids.size()), length = bl.seq_length;
      const Block* last = &bl;
      page_indices[du].insert(page_indices[du].end(), bl.page_ids.begin(), bl.page_ids.end());
      if (d == kMaxDepth - 1)  // the maximum depth: the trailing blocks' pages too
        for (int64_t t : trailing[i]) {
          const Block& tb = block(t);
          page_indices[du].insert(page_indices[du].end(), tb.page_ids.begin(), tb.page_ids.end());
          pages += static_cast<int64_t>(tb.page_ids.size());
          length += tb.seq_length;
          last = &tb;
        }
      page_indptr[du].push_back(page_indptr[du].back() + pages);
      last_page_len[du].push_back(length == 0 ? 0 : (length - last->sink_length + last->window_offset - 1) % P + 1);
      seq_offset[du].push_back(last->window_offset);
      seq_sinks[du].push_back(last->sink_length);
      k_rope[du].push_back(bl.start_pos);
      if (!sliding) continue;
      // Below the maximum depth the block alone; at it, the block with its trailing blocks.
      const bool whole = d == kMaxDepth - 1;
      const int64_t seq_len = whole ? length : bl.seq_length;
      const int64_t in_window =
          std::min(whole ? pages : static_cast<int64_t>(bl.page_ids.size()), window_pages_of(seq_len));
      page_indptr_sw[du].push_back(page_indptr_sw[du].back() + in_window);
      page_indices_sw[du].insert(page_indices_sw[du].end(), page_indices[du].end() - in_window, page_indices[du].end());
      window_offset[du].push_back(window_offset_of(seq_len));
      k_rope_sw[du].push_back(std::max<int64_t>(0, bl.start_pos + seq_len - W));
    }
  }
  depth_has_pages_.assign(static_cast<size_t>(num_depths_), false);
  for (int d = 0; d < num_depths_; ++d) depth_has_pages_[static_cast<size_t>(d)] = !page_indices[static_cast<size_t>(d)].empty();
  if (!append_before_attn_)
    for (size_t i = 0; i < B; ++i)
      if (Status s = reserve(seq(i), lengths[i]); !s) return s;
  // Step 10: per token, the query's rotary position and where its K and V are appended: a
  // sink's own place, -1 where a sink pins it, else its place in the window.
  std::vector<int64_t> q_rope, append_pos;
  for (size_t i = 0; i < B; ++i) {
    const Block& b = block(seq(i).last_block);
    for (int64_t pos = 0; pos < lengths[i]; ++pos) {
      q_rope.push_back(k_ragged[i] + pos);
      const int64_t in_block = b.seq_length - lengths[i] + pos;
      int64_t at = -1;
      if (last_before[i] + pos < b.sink_length)
        at = last_before[i] + pos;
      else if (in_block >= b.sink_length)
        at = in_block - b.sink_length + b.window_offset;
      append_pos.push_back(at < 0 ? -1 : b.page_ids[static_cast<size_t>(at / P)] * P + at % P);
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
  auto per_depth = [&](const std::string& name, std::vector<std::vector<int64_t>>& v) {
    for (int d = 0; d < num_depths_; ++d) put(fmt::format("{}[{}]", name, d), std::move(v[static_cast<size_t>(d)]));
  };
  put("q_rope_position_map", q_rope);
  per_depth("qo_indptr", qo_indptr);
  per_depth("page_indptr", page_indptr);
  per_depth("page_indices", page_indices);
  if (sliding) {
    per_depth("page_indptr_sliding_window", page_indptr_sw);
    per_depth("page_indices_sliding_window", page_indices_sw);
  }
  // Per depth, the length info (last_page_len alone without sequences' own windows), then a
  // sliding layer's [3, n] with the layer window's offset.
  for (int d = 0; d < num_depths_; ++d) {
    const size_t du = static_cast<size_t>(d);
    // CopyLengthInfoOnDepthAsync: last_page_len, a window offset and the sinks, as [3, n].
    auto put_info = [&](const std::string& name, const std::vector<int64_t>& offset) {
      std::vector<int64_t> v = last_page_len[du];
      v.insert(v.end(), offset.begin(), offset.end());
      v.insert(v.end(), seq_sinks[du].begin(), seq_sinks[du].end());
      put(fmt::format("{}[{}]", name, d), std::move(v));
      aux_.back().rows = 3;
    };
    if (windows)  // every layer
      put_info("length_info", seq_offset[du]);
    else
      put(fmt::format("last_page_len[{}]", d), last_page_len[du]);
    if (sliding) put_info("layer_sliding_window_length_info", window_offset[du]);
  }
  for (int d = 0; d < num_depths_; ++d) {
    put(fmt::format("k_rope_pos_offset[{}]", d), std::move(k_rope[static_cast<size_t>(d)]));
    if (sliding) put(fmt::format("k_rope_pos_offset_sliding_window[{}]", d), std::move(k_rope_sw[static_cast<size_t>(d)]));
  }
  put("cur_append_length_indptr", cur_indptr);
  put("k_ragged_rope_pos_offset", k_ragged);
  put("append_position_map", append_pos);
  put("kv_transfer_remote_position_map", std::vector<int64_t>(static_cast<size_t>(total), -1));
  put("kv_transfer_recver_id", std::vector<int64_t>(static_cast<size_t>(total), -1));
  aux_length_ = off;
  total_tokens_ = total;
  batch_ = static_cast<int64_t>(B);
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
  x.shape = a.rows > 1 ? std::vector<int64_t>{a.rows, static_cast<int64_t>(a.values.size()) / a.rows}
                       : std::vector<int64_t>{static_cast<int64_t>(a.values.size())};
  x.aux_offset = a.offset;
  x.aux_name = name;
  return x;
}

std::vector<KvCall> PagedKvCacheModel::pending_aux_copy() {
  std::vector<KvCall> calls;
  if (!dirty_) return calls;
  KvCall copy;
  copy.role = "aux copy";
  KvArg dst;
  dst.kind = KvArg::Kind::Buffer;
  dst.buffer = KvBuffer::Aux;
  dst.shape = {aux_length_};
  dst.writes = true;
  copy.args.push_back(std::move(dst));
  calls.push_back(std::move(copy));
  dirty_ = false;
  return calls;
}

Expected<std::vector<KvCall>> PagedKvCacheModel::query_positions() {
  if (!in_forward_) return Error{"query positions asked outside a forward (no kv_state_begin_forward)", ExitCode::DataError};
  return pending_aux_copy();
}

Expected<std::vector<KvCall>> PagedKvCacheModel::attention_with_fused_qkv(int64_t layer, int64_t qkv_rows,
                                                                          double sm_scale) {
  const KvCacheConfig& c = cfg_;
  if (!in_forward_) return Error{"attention without kv_state_begin_forward", ExitCode::DataError};
  if (c.mla())
    return Error{fmt::format("attention_with_fused_qkv on layer {} of an MLA cache (TVM's runtime takes MLA layers' "
                             "attention by self_attention and cross_attention)",
                             layer),
                 ExitCode::DataError};
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
    return buffer_arg(b, local, std::move(shape), writes);
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
  // The first attention after begin_forward sends the arrays (ComputeStreamWaitForCopyStream).
  std::vector<KvCall> calls = pending_aux_copy();
  const std::vector<int64_t> q_shape{T, Hq, D}, kv_shape{T, Hkv, D};
  // The rotary kernel's last argument: whether RoPE applies here, or LongRoPE's factors.
  KvArg rotary_last = int_arg(c.effective_rope_mode() == 1 ? 1 : 0);
  if (!c.rope_ext_factors.empty()) {
    rotary_last.kind = KvArg::Kind::RopeFactors;
    rotary_last.shape = c.rope_ext_factors;
  }
  calls.push_back(KvCall{c.split_rotary, "split rotary",
                         {qkv, aux_arg("q_rope_position_map"), buf(KvBuffer::TempQ, q_shape, true),
                          buf(KvBuffer::TempK, kv_shape, true), buf(KvBuffer::TempV, kv_shape, true),
                          rotary_last}});
  auto append = [&] {
    return KvCall{c.transpose_append, "transpose append",
                  {pages_written(), buf(KvBuffer::TempK, kv_shape, false), buf(KvBuffer::TempV, kv_shape, false),
                   aux_arg("append_position_map")}};
  };
  if (append_before_attn_) calls.push_back(append());
  const KvArg q = buf(KvBuffer::TempQ, q_shape, false);
  // Rotary embedding was applied by the split kernel unless the mode is inline.
  const int64_t rotary_mode = c.effective_rope_mode() == 2 ? 1 : 0;
  bool first = true;
  if (!append_before_attn_) {
    calls.push_back(KvCall{c.prefill_ragged, "prefill ragged",
                           {q, aux_arg("cur_append_length_indptr"), buf(KvBuffer::TempK, kv_shape, false),
                            buf(KvBuffer::TempV, kv_shape, false), aux_arg("cur_append_length_indptr"),
                            aux_arg("q_rope_position_map"), aux_arg("k_ragged_rope_pos_offset"), out(false),
                            buf(KvBuffer::MergedLse, {T, Hq}, true), int_arg(1), int_arg(rotary_mode),
                            float_arg(c.rope_scale), float_arg(c.rope_theta), float_arg(sm_scale)}});
    first = false;
  }
  // MHACrossAttnInternal: each depth with pages, the decode or the paged prefill kernel; after
  // the first kernel each result is merged into the output.
  // A sliding-window layer reads the window's tables with its own kernels, RoPE's theta 10,000
  // and scale 1 (constants of the runtime, PKV ~2190, unchanged in 0.27).
  const bool window = c.sliding(layer);
  // With sequences' own windows every layer takes the sliding kernels on the plain tables.
  const bool seq_windows = c.sequence_windows();
  const double theta = window ? 10000.0 : c.rope_theta, scale = window ? 1.0 : c.rope_scale;
  for (int d = 0; d < num_depths_; ++d) {
    if (!depth_has_pages_[static_cast<size_t>(d)]) continue;
    auto a = [&](const char* name) { return aux_arg(fmt::format("{}[{}]", name, d)); };
    const KvArg indptr = a(window ? "page_indptr_sliding_window" : "page_indptr");
    const KvArg indices = a(window ? "page_indices_sliding_window" : "page_indices");
    const KvArg length_info =
        a(window ? "layer_sliding_window_length_info" : seq_windows ? "length_info" : "last_page_len");
    const KvArg k_rope = a(window ? "k_rope_pos_offset_sliding_window" : "k_rope_pos_offset");
    KvArg o = first ? out(false) : buf(KvBuffer::TempO, {T, Hq, D}, true);
    KvArg lse = buf(first ? KvBuffer::MergedLse : KvBuffer::TempLse, {T, Hq}, true);
    if (use_decode_[static_cast<size_t>(d)]) {
      calls.push_back(KvCall{window || seq_windows ? c.decode_sliding : c.decode,
                             window || seq_windows ? "decode sliding window" : "decode",
                             {q, pages, indptr, indices, length_info, k_rope, aux_arg("q_rope_position_map"), o, lse,
                              int_arg(rotary_mode), float_arg(scale), float_arg(theta), float_arg(sm_scale)}});
    } else {
      // Causal over the window's pages for a sliding layer's prefill (TVM 0.27's runtime; the
      // tokens appended after attention are not in the pages yet).
      calls.push_back(KvCall{window || seq_windows ? c.prefill_sliding : c.prefill_paged,
                             window || seq_windows ? "prefill paged sliding window" : "prefill paged",
                             {q, a("qo_indptr"), pages, indptr, indices, length_info, k_rope,
                              aux_arg("q_rope_position_map"), o, lse, int_arg(window && !append_before_attn_ ? 1 : 0),
                              int_arg(rotary_mode), float_arg(scale), float_arg(theta), float_arg(sm_scale)}});
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

Expected<int64_t> PagedKvCacheModel::local_layer(int64_t layer) const {
  if (!in_forward_) return Error{"attention without kv_state_begin_forward", ExitCode::DataError};
  const int64_t local = layer - cfg_.layer_begin;
  if (local < 0 || local >= cfg_.num_layers)
    return Error{fmt::format("attention of layer {}, outside the cache's layers [{}, {})", layer, cfg_.layer_begin,
                             cfg_.layer_begin + cfg_.num_layers),
                 ExitCode::DataError};
  return local;
}

// MLA (PKV 0.27: SelfAttention, CrossAttention, AppendMLAKV, MergeAttnOutputInplace). The
// runtime's shape checks are the model's: a tensor of another row count than the forward's
// tokens fails there too.
namespace {
Error mla_only(const char* what) {
  return Error{fmt::format("{} on a cache without MLA layers: kdflow models TVM's MHA layers through "
                           "attention_with_fused_qkv",
                           what),
               ExitCode::Unavailable};
}
}  // namespace

Expected<std::vector<KvCall>> PagedKvCacheModel::self_attention(int64_t layer, int64_t rows, double sm_scale) {
  if (!cfg_.mla()) return mla_only("self_attention");
  Expected<int64_t> local = local_layer(layer);
  if (!local) return local.error();
  const int64_t T = total_tokens_;
  if (rows != T) return Error{fmt::format("q holds {} tokens, the forward appends {}", rows, T), ExitCode::DataError};
  // The VM's q, k, v, o and lse keep their own shapes (MLA's original head dimensions, not the
  // cache's); the callee's host function checks them against its kernel.
  std::vector<KvCall> calls = pending_aux_copy();
  calls.push_back(KvCall{cfg_.prefill_ragged, "prefill ragged",
                         {vm_arg(0, {}, false), aux_arg("cur_append_length_indptr"), vm_arg(1, {}, false),
                          vm_arg(2, {}, false), aux_arg("cur_append_length_indptr"), aux_arg("q_rope_position_map"),
                          aux_arg("k_ragged_rope_pos_offset"), vm_arg(3, {}, true), vm_arg(4, {}, true), int_arg(1),
                          int_arg(0), float_arg(cfg_.rope_scale), float_arg(cfg_.rope_theta), float_arg(sm_scale)}});
  return calls;
}

Expected<std::vector<KvCall>> PagedKvCacheModel::cross_attention(int64_t layer, int64_t rows, double sm_scale) {
  if (!cfg_.mla()) return mla_only("cross_attention");
  Expected<int64_t> local = local_layer(layer);
  if (!local) return local.error();
  const int64_t T = total_tokens_, Hq = cfg_.num_qo_heads;
  if (rows != T) return Error{fmt::format("q holds {} tokens, the forward appends {}", rows, T), ExitCode::DataError};
  auto buffer = [&](KvBuffer b, std::vector<int64_t> shape, bool writes) {
    return buffer_arg(b, *local, std::move(shape), writes);
  };
  std::vector<KvCall> calls = pending_aux_copy();
  bool first = true;
  for (int d = 0; d < num_depths_; ++d) {
    if (!depth_has_pages_[static_cast<size_t>(d)]) continue;
    auto a = [&](const char* name) { return aux_arg(fmt::format("{}[{}]", name, d)); };
    KvArg o = first ? vm_arg(1, {}, true) : buffer(KvBuffer::TempO, {T, Hq, cfg_.v_head_dim}, true);
    KvArg lse = first ? vm_arg(2, {}, true) : buffer(KvBuffer::TempLse, {T, Hq}, true);
    calls.push_back(KvCall{cfg_.mla_prefill, "mla prefill",
                           {vm_arg(0, {}, false), a("qo_indptr"), buffer(KvBuffer::Pages, buffer_shape(KvBuffer::Pages), false),
                            a("page_indptr"), a("page_indices"), a("last_page_len"), o, lse, int_arg(0),
                            float_arg(sm_scale)}});
    if (!first)
      calls.push_back(KvCall{cfg_.merge, "merge",
                             {vm_arg(1, {}, true, true), vm_arg(2, {}, true, true),
                              buffer(KvBuffer::TempO, {T, Hq, cfg_.v_head_dim}, false),
                              buffer(KvBuffer::TempLse, {T, Hq}, false)}});
    first = false;
  }
  if (first)
    return Error{fmt::format("cross_attention of layer {} with no cached tokens: TVM's runtime calls no kernel and "
                             "leaves its output unwritten",
                             layer),
                 ExitCode::DataError};
  return calls;
}

Expected<std::vector<KvCall>> PagedKvCacheModel::append_mla_kv(int64_t layer, int64_t rows) {
  if (!cfg_.mla()) return mla_only("append_mla_kv");
  Expected<int64_t> local = local_layer(layer);
  if (!local) return local.error();
  if (rows > total_tokens_)
    return Error{fmt::format("kv holds {} tokens, the forward appends {}", rows, total_tokens_), ExitCode::DataError};
  std::vector<KvCall> calls = pending_aux_copy();
  calls.push_back(KvCall{cfg_.transpose_append_mla, "transpose append mla",
                         {buffer_arg(KvBuffer::Pages, *local, buffer_shape(KvBuffer::Pages), true, true),
                          vm_arg(0, {}, false), aux_arg("append_position_map")}});
  return calls;
}

Expected<std::vector<KvCall>> PagedKvCacheModel::merge_attn_output(int64_t rows) {
  if (!cfg_.mla() || cfg_.merge_general.empty()) return mla_only("merge_attn_output_inplace");
  if (!in_forward_) return Error{"merge_attn_output_inplace outside a forward", ExitCode::DataError};
  if (rows != total_tokens_)
    return Error{fmt::format("the outputs hold {} tokens, the forward appends {}", rows, total_tokens_),
                 ExitCode::DataError};
  // No wait for the auxiliary copy: the merge reads none of it.
  return std::vector<KvCall>{KvCall{cfg_.merge_general, "merge general",
                                    {vm_arg(0, {}, true, true), vm_arg(1, {}, true, true), vm_arg(2, {}, false),
                                     vm_arg(3, {}, false)}}};
}

}  // namespace kdflow
