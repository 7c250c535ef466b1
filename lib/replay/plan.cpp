// plan.cpp — from the dataflow IR to a replay plan: what to allocate, what to upload and
// every launch with its packed parameters. Pure: reads the params and input files, never
// touches a driver, and rejects anything a launch would trip over before it runs.
//
// Sizes follow TVM's graph executor (src/runtime/graph_executor/graph_executor.cc,
// SetupStorage): one pool per storage id of max(entry bytes) rounded up to 4 bytes, every
// entry a view at offset 0. Workspaces get one allocation each of the bytes requested.
// Parameters follow src/runtime/pack_args.h: handles as 8-byte pointers, int32, uint32 and
// float32 narrowed from the 64-bit packed value, int64 and float64 as they are; laid out
// as the CUDA ABI lays out kernel parameters (each at its natural alignment).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "kdflow/analysis/bounds.h"
#include "kdflow/formats/tensor_values.h"
#include "kdflow/support/file_names.h"
#include "kdflow/support/io.h"
#include "kdflow/formats/params.h"
#include "kdflow/formats/vm_exec.h"
#include "kdflow/replay/replay.h"

namespace kdflow {
namespace {

std::string ptr(const char* array, size_t i) { return fmt::format("/{}/{}", array, i); }

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string dims_text(const std::array<int64_t, 3>& d) { return fmt::format("({}, {}, {})", d[0], d[1], d[2]); }

/// IEEE binary16 bits of `v`, rounded to nearest even (through float).
uint16_t to_half(double v) {
  float f = static_cast<float>(v);
  uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t fexp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (fexp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int32_t exp = static_cast<int32_t>(fexp) - 127 + 15;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry correctly bumps the exponent
  return static_cast<uint16_t>(h);
}

class Planner {
 public:
  Planner(const Dataflow& df, const ReplayInputs& in, const LaunchLimits& lim)
      : df_(df), in_(in), lim_(lim), label_(in.label.empty() ? std::string("flow") : in.label) {}

  Expected<ReplayPlan> run() {
    plan_.label = label_;
    plan_.outputs = df_.outputs;
    if (Status s = allocations(); !s) return s.error();
    if (Status s = params(); !s) return s.error();
    if (Status s = inputs(); !s) return s.error();
    for (size_t i = 0; i < df_.kernels.size(); ++i)
      if (Status s = launch(df_.kernels[i], i); !s) return s.error();
    for (size_t i = 0; i < df_.library_calls.size(); ++i)
      if (Status s = library_call(df_.library_calls[i], i); !s) return s.error();
    for (size_t i = 0; i < df_.host_copies.size(); ++i)
      if (Status s = host_copy(df_.host_copies[i], i); !s) return s.error();
    return std::move(plan_);
  }

 private:
  Error err(const std::string& pointer, const std::string& msg, ExitCode code = ExitCode::DataError) const {
    return json_error(label_, pointer, msg, code);
  }

  Status allocations() {
    std::map<int64_t, std::vector<int>> storages;
    std::vector<int> workspaces;
    plan_.buffer_allocation.assign(df_.buffers.size(), -1);
    for (size_t i = 0; i < df_.buffers.size(); ++i) {
      const Buffer& b = df_.buffers[i];
      if (Status s = check_bytes(i); !s) return s;
      if (b.storage_id) {
        if (*b.storage_id < 0)
          return err(ptr("buffers", i) + "/storage_id", fmt::format("negative storage id {}", *b.storage_id));
        storages[*b.storage_id].push_back(static_cast<int>(i));
      } else {
        workspaces.push_back(static_cast<int>(i));
      }
    }
    for (auto& [sid, bufs] : storages) {
      PlanAllocation a;
      a.id = static_cast<int>(plan_.allocations.size());
      a.storage_id = sid;
      a.buffers = bufs;
      uint64_t bytes = 0;
      for (int b : bufs) bytes = std::max(bytes, df_.buffers[b].bytes);
      if (!checked_add(bytes, 3, &bytes))
        return err(ptr("buffers", bufs[0]) + "/bytes", "storage size overflows 64 bits");
      a.bytes = bytes / 4 * 4;
      for (int b : bufs) plan_.buffer_allocation[b] = a.id;
      plan_.allocations.push_back(std::move(a));
    }
    for (int b : workspaces) {
      PlanAllocation a;
      a.id = static_cast<int>(plan_.allocations.size());
      a.workspace = b;
      a.buffers = {b};
      a.bytes = df_.buffers[b].bytes;
      plan_.buffer_allocation[b] = a.id;
      plan_.allocations.push_back(std::move(a));
    }
    for (const PlanAllocation& a : plan_.allocations)
      if (!checked_add(plan_.total_bytes, a.bytes, &plan_.total_bytes))
        return err("/buffers", "the total of all allocations overflows 64 bits");
    return Status::ok();
  }

  /// A buffer's `bytes` must be what its dtype and shape say (graph buffers exactly; a
  /// workspace, whose shape is its bytes over the element size, less than one element more),
  /// so a hostile flow cannot ask for memory its shapes do not need.
  Status check_bytes(size_t i) const {
    const Buffer& b = df_.buffers[i];
    std::optional<DType> t = parse_dtype(b.dtype);
    if (!t || t->code == kDLOpaqueHandle || t->bits % 8 != 0) return Status::ok();
    uint64_t element = dtype_element_bytes(*t), n = element;
    for (int64_t x : b.shape)
      if (x < 0 || !checked_mul(n, static_cast<uint64_t>(x), &n))
        return err(ptr("buffers", i) + "/shape", fmt::format("buffer {} '{}': {} {} has more bytes than 64 bits hold",
                                                             i, b.name, b.dtype, shape_text(b.shape)));
    bool fits = b.storage_id ? b.bytes == n : (b.bytes >= n && b.bytes - n < element);
    if (fits) return Status::ok();
    return err(ptr("buffers", i) + "/bytes",
               fmt::format("buffer {} '{}' claims {} bytes, but {} {} is {} bytes", i, b.name, b.bytes, b.dtype,
                           shape_text(b.shape), n));
  }

  /// Checks that an array read from `file` fits buffer `b` exactly.
  Status check_fits(const std::string& file, const std::string& what, int b, DType t,
                    const std::vector<int64_t>& shape, uint64_t nbytes) const {
    const Buffer& buf = df_.buffers[b];
    auto want = parse_dtype(buf.dtype);
    if (!want || *want != t || shape != buf.shape || nbytes != buf.bytes)
      return file_error(file, fmt::format("{} is {} {} ({} bytes), but the model's buffer {} is {} {} ({} bytes)", what,
                                          dtype_to_string(t), shape_text(shape), nbytes, b, buf.dtype,
                                          shape_text(buf.shape), buf.bytes));
    return Status::ok();
  }

  Status params() {
    if (df_.params.empty()) return Status::ok();
    if (in_.params.empty()) {
      std::string names;
      for (size_t i = 0; i < df_.params.size() && i < 3; ++i) names += (i ? ", " : "") + df_.buffers[df_.params[i]].name;
      if (df_.params.size() > 3) names += ", ...";
      return file_error(label_,
                        fmt::format("the model has {} params ({}) but no params file was given (--params FILE)",
                                    df_.params.size(), names),
                        ExitCode::NoInput);
    }
    Expected<MappedFile> file = map_file(in_.params, kMaxParamsFileBytes);
    if (!file) return file.error();
    std::string_view bytes = file->bytes();
    if (is_vm_executable(bytes)) return pool_params(bytes);
    Expected<ParamsFile> pf = parse_params(bytes, in_.params);
    if (!pf) return pf.error();
    std::map<std::string, const ParamArray*> by_name;
    for (const ParamArray& a : pf->arrays) by_name[a.name] = &a;
    for (int b : df_.params) {
      const Buffer& buf = df_.buffers[b];
      auto it = by_name.find(buf.name);
      if (it == by_name.end())
        return file_error(in_.params,
                          fmt::format("param '{}' (buffer {}, {} {}) is not in this file ({} arrays)", buf.name, b,
                                      buf.dtype, shape_text(buf.shape), pf->arrays.size()));
      const ParamArray& a = *it->second;
      if (Status s = check_fits(in_.params, "param '" + buf.name + "'", b, a.dtype, a.shape, a.nbytes); !s) return s;
      PlanUpload u;
      u.buffer = b;
      u.allocation = plan_.buffer_allocation[b];
      u.source = base_name(in_.params) + ":" + buf.name;
      u.data = std::string(bytes.substr(a.data_offset, a.nbytes));
      plan_.uploads.push_back(std::move(u));
    }
    return Status::ok();
  }

  /// Relax builds (TVM 0.20 – 0.26): the weights are tensors of the VM executable's constant
  /// pool, each param buffer naming its pool index (constant_index).
  static bool is_vm_executable(std::string_view bytes) { return looks_like_vm_executable(bytes); }

  /// Input `b` of a session (input_ids[prefill], input_ids[decode K], int32, one dimension):
  /// the next tokens of the session's token file.
  Status session_input(int b, int64_t* next) {
    const Buffer& buf = df_.buffers[b];
    if (!tokens_) {
      Expected<NpyArray> a = read_npy(in_.session_tokens);
      if (!a) return a.error();
      if (a->dtype != DType{kDLInt, 32, 1} || a->shape.size() != 1)
        return file_error(in_.session_tokens, fmt::format("the session's token ids must be one int32 dimension; the "
                                                          "file holds {} {}",
                                                          dtype_to_string(a->dtype), shape_text(a->shape)));
      tokens_.emplace(a.take());
    }
    const int64_t n = buf.shape.empty() ? 1 : buf.shape[0];
    const int64_t have = tokens_->shape[0];
    if (buf.dtype != "int32" || buf.shape.size() != 1 || *next + n > have)
      return file_error(in_.session_tokens, fmt::format("input '{}' takes tokens {}..{}, but the file holds {} token "
                                                        "ids (the session's steps need them in order: prefill, then "
                                                        "one per decode step)",
                                                        buf.name, *next, *next + n - 1, have));
    PlanUpload u;
    u.buffer = b;
    u.allocation = plan_.buffer_allocation[b];
    u.source = fmt::format("{}[{}:{}]", base_name(in_.session_tokens), *next, *next + n);
    u.data = tokens_->data.substr(static_cast<size_t>(4 * *next), static_cast<size_t>(4 * n));
    plan_.uploads.push_back(std::move(u));
    *next += n;
    return Status::ok();
  }

  Status pool_params(std::string_view bytes) {
    Expected<VmExecutable> ex = parse_vm_executable(bytes, in_.params);
    if (!ex) return ex.error();
    // Packed params (constant_index -1) come by name from the params file beside the build.
    std::optional<MappedFile> packed_file;
    std::map<std::string, const ParamArray*> packed;
    ParamsFile pf;
    for (int b : df_.params) {
      const Buffer& buf = df_.buffers[b];
      if (buf.constant_index >= 0) continue;
      if (in_.packed_params.empty())
        return file_error(label_, fmt::format("param '{}' (buffer {}) is a packed param, not a constant of {}: give "
                                              "the params file that holds it (DIR/params.bin, or --params)",
                                              buf.name, b, base_name(in_.params)),
                          ExitCode::NoInput);
      if (!packed_file) {
        Expected<MappedFile> f = map_file(in_.packed_params, kMaxParamsFileBytes);
        if (!f) return f.error();
        packed_file.emplace(f.take());
        Expected<ParamsFile> parsed = parse_params(packed_file->bytes(), in_.packed_params);
        if (!parsed) return parsed.error();
        pf = parsed.take();
        for (const ParamArray& a : pf.arrays) packed[a.name] = &a;
      }
      auto it = packed.find(buf.name);
      if (it == packed.end())
        return file_error(in_.packed_params, fmt::format("param '{}' (buffer {}, {} {}) is not in this file ({} arrays)",
                                                         buf.name, b, buf.dtype, shape_text(buf.shape),
                                                         pf.arrays.size()));
      const ParamArray& a = *it->second;
      if (Status s = check_fits(in_.packed_params, "param '" + buf.name + "'", b, a.dtype, a.shape, a.nbytes); !s)
        return s;
      PlanUpload u;
      u.buffer = b;
      u.allocation = plan_.buffer_allocation[b];
      u.source = base_name(in_.packed_params) + ":" + buf.name;
      u.data = std::string(packed_file->bytes().substr(a.data_offset, a.nbytes));
      plan_.uploads.push_back(std::move(u));
    }
    for (int b : df_.params) {
      const Buffer& buf = df_.buffers[b];
      if (buf.constant_index < 0) continue;
      if (buf.constant_index < 0 || static_cast<size_t>(buf.constant_index) >= ex->constants.size() ||
          ex->constants[buf.constant_index].kind != VmConstant::Kind::Tensor)
        return file_error(in_.params, fmt::format("param '{}' (buffer {}) names constant {}, which is not a tensor of "
                                                  "this executable's pool ({} constants)",
                                                  buf.name, b, buf.constant_index, ex->constants.size()));
      const VmConstant& c = ex->constants[buf.constant_index];
      const std::string what = fmt::format("constant {} ('{}')", buf.constant_index, buf.name);
      if (Status s = check_fits(in_.params, what, b, c.dtype, c.shape, c.nbytes); !s) return s;
      PlanUpload u;
      u.buffer = b;
      u.allocation = plan_.buffer_allocation[b];
      u.source = fmt::format("{}:c[{}]", base_name(in_.params), buf.constant_index);
      u.data = std::string(bytes.substr(c.data_offset, c.nbytes));
      plan_.uploads.push_back(std::move(u));
    }
    return Status::ok();
  }

  Status inputs() {
    std::map<std::string, int> by_name;
    std::string names;
    for (int b : df_.inputs) {
      by_name[df_.buffers[b].name] = b;
      names += (names.empty() ? "" : ", ") + df_.buffers[b].name;
    }
    std::map<std::string, std::string> given;
    for (const auto& [name, file] : in_.inputs) {
      if (!by_name.count(name))
        return Error{fmt::format("--input {}: error: the model has no input '{}' (its inputs: {})", name, name,
                                 names.empty() ? "none" : names),
                     ExitCode::Usage};
      given[name] = file;
    }
    int64_t token = 0;  // a session's token ids: the next unread token of session_tokens
    for (int b : df_.inputs) {
      const Buffer& buf = df_.buffers[b];
      std::string file;
      if (buf.name.rfind("input_ids[", 0) == 0 && !given.count(buf.name) && in_.session_tokens.empty())
        return file_error(label_, fmt::format("no token ids for the session's input '{}': put them in input_ids.npy "
                                              "beside the build (int32, the prefill's tokens then one per decode "
                                              "step) or pass --input input_ids=FILE.npy",
                                              buf.name),
                          ExitCode::NoInput);
      if (buf.name.rfind("input_ids[", 0) == 0 && !given.count(buf.name)) {
        if (Status s = session_input(b, &token); !s) return s;
        continue;
      }
      if (auto it = given.find(buf.name); it != given.end()) {
        file = it->second;
      } else if (!in_.input_dir.empty()) {
        // input_<encoded name>.npy (docs/schema.md, "Names in file names"); a folder written
        // before the encoding may hold input_<name>.npy.
        file = find_input_file(in_.input_dir, buf.name);
        if (file.empty()) file = in_.input_dir + "/" + input_file_name(buf.name);
      } else {
        return file_error(label_, fmt::format("no data for input '{}' ({} {}): pass --input {}=FILE.npy", buf.name,
                                              buf.dtype, shape_text(buf.shape), buf.name),
                          ExitCode::NoInput);
      }
      Expected<NpyArray> a = read_npy(file);
      if (!a) return a.error();
      if (Status s = check_fits(file, "input '" + buf.name + "'", b, a->dtype, a->shape, a->data.size()); !s) return s;
      // An input whose values shaped the flow (Buffer::values_used) must hold those values.
      if (!buf.values_used.empty()) {
        Expected<std::vector<int64_t>> v = integer_values(a->dtype, a->data, base_name(file));
        if (!v) return file_error(file, v.error().message);
        if (*v != buf.values_used)
          return file_error(file,
                            fmt::format("input '{}' holds [{}], but the flow was extracted for [{}]: its values "
                                        "decide shapes or branches of the program; extract again with this input",
                                        buf.name, fmt::join(*v, ", "), fmt::join(buf.values_used, ", ")));
      }
      PlanUpload u;
      u.buffer = b;
      u.allocation = plan_.buffer_allocation[b];
      u.source = base_name(file);
      u.data = std::move(a->data);
      plan_.uploads.push_back(std::move(u));
    }
    return Status::ok();
  }

  /// A host copy (int32 values into a buffer at an offset), checked to fit its allocation.
  Status host_copy(const HostCopy& c, size_t i) {
    const std::string cp = ptr("host_copies", i);
    if (c.buffer < 0 || static_cast<size_t>(c.buffer) >= df_.buffers.size() || plan_.buffer_allocation[c.buffer] < 0)
      return err(cp + "/buffer", fmt::format("host copy {} writes buffer {}, which has no allocation", i, c.buffer));
    PlanHostCopy h;
    h.copy = static_cast<int>(i);
    h.node = c.node;
    h.buffer = c.buffer;
    h.allocation = plan_.buffer_allocation[c.buffer];
    h.offset = static_cast<uint64_t>(c.offset);
    const uint64_t size = c.dtype == "int64" ? 8 : 4;  // the flow's reader admits int32 and int64
    const uint64_t bytes = size * static_cast<uint64_t>(c.values.size());
    const uint64_t cap = plan_.allocations[h.allocation].bytes;
    if (c.offset < 0 || h.offset > cap || bytes > cap - h.offset)
      return err(cp, fmt::format("host copy {} writes {} bytes at byte {} of allocation {} ({} bytes)", i, bytes,
                                 c.offset, h.allocation, cap));
    h.data.resize(bytes);
    for (size_t k = 0; k < c.values.size(); ++k) {
      if (size == 8) {
        const int64_t v = c.values[k];
        std::memcpy(&h.data[8 * k], &v, 8);
      } else {
        const int32_t v = static_cast<int32_t>(c.values[k]);
        std::memcpy(&h.data[4 * k], &v, 4);
      }
    }
    plan_.host_copies.push_back(std::move(h));
    return Status::ok();
  }

  /// A library call replay can run: tvm.contrib.cublas.matmul / batch_matmul on float32
  /// tensors, mapped to cuBLAS's column-major arguments exactly as TVM 0.14's cublas.cc and
  /// cblas/gemm_common.h do (CallGemm / CallBatchGemm). Anything else is refused (exit 69,
  /// naming the call); a view that does not fit its tensor or buffer is bad data (exit 65).
  /// A collective (a sharded build's runtime.disco.<kind>): what it sends and what it receives
  /// into, each inside its buffer. The engine runs it between the ranks (collectives.h).
  Status collective_call(const LibraryCall& c, size_t i) {
    const std::string cp = ptr("library_calls", i);
    const Collective& k = *c.collective;
    if (k.kind != "allreduce" && k.kind != "allgather" && k.kind != "broadcast_from_worker0" &&
        k.kind != "scatter_from_worker0" && k.kind != "gather_to_worker0")
      return err(cp, fmt::format("replay does not run {} (library call {} of node {}): only allreduce, allgather, "
                                 "broadcast_from_worker0, scatter_from_worker0 and gather_to_worker0",
                                 c.name, c.id, c.node),
                 ExitCode::Unavailable);
    if (c.after_kernel < -1 || c.after_kernel >= static_cast<int>(df_.kernels.size()))
      return err(cp + "/after_kernel", fmt::format("after_kernel {} is not a kernel of the model ({} kernels)",
                                                   c.after_kernel, df_.kernels.size()));
    PlanLibraryCall p;
    p.call = c.id;
    p.name = c.name;
    p.node = c.node;
    p.after_kernel = c.after_kernel;
    p.collective = k;
    auto operand = [&](int b, const char* key, PlanOperand* o) -> Status {
      if (b < 0) return Status::ok();
      if (static_cast<size_t>(b) >= df_.buffers.size() || plan_.buffer_allocation[static_cast<size_t>(b)] < 0)
        return err(cp + "/" + key, fmt::format("{} buffer {} names no buffer of the model", key, b));
      o->buffer = b;
      o->allocation = plan_.buffer_allocation[static_cast<size_t>(b)];
      o->bytes = df_.buffers[static_cast<size_t>(b)].bytes;
      return Status::ok();
    };
    if (Status s = operand(k.send, "send", &p.a); !s) return s;
    if (Status s = operand(k.recv, "recv", &p.c); !s) return s;
    if (k.send >= 0 && p.a.bytes < k.bytes)
      return err(cp + "/bytes", fmt::format("{} sends {} bytes from buffer {} of {} bytes", c.name, k.bytes, k.send,
                                            p.a.bytes));
    if (k.send >= 0) p.a.bytes = k.bytes;
    plan_.library_calls.push_back(std::move(p));
    return Status::ok();
  }

  Status library_call(const LibraryCall& c, size_t i) {
    if (c.collective) return collective_call(c, i);
    const std::string cp = ptr("library_calls", i);
    const bool matmul = c.name == "tvm.contrib.cublas.matmul", batched = c.name == "tvm.contrib.cublas.batch_matmul";
    if (c.name.rfind("vm.builtin.attention_kv_cache_", 0) == 0)
      return err(cp, fmt::format("replay cannot run library call '{}' of node {} (layer {}): TVM's KV cache does this "
                                 "attention inside its runtime, with state from earlier steps; replaying LLM sessions "
                                 "is not implemented yet",
                                 c.name, c.node, !c.args.empty() && c.args[0].kind == Arg::Kind::Int
                                                     ? std::to_string(c.args[0].int_value)
                                                     : std::string("?")),
                 ExitCode::Unavailable);
    if (!matmul && !batched)
      return err(cp, fmt::format("replay cannot run library call '{}' of node {}: only tvm.contrib.cublas.matmul and "
                                 "tvm.contrib.cublas.batch_matmul are replayed",
                                 c.name, c.node),
                 ExitCode::Unavailable);
    if (c.args.size() != 5)
      return err(cp + "/args", fmt::format("{} has {} arguments; replay runs the 5-argument form (A, B, C, transa, "
                                           "transb; alpha 1, beta 0)",
                                           c.name, c.args.size()),
                 c.args.size() > 5 ? ExitCode::Unavailable : ExitCode::DataError);
    const size_t ndim = batched ? 3 : 2;
    for (size_t j = 0; j < 3; ++j) {
      const Arg& a = c.args[j];
      const std::string ap = fmt::format("{}/args/{}", cp, j);
      if (a.kind != Arg::Kind::Buffer || a.tensor_dtype.empty())
        return err(ap, fmt::format("argument {} of {} must be a DLTensor view of a buffer", j, c.name));
      if (a.tensor_dtype != "float32")
        return err(ap + "/tensor/dtype",
                   fmt::format("{} on {} tensors: replay runs float32 cuBLAS calls only (cublasSgemm)", c.name,
                               a.tensor_dtype),
                   ExitCode::Unavailable);
      if (a.tensor_shape.size() != ndim)
        return err(ap + "/tensor/shape", fmt::format("{} needs {}-d tensors, argument {} is {}", c.name, ndim, j,
                                                     shape_text(a.tensor_shape)));
      for (int64_t d : a.tensor_shape)
        if (d < 1 || d > std::numeric_limits<int32_t>::max())
          return err(ap + "/tensor/shape", fmt::format("dimension {} of {} is out of cuBLAS's int range", d,
                                                       shape_text(a.tensor_shape)));
    }
    for (size_t j = 3; j < 5; ++j)
      if (c.args[j].kind != Arg::Kind::Int || (c.args[j].int_value != 0 && c.args[j].int_value != 1))
        return err(fmt::format("{}/args/{}", cp, j), fmt::format("argument {} of {} (trans{}) must be 0 or 1", j,
                                                                 c.name, j == 3 ? 'a' : 'b'));
    PlanLibraryCall p;
    p.call = c.id;
    p.name = c.name;
    p.node = c.node;
    p.after_kernel = c.after_kernel;
    p.batched = batched;
    p.transa = c.args[3].int_value != 0;
    p.transb = c.args[4].int_value != 0;
    if (c.after_kernel < -1 || c.after_kernel >= static_cast<int>(df_.kernels.size()))
      return err(cp + "/after_kernel", fmt::format("after_kernel {} is not a kernel of the model ({} kernels)",
                                                   c.after_kernel, df_.kernels.size()));
    const auto& A = c.args[0].tensor_shape;
    const auto& B = c.args[1].tensor_shape;
    const auto& C = c.args[2].tensor_shape;
    const size_t r = batched ? 1 : 0;  // the row dimension
    auto rows = [&](const std::vector<int64_t>& t, bool tr) { return t[tr ? r + 1 : r]; };
    auto cols = [&](const std::vector<int64_t>& t, bool tr) { return t[tr ? r : r + 1]; };
    p.m = cols(B, p.transb);
    p.n = rows(A, p.transa);
    p.k = cols(A, p.transa);
    p.ldb = B[r + 1];
    p.lda = A[r + 1];
    p.ldc = C[r + 1];
    if (rows(B, p.transb) != p.k)
      return err(cp + "/args/1/tensor/shape",
                 fmt::format("{}: A {} (transa={}) has {} columns but B {} (transb={}) has {} rows", c.name,
                             shape_text(A), int(p.transa), p.k, shape_text(B), int(p.transb), rows(B, p.transb)));
    if (C[r] != p.n || C[r + 1] != p.m)
      return err(cp + "/args/2/tensor/shape", fmt::format("{}: C is {} but A·B is {} × {}", c.name, shape_text(C),
                                                          p.n, p.m));
    if (batched) {
      p.batch = C[0];
      p.stride_a = A[1] * A[2];
      p.stride_b = B[1] * B[2];
      p.stride_c = C[1] * C[2];
      if (A[0] != B[0]) {
        if (A[0] == 1 && B[0] == p.batch) p.stride_a = 0;
        else if (B[0] == 1 && A[0] == p.batch) p.stride_b = 0;
        else
          return err(cp + "/args/2/tensor/shape",
                     fmt::format("{}: batches of A {}, B {} and C {} do not match (nor broadcast one)", c.name,
                                 shape_text(A), shape_text(B), shape_text(C)));
      } else if (A[0] != p.batch) {
        return err(cp + "/args/2/tensor/shape", fmt::format("{}: A and B have {} batches, C has {}", c.name, A[0],
                                                            p.batch));
      }
    }
    PlanOperand* ops[3] = {&p.a, &p.b, &p.c};
    for (size_t j = 0; j < 3; ++j) {
      const Arg& a = c.args[j];
      const std::string ap = fmt::format("{}/args/{}", cp, j);
      if (a.buffer < 0 || static_cast<size_t>(a.buffer) >= df_.buffers.size() || plan_.buffer_allocation[a.buffer] < 0)
        return err(ap + "/buffer", fmt::format("argument {} of {} names no buffer of the model", j, c.name));
      uint64_t elems = 1;
      for (int64_t d : a.tensor_shape)
        if (!checked_mul(elems, static_cast<uint64_t>(d), &elems))
          return err(ap + "/tensor/shape", "tensor size overflows 64 bits");
      PlanOperand& o = *ops[j];
      o.buffer = a.buffer;
      o.allocation = plan_.buffer_allocation[a.buffer];
      o.bytes = elems * 4;
      const Buffer& buf = df_.buffers[a.buffer];
      uint64_t end = 0;
      if (a.offset < 0 || !checked_add(static_cast<uint64_t>(a.offset), o.bytes, &end) || end > buf.bytes)
        return err(ap, fmt::format("the {} view {} at byte offset {} ({} bytes) does not fit in buffer {} ('{}', "
                                   "{} bytes)",
                                   a.tensor_dtype, shape_text(a.tensor_shape), a.offset, o.bytes, a.buffer, buf.name,
                                   buf.bytes));
      if (a.offset % 4)
        return err(ap, fmt::format("byte offset {} of a float32 view is not 4-byte aligned", a.offset));
      o.offset = static_cast<uint64_t>(a.offset);
    }
    plan_.library_calls.push_back(std::move(p));
    return Status::ok();
  }

  Status launch(const Kernel& k, size_t i) {
    const std::string kp = ptr("kernels", i);
    PlanLaunch l;
    l.kernel = k.id;
    l.name = k.name;
    l.node = k.node;
    l.programmatic_dependent_launch = k.programmatic_dependent_launch;
    l.cooperative_launch = k.cooperative_launch;
    // CUDA's launch limits (analysis/launch_limits.h; extract refuses such a flow too).
    if (std::optional<LaunchLimitViolation> v = launch_limit_violation(k, lim_))
      return err(kp + "/" + v->field, v->message);
    int64_t threads = 1;
    for (int d = 0; d < 3; ++d) {
      threads *= k.block[d];
      l.grid[d] = static_cast<uint32_t>(k.grid[d]);
      l.block[d] = static_cast<uint32_t>(k.block[d]);
    }
    l.shared_memory = static_cast<uint32_t>(k.dynamic_shared_memory);

    const DeviceFunction* fn = nullptr;
    if (k.device_function >= 0 && static_cast<size_t>(k.device_function) < df_.device_functions.size())
      fn = &df_.device_functions[k.device_function];
    if (fn) {
      if (fn->params.size() != k.args.size())
        return err(kp + "/args", fmt::format("{} arguments, but the CUDA source declares {} with {} parameters",
                                             k.args.size(), k.name, fn->params.size()));
      if (fn->launch_bounds > 0 && threads > fn->launch_bounds)
        return err(kp + "/block", fmt::format("block {} of {} has {} threads, but it was compiled with "
                                              "__launch_bounds__({})",
                                              dims_text(k.block), k.name, threads, fn->launch_bounds));
    }

    uint32_t pos = 0;
    for (size_t j = 0; j < k.args.size(); ++j) {
      const Arg& a = k.args[j];
      const std::string ap = kp + "/args/" + std::to_string(j);
      PlanArg p;
      p.access = a.access;
      auto t = parse_dtype(a.dtype);
      if (!t || t->lanes != 1)
        return err(ap + "/dtype", fmt::format("argument {} of {} has dtype '{}', which cannot be passed to a kernel",
                                              j, k.name, a.dtype));
      bool numeric = a.kind == Arg::Kind::Int || a.kind == Arg::Kind::Float;
      auto want_number = [&]() -> Status {
        if (!numeric)
          return err(ap, fmt::format("argument {} of {} is a {} parameter but the IR passes a pointer", j, k.name,
                                     a.dtype));
        return Status::ok();
      };
      if (t->code == kDLOpaqueHandle) {
        p.size = 8;
        if (a.kind == Arg::Kind::Buffer) {
          p.kind = PlanArg::Kind::Pointer;
          p.buffer = a.buffer;
          p.allocation = a.buffer >= 0 && static_cast<size_t>(a.buffer) < plan_.buffer_allocation.size()
                             ? plan_.buffer_allocation[a.buffer]
                             : -1;
          if (p.allocation < 0) return err(ap + "/buffer", fmt::format("buffer {} has no allocation", a.buffer));
          const PlanAllocation& al = plan_.allocations[p.allocation];
          if (a.offset < 0 || static_cast<uint64_t>(a.offset) > al.bytes)
            return err(ap + "/offset",
                       fmt::format("argument {} of {} points {} bytes into buffer {} ('{}'), outside its {}-byte "
                                   "allocation",
                                   j, k.name, a.offset, a.buffer, df_.buffers[a.buffer].name, al.bytes));
          p.offset = static_cast<uint64_t>(a.offset);
        } else if (a.kind == Arg::Kind::Null || (a.kind == Arg::Kind::Int && a.int_value == 0)) {
          p.kind = PlanArg::Kind::Null;
        } else {
          return err(ap, fmt::format("argument {} of {} is a pointer parameter but the IR passes a number", j, k.name));
        }
      } else if (t->code == kDLInt && (t->bits == 32 || t->bits == 64)) {
        if (Status s = want_number(); !s) return s;
        if (a.kind == Arg::Kind::Float)
          return err(ap, fmt::format("argument {} of {} is {} but the IR passes a float", j, k.name, a.dtype));
        p.int_value = a.int_value;
        if (t->bits == 32) {
          if (a.int_value < std::numeric_limits<int32_t>::min() || a.int_value > std::numeric_limits<int32_t>::max())
            return err(ap, fmt::format("argument {} of {} is int32 but its value {} does not fit", j, k.name,
                                       a.int_value));
          p.kind = PlanArg::Kind::Int32;
          p.size = 4;
        } else {
          p.kind = PlanArg::Kind::Int64;
          p.size = 8;
        }
      } else if (t->code == kDLUInt && t->bits == 32) {
        if (Status s = want_number(); !s) return s;
        if (a.kind == Arg::Kind::Float || a.int_value < 0 || a.int_value > std::numeric_limits<uint32_t>::max())
          return err(ap, fmt::format("argument {} of {} is uint32 but its value does not fit", j, k.name));
        p.kind = PlanArg::Kind::UInt32;
        p.int_value = a.int_value;
        p.size = 4;
      } else if (t->code == kDLFloat && (t->bits == 16 || t->bits == 32 || t->bits == 64)) {
        if (Status s = want_number(); !s) return s;
        p.float_value = a.kind == Arg::Kind::Float ? a.float_value : static_cast<double>(a.int_value);
        p.kind = t->bits == 16 ? PlanArg::Kind::Float16 : t->bits == 32 ? PlanArg::Kind::Float32 : PlanArg::Kind::Float64;
        p.size = t->bits / 8;
      } else {
        return err(ap + "/dtype", fmt::format("argument {} of {} has dtype '{}': TVM passes only handles, int32, "
                                              "int64, uint32, float16, float32 and float64 to kernels",
                                              j, k.name, a.dtype));
      }
      if (fn && j < fn->params.size()) {
        bool is_ptr = p.kind == PlanArg::Kind::Pointer || p.kind == PlanArg::Kind::Null;
        if (fn->params[j].pointer != is_ptr)
          return err(ap, fmt::format("argument {} of {} is {}, but the CUDA source's parameter '{}' is {}", j, k.name,
                                     is_ptr ? "a pointer" : "a scalar", fn->params[j].name, fn->params[j].type));
      }
      pos = (pos + p.size - 1) / p.size * p.size;
      p.position = pos;
      pos += p.size;
      if (pos > lim_.max_param_bytes)
        return err(kp + "/args", fmt::format("the parameters of {} take more than {} bytes", k.name,
                                             lim_.max_param_bytes));
      l.args.push_back(p);
    }
    l.param_bytes = pos;
    // Static footprints (bounds.h): a launch proven to leave a buffer is refused here,
    // before any driver call.
    // --allow-oob keeps the verdict for replay() to refuse, or to run under the CPU guard.
    if (Status s = check_launch_bounds(df_, k); !s) {
      if (!in_.allow_oob) return err(kp, s.error().message);
      plan_.oob.push_back(err(kp, s.error().message).message);
    }
    plan_.launches.push_back(std::move(l));
    return Status::ok();
  }

  std::optional<NpyArray> tokens_;  ///< the session's token ids, read once
  const Dataflow& df_;
  const ReplayInputs& in_;
  const LaunchLimits& lim_;
  std::string label_;
  ReplayPlan plan_;
};

void put_le(std::string* out, uint32_t pos, uint64_t v, uint32_t size) {
  for (uint32_t k = 0; k < size; ++k) (*out)[pos + k] = static_cast<char>((v >> (8 * k)) & 0xff);
}

}  // namespace

const char* to_string(PlanArg::Kind k) {
  switch (k) {
    case PlanArg::Kind::Pointer: return "ptr";
    case PlanArg::Kind::Null: return "null";
    case PlanArg::Kind::Int32: return "int32";
    case PlanArg::Kind::UInt32: return "uint32";
    case PlanArg::Kind::Int64: return "int64";
    case PlanArg::Kind::Float16: return "float16";
    case PlanArg::Kind::Float32: return "float32";
    case PlanArg::Kind::Float64: return "float64";
  }
  return "?";
}

Expected<ReplayPlan> make_plan(const Dataflow& df, const ReplayInputs& in, const LaunchLimits& limits) {
  return Planner(df, in, limits).run();
}

std::string pack_arguments(const PlanLaunch& l, const std::vector<uint64_t>& bases) {
  std::string out(l.param_bytes, '\0');
  for (const PlanArg& a : l.args) {
    uint64_t v = 0;
    switch (a.kind) {
      case PlanArg::Kind::Pointer:
        v = bases.at(static_cast<size_t>(a.allocation)) + a.offset;
        break;
      case PlanArg::Kind::Null:
        v = 0;
        break;
      case PlanArg::Kind::Int32:
      case PlanArg::Kind::UInt32:
      case PlanArg::Kind::Int64:
        v = static_cast<uint64_t>(a.int_value);  // two's complement; the size keeps the low bytes
        break;
      case PlanArg::Kind::Float16:
        v = to_half(a.float_value);
        break;
      case PlanArg::Kind::Float32: {
        float f = static_cast<float>(a.float_value);
        uint32_t bits = 0;
        std::memcpy(&bits, &f, 4);
        v = bits;
        break;
      }
      case PlanArg::Kind::Float64:
        std::memcpy(&v, &a.float_value, 8);
        break;
    }
    put_le(&out, a.position, v, a.size);
  }
  return out;
}

std::string format_plan(const ReplayPlan& plan, const Dataflow& df) {
  std::string out = fmt::format("plan {}: {} allocations ({} bytes), {} uploads, {} launches, {} outputs\n", plan.label,
                                plan.allocations.size(), plan.total_bytes, plan.uploads.size(), plan.launches.size(),
                                plan.outputs.size());
  for (const PlanAllocation& a : plan.allocations) {
    std::string bufs;
    for (int b : a.buffers) bufs += fmt::format("{}{} {}", bufs.empty() ? "" : ", ", b, df.buffers[b].name);
    if (a.storage_id >= 0)
      out += fmt::format("alloc {}: storage {}, {} bytes: buffer{} {}\n", a.id, a.storage_id, a.bytes,
                         a.buffers.size() > 1 ? "s" : "", bufs);
    else
      out += fmt::format("alloc {}: workspace, {} bytes: buffer {}\n", a.id, a.bytes, bufs);
  }
  for (const PlanUpload& u : plan.uploads) {
    const Buffer& b = df.buffers[u.buffer];
    out += fmt::format("upload alloc {}: {} bytes from {} (buffer {} {}, {} {})\n", u.allocation, u.data.size(),
                       u.source, u.buffer, b.name, b.dtype, shape_text(b.shape));
  }
  for (const PlanHostCopy& c : plan.host_copies)
    out += fmt::format("host copy {} before node {}: {} bytes into alloc {}+{} (buffer {} {})\n", c.copy, c.node,
                       c.data.size(), c.allocation, c.offset, c.buffer, df.buffers[c.buffer].name);
  for (const PlanLaunch& l : plan.launches) {
    std::string args;
    for (size_t j = 0; j < l.args.size(); ++j) {
      const PlanArg& a = l.args[j];
      std::string v;
      switch (a.kind) {
        case PlanArg::Kind::Pointer:
          v = fmt::format("ptr alloc{}+{} (buffer {}, {})", a.allocation, a.offset, a.buffer, to_string(a.access));
          break;
        case PlanArg::Kind::Null:
          v = "null";
          break;
        case PlanArg::Kind::Int32:
        case PlanArg::Kind::UInt32:
        case PlanArg::Kind::Int64:
          v = fmt::format("{} {}", to_string(a.kind), a.int_value);
          break;
        default:
          v = fmt::format("{} {}", to_string(a.kind), a.float_value);
          break;
      }
      args += fmt::format("{}[{}@{}] {}", j ? ", " : "", j, a.position, v);
    }
    std::string ex;
    if (l.programmatic_dependent_launch) ex += " pdl";
    if (l.cooperative_launch) ex += " cooperative";
    out += fmt::format("launch {}: {} node {} grid [{}, {}, {}] block [{}, {}, {}] smem {}{} params {} bytes: {}\n",
                       l.kernel, l.name, l.node, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                       l.shared_memory, ex, l.param_bytes, args);
  }
  for (const PlanLibraryCall& c : plan.library_calls) {
    auto op = [](const PlanOperand& o) {
      return fmt::format("alloc{}+{} (buffer {})", o.allocation, o.offset, o.buffer);
    };
    if (const Collective* k = c.collective ? &*c.collective : nullptr) {
      out += fmt::format("call {}: {} node {} after kernel {}: {}{} {} {} ({} bytes) from {} into {}\n", c.call, c.name,
                         c.node, c.after_kernel, k->kind, k->reduce_op.empty() ? "" : " " + k->reduce_op, k->elements,
                         k->dtype, k->bytes, c.a.buffer >= 0 ? op(c.a) : std::string("nothing"),
                         c.c.buffer >= 0 ? op(c.c) : std::string("nothing"));
      continue;
    }
    const char tb = c.transb ? 'T' : 'N', ta = c.transa ? 'T' : 'N';
    std::string gemm;
    if (c.batched)
      gemm = fmt::format("cublasSgemmStridedBatched({}, {}, m {}, n {}, k {}, B {} ldb {} stride {}, A {} lda {} "
                         "stride {}, C {} ldc {} stride {}, batch {})",
                         tb, ta, c.m, c.n, c.k, op(c.b), c.ldb, c.stride_b, op(c.a), c.lda, c.stride_a, op(c.c), c.ldc,
                         c.stride_c, c.batch);
    else
      gemm = fmt::format("cublasSgemm_v2({}, {}, m {}, n {}, k {}, B {} ldb {}, A {} lda {}, C {} ldc {})", tb, ta,
                         c.m, c.n, c.k, op(c.b), c.ldb, op(c.a), c.lda, op(c.c), c.ldc);
    out += fmt::format("call {}: {} node {} after kernel {}: {}\n", c.call, c.name, c.node, c.after_kernel, gemm);
  }
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    int b = plan.outputs[i];
    out += fmt::format("output {}: buffer {} {}, {} {}, alloc {}\n", i, b, df.buffers[b].name, df.buffers[b].dtype,
                       shape_text(df.buffers[b].shape), plan.buffer_allocation[b]);
  }
  return out;
}

}  // namespace kdflow
