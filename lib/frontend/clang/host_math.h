// host_math.h — the C math functions the host-C interpreter evaluates, in one table that
// also writes the stand-in <math.h>. TVM prints float math into host code when a launch
// extent or loop bound needs it (`ceil(log2((double)n))` for sort/scan, fmod for a float
// floormod, ...); each function is evaluated with the host's libm, in double, the `f`
// variants rounded to float.
#pragma once

#include <llvm/ADT/StringRef.h>

#include <string>

namespace kdflow::detail {

struct MathFunction {
  const char* name;                      ///< the double variant ("ceil"); "<name>f" is the float one
  int arity;                             ///< 1 or 2
  double (*unary)(double);               ///< arity 1
  double (*binary)(double, double);      ///< arity 2
};

/// The function `name` names ("ceil", "ceilf", "__builtin_ceilf"), or nullptr. `*single` is set
/// when it is the float variant.
const MathFunction* find_math_function(llvm::StringRef name, bool* single);

/// The declarations of every function of the table, double and float variants, for the
/// stand-in <math.h>.
std::string math_declarations();

}  // namespace kdflow::detail
