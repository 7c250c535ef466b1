// elf_symbols.h — finds a symbol's bytes in an ELF shared object with LLVM's object
// library (model.so's `__tvm_dev_mblob`, cubin e_flags). Reading only; never loads or runs it.
#pragma once

#include <string>
#include <string_view>

#include "kdflow/support/diag.h"

namespace kdflow {

/// The bytes of `symbol`'s data in the ELF file held in `bytes` (bounded by the symbol's
/// section and, for __tvm_dev_mblob, by its leading u64 length + 8). Errors name `file`.
Expected<std::string> read_elf_symbol(std::string_view bytes, const std::string& file, const std::string& symbol);

}  // namespace kdflow
