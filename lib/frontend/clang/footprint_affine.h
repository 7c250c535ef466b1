// footprint_affine.h — the affine extraction of the footprint analysis (see
// include/kdflow/footprint.h), on the clang AST the device analyzer already parsed.
#pragma once

#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>

#include "kdflow/analysis/footprint.h"

namespace kdflow::detail {

/// Every access `fd` (a __global__ kernel) makes through its pointer parameters, as
/// quasi-affine forms, or a reject reason per parameter. Pure: reads the AST only.
KernelModel extract_affine_model(clang::ASTContext& ctx, const clang::FunctionDecl* fd);

}  // namespace kdflow::detail
