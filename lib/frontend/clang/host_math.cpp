// host_math.cpp — the math table (see host_math.h).
#include "host_math.h"

#include <cmath>

namespace kdflow::detail {
namespace {

double d_ceil(double x) { return std::ceil(x); }
double d_floor(double x) { return std::floor(x); }
double d_round(double x) { return std::round(x); }
double d_trunc(double x) { return std::trunc(x); }
double d_nearbyint(double x) { return std::nearbyint(x); }
double d_rint(double x) { return std::rint(x); }
double d_log(double x) { return std::log(x); }
double d_log2(double x) { return std::log2(x); }
double d_log10(double x) { return std::log10(x); }
double d_log1p(double x) { return std::log1p(x); }
double d_exp(double x) { return std::exp(x); }
double d_exp2(double x) { return std::exp2(x); }
double d_expm1(double x) { return std::expm1(x); }
double d_sqrt(double x) { return std::sqrt(x); }
double d_cbrt(double x) { return std::cbrt(x); }
double d_fabs(double x) { return std::fabs(x); }
double d_sin(double x) { return std::sin(x); }
double d_cos(double x) { return std::cos(x); }
double d_tan(double x) { return std::tan(x); }
double d_asin(double x) { return std::asin(x); }
double d_acos(double x) { return std::acos(x); }
double d_atan(double x) { return std::atan(x); }
double d_sinh(double x) { return std::sinh(x); }
double d_cosh(double x) { return std::cosh(x); }
double d_tanh(double x) { return std::tanh(x); }
double d_asinh(double x) { return std::asinh(x); }
double d_acosh(double x) { return std::acosh(x); }
double d_atanh(double x) { return std::atanh(x); }
double d_erf(double x) { return std::erf(x); }
double d_erfc(double x) { return std::erfc(x); }
double d_pow(double x, double y) { return std::pow(x, y); }
double d_fmin(double x, double y) { return std::fmin(x, y); }
double d_fmax(double x, double y) { return std::fmax(x, y); }
double d_fmod(double x, double y) { return std::fmod(x, y); }
double d_atan2(double x, double y) { return std::atan2(x, y); }
double d_hypot(double x, double y) { return std::hypot(x, y); }
double d_copysign(double x, double y) { return std::copysign(x, y); }

const MathFunction kTable[] = {
    {"ceil", 1, d_ceil, nullptr},   {"floor", 1, d_floor, nullptr}, {"round", 1, d_round, nullptr},
    {"trunc", 1, d_trunc, nullptr}, {"nearbyint", 1, d_nearbyint, nullptr}, {"rint", 1, d_rint, nullptr},
    {"log", 1, d_log, nullptr},     {"log2", 1, d_log2, nullptr},   {"log10", 1, d_log10, nullptr},
    {"log1p", 1, d_log1p, nullptr}, {"exp", 1, d_exp, nullptr},     {"exp2", 1, d_exp2, nullptr},
    {"expm1", 1, d_expm1, nullptr}, {"sqrt", 1, d_sqrt, nullptr},   {"cbrt", 1, d_cbrt, nullptr},
    {"fabs", 1, d_fabs, nullptr},   {"sin", 1, d_sin, nullptr},     {"cos", 1, d_cos, nullptr},
    {"tan", 1, d_tan, nullptr},     {"asin", 1, d_asin, nullptr},   {"acos", 1, d_acos, nullptr},
    {"atan", 1, d_atan, nullptr},   {"sinh", 1, d_sinh, nullptr},   {"cosh", 1, d_cosh, nullptr},
    {"tanh", 1, d_tanh, nullptr},   {"asinh", 1, d_asinh, nullptr}, {"acosh", 1, d_acosh, nullptr},
    {"atanh", 1, d_atanh, nullptr}, {"erf", 1, d_erf, nullptr},     {"erfc", 1, d_erfc, nullptr},
    {"pow", 2, nullptr, d_pow},     {"fmin", 2, nullptr, d_fmin},   {"fmax", 2, nullptr, d_fmax},
    {"fmod", 2, nullptr, d_fmod},   {"atan2", 2, nullptr, d_atan2}, {"hypot", 2, nullptr, d_hypot},
    {"copysign", 2, nullptr, d_copysign},
};

const MathFunction* lookup(llvm::StringRef name) {
  for (const MathFunction& m : kTable)
    if (name == m.name) return &m;
  return nullptr;
}

}  // namespace

const MathFunction* find_math_function(llvm::StringRef name, bool* single) {
  if (name.startswith("__builtin_")) name = name.drop_front(10);
  *single = false;
  if (const MathFunction* m = lookup(name)) return m;
  if (name.endswith("f")) {
    if (const MathFunction* m = lookup(name.drop_back())) {
      *single = true;
      return m;
    }
  }
  return nullptr;
}

std::string math_declarations() {
  std::string out;
  for (const char* type : {"double", "float"}) {
    const char* suffix = type[0] == 'f' ? "f" : "";
    for (const MathFunction& m : kTable) {
      out += std::string(type) + " " + m.name + suffix + "(" + type;
      if (m.arity == 2) out += std::string(", ") + type;
      out += ");\n";
    }
  }
  return out;
}

}  // namespace kdflow::detail
