// inspect.cpp — `kdflow inspect FILE` and loading model.so for the extract pipeline.
//
// A model.so is an ELF shared object whose `__tvm_dev_mblob` symbol holds TVM's device
// blob (read with LLVM's object library, elf_symbols.h); a cubin is an ELF file for
// EM_CUDA; fatbins and PTX are recognised by content (device_module.h). Diagnostics about
// the blob name `model.so(__tvm_dev_mblob)` with byte offsets inside the blob.
#include "kdflow/driver/inspect.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>

#include "kdflow/driver/commands.h"
#include "kdflow/formats/graph_json.h"
#include "kdflow/support/io.h"
#include "kdflow/formats/params.h"
#include "kdflow/formats/vm_exec.h"
#if KDFLOW_HAVE_CLANG
#include "kdflow/formats/elf_symbols.h"
#endif

namespace kdflow {
namespace {

/// "p2" < "p10": names compared by their text, then by a trailing number's value.
bool natural_less(const std::string& a, const std::string& b) {
  auto split = [](const std::string& s) {
    size_t i = s.size();
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') --i;
    return i;
  };
  size_t ia = split(a), ib = split(b);
  int c = a.compare(0, ia, b, 0, ib);
  if (c != 0) return c < 0;
  std::string da = a.substr(ia), db = b.substr(ib);
  da.erase(0, std::min(da.find_first_not_of('0'), da.size()));
  db.erase(0, std::min(db.find_first_not_of('0'), db.size()));
  if (da.size() != db.size()) return da.size() < db.size();
  if (da != db) return da < db;
  return a < b;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(std::to_string(d));
  return "[" + join(dims, ", ") + "]";
}

std::string images_text(const std::vector<DeviceImage>& images) {
  std::vector<std::string> parts;
  for (const auto& i : images) parts.push_back(i.kind + " " + i.arch);
  return join(parts, ", ");
}

/// The kernels of a function table, one per line.
void print_kernels(const FunctionTable& table, std::ostream& out) {
  out << "  kernels: " << table.functions.size() << "\n";
  for (const auto& [name, fi] : table.functions)
    out << "    " << name << "(" << join(fi.arg_types, ", ") << ") launch [" << join(fi.launch_param_tags, ", ")
        << "]\n";
}

/// Checks the function table against the PTX's entries: every kernel an entry with as
/// many parameters as arg_types. Mismatches are printed, not fatal.
Status print_ptx_check(const FunctionTable& table, const std::string& ptx, const std::string& label,
                       std::ostream& out) {
  auto entries = parse_ptx_entries(ptx, label);
  if (!entries) return entries.error();
  std::map<std::string, size_t> params;
  for (const auto& e : *entries) params[e.name] = e.param_types.size();
  std::vector<std::string> problems;
  for (const auto& [name, fi] : table.functions) {
    auto it = params.find(name);
    if (it == params.end())
      problems.push_back(name + " is not an .entry of the PTX");
    else if (it->second != fi.arg_types.size())
      problems.push_back(fmt::format("{} takes {} parameters in the PTX, {} in the function table", name, it->second,
                                     fi.arg_types.size()));
  }
  for (const auto& [name, n] : params)
    if (!table.find(name)) problems.push_back(name + " is an .entry of the PTX missing from the function table");
  if (problems.empty()) {
    out << "  ptx entries: " << entries->size() << ", matching the function table\n";
  } else {
    out << "  ptx entries: " << entries->size() << ", " << problems.size() << " mismatches with the function table\n";
    for (const auto& p : problems) out << "    mismatch: " << p << "\n";
  }
  return Status::ok();
}

Status print_cuda_module(const DeviceBlob::CudaModule& m, const std::string& label, std::ostream& out) {
  BinaryFormat f = detect_binary_format(m.data);
  out << fmt::format("  format: labelled \"{}\", detected {}, {} bytes\n", m.format, to_string(f), m.data.size());
  if (f != BinaryFormat::Unknown) {
    auto images = list_device_images(m.data, label);
    if (!images) return images.error();
    out << "  images: " << images_text(*images) << "\n";
  }
  print_kernels(m.table, out);
  if (f == BinaryFormat::Ptx) return print_ptx_check(m.table, m.data, label, out);
  return Status::ok();
}

Status print_factory(const DeviceBlob::GraphFactory& g, const std::string& path, std::ostream& out) {
  auto graph = parse_graph_json(g.graph_json, path + "(graph.json)");
  if (!graph) return graph.error();
  size_t ops = 0;
  for (const auto& n : graph->nodes) ops += n.op == "tvm_op";
  out << fmt::format("  graph.json: {} bytes, {} nodes ({} tvm_op)\n", g.graph_json.size(), graph->nodes.size(), ops);
  auto params = parse_params(assemble_params_file(g.param_names, g.param_blobs), blob_label(path));
  if (!params) return params.error();
  uint64_t total = 0;
  for (const auto& a : params->arrays) total += a.nbytes;
  out << fmt::format("  params: {} ({} bytes)\n", params->arrays.size(), total);
  std::vector<const ParamArray*> sorted;
  for (const auto& a : params->arrays) sorted.push_back(&a);
  std::sort(sorted.begin(), sorted.end(),
            [](const ParamArray* a, const ParamArray* b) { return natural_less(a->name, b->name); });
  for (const ParamArray* a : sorted)
    out << fmt::format("    {}: {} {} ({} bytes)\n", a->name, dtype_to_string(a->dtype), shape_text(a->shape), a->nbytes);
  return Status::ok();
}

Status inspect_library(const std::string& bytes, const std::string& path, std::ostream& out) {
  uint64_t size = 0;
  std::string symbol;
  auto blob = read_device_blob(bytes, path, &size, &symbol);
  if (!blob) return blob.error();
  std::string label = path + "(" + symbol + ")";
  const char* writer = symbol == "__tvm_ffi__library_bin"  ? " (TVM 0.22+, tvm-ffi)"
                       : symbol == "__tvm_ffi_library_bin" ? " (TVM 0.21)"
                                                           : " (TVM up to 0.20)";
  out << base_name(path) << ": TVM exported library, " << symbol << writer << " of " << size << " bytes\n";
  out << "entries: " << blob->entries.size() << " (" << join(blob->entries, ", ") << ")\n";
  // Modules are the entries other than _import_tree, numbered in blob order.
  std::vector<std::string> modules;
  for (const auto& e : blob->entries)
    if (e != "_import_tree") modules.push_back(e);
  const auto& row = blob->import_tree_row_ptr;
  if (!row.empty()) {
    std::vector<std::string> edges;
    for (size_t i = 0; i + 1 < row.size(); ++i)
      for (uint64_t k = row[i]; k < row[i + 1]; ++k)
        edges.push_back(fmt::format("{} -> {}", i, blob->import_tree_child_indices[k]));
    out << "imports: " << (edges.empty() ? std::string("none") : join(edges, ", ")) << "\n";
  }
  size_t cuda = 0, factory = 0, vm = 0;
  for (size_t i = 0; i < modules.size(); ++i) {
    const std::string& key = modules[i];
    if (key == "_lib") {
      out << fmt::format("module {}: _lib (the host code compiled into the library)\n", i);
    } else if (key == "cuda") {
      const auto& m = blob->cuda[cuda++];
      out << fmt::format("module {}: cuda\n", i);
      if (Status s = print_cuda_module(m, label, out); !s) return s;
    } else if (key == "relax.VMExecutable") {
      // TVM 0.20 Relax: the VM executable (vm_exec.h); `kdflow extract` runs its main.
      auto ex = parse_vm_executable(blob->vm_executables[vm++], label);
      if (!ex) return ex.error();
      size_t tensors = 0;
      uint64_t bytes = 0;
      for (const auto& c : ex->constants)
        if (c.kind == VmConstant::Kind::Tensor) ++tensors, bytes += c.nbytes;
      std::vector<std::string> kinds;
      // Each VM function with its parameters (`kdflow extract --function NAME` runs it).
      for (const auto& f : ex->functions)
        if (f.kind != VmFunction::Kind::Packed)
          kinds.push_back(fmt::format("{}({}) ({})", f.name, join(f.param_names, ", "), to_string(f.kind)));
      out << fmt::format("module {}: relax.VMExecutable version {}: {} functions ({}), {} constants ({} tensors, {} "
                         "bytes), {} instructions\n",
                         i, ex->version, ex->functions.size(), join(kinds, ", "), ex->constants.size(), tensors, bytes,
                         ex->code.size());
    } else if (key == "GraphExecutorFactory") {
      const auto& g = blob->factories[factory++];
      out << fmt::format("module {}: GraphExecutorFactory \"{}\"\n", i, g.module_name);
      if (Status s = print_factory(g, path, out); !s) return s;
    }
  }
  return Status::ok();
}

Status inspect_device_file(const std::string& bytes, const std::string& path, std::ostream& out) {
  BinaryFormat f = detect_binary_format(bytes);
  if (f == BinaryFormat::Unknown)
    return file_error(path, "not a TVM model.so, cubin, fatbin or PTX file (recognised by content, not by name)");
  auto images = list_device_images(bytes, path);
  if (!images) return images.error();
  out << base_name(path) << ": " << to_string(f) << ", " << bytes.size() << " bytes\n";
  out << "images: " << images->size() << "\n";
  for (const auto& i : *images) out << "  " << i.kind << " " << i.arch << "\n";
  if (f == BinaryFormat::Ptx) {
    auto entries = parse_ptx_entries(bytes, path);
    if (!entries) return entries.error();
    out << "entries: " << entries->size() << "\n";
    for (const auto& e : *entries) out << "  " << e.name << "(" << join(e.param_types, ", ") << ")\n";
  }
  return Status::ok();
}

}  // namespace

int run_inspect_command(const std::string& path, std::ostream& out, std::ostream& err) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    // A build folder: its model.so when there is one, else every device binary in it.
    std::vector<std::string> files;
    const std::filesystem::path dir(path);
    if (std::filesystem::is_regular_file(dir / "model.so", ec)) {
      files.push_back((dir / "model.so").string());
    } else {
      for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        const std::string ext = e.path().extension().string();
        if (e.is_regular_file(ec) && (ext == ".cubin" || ext == ".fatbin" || ext == ".ptx"))
          files.push_back(e.path().string());
      }
      std::sort(files.begin(), files.end());
    }
    if (files.empty())
      return report(file_error(path, "a folder without model.so or a device binary (.cubin, .fatbin, .ptx): inspect "
                                     "reads those",
                               ExitCode::NoInput),
                    err);
    for (const std::string& f : files)
      if (int rc = run_inspect_command(f, out, err); rc != 0) return rc;
    return 0;
  }
  auto bytes = read_file(path);
  if (!bytes) return report(bytes.error(), err);
  // Everything goes to a buffer first: no partial output when a later part fails.
  std::string text;
  {
    std::ostringstream buf;
    Status s;
    try {
      bool library = bytes->size() >= 4 && std::memcmp(bytes->data(), "\x7f" "ELF", 4) == 0 && !is_cuda_elf(*bytes);
      s = library ? inspect_library(*bytes, path, buf) : inspect_device_file(*bytes, path, buf);
    } catch (const std::bad_alloc&) {
      s = file_error(path, "out of memory", ExitCode::Software);
    }
    if (!s) return report(s.error(), err);
    text = buf.str();
  }
  out << text;
  out.flush();
  return out ? 0 : static_cast<int>(ExitCode::IoError);
}

}  // namespace kdflow
