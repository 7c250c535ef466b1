// host_analyzer.h — parses TVM's host C (Target("cuda", host="c")) with clang and
// interprets a fused function's body on the clang AST, as the graph executor would call it.
// It never compiles, links or runs the code: it evaluates the AST, within work limits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kdflow/support/diag.h"
#include "kdflow/ir/host_trace.h"
#include "kdflow/formats/vm_exec.h"

namespace kdflow {

/// A scalar a host function returned (HostProgram::run_scalar_function).
struct HostScalar {
  bool is_float = false;
  int64_t i = 0;
  double f = 0;
};

/// Bounds so hostile input cannot hang or exhaust the interpreter.
struct InterpreterLimits {
  uint64_t max_steps = 50'000'000;       ///< expressions + statements evaluated per function call
  uint64_t max_loop_trips = 10'000'000;  ///< iterations of any one loop (all entries together)
  uint64_t max_calls = 1'000'000;        ///< packed calls recorded per function call
  unsigned max_call_depth = 64;          ///< nested calls to functions defined in host.c
  uint64_t max_memory_cells = 4'000'000; ///< scalar cells across all local objects
  uint64_t max_array_elements = 1'000'000;  ///< elements of one local array
};

/// One step of a compiled-mode Relax VM function (TVM 0.20 `__vmtir__main`), as the host C
/// performs it: a builtin called through TVMBackendGetFuncFromEnv or a fused function
/// called directly, its arguments as VM operands, and the register its return went to.
struct VmHostCall {
  std::string name;
  std::vector<VmOperand> args;  ///< registers (the r list), constants (the c list), immediates, %vm, %void (NULL)
  int64_t dst = kVmVoidRegister;
  SourceLoc loc;
};

class HostProgram {
 public:
  ~HostProgram();
  HostProgram(const HostProgram&) = delete;
  HostProgram& operator=(const HostProgram&) = delete;

  /// Parses `source` (labelled `file` in diagnostics) with in-memory stand-ins for TVM's
  /// headers and the C headers TVM includes. A clang error → `file:line:col: error: ...`.
  static Expected<std::unique_ptr<HostProgram>> parse(const std::string& source, const std::string& file,
                                                      const InterpreterLimits& limits = {});

  /// True if the source defines a function of that name with a body.
  bool has_function(const std::string& name) const;
  /// Names of every function with a body, in source order.
  std::vector<std::string> functions() const;

  /// Interprets `function` called with the packed signature, `args[i]` being
  /// `tensors[i]` (type code 7). A packed call, a workspace allocation or a failure
  /// (`return` of non-zero, anything it cannot evaluate) is reported with its position.
  Expected<HostTrace> run(const std::string& function, const std::vector<TensorArg>& tensors) const;

  /// Interprets a Relax shape function `function(H)` (host-only, on the VM's int64 shape heap):
  /// returns the heap after the call. Slots not `*known` are unset (reading one is an error);
  /// on return `*known` tells which slots hold a value (a slot the program never uses stays unset).
  Expected<std::vector<int64_t>> run_shape_function(const std::string& function, const std::vector<int64_t>& heap,
                                                    std::vector<bool>* known) const;

  /// Interprets a tvm-ffi host function that takes no argument and returns a scalar (Relax's
  /// compute_symbolic_expr: an attention scale computed from shapes): its result.
  Expected<HostScalar> run_scalar_function(const std::string& function) const;

  /// Interprets a compiled-mode Relax VM function `function(ctx, r, c, f)`: VM values are
  /// opaque; TVMBackendAnyListSetPackedArg / ResetItem / MoveFromPackedReturn move them between
  /// the register list, the constant list and the call stack. Returns the VM steps in order.
  Expected<std::vector<VmHostCall>> run_vm(const std::string& function) const;

  struct Impl;  ///< opaque: the clang AST and its index (host_analyzer.cpp)

 private:
  explicit HostProgram(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kdflow
