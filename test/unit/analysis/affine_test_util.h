// affine_test_util.h — helpers the affine-model tests share (footprint_search.cpp,
// count_rewrite.cpp): building a LinExpr and C++'s missing floor division.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kdflow/analysis/footprint.h"

namespace kdflow::test {

/// c + Σ coef·var, terms sorted by variable, zero coefficients dropped.
inline LinExpr lin(int64_t c, std::vector<std::pair<int, int64_t>> terms) {
  std::sort(terms.begin(), terms.end());
  LinExpr e;
  e.c = c;
  for (const auto& t : terms)
    if (t.second != 0) e.terms.push_back(t);
  return e;
}

/// ⌊a / b⌋ for b > 0.
inline int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && (a < 0)); }

}  // namespace kdflow::test
