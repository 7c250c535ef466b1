// footprint_affine.h — the affine extraction of the footprint analysis (see
// include/kdflow/analysis/footprint.h), on the clang AST the device analyzer already parsed.
#pragma once

#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/AST/Expr.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kdflow/analysis/footprint.h"

namespace kdflow::detail {

/// Every access `fd` (a __global__ kernel) makes through its pointer parameters, as
/// quasi-affine forms, or a reject reason per parameter. Pure: reads the AST only.
KernelModel extract_affine_model(clang::ASTContext& ctx, const clang::FunctionDecl* fd);

/// Where one expression of the kernel runs: the same domain an access there would get
/// (enclosing loop bounds, guards, definitions of the quotients they use) over the
/// model's variables. `exact` false: a guard was not affine or an early exit precedes it
/// (the domain is a superset); `unknown` non-empty: it sits in a construct the model does
/// not cover (a loop without affine bounds, ...), its domain is meaningless.
struct SiteDomain {
  const clang::Expr* expr = nullptr;
  AffCond domain;
  bool exact = true;
  std::string unknown;
};
/// The same walk as extract_affine_model, also recording the domain of every expression
/// `want` accepts (asked once per expression the walk evaluates, parentheses stripped;
/// each expression recorded once, in walk order). kernel_ops.cpp counts operations with it.
/// `scalars` (optional): one launch's scalar arguments by parameter index; an integer
/// parameter with a value is that constant, so the model holds for that launch only
/// (`x / dim`, `2 << i` become quasi-affine).
KernelModel extract_affine_model(clang::ASTContext& ctx, const clang::FunctionDecl* fd,
                                 const std::function<bool(const clang::Expr*)>& want, std::vector<SiteDomain>* sites,
                                 const std::vector<std::optional<int64_t>>* scalars = nullptr);

}  // namespace kdflow::detail
