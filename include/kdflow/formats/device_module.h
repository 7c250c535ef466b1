// device_module.h — device code and exported libraries as bytes: recognises cubin, fatbin
// and PTX by content, lists the architectures they hold, reads PTX `.entry` signatures, and
// parses TVM's `__tvm_dev_mblob` (the blob export_library writes into model.so).
// Pure parsing of memory; finding the blob inside an ELF file is elf_symbols.h's job.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kdflow/support/diag.h"
#include "kdflow/formats/function_table.h"

namespace kdflow {

enum class BinaryFormat { Unknown, Cubin, Fatbin, Ptx };
const char* to_string(BinaryFormat f);  ///< "unknown" | "cubin" | "fatbin" | "ptx"

/// By magic bytes: `\x7fELF` → cubin, `50 ED 55 BA` (LE 0xBA55ED50) → fatbin, text with
/// a `.version` directive → PTX. Never by file name.
BinaryFormat detect_binary_format(std::string_view bytes);

struct DeviceImage {
  std::string kind;  ///< "cubin" | "ptx"
  std::string arch;  ///< "sm_90", "compute_90", ...
};

/// The images a cubin (one, arch from ELF e_flags), fatbin (each entry) or PTX
/// (`.target`) holds. Every size in a fatbin header is checked against the bytes left.
Expected<std::vector<DeviceImage>> list_device_images(std::string_view bytes, const std::string& file);

/// One `.entry` of a PTX module.
struct PtxEntry {
  std::string name;
  std::vector<std::string> param_types;  ///< ".u64", ".u32", ".f32", ... per `.param`
};
/// Reads every `.entry` signature. Errors name `file:line:col`.
Expected<std::vector<PtxEntry>> parse_ptx_entries(std::string_view text, const std::string& file);

/// What `__tvm_dev_mblob` holds (src/runtime/library_module.cc ProcessModuleBlob).
struct DeviceBlob {
  struct CudaModule {
    std::string format;   ///< TVM's label ("cubin", "ptx", "fatbin")
    FunctionTable table;  ///< from the blob's FunctionInfo map
    std::string data;     ///< the device binary or PTX
  };
  struct GraphFactory {
    std::string graph_json;
    std::vector<std::string> param_names;
    std::vector<std::string> param_blobs;  ///< each NDArray as serialized (see params.h)
    std::string module_name;
  };
  std::vector<std::string> entries;  ///< type keys in blob order ("_lib", "_import_tree", "cuda", ...)
  std::vector<CudaModule> cuda;
  std::vector<GraphFactory> factories;
  /// `relax.VMExecutable` entries (TVM 0.20 Relax builds): each as vm_exec.bin holds it
  /// (u64 length, then the serialized executable; see vm_exec.h).
  std::vector<std::string> vm_executables;
  std::vector<uint64_t> import_tree_row_ptr, import_tree_child_indices;
};

/// Parses the blob bytes (starting with its u64 length). Every count and length is
/// checked against the bytes left before anything is allocated; an unknown type key is
/// an error naming it (unknown entries carry no length and cannot be skipped).
/// Errors: `file: byte N: error: ...`.
Expected<DeviceBlob> parse_device_blob(std::string_view bytes, const std::string& file);

}  // namespace kdflow
