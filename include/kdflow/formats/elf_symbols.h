// elf_symbols.h — finds a symbol's bytes in an ELF shared object with LLVM's object
// library (model.so's `__tvm_dev_mblob`, cubin e_flags). Reading only; never loads or runs it.
#pragma once

#include <string>
#include <string_view>

#include "kdflow/formats/device_module.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// The bytes of `symbol`'s data in the ELF file held in `bytes` (bounded by the symbol's
/// section and, for __tvm_dev_mblob, by its leading u64 length + 8). Errors name `file`.
Expected<std::string> read_elf_symbol(std::string_view bytes, const std::string& file, const std::string& symbol);


/// The device blob export_library wrote into a TVM library, whichever version wrote it.
struct TvmBlob {
  std::string bytes;   ///< from its u64 length on
  std::string symbol;  ///< "__tvm_ffi__library_bin" (0.22+), "__tvm_ffi_library_bin" (0.21), "__tvm_dev_mblob"
  BlobLayout layout = BlobLayout::DevMblob;
};
Expected<TvmBlob> read_tvm_blob(std::string_view bytes, const std::string& file);

}  // namespace kdflow
