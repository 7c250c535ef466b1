// kernel_safety.cpp — the CPU back end's gate (see kernel_safety.h).
//
// One walk per function body (RecursiveASTVisitor, implicit code included: default
// arguments and member initializers run too), cached; then, per kernel, a breadth-first
// walk over the module functions it calls. Every callee is classified by where its
// definition is: a definition in device.cu is the module's own (walked if __device__);
// otherwise a declaration from kdflow's stand-in headers must be in the table; anything
// else (declared by the module without a body, a compiler builtin not in the table) is
// refused. Templates are walked as their instantiations, the code that would run.
#include "kernel_safety.h"
#include "warp_lockstep.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

// GCC 12 reports a null `this` inside LLVM 15's LazyOffsetPtr once RecursiveASTVisitor's
// record traversal is inlined (-Wnonnull; a false positive also seen in device_analyzer.cpp).
#pragma GCC diagnostic ignored "-Wnonnull"
#include <clang/AST/ASTContext.h>
#include <clang/AST/Attr.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/AST/StmtCXX.h>
#include <clang/Basic/Builtins.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/ASTUnit.h>

// The parse is the device analyzer's (frontend/clang/): the same in-memory stand-in headers
// and clang command line, so that the check sees what extract sees.
#include "frontend/clang/device_headers.h"
#include "frontend/clang/in_memory_parse.h"

namespace kdflow::cpu {

namespace {

using namespace clang;
using Kind = CpuBuiltinGroup::Kind;

std::vector<std::string> with_suffixes(std::initializer_list<const char*> bases,
                                       std::initializer_list<const char*> suffixes) {
  std::vector<std::string> out;
  for (const char* b : bases)
    for (const char* s : suffixes) out.push_back(std::string(b) + s);
  return out;
}

std::vector<std::string> concat(std::initializer_list<std::vector<std::string>> parts) {
  std::vector<std::string> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// The C math library as nvcc's math_functions.h declares it: `name` (double and the C++
// float overload) and `namef`.
const std::initializer_list<const char*> kMath1 = {
    "acos",       "acosh",    "asin",      "asinh",   "atan",     "atanh",  "cbrt",   "ceil",  "cos",       "cosh",
    "cospi",      "erf",      "erfc",      "erfcinv", "erfcx",    "erfinv", "exp",    "exp10", "exp2",      "expm1",
    "fabs",       "floor",    "lgamma",    "log",     "log10",    "log1p",  "log2",   "logb",  "nearbyint", "normcdf",
    "normcdfinv", "rcbrt",    "rint",      "round",   "rsqrt",    "sin",    "sinh",   "sinpi", "sqrt",      "tan",
    "tanh",       "tgamma",   "trunc",     "atan2",   "copysign", "fdim",   "fmax",   "fmin",  "fmod",      "hypot",
    "nextafter",  "pow",      "remainder", "rhypot",  "fma",      "ldexp",  "scalbn", "frexp", "modf",      "remquo",
    "sincos",     "sincospi", "ilogb",     "lrint",   "lround",   "llrint", "llround"};

}  // namespace

const std::vector<CpuBuiltinGroup>& cpu_prelude_builtins() {
  static const std::vector<CpuBuiltinGroup> table = {
      {"thread and block indices and dims",
       {"threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"},
       Kind::Variable},
      {"barriers and fences",
       {"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__syncwarp", "__threadfence",
        "__threadfence_block"}},
      {"warp collectives",
       {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync", "__shfl", "__shfl_up", "__shfl_down",
        "__shfl_xor", "__activemask", "__ballot_sync", "__all_sync", "__any_sync", "__ballot", "__all", "__any"}},
      {"atomics", concat({with_suffixes({"atomicAdd", "atomicExch", "atomicMin", "atomicMax", "atomicCAS"},
                                        {"", "_block", "_system"}),
                          {"atomicSub", "atomicAnd", "atomicOr", "atomicXor", "atomicInc", "atomicDec"}})},
      {"cache-hinted loads and stores",
       {"__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv", "__stwb", "__stcg", "__stcs", "__stwt"}},
      {"vector types",
       with_suffixes({"make_char", "make_uchar", "make_short", "make_ushort", "make_int", "make_uint", "make_long",
                      "make_ulong", "make_longlong", "make_ulonglong", "make_float", "make_double"},
                     {"1", "2", "3", "4"})},
      {"vector and CUDA classes (their constructors and conversions)",
       concat({with_suffixes({"char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "longlong",
                              "ulonglong", "float", "double"},
                             {"1", "2", "3", "4"}),
               {"dim3", "__half", "__half2", "__half_raw", "__half2_raw", "__nv_bfloat16", "__nv_bfloat162",
                "__nv_bfloat16_raw", "__nv_bfloat162_raw"}}),
       Kind::Class},
      {"half and bfloat16 arithmetic, comparisons and math",
       concat({{"operator+", "operator-", "operator*", "operator/",
                "operator+=", "operator-=", "operator*=", "operator/=", "operator++", "operator--",
                "operator==", "operator!=", "operator<", "operator>", "operator<=", "operator>="},
               {"__hadd",     "__hsub",       "__hmul",      "__hdiv",  "__hadd_sat", "__hsub_sat", "__hmul_sat",
                "__hfma",     "__hfma_sat",   "__hfma_relu", "__hneg",  "__habs",     "__hmax",     "__hmin",
                "__hmax_nan", "__hmin_nan",   "__heq",       "__hne",   "__hle",      "__hge",      "__hlt",
                "__hgt",      "__hequ",       "__hneu",      "__hleu",  "__hgeu",     "__hltu",     "__hgtu",
                "__hisnan",   "__hisinf",     "hsqrt",       "hrsqrt",  "hrcp",       "hexp",       "hexp2",
                "hexp10",     "hlog",         "hlog2",       "hlog10",  "hsin",       "hcos",       "hceil",
                "hfloor",     "htrunc",       "hrint",       "__hadd2", "__hsub2",    "__hmul2",    "__h2div",
                "__hfma2",    "__hfma2_relu", "__hneg2",     "__habs2", "__hmax2",    "__hmin2",    "__heq2",
                "__hne2",     "__hle2",       "__hge2",      "__hlt2",  "__hgt2",     "__hbeq2",    "__hbne2",
                "__hble2",    "__hbge2",      "__hblt2",     "__hbgt2", "h2sqrt",     "h2rsqrt",    "h2exp",
                "h2log",      "h2sin",        "h2cos",       "h2ceil",  "h2floor",    "h2trunc",    "h2rint"}})},
      {"half and bfloat16 conversions",
       concat({{"__float2half",          "__float2half_rn",     "__float2half_rz",      "__float2half_ru",
                "__float2half_rd",       "__double2half",       "__half2float",         "__float2half2_rn",
                "__floats2half2_rn",     "__float22half2_rn",   "__half22float2",       "__low2float",
                "__high2float",          "make_half2",          "__half2half2",         "__halves2half2",
                "__lows2half2",          "__highs2half2",       "__low2half",           "__high2half",
                "__low2half2",           "__high2half2",        "__lowhigh2highlow",    "__half_as_short",
                "__half_as_ushort",      "__short_as_half",     "__ushort_as_half",     "__half2char_rz",
                "__half2uchar_rz",       "__float2bfloat16",    "__float2bfloat16_rn",  "__float2bfloat16_rz",
                "__double2bfloat16",     "__bfloat162float",    "__float2bfloat162_rn", "__floats2bfloat162_rn",
                "__float22bfloat162_rn", "__bfloat1622float2",  "make_bfloat162",       "__bfloat162bfloat162",
                "__halves2bfloat162",    "__low2bfloat16",      "__high2bfloat16",      "__bfloat16_as_short",
                "__bfloat16_as_ushort",  "__short_as_bfloat16", "__ushort_as_bfloat16", "__bfloat162int_rn",
                "__bfloat162int_rz",     "__int2bfloat16_rn"},
               with_suffixes({"__half2int", "__half2uint", "__half2short", "__half2ushort", "__half2ll", "__half2ull",
                              "__int2half", "__uint2half", "__short2half", "__ushort2half", "__ll2half", "__ull2half"},
                             {"_rn", "_rz", "_ru", "_rd"})})},
      {"math functions",
       concat({with_suffixes(kMath1, {"", "f"}),
               {"fdividef",  "abs",        "labs",      "llabs",     "isnan",      "isinf",       "isfinite",
                "signbit",   "__isnanf",   "__isinff",  "__finitef", "__isnan",    "__isinf",     "__finite",
                "min",       "max",        "umin",      "umax",      "llmin",      "llmax",       "ullmin",
                "ullmax",    "__expf",     "__exp10f",  "__logf",    "__log2f",    "__log10f",    "__sinf",
                "__cosf",    "__tanf",     "__sincosf", "__powf",    "__fdividef", "__saturatef", "__frsqrt_rn",
                "__drcp_rn", "__dsqrt_rn", "__fmaf_rn", "__fmaf_rz", "__fmaf_ru",  "__fmaf_rd",   "__fma_rn"},
               with_suffixes({"__frcp", "__fsqrt", "__fadd", "__fsub", "__fmul", "__fdiv", "__dadd", "__dsub", "__dmul",
                              "__ddiv"},
                             {"_rn", "_rz", "_ru", "_rd"})})},
      {"integer intrinsics",
       {"__popc",
        "__popcll",
        "__clz",
        "__clzll",
        "__ffs",
        "__ffsll",
        "__brev",
        "__brevll",
        "__byte_perm",
        "__funnelshift_l",
        "__funnelshift_lc",
        "__funnelshift_r",
        "__funnelshift_rc",
        "__mul24",
        "__umul24",
        "__mulhi",
        "__umulhi",
        "__mul64hi",
        "__umul64hi",
        "__sad",
        "__usad",
        "__hadd",
        "__rhadd",
        "__uhadd",
        "__urhadd",
        "__dp4a",
        "__dp2a_lo",
        "__dp2a_hi"}},
      {"bit reinterpretations and rounding conversions",
       concat({{"__float_as_int", "__int_as_float", "__float_as_uint", "__uint_as_float", "__double_as_longlong",
                "__longlong_as_double", "__double2hiint", "__double2loint", "__hiloint2double", "__int2double_rn",
                "__uint2double_rn", "__float2int"},
               with_suffixes({"__float2int", "__float2uint", "__float2ll", "__float2ull", "__double2int",
                              "__double2uint", "__double2ll", "__double2ull", "__double2float", "__int2float",
                              "__uint2float", "__ll2float", "__ull2float", "__ll2double", "__ull2double"},
                             {"_rn", "_rz", "_ru", "_rd"})})},
      {"compiler built-ins (constants and hints, from the stand-in macros INFINITY, NAN, HUGE_VAL)",
       {"__builtin_inff", "__builtin_inf", "__builtin_nanf", "__builtin_nan", "__builtin_huge_valf",
        "__builtin_huge_val", "__builtin_expect", "__builtin_assume", "__builtin_isnan", "__builtin_isinf",
        "__builtin_isfinite"},
       Kind::CompilerBuiltin},
  };
  return table;
}

namespace {

struct Tables {
  std::unordered_set<std::string> functions, variables, classes, builtins;
  Tables() {
    for (const CpuBuiltinGroup& g : cpu_prelude_builtins())
      for (const std::string& n : g.names) {
        switch (g.kind) {
          case Kind::Function:
            functions.insert(n);
            break;
          case Kind::Variable:
            variables.insert(n);
            break;
          case Kind::Class:
            classes.insert(n);
            break;
          case Kind::CompilerBuiltin:
            builtins.insert(n);
            break;
        }
      }
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

const char* const kSafetyPrelude = "kdflow_cpu_safety_prelude.h";

/// kdflow's device stand-in headers, plus stand-ins for headers TVM 0.21+ (tvm-ffi) device
/// sources include on the nvcc path that they may lack, plus the safety prelude: `macros`
/// redefined, and `alignas` in GNU spelling (TVM 0.21+ writes `__shared__ alignas(64) float
/// x[n];`, which nvcc accepts and clang rejects: a C++11 attribute after a decl-specifier).
std::vector<std::pair<std::string, std::string>> safety_headers(
    const std::vector<std::pair<std::string, std::string>>& macros) {
  std::vector<std::pair<std::string, std::string>> h = detail::device_stub_headers();
  const char* empty = "// stand-in: nothing TVM's kernels use comes from this header.\n#pragma once\n";
  for (const char* name : {"type_traits", "cuda.h"}) {
    bool have = false;
    for (const auto& [path, text] : h) have |= path == name;
    if (!have) h.emplace_back(name, empty);
  }
  std::string prelude =
      "// Forced after kdflow_cuda_prelude.h for the CPU safety check (kernel_safety.cpp).\n#pragma once\n";
  for (const auto& [name, value] : macros) prelude += "#undef " + name + "\n#define " + name + " " + value + "\n";
  prelude += "#ifndef alignas\n#define alignas(n) __attribute__((aligned(n)))\n#endif\n";
  h.emplace_back(kSafetyPrelude, std::move(prelude));
  return h;
}

/// A construct found in one function body, before it is attributed to kernels.
struct Finding {
  SourceLocation loc;
  std::string construct;
};

/// Per function: what its own body does wrong, and the module functions it calls.
struct FunctionFacts {
  std::vector<Finding> findings;
  std::vector<const FunctionDecl*> callees;  // definitions in the main file
  std::vector<SourceLocation> call_sites;    // where each callee is called (first call)
  std::set<std::string> builtins;            // table names it uses
  uint64_t frame_bytes = 0;                  // its local variables, summed (an upper bound on its frame's data)
  uint64_t shared_bytes = 0;                 // its static __shared__ variables, summed
  SourceLocation largest_shared;             // the largest of them
  std::string largest_shared_name;
  SourceLocation largest;                    // its largest local variable
  std::string largest_name;
  uint64_t largest_bytes = 0;
};

class Checker {
 public:
  Checker(ASTContext& ctx, const SourceManager& sm) : ctx_(ctx), sm_(sm) {}

  bool in_main(SourceLocation l) const { return l.isValid() && sm_.isInMainFile(sm_.getExpansionLoc(l)); }
  bool in_stub(SourceLocation l) const {
    if (l.isInvalid()) return false;
    PresumedLoc p = sm_.getPresumedLoc(sm_.getExpansionLoc(l));
    return p.isValid() && std::string_view(p.getFilename()).rfind(detail::kStubIncludeDir, 0) == 0;
  }

  const FunctionFacts& facts(const FunctionDecl* fd) {
    auto it = cache_.find(fd);
    if (it != cache_.end()) return it->second;
    FunctionFacts f;
    BodyWalker w(*this, f);
    if (const auto* ctor = dyn_cast<CXXConstructorDecl>(fd))
      for (const CXXCtorInitializer* init : ctor->inits())
        if (init->getInit()) w.TraverseStmt(init->getInit());
    if (fd->hasBody()) w.TraverseStmt(fd->getBody());
    // A destructor also runs its members' and bases' destructors (implicit, not in the AST).
    if (const auto* dtor = dyn_cast<CXXDestructorDecl>(fd)) {
      const CXXRecordDecl* rd = dtor->getParent();
      auto sub = [&](QualType t) {
        if (const CXXRecordDecl* r = ctx_.getBaseElementType(t)->getAsCXXRecordDecl())
          if (r->hasDefinition() && !r->hasTrivialDestructor())
            if (const CXXDestructorDecl* d = r->getDestructor()) classify_callee(d, fd->getLocation(), f);
      };
      for (const FieldDecl* field : rd->fields()) sub(field->getType());
      for (const CXXBaseSpecifier& b : rd->bases()) sub(b.getType());
    }
    return cache_.emplace(fd, std::move(f)).first->second;
  }

  /// How a call to (or use of) `fd` is judged; adds to `f`.
  void classify_callee(const FunctionDecl* fd, SourceLocation at, FunctionFacts& f) {
    if (!fd) return;
    std::string name = fd->getQualifiedNameAsString();
    for (const FunctionDecl* r : fd->redecls())
      if (r->hasAttr<AsmLabelAttr>() || r->hasAttr<AliasAttr>() || r->hasAttr<IFuncAttr>() ||
          r->hasAttr<WeakRefAttr>()) {
        f.findings.push_back({at, "calls '" + name + "', which a declaration renames or aliases (asm label, alias)"});
        return;
      }
    const FunctionDecl* def = fd->getDefinition();
    if (!def) {
      // An implicit special member clang has not defined (never odr-used): nothing runs.
      if (fd->isImplicit() || fd->isDefaulted()) return;
    }
    if (def && in_main(def->getLocation())) {
      if (isa<CXXMethodDecl>(def) && cast<CXXMethodDecl>(def)->isVirtual()) {
        f.findings.push_back({at, "calls virtual function '" + name + "' (an indirect call)"});
        return;
      }
      if (def->hasAttr<CUDAGlobalAttr>()) {
        f.findings.push_back({at, "launches kernel '" + name + "' from device code"});
        return;
      }
      if (!def->hasAttr<CUDADeviceAttr>() && !def->isImplicit()) {
        f.findings.push_back({at, "calls host function '" + name + "' (not __device__)"});
        return;
      }
      if (std::find(f.callees.begin(), f.callees.end(), def) == f.callees.end()) {
        f.callees.push_back(def);
        f.call_sites.push_back(at);
      }
      return;
    }
    bool from_stub = false;
    for (const FunctionDecl* r : fd->redecls()) from_stub |= in_stub(r->getLocation());
    if (def && !from_stub) from_stub = in_stub(def->getLocation());
    const Tables& t = tables();
    if (from_stub) {
      if (const auto* md = dyn_cast<CXXMethodDecl>(fd)) {
        std::string cls = md->getParent()->getNameAsString();
        if (t.classes.count(cls)) {
          f.builtins.insert(cls);
          return;
        }
        f.findings.push_back({at, "uses '" + name + "', a CUDA class the CPU back end does not provide"});
        return;
      }
      std::string simple = fd->getNameAsString();
      bool global_ns = fd->getDeclContext()->getRedeclContext()->isTranslationUnit();
      if (global_ns && t.functions.count(simple)) {
        f.builtins.insert(simple);
        return;
      }
      f.findings.push_back({at, "calls '" + name + "', a CUDA device function the CPU back end does not provide"});
      return;
    }
    if (unsigned id = fd->getBuiltinID()) {
      std::string bname = ctx_.BuiltinInfo.getName(id);
      if (t.builtins.count(bname)) {
        f.builtins.insert(bname);
        return;
      }
      f.findings.push_back({at, "calls compiler built-in '" + bname + "', which the CPU back end does not allow"});
      return;
    }
    f.findings.push_back({at, "calls '" + name +
                                  "', which is neither a CUDA built-in of the CPU back end nor a __device__ function "
                                  "the module defines (a host or library function)"});
  }

  /// How a use of the global-storage variable `vd` is judged.
  void classify_variable(const VarDecl* vd, SourceLocation at, FunctionFacts& f) {
    if (!vd->hasGlobalStorage()) return;
    std::string name = vd->getQualifiedNameAsString();
    if (vd->hasAttr<CUDASharedAttr>()) return;
    if (in_stub(vd->getLocation())) {
      if (tables().variables.count(vd->getNameAsString())) {
        f.builtins.insert(vd->getNameAsString());
        return;
      }
      f.findings.push_back({at, "uses '" + name + "', a CUDA variable the CPU back end does not provide"});
      return;
    }
    const VarDecl* def = vd->getDefinition();
    if (!def) def = vd->getActingDefinition();
    const VarDecl* init_decl = nullptr;
    const Expr* init = vd->getAnyInitializer(init_decl);
    bool in_module = in_main((def ? def : vd)->getLocation()) && !(def ? def : vd)->hasExternalStorage();
    bool module_data = in_module && (def || (init && vd->isStaticDataMember()));
    if (module_data && def && def->hasAttr<CUDAConstantAttr>()) return;
    if (module_data && init && constant_data(init_decl)) return;
    std::string what = vd->hasAttr<CUDADeviceAttr>() ? "__device__ global variable" : "host global variable";
    if (vd->isStaticLocal()) what = "static local variable";
    if (!module_data) what = "global variable the module does not define";
    f.findings.push_back(
        {at, "uses " + what + " '" + name +
                 "' (only __shared__ and __constant__ data of the module, and constants, may be used)"});
  }

  /// A const, constant-initialized variable of the module (TVM's static const members).
  bool constant_data(const VarDecl* vd) const {
    if (!vd) return false;
    QualType t = vd->getType();
    if (!t.isConstQualified() || t.isVolatileQualified() || !vd->getInit()) return false;
    return vd->isConstexpr() || vd->isUsableInConstantExpressions(ctx_) || vd->hasConstantInitialization();
  }

  class BodyWalker : public RecursiveASTVisitor<BodyWalker> {
   public:
    BodyWalker(Checker& c, FunctionFacts& f) : c_(c), f_(f) {}
    bool shouldVisitImplicitCode() const { return true; }
    bool shouldVisitLambdaBody() const { return false; }  // walked when called (operator())

    // Unevaluated operands (sizeof, decltype, alignof) run nothing.
    bool TraverseUnaryExprOrTypeTraitExpr(UnaryExprOrTypeTraitExpr*) { return true; }
    bool TraverseCXXNoexceptExpr(CXXNoexceptExpr*) { return true; }
    bool TraverseCXXTypeidExpr(CXXTypeidExpr* e) {
      add(e->getBeginLoc(), "uses typeid (run-time type information)");
      return true;
    }

    bool VisitCallExpr(CallExpr* e) {
      if (isa<CUDAKernelCallExpr>(e)) {
        add(e->getBeginLoc(), "launches a kernel from device code");
        return true;
      }
      const Expr* callee = e->getCallee() ? e->getCallee()->IgnoreParenImpCasts() : nullptr;
      if (callee) callee_refs_.insert(callee);
      if (const FunctionDecl* fd = e->getDirectCallee()) {
        c_.classify_callee(fd, e->getBeginLoc(), f_);
        return true;
      }
      if (callee && (isa<CXXPseudoDestructorExpr>(callee) || callee->isTypeDependent())) return true;
      add(e->getBeginLoc(), "calls through a function pointer (an indirect call)");
      return true;
    }
    bool VisitCXXConstructExpr(CXXConstructExpr* e) {
      c_.classify_callee(e->getConstructor(), e->getBeginLoc(), f_);
      return true;
    }
    bool VisitCXXBindTemporaryExpr(CXXBindTemporaryExpr* e) {
      if (const CXXDestructorDecl* d = e->getTemporary()->getDestructor()) c_.classify_callee(d, e->getBeginLoc(), f_);
      return true;
    }
    bool VisitVarDecl(VarDecl* vd) {
      if (vd->hasAttr<CUDASharedAttr>() && !vd->hasExternalStorage()) {
        QualType t = vd->getType();
        if (!t->isDependentType() && !t->isIncompleteType() && !c_.ctx_.getAsVariableArrayType(t)) {
          uint64_t bytes = static_cast<uint64_t>(c_.ctx_.getTypeSizeInChars(t).getQuantity());
          if (bytes >= f_.shared_bytes) f_.largest_shared = vd->getLocation(), f_.largest_shared_name = vd->getNameAsString();
          f_.shared_bytes += bytes;
        }
      }
      if (vd->hasLocalStorage() && !vd->hasAttr<CUDASharedAttr>() && !isa<ParmVarDecl>(vd)) {
        QualType t = vd->getType();
        if (c_.ctx_.getAsVariableArrayType(t)) {
          add(vd->getLocation(), "declares variable-length array '" + vd->getNameAsString() +
                                     "' (a stack size decided at run time)");
        } else if (!t->isDependentType() && !t->isIncompleteType() && !t->isReferenceType()) {
          uint64_t bytes = static_cast<uint64_t>(c_.ctx_.getTypeSizeInChars(t).getQuantity());
          f_.frame_bytes += bytes;
          if (bytes > f_.largest_bytes) {
            f_.largest_bytes = bytes;
            f_.largest = vd->getLocation();
            f_.largest_name = vd->getNameAsString();
          }
        }
      }
      if (vd->isStaticLocal() && !vd->hasAttr<CUDASharedAttr>() && !c_.constant_data(vd))
        add(vd->getLocation(), "declares static local variable '" + vd->getNameAsString() + "'");
      if (vd->getTLSKind() != VarDecl::TLS_None) add(vd->getLocation(), "declares a thread_local variable");
      if (vd->hasAttr<AsmLabelAttr>())
        add(vd->getLocation(),
            "declares variable '" + vd->getNameAsString() + "' with an asm label (a register or symbol)");
      if (const auto* cl = vd->getAttr<CleanupAttr>()) c_.classify_callee(cl->getFunctionDecl(), vd->getLocation(), f_);
      if (const CXXRecordDecl* rd = vd->getType()->getAsCXXRecordDecl())
        if (rd->hasDefinition() && !rd->hasTrivialDestructor())
          if (const CXXDestructorDecl* d = rd->getDestructor()) c_.classify_callee(d, vd->getLocation(), f_);
      return true;
    }
    bool VisitDeclRefExpr(DeclRefExpr* e) {
      const ValueDecl* d = e->getDecl();
      if (const auto* vd = dyn_cast<VarDecl>(d)) {
        c_.classify_variable(vd, e->getLocation(), f_);
      } else if (const auto* fd = dyn_cast<FunctionDecl>(d)) {
        if (!callee_refs_.count(e))
          add(e->getLocation(), "takes the address of function '" + fd->getQualifiedNameAsString() + "'");
      }
      return true;
    }
    bool VisitMemberExpr(MemberExpr* e) {
      if (const auto* vd = dyn_cast<VarDecl>(e->getMemberDecl())) c_.classify_variable(vd, e->getMemberLoc(), f_);
      return true;
    }
    bool VisitGCCAsmStmt(GCCAsmStmt* s) {
      add(s->getBeginLoc(), "uses inline assembly");
      return true;
    }
    bool VisitMSAsmStmt(MSAsmStmt* s) {
      add(s->getBeginLoc(), "uses inline assembly");
      return true;
    }
    bool VisitCXXNewExpr(CXXNewExpr* e) {
      add(e->getBeginLoc(), "uses 'new' (allocates host memory)");
      return true;
    }
    bool VisitCXXDeleteExpr(CXXDeleteExpr* e) {
      add(e->getBeginLoc(), "uses 'delete' (frees host memory)");
      return true;
    }
    bool VisitCXXThrowExpr(CXXThrowExpr* e) {
      add(e->getBeginLoc(), "throws an exception");
      return true;
    }
    bool VisitCXXTryStmt(CXXTryStmt* s) {
      add(s->getBeginLoc(), "uses try/catch");
      return true;
    }
    bool VisitCXXDynamicCastExpr(CXXDynamicCastExpr* e) {
      add(e->getBeginLoc(), "uses dynamic_cast (run-time type information)");
      return true;
    }
    bool VisitCastExpr(CastExpr* e) {
      if (e->getCastKind() == CK_IntegralToPointer &&
          !e->getSubExpr()->isNullPointerConstant(c_.ctx_, Expr::NPC_ValueDependentIsNotNull))
        add(e->getBeginLoc(), "makes a pointer from an integer (it could point anywhere in the host)");
      return true;
    }
    bool VisitIndirectGotoStmt(IndirectGotoStmt* s) {
      add(s->getBeginLoc(), "uses a computed goto");
      return true;
    }
    bool VisitRecoveryExpr(RecoveryExpr* e) {
      // Code clang could not type-check as device code: say why when a named function is
      // the reason (a host function called from a kernel is one), else say so.
      size_t before = f_.findings.size();
      for (const Expr* sub : e->subExpressions())
        if (const auto* ul = dyn_cast_or_null<UnresolvedLookupExpr>(sub ? sub->IgnoreParenImpCasts() : nullptr)) {
          callee_refs_.insert(ul);
          for (const NamedDecl* nd : ul->decls())
            if (const auto* fd = dyn_cast<FunctionDecl>(nd->getUnderlyingDecl())) {
              c_.classify_callee(fd, e->getBeginLoc(), f_);
              if (f_.findings.size() > before) break;
            }
          if (f_.findings.size() > before) break;
        }
      if (f_.findings.size() == before)
        add(e->getBeginLoc(), "holds code that does not type-check as CUDA device code");
      return true;
    }

   private:
    void add(SourceLocation l, std::string what) { f_.findings.push_back({l, std::move(what)}); }
    Checker& c_;
    FunctionFacts& f_;
    std::unordered_set<const Expr*> callee_refs_;
  };

  /// Module-level constructs: things that would run when the module is loaded, or hide code.
  void check_module(const DeclContext* dc, std::vector<Finding>& out) {
    for (const Decl* d : dc->decls()) check_decl(d, out);
  }

  /// One module-level declaration, and what it holds that is instantiated or run at load:
  /// members of classes (static data members), specializations of class and variable
  /// templates.
  void check_decl(const Decl* d, std::vector<Finding>& out) {
    if (isa<LinkageSpecDecl, NamespaceDecl>(d)) {
      check_module(cast<DeclContext>(d), out);
      return;
    }
    if (const auto* ct = dyn_cast<ClassTemplateDecl>(d)) {
      for (const ClassTemplateSpecializationDecl* spec : ct->specializations()) check_decl(spec, out);
      return;
    }
    if (const auto* vt = dyn_cast<VarTemplateDecl>(d)) {
      for (const VarTemplateSpecializationDecl* spec : vt->specializations()) check_decl(spec, out);
      return;
    }
    if (!in_main(d->getLocation())) return;
    if (isa<FileScopeAsmDecl>(d)) {
      out.push_back({d->getBeginLoc(), "has file-scope inline assembly"});
      return;
    }
    for (const Attr* a : d->attrs())
      if (isa<ConstructorAttr, DestructorAttr, SectionAttr, AliasAttr, IFuncAttr, WeakRefAttr, WeakAttr, UsedAttr,
              InitPriorityAttr, CleanupAttr, AsmLabelAttr>(a)) {
        const auto* nd = dyn_cast<NamedDecl>(d);
        out.push_back({a->getLocation().isValid() ? a->getLocation() : d->getLocation(),
                       "declares '" + (nd ? nd->getQualifiedNameAsString() : std::string("?")) + "' with attribute '" +
                           std::string(a->getSpelling()) + "' (code or data the loader would run, place or rename)"});
        break;
      }
    if (const auto* rd = dyn_cast<CXXRecordDecl>(d)) {
      if (!rd->isDependentContext())
        for (const Decl* m : rd->decls())
          if (isa<VarDecl, CXXRecordDecl>(m)) check_decl(m, out);
      return;
    }
    const auto* vd = dyn_cast<VarDecl>(d);
    if (!vd || vd->isTemplated() || vd->getDeclContext()->isDependentContext()) return;
    if (vd->hasAttr<CUDASharedAttr>() || vd->hasExternalStorage() || !vd->hasGlobalStorage()) return;
    if (const Expr* init = vd->getInit()) {
      if (init->isValueDependent() || init->containsErrors()) return;
      if (!vd->hasConstantInitialization() && !vd->isConstexpr())
        out.push_back({vd->getLocation(), "defines global variable '" + vd->getQualifiedNameAsString() +
                                              "' with a dynamic initializer (it would run when loaded)"});
      else if (vd->getType()->isFunctionPointerType() || vd->getType()->isMemberFunctionPointerType())
        out.push_back({vd->getLocation(), "defines global function pointer '" + vd->getQualifiedNameAsString() + "'"});
    }
    if (const CXXRecordDecl* rd = ctx_.getBaseElementType(vd->getType())->getAsCXXRecordDecl())
      if (rd->hasDefinition() && !rd->hasTrivialDestructor())
        out.push_back({vd->getLocation(), "defines global variable '" + vd->getQualifiedNameAsString() +
                                              "' with a destructor (it would run at exit)"});
  }

  ASTContext& ctx_;
  const SourceManager& sm_;
  std::map<const FunctionDecl*, FunctionFacts> cache_;
};

/// The module function (definition in the main file) whose body holds `loc`, if any.
class EnclosingFunctions : public RecursiveASTVisitor<EnclosingFunctions> {
 public:
  explicit EnclosingFunctions(const SourceManager& sm) : sm_(sm) {}
  bool shouldVisitTemplateInstantiations() const { return false; }
  bool VisitFunctionDecl(FunctionDecl* fd) {
    if (fd->doesThisDeclarationHaveABody() && sm_.isInMainFile(sm_.getExpansionLoc(fd->getLocation())))
      fns_.push_back(fd);
    return true;
  }
  /// The innermost definition whose range holds the (expansion) line:col.
  const FunctionDecl* find(unsigned line, unsigned col) const {
    const FunctionDecl* best = nullptr;
    for (const FunctionDecl* fd : fns_) {
      PresumedLoc b = sm_.getPresumedLoc(sm_.getExpansionLoc(fd->getBeginLoc()));
      PresumedLoc e = sm_.getPresumedLoc(sm_.getExpansionRange(fd->getEndLoc()).getEnd());
      if (b.isInvalid() || e.isInvalid()) continue;
      auto key = [](unsigned l, unsigned c) { return (uint64_t(l) << 32) | c; };
      if (key(b.getLine(), b.getColumn()) <= key(line, col) && key(line, col) <= key(e.getLine(), e.getColumn()))
        best = fd;  // later (nested, e.g. a lambda or a member of a local class) wins
    }
    return best;
  }

 private:
  const SourceManager& sm_;
  std::vector<const FunctionDecl*> fns_;
};

/// Recursion and stack size, for one kernel: a call chain that returns to a function on it
/// is refused (TVM emits no recursion, and a recursion the back end cannot bound could
/// overflow a thread's stack), and so is a kernel whose local variables along its deepest
/// call chain exceed kCpuMaxLocalBytes (each CUDA thread runs on a stack of
/// kCpuThreadStackBytes). Both are refusals with ExitCode::DataError: the kernel is valid
/// CUDA, too large for this back end.
template <typename ToLoc, typename Refuse>
void check_stack(Checker& checker, const FunctionDecl* kernel, ToLoc&& to_loc, Refuse&& refuse) {
  const std::string kname = kernel->getNameAsString();
  struct Depth {
    uint64_t bytes = 0;             // locals along the deepest chain from this function
    const FunctionDecl* holder = nullptr;  // the function holding the chain's largest local
    uint64_t largest = 0;
  };
  std::map<const FunctionDecl*, Depth> memo;
  std::vector<const FunctionDecl*> path;
  bool refused = false;
  std::function<Depth(const FunctionDecl*)> walk = [&](const FunctionDecl* fd) -> Depth {
    if (auto it = memo.find(fd); it != memo.end()) return it->second;
    const FunctionFacts& f = checker.facts(fd);
    path.push_back(fd);
    Depth best;
    for (size_t i = 0; i < f.callees.size() && !refused; ++i) {
      const FunctionDecl* c = f.callees[i];
      auto on = std::find(path.begin(), path.end(), c);
      if (on != path.end()) {
        std::string chain;
        for (auto p = on; p != path.end(); ++p) chain += (*p)->getNameAsString() + " → ";
        chain += c->getNameAsString();
        refuse(to_loc(f.call_sites[i]), kname, fd == kernel ? "" : fd->getQualifiedNameAsString(),
               "recurses (" + chain + "): the CPU back end runs no recursive device function (TVM emits none, and "
               "its depth could not be bounded)",
               ExitCode::DataError);
        refused = true;
        break;
      }
      Depth d = walk(c);
      if (d.bytes > best.bytes) best = d;
    }
    path.pop_back();
    Depth mine = best;
    mine.bytes += f.frame_bytes;
    if (f.largest_bytes > mine.largest) mine.largest = f.largest_bytes, mine.holder = fd;
    memo[fd] = mine;
    return mine;
  };
  Depth d = walk(kernel);
  if (refused || d.bytes <= kCpuMaxLocalBytes || !d.holder) return;
  const FunctionFacts& h = checker.facts(d.holder);
  refuse(to_loc(h.largest), kname, d.holder == kernel ? "" : d.holder->getQualifiedNameAsString(),
         fmt::format("needs {} bytes of local variables per CUDA thread (the largest, '{}', {} bytes), more than the "
                     "CPU back end's {} KiB ({} KiB stack per thread)",
                     d.bytes, h.largest_name, h.largest_bytes, kCpuMaxLocalBytes / 1024,
                     kCpuThreadStackBytes / 1024),
         ExitCode::DataError);
}

}  // namespace

Status KernelSafetyReport::status() const {
  if (refusals.empty()) return Status::ok();
  return Error{refusals.front().line, refusals.front().code};
}

bool is_cpu_prelude_function(std::string_view name) {
  const Tables& t = tables();
  std::string n(name);
  return t.functions.count(n) || t.builtins.count(n);
}

Expected<KernelSafetyReport> check_kernel_safety(const std::string& source, const std::string& file,
                                                 const SafetyOptions& opt) {
  for (const auto& [name, value] : opt.macros) {
    bool ident = !name.empty() && !isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name) ident &= isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (!ident || value.find_first_of("\r\n") != std::string::npos)
      return Error{"kdflow: error: CPU safety check: bad macro '" + name + "'", ExitCode::Usage};
  }
  const std::vector<std::pair<std::string, std::string>> headers = safety_headers(opt.macros);
  const std::string virtual_main = std::string(detail::kVirtualInputDir) + "/device.cu";
  // The same command line as the device analyzer (device_analyzer.cpp), with clang's error
  // recovery on so that an error is attributed to its kernel instead of failing the file.
  std::vector<std::string> args = {"clang",
                                   "-fsyntax-only",
                                   "-x",
                                   "cuda",
                                   "--cuda-device-only",
                                   "-nocudainc",
                                   "-nocudalib",
                                   "--cuda-gpu-arch=sm_80",
                                   "--cuda-path=/__kdflow__/cuda",
                                   "-std=c++17",
                                   "-target",
                                   "x86_64-unknown-linux-gnu",
                                   "-nostdinc",
                                   "-w",
                                   "-ferror-limit=50",
                                   std::string("-I") + detail::kStubIncludeDir,
                                   "-include",
                                   std::string(detail::kStubIncludeDir) + "/" + detail::kDevicePrelude,
                                   "-include",
                                   std::string(detail::kStubIncludeDir) + "/" + kSafetyPrelude};
  detail::InMemorySource src{source, file, virtual_main, &headers};
  auto parsed = detail::parse_in_memory_recovering(src, args);
  if (!parsed) return parsed.error();
  ASTUnit& unit = *parsed->unit;
  ASTContext& ctx = unit.getASTContext();
  const SourceManager& sm = unit.getSourceManager();
  auto to_loc = [&](SourceLocation l) { return detail::presumed_loc(sm, l, virtual_main, file); };

  Checker checker(ctx, sm);
  KernelSafetyReport out;
  std::vector<const FunctionDecl*> kernels;
  detail::collect_cuda_kernels(ctx.getTranslationUnitDecl(), kernels);
  for (const FunctionDecl* k : kernels) out.kernels.push_back(k->getNameAsString());
  out.warp_sync_points = warp_lockstep_points(ctx, kernels);

  auto line_for = [&](const SourceLoc& l, const std::string& kernel, const std::string& via,
                      const std::string& construct, ExitCode code) {
    std::string who = kernel.empty() ? "the module" : "kernel '" + kernel + "'";
    if (!via.empty()) who += " (in '" + via + "', which it calls)";
    std::string msg = who + " cannot run on the CPU: it " + construct;
    return l.valid() ? source_error(l.file, l.line, l.col, msg, code).message : file_error(l.file, msg, code).message;
  };
  std::set<std::tuple<std::string, unsigned, unsigned, std::string, std::string>> seen;
  auto refuse_code = [&](SourceLoc l, const std::string& kernel, const std::string& via, const std::string& construct,
                         ExitCode code) {
    if (!seen.insert({kernel, l.line, l.col, via, construct}).second) return;
    SafetyRefusal r;
    r.code = code;
    r.line = line_for(l, kernel, via, construct, code);
    r.loc = std::move(l);
    r.kernel = kernel;
    r.via = via;
    r.construct = construct;
    out.refusals.push_back(std::move(r));
  };
  auto refuse = [&](SourceLoc l, const std::string& kernel, const std::string& via, const std::string& construct) {
    if (!seen.insert({kernel, l.line, l.col, via, construct}).second) return;
    SafetyRefusal r;
    r.line = line_for(l, kernel, via, construct, ExitCode::Unavailable);
    r.loc = std::move(l);
    r.kernel = kernel;
    r.via = via;
    r.construct = construct;
    out.refusals.push_back(std::move(r));
  };

  // Module level.
  std::vector<Finding> module;
  checker.check_module(ctx.getTranslationUnitDecl(), module);
  for (const Finding& f : module) refuse(to_loc(f.loc), "", "", f.construct);

  // clang's own errors, attributed to the module function that holds them.
  EnclosingFunctions enclosing(sm);
  if (!parsed->errors.empty()) enclosing.TraverseDecl(ctx.getTranslationUnitDecl());
  std::map<const FunctionDecl*, std::vector<const detail::ParseError*>> errors_in;
  for (const detail::ParseError& e : parsed->errors) {
    const FunctionDecl* fd = e.loc.file == file ? enclosing.find(e.loc.line, e.loc.col) : nullptr;
    if (fd) {
      errors_in[fd->getCanonicalDecl()].push_back(&e);
    } else {
      std::string msg = e.line;
      size_t p = msg.find("error: ");
      refuse(e.loc, "", "",
             "does not type-check as CUDA device code: " + (p == std::string::npos ? msg : msg.substr(p + 7)));
    }
  }

  std::set<std::string> used;
  for (const FunctionDecl* k : kernels) {
    std::string kname = k->getNameAsString();
    std::set<const FunctionDecl*> visited;
    std::deque<const FunctionDecl*> work = {k};
    visited.insert(k);
    while (!work.empty()) {
      const FunctionDecl* fd = work.front();
      work.pop_front();
      std::string via = fd == k ? "" : fd->getQualifiedNameAsString();
      const FunctionFacts& f = checker.facts(fd);
      std::set<std::pair<unsigned, unsigned>> here;
      for (const Finding& x : f.findings) {
        SourceLoc l = to_loc(x.loc);
        here.insert({l.line, l.col});
        refuse(std::move(l), kname, via, x.construct);
      }
      // clang's errors in this function that no finding above already explains.
      const FunctionDecl* pattern = fd->getTemplateInstantiationPattern();
      for (const FunctionDecl* key : {fd->getCanonicalDecl(), pattern ? pattern->getCanonicalDecl() : nullptr}) {
        auto it = key ? errors_in.find(key) : errors_in.end();
        if (it == errors_in.end()) continue;
        for (const detail::ParseError* e : it->second) {
          if (here.count({e->loc.line, e->loc.col})) continue;
          size_t p = e->line.find("error: ");
          refuse(
              e->loc, kname, via,
              "does not type-check as CUDA device code: " + (p == std::string::npos ? e->line : e->line.substr(p + 7)));
        }
      }
      used.insert(f.builtins.begin(), f.builtins.end());
      for (const FunctionDecl* c : f.callees)
        if (visited.insert(c).second) work.push_back(c);
    }
    check_stack(checker, k, to_loc, refuse_code);
    // Static shared memory: a block's, so every function the kernel reaches counts. CUDA
    // allows 48 KiB of it (nvcc refuses more); the CPU back end would allocate it per worker.
    uint64_t shared = 0;
    const FunctionDecl* holder = nullptr;
    for (const FunctionDecl* fd : visited) {
      const FunctionFacts& f = checker.facts(fd);
      shared += f.shared_bytes;
      if (f.shared_bytes > 0 && (!holder || f.shared_bytes > checker.facts(holder).shared_bytes)) holder = fd;
    }
    if (shared > kCudaStaticSharedBytes && holder) {
      const FunctionFacts& h = checker.facts(holder);
      refuse_code(to_loc(h.largest_shared), kname, holder == k ? "" : holder->getQualifiedNameAsString(),
                  fmt::format("declares {} bytes of static __shared__ memory (with '{}'), more than the {} KiB CUDA "
                              "allows a block",
                              shared, h.largest_shared_name, kCudaStaticSharedBytes / 1024),
                  ExitCode::DataError);
    }
  }
  out.builtins_used.assign(used.begin(), used.end());
  return out;
}

}  // namespace kdflow::cpu
