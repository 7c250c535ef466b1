// device_analyzer.h — parses TVM's CUDA source (device.cu) with clang in CUDA device mode
// and reports each `extern "C" __global__` kernel: parameters, __launch_bounds__, and what
// the body does through each pointer parameter. Never compiles or runs the code.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"
#include "kdflow/analysis/footprint.h"
#include "kdflow/analysis/kernel_ops.h"

namespace kdflow {

class StageTimes;

/// Re-extracts a kernel's footprint and operation models with one launch's scalar arguments
/// substituted (`x / dim`, `2 << i` become quasi-affine for that launch). The device analysis
/// keeps its parse alive for it only when some kernel needs it (DeviceSource::specializable).
/// One call at a time.
class KernelSpecializer {
 public:
  virtual ~KernelSpecializer() = default;
  /// Kernel `index` (of DeviceSource::functions) with `scalars` (by parameter index).
  virtual KernelModel specialize(size_t index, const std::vector<std::optional<int64_t>>& scalars,
                                 KernelOpModel* ops) = 0;
};

struct DeviceSource {
  std::string file;                        ///< label used in diagnostics and locations
  std::vector<DeviceFunction> functions;   ///< every __global__ kernel, in source order
  std::vector<std::string> other_errors;   ///< clang errors (recovering parse) no kernel's access_error names
  std::vector<KernelModel> footprint_models;  ///< per function: its affine access model (empty unless asked for)
  std::vector<KernelOpModel> op_models;       ///< per function: its floating-point operations (with footprint_models)
  /// Per function (with footprint_models): whether a launch's scalar values could tell more
  /// (it takes integer scalars and some footprint, count or bytes is unknown for a
  /// non-affine index); then `specializer` re-extracts it for a launch.
  std::vector<char> specializable;
  std::shared_ptr<KernelSpecializer> specializer;
  const DeviceFunction* find(const std::string& name) const {
    for (const auto& f : functions)
      if (f.name == name) return &f;
    return nullptr;
  }
};

/// Parses `source` (labelled `file`) with in-memory stand-ins for the headers TVM's
/// kernels include (cuda_fp16.h, ...) and declarations of the CUDA builtins they call.
/// Access per pointer parameter: stores, compound assignments, ++/--, atomics through
/// the parameter or any local alias of it (casts, pointer arithmetic, copies) count as
/// writes; loads as reads; both → ReadWrite; a pointer passed to a function the file
/// defines is followed into it; one passed to a CUDA function is what that function's
/// stand-in declaration says (__ldg and wmma::load_matrix_sync read, wmma::store_matrix_sync
/// writes, atomics read and write); one passed anywhere else, or escaping the analysis
/// (stored to memory, an asm operand), counts as ReadWrite. A pointer parameter the body
/// never uses is Unknown.
/// Errors: with `strict`, any clang error → `file:line:col: error: ...`. Otherwise clang's
/// error recovery goes on (at most 50 errors, then it is an error too, as is any fatal one):
/// a kernel whose body, or a function of the file it calls, holds an error gets
/// `access_error` (the first such error line) and Unknown access for every pointer; every
/// other kernel is analyzed as usual.
/// With `footprints`, also the affine access model of every kernel (footprint.h), on the
/// same parse, and the floating-point operations of every kernel (kernel_ops.h) from the same walk.
/// `times` (optional) receives the spans of the parse and of the analysis. With `jobs` > 1,
/// a large file is parsed in two halves on two threads (the result is the same).
Expected<DeviceSource> analyze_device_source(const std::string& source, const std::string& file, bool strict = false,
                                             bool footprints = false, StageTimes* times = nullptr, int jobs = 1);

}  // namespace kdflow
