// program.cpp — generate_program(): the replay plan of every rank as run.cpp, the data blob,
// the CMake project and the README (codegen.h). The program makes exactly the driver calls
// kdflow replay's first eager run makes, in the same order: allocations in plan order, the
// cuBLAS workspace, uploads, then each step (kernel, library call, host copy, collective).
#include "kdflow/codegen/codegen.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "kdflow/formats/npy.h"
#include "kdflow/support/dtype.h"
#include "kdflow/support/io.h"

namespace kdflow::codegen {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

const std::set<std::string>& reserved() {
  static const std::set<std::string> words = {
      "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char", "class", "const",
      "constexpr", "continue", "data", "default", "delete", "do", "double", "else", "enum", "explicit", "export",
      "extern", "false", "float", "for", "friend", "goto", "if", "index", "inline", "int", "long", "main", "mutable",
      "namespace", "new", "noexcept", "not", "nullptr", "operator", "or", "private", "protected", "public",
      "register", "return", "short", "signed", "sizeof", "static", "struct", "switch", "template", "this", "throw",
      "true", "try", "typedef", "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "while",
      "gpu", "k", "mem", "p", "r", "ranks", "kd"};
  return words;
}

/// A C++ identifier from a name of the flow ("layers.0.qkv.weight" → layers_0_qkv_weight).
std::string identifier(const std::string& name, size_t max = 48) {
  std::string out;
  for (char c : name) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    char x = ok ? c : '_';
    if (x == '_' && !out.empty() && out.back() == '_') continue;
    out += x;
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  while (!out.empty() && out.front() == '_') out.erase(out.begin());
  if (out.size() > max) out.resize(max);
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "b_" + out;
  if (reserved().count(out)) out += "_";
  return out;
}

/// Unique identifiers: the second "x" is x_2.
class Names {
 public:
  std::string take(const std::string& base) {
    std::string n = base;
    for (int i = 2; used_.count(n); ++i) n = fmt::format("{}_{}", base, i);
    used_.insert(n);
    return n;
  }

 private:
  std::set<std::string> used_;
};

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

const char* kind_text(BufferKind k) {
  switch (k) {
    case BufferKind::Input: return "input";
    case BufferKind::Param: return "param";
    case BufferKind::Output: return "output";
    case BufferKind::Workspace: return "workspace";
    default: return "intermediate";
  }
}

/// "kd::DType::Float32" for an array dtype (vector lanes are elements of the last dimension).
std::string dtype_enum(DType t) {
  if (t.code == kDLFloat && t.bits == 16) return "kd::DType::Float16";
  if (t.code == kDLFloat && t.bits == 32) return "kd::DType::Float32";
  if (t.code == kDLFloat && t.bits == 64) return "kd::DType::Float64";
  if (t.code == kDLBfloat && t.bits == 16) return "kd::DType::BFloat16";
  if (t.code == kDLUInt && t.bits == 1) return "kd::DType::Bool";
  const char* names[2][4] = {{"Int8", "Int16", "Int32", "Int64"}, {"UInt8", "UInt16", "UInt32", "UInt64"}};
  if ((t.code == kDLInt || t.code == kDLUInt) && (t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64)) {
    int i = t.bits == 8 ? 0 : t.bits == 16 ? 1 : t.bits == 32 ? 2 : 3;
    return std::string("kd::DType::") + names[t.code][i];
  }
  return "";
}

std::string reduce_enum(const std::string& op) {
  if (op == "prod") return "kd::Reduce::Prod";
  if (op == "min") return "kd::Reduce::Min";
  if (op == "max") return "kd::Reduce::Max";
  if (op == "avg") return "kd::Reduce::Avg";
  return "kd::Reduce::Sum";
}

std::string float_literal(double v, bool single) {
  if (std::isnan(v)) return single ? "NAN" : "static_cast<double>(NAN)";
  if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + (single ? "INFINITY" : "static_cast<double>(INFINITY)");
  std::string s = single ? fmt::format("{:.9g}", static_cast<float>(v)) : fmt::format("{:.17g}", v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return single ? s + "f" : s;
}

std::string int64_literal(int64_t v) {
  if (v == INT64_MIN) return "INT64_MIN";
  return fmt::format("INT64_C({})", v);
}

/// The data blob: pieces appended once each (identical bytes shared), 64-byte aligned.
class Blob {
 public:
  uint64_t add(const std::string& bytes) {
    auto key = std::make_pair(fnv1a(bytes), bytes.size());
    if (auto it = seen_.find(key); it != seen_.end() && bytes_.compare(it->second, bytes.size(), bytes) == 0)
      return it->second;
    while (bytes_.size() % 64) bytes_ += '\0';
    uint64_t at = bytes_.size();
    bytes_ += bytes;
    seen_[key] = at;
    return at;
  }
  /// Appended without sharing (a region that must be contiguous).
  uint64_t append(const std::string& bytes) {
    uint64_t at = bytes_.size();
    bytes_ += bytes;
    return at;
  }
  void align() {
    while (bytes_.size() % 64) bytes_ += '\0';
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
  std::map<std::pair<uint64_t, size_t>, uint64_t> seen_;
};

/// A step of one run, in the engine's order (engine_device.cpp, Engine::bind).
struct Step {
  enum Kind { Launch, Call, Copy } kind = Launch;
  size_t index = 0;  ///< plan launch / library call / host copy index
  int node = -1;
};

class Generator {
 public:
  explicit Generator(const ProgramInput& in) : in_(in), df_(*in.flow), plan_(in.plans.at(0)) {}

  Expected<std::vector<GeneratedFile>> run() {
    ranks_ = static_cast<int>(in_.plans.size());
    name_allocations();
    if (Status s = name_kernels(); !s) return s.error();
    if (Status s = read_modules(); !s) return s.error();
    if (Status s = order_steps(); !s) return s.error();
    if (Status s = lay_out_data(); !s) return s.error();
    std::vector<GeneratedFile> files;
    files.push_back({"run.cpp", source()});
    files.push_back({"kdflow_support.h", support_header()});
    files.push_back({"CMakeLists.txt", cmake()});
    files.push_back({"README.md", readme()});
    files.push_back({"data/data.bin", blob_.bytes()});
    for (size_t i = 0; i < module_files_.size(); ++i) files.push_back({"data/" + module_files_[i], module_bytes_[i]});
    return files;
  }

 private:
  // ----- names ---------------------------------------------------------------------------
  void name_allocations() {
    alloc_names_.resize(plan_.allocations.size());
    int ws = 0;
    for (const PlanAllocation& a : plan_.allocations) {
      std::set<std::string> distinct;
      bool named_kind = true;
      for (int b : a.buffers) {
        distinct.insert(df_.buffers[b].name);
        BufferKind k = df_.buffers[b].kind;
        named_kind = named_kind && (k == BufferKind::Input || k == BufferKind::Param || k == BufferKind::Output ||
                                    df_.buffers[b].name.find('.') != std::string::npos);
      }
      std::string base;
      if (a.storage_id < 0) base = fmt::format("ws{}", ws++);
      else if (distinct.size() == 1 && named_kind) base = identifier(*distinct.begin());
      else base = fmt::format("sid{}", a.storage_id);
      alloc_names_[a.id] = names_.take(base);
    }
  }

  Status name_kernels() {
    for (const PlanLaunch& l : plan_.launches) {
      auto [it, fresh] = kernel_index_.emplace(l.name, kernel_names_.size());
      if (fresh) {
        kernel_names_.push_back(names_.take(identifier(l.name, 64)));
        kernel_symbols_.push_back(l.name);
        kernel_smem_.push_back(0);
      }
      kernel_smem_[it->second] = std::max(kernel_smem_[it->second], l.shared_memory);
    }
    return Status::ok();
  }

  /// The module files, copied beside data.bin under their own names.
  Status read_modules() {
    std::set<std::string> taken{"data.bin"};
    for (const std::vector<std::string>& group : in_.modules) {
      std::vector<std::string> files;
      for (const std::string& path : group) {
        Expected<std::string> bytes = read_file(path, 1ull << 31);
        if (!bytes) return bytes.error();
        std::string base = std::filesystem::path(path).filename().string();
        std::string n = base;
        for (int i = 2; taken.count(n); ++i) n = fmt::format("{}_{}", i, base);
        taken.insert(n);
        module_files_.push_back(n);
        module_bytes_.push_back(bytes.take());
        files.push_back(n);
      }
      module_groups_.push_back(files);
    }
    return Status::ok();
  }

  std::string ptr(uint64_t allocation_index, uint64_t offset) const {
    std::string base = "r.mem." + alloc_names_.at(allocation_index);
    return offset ? fmt::format("{} + {}", base, offset) : base;
  }

  std::string node_label(int node) const {
    if (node < 0 || static_cast<size_t>(node) >= df_.nodes.size()) return "";
    const Node& n = df_.nodes[node];
    return n.function.empty() ? n.name : n.function;
  }

  std::string buffer_text(int b) const {
    if (b < 0 || static_cast<size_t>(b) >= df_.buffers.size()) return "?";
    const Buffer& x = df_.buffers[b];
    return fmt::format("{} ({}, {} {}{})", x.name, kind_text(x.kind), x.dtype, shape_text(x.shape),
                       x.per_rank && ranks_ > 1 ? ", per rank" : "");
  }

  // ----- order ---------------------------------------------------------------------------
  Status order_steps() {
    std::vector<std::vector<size_t>> after(df_.kernels.size() + 1);
    for (size_t c = 0; c < plan_.library_calls.size(); ++c) {
      const PlanLibraryCall& p = plan_.library_calls[c];
      if (p.collective) {
        const std::string& k = p.collective->kind;
        if (k != "allreduce" && k != "allgather" && k != "broadcast_from_worker0" && k != "scatter_from_worker0" &&
            k != "gather_to_worker0")
          return json_error(plan_.label, fmt::format("/library_calls/{}", p.call),
                            fmt::format("library call {} is runtime.disco.{}: codegen, like replay, makes allreduce, "
                                        "allgather, broadcast, scatter and gather only (not point-to-point or group "
                                        "transfers)",
                                        p.call, k),
                            ExitCode::Unavailable);
        if (!p.collective->reduce_op.empty() && k == "allreduce" && dtype_enum(*parse_dtype(p.collective->dtype)).empty())
          return json_error(plan_.label, fmt::format("/library_calls/{}", p.call),
                            fmt::format("library call {} reduces {} values, which the program cannot", p.call,
                                        p.collective->dtype),
                            ExitCode::Unavailable);
      }
      after[static_cast<size_t>(p.after_kernel + 1)].push_back(c);
    }
    auto call_step = [&](size_t c) { steps_.push_back({Step::Call, c, plan_.library_calls[c].node}); };
    for (size_t c : after[0]) call_step(c);
    for (size_t i = 0; i < plan_.launches.size(); ++i) {
      steps_.push_back({Step::Launch, i, plan_.launches[i].node});
      for (size_t c : after[static_cast<size_t>(plan_.launches[i].kernel + 1)]) call_step(c);
    }
    // Host copies: before the first step of a later node (Engine::bind).
    std::vector<Step> with;
    size_t c = 0;
    for (size_t s = 0; s <= steps_.size(); ++s) {
      while (c < plan_.host_copies.size() && (s == steps_.size() || steps_[s].node > plan_.host_copies[c].node)) {
        with.push_back({Step::Copy, c, plan_.host_copies[c].node});
        ++c;
      }
      if (s < steps_.size()) with.push_back(steps_[s]);
    }
    steps_ = std::move(with);
    return Status::ok();
  }

  bool is_collective(const Step& s) const { return s.kind == Step::Call && plan_.library_calls[s.index].collective; }
  size_t timed_steps() const {
    size_t n = 0;
    for (const Step& s : steps_) n += s.kind == Step::Launch || (s.kind == Step::Call && !is_collective(s)) ? 1 : 0;
    return n;
  }

  // ----- data ----------------------------------------------------------------------------
  Status lay_out_data() {
    // Uploads: per rank, in plan order (the ranks' plans list the same buffers).
    upload_at_.assign(plan_.uploads.size(), std::vector<uint64_t>(static_cast<size_t>(ranks_)));
    for (int r = 0; r < ranks_; ++r) {
      const ReplayPlan& p = in_.plans[static_cast<size_t>(r)];
      if (p.uploads.size() != plan_.uploads.size() || p.allocations.size() != plan_.allocations.size() ||
          p.launches.size() != plan_.launches.size())
        return Error{fmt::format("{}: rank {}'s plan differs from rank 0's in shape", plan_.label, r),
                     ExitCode::DataError};
      for (size_t u = 0; u < p.uploads.size(); ++u) upload_at_[u][static_cast<size_t>(r)] = blob_.add(p.uploads[u].data);
    }
    // Host copies: one contiguous region (--graph stages it in page-locked memory).
    blob_.align();
    copies_from_ = blob_.bytes().size();
    for (const PlanHostCopy& h : plan_.host_copies) copy_at_.push_back(blob_.append(h.data));
    copies_to_ = blob_.bytes().size();
    // References, checked against the outputs now rather than when the program runs.
    for (size_t i = 0; i < plan_.outputs.size() && i < in_.expect.size(); ++i) {
      if (in_.expect[i].empty()) continue;
      Expected<NpyArray> want = read_npy(in_.expect[i]);
      if (!want) return want.error();
      const Buffer& b = df_.buffers[plan_.outputs[i]];
      NpyArray have = buffer_array(b, "");
      if (have.shape != want->shape)
        return file_error(in_.expect[i], fmt::format("shape {} is not output {}'s ({} {})", shape_text(want->shape), i,
                                                     b.name, shape_text(have.shape)),
                          ExitCode::DataError);
      std::string at = dtype_enum(have.dtype), et = dtype_enum(want->dtype);
      if (at.empty() || et.empty())
        return file_error(in_.expect[i], fmt::format("output {} ({}) or its reference has an element type the "
                                                     "program does not compare ({}, {})",
                                                     i, b.name, dtype_to_string(have.dtype),
                                                     dtype_to_string(want->dtype)),
                          ExitCode::DataError);
      Reference ref;
      ref.output = i;
      ref.file = std::filesystem::path(in_.expect[i]).filename().string();
      ref.at = blob_.add(want->data);
      ref.count = want->count();
      ref.bytes = buffer_array_bytes(b);
      ref.actual = at;
      ref.expected = et;
      refs_.push_back(ref);
    }
    return Status::ok();
  }

  // ----- run.cpp -------------------------------------------------------------------------
  std::string source() {
    std::string o;
    o += fmt::format(
        "// run.cpp — {}: the model's kernels launched in the order TVM's runtime launches them, with the\n"
        "// same grids, blocks, shared memory and arguments, on buffers of the same sizes; then the outputs\n"
        "// compared with TVM's. Generated by `{}`; kdflow_support.h holds the rest (the CUDA\n"
        "// driver API loaded at run time, data.bin, cuBLAS, comparisons). README.md says where to start.\n",
        in_.title, in_.command);
    o += "//\n// Build: cmake -S . -B build && cmake --build build      Run: build/run [--repeat N] [--timing] "
         "[--graph]\n";
    o += "#include \"kdflow_support.h\"\n\nnamespace {\n\n";
    o += fmt::format("constexpr int kRanks = {};  // {}\n", ranks_,
                     ranks_ > 1 ? "tensor-parallel: every rank runs this program on its own shard of the weights"
                                : "one GPU");
    o += fmt::format("constexpr uint64_t kDataBytes = {};  // data.bin\n", blob_.bytes().size());
    o += fmt::format("constexpr uint64_t kDataHash = 0x{:016x}ull;  // its FNV-1a\n", fnv1a(blob_.bytes()));
    o += fmt::format("constexpr uint64_t kHostCopiesFrom = {}, kHostCopiesTo = {};  // the host copies' bytes in "
                     "data.bin\n",
                     copies_from_, copies_to_);
    o += fmt::format("constexpr size_t kTimedSteps = {};  // kernels and library calls of one run\n\n",
                     timed_steps());
    o += step_names_text();
    o += modules_text();
    o += memory_text();
    o += kernels_text();
    o += "/// What one rank holds: its GPU context and stream, its kernels, its buffers.\nstruct Rank {\n"
         "  int index = 0;\n  kd::Gpu gpu;\n  Kernels k;\n  Memory mem;\n  kd::Cublas blas;\n"
         "  kd::CUdeviceptr blas_workspace = 0;\n};\n\n";
    o += allocate_text();
    o += upload_text();
    o += steps_text();
    o += run_once_text();
    o += outputs_text();
    o += "}  // namespace\n\n";
    o += main_text();
    return fit_comments(o);
  }

  /// No line longer than 120 columns because of a comment: a trailing comment that does not fit
  /// goes above its code, and a comment is wrapped at spaces, so that clang-format (whose
  /// versions reflow long comments differently) has no comment to reflow.
  static std::string fit_comments(const std::string& text) {
    constexpr size_t kColumns = 120;
    auto wrap = [&](const std::string& indent, const std::string& marker, const std::string& words) {
      std::string out, line;
      size_t i = 0;
      while (i < words.size()) {
        size_t sp = words.find(' ', i);
        std::string w = words.substr(i, sp == std::string::npos ? std::string::npos : sp - i);
        i = sp == std::string::npos ? words.size() : sp + 1;
        if (w.empty()) continue;
        if (!line.empty() && indent.size() + marker.size() + 1 + line.size() + 1 + w.size() > kColumns) {
          out += indent + marker + " " + line + "\n";
          line.clear();
        }
        line += (line.empty() ? "" : " ") + w;
      }
      if (!line.empty()) out += indent + marker + " " + line + "\n";
      return out;
    };
    std::string out;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(start, end - start);
      start = end + 1;
      if (line.size() <= kColumns) {
        out += line + "\n";
        continue;
      }
      const size_t code = line.find_first_not_of(' ');
      const std::string indent = line.substr(0, code == std::string::npos ? 0 : code);
      const std::string body = line.substr(indent.size());
      if (body.rfind("//", 0) == 0) {
        const size_t words = body.find_first_not_of('/');
        const std::string marker = body.substr(0, words == std::string::npos ? body.size() : words);
        out += wrap(indent, marker, words == std::string::npos ? "" : body.substr(words));
        continue;
      }
      const size_t c = line.find("  // ");
      if (c == std::string::npos || line.find('"') != std::string::npos) {
        out += line + "\n";
        continue;
      }
      out += wrap(indent, "//", line.substr(c + 5));
      out += line.substr(0, c) + "\n";
    }
    return out;
  }

  std::string step_names_text() const {
    std::string o = "/// What each timed step is (--timing).\nconst char* const kStepNames[kTimedSteps + 1] = {";
    for (const Step& s : steps_) {
      if (s.kind == Step::Launch) {
        const PlanLaunch& l = plan_.launches[s.index];
        o += fmt::format("\n    \"kernel {} {}\",", l.kernel, escape(l.name));
      } else if (s.kind == Step::Call && !is_collective(s)) {
        const PlanLibraryCall& c = plan_.library_calls[s.index];
        o += fmt::format("\n    \"library call {} {}\",", c.call, escape(c.name));
      }
    }
    return o + "\n    \"\"};\n\n";
  }

  std::string modules_text() const {
    std::string o = "/// The device modules, each as its alternative files (binaries first), in data/.\n";
    o += "const std::vector<kd::Module> kModules = {";
    for (size_t m = 0; m < module_groups_.size(); ++m) {
      o += m ? ",\n    {{" : "\n    {{";
      for (size_t f = 0; f < module_groups_[m].size(); ++f) o += fmt::format("{}\"{}\"", f ? ", " : "", module_groups_[m][f]);
      o += "}}";
    }
    o += module_groups_.empty() ? "};  // this model launches no kernel\n\n" : "};\n\n";
    return o;
  }

  std::string memory_text() const {
    std::string o =
        "/// One rank's device memory: one allocation per storage id (TVM shares one among the buffers\n"
        "/// whose lifetimes do not overlap) and per workspace, in the order replay allocates them.\n"
        "struct Memory {\n";
    for (const PlanAllocation& a : plan_.allocations) {
      std::string bufs;
      for (size_t i = 0; i < a.buffers.size() && i < 4; ++i) bufs += (i ? ", " : "") + df_.buffers[a.buffers[i]].name;
      if (a.buffers.size() > 4) bufs += fmt::format(" and {} more", a.buffers.size() - 4);
      o += fmt::format("  kd::CUdeviceptr {} = 0;  // {} bytes{}: {}\n", alloc_names_[a.id], a.bytes,
                       a.storage_id >= 0 ? fmt::format(", storage {}", a.storage_id) : std::string(", workspace"),
                       bufs);
    }
    return o + "};\n\n";
  }

  std::string kernels_text() const {
    std::string o = "/// The kernels, by their names in the device modules (and the dynamic shared memory to allow).\n"
                    "struct Kernels {\n";
    for (size_t k = 0; k < kernel_names_.size(); ++k)
      o += fmt::format("  kd::Kernel {}{{\"{}\", {}}};\n", kernel_names_[k], kernel_symbols_[k], kernel_smem_[k]);
    return o + "};\n\n";
  }

  std::string allocate_text() const {
    std::string o = "/// Every allocation (sizes as TVM's runtime makes them), then cuBLAS's workspace.\n"
                    "void allocate(Rank& r) {\n";
    if (plan_.allocations.empty() && !has_blas()) o += "  (void)r;\n";
    for (const PlanAllocation& a : plan_.allocations)
      o += fmt::format("  r.mem.{0} = r.gpu.alloc({1}, \"{0}\");\n", alloc_names_[a.id], a.bytes);
    if (has_blas()) {
      o += "  // cuBLAS works in a 32 MiB workspace of its own (as replay gives it), on the rank's stream.\n"
           "  r.blas.load();\n"
           "  r.blas.check(r.blas.create(&r.blas.handle), \"cublasCreate_v2\");\n"
           "  r.blas.check(r.blas.set_stream(r.blas.handle, r.gpu.stream), \"cublasSetStream_v2\");\n"
           "  if (r.blas.set_workspace) {\n"
           "    r.blas_workspace = r.gpu.alloc(32u << 20, \"the cuBLAS workspace\");\n"
           "    r.blas.check(r.blas.set_workspace(r.blas.handle, reinterpret_cast<void*>(r.blas_workspace), 32u << 20),\n"
           "                 \"cublasSetWorkspace_v2\");\n"
           "  }\n"
           "  r.gpu.blas = &r.blas;\n";
    }
    return o + "}\n\n";
  }

  bool has_blas() const {
    return std::any_of(plan_.library_calls.begin(), plan_.library_calls.end(),
                       [](const PlanLibraryCall& c) { return !c.collective; });
  }

  std::string upload_text() const {
    std::string o = "/// The params and inputs, from data.bin.\nvoid upload(Rank& r, const kd::Data& data) {\n";
    if (plan_.uploads.empty()) o += "  (void)r;\n  (void)data;\n";
    for (size_t u = 0; u < plan_.uploads.size(); ++u) {
      const PlanUpload& up = plan_.uploads[u];
      const std::vector<uint64_t>& at = upload_at_[u];
      bool same = std::all_of(at.begin(), at.end(), [&](uint64_t x) { return x == at[0]; });
      std::string where;
      std::string src = up.source;
      if (same) {
        where = fmt::format("data.at({})", at[0]);
      } else {
        std::string list;
        for (size_t r = 0; r < at.size(); ++r) list += (r ? ", " : "") + std::to_string(at[r]);
        o += fmt::format("  static const uint64_t {}_at[kRanks] = {{{}}};  // each rank's shard\n",
                         alloc_names_[up.allocation], list);
        where = fmt::format("data.at({}_at[r.index])", alloc_names_[up.allocation]);
        src = "params_shard<r>.bin:" + up.source.substr(up.source.find(':') + 1);
      }
      o += fmt::format("  r.gpu.upload(r.mem.{}, {}, {}, \"{}\");\n", alloc_names_[up.allocation], where,
                       up.data.size(), escape(src));
    }
    return o + "}\n\n";
  }

  static std::string escape(const std::string& s) {
    std::string o;
    for (char c : s) {
      if (c == '"' || c == '\\') o += '\\';
      if (static_cast<unsigned char>(c) < 32 || c == '?') {
        o += fmt::format("\\{:03o}", static_cast<unsigned char>(c));
        continue;
      }
      o += c;
    }
    return o;
  }
  /// Text for a // comment: one line, no backslash at the end.
  static std::string comment(const std::string& s) {
    std::string o;
    for (char c : s) o += (c == '\n' || c == '\r') ? ' ' : c;
    while (!o.empty() && o.back() == '\\') o.pop_back();
    return o;
  }

  std::string launch_text(size_t i) const {
    const PlanLaunch& l = plan_.launches[i];
    const Kernel* k = l.kernel >= 0 && static_cast<size_t>(l.kernel) < df_.kernels.size() ? &df_.kernels[l.kernel]
                                                                                           : nullptr;
    std::string o = fmt::format("  // kernel {}: {}\n", l.kernel, comment(l.name));
    o += fmt::format("  kd::Params p{}({});\n", l.kernel, l.param_bytes);
    for (size_t j = 0; j < l.args.size(); ++j) {
      const PlanArg& a = l.args[j];
      const Arg* ka = k && j < k->args.size() ? &k->args[j] : nullptr;
      std::string call, note;
      switch (a.kind) {
        case PlanArg::Kind::Pointer:
          call = fmt::format("ptr({}, {})", a.position, ptr(static_cast<uint64_t>(a.allocation), a.offset));
          note = buffer_text(a.buffer) + (a.access != Access::Unknown ? std::string(", ") + to_string(a.access) : "");
          break;
        case PlanArg::Kind::Null:
          call = fmt::format("ptr({}, 0)", a.position);
          note = "null";
          break;
        case PlanArg::Kind::Int32:
          call = fmt::format("i32({}, {})", a.position, static_cast<int32_t>(static_cast<uint32_t>(a.int_value)));
          break;
        case PlanArg::Kind::UInt32:
          call = fmt::format("u32({}, {}u)", a.position, static_cast<uint32_t>(a.int_value));
          break;
        case PlanArg::Kind::Int64:
          call = fmt::format("i64({}, {})", a.position, int64_literal(a.int_value));
          break;
        case PlanArg::Kind::Float16: {
          std::string packed = pack_arguments(l, std::vector<uint64_t>(plan_.allocations.size(), 0));
          uint16_t bits = 0;
          std::memcpy(&bits, packed.data() + a.position, 2);
          call = fmt::format("f16({}, 0x{:04x})", a.position, bits);
          note = fmt::format("{:g} as float16", a.float_value);
          break;
        }
        case PlanArg::Kind::Float32:
          call = fmt::format("f32({}, {})", a.position, float_literal(a.float_value, true));
          break;
        case PlanArg::Kind::Float64:
          call = fmt::format("f64({}, {})", a.position, float_literal(a.float_value, false));
          break;
      }
      if (a.kind != PlanArg::Kind::Pointer && a.kind != PlanArg::Kind::Null && ka && !ka->expr.empty() &&
          ka->expr != std::to_string(a.int_value))
        note = (note.empty() ? "" : note + "; ") + ka->expr;
      o += fmt::format("  p{}.{};{}\n", l.kernel, call, note.empty() ? "" : "  // " + comment(note));
    }
    std::string attrs = "kd::kNoAttributes";
    if (l.programmatic_dependent_launch && l.cooperative_launch)
      attrs = "kd::kProgrammaticDependentLaunch | kd::kCooperative";
    else if (l.programmatic_dependent_launch)
      attrs = "kd::kProgrammaticDependentLaunch";
    else if (l.cooperative_launch)
      attrs = "kd::kCooperative";
    o += fmt::format("  r.gpu.launch(r.k.{}, {{{}, {}, {}}}, {{{}, {}, {}}}, {}, p{}{});\n",
                     kernel_names_[kernel_index_.at(l.name)], l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                     l.block[2], l.shared_memory, l.kernel, attrs == "kd::kNoAttributes" ? "" : ", " + attrs);
    return o;
  }

  std::string call_text(size_t c) const {
    const PlanLibraryCall& p = plan_.library_calls[c];
    std::string o = fmt::format("  // library call {}: {} — C ({}) = op(A) ({}) · op(B) ({})\n", p.call, p.name,
                                df_.buffers[p.c.buffer].name, df_.buffers[p.a.buffer].name,
                                df_.buffers[p.b.buffer].name);
    const std::string what = fmt::format("library call {} ({})", p.call, p.name);
    if (p.batched)
      o += fmt::format("  r.gpu.sgemm_batched({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, \"{}\");\n",
                       p.transa, p.transb, p.m, p.n, p.k, ptr(p.a.allocation, p.a.offset), p.lda, p.stride_a,
                       ptr(p.b.allocation, p.b.offset), p.ldb, p.stride_b, ptr(p.c.allocation, p.c.offset), p.ldc,
                       p.stride_c, p.batch, what);
    else
      o += fmt::format("  r.gpu.sgemm({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, \"{}\");\n", p.transa, p.transb, p.m,
                       p.n, p.k, ptr(p.a.allocation, p.a.offset), p.lda, ptr(p.b.allocation, p.b.offset), p.ldb,
                       ptr(p.c.allocation, p.c.offset), p.ldc, what);
    return o;
  }

  std::string collective_function(size_t c) const {
    const PlanLibraryCall& p = plan_.library_calls[c];
    const Collective& x = *p.collective;
    std::string dt = dtype_enum(*parse_dtype(x.dtype));
    std::string o = fmt::format("/// Collective {} (node {}): {}{} of {} {} ({} bytes per rank){}{}.\n", p.call, p.node,
                                x.kind, x.reduce_op.empty() ? "" : " (" + x.reduce_op + ")", x.elements, x.dtype,
                                x.bytes, p.a.buffer >= 0 ? ", sends " + df_.buffers[p.a.buffer].name : "",
                                p.c.buffer >= 0 ? ", receives into " + df_.buffers[p.c.buffer].name : "");
    o += fmt::format("void collective_{}(std::vector<Rank>& ranks) {{\n", p.call);
    o += "  std::vector<std::string> sent;\n  for (Rank& r : ranks) {\n    r.gpu.sync();\n";
    o += fmt::format("    sent.push_back(r.gpu.download({}, {}, \"collective {}\"));\n  }}\n",
                     ptr(p.a.allocation, p.a.offset), p.a.bytes, p.call);
    const std::string recv = ptr(p.c.allocation, p.c.offset);
    const std::string name = fmt::format("\"collective {}\"", p.call);
    if (x.kind == "allreduce") {
      o += fmt::format("  const std::string result = kd::reduce(sent, {}, {});\n", dt, reduce_enum(x.reduce_op));
      o += fmt::format("  for (Rank& r : ranks) r.gpu.upload({}, result.data(), result.size(), {});\n", recv, name);
    } else if (x.kind == "allgather" || x.kind == "gather_to_worker0") {
      o += "  std::string all;\n  for (const std::string& s : sent) all += s;  // in rank order\n";
      o += x.kind == "allgather"
               ? fmt::format("  for (Rank& r : ranks) r.gpu.upload({}, all.data(), all.size(), {});\n", recv, name)
               : fmt::format("  Rank& r = ranks[0];\n  r.gpu.upload({}, all.data(), all.size(), {});\n", recv, name);
    } else if (x.kind == "broadcast_from_worker0") {
      o += fmt::format("  for (Rank& r : ranks) r.gpu.upload({}, sent[0].data(), sent[0].size(), {});\n", recv, name);
    } else {  // scatter_from_worker0
      o += "  const size_t piece = sent[0].size() / ranks.size();\n";
      o += fmt::format("  for (Rank& r : ranks) r.gpu.upload({}, sent[0].data() + piece * static_cast<size_t>(r.index), "
                       "piece, {});\n",
                       recv, name);
    }
    return o + "}\n\n";
  }

  std::string host_copy_text(size_t c) const {
    const PlanHostCopy& h = plan_.host_copies[c];
    const HostCopy& hc = df_.host_copies.at(static_cast<size_t>(h.copy));
    std::string arrays;
    for (const HostCopy::Array& a : hc.arrays) arrays += (arrays.empty() ? "" : ", ") + a.name;
    return fmt::format("  // host copy {} (node {}): {} {} values{} into {}\n"
                       "  r.gpu.host_copy({}, data, {}, {}, \"host copy {}\");\n",
                       h.copy, h.node, hc.values.size(), hc.dtype, arrays.empty() ? "" : " (" + arrays + ")",
                       df_.buffers[h.buffer].name, ptr(h.allocation, h.offset), copy_at_[c], h.data.size(), h.copy);
  }

  /// One function per node (its consecutive kernels and library calls); host copies and
  /// collectives are made by run_once between them.
  std::string steps_text() {
    std::string o;
    Names fn;
    for (size_t s = 0; s < steps_.size();) {
      const Step& st = steps_[s];
      if (st.kind == Step::Copy) {
        calls_.push_back({Group::Copy, st.index, ""});
        ++s;
        continue;
      }
      if (is_collective(st)) {
        o += collective_function(st.index);
        calls_.push_back({Group::Collective, st.index, fmt::format("collective_{}", plan_.library_calls[st.index].call)});
        ++s;
        continue;
      }
      size_t e = s;
      while (e < steps_.size() && steps_[e].kind != Step::Copy && !is_collective(steps_[e]) && steps_[e].node == st.node)
        ++e;
      std::string name = fn.take(fmt::format("node{}_{}", st.node, identifier(node_label(st.node), 40)));
      const Node* n = st.node >= 0 && static_cast<size_t>(st.node) < df_.nodes.size() ? &df_.nodes[st.node] : nullptr;
      std::string ops;
      if (n)
        for (const RelayOp& op : n->relay_ops) ops += (ops.empty() ? "" : ", ") + op.name;
      size_t launches = 0, calls = 0;
      for (size_t x = s; x < e; ++x) (steps_[x].kind == Step::Launch ? launches : calls) += 1;
      o += fmt::format("/// Node {}{}{}{}: {} kernel{}{}.\n", st.node, n ? " " + comment(n->name) : "",
                       n && !n->function.empty() && n->function != n->name ? " (" + comment(n->function) + ")" : "",
                       ops.empty() ? "" : " — " + comment(ops), launches, launches == 1 ? "" : "s",
                       calls ? fmt::format(", {} library call{}", calls, calls == 1 ? "" : "s") : "");
      o += fmt::format("void {}(Rank& r) {{\n", name);
      for (size_t x = s; x < e; ++x) {
        if (x > s) o += "\n";
        o += steps_[x].kind == Step::Launch ? launch_text(steps_[x].index) : call_text(steps_[x].index);
      }
      o += "}\n\n";
      calls_.push_back({Group::Node, s, name, st.node});
      s = e;
    }
    return o;
  }

  std::string session_step(int node) const {
    if (node < 0 || static_cast<size_t>(node) >= df_.nodes.size()) return "";
    return df_.nodes[node].session_step;
  }

  std::string run_once_text() const {
    std::string o = "/// One run of the model, step by step in TVM's order.\n";
    if (ranks_ == 1) {
      o += "void run_once(Rank& r, const kd::Data& data) {\n  (void)data;\n";
      if (calls_.empty()) o += "  (void)r;  // this model launches nothing\n";
      std::string step;
      for (const Group& g : calls_) {
        std::string ss = g.kind == Group::Copy ? session_step(plan_.host_copies[g.index].node) : session_step(g.node);
        if (!ss.empty() && ss != step) o += fmt::format("  // --- session step: {}\n", comment(ss));
        if (!ss.empty()) step = ss;
        if (g.kind == Group::Copy) o += host_copy_text(g.index);
        else o += fmt::format("  {}(r);\n", g.name);
      }
      return o + "}\n\n";
    }
    o += "/// Every rank runs the same steps on its own buffers; a collective waits for all of them.\n";
    o += "void run_once(std::vector<Rank>& ranks, const kd::Data& data) {\n  (void)data;\n";
    bool open = false;
    for (const Group& g : calls_) {
      if (g.kind == Group::Collective) {
        if (open) o += "  }\n";
        open = false;
        o += fmt::format("  {}(ranks);\n", g.name);
        continue;
      }
      if (!open) o += "  for (Rank& r : ranks) {\n";
      open = true;
      if (g.kind == Group::Copy) {
        std::string t = host_copy_text(g.index);
        std::string indented;
        for (size_t a = 0, b; a < t.size(); a = b + 1) {
          b = t.find('\n', a);
          indented += "  " + t.substr(a, b - a + 1);
        }
        o += indented;
      } else {
        o += fmt::format("    {}(r);\n", g.name);
      }
    }
    if (open) o += "  }\n";
    return o + "}\n\n";
  }

  std::string outputs_text() const {
    std::string o = "/// One output's comparison, as a line.\n";
    o += "[[maybe_unused]] void report(const kd::Check& c, int rank, int output, const char* name, int* compared, int* differ,\n"
         "            int* uninformative) {\n"
         "  ++*compared;\n  if (!c.pass) ++*differ;\n  if (c.uninformative) ++*uninformative;\n"
         "  std::printf(\"%soutput %d (%s): %s, %llu elements, %llu differ, max abs %.3g, max rel %.3g%s\\n\",\n"
         "              kRanks > 1 ? (\"rank \" + std::to_string(rank) + \" \").c_str() : \"\", output, name,\n"
         "              c.pass ? \"ok\" : \"DIFFERS\", static_cast<unsigned long long>(c.elements),\n"
         "              static_cast<unsigned long long>(c.mismatches), c.max_abs, c.max_rel,\n"
         "              c.uninformative ? \" (a constant array would pass too)\" : \"\");\n}\n\n";
    o += "/// The outputs after the last run, against TVM's references (replay's tolerances).\n";
    o += "int check_outputs(std::vector<Rank>& ranks, const kd::Data& data, const kd::Options& opt) {\n";
    o += "  int compared = 0, differ = 0, uninformative = 0;\n";
    if (refs_.empty()) {
      o += "  (void)ranks;\n  (void)data;\n  (void)opt;\n";
    } else {
      o += "  for (Rank& r : ranks) {\n    r.gpu.sync();\n";
      for (const Reference& ref : refs_) {
        const int b = plan_.outputs[ref.output];
        const int al = plan_.buffer_allocation[static_cast<size_t>(b)];
        o += fmt::format("    {{  // output {}: {} against {}\n", ref.output, comment(buffer_text(b)),
                         comment(ref.file));
        o += fmt::format("      const std::string got = r.gpu.download(r.mem.{}, {}, \"output {}\");\n",
                         alloc_names_[static_cast<size_t>(al)], ref.bytes, ref.output);
        o += fmt::format("      const kd::Check c = kd::compare(got, {}, data.at({}), {}, {}, opt.rtol, opt.atol);\n",
                         ref.actual, ref.at, ref.expected, ref.count);
        o += fmt::format("      report(c, r.index, {}, \"{}\", &compared, &differ, &uninformative);\n    }}\n",
                         ref.output, escape(df_.buffers[b].name));
      }
      o += "  }\n";
    }
    o += "  if (compared == 0) std::printf(\"no output compared (no reference)\\n\");\n";
    o += "  else if (uninformative == compared)\n"
         "    std::printf(\"note: each comparison would pass with a constant array: nothing was verified\\n\");\n";
    o += "  return differ ? kd::kDiffer : kd::kMatch;\n}\n\n";
    return o;
  }

  std::string main_text() const {
    std::string o;
    o += "int main(int argc, char** argv) {\n";
    o += "  const kd::Options opt = kd::parse_options(\n"
         "      argc, argv, \"usage: run [--repeat N] [--timing] [--graph] [--gpu N] [--data DIR] [--rtol X] [--atol X]\",\n";
    o += fmt::format("      /*rtol=*/{}, /*atol=*/{});\n", float_literal(in_.rtol, false), float_literal(in_.atol, false));
    o += "  kd::Data data;\n  data.load(kd::data_dir(opt.data), kDataBytes, kDataHash);\n";
    o += "  kd::Driver driver;\n  driver.load();\n  driver.check(driver.cuInit(0), \"cuInit\");\n";
    o += "  int gpus = 0;\n  driver.check(driver.cuDeviceGetCount(&gpus), \"cuDeviceGetCount\");\n";
    o += "  if (gpus < 1) kd::fail(kd::kNoGpu, \"%s: no CUDA device\", driver.path.c_str());\n";
    o += "  if (opt.gpu >= gpus) kd::fail(kd::kUsage, \"--gpu %d: there are %d devices\", opt.gpu, gpus);\n\n";
    o += "  std::vector<Rank> ranks(kRanks);\n";
    o += "  for (int i = 0; i < kRanks; ++i) {\n    Rank& r = ranks[static_cast<size_t>(i)];\n    r.index = i;\n";
    o += "    r.gpu.open(driver, opt.gpu >= 0 ? opt.gpu : i % gpus);  // ranks beyond the GPUs share them\n";
    o += "    r.gpu.load_modules(data.dir, kModules);\n";
    for (size_t k = 0; k < kernel_names_.size(); ++k) o += fmt::format("    r.gpu.find(r.k.{});\n", kernel_names_[k]);
    o += "    allocate(r);\n    upload(r, data);\n    r.gpu.sync();\n  }\n\n";
    std::string run = ranks_ == 1 ? "run_once(ranks[0], data)" : "run_once(ranks, data)";
    o += "  if (opt.graph) {\n";
    if (ranks_ > 1) {
      o += "    kd::fail(kd::kUsage, \"--graph: a sharded model's collectives run on the host between ranks; run it "
           "eagerly\");\n";
    } else {
      o += "    // One run captured from the stream as a CUDA graph, then launched --repeat times.\n"
           "    Rank& r = ranks[0];\n"
           "    void* pinned = nullptr;\n"
           "    if (kHostCopiesTo > kHostCopiesFrom) {\n"
           "      driver.check(driver.cuMemHostAlloc(&pinned, kHostCopiesTo - kHostCopiesFrom, 0), \"cuMemHostAlloc\");\n"
           "      std::memcpy(pinned, data.at(kHostCopiesFrom), kHostCopiesTo - kHostCopiesFrom);\n"
           "      r.gpu.pinned_base = static_cast<const char*>(pinned);\n"
           "      r.gpu.pinned_from = kHostCopiesFrom;\n"
           "    }\n"
           "    kd::CUgraph graph = nullptr;\n"
           "    kd::CUgraphExec exec = nullptr;\n"
           "    driver.check(driver.cuStreamBeginCapture(r.gpu.stream, kd::CU_STREAM_CAPTURE_MODE_GLOBAL),\n"
           "                 \"cuStreamBeginCapture\");\n"
           "    r.gpu.capturing = true;\n"
           "    run_once(r, data);\n"
           "    r.gpu.capturing = false;\n"
           "    driver.check(driver.cuStreamEndCapture(r.gpu.stream, &graph), \"cuStreamEndCapture\");\n"
           "    driver.check(driver.cuGraphInstantiateWithFlags(&exec, graph, 0), \"cuGraphInstantiateWithFlags\");\n"
           "    std::vector<double> wall;\n"
           "    for (int i = 0; i < opt.repeat; ++i) {\n"
           "      const double t0 = kd::now_us();\n"
           "      driver.check(driver.cuGraphLaunch(exec, r.gpu.stream), \"cuGraphLaunch\");\n"
           "      r.gpu.sync();\n"
           "      wall.push_back(kd::now_us() - t0);\n"
           "    }\n"
           "    std::printf(\"graph: median %.2f us per launch of the whole graph (%d launches)\\n\", kd::median(wall),\n"
           "                opt.repeat);\n";
    }
    o += "  } else {\n";
    o += "    std::vector<std::vector<std::vector<double>>> per_step(kRanks, std::vector<std::vector<double>>(kTimedSteps));\n";
    o += "    std::vector<double> wall;\n";
    o += "    for (int i = 0; i < opt.repeat; ++i) {\n";
    o += "      if (opt.timing)\n        for (Rank& r : ranks) r.gpu.start_timing(kTimedSteps);\n";
    o += "      const double t0 = kd::now_us();\n";
    o += fmt::format("      {};\n", run);
    o += "      for (Rank& r : ranks) r.gpu.sync();\n"
         "      wall.push_back(kd::now_us() - t0);\n"
         "      if (!opt.timing) continue;\n"
         "      for (Rank& r : ranks)\n"
         "        for (size_t s = 0; s < kTimedSteps; ++s) per_step[static_cast<size_t>(r.index)][s].push_back(r.gpu.step_us(s));\n"
         "    }\n";
    o += "    std::printf(\"eager: median %.2f us per run, host clock, launches included (%d runs)\\n\", kd::median(wall),\n"
         "                opt.repeat);\n";
    o += "    if (opt.timing)\n"
         "      for (int rank = 0; rank < kRanks; ++rank) {\n"
         "        double total = 0;\n"
         "        for (size_t s = 0; s < kTimedSteps; ++s) {\n"
         "          const double m = kd::median(per_step[static_cast<size_t>(rank)][s]);\n"
         "          total += m;\n"
         "          std::printf(\"%s%9.2f us  %s\\n\", kRanks > 1 ? (\"rank \" + std::to_string(rank) + \" \").c_str() : \"\", m,\n"
         "                      kStepNames[s]);\n"
         "        }\n"
         "        std::printf(\"%ssum of the steps' medians: %.2f us over %d runs\\n\",\n"
         "                    kRanks > 1 ? (\"rank \" + std::to_string(rank) + \" \").c_str() : \"\", total, opt.repeat);\n"
         "      }\n";
    o += "  }\n  return check_outputs(ranks, data, opt);\n}\n";
    return o;
  }

  // ----- CMakeLists.txt and README.md ------------------------------------------------------
  std::string cmake() const {
    return "# Builds `run` from run.cpp and kdflow_support.h: any C++17 compiler, no CUDA toolkit (the driver\n"
           "# is loaded at run time). Written by kdflow codegen.\n"
           "cmake_minimum_required(VERSION 3.13)\n"
           "project(kdflow_program CXX)\n"
           "set(CMAKE_CXX_STANDARD 17)\n"
           "set(CMAKE_CXX_STANDARD_REQUIRED ON)\n"
           "set(CMAKE_CXX_EXTENSIONS OFF)\n"
           "add_executable(run run.cpp)\n"
           "# The data folder, found from any working directory (run --data DIR names another).\n"
           "target_compile_definitions(run PRIVATE KDFLOW_DATA_DIR=\"${CMAKE_CURRENT_SOURCE_DIR}/data\")\n"
           "target_link_libraries(run PRIVATE ${CMAKE_DL_LIBS})\n"
           "if(CMAKE_CXX_COMPILER_ID MATCHES \"GNU|Clang\")\n"
           "  target_compile_options(run PRIVATE -Wall -Wextra)\n"
           "endif()\n";
  }

  std::string readme() const {
    std::string o = fmt::format("# {}: TVM's kernels as a program of its own\n\n", in_.title);
    o += fmt::format("Written by `{} -o {}`. It launches the {} kernel{}{}{} of the model in the order TVM's runtime "
                     "launches them, with the same grids, blocks, shared memory and arguments, on buffers of the "
                     "same sizes, then compares the outputs with TVM's{}. It needs no TVM, kdflow or CUDA toolkit: "
                     "the CUDA driver (`libcuda.so.1`) is loaded when it runs.\n\n",
                     in_.command, in_.out_name, plan_.launches.size(), plan_.launches.size() == 1 ? "" : "s",
                     has_blas() ? ", the cuBLAS calls" : "",
                     plan_.host_copies.empty() ? "" : ", the KV cache's host copies",
                     ranks_ > 1 ? fmt::format(" and the collectives of its {} ranks", ranks_) : "",
                     refs_.empty() ? " (this one has no reference to compare with)" : "");
    o += "    cmake -S . -B build && cmake --build build\n"
         "    build/run                  # one run; outputs compared\n"
         "    build/run --repeat 100 --timing   # each kernel's median time (CUDA events)\n"
         "    build/run --graph --repeat 100    # one run captured as a CUDA graph, launched 100 times\n\n";
    o += "## Where to start\n\n"
         "- `run.cpp` is the model. `main()` at the end opens the GPU, loads the device modules, makes every "
         "allocation (`allocate`), uploads params and inputs (`upload`), calls `run_once` and compares the "
         "outputs (`check_outputs`).\n"
         "- `run_once` calls one function per graph node, in TVM's order. Each launch is commented with the kernel, "
         "and each argument with the buffer behind it (name, kind, dtype, shape, what the kernel does with it).\n"
         "- `struct Memory` has one device pointer per allocation, named after the flow (`sid3`: TVM's storage "
         "3, shared by buffers whose lifetimes do not overlap; `ws0`: a workspace; others after the one buffer "
         "they hold).\n"
         "- To change a launch, edit its grid, block or `p.ptr(...)` line and rebuild; `run` then says whether the "
         "outputs still match.\n"
         "- `kdflow_support.h` is the same for every model: the driver API declarations, `Params` (the packed "
         "parameter buffer TVM passes), cuBLAS, collectives, comparisons.\n\n";
    o += "## Data\n\n"
         "`data/data.bin` holds the bytes of every upload, host copy and reference, at the offsets `run.cpp` "
         "names; `run` checks its size and FNV-1a hash before it starts. The device code is beside it as TVM wrote "
         "it. `run` finds `data/` from any working directory (the path is compiled in; `--data DIR` names "
         "another).\n\n";
    o += fmt::format("## Exit codes\n\n0 every compared output matches (or nothing was compared), 1 an output "
                     "differs (rtol {:g}, atol {:g}; integers exactly; float16 at least 1e-2 / 1e-3), 64 a bad "
                     "option, 65 data.bin is not the one generated, 66 a data file is missing, 69 no CUDA driver "
                     "or GPU (or no cuBLAS where the model calls it), 70 a driver call failed. Each error is one "
                     "line on stderr.\n",
                     in_.rtol, in_.atol);
    if (ranks_ > 1)
      o += fmt::format("\n## Ranks\n\nThe build is tensor-parallel over {} ranks. `run` runs every rank in this "
                       "one process, rank r on GPU r modulo the GPUs it finds (all on one GPU if there is one), "
                       "each with its own context, buffers and weight shard; the collectives are made on the host "
                       "(each rank's bytes downloaded, combined, uploaded), so their cost is not NCCL's.\n",
                       ranks_);
    return o;
  }

  struct Reference {
    size_t output = 0;
    std::string file;
    uint64_t at = 0, count = 0, bytes = 0;
    std::string actual, expected;
  };
  struct Group {
    enum Kind { Node, Copy, Collective } kind = Node;
    size_t index = 0;
    std::string name;
    int node = -1;
  };

  const ProgramInput& in_;
  const Dataflow& df_;
  const ReplayPlan& plan_;
  int ranks_ = 1;
  Names names_;
  std::vector<std::string> alloc_names_;
  std::map<std::string, size_t> kernel_index_;
  std::vector<std::string> kernel_names_, kernel_symbols_;
  std::vector<uint32_t> kernel_smem_;
  std::vector<std::vector<std::string>> module_groups_;
  std::vector<std::string> module_files_, module_bytes_;
  std::vector<Step> steps_;
  std::vector<Group> calls_;
  Blob blob_;
  std::vector<std::vector<uint64_t>> upload_at_;
  std::vector<uint64_t> copy_at_;
  uint64_t copies_from_ = 0, copies_to_ = 0;
  std::vector<Reference> refs_;
};

}  // namespace

Expected<std::vector<GeneratedFile>> generate_program(const ProgramInput& in) {
  if (!in.flow || in.plans.empty()) return Error{"kdflow codegen: error: no flow to generate", ExitCode::Software};
  Generator g(in);
  return g.run();
}

}  // namespace kdflow::codegen
