// The model of TVM v0.26.0's paged KV cache runtime (lib/frontend/relax/paged_kv_cache.h) on
// the cases TVM's real runtime was traced on (docs/notes/tvm-0.26-paged-kv-cache.md: the
// merged aux buffer's offsets for a fresh prefill of 20 tokens and a decode after it), a
// second prefill on cached pages (paged prefill and merge), a full cache and refusals. The
// end-to-end check against TVM's running runtime is test/tvm (check_kv_runtime).
#include <catch2/catch.hpp>

#include "frontend/relax/paged_kv_cache.h"

using namespace kdflow;

namespace {

KvCacheConfig tutorial(int64_t capacity = 128, int64_t chunk = 64) {
  KvCacheConfig c;
  c.max_batch_size = 1, c.max_total_seq_len = capacity, c.prefill_chunk_size = chunk, c.page_size = 16;
  c.num_layers = 2, c.num_qo_heads = 32, c.num_kv_heads = 4, c.qk_head_dim = c.v_head_dim = 64;
  c.rope_mode = 1;
  c.dtype = DType{kDLFloat, 16, 1};
  c.transpose_append = "tir_kv_cache_transpose_append", c.prefill_ragged = "batch_prefill_ragged_kv";
  c.prefill_paged = "batch_prefill_paged_kv", c.decode = "batch_decode_paged_kv";
  c.merge = "tir_attention_merge_state", c.split_rotary = "fused_rope";
  return c;
}

std::vector<std::string> roles(const std::vector<KvCall>& calls) {
  std::vector<std::string> r;
  for (const KvCall& c : calls) r.push_back(c.role);
  return r;
}

int64_t offset_of(const PagedKvCacheModel& m, const std::string& name) {
  for (const KvAuxArray& a : m.aux_arrays())
    if (a.name == name) return a.offset;
  return -1;
}

}  // namespace

TEST_CASE("paged KV cache: a fresh prefill of 20 tokens, then a decode, as TVM's runtime traced", "[kv_cache]") {
  Expected<PagedKvCacheModel> m = PagedKvCacheModel::create(tutorial());
  REQUIRE(m);
  CHECK(m->config().num_pages() == 9);
  CHECK(m->buffer_shape(KvBuffer::Pages) == std::vector<int64_t>{9, 2, 4, 16, 64});
  REQUIRE(m->add_sequence(0));
  REQUIRE(m->begin_forward({0}, {20}));
  // The trace's offsets: q_rope@0, qo_indptr@20, page_indptr@24, page_indices@28 (empty),
  // last_page_len@28, k_rope@32, cur_indptr@36, k_ragged@40, append_pos@44, remote@64,
  // recver@84; 104 elements (416 bytes).
  CHECK(offset_of(*m, "qo_indptr[0]") == 20);
  CHECK(offset_of(*m, "page_indptr[0]") == 24);
  CHECK(offset_of(*m, "page_indices[0]") == 28);
  CHECK(offset_of(*m, "last_page_len[0]") == 28);
  CHECK(offset_of(*m, "k_rope_pos_offset[0]") == 32);
  CHECK(offset_of(*m, "cur_append_length_indptr") == 36);
  CHECK(offset_of(*m, "k_ragged_rope_pos_offset") == 40);
  CHECK(offset_of(*m, "append_position_map") == 44);
  CHECK(offset_of(*m, "kv_transfer_recver_id") == 84);
  CHECK(m->aux_length() == 104);
  Expected<std::vector<KvCall>> l0 = m->attention_with_fused_qkv(0, 20, 0.125);
  REQUIRE(l0);
  CHECK(roles(*l0) == std::vector<std::string>{"aux copy", "split rotary", "prefill ragged", "transpose append"});
  // Later layers find the arrays on the device.
  Expected<std::vector<KvCall>> l1 = m->attention_with_fused_qkv(1, 20, 0.125);
  REQUIRE(l1);
  CHECK(roles(*l1) == std::vector<std::string>{"split rotary", "prefill ragged", "transpose append"});
  const KvCall& ragged = (*l1)[1];
  REQUIRE(ragged.args.size() == 14);
  CHECK(ragged.args[1].aux_offset == 36);  // qo_indptr is cur_append_length_indptr
  CHECK(ragged.args[4].aux_offset == 36);
  CHECK(ragged.args[13].f == 0.125);
  const KvCall& append = (*l1)[2];
  CHECK(append.args[0].layer == 1);
  CHECK(append.args[0].keeps);  // pages written in part: the rest stays
  REQUIRE(m->end_forward());

  REQUIRE(m->begin_forward({0}, {1}));
  // page_indptr=[0,2], page_indices=[0,1], last_page_len=[5] (21 tokens), q_rope=[20].
  CHECK(m->aux_length() == 44);
  CHECK(offset_of(*m, "qo_indptr[0]") == 4);
  CHECK(offset_of(*m, "page_indices[0]") == 12);
  CHECK(offset_of(*m, "append_position_map") == 32);
  for (const KvAuxArray& a : m->aux_arrays()) {
    if (a.name == "page_indices[0]") CHECK(a.values == std::vector<int64_t>{0, 1});
    if (a.name == "last_page_len[0]") CHECK(a.values == std::vector<int64_t>{5});
    if (a.name == "q_rope_position_map") CHECK(a.values == std::vector<int64_t>{20});
    if (a.name == "append_position_map") CHECK(a.values == std::vector<int64_t>{20});
  }
  Expected<std::vector<KvCall>> d = m->attention_with_fused_qkv(0, 1, 0.125);
  REQUIRE(d);
  CHECK(roles(*d) == std::vector<std::string>{"aux copy", "split rotary", "transpose append", "decode"});
  CHECK((*d)[3].args.size() == 13);
}

TEST_CASE("paged KV cache: a second prefill on cached pages runs the paged prefill and merges", "[kv_cache]") {
  Expected<PagedKvCacheModel> m = PagedKvCacheModel::create(tutorial());
  REQUIRE(m);
  REQUIRE(m->add_sequence(5));
  REQUIRE(m->begin_forward({5}, {20}));
  REQUIRE(m->end_forward());
  REQUIRE(m->begin_forward({5}, {8}));
  Expected<std::vector<KvCall>> c = m->attention_with_fused_qkv(0, 8, 0.125);
  REQUIRE(c);
  CHECK(roles(*c) == std::vector<std::string>{"aux copy", "split rotary", "prefill ragged", "prefill paged", "merge",
                                              "transpose append"});
  // The paged prefill writes the temporary output; the merge updates the output in place.
  CHECK((*c)[3].args[8].buffer == KvBuffer::TempO);
  CHECK((*c)[4].args[0].kind == KvArg::Kind::Output);
  CHECK((*c)[4].args[0].keeps);
  for (const KvAuxArray& a : m->aux_arrays()) {
    if (a.name == "page_indices[0]") CHECK(a.values == std::vector<int64_t>{0, 1});  // the table before the append
    if (a.name == "q_rope_position_map") CHECK(a.values == std::vector<int64_t>{20, 21, 22, 23, 24, 25, 26, 27});
    if (a.name == "append_position_map") CHECK(a.values.front() == 20);
  }
}

/// The values of one packed array of the last begin_forward.
std::vector<int64_t> values_of(const PagedKvCacheModel& m, const std::string& name) {
  for (const KvAuxArray& a : m.aux_arrays())
    if (a.name == name) return a.values;
  return {};
}

// TVM v0.26.0's runtime traced in session 9 (docs/notes/tvm-0.26-paged-kv-cache.md §2 and §4.1:
// the script ran the real PagedAttentionKVCacheObj on the CPU with logging kernels; its output
// gave the values below): forks at a sequence's end inside a page and at position 5, the two
// depths of page tables a forward then sees, and the copies. test/tvm compares whole sessions
// with forks and popn against TVM's running runtime.
TEST_CASE("paged KV cache: forks copy a page and give forwards two depths, as TVM's runtime traced", "[kv_cache]") {
  KvCacheConfig cfg = tutorial(256, 64);
  cfg.max_batch_size = 4;
  cfg.copy_single_page = "copy_single_page";
  Expected<PagedKvCacheModel> m = PagedKvCacheModel::create(cfg);
  REQUIRE(m);
  CHECK(m->config().num_pages() == 17);
  auto forward = [&](std::vector<int64_t> seqs, std::vector<int64_t> lengths) {
    REQUIRE(m->begin_forward(seqs, lengths));
    int64_t t = 0;
    for (int64_t n : lengths) t += n;
    for (int64_t layer = 0; layer < 2; ++layer) REQUIRE(m->attention_with_fused_qkv(layer, t, 0.125));
    REQUIRE(m->end_forward());
  };
  REQUIRE(m->add_sequence(0));
  forward({0}, {20});
  forward({0}, {1});
  REQUIRE(m->add_sequence(1));
  forward({0, 1}, {5, 7});
  forward({0, 1}, {1, 1});
  // Sequence 0 holds 27 tokens (pages 0, 1): forked at its end, inside page 1.
  Expected<std::vector<KvCall>> f = m->fork_sequence(0, 2, -1);
  REQUIRE(f);
  REQUIRE(f->size() == 2);  // one per layer
  for (const KvCall& c : *f) {
    CHECK(c.role == "copy single page");
    CHECK(c.function == "copy_single_page");
    REQUIRE(c.args.size() == 4);
    CHECK(c.args[0].buffer == KvBuffer::Pages);
    CHECK(c.args[0].writes);
    CHECK(c.args[1].i == 1);
    CHECK(c.args[2].i == 3);
    CHECK(c.args[3].i == 11);
  }
  CHECK((*f)[1].layer == 1);
  REQUIRE(m->begin_forward({0, 1, 2}, {1, 1, 1}));
  CHECK(values_of(*m, "q_rope_position_map") == std::vector<int64_t>{27, 8, 27});
  CHECK(values_of(*m, "append_position_map") == std::vector<int64_t>{27, 40, 59});
  CHECK(values_of(*m, "page_indptr[0]") == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(values_of(*m, "page_indices[0]") == std::vector<int64_t>{0, 2, 0});
  CHECK(values_of(*m, "last_page_len[0]") == std::vector<int64_t>{16, 9, 16});
  CHECK(values_of(*m, "k_rope_pos_offset[0]") == std::vector<int64_t>{0, 0, 0});
  CHECK(values_of(*m, "page_indptr[1]") == std::vector<int64_t>{0, 1, 1, 2});
  CHECK(values_of(*m, "page_indices[1]") == std::vector<int64_t>{1, 3});
  CHECK(values_of(*m, "last_page_len[1]") == std::vector<int64_t>{12, 0, 12});
  CHECK(values_of(*m, "k_rope_pos_offset[1]") == std::vector<int64_t>{16, 0, 16});
  CHECK(offset_of(*m, "page_indptr[0]") == 12);
  CHECK(offset_of(*m, "page_indptr[1]") == 16);
  CHECK(offset_of(*m, "append_position_map") == 52);
  Expected<std::vector<KvCall>> c = m->attention_with_fused_qkv(0, 3, 0.125);
  REQUIRE(c);
  CHECK(roles(*c) == std::vector<std::string>{"aux copy", "split rotary", "transpose append", "decode", "decode",
                                              "merge"});
  CHECK((*c)[3].args[2].aux_name == "page_indptr[0]");
  CHECK((*c)[4].args[2].aux_name == "page_indptr[1]");
  CHECK((*c)[4].args[7].buffer == KvBuffer::TempO);
  REQUIRE(m->attention_with_fused_qkv(1, 3, 0.125));
  REQUIRE(m->end_forward());
  // Sequence 1 (9 tokens, page 2) forked at position 5: page 2's first 5 tokens into page 4.
  f = m->fork_sequence(1, 3, 5);
  REQUIRE(f);
  REQUIRE(f->size() == 2);
  CHECK((*f)[0].args[1].i == 2);
  CHECK((*f)[0].args[2].i == 4);
  CHECK((*f)[0].args[3].i == 5);
  REQUIRE(m->begin_forward({3}, {3}));
  CHECK(values_of(*m, "q_rope_position_map") == std::vector<int64_t>{5, 6, 7});
  CHECK(values_of(*m, "page_indptr[0]") == std::vector<int64_t>{0, 1});
  CHECK(values_of(*m, "page_indices[0]") == std::vector<int64_t>{4});
  CHECK(values_of(*m, "last_page_len[0]") == std::vector<int64_t>{5});
  CHECK(values_of(*m, "k_ragged_rope_pos_offset") == std::vector<int64_t>{5});
  CHECK(values_of(*m, "append_position_map") == std::vector<int64_t>{69, 70, 71});
  c = m->attention_with_fused_qkv(0, 3, 0.125);
  REQUIRE(c);
  CHECK(roles(*c) == std::vector<std::string>{"aux copy", "split rotary", "prefill ragged", "prefill paged", "merge",
                                              "transpose append"});
  // A fork inside a page needs copy_single_page; a build without it is refused by name.
  KvCacheConfig bare = tutorial();
  Expected<PagedKvCacheModel> n = PagedKvCacheModel::create(bare);
  REQUIRE(n);
  REQUIRE(n->add_sequence(0));
  REQUIRE(n->begin_forward({0}, {5}));
  REQUIRE(n->end_forward());
  Expected<std::vector<KvCall>> g = n->fork_sequence(0, 1, -1);
  REQUIRE_FALSE(g);
  CHECK(g.error().code == ExitCode::Unavailable);
  CHECK(g.error().message.find("copy_single_page") != std::string::npos);
}

TEST_CASE("paged KV cache: errors and configurations the model does not cover", "[kv_cache]") {
  Expected<PagedKvCacheModel> small = PagedKvCacheModel::create(tutorial(16, 16));
  REQUIRE(small);
  REQUIRE(small->add_sequence(0));
  CHECK_FALSE(small->add_sequence(0));                         // twice
  CHECK_FALSE(small->begin_forward({1}, {4}));                 // never added
  CHECK_FALSE(small->begin_forward({0}, {17}));                // more than prefill_chunk_size
  CHECK_FALSE(small->attention_with_fused_qkv(0, 4, 0.125));   // no forward
  REQUIRE(small->begin_forward({0}, {16}));
  CHECK_FALSE(small->attention_with_fused_qkv(7, 16, 0.125));  // not a layer of the cache
  CHECK_FALSE(small->attention_with_fused_qkv(0, 15, 0.125));  // qkv shorter than the forward
  REQUIRE(small->end_forward());
  // 2 pages of 16 hold 32 tokens: the next 16 fit, then the cache is full.
  REQUIRE(small->begin_forward({0}, {16}));
  REQUIRE(small->end_forward());
  Status full = small->begin_forward({0}, {1});
  REQUIRE_FALSE(full);
  CHECK(full.error().message.find("the KV cache is full") != std::string::npos);

  KvCacheConfig narrow_v = tutorial();
  narrow_v.v_head_dim = 32;
  Expected<PagedKvCacheModel> r = PagedKvCacheModel::create(narrow_v);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::Unavailable);
  CHECK(r.error().message.find("v_head_dim != qk_head_dim in MHA layers") != std::string::npos);
  KvCacheConfig none = tutorial();
  none.decode.clear();
  CHECK_FALSE(PagedKvCacheModel::create(none));
}

TEST_CASE("paged KV cache: query positions (MLC-LLM's gpt2) are q_rope_position_map and send the arrays once",
          "[kv_cache]") {
  Expected<PagedKvCacheModel> m = PagedKvCacheModel::create(tutorial());
  REQUIRE(m);
  CHECK(!m->query_positions());  // outside a forward: refused
  REQUIRE(m->add_sequence(0));
  REQUIRE(m->begin_forward({0}, {6}));
  // Before any attention: GetQueryPositions waits for the copy, so it makes it.
  Expected<std::vector<KvCall>> q = m->query_positions();
  REQUIRE(q);
  CHECK(roles(*q) == std::vector<std::string>{"aux copy"});
  REQUIRE(q->front().args.size() == 1);
  CHECK(q->front().args[0].shape == std::vector<int64_t>{m->aux_length()});
  CHECK(offset_of(*m, "q_rope_position_map") == 0);
  CHECK(m->aux_arrays().front().values == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(m->tokens() == 6);
  // Asked again, and by the attention after it: the arrays are on the device already.
  q = m->query_positions();
  REQUIRE(q);
  CHECK(q->empty());
  Expected<std::vector<KvCall>> l0 = m->attention_with_fused_qkv(0, 6, 0.25);
  REQUIRE(l0);
  CHECK(roles(*l0) == std::vector<std::string>{"split rotary", "prefill ragged", "transpose append"});
  REQUIRE(m->end_forward());
  // The decode after it: position 6; an attention first sends the arrays, the query after it does not.
  REQUIRE(m->begin_forward({0}, {1}));
  CHECK(m->aux_arrays().front().values == std::vector<int64_t>{6});
  l0 = m->attention_with_fused_qkv(0, 1, 0.25);
  REQUIRE(l0);
  CHECK(roles(*l0).front() == "aux copy");
  q = m->query_positions();
  REQUIRE(q);
  CHECK(q->empty());
}

TEST_CASE("paged KV cache: LongRoPE's factors (Phi-3.5) go to the rotary kernel in place of its mode", "[kv_cache]") {
  KvCacheConfig c = tutorial();
  c.rope_ext_factors = {32};
  Expected<PagedKvCacheModel> m = PagedKvCacheModel::create(c);
  REQUIRE(m);
  REQUIRE(m->add_sequence(0));
  REQUIRE(m->begin_forward({0}, {4}));
  Expected<std::vector<KvCall>> l0 = m->attention_with_fused_qkv(0, 4, 0.125);
  REQUIRE(l0);
  const KvCall& rotary = (*l0)[1];
  REQUIRE(rotary.role == "split rotary");
  REQUIRE(rotary.args.size() == 6);
  CHECK(rotary.args[5].kind == KvArg::Kind::RopeFactors);
  CHECK(rotary.args[5].shape == std::vector<int64_t>{32});
  // Without factors the last argument is the mode: 1, RoPE applied by this kernel.
  Expected<PagedKvCacheModel> plain = PagedKvCacheModel::create(tutorial());
  REQUIRE(plain);
  REQUIRE(plain->add_sequence(0));
  REQUIRE(plain->begin_forward({0}, {4}));
  l0 = plain->attention_with_fused_qkv(0, 4, 0.125);
  REQUIRE(l0);
  CHECK((*l0)[1].args[5].kind == KvArg::Kind::Int);
  CHECK((*l0)[1].args[5].i == 1);
  // TVM's runtime accepts factors only with the normal RoPE mode.
  c.rope_mode = 2;
  CHECK(!PagedKvCacheModel::create(c));
}

namespace {

const KvAuxArray* aux_named(const PagedKvCacheModel& m, const std::string& name) {
  for (const KvAuxArray& a : m.aux_arrays())
    if (a.name == name) return &a;
  return nullptr;
}

/// gemma3's cache: layer 0 slides (AttnKind 3), layer 1 attends to everything.
KvCacheConfig gemma3(int64_t capacity = 2048, int64_t chunk = 1104, int64_t batch = 1) {
  KvCacheConfig c = tutorial(capacity, chunk);
  c.max_batch_size = batch;
  c.attn_kinds = {3, 0};
  c.rope_theta = 1e6, c.rope_scale = 1;
  c.prefill_sliding = "batch_prefill_paged_kv_sliding_window";
  c.decode_sliding = "batch_decode_paged_kv_sliding_window";
  return c;
}

}  // namespace

TEST_CASE("paged KV cache: sliding-window layers (gemma3) read a window of 1,024 tokens, as TVM's runtime "
          "computes it",
          "[kv_cache]") {
  Expected<PagedKvCacheModel> m = PagedKvCacheModel::create(gemma3());
  REQUIRE(m);
  REQUIRE(m->add_sequence(0));
  REQUIRE(m->begin_forward({0}, {1100}));  // pages 0..68 (69 of 16 tokens)
  REQUIRE(m->end_forward());
  // The decode appends first (its page table counts 1,101 tokens): the window is the last
  // min(69, 1024/16 + 1) = 65 pages (4..68), starting 1101 % 16 = 13 tokens into page 4,
  // so the window's first token is 4*16 + 13 = 77 = 1101 - 1024, its RoPE offset.
  REQUIRE(m->begin_forward({0}, {1}));
  const KvAuxArray* indptr = aux_named(*m, "page_indptr_sliding_window[0]");
  const KvAuxArray* indices = aux_named(*m, "page_indices_sliding_window[0]");
  const KvAuxArray* info = aux_named(*m, "layer_sliding_window_length_info[0]");
  const KvAuxArray* rope = aux_named(*m, "k_rope_pos_offset_sliding_window[0]");
  REQUIRE((indptr && indices && info && rope));
  CHECK(indptr->values == std::vector<int64_t>{0, 65});
  REQUIRE(indices->values.size() == 65);
  CHECK(indices->values.front() == 4);
  CHECK(indices->values.back() == 68);
  CHECK(info->rows == 3);
  CHECK(info->values == std::vector<int64_t>{13, 13, 0});  // last_page_len, window offset, sinks
  CHECK(rope->values == std::vector<int64_t>{77});
  CHECK(aux_named(*m, "page_indices[0]")->values.size() == 69);
  // SyncAuxArrayToDevice's order: the window's tables after the page indices, the [3, 1]
  // length info after last_page_len, its RoPE offsets after k_rope_pos_offset.
  CHECK(offset_of(*m, "page_indices[0]") == 12);
  CHECK(offset_of(*m, "page_indptr_sliding_window[0]") == 84);
  CHECK(offset_of(*m, "page_indices_sliding_window[0]") == 88);
  CHECK(offset_of(*m, "last_page_len[0]") == 156);
  CHECK(offset_of(*m, "layer_sliding_window_length_info[0]") == 160);
  CHECK(offset_of(*m, "k_rope_pos_offset[0]") == 164);
  CHECK(offset_of(*m, "k_rope_pos_offset_sliding_window[0]") == 168);
  CHECK(offset_of(*m, "cur_append_length_indptr") == 172);

  // Layer 0 slides: its own decode kernel on the window's tables, RoPE theta 10,000 and scale 1
  // (the runtime's constants); layer 1 the plain decode kernel on the whole page table.
  Expected<std::vector<KvCall>> l0 = m->attention_with_fused_qkv(0, 1, 0.25);
  REQUIRE(l0);
  CHECK(roles(*l0) == std::vector<std::string>{"aux copy", "split rotary", "transpose append",
                                               "decode sliding window"});
  const KvCall& dec = l0->back();
  CHECK(dec.function == "batch_decode_paged_kv_sliding_window");
  REQUIRE(dec.args.size() == 13);
  CHECK(dec.args[2].aux_name == "page_indptr_sliding_window[0]");
  CHECK(dec.args[3].aux_name == "page_indices_sliding_window[0]");
  CHECK(dec.args[4].aux_name == "layer_sliding_window_length_info[0]");
  CHECK(dec.args[4].shape == std::vector<int64_t>{3, 1});
  CHECK(dec.args[5].aux_name == "k_rope_pos_offset_sliding_window[0]");
  CHECK(dec.args[10].f == 1.0);
  CHECK(dec.args[11].f == 10000.0);
  Expected<std::vector<KvCall>> l1 = m->attention_with_fused_qkv(1, 1, 0.25);
  REQUIRE(l1);
  const KvCall& full = l1->back();
  CHECK(full.function == "batch_decode_paged_kv");
  CHECK(full.args[2].aux_name == "page_indptr[0]");
  CHECK(full.args[4].aux_name == "last_page_len[0]");
  CHECK(full.args[4].shape == std::vector<int64_t>{1});
  CHECK(full.args[11].f == 1e6);
  REQUIRE(m->end_forward());
}

TEST_CASE("paged KV cache: under the window, a sliding layer's tables are the whole page table", "[kv_cache]") {
  Expected<PagedKvCacheModel> m = PagedKvCacheModel::create(gemma3());
  REQUIRE(m);
  REQUIRE(m->add_sequence(0));
  REQUIRE(m->begin_forward({0}, {20}));
  REQUIRE(m->end_forward());
  REQUIRE(m->begin_forward({0}, {1}));
  CHECK(aux_named(*m, "page_indptr_sliding_window[0]")->values == std::vector<int64_t>{0, 2});
  CHECK(aux_named(*m, "page_indices_sliding_window[0]")->values == std::vector<int64_t>{0, 1});
  CHECK(aux_named(*m, "layer_sliding_window_length_info[0]")->values == std::vector<int64_t>{5, 0, 0});
  CHECK(aux_named(*m, "k_rope_pos_offset_sliding_window[0]")->values == std::vector<int64_t>{0});
}

TEST_CASE("paged KV cache: sliding-window layers with several sequences, a configured window, a second prefill",
          "[kv_cache]") {
  // Two sequences in one decode: each one's window pages are its own last pages (TVM 0.27's
  // runtime; v0.26.0's took them by the running total and failed its own check).
  Expected<PagedKvCacheModel> m = PagedKvCacheModel::create(gemma3(2048, 1104, 2));
  REQUIRE(m);
  REQUIRE(m->add_sequence(0));
  REQUIRE(m->add_sequence(1));
  REQUIRE(m->begin_forward({0, 1}, {20, 40}));  // pages 0, 1 and 2, 3, 4
  REQUIRE(m->end_forward());
  REQUIRE(m->begin_forward({0, 1}, {1, 1}));
  CHECK(aux_named(*m, "page_indptr_sliding_window[0]")->values == std::vector<int64_t>{0, 2, 5});
  CHECK(aux_named(*m, "page_indices_sliding_window[0]")->values == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(aux_named(*m, "layer_sliding_window_length_info[0]")->values == std::vector<int64_t>{5, 9, 0, 0, 0, 0});
  REQUIRE(m->end_forward());

  // A window of 32 tokens (the configuration's sixth value): after 101 tokens it starts at
  // token 69, 5 tokens into page 4, and takes pages 4, 5 and 6.
  KvCacheConfig c = gemma3();
  c.layer_window = 32;
  Expected<PagedKvCacheModel> w = PagedKvCacheModel::create(c);
  REQUIRE(w);
  REQUIRE(w->add_sequence(0));
  REQUIRE(w->begin_forward({0}, {100}));
  REQUIRE(w->end_forward());
  REQUIRE(w->begin_forward({0}, {1}));
  CHECK(aux_named(*w, "page_indptr_sliding_window[0]")->values == std::vector<int64_t>{0, 3});
  CHECK(aux_named(*w, "page_indices_sliding_window[0]")->values == std::vector<int64_t>{4, 5, 6});
  CHECK(aux_named(*w, "layer_sliding_window_length_info[0]")->values == std::vector<int64_t>{5, 5, 0});
  CHECK(aux_named(*w, "k_rope_pos_offset_sliding_window[0]")->values == std::vector<int64_t>{69});
  REQUIRE(w->end_forward());
  // A second prefill on cached pages: the sliding layer's paged prefill is causal, the other's not.
  REQUIRE(w->begin_forward({0}, {8}));
  Expected<std::vector<KvCall>> l0 = w->attention_with_fused_qkv(0, 8, 0.25);
  Expected<std::vector<KvCall>> l1 = w->attention_with_fused_qkv(1, 8, 0.25);
  REQUIRE((l0 && l1));
  auto paged = [](const std::vector<KvCall>& calls) {
    for (const KvCall& k : calls)
      if (k.role.rfind("prefill paged", 0) == 0) return k;
    return KvCall{};
  };
  CHECK(paged(*l0).role == "prefill paged sliding window");
  CHECK(paged(*l0).args[10].i == 1);
  CHECK(paged(*l1).role == "prefill paged");
  CHECK(paged(*l1).args[10].i == 0);

  // MLA and linear attention stay refused; a sliding layer needs its kernels.
  KvCacheConfig mla = gemma3();
  mla.attn_kinds = {1, 0};
  CHECK(PagedKvCacheModel::create(mla).error().message.find("MLA") != std::string::npos);
  KvCacheConfig no_kernel = gemma3();
  no_kernel.decode_sliding.clear();
  CHECK_FALSE(PagedKvCacheModel::create(no_kernel));
}

TEST_CASE("paged KV cache: a sequence's own sliding window (mistral under MLC's engine) slides, keeps its sinks and "
          "frees pages",
          "[kv_cache]") {
  // Window 40 tokens with 4 sinks, pages of 16; the cache created with support_sliding_window:
  // two more pages per sequence, RoPE inline, tokens appended after attention, every layer on
  // the sliding kernels with a [3, n] length info.
  KvCacheConfig c = tutorial(128, 64);
  c.support_sliding_window = true;
  c.prefill_sliding = "batch_prefill_paged_kv_sliding_window";
  c.decode_sliding = "batch_decode_paged_kv_sliding_window";
  Expected<PagedKvCacheModel> m = PagedKvCacheModel::create(c);
  REQUIRE(m);
  CHECK(m->config().num_pages() == 11);  // 128/16 + 1 + 2
  REQUIRE(m->add_sequence(0));
  REQUIRE(m->enable_sliding_window(0, 40, 4));
  CHECK_FALSE(m->enable_sliding_window(0, 40, 4));  // twice
  REQUIRE(m->begin_forward({0}, {30}));             // pages 0, 1: no slide yet
  Expected<std::vector<KvCall>> l0 = m->attention_with_fused_qkv(0, 30, 0.125);
  REQUIRE(l0);
  CHECK(roles(*l0) == std::vector<std::string>{"aux copy", "split rotary", "prefill ragged", "transpose append"});
  CHECK((*l0)[1].args[5].i == 0);    // the split kernel applies no RoPE
  CHECK((*l0)[2].args[10].i == 1);   // the attention applies it inline
  REQUIRE(m->end_forward());
  // 30 + 20 = 50 tokens > 40: the 10 oldest after the 4 sinks go. The table (before the append)
  // is the 30 tokens' 2 pages; the reserve takes pages 2 and 3 for 50, then the slide keeps 40:
  // the 4 sinks, and the window from offset 4 + 10 = 14 (no page wholly left behind yet).
  REQUIRE(m->begin_forward({0}, {20}));
  const KvAuxArray* info = aux_named(*m, "length_info[0]");
  REQUIRE(info);
  CHECK(info->rows == 3);
  CHECK(info->values == std::vector<int64_t>{14, 0, 0});  // 30 tokens: 14 in the last page, no window yet
  CHECK(aux_named(*m, "last_page_len[0]") == nullptr);
  const KvAuxArray* append = aux_named(*m, "append_position_map");
  REQUIRE(append);
  REQUIRE(append->values.size() == 20);
  // The appended tokens are the block's 20..39, at offsets 20 - 4 + 14 = 30..49 of its pages.
  CHECK(append->values.front() == 30);
  CHECK(append->values.back() == 49);
  Expected<std::vector<KvCall>> l1 = m->attention_with_fused_qkv(1, 20, 0.125);
  REQUIRE(l1);
  CHECK(roles(*l1) == std::vector<std::string>{"aux copy", "split rotary", "prefill ragged",
                                               "prefill paged sliding window", "merge", "transpose append"});
  const KvCall& paged = (*l1)[3];
  CHECK(paged.function == "batch_prefill_paged_kv_sliding_window");
  CHECK(paged.args[5].aux_name == "length_info[0]");
  CHECK(paged.args[5].shape == std::vector<int64_t>{3, 1});
  CHECK(paged.args[10].i == 0);  // causal only for sliding-window layers
  REQUIRE(m->end_forward());
  // The next decode sees the slid block: 40 tokens, window offset 14, 4 sinks; its last page
  // holds (40 - 4 + 14 - 1) % 16 + 1 = 2 tokens.
  REQUIRE(m->begin_forward({0}, {1}));
  CHECK(aux_named(*m, "length_info[0]")->values == std::vector<int64_t>{2, 14, 4});
  CHECK(aux_named(*m, "page_indices[0]")->values == std::vector<int64_t>{0, 1, 2, 3});
  REQUIRE(m->end_forward());  // 41 tokens: slides by 1, the window from offset 15
  // 20 more: a fifth page (4) for 60, then the slide by 20 leaves page 1 wholly behind: it is
  // freed, the window starts 3 tokens into page 2 (offset 16 + 3 = 19). The tokens land at
  // offsets 20 - 4 + 19 = 35..54 of pages [0, 2, 3, 4]: page 3 slot 3 to page 4 slot 6.
  REQUIRE(m->begin_forward({0}, {20}));
  CHECK(aux_named(*m, "append_position_map")->values.front() == 3 * 16 + 3);
  CHECK(aux_named(*m, "append_position_map")->values.back() == 4 * 16 + 6);
  REQUIRE(m->end_forward());
  REQUIRE(m->begin_forward({0}, {1}));
  CHECK(aux_named(*m, "page_indices[0]")->values == std::vector<int64_t>{0, 2, 3, 4});
  CHECK(aux_named(*m, "length_info[0]")->values == std::vector<int64_t>{7, 19, 4});
  REQUIRE(m->end_forward());
  // Forks and popn of a sliding sequence are not modelled.
  CHECK(m->fork_sequence(0, 1, -1).error().code == ExitCode::Unavailable);
  CHECK(m->popn(0, 1).error().code == ExitCode::Unavailable);
  // Without support_sliding_window the runtime refuses a window.
  Expected<PagedKvCacheModel> plain = PagedKvCacheModel::create(tutorial());
  REQUIRE(plain);
  REQUIRE(plain->add_sequence(0));
  CHECK_FALSE(plain->enable_sliding_window(0, 40, 4));
}

TEST_CASE("paged KV cache: a prefill longer than its window keeps the sinks and drops what the window passed", "[kv_cache]") {
  KvCacheConfig c = tutorial(128, 64);
  c.support_sliding_window = true;
  c.prefill_sliding = "batch_prefill_paged_kv_sliding_window";
  c.decode_sliding = "batch_decode_paged_kv_sliding_window";
  Expected<PagedKvCacheModel> m = PagedKvCacheModel::create(c);
  REQUIRE(m);
  REQUIRE(m->add_sequence(0));
  REQUIRE(m->enable_sliding_window(0, 40, 4));
  // 50 tokens into a fresh sequence: the first 4 are sinks (their own places), the next 10 are
  // passed by the window before they are written (-1: the runtime writes nothing), the last 36
  // go to offsets 14..49.
  REQUIRE(m->begin_forward({0}, {50}));
  std::vector<int64_t> want{0, 1, 2, 3};
  want.insert(want.end(), 10, -1);
  for (int64_t at = 14; at < 50; ++at) want.push_back(at);
  CHECK(aux_named(*m, "append_position_map")->values == want);
  REQUIRE(m->end_forward());
}

namespace {

/// MLC-LLM's DeepSeek-V2 as test/tvm's mlc_deepseek_v2 builds it: 4 heads, latent rank 64 and a
/// rotary key of 8 in one row of 72 per token.
KvCacheConfig deepseek(int64_t capacity = 128, int64_t chunk = 64) {
  KvCacheConfig c;
  c.max_batch_size = 4, c.max_total_seq_len = capacity, c.prefill_chunk_size = chunk, c.page_size = 16;
  c.num_layers = 2, c.num_qo_heads = 4, c.num_kv_heads = 1, c.qk_head_dim = 72, c.v_head_dim = 64;
  c.attn_kinds = {1, 1};
  c.dtype = DType{kDLFloat, 32, 1};
  c.transpose_append = "kv_cache_transpose_append", c.transpose_append_mla = "kv_cache_transpose_append_mla";
  c.prefill_ragged = "batch_prefill_ragged_kv", c.mla_prefill = "batch_mla_paged_attention";
  c.merge = "tir_attention_merge_state", c.merge_general = "tir_attention_merge_state_mla";
  c.split_rotary = "fused_rope", c.copy_single_page = "kv_cache_copy_single_page";
  return c;
}

}  // namespace

TEST_CASE("paged KV cache: MLA (DeepSeek-V2) appends latent rows, self-attends a prefill and cross-attends the "
          "pages, merging depths",
          "[kv_cache]") {
  Expected<PagedKvCacheModel> m = PagedKvCacheModel::create(deepseek());
  REQUIRE(m);
  // GetKVCacheShape: one latent row per token, no K/V split, no heads.
  CHECK(m->buffer_shape(KvBuffer::Pages) == std::vector<int64_t>{9, 16, 72});
  CHECK(m->buffer_shape(KvBuffer::TempO) == std::vector<int64_t>{64, 4, 64});
  REQUIRE(m->add_sequence(0));
  REQUIRE(m->begin_forward({0}, {20}));
  // A prefill: the latent rows go to pages 0 and 1 (handed out from the stack's top).
  Expected<std::vector<KvCall>> app = m->append_mla_kv(0, 20);
  REQUIRE(app);
  REQUIRE(app->size() == 2);  // the aux copy first: AppendMLAKV waits for it
  CHECK(roles(*app) == std::vector<std::string>{"aux copy", "transpose append mla"});
  CHECK((*app)[1].function == "kv_cache_transpose_append_mla");
  CHECK((*app)[1].args[0].buffer == KvBuffer::Pages);
  CHECK((*app)[1].args[0].keeps);
  CHECK((*app)[1].args[1].kind == KvArg::Kind::Vm);
  CHECK((*app)[1].args[2].aux_name == "append_position_map");
  std::vector<int64_t> positions;
  for (const KvAuxArray& a : m->aux_arrays())
    if (a.name == "append_position_map") positions = a.values;
  REQUIRE(positions.size() == 20);
  CHECK(positions[0] == 0);
  CHECK(positions[15] == 15);
  CHECK(positions[16] == 16);  // page 1 starts at 16 × 1
  // Self-attention: the ragged kernel, causal, no RoPE, q/k/v/o/lse the VM's.
  Expected<std::vector<KvCall>> self = m->self_attention(0, 20, 0.2);
  REQUIRE(self);
  REQUIRE(self->size() == 1);  // the copy was made by the append
  const KvCall& rag = (*self)[0];
  CHECK(rag.function == "batch_prefill_ragged_kv");
  REQUIRE(rag.args.size() == 14);
  CHECK(rag.args[3].kind == KvArg::Kind::Vm);
  CHECK(rag.args[3].slot == 2);
  CHECK(rag.args[7].slot == 3);
  CHECK(rag.args[7].writes);
  CHECK(rag.args[9].i == 1);   // causal
  CHECK(rag.args[10].i == 0);  // RoPE none
  CHECK(rag.args[13].f == 0.2);
  // A prefill's page table does not hold its own tokens yet: no pages to cross-attend.
  Expected<std::vector<KvCall>> none = m->cross_attention(0, 20, 0.2);
  REQUIRE_FALSE(none);
  CHECK(none.error().message.find("no cached tokens") != std::string::npos);
  CHECK_FALSE(m->self_attention(0, 19, 0.2));  // q of another length than the forward's
  CHECK_FALSE(m->attention_with_fused_qkv(0, 20, 0.2));
  REQUIRE(m->end_forward());

  // A decode: the token is appended before attention, the page table holds it.
  REQUIRE(m->begin_forward({0}, {1}));
  Expected<std::vector<KvCall>> a2 = m->append_mla_kv(1, 1);
  REQUIRE(a2);
  CHECK((*a2)[1].args[0].layer == 1);
  Expected<std::vector<KvCall>> cross = m->cross_attention(1, 1, 0.2);
  REQUIRE(cross);
  REQUIRE(cross->size() == 1);
  const KvCall& mla = (*cross)[0];
  CHECK(mla.function == "batch_mla_paged_attention");
  REQUIRE(mla.args.size() == 10);
  CHECK(mla.args[1].aux_name == "qo_indptr[0]");
  CHECK(mla.args[2].shape == std::vector<int64_t>{9, 16, 72});
  CHECK(mla.args[5].aux_name == "last_page_len[0]");
  CHECK(mla.args[6].slot == 1);
  CHECK(mla.args[8].i == 0);  // not causal
  for (const KvAuxArray& a : m->aux_arrays()) {
    if (a.name == "page_indices[0]") CHECK(a.values == std::vector<int64_t>{0, 1});
    if (a.name == "last_page_len[0]") CHECK(a.values == std::vector<int64_t>{5});
  }
  REQUIRE(m->end_forward());

  // A fork inside page 1 copies its first 5 rows; the child's decode attends over two depths,
  // the second merged into the first by the depths' merge.
  Expected<std::vector<KvCall>> fork = m->fork_sequence(0, 2, 21);
  REQUIRE(fork);
  REQUIRE(fork->size() == 2);
  CHECK((*fork)[0].function == "kv_cache_copy_single_page");
  REQUIRE(m->begin_forward({2}, {1}));
  REQUIRE(m->append_mla_kv(0, 1));
  Expected<std::vector<KvCall>> deep = m->cross_attention(0, 1, 0.2);
  REQUIRE(deep);
  CHECK(roles(*deep) == std::vector<std::string>{"mla prefill", "mla prefill", "merge"});
  CHECK((*deep)[1].args[6].buffer == KvBuffer::TempO);
  CHECK((*deep)[2].function == "tir_attention_merge_state");
  CHECK((*deep)[2].args[0].keeps);
  // MLC's extend: self-attention and cross-attention merged by the general merge, in place.
  Expected<std::vector<KvCall>> merge = m->merge_attn_output(1);
  REQUIRE(merge);
  CHECK((*merge)[0].function == "tir_attention_merge_state_mla");
  CHECK((*merge)[0].args[0].keeps);
  CHECK_FALSE((*merge)[0].args[2].writes);
  REQUIRE(m->end_forward());
}

TEST_CASE("paged KV cache: MLA configurations TVM's runtime refuses, and MLA calls on an MHA cache", "[kv_cache]") {
  KvCacheConfig sliding = deepseek();
  sliding.support_sliding_window = true;
  Expected<PagedKvCacheModel> s = PagedKvCacheModel::create(sliding);
  REQUIRE_FALSE(s);
  CHECK(s.error().code == ExitCode::DataError);
  KvCacheConfig mixed = deepseek();
  mixed.attn_kinds = {1, 0};
  Expected<PagedKvCacheModel> x = PagedKvCacheModel::create(mixed);
  REQUIRE_FALSE(x);
  CHECK(x.error().message.find("MLA and other layers") != std::string::npos);
  KvCacheConfig no_kernel = deepseek();
  no_kernel.mla_prefill.clear();
  CHECK_FALSE(PagedKvCacheModel::create(no_kernel));
  Expected<PagedKvCacheModel> mha = PagedKvCacheModel::create(tutorial());
  REQUIRE(mha);
  REQUIRE(mha->add_sequence(0));
  REQUIRE(mha->begin_forward({0}, {4}));
  Expected<std::vector<KvCall>> r = mha->append_mla_kv(0, 4);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::Unavailable);
}
