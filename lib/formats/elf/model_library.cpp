// model_library.cpp — an exported model.so (TVM's export_library) read as data: its
// `__tvm_dev_mblob` found with LLVM's object library (elf_symbols.h) and parsed
// (device_module.h). (Split out of driver/inspect.cpp, code unchanged.) Never loads the library.
#include "kdflow/formats/model_library.h"

#include <cstring>

#include "kdflow/support/io.h"
#if KDFLOW_HAVE_CLANG
#include "kdflow/formats/elf_symbols.h"
#endif

namespace kdflow {

namespace {
constexpr uint16_t kEmCuda = 190;
}  // namespace

/// An ELF file whose e_machine is EM_CUDA.
bool is_cuda_elf(std::string_view b) {
  if (b.size() < 20 || std::memcmp(b.data(), "\x7f" "ELF", 4) != 0) return false;
  unsigned machine = static_cast<unsigned char>(b[18]) | (static_cast<unsigned>(static_cast<unsigned char>(b[19])) << 8);
  return machine == kEmCuda;
}

std::string blob_label(const std::string& path) { return path + "(__tvm_dev_mblob)"; }

/// Reads and parses model.so's device blob. `size` receives the blob's byte count.
Expected<DeviceBlob> read_device_blob(const std::string& bytes, const std::string& path, uint64_t* size,
                                      std::string* symbol) {
#if KDFLOW_HAVE_CLANG
  // Whichever blob the TVM version wrote (__tvm_ffi__library_bin, __tvm_ffi_library_bin, __tvm_dev_mblob).
  auto blob = read_tvm_blob(bytes, path);
  if (!blob) return blob.error();
  if (size) *size = blob->bytes.size();
  if (symbol) *symbol = blob->symbol;
  return parse_device_blob(blob->bytes, path + "(" + blob->symbol + ")", blob->layout);
#else
  (void)bytes;
  (void)size;
  (void)symbol;
  return file_error(path, "reading a model.so needs LLVM's object library; this kdflow was built without it",
                    ExitCode::Unavailable);
#endif
}

std::string assemble_params_file(const std::vector<std::string>& names, const std::vector<std::string>& blobs) {
  std::string out;
  auto u64 = [&out](uint64_t v) {
    for (int k = 0; k < 8; ++k) out += static_cast<char>((v >> (8 * k)) & 0xff);
  };
  size_t total = 32;
  for (const auto& n : names) total += 8 + n.size();
  for (const auto& b : blobs) total += b.size();
  out.reserve(total);
  u64(0xF7E58D4F05049CB7ull);  // kTVMNDArrayListMagic
  u64(0);
  u64(names.size());
  for (const auto& n : names) {
    u64(n.size());
    out += n;
  }
  u64(blobs.size());
  for (const auto& b : blobs) out += b;
  return out;
}

Expected<LoadedLibrary> load_model_library(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.error();
  if (is_cuda_elf(*bytes))
    return file_error(path, "this is a cubin, not a model.so written by TVM's export_library");
  auto blob = read_device_blob(*bytes, path, nullptr);
  if (!blob) return blob.error();
  if (blob->cuda.empty()) return file_error(blob_label(path), "the device blob holds no cuda module");
  if (blob->factories.empty()) return file_error(blob_label(path), "the device blob holds no GraphExecutorFactory");
  LoadedLibrary lib;
  lib.file = path;
  auto& m = blob->cuda.front();
  auto& g = blob->factories.front();
  lib.graph_json = std::move(g.graph_json);
  lib.module_name = std::move(g.module_name);
  lib.table = std::move(m.table);
  lib.device_label = std::move(m.format);
  lib.device_binary = std::move(m.data);
  lib.device_format = detect_binary_format(lib.device_binary);
  lib.param_names = std::move(g.param_names);
  lib.param_blobs = std::move(g.param_blobs);
  return lib;
}
}  // namespace kdflow
