// footprint.h — static footprints of kernel arguments (issue 12), in two stages as Polly
// does it: the affine extraction (lib/frontend/clang/footprint_affine.cpp) turns every access a
// kernel makes through a pointer parameter into a quasi-affine model over blockIdx,
// threadIdx, loop variables and scalar parameters, or records why it cannot (a typed
// reject reason); the isl stage (lib/analysis/footprint/footprint_isl.cpp) builds each access's
// iteration domain and access relation for one launch (grid, block, scalar arguments)
// and computes the exact byte range it touches. Only plain integers cross this header:
// no clang or isl type.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// A variable of a kernel's affine model.
struct AffVar {
  enum class Kind { BlockIdx, ThreadIdx, BlockDim, GridDim, Param, Local };
  Kind kind = Kind::Local;
  int index = 0;  ///< BlockIdx..GridDim: dimension 0..2; Param: parameter index; Local: unused
};

/// c + Σ coef·var (var: index in KernelModel::vars).
struct LinExpr {
  int64_t c = 0;
  std::vector<std::pair<int, int64_t>> terms;  ///< sorted by var, no zero coefficient
};

/// A condition over the variables, free of negation: true, false, e ≥ 0, e = 0, and, or.
struct AffCond {
  enum class Op { True, False, Ge0, Eq0, And, Or };
  Op op = Op::True;
  LinExpr e;                  ///< Ge0, Eq0
  std::vector<AffCond> kids;  ///< And, Or
};

/// One access through a pointer parameter: bytes [offset, offset + size) for every point
/// of `domain` (launch bounds are added by the isl stage).
struct AffAccess {
  bool read = false;
  bool write = false;
  LinExpr offset;     ///< bytes from the parameter's pointer
  int64_t size = 0;   ///< bytes accessed at once (the lvalue's type)
  AffCond domain;     ///< enclosing loop bounds, guards, definitions of the quotients it uses
  bool exact = true;  ///< false: some guard was not affine and was dropped (the domain is a superset)
  unsigned line = 0;  ///< its line in the device source (the original file's, through #line), 0 unknown
};

/// What the affine extraction found for one parameter.
struct ParamModel {
  bool pointer = false;
  int64_t elem_size = 0;            ///< pointers: sizeof the pointee (0: void or unknown)
  std::vector<AffAccess> accesses;  ///< pointers: every access, in source order
  std::string unknown;              ///< non-empty: why the footprint cannot be modelled (reject reason)
};

struct KernelModel {
  std::string name;
  std::vector<AffVar> vars;
  std::vector<ParamModel> params;  ///< one per kernel parameter
};

/// Reject reasons (the `unknown` texts; counted by reason in the summaries).
namespace reject {
inline constexpr const char* kDataDependentIndex = "data-dependent index";
inline constexpr const char* kNonAffine = "non-affine index";
inline constexpr const char* kUnboundedLoop = "loop without affine bounds";
inline constexpr const char* kPointerArithmetic = "untracked pointer arithmetic";
inline constexpr const char* kPointerPassed = "pointer passed to a call";
inline constexpr const char* kUnsupported = "unsupported construct";
inline constexpr const char* kScalarArgument = "scalar argument not known at launch";
inline constexpr const char* kTooCostly = "isl: too costly";
inline constexpr const char* kUnbounded = "unbounded footprint";
inline constexpr const char* kNoModel = "kernel not found in device.cu";
}  // namespace reject

/// The footprint of parameter `param` of `model` for one launch. `scalars[i]` is the value
/// of scalar parameter i (ignored for pointers; std::nullopt when not known). Always a
/// Footprint: anything not proven is `unknown` with a reason.
struct LaunchShape {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  std::vector<std::optional<int64_t>> scalars;
};
/// Kernel `k`'s launch as the models take it: its grid, block and integer arguments (by
/// parameter index; nullopt for the others).
LaunchShape launch_shape(const Kernel& k);
/// The launch's scalars as text ("|8|-|-"): what, besides the model, grid and block, tells
/// two launches apart.
std::string scalars_key(const LaunchShape& launch);
/// `count_variables`: distinct bytes are counted (read_bytes, write_bytes, elements) only
/// for accesses with at most this many loop / quotient variables (-1: never) — projections
/// through them are where isl's time goes. attach_footprints uses kCountVariables.
inline constexpr int kCountVariables = 0;
Footprint compute_footprint(const KernelModel& model, size_t param, const LaunchShape& launch,
                            int count_variables = kCountVariables);

/// Sets Arg::footprint of every pointer argument of every kernel launch whose device
/// function has a model (`models` indexed like df.device_functions; an empty name: none).
/// Each distinct (kernel, grid, block, scalar arguments) is computed once; with jobs > 1 the
/// distinct launches are computed on that many threads (one isl context each), and the
/// result is the same as with one. `launch_models` (optional, indexed like df.kernels): a
/// launch's own model (made with its scalar arguments) where not null, instead of its
/// function's.
void attach_footprints(Dataflow& df, const std::vector<KernelModel>& models, int jobs = 1,
                       const std::vector<const KernelModel*>* launch_models = nullptr);

}  // namespace kdflow
