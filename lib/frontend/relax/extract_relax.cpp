// extract_relax.cpp — the Relax front end of `kdflow extract` (TVM 0.20 builds): the VM
// executable's `main` is run symbolically (relax_vm.h) into the graph the graph executor
// would have run, each fused call's host C is interpreted as for Relay (tensors arriving
// with type code 13), and the rest of the pipeline is shared with the Relay front end.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "frontend/extract_internal.h"
#include "kdflow/formats/tensor_values.h"
#include "kdflow/support/file_names.h"
#include "kdflow/support/stage_times.h"
#include "frontend/relax/disco.h"
#include "frontend/relax/packed_shapes.h"
#include "frontend/relax/signatures.h"
#include "kdflow/frontend/dataflow_builder.h"
#include "kdflow/formats/device_module.h"
#include "kdflow/formats/elf_symbols.h"
#include "kdflow/frontend/host_analyzer.h"
#include "kdflow/support/io.h"
#include "kdflow/formats/npy.h"
#include "kdflow/frontend/relax_vm.h"
#include "kdflow/formats/relax_ops.h"
#include "kdflow/formats/relay.h"
#include "kdflow/formats/vm_exec.h"

namespace kdflow {

namespace fs = std::filesystem;

Status resolve_relax_inputs(const ExtractInputs& in, ExtractInputs& out) {
  fs::path dir(in.dir);
  if (!in.vm_exec.empty() && !in.metas.empty()) return Status::ok();  // resolved already
  out.vm_exec = (dir / "vm_exec.bin").string();
  if (out.host.empty()) out.host = (dir / "host.c").string();
  // TVM 0.20 makes one CUDA module per kernel: device_<i>.tvm_meta.json (+ device_<i>.cu).
  std::vector<std::pair<uint64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    const std::string suffix = ".tvm_meta.json";
    if (n.rfind("device_", 0) != 0 || n.size() <= 7 + suffix.size() ||
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string num = n.substr(7, n.size() - 7 - suffix.size());
    if (num.empty() || num.size() > 9 || !std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    found.emplace_back(std::stoull(num), e.path().string());
  }
  std::sort(found.begin(), found.end());
  if (!in.meta.empty()) {
    out.metas = {in.meta};
  } else if (!found.empty()) {
    for (const auto& [i, path] : found) {
      out.metas.push_back(path);
      std::string cu = (dir / fmt::format("device_{}.cu", i)).string();
      if (!in.no_device && in.device.empty() && file_exists(cu)) out.devices.push_back(cu);
    }
    if (!out.devices.empty() && out.devices.size() != out.metas.size())
      return file_error(in.dir, fmt::format("{} device_<i>.tvm_meta.json but {} device_<i>.cu files: the CUDA sources "
                                            "of some modules are missing (pass --no-device to read none)",
                                            out.metas.size(), out.devices.size()),
                        ExitCode::NoInput);
  } else if (file_exists((dir / "device.tvm_meta.json").string())) {
    out.metas = {(dir / "device.tvm_meta.json").string()};
  } else {
    // No device module: a build whose every operation is a VM builtin (ONNX sequence operators)
    // launches no kernel, and its flow has none. A kernel the program does launch without a
    // function table is an error where the launch is met.
    out.metas.clear();
  }
  if (out.devices.empty() && out.device.empty() && !in.no_device && file_exists((dir / "device.cu").string()))
    out.device = (dir / "device.cu").string();
  out.graph.clear();
  return Status::ok();
}

Expected<std::pair<std::string, std::vector<int64_t>>> parse_input_shape(const std::string& spec) {
  auto bad = [&](const std::string& why) {
    return Error{fmt::format("error: --input-shape {}: {} (expected NAME=8x100)", spec, why), ExitCode::Usage};
  };
  const size_t eq = spec.rfind('=');  // a name may hold '='; the dimensions never do
  if (eq == std::string::npos || eq == 0) return bad("no NAME=");
  std::vector<int64_t> shape;
  std::string dims = spec.substr(eq + 1);
  size_t start = 0;
  while (true) {
    size_t end = dims.find('x', start);
    if (end == std::string::npos) end = dims.size();
    const std::string d = dims.substr(start, end - start);
    if (d.empty() || d.size() > 12 || !std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return bad("dimension \"" + d + "\" is not a non-negative integer");
    shape.push_back(std::stoll(d));
    if (shape.size() > 32) return bad("more than 32 dimensions");
    if (end == dims.size()) break;
    start = end + 1;
  }
  return std::make_pair(spec.substr(0, eq), shape);
}

#ifdef KDFLOW_HAVE_CLANG
namespace {

/// model.so's device blob, when it holds a relax.VMExecutable (else nullopt). `symbol` receives
/// the blob's symbol (it tells the TVM version that wrote it).
Expected<std::optional<DeviceBlob>> relax_blob(const std::string& library, std::string* symbol = nullptr) {
  Expected<std::string> bytes = read_file(library);
  if (!bytes) return bytes.error();
  Expected<TvmBlob> raw = read_tvm_blob(*bytes, library);
  if (!raw) return raw.error();
  if (symbol) *symbol = raw->symbol;
  const std::string label = library + "(" + raw->symbol + ")";
  Expected<DeviceBlob> blob = parse_device_blob(raw->bytes, label, raw->layout);
  if (!blob) return blob.error();
  if (blob->vm_executables.empty()) return std::optional<DeviceBlob>();
  if (blob->vm_executables.size() > 1)
    return file_error(label, fmt::format("{} relax.VMExecutable entries; kdflow reads a blob with one",
                                         blob->vm_executables.size()));
  if (blob->cuda.empty()) return file_error(label, "the device blob holds no cuda module");
  return std::optional<DeviceBlob>(blob.take());
}

/// Which TVM release wrote the build, from the files themselves: each observation narrows a
/// range of 0.<minor> releases (20 – 26, the ones kdflow reads). Recorded in `sources`.
void detect_tvm_version(const VmExecutable& ex, const std::string& vm_label, const std::string& host_text,
                        const std::string& host_label, const std::string& blob_symbol, Sources* out) {
  int lo = 20, hi = 26;
  auto narrow = [&](int a, int b, const std::string& why) {
    lo = std::max(lo, a), hi = std::min(hi, b);
    out->tvm_version_evidence.push_back(why);
  };
  if (ex.tvm_versions == "0.20") narrow(20, 20, vm_label + ": length prefix, ConstantType tags (0.20)");
  else if (ex.tvm_versions == "0.21") narrow(21, 21, vm_label + ": tvm-ffi tags with Tensor 72 (0.21)");
  else if (ex.tvm_versions == "0.22") narrow(22, 22, vm_label + ": first magic, Tensor 70 (0.22)");
  else if (ex.tvm_versions == "0.21-0.22") narrow(21, 22, vm_label + ": first magic, tvm-ffi tags (0.21-0.22)");
  else if (ex.tvm_versions == "0.23+") narrow(23, 26, vm_label + ": magic 0xd225de2f4214151e (0.23+)");
  const bool ffi = host_text.find("TVMFFIAny") != std::string::npos;
  if (!ffi) narrow(20, 20, host_label + ": TVMValue packed calls (up to 0.20)");
  else narrow(21, 26, host_label + ": TVMFFIAny (0.21+)");
  if (ffi && host_text.find("TVMFFIEnvModLookupFromImports") != std::string::npos)
    narrow(26, 26, host_label + ": TVMFFIEnvModLookupFromImports (0.26)");
  else if (ffi && host_text.find("TVMBackendGetFuncFromEnv") != std::string::npos)
    narrow(21, 25, host_label + ": TVMBackendGetFuncFromEnv (up to 0.25)");
  if (ffi && host_text.find("int32_t __tvm_ffi_") != std::string::npos)
    narrow(22, 26, host_label + ": __tvm_ffi_ exports (0.22+)");
  if (blob_symbol == "__tvm_ffi__library_bin") narrow(22, 26, "__tvm_ffi__library_bin (0.22+)");
  else if (blob_symbol == "__tvm_ffi_library_bin") narrow(21, 21, "__tvm_ffi_library_bin (0.21)");
  else if (blob_symbol == "__tvm_dev_mblob") narrow(20, 20, "__tvm_dev_mblob (up to 0.20)");
  if (lo > hi) out->tvm_version = "unknown (the files disagree)";
  else if (lo == hi) out->tvm_version = fmt::format("0.{}", lo);
  else out->tvm_version = fmt::format("0.{}-0.{}", lo, hi);
}

/// device_<i>.cu beside `dir`, by i.
std::vector<std::string> numbered_device_sources(const fs::path& dir) {
  std::vector<std::pair<uint64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("device_", 0) != 0 || n.size() <= 10 || n.compare(n.size() - 3, 3, ".cu") != 0) continue;
    const std::string num = n.substr(7, n.size() - 10);
    if (num.empty() || num.size() > 9 || !std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    found.emplace_back(std::stoull(num), e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

}  // namespace

Expected<bool> library_is_relax(const std::string& library) {
  Expected<std::optional<DeviceBlob>> blob = relax_blob(library);
  if (!blob) return blob.error();
  return blob->has_value();
}

namespace {

/// Symbolic shapes as TVM states them: each called function's signature in host.c (its
/// argument checks name it, TVM 0.21+) gives each argument's dimensions, `n` or `400`, where
/// the signature matches the call (detail::call_dimension_names). The signatures are read
/// once each.
class Signatures {
 public:
  explicit Signatures(const std::string& host_c) : host_c_(host_c) {}
  /// Each argument's dimension names in a call of `function` with these shapes, where the
  /// function's signature agrees with the call (detail::call_dimension_names).
  std::optional<std::vector<std::vector<std::string>>> names(const std::string& function,
                                                             const std::vector<std::vector<int64_t>>& shapes) {
    auto [it, added] = cache_.try_emplace(function);
    if (added) {
      if (!index_) index_.emplace(host_c_);  // one pass over host.c for every function's literal
      it->second = detail::find_signature(host_c_, function, &*index_);
    }
    if (!it->second) return std::nullopt;
    return detail::call_dimension_names(*it->second, shapes);
  }

 private:
  const std::string& host_c_;
  std::optional<detail::SignatureIndex> index_;
  std::map<std::string, std::optional<std::vector<detail::SignatureParam>>> cache_;
};

/// Buffers of builds with symbolic shapes get the expressions TVM's signatures state for them
/// (Buffer::shape_expr): `names` holds, per graph node, its arguments' dimension names as the
/// interpretation of its call found them (inputs, then outputs).
void record_shape_expressions(const std::map<int, std::vector<std::vector<std::string>>>& names_by_node,
                              Dataflow* df) {
  for (const auto& [nid, names] : names_by_node) {
    const Node& n = df->nodes[static_cast<size_t>(nid)];
    std::vector<int> args = n.inputs;
    args.insert(args.end(), n.outputs.begin(), n.outputs.end());
    if (args.size() != names.size()) continue;
    for (size_t i = 0; i < args.size(); ++i) {
      Buffer& b = df->buffers[static_cast<size_t>(args[i])];
      bool symbolic = false;
      for (const std::string& e : names[i]) symbolic |= !e.empty();
      if (!symbolic || !b.shape_expr.empty() || names[i].size() != b.shape.size()) continue;
      for (size_t d = 0; d < b.shape.size(); ++d)
        b.shape_expr.push_back(names[i][d].empty() ? std::to_string(b.shape[d]) : names[i][d]);
    }
  }
}

}  // namespace

/// A VM builtin that does its work inside TVM's runtime (the KV cache's attention): one
/// packed call of that name, the node's tensors (inputs, then outputs) and its scalar
/// arguments (kv_layer, sm_scale), so that the flow holds it as a library call of the node.
static HostTrace runtime_call_trace(const GraphNode& n, const std::vector<TensorArg>& tensors) {
  HostTrace t;
  t.function = n.func_name;
  PackedCall c;
  c.name = n.func_name;
  auto attr = n.attrs.find("kv_layer");
  if (attr != n.attrs.end()) {
    PackedArg layer;
    layer.kind = PackedArg::Kind::Int;
    layer.int_value = std::stoll(attr->second);
    c.args.push_back(layer);
  }
  attr = n.attrs.find("sm_scale");
  if (attr != n.attrs.end()) {
    PackedArg scale;
    scale.kind = PackedArg::Kind::Float;
    scale.type_code = 2;
    scale.float_value = std::stod(attr->second);
    c.args.push_back(scale);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    PackedArg a;
    a.kind = PackedArg::Kind::Tensor;
    a.type_code = 13;
    a.tensor_arg = static_cast<int>(i);
    a.pointer.kind = PointerTarget::Kind::Entry;
    a.pointer.index = tensors[i].entry_id;
    a.tensor_shape = tensors[i].shape;
    a.tensor_dtype_code = tensors[i].dtype_code;
    a.tensor_dtype_bits = tensors[i].dtype_bits;
    a.tensor_dtype_lanes = tensors[i].dtype_lanes;
    c.args.push_back(std::move(a));
  }
  t.calls.push_back(std::move(c));
  t.args_used = static_cast<int>(tensors.size());
  return t;
}


/// Every rank's params file holds the same arrays (names, dtypes, shapes) as rank 0's: each is
/// that rank's slice of the same weights.
static Status check_shards(const std::vector<std::string>& files) {
  std::optional<ParamsFile> first;
  for (const std::string& f : files) {
    Expected<MappedFile> bytes = map_file(f, kMaxParamsFileBytes);
    if (!bytes) return bytes.error();
    Expected<ParamsFile> p = parse_params(bytes->bytes(), f);
    if (!p) return p.error();
    if (!first) {
      first = p.take();
      continue;
    }
    if (p->arrays.size() != first->arrays.size())
      return file_error(f, fmt::format("{} arrays, but {} has {}: every rank's shard holds the same params",
                                       p->arrays.size(), base_name(files.front()), first->arrays.size()));
    for (size_t i = 0; i < p->arrays.size(); ++i) {
      const auto& a = p->arrays[i];
      const auto& b = first->arrays[i];
      if (a.name != b.name || a.shape != b.shape || !(a.dtype == b.dtype))
        return file_error(f, fmt::format("array {} is {} {} [{}], but {} has {} {} [{}] there", i, a.name,
                                         dtype_to_string(a.dtype), fmt::join(a.shape, ", "), base_name(files.front()),
                                         b.name, dtype_to_string(b.dtype), fmt::join(b.shape, ", ")));
    }
  }
  return Status::ok();
}

Expected<Dataflow> extract_relax(const ExtractInputs& given, const InterpreterLimits& limits, ProgressFn progress,
                                 void* progress_ctx) {
  // The executable and the function tables: from the folder's vm_exec.bin and
  // device_<i>.tvm_meta.json, or from an exported model.so's __tvm_dev_mblob.
  ExtractInputs in = given;
  std::optional<DeviceBlob> blob;
  std::optional<MappedFile> file;
  std::string_view vm_bytes;
  std::string blob_symbol;
  if (!in.library.empty()) {
    Expected<std::optional<DeviceBlob>> b = relax_blob(in.library, &blob_symbol);
    if (!b) return b.error();
    if (!b->has_value()) return file_error(in.library, "the device blob holds no relax.VMExecutable");
    blob = std::move(**b);
    vm_bytes = blob->vm_executables.front();
    in.vm_exec = in.library + "(" + blob_symbol + ")";
    if (in.devices.empty() && !in.no_device) {
      fs::path dir = fs::path(in.library).parent_path();
      in.devices = numbered_device_sources(dir.empty() ? fs::path(".") : dir);
      if (!in.devices.empty()) in.device.clear();
    }
  } else {
    Expected<MappedFile> f = map_file(in.vm_exec, 1ull << 36);
    if (!f) return f.error();
    file.emplace(f.take());
    vm_bytes = file->bytes();
  }
  const std::string vm_label = in.library.empty() ? base_name(in.vm_exec) : base_name(in.library) + ":" + blob_symbol;
  Expected<VmExecutable> ex = parse_vm_executable(vm_bytes, in.vm_exec);
  if (!ex) return ex.error();
  if (progress) progress(progress_ctx, 0, 1, "Relax VM executable " + vm_label + " (TVM " + ex->tvm_versions + ")");

  // One function table from every CUDA module.
  FunctionTable table;
  std::string meta_names;
  if (blob) {
    for (const auto& m : blob->cuda)
      for (const auto& [name, info] : m.table.functions)
        if (!table.functions.emplace(name, info).second)
          return file_error(in.vm_exec, fmt::format("kernel '{}' is in two cuda modules' function tables", name));
    table.file = in.vm_exec;
    meta_names = vm_label;
  }
  for (const std::string& path : blob                 ? std::vector<std::string>{}
                                 : !in.metas.empty()  ? in.metas
                                 : !in.meta.empty()   ? std::vector<std::string>{in.meta}
                                                      : std::vector<std::string>{}) {
    Expected<std::string> text = read_file(path, 64ull << 20);
    if (!text) return text.error();
    Expected<FunctionTable> t = parse_function_table(*text, path);
    if (!t) return t.error();
    for (auto& [name, info] : t->functions)
      if (!table.functions.emplace(name, info).second)
        return file_error(path, fmt::format("kernel '{}' is also in an earlier module's function table", name));
    table.file += (table.file.empty() ? "" : ", ") + path;
    meta_names += (meta_names.empty() ? "" : ",") + base_name(path);
  }

  Expected<std::string> host_text = read_file(in.host, 256ull << 20);
  if (!host_text) return host_text.error();
  std::future<DeviceAnalyses> device = start_device_analysis(in);  // in.jobs > 1: parsed meanwhile
  std::optional<StageSpan> host_parse(std::in_place, in.stage_times, "host.c: clang parse");
  Expected<std::unique_ptr<HostProgram>> program = HostProgram::parse(*host_text, in.host, limits);
  host_parse.reset();
  if (!program) return program.error();

  // Bytecode mode: run the function's instructions. Compiled mode (it is a "tir" function): the
  // host C's __vmtir__<function> performs the same steps; they are recovered from it, then run alike.
  std::optional<RelaxSession> session;
  if (!in.session.empty()) {
    if (!in.function.empty())
      return Error{"error: --session runs the LLM's VM functions itself: drop --function", ExitCode::Usage};
    Expected<RelaxSession> s = parse_session(in.session);
    if (!s) return s.error();
    session = *s;
  }
  const std::string function = session ? std::string("prefill") : in.function.empty() ? std::string("main") : in.function;
  const int fn_index = ex->find(function);
  if (session)
    for (const char* need : {"create_tir_paged_kv_cache", "embed", "prefill", "decode"})
      if (ex->find(need) < 0)
        return file_error(vm_label,
                          fmt::format("--session runs the VM functions create_tir_paged_kv_cache, embed, prefill and "
                                      "decode of an LLM build; this executable has no {}",
                                      need),
                          ExitCode::Usage);
  if (fn_index < 0 || ex->functions[fn_index].kind == VmFunction::Kind::Packed) {
    std::vector<std::string> listed;
    for (const VmFunction& f : ex->functions)
      if (f.kind != VmFunction::Kind::Packed)
        listed.push_back(fmt::format("{}({})", f.name, fmt::join(f.param_names, ", ")));
    return file_error(vm_label,
                      fmt::format("the executable has no VM function \"{}\"; its VM functions: {} (choose one with "
                                  "--function NAME)",
                                  function, listed.empty() ? "none" : fmt::format("{}", fmt::join(listed, ", "))),
                      ExitCode::Usage);
  }
  std::string vm_function = function;
  VmExecutable recovered;
  const VmExecutable* run_ex = &*ex;
  if (ex->functions[fn_index].kind == VmFunction::Kind::Tir) {
    vm_function = "__vmtir__" + function;
    if (!(*program)->has_function(vm_function))
      return file_error(in.host, fmt::format("{}'s {} is a compiled-mode (TIR) function, but this file defines no "
                                             "{} (is host.c from a bytecode-mode build?)",
                                             base_name(in.vm_exec), function, vm_function));
    Expected<std::vector<VmHostCall>> steps = (*program)->run_vm(vm_function);
    if (!steps) return steps.error();
    const VmFunction& m = ex->functions[fn_index];
    recovered.file = in.host + ":" + vm_function;
    recovered.version = ex->version;
    recovered.constants = ex->constants;
    VmFunction f = m;
    f.kind = VmFunction::Kind::Bytecode;
    f.start_instr = 0;
    f.end_instr = static_cast<int64_t>(steps->size()) + 1;
    recovered.functions.push_back(f);
    std::map<std::string, int64_t> index;
    for (const VmHostCall& s : *steps) {
      auto [it, fresh] = index.emplace(s.name, static_cast<int64_t>(recovered.functions.size()));
      if (fresh) {
        VmFunction p;
        p.kind = VmFunction::Kind::Packed;
        p.name = s.name;
        recovered.functions.push_back(std::move(p));
      }
      VmInstruction ins;
      ins.op = VmInstruction::Op::Call;
      ins.func = it->second;
      ins.dst = s.dst;
      ins.args = s.args;
      recovered.code.push_back(std::move(ins));
    }
    VmInstruction ret;  // TVM's VM takes the result from register num_args (vm.cc, kVMTIRFunc)
    ret.op = VmInstruction::Op::Ret;
    ret.reg = m.num_args;
    recovered.code.push_back(ret);
    run_ex = &recovered;
  }
  // The build's folder: input_<name>.npy and params.bin are looked for there.
  const fs::path dir = in.dir.empty() ? fs::path(in.host).parent_path()
                       : fs::is_directory(in.dir) ? fs::path(in.dir) : fs::path(in.dir).parent_path();
  // Symbolic shapes: the parameters' shapes from --input-shape, else from input_<name>.npy.
  RelaxVmEnv env;
  {
    const int mi = run_ex->find(function);
    const std::vector<std::string> names = mi >= 0 ? run_ex->functions[mi].param_names : std::vector<std::string>{};
    for (const std::string& spec : in.input_shapes) {
      Expected<std::pair<std::string, std::vector<int64_t>>> parsed = parse_input_shape(spec);
      if (!parsed) return parsed.error();
      // NAME as the model names it or as its file name encodes it (gpu_0%2Fdata_0).
      auto it = std::find_if(names.begin(), names.end(),
                             [&](const std::string& n) { return names_match(parsed->first, n); });
      if (it == names.end())
        return Error{fmt::format("error: --input-shape {}: the VM function {} has no parameter {} (it has: {})",
                                 spec, function, parsed->first, fmt::join(names, ", ")),
                     ExitCode::Usage};
      env.input_shapes[static_cast<int>(it - names.begin())] = parsed->second;
    }
    for (size_t i = 0; i < names.size(); ++i) {
      if (env.input_shapes.count(static_cast<int>(i))) continue;
      const std::string npy = find_input_file(dir.string(), names[i]);
      if (npy.empty()) continue;
      Expected<NpyArray> a = read_npy(npy);
      if (!a) return a.error();
      env.input_shapes[static_cast<int>(i)] = a->shape;
    }
  }
  // Ranks: params_shard0.bin, params_shard1.bin, ... beside the build, or --shards N.
  std::vector<std::string> shard_files;
  for (int r = 0; r < (1 << 16); ++r) {
    const std::string f = (dir / fmt::format("params_shard{}.bin", r)).string();
    if (!file_exists(f)) break;
    shard_files.push_back(f);
  }
  if (in.shards > 0 && !shard_files.empty() && static_cast<int>(shard_files.size()) != in.shards)
    return file_error(shard_files.back(), fmt::format("--shards {} but the build has {} params_shard<r>.bin files",
                                                      in.shards, shard_files.size()),
                      ExitCode::Usage);
  env.ranks = in.shards > 0 ? in.shards : static_cast<int>(shard_files.size());
  if (Status st = check_shards(shard_files); !st) return st.error();
  // Packed params (an nn.Module build's one tuple parameter): the params file beside the build
  // (or --params), whose arrays are the tuple's items in order, bound by position and named
  // by the file.
  std::optional<ParamsFile> packed;
  {
    const int mi = run_ex->find(function);
    bool tuple_param = false;
    if (mi >= 0) {
      const VmFunction& f = run_ex->functions[mi];
      for (int64_t pc = f.start_instr; pc >= 0 && pc < f.end_instr && static_cast<size_t>(pc) < run_ex->code.size();
           ++pc) {
        const VmInstruction& ins = run_ex->code[static_cast<size_t>(pc)];
        if (ins.op == VmInstruction::Op::Call && ins.func >= 0 &&
            static_cast<size_t>(ins.func) < run_ex->functions.size() &&
            run_ex->functions[static_cast<size_t>(ins.func)].name == "vm.builtin.check_tuple_info")
          tuple_param = true;
      }
    }
    std::string path = !in.params.empty() ? in.params : (dir / "params.bin").string();
    // A sharded build: params_shard<r>.bin per rank, the same names, shapes and dtypes in each
    // (each rank's slice); shard 0 states the shapes.
    if (in.params.empty() && !in.no_params && !file_exists(path) && !shard_files.empty()) path = shard_files.front();
    if ((tuple_param || session) && !in.no_params && file_exists(path)) {
      Expected<MappedFile> bytes = map_file(path, kMaxParamsFileBytes);
      if (!bytes) return bytes.error();
      Expected<ParamsFile> pf = parse_params(bytes->bytes(), path);
      if (!pf) return pf.error();
      packed = pf.take();
      env.packed = &*packed;
    } else if (tuple_param || session) {
      // No weights (a real-size LLM's are gigabytes; the flow needs their shapes only): the
      // shapes TVM checks the tuple against, read from the build.
      std::map<std::string, int64_t> dims;
      for (const std::string& spec : in.param_dims)
        if (Status st = parse_param_dim(spec, &dims); !st) return st.error();
      Expected<ParamsFile> pf = packed_params_from_build(*run_ex, dims, in.vm_exec);
      if (!pf) return pf.error();
      packed = pf.take();
      env.packed = &*packed;
    }
  }
  // The builtins that read data on the host (tensor_to_shape, read_if_cond): constants from
  // the executable's bytes, inputs from input_<name>.npy beside the build.
  env.constant_bytes = vm_bytes;
  {
    const int mi = run_ex->find(function);
    const std::vector<std::string> names = mi >= 0 ? run_ex->functions[mi].param_names : std::vector<std::string>{};
    env.input_values = [names, dir](int param) -> Expected<std::vector<int64_t>> {
      const std::string name = param >= 0 && static_cast<size_t>(param) < names.size() ? names[param]
                                                                                       : fmt::format("input{}", param);
      const std::string npy = find_input_file(dir.string(), name);
      if (npy.empty())
        return Error{fmt::format("reads the values of input '{}', and the flow depends on them: put them in {} "
                                 "beside the build",
                                 name, input_file_name(name)),
                     ExitCode::NoInput};
      Expected<NpyArray> a = read_npy(npy);
      if (!a) return a.error();
      return integer_values(a->dtype, a->data, base_name(npy));
    };
  }
  const HostProgram* host_program = program->get();
  env.shape_function = [host_program](const std::string& f, const std::vector<int64_t>& heap,
                                      std::vector<bool>* known) {
    return host_program->run_shape_function(f, heap, known);
  };
  env.scalar_function = [host_program](const std::string& f, bool* is_float, int64_t* i, double* x) -> Status {
    Expected<HostScalar> r = host_program->run_scalar_function(f);
    if (!r) return r.error();
    *is_float = r->is_float;
    *i = r->i;
    *x = r->f;
    return Status::ok();
  };
  if (session && run_ex != &*ex)
    return file_error(vm_label, "--session runs bytecode-mode builds; this one is compiled mode (exec_mode=\"compiled\")",
                      ExitCode::Usage);
  Expected<RelaxProgram> vm = session ? run_relax_session(*run_ex, (*program)->functions(), *session, {}, env)
                                      : run_relax_vm(*run_ex, (*program)->functions(), function, {}, env);
  if (!vm) return vm.error();
  const Graph& graph = vm->graph;

  BuildOptions options;
  options.sources.host = base_name(in.host);
  options.sources.graph = vm_label;
  options.sources.meta = meta_names;
  options.sources.vm_exec = vm_label;
  options.sources.vm_function = session ? "session " + in.session : vm_function;
  if (!in.library.empty()) options.sources.library = base_name(in.library);
  detect_tvm_version(*ex, vm_label, *host_text, base_name(in.host), blob_symbol, &options.sources);
  options.params_known = true;  // the pool's tensors are the bound weights
  for (size_t nid = 0; nid < graph.nodes.size(); ++nid)
    if (vm->constant_index[nid] >= 0 || vm->packed_index[nid] >= 0) options.param_names.insert(graph.nodes[nid].name);

  size_t total = 0, done = 0;
  for (const GraphNode& n : graph.nodes) total += node_calls_function(n) ? 1 : 0;
  Signatures signatures(*host_text);
  std::map<int, std::vector<std::vector<std::string>>> names_by_node;  // for Buffer::shape_expr
  auto trace = [&](int nid) -> Expected<HostTrace> {
    const GraphNode& n = graph.nodes[nid];
    if (progress) progress(progress_ctx, done, total, n.func_name);
    ++done;
    std::vector<TensorArg> args = node_tensor_args(graph, nid);
    for (TensorArg& a : args) a.type_code = 13;  // kTVMNDArrayHandle: the VM passes NDArrays
    if (n.func_name == "vm.builtin.paged_attention_kv_cache_create" || n.func_name == "kv_cache.copy_aux_to_device" ||
        n.func_name == "relax.run.shape_to_tensor") {
      // The KV cache's allocation and its copy of the auxiliary arrays: no call of the
      // program (the copy is Dataflow::host_copies).
      HostTrace t;
      t.function = n.func_name;
      t.args_used = static_cast<int>(args.size());
      return t;
    }
    if (n.func_name.rfind("vm.builtin.", 0) == 0 || is_disco_builtin(n.func_name)) return runtime_call_trace(n, args);
    if (!vm->call_args[static_cast<size_t>(nid)].empty()) {
      // Called by the KV cache's runtime: views and scalars, in the callee's order.
      args.clear();
      for (const RelaxCallArg& ca : vm->call_args[static_cast<size_t>(nid)]) {
        TensorArg a;
        a.type_code = 13;
        if (ca.kind == RelaxCallArg::Kind::Int) {
          a.kind = TensorArg::Kind::Int, a.int_value = ca.i;
        } else if (ca.kind == RelaxCallArg::Kind::Float) {
          a.kind = TensorArg::Kind::Float, a.float_value = ca.f;
        } else {
          a.entry_id = ca.entry;
          a.shape = ca.shape;
          a.dtype_code = ca.dtype.code, a.dtype_bits = ca.dtype.bits, a.dtype_lanes = ca.dtype.lanes;
          a.byte_offset = ca.byte_offset;
        }
        args.push_back(std::move(a));
      }
      return (*program)->run(n.func_name, args);
    }
    // Symbolic shapes (tvm-ffi): the dimensions the signature names, so that the integers the
    // host computes from them (kernel scalars, grid and block) carry their expressions.
    std::vector<std::vector<int64_t>> shapes;
    for (const TensorArg& a : args) shapes.push_back(a.shape);
    if (auto names = signatures.names(n.func_name, shapes)) {
      for (size_t i = 0; i < args.size(); ++i) args[i].shape_names = (*names)[i];
      names_by_node[nid] = std::move(*names);
    }
    return (*program)->run(n.func_name, args);
  };
  std::optional<StageSpan> host_run(std::in_place, in.stage_times, "host.c: interpretation (every VM call)");
  Expected<Dataflow> df = build_dataflow(graph, table, trace, options);
  host_run.reset();
  if (progress) progress(progress_ctx, total, total, "");
  if (!df) return df;
  for (Buffer& b : df->buffers) {
    if (b.node < 0 || b.kind == BufferKind::Workspace) continue;
    b.input_index = vm->input_index[b.node];
    if (auto it = vm->values_used.find(b.input_index); b.input_index >= 0 && it != vm->values_used.end())
      b.values_used = it->second;
    b.constant_index = vm->constant_index[b.node];
  }
  record_shape_expressions(names_by_node, &*df);
  // The KV cache's buffers by name, and its copies of the auxiliary arrays (buffer id ==
  // entry id for graph entries).
  for (const auto& [eid, name] : vm->entry_names) df->buffers[static_cast<size_t>(eid)].name = name;
  for (size_t nid = 0; nid < vm->call_args.size() && nid < df->nodes.size(); ++nid)
    for (const RelaxCallArg& ca : vm->call_args[nid]) {
      Arg a;
      if (ca.kind == RelaxCallArg::Kind::Int) {
        a.kind = Arg::Kind::Int, a.int_value = ca.i, a.dtype = "int64";
      } else if (ca.kind == RelaxCallArg::Kind::Float) {
        a.kind = Arg::Kind::Float, a.float_value = ca.f, a.dtype = "float64";
      } else {
        a.kind = Arg::Kind::Buffer, a.buffer = ca.entry, a.offset = static_cast<int64_t>(ca.byte_offset);
        a.dtype = "DLTensor*", a.tensor_dtype = dtype_to_string(ca.dtype), a.tensor_shape = ca.shape;
      }
      df->nodes[nid].runtime_args.push_back(std::move(a));
    }
  for (const RelaxHostCopy& rc : vm->host_copies) {
    HostCopy c;
    c.node = rc.node;
    c.buffer = rc.entry;
    c.offset = static_cast<int64_t>(rc.byte_offset);
    c.values = rc.values;
    c.dtype = rc.dtype;
    for (const auto& [name, first, count] : rc.arrays) c.arrays.push_back(HostCopy::Array{name, first, count});
    df->host_copies.push_back(std::move(c));
  }
  {
    std::vector<std::map<std::string, std::string>> attrs;
    attrs.reserve(graph.nodes.size());
    for (const GraphNode& n : graph.nodes) attrs.push_back(n.attrs);
    if (Status st = annotate_collectives(*df, attrs, env.ranks); !st) return file_error(vm_label, st.error().message, st.error().code);
    if (df->ranks > 1 && !shard_files.empty()) df->sources.params = "params_shard<r>.bin";
  }
  if (Status s = finish_extract(*df, graph, table, in, &device); !s) return s.error();
  // relax.txt holds the fused functions as TIR (no Relax ops per function), so the ops come
  // from the name, matched against the ops the module called before lowering
  // (relax_input.txt; else relax.txt) and Relax's own op names (relax_ops.h).
  std::vector<std::string> known;
  for (const char* name : {"relax_input.txt", "relax.txt"}) {
    std::string path = (fs::path(in.dir) / name).string();
    if (in.dir.empty() || !file_exists(path)) continue;
    Expected<std::string> text = read_file(path, 256ull << 20);
    if (!text) return text.error();
    known = relax_ops_in_text(*text);
    if (!known.empty()) break;
  }
  for (Node& n : df->nodes) {
    if (!n.runtime_call.empty() || n.function == "vm.builtin.paged_attention_kv_cache_create") {
      // The KV cache's own work: its operator is what the runtime does.
      std::string role = n.runtime_call.empty() ? "create" : n.runtime_role;
      std::replace(role.begin(), role.end(), ' ', '_');
      n.relay_ops = {RelayOp("kv_cache." + role)};
      n.relay_source = "name";
      continue;
    }
    if (n.function.rfind("vm.builtin.attention_kv_cache_", 0) == 0) {
      // A runtime call, not a fused function: its operator is the KV cache's attention.
      RelayOp op;
      op.name = "kv_cache." + n.function.substr(std::string("vm.builtin.attention_kv_cache_").size());
      n.relay_ops = {op};
      n.relay_source = "name";
      continue;
    }
    if (is_disco_builtin(n.function)) {  // a collective: R.ccl's operator
      n.relay_ops = {RelayOp("ccl." + n.function.substr(n.function.rfind('.') + 1))};
      n.relay_source = "name";
      continue;
    }
    if (n.relay_source == "name") n.relay_ops = decode_relax_name(n.function, known);
  }
  return df;
}
#endif

}  // namespace kdflow
