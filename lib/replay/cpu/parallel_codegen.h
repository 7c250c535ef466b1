// parallel_codegen.h — the JIT's last steps for one module (jit.cpp): -O2 and machine code,
// its kernels split across threads. Each partition is a copy of the module (through bitcode,
// in a context of its own) in which only its kernels' entries stay visible: every other
// definition is made internal, so the optimiser drops what the partition does not reach and
// keeps private copies of the helpers it does. A module with a mutable global variable (one
// instance all kernels share) is not split; compiled whole, it too keeps only the entries visible. Knows nothing about kernels beyond their entry names.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>

#include "kdflow/support/diag.h"

namespace kdflow::cpu {

struct CodegenJob {
  std::vector<std::string> entries;  ///< the functions the JIT looks up (one per kernel)
  std::set<std::string> allowed;     ///< the only external functions the optimised code may call
  unsigned threads = 1;              ///< partitions at most (1: the module as one)
  /// Asked once per entry on its optimised IR, in the partition's thread (read its IR only).
  std::function<void(llvm::Function& entry)> inspect;
  std::string label;                 ///< the module's file name, for errors
};

/// A context whose diagnostics other than errors go unsaid (a loop region fission asks to
/// vectorise that the vectoriser cannot is no news to the user).
std::unique_ptr<llvm::LLVMContext> make_quiet_context();

/// -O2 (vectorised, no unrolling) and machine code for `m`, split into at most job.threads
/// partitions compiled at once; the object files, in partition order. Errors: a call of a
/// function outside job.allowed, an external variable, a codegen failure (label: ... lines).
Expected<std::vector<std::unique_ptr<llvm::MemoryBuffer>>> optimise_and_compile(
    std::unique_ptr<llvm::Module> m, std::unique_ptr<llvm::LLVMContext> context,
    const llvm::orc::JITTargetMachineBuilder& jtmb, const CodegenJob& job);

}  // namespace kdflow::cpu
