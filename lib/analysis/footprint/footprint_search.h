// footprint_search.h — the exact minimum and maximum of a footprint offset without isl:
// interval propagation over the access's constraints and branch and bound by bisection,
// under a node budget. Internal to the footprint stage (lib/footprint); plain integers only.
// Never approximates: a result is exact or the search gives up (isl then decides).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kdflow/analysis/footprint.h"

namespace kdflow::detail {

/// One conjunct of a domain: e ≥ 0 (eq: e = 0), over the same variable numbering as the model.
struct LinConstraint {
  bool eq = false;
  LinExpr e;
};

struct SearchRange {
  enum class Kind { Found, Empty, GiveUp } kind = Kind::GiveUp;
  int64_t lo = 0, hi = 0;  ///< Found: the exact minimum and maximum of the objective
  long nodes = 0;          ///< search nodes spent (min and max together)
};

/// Inclusive starting bounds of a variable (launch bounds; unbounded sides use ±kSearchInf).
inline constexpr int64_t kSearchInf = int64_t(1) << 62;
struct VarBounds {
  int64_t lo = -kSearchInf, hi = kSearchInf;
};

/// The exact integer minimum and maximum of `objective` over the integer points of
/// `bounds` (indexed by variable) satisfying every constraint in `cons`. GiveUp when a
/// variable stays unbounded, a coefficient is too large for exact interval arithmetic, or
/// more than `budget` search nodes would be needed.
SearchRange search_range(const std::vector<LinConstraint>& cons, std::vector<VarBounds> bounds,
                         const LinExpr& objective, long budget);

/// The conjunctions of `c` in disjunctive normal form, at most `limit` of them (false: more,
/// or a conjunction longer than the limit of constraints). False conjunctions are dropped.
bool to_dnf(const AffCond& c, size_t limit, std::vector<std::vector<LinConstraint>>* out);

/// Appends `c`'s structure as text to `out`: equal texts are equal conditions (the caches'
/// keys of the footprint and counting stages).
void append_cond_key(const AffCond& c, std::string* out);

}  // namespace kdflow::detail
