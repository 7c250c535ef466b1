// kernel_ops.h (clang stage) — finds the floating-point operations of a __global__ kernel on
// the clang AST and the domain each runs under, in the footprints' affine model (see
// include/kdflow/analysis/kernel_ops.h). Pure: reads the AST only.
#pragma once

#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>

#include <optional>
#include <vector>

#include "kdflow/analysis/footprint.h"
#include "kdflow/analysis/kernel_ops.h"

namespace kdflow::detail {

/// The affine access model of `fd` (as extract_affine_model) and, in `ops`, its
/// floating-point operations grouped by domain, from one walk of the body. `scalars`: one
/// launch's scalar arguments (extract_affine_model), or none.
KernelModel extract_affine_model_and_ops(clang::ASTContext& ctx, const clang::FunctionDecl* fd, KernelOpModel* ops,
                                         const std::vector<std::optional<int64_t>>* scalars = nullptr);

}  // namespace kdflow::detail
