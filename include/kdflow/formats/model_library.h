// model_library.h — an exported model.so (TVM's export_library) read as data: the pieces of its
// __tvm_dev_mblob for the extract pipeline and for `kdflow inspect`. Reads only; never loads or runs it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kdflow/formats/device_module.h"
#include "kdflow/formats/function_table.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// An ELF file whose e_machine is EM_CUDA (a cubin).
bool is_cuda_elf(std::string_view b);

/// "model.so(__tvm_dev_mblob)": how diagnostics about the blob name it.
std::string blob_label(const std::string& path);

/// Reads and parses model.so's device blob. `size` (optional) receives the blob's byte count,
/// `symbol` (optional) the symbol it was read from: `__tvm_ffi__library_bin` (TVM 0.22+),
/// `__tvm_ffi_library_bin` (0.21) or `__tvm_dev_mblob` (up to 0.20).
/// Errors: no blob / malformed (65); built without LLVM (69).
Expected<DeviceBlob> read_device_blob(const std::string& bytes, const std::string& path, uint64_t* size,
                                      std::string* symbol = nullptr);

/// What an exported model.so carries, from its first `cuda` module and its first
/// `GraphExecutorFactory` entry.
struct LoadedLibrary {
  std::string file;                      ///< the path read (labels diagnostics)
  std::string graph_json;                ///< the factory's graph.json text
  std::string module_name;               ///< the factory's module name ("default")
  FunctionTable table;                   ///< the cuda module's function table (file = path)
  std::string device_label;              ///< TVM's format label ("cubin", "ptx", ...)
  std::string device_binary;             ///< the cuda module's bytes (fatbin, cubin or PTX)
  BinaryFormat device_format = BinaryFormat::Unknown;  ///< detected from device_binary's content
  std::vector<std::string> param_names;  ///< in blob order
  std::vector<std::string> param_blobs;  ///< each NDArray as serialized, same order as param_names
};

/// Reads model.so, finds `__tvm_dev_mblob`, parses it. Errors: missing file (66), no
/// blob / malformed blob / no cuda module / no graph executor factory (65), built
/// without LLVM (69).
Expected<LoadedLibrary> load_model_library(const std::string& path);

/// A params file (tvm.runtime.save_param_dict layout) holding `blobs` under `names`, so
/// that parse_params (params.h) reads the library's params like a params.bin. The two
/// vectors must have the same length.
std::string assemble_params_file(const std::vector<std::string>& names, const std::vector<std::string>& blobs);

}  // namespace kdflow
