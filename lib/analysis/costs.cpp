// costs.cpp — see costs.h; the formulas are documented in docs/costs.md (keep the two in step).
#include "kdflow/analysis/costs.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kdflow/analysis/bounds.h"
#include "kdflow/support/dtype.h"
#include "kdflow/formats/profile_csv.h"
#include "formats/json_read.h"
#include "kdflow/formats/relay.h"

namespace kdflow {
namespace {

// Public peak figures. Dense (no 2:4 sparsity) tensor figures are half the datasheets'
// "with sparsity" numbers. Sources, also in docs/costs.md:
//  H100 SXM5: NVIDIA H100 Tensor Core GPU datasheet (FP32 67 TFLOPS; FP16/BF16 tensor
//    1,979 TFLOPS with sparsity; HBM3 3.35 TB/s).
//  H200 SXM: NVIDIA H200 Tensor Core GPU datasheet (FP32 67; FP16/BF16 tensor 1,979 with
//    sparsity; HBM3e 4.8 TB/s).
//  A100 80GB SXM: NVIDIA A100 Tensor Core GPU datasheet (FP32 19.5; FP16/BF16 tensor 312
//    dense; HBM2e 2,039 GB/s).
//  L4: NVIDIA L4 Tensor Core GPU datasheet (FP32 30.3; FP16/BF16 tensor 242 with sparsity;
//    GDDR6 300 GB/s).
//  RTX 4090: NVIDIA Ada Lovelace GPU architecture whitepaper, appendix A (FP32 82.6; FP16
//    tensor with FP32 accumulate 165.2 dense; GDDR6X 1,008 GB/s).
const std::vector<DeviceSpec> kDevices = {
    {"h100", "NVIDIA H100 SXM5 80GB", 67.0, 989.5, 3350, "NVIDIA H100 Tensor Core GPU datasheet"},
    {"h200", "NVIDIA H200 SXM 141GB", 67.0, 989.5, 4800, "NVIDIA H200 Tensor Core GPU datasheet"},
    {"a100", "NVIDIA A100 SXM4 80GB", 19.5, 312.0, 2039, "NVIDIA A100 Tensor Core GPU datasheet"},
    {"l4", "NVIDIA L4", 30.3, 121.0, 300, "NVIDIA L4 Tensor Core GPU datasheet"},
    {"rtx4090", "NVIDIA GeForce RTX 4090", 82.6, 165.2, 1008,
     "NVIDIA Ada Lovelace GPU architecture whitepaper, appendix A"},
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// Saturating arithmetic: FLOP counts of real models stay far below 2^64, hostile
/// shapes must not wrap.
uint64_t mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}
uint64_t add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

uint64_t elements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n = mul(n, d < 0 ? 0 : static_cast<uint64_t>(d));
  return n;
}

/// A tensor type's elements and bytes; nullopt for a tuple or a non-static shape.
struct Tensor {
  std::vector<int64_t> shape;
  uint64_t elems = 0;
  uint64_t bytes = 0;
  std::string dtype;
};
std::optional<Tensor> tensor(const std::string& printed) {
  std::optional<Tensor> out;
  if (auto t = parse_relay_tensor_type(printed)) {
    auto dt = parse_dtype(t->dtype);
    if (!dt) return out;
    out = Tensor{t->shape, elements(t->shape), 0, t->dtype};
    out->bytes = mul(out->elems, dtype_element_bytes(*dt));
  } else if (auto dt = parse_dtype(printed)) {
    // A scalar constant ("float32").
    out = Tensor{{}, 1, dtype_element_bytes(*dt), printed};
  }
  return out;
}

/// A tuple type "(Tensor[...], Tensor[...])": its fields' bytes summed; nullopt otherwise.
std::optional<uint64_t> tuple_bytes(const std::string& printed) {
  if (printed.size() < 2 || printed.front() != '(' || printed.back() != ')') return std::nullopt;
  uint64_t sum = 0;
  size_t pos = 1;
  while (pos < printed.size() - 1) {
    size_t start = printed.find("Tensor[", pos);
    if (start == std::string::npos) break;
    size_t end = printed.find(']', start);
    if (end == std::string::npos) return std::nullopt;
    auto t = tensor(printed.substr(start, end - start + 1));
    if (!t) return std::nullopt;
    sum = add(sum, t->bytes);
    pos = end + 1;
  }
  return sum;
}

const RelayAttr* attr(const RelayOp& op, const char* key) {
  for (const RelayAttr& a : op.attrs)
    if (a.key == key) return &a;
  return nullptr;
}
bool flag(const RelayOp& op, const char* key, bool dflt) {
  const RelayAttr* a = attr(op, key);
  if (!a || a->kind != RelayAttr::Kind::Bool || a->ints.empty()) return dflt;
  return a->ints[0] != 0;
}
std::string text_attr(const RelayOp& op, const char* key, const std::string& dflt) {
  const RelayAttr* a = attr(op, key);
  if (!a || a->kind != RelayAttr::Kind::String || a->text.empty()) return dflt;
  return a->text;
}

bool low_precision(const std::string& dtype) {
  return dtype == "float16" || dtype == "bfloat16";
}

// Per-element FLOPs of the elementwise operators (documented in docs/costs.md): one per
// arithmetic operation Nsight Compute counts (fadd, fmul, ffma = 2); comparisons, max/min,
// selects and conversions count zero.
const std::map<std::string, uint64_t>& elementwise_flops() {
  static const std::map<std::string, uint64_t> m = {
      {"add", 1}, {"subtract", 1}, {"multiply", 1}, {"divide", 1}, {"floor_divide", 1}, {"negative", 1},
      {"nn.bias_add", 1}, {"power", 1}, {"exp", 1}, {"log", 1}, {"sqrt", 1}, {"rsqrt", 1}, {"erf", 1},
      {"tanh", 1}, {"sigmoid", 1}, {"fast_exp", 1}, {"fast_tanh", 1}, {"fast_erf", 1},
      {"nn.relu", 0}, {"maximum", 0}, {"minimum", 0}, {"clip", 0}, {"abs", 0}, {"cast", 0},
      {"nn.leaky_relu", 1}, {"nn.prelu", 1}, {"where", 0}, {"round", 0}, {"floor", 0}, {"ceil", 0},
      {"greater", 0}, {"less", 0}, {"equal", 0}, {"not_equal", 0}, {"greater_equal", 0}, {"less_equal", 0},
  };
  return m;
}

/// Operators that move data and compute nothing.
const std::set<std::string>& data_movement() {
  static const std::set<std::string> s = {
      "reshape", "transpose", "squeeze", "expand_dims", "concatenate", "split", "nn.batch_flatten",
      "layout_transform", "copy", "strided_slice", "nn.pad", "stack", "take", "device_copy",
      "reverse", "tile", "repeat", "broadcast_to", "zeros_like", "ones_like", "full", "zeros", "ones",
      "nn.dropout", "annotation.stop_fusion", "reshape_like", "collapse_sum_like",
  };
  return s;
}

/// A kernel's counted FLOPs from its KernelOps.
CountedFlops counted_of(const KernelOps& k) {
  CountedFlops c;
  c.status = to_string(k.status);
  c.reasons = k.reasons;
  if (k.status != KernelOps::Status::Unknown) c.flops = k.flops;
  c.reduction_flops = k.reduction_flops;
  static constexpr uint64_t kWeight[KernelOps::kKinds] = {1, 1, 2, 1, 1, 0};
  for (size_t kind = 0; kind < KernelOps::kKinds; ++kind)
    for (size_t p : {size_t{KernelOps::F16}, size_t{KernelOps::BF16}})
      c.low_precision_flops = add(c.low_precision_flops, mul(k.counts[kind][p], kWeight[kind]));
  return c;
}

/// Σ of several kernels' counted FLOPs: the worst status, every reason.
void accumulate(CountedFlops& sum, const CountedFlops& k) {
  static const std::vector<std::string> order = {"exact", "upper bound", "unknown"};
  auto rank = [&](const std::string& s) { return std::find(order.begin(), order.end(), s) - order.begin(); };
  if (sum.status.empty()) {
    sum = k;
    return;
  }
  if (rank(k.status) > rank(sum.status)) sum.status = k.status;
  sum.flops = sum.flops && k.flops ? std::optional<uint64_t>(add(*sum.flops, *k.flops)) : std::nullopt;
  sum.low_precision_flops = add(sum.low_precision_flops, k.low_precision_flops);
  sum.reduction_flops = add(sum.reduction_flops, k.reduction_flops);
  for (const std::string& r : k.reasons)
    if (std::find(sum.reasons.begin(), sum.reasons.end(), r) == sum.reasons.end()) sum.reasons.push_back(r);
  std::sort(sum.reasons.begin(), sum.reasons.end());
}

}  // namespace

const std::vector<DeviceSpec>& device_specs() { return kDevices; }

const DeviceSpec* find_device_spec(const std::string& id) {
  std::string want = lower(id);
  for (const DeviceSpec& d : kDevices)
    if (d.id == want) return &d;
  return nullptr;
}

OpWork op_work(const RelayOp& op) {
  OpWork w;
  w.op = op.name;
  std::optional<Tensor> out = tensor(op.type);
  std::vector<std::optional<Tensor>> in;
  for (const std::string& t : op.input_types) in.push_back(tensor(t));

  // Bytes: every input read once, the output written once.
  bool bytes_known = !op.type.empty() && (out || tuple_bytes(op.type));
  uint64_t bytes = out ? out->bytes : tuple_bytes(op.type).value_or(0);
  for (const auto& t : in) {
    if (t) bytes = add(bytes, t->bytes);
    else bytes_known = false;
  }
  if (op.input_types.empty()) bytes_known = false;
  if (bytes_known) w.bytes = bytes;

  auto none = [&](const std::string& why) {
    w.reason = why;
    return w;
  };
  if (op.type.empty()) return none("no types (relay.txt not read)");
  const std::string& n = op.name;

  if (data_movement().count(n)) {
    w.formula = "data movement";
    w.flops = 0;
    return w;
  }
  if (!out) return none("result is not a tensor of static shape");
  if (auto it = elementwise_flops().find(n); it != elementwise_flops().end()) {
    w.formula = "elementwise";
    w.flops = mul(out->elems, it->second);
    return w;
  }
  auto input = [&](size_t i) -> const Tensor* { return i < in.size() && in[i] ? &*in[i] : nullptr; };

  if (n == "nn.conv2d" || n == "nn.conv1d" || n == "nn.conv3d") {
    // 2 · (output elements) · (weight elements / output channels): each output element is
    // a dot product over (in channels / groups) · kernel window; strides, padding and
    // dilation are already in the output shape, groups in the weight shape.
    const Tensor* wt = input(1);
    if (!wt) return none("weight type unknown");
    std::string layout = text_attr(op, "kernel_layout", n == "nn.conv1d" ? "OIW" : n == "nn.conv3d" ? "OIDHW" : "OIHW");
    size_t o = layout.find('O');
    if (o == std::string::npos || o >= wt->shape.size() || layout.size() != wt->shape.size() ||
        std::count(layout.begin(), layout.end(), 'O') != 1)
      return none("kernel layout " + layout + " not modelled");
    uint64_t per_output = wt->shape[o] > 0 ? wt->elems / static_cast<uint64_t>(wt->shape[o]) : 0;
    w.formula = "convolution";
    w.flops = mul(2, mul(out->elems, per_output));
    w.tensor_core = low_precision(wt->dtype);
    return w;
  }
  if (n == "nn.contrib_conv2d_winograd_without_weight_transform" ||
      n == "nn.contrib_conv2d_winograd_nnpack_without_weight_transform") {
    // The convolution it computes, counted as the direct one: 2 · (output elements) · (input
    // channels) · kernel window. Its weight is already transformed (not OIHW), so the input
    // channels come from the data's layout and the window from kernel_size. The kernels'
    // own count then shows what the transform saves (code/formula below 1).
    const Tensor* x = input(0);
    const RelayAttr* ks = attr(op, "kernel_size");
    if (!x || x->shape.size() != 4) return none("data type unknown");
    if (!ks || ks->kind != RelayAttr::Kind::Ints || ks->ints.size() != 2) return none("kernel_size unknown");
    std::string layout = text_attr(op, "data_layout", "NCHW");
    size_t c = layout.find('C');
    if (layout.size() != 4 || c == std::string::npos || x->shape[c] < 0) return none("data layout " + layout + " not modelled");
    w.formula = "convolution (winograd counted as direct)";
    w.flops = mul(2, mul(out->elems, mul(static_cast<uint64_t>(x->shape[c]), elements(ks->ints))));
    w.tensor_core = low_precision(x->dtype);
    return w;
  }
  if (n == "nn.dense" || n == "nn.matmul" || n == "nn.batch_matmul") {
    // 2 · (output elements) · K, K the reduction length of the first operand.
    const Tensor* a = input(0);
    if (!a || a->shape.empty()) return none("first operand type unknown");
    bool ta = n != "nn.dense" && flag(op, "transpose_a", false);
    if (ta && a->shape.size() < 2) return none("transposed operand of rank < 2");
    int64_t k = ta ? a->shape[a->shape.size() - 2] : a->shape.back();
    w.formula = "matrix product";
    w.flops = mul(2, mul(out->elems, k < 0 ? 0 : static_cast<uint64_t>(k)));
    w.tensor_core = low_precision(a->dtype);
    return w;
  }
  if (n == "nn.softmax" || n == "nn.log_softmax" || n == "nn.fast_softmax") {
    // max (0), subtract, exp, sum, divide (softmax) or log + subtract (log_softmax): 4 per element.
    w.formula = "softmax";
    w.flops = mul(out->elems, 4);
    return w;
  }
  if (n == "sum" || n == "mean" || n == "variance" || n == "std" || n == "prod" || n == "cumsum" ||
      n == "cumprod" || n == "max" || n == "min" || n == "argmax" || n == "argmin" || n == "all" || n == "any") {
    const Tensor* x = input(0);
    if (!x) return none("input type unknown");
    w.formula = "reduction";
    if (n == "sum" || n == "prod" || n == "cumsum" || n == "cumprod") w.flops = x->elems;
    else if (n == "mean") w.flops = add(x->elems, out->elems);                  // adds, then one divide per output
    else if (n == "variance" || n == "std") w.flops = add(mul(x->elems, 3), out->elems);  // (x-m)², sum; divide
    else w.flops = 0;                                                             // comparisons
    return w;
  }
  if (n == "nn.max_pool2d" || n == "nn.max_pool1d" || n == "nn.max_pool3d" || n == "nn.global_max_pool2d" ||
      n == "nn.adaptive_max_pool2d") {
    w.formula = "pooling";
    w.flops = 0;  // comparisons only
    return w;
  }
  if (n == "nn.avg_pool2d" || n == "nn.avg_pool1d" || n == "nn.avg_pool3d") {
    const RelayAttr* ps = attr(op, "pool_size");
    if (!ps || ps->kind != RelayAttr::Kind::Ints || ps->ints.empty()) return none("pool_size unknown");
    uint64_t window = elements(ps->ints);
    w.formula = "pooling";
    w.flops = mul(out->elems, window);  // window - 1 adds and one divide per output
    return w;
  }
  if (n == "nn.global_avg_pool2d" || n == "nn.adaptive_avg_pool2d") {
    const Tensor* x = input(0);
    if (!x) return none("input type unknown");
    w.formula = "pooling";
    w.flops = add(x->elems, out->elems);
    return w;
  }
  if (n == "nn.layer_norm" || n == "nn.group_norm" || n == "nn.instance_norm") {
    // mean (1), variance (3), normalize (2: subtract, multiply by the rsqrt), scale and shift (2).
    w.formula = "normalization";
    w.flops = mul(out->elems, 8);
    return w;
  }
  if (n == "nn.batch_norm") {
    // Inference: (x - mean) · rsqrt(var + eps) · gamma + beta: 4 per element.
    const Tensor* x = input(0);
    if (!x) return none("input type unknown");
    w.formula = "normalization";
    w.flops = mul(x->elems, 4);
    return w;
  }
  return none("no formula for " + n);
}

Expected<KernelTimes> read_replay_timing(const std::string& text, const std::string& file, const Dataflow& df) {
  Expected<nlohmann::json> parsed = detail::parse_json_text(text, file);
  if (!parsed) return parsed.error();
  const nlohmann::json& root = *parsed;
  auto fail = [&](const std::string& ptr, const std::string& msg) { return json_error(file, ptr, msg); };
  if (!root.is_object()) return fail("", "expected an object");
  auto schema = root.find("schema");
  if (schema == root.end() || !schema->is_string() || *schema != "kdflow-replay-timing/1")
    return fail("/schema", "expected \"kdflow-replay-timing/1\" (a file written by kdflow replay --timing-json)");
  auto ks = root.find("kernels");
  if (ks == root.end() || !ks->is_array()) return fail("/kernels", "expected an array");
  KernelTimes t;
  t.us.assign(df.kernels.size(), std::nullopt);
  t.source = "replay timing (" + file + ")";
  for (size_t i = 0; i < ks->size(); ++i) {
    const nlohmann::json& k = (*ks)[i];
    const std::string p = "/kernels/" + std::to_string(i);
    if (!k.is_object()) return fail(p, "expected an object");
    auto id = k.find("kernel");
    auto name = k.find("name");
    auto med = k.find("median_us");
    if (id == k.end() || !id->is_number_integer()) return fail(p + "/kernel", "expected a kernel id");
    if (name == k.end() || !name->is_string()) return fail(p + "/name", "expected the kernel's name");
    if (med == k.end() || !med->is_number() || !(med->get<double>() >= 0) || !std::isfinite(med->get<double>()))
      return fail(p + "/median_us", "expected a time in microseconds");
    int64_t kid = id->get<int64_t>();
    if (kid < 0 || static_cast<uint64_t>(kid) >= df.kernels.size())
      return fail(p + "/kernel", fmt::format("kernel {} is not in the flow ({} kernels): a timing file of another model?",
                                             kid, df.kernels.size()));
    if (df.kernels[static_cast<size_t>(kid)].name != name->get<std::string>())
      return fail(p + "/name", fmt::format("kernel {} is {} in the flow, not {}: a timing file of another model?", kid,
                                           df.kernels[static_cast<size_t>(kid)].name, name->get<std::string>()));
    t.us[static_cast<size_t>(kid)] = med->get<double>();
  }
  return t;
}

KernelTimes profile_times(const Dataflow& df, const Profile& profile, const ProfileJoin& join) {
  KernelTimes t;
  t.us.assign(df.kernels.size(), std::nullopt);
  t.source = std::string(to_string(profile.tool)) + " (" + profile.file + ")";
  std::vector<std::vector<double>> samples(df.kernels.size());
  for (const ProfileMatch& m : join.matches) {
    if (m.kernel < 0 || static_cast<size_t>(m.kernel) >= df.kernels.size()) continue;
    if (m.launch < 0 || static_cast<size_t>(m.launch) >= profile.launches.size()) continue;
    const auto& d = profile.launches[static_cast<size_t>(m.launch)].duration_ns;
    if (d && std::isfinite(*d) && *d >= 0) samples[static_cast<size_t>(m.kernel)].push_back(*d / 1e3);
  }
  for (size_t k = 0; k < samples.size(); ++k) {
    auto& v = samples[k];
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    t.us[k] = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  }
  return t;
}

std::optional<double> counted_ratio(const FunctionCost& f) {
  if (!f.flops || *f.flops == 0 || !f.counted || !f.counted->flops) return std::nullopt;
  uint64_t own = *f.counted->flops - std::min(*f.counted->flops, f.counted->reduction_flops);
  return static_cast<double>(own) / static_cast<double>(*f.flops);
}

std::optional<double> intensity(std::optional<uint64_t> flops, uint64_t bytes) {
  if (!flops || bytes == 0) return std::nullopt;
  return static_cast<double>(*flops) / static_cast<double>(bytes);
}

/// The attention a KV cache runtime call computes (Node::runtime_role "prefill ragged",
/// "prefill paged", "decode", their sliding-window kernels, "mla prefill"), from the runtime's arguments and the auxiliary
/// arrays the flow copied before it (Dataflow::host_copies): 2 · query heads · (q·k's dim +
/// p·v's dim) per (query, key) pair — 4 · heads · head dim where both are the head dim —
/// summed over the sequences' pairs (causal: a query sees the keys up to its own). An MLA page
/// holds one latent row per token, read once as key and value. nullopt for other nodes or when
/// an array is not in a copy.
static std::optional<OpWork> kv_attention_work(const Dataflow& df, const Node& n) {
  const std::string& role = n.runtime_role;
  const bool windowed = role == "prefill paged sliding window" || role == "decode sliding window";
  if (role != "prefill ragged" && role != "prefill paged" && role != "decode" && role != "mla prefill" && !windowed)
    return std::nullopt;
  const bool mla = role == "mla prefill";
  const bool paged_prefill = role == "prefill paged" || role == "prefill paged sliding window";
  const std::vector<Arg>& a = n.runtime_args;
  auto tensor = [&](size_t i) -> const Arg* {
    return i < a.size() && a[i].kind == Arg::Kind::Buffer && !a[i].tensor_shape.empty() ? &a[i] : nullptr;
  };
  // The int32 array argument i holds, read from the latest copy into its storage before the node.
  auto values = [&](size_t i) -> std::optional<std::vector<int64_t>> {
    const Arg* t = tensor(i);
    if (!t || t->tensor_dtype != "int32" || t->tensor_shape.empty() || t->tensor_shape.size() > 2) return std::nullopt;
    const Buffer& b = df.buffers[static_cast<size_t>(t->buffer)];
    const HostCopy* from = nullptr;
    for (const HostCopy& c : df.host_copies)
      if (c.node < n.id && df.buffers[static_cast<size_t>(c.buffer)].storage_id == b.storage_id) from = &c;
    if (!from || (t->offset - from->offset) % 4 != 0) return std::nullopt;
    const int64_t first = (t->offset - from->offset) / 4,
                  count = t->tensor_shape[0] * (t->tensor_shape.size() == 2 ? t->tensor_shape[1] : 1);
    if (first < 0 || count < 0 || static_cast<uint64_t>(first + count) > from->values.size()) return std::nullopt;
    return std::vector<int64_t>(from->values.begin() + first, from->values.begin() + first + count);
  };
  const Arg* q = tensor(0);
  if (!q || q->tensor_shape.size() != 3) return std::nullopt;
  const uint64_t rows = static_cast<uint64_t>(q->tensor_shape[0]);
  const uint64_t heads = static_cast<uint64_t>(q->tensor_shape[1]), dim = static_cast<uint64_t>(q->tensor_shape[2]);
  const auto qt = parse_dtype(q->tensor_dtype);
  const uint64_t elem = qt ? dtype_element_bytes(*qt) : 4;
  // p·v's dimension: the output's (MLA's differs from q's).
  uint64_t dim_v = dim;
  const size_t out_at = paged_prefill ? 8 : mla ? 6 : 7;
  if (const Arg* o = tensor(out_at); o && o->tensor_shape.size() == 3)
    dim_v = static_cast<uint64_t>(std::max<int64_t>(0, o->tensor_shape[2]));
  uint64_t pairs = 0;
  uint64_t keys = 0;      // K and V rows read: new tokens (ragged) or cached ones (paged, decode)
  uint64_t kv_heads = 0;
  auto kv_lengths = [&](size_t pages_at, size_t indptr_at, size_t last_at) -> std::optional<std::vector<int64_t>> {
    const Arg* pages = tensor(pages_at);
    auto indptr = values(indptr_at), info = values(last_at);
    // The length info: last_page_len [n], or with a sliding window [3, n]: the last page's
    // length, the window's offset into the first page and the sinks (TVM's _get_kv_chunk_len:
    // (pages - 1) · P + last - offset + sinks).
    const size_t rows = windowed ? 3 : 1;
    if (!pages || pages->tensor_shape.size() != (mla ? 3u : 5u) || !indptr || !info || info->size() % rows != 0 ||
        indptr->size() != info->size() / rows + 1)
      return std::nullopt;
    const size_t n = info->size() / rows;
    const int64_t page = pages->tensor_shape[mla ? 1 : 3];
    kv_heads = mla ? 1 : static_cast<uint64_t>(std::max<int64_t>(0, pages->tensor_shape[2]));
    std::vector<int64_t> len;
    for (size_t i = 0; i < n; ++i) {
      const int64_t np = (*indptr)[i + 1] - (*indptr)[i];
      const int64_t in_last = windowed ? (*info)[i] - (*info)[n + i] + (*info)[2 * n + i] : (*info)[i];
      len.push_back(np <= 0 ? 0 : (np - 1) * page + in_last);
    }
    return len;
  };
  if (role == "prefill ragged") {
    auto qo = values(1);
    const bool causal = a.size() > 9 && a[9].kind == Arg::Kind::Int && a[9].int_value != 0;
    if (!qo || qo->empty()) return std::nullopt;
    for (size_t i = 0; i + 1 < qo->size(); ++i) {
      const uint64_t len = static_cast<uint64_t>(std::max<int64_t>(0, (*qo)[i + 1] - (*qo)[i]));
      pairs = add(pairs, causal ? len * (len + 1) / 2 : mul(len, len));
      keys = add(keys, len);
    }
    const Arg* k = tensor(2);
    kv_heads = k && k->tensor_shape.size() == 3 ? static_cast<uint64_t>(std::max<int64_t>(0, k->tensor_shape[1])) : 0;
  } else if (role == "decode" || role == "decode sliding window") {
    auto len = kv_lengths(1, 2, 4);
    if (!len) return std::nullopt;
    for (int64_t l : *len) pairs = add(pairs, static_cast<uint64_t>(std::max<int64_t>(0, l)));
    keys = pairs;
  } else {
    auto qo = values(1);
    auto len = kv_lengths(2, 3, 5);
    if (!qo || !len || qo->size() != len->size() + 1) return std::nullopt;
    // A causal paged prefill (a sliding layer's): query j of q sees the first len - q + j + 1 keys.
    const bool causal = paged_prefill && a.size() > 10 && a[10].kind == Arg::Kind::Int && a[10].int_value != 0;
    for (size_t i = 0; i < len->size(); ++i) {
      const uint64_t q = static_cast<uint64_t>(std::max<int64_t>(0, (*qo)[i + 1] - (*qo)[i]));
      const uint64_t l = static_cast<uint64_t>(std::max<int64_t>(0, (*len)[i]));
      pairs = add(pairs, causal && q <= l ? mul(q, l) - q * (q - 1) / 2 : mul(q, l));
      keys = add(keys, l);
    }
  }
  OpWork w;
  w.op = n.relay_ops.empty() ? "kv_cache." + role : n.relay_ops[0].name;
  w.formula = "attention";
  w.flops = mul(2, mul(heads, mul(add(dim, dim_v), pairs)));
  // Bytes: q read and the output written (rows · heads · dim), the LSE (float32), and each
  // key's K and V row read once (MLA: the one latent row): what grows with the context.
  const uint64_t kv_row = mla ? dim : add(dim, dim_v);
  w.bytes = add(add(mul(rows, mul(heads, mul(dim, elem))), mul(rows, mul(heads, mul(dim_v, elem)))),
                add(mul(rows, mul(heads, 4)), mul(keys, mul(kv_heads, mul(kv_row, elem)))));
  w.tensor_core = q->tensor_dtype == "float16" || q->tensor_dtype == "bfloat16";
  return w;
}

namespace {
/// Σ over a node's kernels of `time(cost)`; nullopt when one of them has none.
template <class Time>
std::optional<double> kernels_sum(const Node& node, const std::vector<KernelCost>& kernels, Time time) {
  double sum = 0;
  for (int k : node.kernels) {
    std::optional<double> t = time(kernels[static_cast<size_t>(k)]);
    if (!t) return std::nullopt;
    sum += *t;
  }
  return sum;
}
}  // namespace

CostReport compute_costs(const Dataflow& df, const DeviceSpec* device, const KernelTimes* times,
                         const GpuArch* profile) {
  CostReport r;
  if (device) r.device = device->id;
  const GpuArch* arch = profile ? profile : device ? find_gpu_arch(device->id) : nullptr;
  auto memory_us = [&](uint64_t bytes) { return static_cast<double>(bytes) / (device->dram_gbps * 1e3); };
  auto compute_us = [&](const std::vector<OpWork>& ops) {
    double us = 0;
    for (const OpWork& w : ops) {
      if (!w.flops) continue;
      double tflops = w.tensor_core ? device->fp16_tensor_tflops : device->fp32_tflops;
      us += static_cast<double>(*w.flops) / (tflops * 1e6);
    }
    return us;
  };
  // Counted FLOPs: fp16/bf16 at the FP16 tensor peak (no fp16 operation runs faster), the rest at FP32.
  auto counted_us = [&](const CountedFlops& c) {
    uint64_t high = *c.flops > c.low_precision_flops ? *c.flops - c.low_precision_flops : 0;
    return static_cast<double>(high) / (device->fp32_tflops * 1e6) +
           static_cast<double>(c.low_precision_flops) / (device->fp16_tensor_tflops * 1e6);
  };
  auto buffer_bytes = [&](const std::vector<int>& ids) {
    std::set<int> seen;
    uint64_t b = 0;
    for (int id : ids)
      if (id >= 0 && static_cast<size_t>(id) < df.buffers.size() && seen.insert(id).second)
        b = add(b, df.buffers[static_cast<size_t>(id)].bytes);
    return b;
  };

  std::vector<const FunctionCost*> of_node(df.nodes.size(), nullptr);
  r.functions.reserve(df.nodes.size());
  for (const Node& node : df.nodes) {
    if (node.op != "tvm_op" || (node.kernels.empty() && node.library_calls.empty())) continue;
    FunctionCost f;
    f.node = node.id;
    bool all = !node.relay_ops.empty();
    const std::optional<OpWork> attention = kv_attention_work(df, node);
    for (const RelayOp& op : node.relay_ops) {
      OpWork w = attention ? *attention : op_work(op);
      if (w.flops) f.flops_known = add(f.flops_known, *w.flops);
      else {
        all = false;
        f.no_formula.push_back(op.name + " (" + w.reason + ")");
      }
      f.ops.push_back(std::move(w));
    }
    if (all) f.flops = f.flops_known;
    std::vector<int> io = node.inputs;
    io.insert(io.end(), node.outputs.begin(), node.outputs.end());
    // An attention's bytes are the keys it reads, not the whole page pool.
    f.bytes = attention && attention->bytes ? *attention->bytes : buffer_bytes(io);
    bool analyzed = false;
    for (int k : node.kernels)
      analyzed |= k >= 0 && static_cast<size_t>(k) < df.kernels.size() && df.kernels[static_cast<size_t>(k)].ops;
    for (int k : node.kernels)
      if (analyzed && k >= 0 && static_cast<size_t>(k) < df.kernels.size()) {
        const Kernel& kernel = df.kernels[static_cast<size_t>(k)];
        CountedFlops c;
        if (kernel.ops) c = counted_of(*kernel.ops);
        else c.status = "unknown", c.reasons = {"kernel not analyzed"};
        if (!f.counted) f.counted = CountedFlops{};
        accumulate(*f.counted, c);
      }
    if (f.counted && !node.library_calls.empty()) {
      f.counted->flops.reset();
      f.counted->status = "unknown";
      f.counted->reasons.push_back("library calls are not counted");
    }
    if (device && f.flops) {
      f.bound = Bound{compute_us(f.ops), memory_us(f.bytes)};
      f.bound_source = "formula";
    } else if (device && f.counted && f.counted->flops && f.counted->status == "exact") {
      f.bound = Bound{counted_us(*f.counted), memory_us(f.bytes)};
      f.bound_source = "counted";
    }
    r.functions.push_back(std::move(f));
  }
  for (const FunctionCost& f : r.functions) of_node[static_cast<size_t>(f.node)] = &f;

  r.kernels.reserve(df.kernels.size());
  for (const Kernel& k : df.kernels) {
    KernelCost c;
    c.kernel = k.id;
    // Bytes per distinct buffer: what the static footprints prove the launch touches
    // (bounds.h: distinct bytes where counted, else the exact span), else the whole buffer.
    std::set<int> seen;
    size_t by_footprint = 0, by_buffer = 0;
    for (const Arg& a : k.args) {
      if (a.kind != Arg::Kind::Buffer || a.buffer < 0 || static_cast<size_t>(a.buffer) >= df.buffers.size() ||
          !seen.insert(a.buffer).second)
        continue;
      auto r = launch_touched_bytes(k.args, a.buffer, false);
      auto w = launch_touched_bytes(k.args, a.buffer, true);
      if (r && w && *r >= 0 && *w >= 0) {
        c.bytes = add(c.bytes, add(static_cast<uint64_t>(*r), static_cast<uint64_t>(*w)));
        ++by_footprint;
      } else {
        c.bytes = add(c.bytes, df.buffers[static_cast<size_t>(a.buffer)].bytes);
        ++by_buffer;
      }
    }
    c.bytes_source = by_buffer == 0 && by_footprint > 0 ? "footprints"
                     : by_footprint == 0               ? "buffers"
                                                       : "footprints and buffers";
    const FunctionCost* f =
        k.node >= 0 && static_cast<size_t>(k.node) < of_node.size() ? of_node[static_cast<size_t>(k.node)] : nullptr;
    const Node* node = k.node >= 0 && static_cast<size_t>(k.node) < df.nodes.size() ? &df.nodes[static_cast<size_t>(k.node)] : nullptr;
    if (k.ops) c.counted = counted_of(*k.ops);
    if (f && node && node->kernels.size() == 1 && node->library_calls.empty()) {
      c.flops = f->flops;
      if (!c.flops) c.flops_note = "the function's FLOPs are not known";
      if (device && c.flops) c.bound = Bound{compute_us(f->ops), memory_us(c.bytes)}, c.bound_source = "formula";
    } else if (node) {
      c.flops_note = "the function launches " + std::to_string(node->kernels.size()) +
                     " kernels; FLOPs are known per function only";
    }
    if (device && !c.bound && c.counted && c.counted->flops && c.counted->status == "exact") {
      c.bound = Bound{counted_us(*c.counted), memory_us(c.bytes)};
      c.bound_source = "counted";
    }
    if (times && static_cast<size_t>(k.id) < times->us.size() && times->us[static_cast<size_t>(k.id)])
      c.measured = Measured{*times->us[static_cast<size_t>(k.id)], times->source};
    if (arch) {
      c.predicted = predict_kernel(df, k, *arch, &c.predicted_note);
    } else if (device) {
      c.predicted_note = "the time model does not know " + device->id + " (a kdflow calibrate profile would: --device-profile)";
    }
    r.kernels.push_back(std::move(c));
  }

  // Predicted time per function: its kernels', and a cuBLAS GEMM's from its shape (the function's
  // formula FLOPs and bytes) when it makes one library call.
  if (arch) {
    for (FunctionCost& f : r.functions) {
      const Node& node = df.nodes[static_cast<size_t>(f.node)];
      std::optional<double> kernels =
          kernels_sum(node, r.kernels, [](const KernelCost& c) { return c.predicted ? std::optional<double>(c.predicted->us) : std::nullopt; });
      bool all = kernels.has_value();
      double sum = kernels.value_or(0);
      std::string source = node.kernels.empty() ? "" : "code";
      if (!node.library_calls.empty()) {
        const bool gemm = node.library_calls.size() == 1 && f.flops &&
                          df.library_calls[static_cast<size_t>(node.library_calls[0])].name.find("cublas") !=
                              std::string::npos;
        if (gemm) {
          sum += predict_gemm_us(static_cast<double>(*f.flops), static_cast<double>(f.bytes),
                                 device ? device->fp32_tflops : 0.0, *arch);
          source = source.empty() ? "GEMM shape" : source + " and GEMM shape";
        } else {
          all = false;
        }
      }
      if (all) f.predicted_us = sum, f.predicted_source = source;
    }
  }

  if (times) {
    for (FunctionCost& f : r.functions) {
      const Node& node = df.nodes[static_cast<size_t>(f.node)];
      if (!node.library_calls.empty() || node.kernels.empty()) continue;  // library calls are not timed
      if (std::optional<double> sum = kernels_sum(
              node, r.kernels, [](const KernelCost& c) { return c.measured ? std::optional<double>(c.measured->us) : std::nullopt; }))
        f.measured = Measured{*sum, times->source};
    }
  }
  return r;
}

}  // namespace kdflow
