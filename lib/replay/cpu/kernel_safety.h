// kernel_safety.h — decides, on the clang AST of one CUDA device source and before anything
// is compiled, whether its kernels may run on the host (replay --backend cpu). Never compiles
// or runs anything; a refusal is one `file:line:col: error:` line naming the kernel and the
// construct (exit 69, ExitCode::Unavailable).
//
// On a GPU a kernel cannot touch the host; compiled for the CPU it could call anything the
// process can. So a kernel may call only the CUDA built-ins of the CPU prelude (one table,
// cpu_prelude_builtins()) and the module's own __device__ functions (checked transitively);
// no inline assembly, no host or library functions, no function pointers or virtual calls,
// no `new`/`delete`/`throw`, no pointer made from an integer, and no global variables other
// than __shared__/__constant__ data of the module and compile-time constants. The module
// itself may hold nothing that runs when it is loaded (file-scope asm, constructor/section/
// alias attributes, globals with dynamic initializers). What this does NOT establish: that
// loads and stores stay inside their buffers (a kernel may compute any address from a
// pointer argument); guarded_memory.h catches the near misses, not arbitrary offsets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kdflow/support/diag.h"
#include "kdflow/ir/host_trace.h"  // SourceLoc

namespace kdflow::cpu {

/// The stack each CUDA thread runs on in the CPU back end (a fiber's, or the worker's own),
/// and what a kernel's local variables may take of it along its deepest call chain (the
/// rest is the compiled code's spills and the runtime's frames).
inline constexpr uint64_t kCpuThreadStackBytes = 256 * 1024;
inline constexpr uint64_t kCpuMaxLocalBytes = kCpuThreadStackBytes / 2;
/// Statically declared __shared__ memory a block may have (CUDA; nvcc refuses more).
inline constexpr uint64_t kCudaStaticSharedBytes = 48 * 1024;

/// One construct that keeps a kernel (or the whole module) off the CPU.
struct SafetyRefusal {
  SourceLoc loc;          ///< where the construct is (file is the caller's label)
  std::string kernel;     ///< the __global__ kernel that reaches it; "" for a module-level construct
  std::string via;        ///< the module __device__ function holding it; "" when in the kernel itself
  std::string construct;  ///< what was found, e.g. "calls 'system', which ..."
  std::string line;       ///< the whole one-line diagnostic `file:line:col: error: ...`
  /// Unavailable (69): a construct the back end will not run; DataError (65): a kernel the
  /// back end could run but that is too large for it (its locals past the stack, recursion).
  ExitCode code = ExitCode::Unavailable;
};

/// What check_kernel_safety found.
struct KernelSafetyReport {
  std::vector<std::string> kernels;     ///< every __global__ kernel the source defines, in source order
  std::vector<SafetyRefusal> refusals;  ///< module-level ones first, then kernel by kernel in source order
  /// Every prelude built-in some kernel reaches (sorted, unique): what the prelude must provide.
  std::vector<std::string> builtins_used;
  /// Byte offsets of the source where a warp barrier keeps lanes in step as a GPU does
  /// (warp_lockstep.h); the back end inserts `__syncwarp(); ` there before compiling.
  std::vector<size_t> warp_sync_points;
  bool safe() const { return refusals.empty(); }
  /// Ok, or the first refusal as Error{line, ExitCode::Unavailable} (what the caller prints).
  Status status() const;
};

/// How the source is preprocessed: the check must see the branches the CPU compile sees
/// (TVM's `__CUDA_ARCH__ >= N` blocks, `__CUDACC_VER_MAJOR__`-gated inline PTX), so these
/// must be the values the CPU prelude defines (lib/replay/cpu/prelude_text.cpp: arch 800,
/// CUDA 11.0, __KDFLOW_CPU__). Each is `#undef`ined and `#define`d after kdflow's stand-in
/// prelude (which says 900 / 12.0, as extract).
struct SafetyOptions {
  std::vector<std::pair<std::string, std::string>> macros = {
      {"__CUDA_ARCH__", "800"}, {"__CUDACC_VER_MAJOR__", "11"}, {"__CUDACC_VER_MINOR__", "0"}, {"__KDFLOW_CPU__", "1"}};
};

/// Parses `source` (label `file` in diagnostics) in CUDA device mode with kdflow's stand-in
/// headers and `opt.macros`, and checks every kernel. An Error only when clang cannot
/// read the file at all (a fatal error: ExitCode::DataError, as extract); a clang error
/// inside a kernel or a function it calls is a refusal (the host compile could accept what
/// device mode rejects, e.g. a call to a host function), one outside every function a
/// module refusal; one inside a function no kernel reaches is ignored (that code never runs:
/// nothing at module level may call it).
/// A macro name that is not an identifier, or a value with a line break, is a usage Error.
Expected<KernelSafetyReport> check_kernel_safety(const std::string& source, const std::string& file,
                                                 const SafetyOptions& opt = SafetyOptions());

/// One family of the table below (for docs and coverage checks).
struct CpuBuiltinGroup {
  const char* family;              ///< e.g. "warp collectives"
  std::vector<std::string> names;  ///< functions (unqualified), variables, or class names (see kind)
  enum class Kind { Function, Variable, Class, CompilerBuiltin } kind = Kind::Function;
};
/// THE table of what a kernel may use from outside the module: the CUDA built-ins the CPU
/// prelude provides. A name here must be harmless to run on the host (pure arithmetic,
/// thread-local or per-block state, memory reached through the kernel's own pointers).
/// Derived from what the real samples' device.cu use, widened to whole families.
const std::vector<CpuBuiltinGroup>& cpu_prelude_builtins();
/// Whether `name` (a function, operator or clang builtin name) is in the table.
bool is_cpu_prelude_function(std::string_view name);

}  // namespace kdflow::cpu
