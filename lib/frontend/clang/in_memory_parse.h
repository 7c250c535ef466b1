// in_memory_parse.h — runs clang on one source held in memory, with in-memory headers and
// no access to the real file system, and keeps the first error as one diagnostic line.
// Shared by the host-C and CUDA analyzers; knows nothing about TVM.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <clang/Basic/SourceLocation.h>
#include <clang/Frontend/ASTUnit.h>

#include "kdflow/support/diag.h"
#include "kdflow/ir/host_trace.h"

namespace clang {
class DeclContext;
class FunctionDecl;
}  // namespace clang

namespace kdflow::detail {

/// Every `__global__` function with a body in `dc` (nested linkage specs, namespaces and
/// template specializations included), in declaration order: the kernels of a device source,
/// as the device analyzer and the CPU back end's safety check both list them.
void collect_cuda_kernels(const clang::DeclContext* dc, std::vector<const clang::FunctionDecl*>& out);


struct InMemorySource {
  std::string text;          ///< the source
  std::string label;         ///< the user's name for it (diagnostics, locations)
  std::string virtual_path;  ///< where it sits in the in-memory file system
  /// (path relative to kStubIncludeDir, contents) of every header it may include.
  const std::vector<std::pair<std::string, std::string>>* headers = nullptr;
  /// Tokens the preprocessed file may hold per byte of `text`, plus a fixed allowance for
  /// the stand-in headers (0: no limit). A preprocessing pass counts them before the parse,
  /// so that a macro bomb is an error instead of hours of lexing. TVM's output, with no
  /// macros of its own, holds about one token per 4-6 bytes.
  uint64_t tokens_per_byte = 100;
  static constexpr uint64_t kHeaderTokens = 1'000'000;
};

/// Parses `src` with `clang_args` (the command line without the input file) followed by
/// the virtual path. A clang error → `label:line:col: error: ...` (ExitCode::DataError).
Expected<std::unique_ptr<clang::ASTUnit>> parse_in_memory(const InMemorySource& src,
                                                          const std::vector<std::string>& clang_args);

/// One error clang reported: where (expansion location, the virtual file shown as the
/// label) and the whole line `label:line:col: error: ...`.
struct ParseError {
  SourceLoc loc;
  std::string line;
};
/// The AST clang recovered, and every error it reported on the way.
struct RecoveredParse {
  std::unique_ptr<clang::ASTUnit> unit;
  std::vector<ParseError> errors;
};
/// Like parse_in_memory, but errors do not stop it: clang's own recovery goes on (the
/// caller's `-ferror-limit=N` bounds it) and the AST comes back with every error. A fatal
/// error (a missing header, clang's "too many errors emitted") is still an Error, as is a
/// file clang could not parse at all; so is the token budget.
Expected<RecoveredParse> parse_in_memory_recovering(const InMemorySource& src,
                                                    const std::vector<std::string>& clang_args);

/// `loc` as file:line:col (expansion location), the virtual path shown as `label`.
SourceLoc presumed_loc(const clang::SourceManager& sm, clang::SourceLocation loc, const std::string& virtual_path,
                       const std::string& label);

}  // namespace kdflow::detail
