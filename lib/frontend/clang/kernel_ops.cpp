// kernel_ops.cpp — the clang stage of the operation count (include/kdflow/analysis/kernel_ops.h):
// classify every floating-point operation of a kernel (kind, precision, lanes) and take the
// domain it runs under from the footprint walk (footprint_affine.h, SiteDomain), so loops
// and guards mean exactly what they mean for footprints. Counting rules (docs/costs.md):
// `+ - * /` and their compound assignments on float/double/half/bfloat16 (a half2 operation
// counts 2); fma intrinsics are one FMA; math functions (exp, log, sqrt, rsqrt, tanh, erf,
// sin, pow, ...) one special; comparisons and min/max one compare; conversions, shuffles,
// loads, abs, floor/ceil/round and negation nothing; integer arithmetic nothing. A call to
// any other function that takes or returns a floating-point value is not counted and makes
// the kernel's count unknown ("call to f not followed"): never a guess.

#include "kernel_ops.h"

#include <clang/AST/Attr.h>
#include <clang/AST/Expr.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Basic/OperatorKinds.h>
#include <clang/Basic/SourceManager.h>
#include <llvm/ADT/DenseMap.h>

#include <map>
#include <set>
#include <sstream>

#include "footprint_affine.h"

namespace kdflow::detail {

namespace {

using namespace clang;

/// One operation at one expression: kind, precision, lanes; or a call not counted.
struct OpClass {
  int kind = -1;  ///< KernelOps::Kind; -1: no operation
  int precision = -1;
  int lanes = 1;
  std::string unknown;  ///< non-empty: an operation that cannot be counted
  bool reduction = false;  ///< an add/sub of a cross-thread reduction tree (KernelOps::reduction_flops)
  bool barrier = false;    ///< a block barrier, __syncthreads() (KernelOps::barriers; no operation)
};

/// The variable an operand reads: through parentheses, casts (TVM's `(volatile float*)`),
/// subscripts and dereferences, to the array or scalar named; null for anything else.
const VarDecl* operand_var(const Expr* e) {
  for (int depth = 0; e && depth < 16; ++depth) {
    e = e->IgnoreParenCasts();
    if (const auto* dr = dyn_cast<DeclRefExpr>(e)) return dyn_cast<VarDecl>(dr->getDecl());
    if (const auto* as = dyn_cast<ArraySubscriptExpr>(e)) e = as->getBase();
    else if (const auto* uo = dyn_cast<UnaryOperator>(e); uo && uo->getOpcode() == UO_Deref) e = uo->getSubExpr();
    else if (const auto* ce = dyn_cast<CXXConstructExpr>(e); ce && ce->getNumArgs() == 1) e = ce->getArg(0);
    else if (const auto* mt = dyn_cast<MaterializeTemporaryExpr>(e)) e = mt->getSubExpr();
    else return nullptr;
  }
  return nullptr;
}

bool is_shuffle(const Expr* e) {
  for (int depth = 0; e && depth < 8; ++depth) {
    e = e->IgnoreParenCasts();
    if (const auto* ce = dyn_cast<CXXConstructExpr>(e); ce && ce->getNumArgs() == 1) {
      e = ce->getArg(0);
      continue;
    }
    if (const auto* mt = dyn_cast<MaterializeTemporaryExpr>(e)) {
      e = mt->getSubExpr();
      continue;
    }
    const auto* call = dyn_cast<CallExpr>(e);
    const FunctionDecl* fd = call ? call->getDirectCallee() : nullptr;
    return fd && fd->getIdentifier() && fd->getName().startswith("__shfl");
  }
  return false;
}

/// The variables of a kernel that hold a value from another lane: assigned (or initialised
/// with) a warp shuffle's result (`t0[0] = __shfl_down_sync(mask, red_buf0[0], 16, 32);`).
class ShuffledVars : public RecursiveASTVisitor<ShuffledVars> {
 public:
  std::set<const VarDecl*> vars;
  bool VisitBinaryOperator(BinaryOperator* bo) {
    if (bo->getOpcode() == BO_Assign && is_shuffle(bo->getRHS()))
      if (const VarDecl* v = operand_var(bo->getLHS())) vars.insert(v);
    return true;
  }
  bool VisitCXXOperatorCallExpr(CXXOperatorCallExpr* oc) {
    if (oc->getOperator() == OO_Equal && oc->getNumArgs() == 2 && is_shuffle(oc->getArg(1)))
      if (const VarDecl* v = operand_var(oc->getArg(0))) vars.insert(v);
    return true;
  }
  bool VisitVarDecl(VarDecl* v) {
    if (v->getInit() && is_shuffle(v->getInit())) vars.insert(v);
    return true;
  }
};

/// The precision of a floating-point type (and its lanes), -1 for anything else.
int precision_of(QualType t, int* lanes) {
  *lanes = 1;
  if (t.isNull()) return -1;
  if (t->isReferenceType()) t = t->getPointeeType();
  t = t.getCanonicalType().getUnqualifiedType();
  if (const auto* vt = t->getAs<VectorType>()) {
    *lanes = static_cast<int>(vt->getNumElements());
    t = vt->getElementType().getCanonicalType();
  }
  if (const auto* bt = t->getAs<BuiltinType>()) {
    switch (bt->getKind()) {
      case BuiltinType::Half:
      case BuiltinType::Float16: return KernelOps::F16;
      case BuiltinType::BFloat16: return KernelOps::BF16;
      case BuiltinType::Float: return KernelOps::F32;
      case BuiltinType::Double:
      case BuiltinType::LongDouble: return KernelOps::F64;
      default: return -1;
    }
  }
  if (const auto* rd = t->getAsRecordDecl()) {
    const IdentifierInfo* id = rd->getIdentifier();
    if (!id) return -1;
    llvm::StringRef n = id->getName();
    if (n == "__half" || n == "half") return KernelOps::F16;
    if (n == "__half2" || n == "half2") return *lanes = 2, KernelOps::F16;
    if (n == "__nv_bfloat16" || n == "nv_bfloat16") return KernelOps::BF16;
    if (n == "__nv_bfloat162" || n == "nv_bfloat162") return *lanes = 2, KernelOps::BF16;
  }
  return -1;
}

bool one_of(llvm::StringRef n, std::initializer_list<const char*> names) {
  for (const char* x : names)
    if (n == x) return true;
  return false;
}

/// The kind of a named CUDA function, -1: not an operation, -2: not known.
int named_kind(llvm::StringRef n) {
  if (one_of(n, {"fma", "fmaf", "__fmaf_rn", "__fmaf_rz", "__fmaf_ru", "__fmaf_rd", "__fmaf_ieee_rn", "__fmaf_ieee_rz",
                 "__fmaf_ieee_ru", "__fmaf_ieee_rd", "__fma_rn", "__fma_rz", "__fma_ru", "__fma_rd", "__hfma", "__hfma2",
                 "__hfma_sat", "__hfma2_sat", "__hfma_relu", "__hfma2_relu"}))
    return KernelOps::Fma;
  if (one_of(n, {"__fadd_rn", "__fadd_rz", "__fadd_ru", "__fadd_rd", "__fsub_rn", "__fsub_rz", "__fsub_ru", "__fsub_rd",
                 "__dadd_rn", "__dadd_rz", "__dadd_ru", "__dadd_rd", "__dsub_rn", "__dsub_rz", "__dsub_ru", "__dsub_rd",
                 "__hadd", "__hsub", "__hadd2", "__hsub2", "__hadd_sat", "__hsub_sat", "__hadd2_sat", "__hsub2_sat",
                 "__hadd_rn", "__hsub_rn", "__hadd2_rn", "__hsub2_rn"}))
    return KernelOps::AddSub;
  if (one_of(n, {"__fmul_rn", "__fmul_rz", "__fmul_ru", "__fmul_rd", "__dmul_rn", "__dmul_rz", "__dmul_ru", "__dmul_rd",
                 "__hmul", "__hmul2", "__hmul_sat", "__hmul2_sat", "__hmul_rn", "__hmul2_rn"}))
    return KernelOps::Mul;
  if (one_of(n, {"__fdiv_rn", "__fdiv_rz", "__fdiv_ru", "__fdiv_rd", "__ddiv_rn", "__ddiv_rz", "__ddiv_ru", "__ddiv_rd",
                 "__fdividef", "fdividef", "__hdiv", "__h2div", "__frcp_rn", "__frcp_rz", "__frcp_ru", "__frcp_rd",
                 "__drcp_rn", "__drcp_rz", "__drcp_ru", "__drcp_rd", "hrcp", "h2rcp"}))
    return KernelOps::Div;
  if (one_of(n, {"exp", "expf", "__expf", "exp2", "exp2f", "exp10", "exp10f", "__exp10f", "expm1", "expm1f", "hexp",
                 "hexp2", "hexp10", "h2exp", "h2exp2", "h2exp10", "log", "logf", "__logf", "log2", "log2f", "__log2f",
                 "log10", "log10f", "__log10f", "log1p", "log1pf", "hlog", "hlog2", "hlog10", "h2log", "h2log2", "h2log10",
                 "sqrt", "sqrtf", "__fsqrt_rn", "__fsqrt_rz", "__fsqrt_ru", "__fsqrt_rd", "__dsqrt_rn", "hsqrt", "h2sqrt",
                 "rsqrt", "rsqrtf", "__frsqrt_rn", "hrsqrt", "h2rsqrt", "cbrt", "cbrtf", "rcbrt", "rcbrtf", "tanh", "tanhf",
                 "__tanhf", "htanh", "h2tanh", "htanh_approx", "erf", "erff", "erfc", "erfcf", "erfinv", "erfinvf", "sin",
                 "sinf", "__sinf", "cos", "cosf", "__cosf", "tan", "tanf", "__tanf", "hsin", "hcos", "h2sin", "h2cos", "asin",
                 "asinf", "acos", "acosf", "atan", "atanf", "atan2", "atan2f", "sinh", "sinhf", "cosh", "coshf", "asinh",
                 "asinhf", "acosh", "acoshf", "atanh", "atanhf", "pow", "powf", "__powf", "fmod", "fmodf", "remainderf",
                 "lgamma", "lgammaf", "tgamma", "tgammaf", "hypot", "hypotf", "sigmoid"}))
    return KernelOps::Special;
  if (one_of(n, {"fmax", "fmaxf", "fmin", "fminf", "max", "min", "__hmax", "__hmin", "__hmax_nan", "__hmin_nan", "__hmax2",
                 "__hmin2", "__hmax2_nan", "__hmin2_nan", "__hgt", "__hlt", "__hge", "__hle", "__heq", "__hne", "__hgtu",
                 "__hltu", "__hgeu", "__hleu", "__hequ", "__hneu", "__hbgt", "__hblt", "__hbge", "__hble", "__hbeq2",
                 "__hbne2", "__hgt2", "__hlt2", "__hge2", "__hle2", "__heq2", "__hne2"}))
    return KernelOps::MinMaxCmp;
  // Not operations: conversions, data movement, sign and rounding.
  if (n.contains("2float") || n.contains("2half") || n.contains("2bfloat") || n.contains("2int") ||
      n.contains("2uint") || n.contains("2ll") || n.contains("2ull") || n.contains("2double") || n.contains("_as_") ||
      n.startswith("__shfl") || n.startswith("__ldg") || n.startswith("__ldc") || n.startswith("__ld") ||
      n.startswith("__st") || n.startswith("make_") || n.startswith("__low") || n.startswith("__high") ||
      n.startswith("__halves") || n.startswith("__lows") || n.startswith("__highs") || n.startswith("__floats2") ||
      n.startswith("__float2") || n.startswith("__int2") || n.startswith("__uint2") ||
      one_of(n, {"fabs", "fabsf", "abs", "__habs", "__habs2", "__hneg", "__hneg2", "floor", "floorf", "ceil", "ceilf",
                 "round", "roundf", "trunc", "truncf", "rint", "rintf", "nearbyintf", "hfloor", "hceil", "hrint", "htrunc",
                 "copysign", "copysignf", "isnan", "isinf", "isfinite", "__isnan", "__isinf", "__hisnan", "__hisinf",
                 "signbit", "__activemask", "__syncthreads", "__syncwarp", "__ballot_sync", "__any_sync", "__all_sync",
                 "__saturatef", "ldexpf", "ldexp", "frexpf", "frexp", "modff", "__half", "__nv_bfloat16", "half",
                 "__hisinf", "atomicAdd", "atomicMax", "atomicMin", "atomicExch", "atomicCAS"}))
    return -1;
  return -2;
}

class Classifier {
 public:
  explicit Classifier(std::set<const VarDecl*> shuffled) : shuffled_(std::move(shuffled)) {}

  const OpClass& of(const Expr* e) {
    auto it = memo_.find(e);
    if (it != memo_.end()) return it->second;
    OpClass c = classify(e);
    return memo_.try_emplace(e, std::move(c)).first->second;
  }

 private:
  OpClass classify(const Expr* e) {
    OpClass c;
    auto set = [&](int kind, QualType t) {
      int lanes = 1;
      int p = precision_of(t, &lanes);
      if (p < 0) return;
      c.kind = kind;
      c.precision = p;
      c.lanes = lanes;
    };
    if (const auto* bo = dyn_cast<BinaryOperator>(e)) {
      QualType t = bo->getType();
      if (const auto* ca = dyn_cast<CompoundAssignOperator>(bo)) t = ca->getComputationResultType();
      switch (bo->getOpcode()) {
        case BO_Add: case BO_Sub: case BO_AddAssign: case BO_SubAssign:
          set(KernelOps::AddSub, t);
          c.reduction = c.kind >= 0 && reduces(bo->getLHS(), bo->getRHS());
          break;
        case BO_Mul: case BO_MulAssign: set(KernelOps::Mul, t); break;
        case BO_Div: case BO_DivAssign: set(KernelOps::Div, t); break;
        case BO_LT: case BO_GT: case BO_LE: case BO_GE: case BO_EQ: case BO_NE:
          set(KernelOps::MinMaxCmp, bo->getLHS()->getType());
          break;
        default: break;
      }
      return c;
    }
    if (const auto* uo = dyn_cast<UnaryOperator>(e)) {
      if (uo->isIncrementDecrementOp()) set(KernelOps::AddSub, uo->getType());
      return c;
    }
    if (const auto* oc = dyn_cast<CXXOperatorCallExpr>(e)) {
      unsigned n = oc->getNumArgs();
      QualType t = n > 0 ? oc->getArg(0)->getType() : oc->getType();
      switch (oc->getOperator()) {
        case OO_Plus: case OO_Minus:
          if (n == 2) set(KernelOps::AddSub, t);
          c.reduction = c.kind >= 0 && reduces(oc->getArg(0), oc->getArg(1));
          break;
        case OO_PlusEqual: case OO_MinusEqual:
          set(KernelOps::AddSub, t);
          c.reduction = c.kind >= 0 && n == 2 && reduces(oc->getArg(0), oc->getArg(1));
          break;
        case OO_PlusPlus: case OO_MinusMinus: set(KernelOps::AddSub, t); break;
        case OO_Star: case OO_StarEqual: set(KernelOps::Mul, t); break;
        case OO_Slash: case OO_SlashEqual: set(KernelOps::Div, t); break;
        case OO_Less: case OO_Greater: case OO_LessEqual: case OO_GreaterEqual: case OO_EqualEqual: case OO_ExclaimEqual:
          set(KernelOps::MinMaxCmp, t);
          break;
        default: break;
      }
      return c;
    }
    const auto* ce = dyn_cast<CallExpr>(e);
    if (!ce || isa<CXXMemberCallExpr>(e)) return c;  // member calls: conversions of half types
    const FunctionDecl* fd = ce->getDirectCallee();
    if (!fd || !fd->getIdentifier()) {
      if (!fd && involves_float(ce)) c.unknown = "indirect call (not followed)";
      return c;
    }
    llvm::StringRef name = fd->getName();
    if (name == "__syncthreads") {
      c.barrier = true;
      return c;
    }
    int kind = named_kind(name);
    if (kind >= 0) {
      // Precision: the result, or the first argument for predicates returning bool.
      QualType t = ce->getType();
      int lanes = 1;
      if (precision_of(t, &lanes) < 0 && ce->getNumArgs() > 0) t = ce->getArg(0)->getType();
      set(kind, t);
      if (kind == KernelOps::AddSub && c.kind >= 0 && ce->getNumArgs() == 2)
        c.reduction = reduces(ce->getArg(0), ce->getArg(1));
      return c;
    }
    if (kind == -2 && involves_float(ce)) c.unknown = "call to " + name.str() + " (not counted)";
    return c;
  }

  /// An add of a reduction tree: an operand from another lane (a shuffled variable), or two
  /// slots of the same __shared__ array.
  bool reduces(const Expr* a, const Expr* b) const {
    const VarDecl* x = operand_var(a);
    const VarDecl* y = operand_var(b);
    if ((x && shuffled_.count(x)) || (y && shuffled_.count(y))) return true;
    return x && x == y && x->hasAttr<CUDASharedAttr>();
  }

  static bool involves_float(const CallExpr* ce) {
    int lanes = 1;
    if (precision_of(ce->getType(), &lanes) >= 0) return true;
    for (const Expr* a : ce->arguments())
      if (precision_of(a->IgnoreImpCasts()->getType(), &lanes) >= 0) return true;
    return false;
  }

  std::set<const VarDecl*> shuffled_;
  // Every expression of the kernel is classified once (the affine walk asks of each): a flat
  // table, not a node per expression (its allocation and freeing were ~1% of a DenseNet's
  // extract). `of`'s references stay valid because nothing is added while one is held.
  llvm::DenseMap<const Expr*, OpClass> memo_;
};

void text(std::ostringstream& o, const AffCond& c) {
  o << static_cast<int>(c.op) << "(" << c.e.c;
  for (const auto& t : c.e.terms) o << "," << t.first << ":" << t.second;
  for (const AffCond& k : c.kids) text(o, k);
  o << ")";
}

}  // namespace

KernelModel extract_affine_model_and_ops(clang::ASTContext& ctx, const clang::FunctionDecl* fd, KernelOpModel* ops,
                                         const std::vector<std::optional<int64_t>>* scalars) {
  ShuffledVars shuffled;
  if (fd->getBody()) shuffled.TraverseStmt(fd->getBody());
  Classifier classes(std::move(shuffled.vars));
  std::function<bool(const Expr*)> want = [&](const Expr* e) {
    const OpClass& c = classes.of(e);
    return c.kind >= 0 || c.barrier || !c.unknown.empty();
  };
  std::vector<SiteDomain> sites;
  KernelModel m = extract_affine_model(ctx, fd, want, &sites, scalars);
  ops->name = m.name;
  ops->vars = m.vars;
  ops->groups.clear();
  ops->barriers.clear();
  ops->unknown.clear();
  std::map<std::string, size_t> group_of;  // domain text → group
  std::set<std::string> unknown;
  for (const SiteDomain& s : sites) {
    const OpClass& c = classes.of(s.expr);
    if (!c.unknown.empty()) {
      unknown.insert(c.unknown);
      continue;
    }
    if (c.barrier) {  // counted apart: a barrier is no operation, and its domain never makes the FLOPs unknown
      ops->barriers.push_back({s.domain, s.unknown});
      continue;
    }
    std::ostringstream key;
    key << s.exact << "|" << s.unknown << "|";
    text(key, s.domain);
    auto [it, added] = group_of.emplace(key.str(), ops->groups.size());
    if (added) {
      OpGroup g;
      g.domain = s.domain;
      g.exact = s.exact;
      g.unknown = s.unknown;
      ops->groups.push_back(std::move(g));
    }
    OpGroup& g = ops->groups[it->second];
    g.per_point[static_cast<size_t>(c.kind)][static_cast<size_t>(c.precision)] += static_cast<uint64_t>(c.lanes);
    if (c.reduction) g.reduction_per_point += static_cast<uint64_t>(c.lanes);
  }
  ops->unknown.assign(unknown.begin(), unknown.end());
  ops->accesses.clear();
  ops->access_unknown.clear();
  for (const ParamModel& p : m.params) {
    if (!p.pointer) continue;
    if (!p.unknown.empty() && ops->access_unknown.empty()) ops->access_unknown = p.unknown;
    for (const AffAccess& a : p.accesses) ops->accesses.push_back({a.domain, a.exact, a.size, a.read, a.write});
  }
  return m;
}

}  // namespace kdflow::detail
