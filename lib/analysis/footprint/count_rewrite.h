// count_rewrite.h — rewrites a counting problem (a conjunction of affine constraints over
// integer variables) into one with the same number of integer points that nested
// enumeration counts in far fewer steps. Internal to the operation count
// (kernel_ops_count.cpp); plain integers only.
//
// TVM's kernels index through quotients and remainders of the thread index: a quotient q
// pinned by 0 ≤ R − d·q ≤ d−1 costs one enumeration step per point of the variables it is
// computed from. Every rewrite here is a bijection on integer points (so the count is
// exact) that removes such structure:
//   - an equality with a ±1 coefficient substitutes its variable away;
//   - a variable bounded to one value is a constant;
//   - a pinned quotient that only its definition and its own bounds read is dropped, its
//     bounds becoming bounds on R (q = ⌊R/d⌋ ∈ [lo, hi] ⇔ d·lo ≤ R ≤ d·hi + d − 1);
//   - two quotients of the same R by the same d are one variable;
//   - terms of R that are multiples of d move into q (q' = q + m·v, unimodular);
//   - TVM's reduced coefficients ((B mod d)·blockIdx + threadIdx) get blockDim B back, so
//     every quotient reads the flat thread index whole;
//   - 0 ≤ g·A + r ≤ g·m − 1 with r ∈ [0, g−1] is 0 ≤ A ≤ m − 1 (a remainder digit leaves
//     the coarser digits' constraints);
//   - a pinned quotient whose R has a ±1 variable x is inverted: the remainder r = R − d·q
//     becomes a variable in [0, d−1] and x = ±(r + d·q − R') is substituted away, so q and r
//     are enumerated instead of x (d values of x become one step);
//   - bounds implied by the constraints (interval propagation) tighten each variable's box,
//     and a constraint the box already implies is dropped.
// What is left splits into independent components more often, and its variables are
// ordered narrowest first so the widest is counted as an interval length.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "kdflow/analysis/footprint.h"

namespace kdflow::detail {

inline constexpr int64_t kCountInf = int64_t(1) << 62;

/// A counting problem: every conjunct of the domain (Ge0, Eq0 or Or; Or is only
/// substituted into, never reasoned about) and each variable's box.
struct CountSystem {
  std::vector<AffCond> atoms;
  std::vector<std::pair<int64_t, int64_t>> box;  ///< per variable index; ±kCountInf: unbounded
  std::vector<char> live;                        ///< per variable index: still a variable of the problem
  bool empty = false;                            ///< proven to have no point
  /// (blockIdx variable, threadIdx variable, blockDim) of each launch dimension whose two
  /// indices are both variables: quotients of the flat index blockDim·b + t are rewritten
  /// to read it whole (see relinearize in count_rewrite.cpp).
  std::vector<std::array<int64_t, 3>> flat;
};

/// Rewrites `s` in place (same number of integer points). False when a coefficient would
/// grow past 2^50: `s` is then unusable and the caller counts the original problem.
/// `inverted_limit`: variables with an index below it may be inverted (the model's own).
bool simplify_for_counting(CountSystem& s, int inverted_limit);

}  // namespace kdflow::detail
