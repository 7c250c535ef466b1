// host_analyzer.cpp — parse TVM's host C with clang (in-memory files only) and interpret a
// fused function's body on the AST.
//
// Why an interpreter and not matchers: TVM launches kernels inside host loops and
// branches, computes launch extents from shapes and loop variables, and reuses one
// TVMValue stack for every call. Only walking the body in order, with values, recovers
// the real launch sequence. The interpreter models C memory as objects holding typed
// cells at byte offsets, so stores through `((TVMValue*)stack)[i].v_int64` and loads
// through `((DLTensor*)p)[0].shape` work whatever names TVM printed.
//
// Nothing here executes the analyzed code: every construct is evaluated by this file,
// under step, loop, call-depth and memory limits. Anything not understood is an error
// with its host.c position, never a guess. Internally failures are thrown as Failure
// and caught in exactly one place (HostProgram::run / parse).

#include "kdflow/frontend/host_analyzer.h"

#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/AST/Expr.h>
#include <clang/AST/RecordLayout.h>
#include <clang/AST/Stmt.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/FileManager.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/ASTUnit.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/VirtualFileSystem.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

#include "host_headers.h"
#include "host_math.h"
#include "in_memory_parse.h"

namespace kdflow {

namespace {

using namespace clang;

// ---------------------------------------------------------------------------
// Values and memory

struct Ptr {
  enum class Base : uint8_t { Null, Object, Entry, Workspace, Func, String, ModuleCtx, Function, Vm };
  Base base = Base::Null;
  int64_t id = 0;   // object id, entry id, workspace index, function-name id, string id
  int64_t off = 0;  // byte offset
  bool operator==(const Ptr& o) const {
    return base == o.base && (base == Base::Null || (id == o.id && off == o.off));
  }
};

struct Value {
  enum class Kind : uint8_t { Int, Float, Ptr };
  Kind kind = Kind::Int;
  /// Int: the symbolic expression the value was computed from (an index into the
  /// interpreter's Sym arena), -1 when it came from constants only.
  int32_t sym = -1;
  int64_t i = 0;  // Int: the bits, normalized to the value's C type
  double f = 0;
  Ptr p;
  static Value of_int(int64_t v) { Value x; x.i = v; return x; }
  static Value of_float(double v) { Value x; x.kind = Kind::Float; x.f = v; return x; }
  static Value of_ptr(Ptr v) { Value x; x.kind = Kind::Ptr; x.p = v; return x; }
};

struct Cell {
  Value v;
  uint32_t size = 0;
};

enum class ObjRole : uint8_t { Plain, Args, TypeCodes, Tensor, Shape };

struct Object {
  std::map<int64_t, Cell> cells;
  int64_t size = 0;
  bool zero_fill = false;  // static storage: unwritten bytes read as zero
  ObjRole role = ObjRole::Plain;
  int tensor_index = -1;   // Tensor / Shape: which function argument
  std::string what;        // for diagnostics
};

struct Failure {
  SourceLocation loc;
  std::string msg;
};

enum class Flow { Normal, Break, Continue, Return };

/// A node of a symbolic integer expression: a shape symbol TVM names in a function's
/// signature ("n"), a constant, or an arithmetic operator over two nodes.
struct Sym {
  enum class Kind : uint8_t { Name, Const, Binary, Negate };
  Kind kind = Kind::Const;
  BinaryOperatorKind op = BO_Add;
  uint16_t depth = 0;
  int32_t a = -1, b = -1;
  int64_t value = 0;
  std::string name;
};

}  // namespace

// ---------------------------------------------------------------------------
// HostProgram::Impl: the parsed translation unit

struct HostProgram::Impl {
  std::string label;      // file name used in diagnostics
  std::string virtual_main;
  InterpreterLimits limits;
  std::unique_ptr<ASTUnit> unit;
  std::map<std::string, const FunctionDecl*> functions;  // name → definition
  std::vector<std::string> function_order;
  const RecordDecl* dltensor = nullptr;
  /// TVM 0.21+ (tvm-ffi): the type index a Tensor object arrives with and where its DLTensor
  /// starts, as the host C's own literals say (`x_type_index == 70` … `v_ptr) + 24`).
  int64_t ffi_tensor_type_index = 70;
  int64_t ffi_tensor_dltensor_offset = 24;

  SourceLoc to_loc(SourceLocation l) const {
    return detail::presumed_loc(unit->getSourceManager(), l, virtual_main, label);
  }
};

namespace {

/// One interpretation of one function call from the graph executor.
class Interpreter {
 public:
  Interpreter(const HostProgram::Impl& prog, HostTrace& trace)
      : prog_(prog), ctx_(prog.unit->getASTContext()), trace_(trace) {}

  void run(const FunctionDecl* fn, const std::vector<TensorArg>& tensors);
  /// After run() with a host tensor argument: its int64 elements; `(*known)[i]` whether element
  /// i holds a value (0 where not).
  /// What a tvm-ffi function stored in its result (TVMFFIAny): (type index, value); type 1
  /// int, 2 bool, 3 float. Only after run() of a tvm-ffi function.
  std::pair<int64_t, Value> ffi_result(SourceLocation loc) {
    if (result_obj_ < 0) fail(loc, "the function has no tvm-ffi result");
    int64_t type = load(Ptr{Ptr::Base::Object, result_obj_, 0}, ctx_.IntTy, loc).i;
    QualType t = type == 3 ? ctx_.DoubleTy : ctx_.LongLongTy;
    return {type, load(Ptr{Ptr::Base::Object, result_obj_, 8}, t, loc)};
  }
  std::vector<int64_t> host_tensor_values(size_t n, std::vector<bool>* known) {
    std::vector<int64_t> out(n, 0);
    known->assign(n, false);
    const Object& o = objects_.at(static_cast<size_t>(host_data_obj_));
    for (size_t i = 0; i < n; ++i) {
      auto it = o.cells.find(static_cast<int64_t>(8 * i));
      if (it == o.cells.end() || it->second.v.kind != Value::Kind::Int) continue;
      out[i] = it->second.v.i;
      (*known)[i] = true;
    }
    return out;
  }
  /// Compiled-mode Relax (TVM 0.20): runs __vmtir__main(ctx, r, c, f), recording its VM steps.
  void run_vm(const FunctionDecl* fn, std::vector<VmHostCall>* calls);

 private:
  int64_t result_obj_ = -1;  ///< the tvm-ffi result of the function run() called

  // --- memory
  int64_t new_object(int64_t size, std::string what, ObjRole role = ObjRole::Plain) {
    if (objects_.size() >= prog_.limits.max_memory_cells) fail(cur_loc_, "too many objects (limit reached)");
    Object o;
    o.size = size;
    o.what = std::move(what);
    o.role = role;
    objects_.push_back(std::move(o));
    return static_cast<int64_t>(objects_.size() - 1);
  }

  [[noreturn]] void fail(SourceLocation loc, const std::string& msg) const { throw Failure{loc, msg}; }

  uint64_t type_size(QualType t) const {
    if (t->isVoidType() || t->isFunctionType()) return 1;  // GNU arithmetic on void*
    if (t->isIncompleteType()) fail(cur_loc_, "size of incomplete type '" + t.getAsString() + "'");
    return static_cast<uint64_t>(ctx_.getTypeSizeInChars(t).getQuantity());
  }

  std::string object_name(const Ptr& p) const {
    switch (p.base) {
      case Ptr::Base::Object: return objects_[p.id].what;
      case Ptr::Base::Entry: return "the data of graph entry " + std::to_string(p.id);
      case Ptr::Base::Workspace: return "workspace " + std::to_string(p.id);
      case Ptr::Base::Null: return "NULL";
      default: return "a non-data pointer";
    }
  }

  Value load(const Ptr& p, QualType t, SourceLocation loc) {
    cur_loc_ = loc;
    if (p.base != Ptr::Base::Object) {
      if (p.base == Ptr::Base::Null) fail(loc, "dereference of a NULL pointer");
      fail(loc, "reads through " + object_name(p) + ", which the host code cannot see");
    }
    Object& o = objects_[p.id];
    uint64_t size = type_size(t);
    if (p.off < 0 || p.off + static_cast<int64_t>(size) > o.size) {
      if (o.role == ObjRole::Args)
        fail(loc, "reads args[" + std::to_string(p.off / arg_stride_) + "] but the graph node passes " +
                      std::to_string(o.size / arg_stride_) + " arguments");
      if (o.role == ObjRole::TypeCodes)
        fail(loc, "reads arg_type_ids[" + std::to_string(p.off / 4) + "] but the graph node passes " +
                      std::to_string(o.size / 4) + " arguments");
      if (o.role == ObjRole::Shape)
        fail(loc, "reads shape[" + std::to_string(p.off / 8) + "] of argument " + std::to_string(o.tensor_index) +
                      ", which has " + std::to_string(o.size / 8) + " dimensions in graph.json");
      fail(loc, "out-of-bounds read at byte " + std::to_string(p.off) + " of " + o.what);
    }
    if (o.role == ObjRole::Args)
      trace_.args_used = std::max<int>(trace_.args_used, static_cast<int>(p.off / arg_stride_) + 1);
    auto it = o.cells.find(p.off);
    if (it == o.cells.end()) {
      // An access inside a wider cell is not modelled (TVM never does it).
      auto after = o.cells.upper_bound(p.off);
      if (after != o.cells.begin()) {
        auto before = std::prev(after);
        if (before->first + static_cast<int64_t>(before->second.size) > p.off)
          fail(loc, "partial read inside a value of " + o.what);
      }
      if (!o.zero_fill) fail(loc, "read of uninitialized memory in " + o.what);
      if (t->isPointerType()) return Value::of_ptr(Ptr{});
      if (t->isRealFloatingType()) return Value::of_float(0);
      return Value::of_int(0);
    }
    const Value& v = it->second.v;
    if (t->isPointerType()) {
      if (v.kind == Value::Kind::Ptr) return v;
      if (v.kind == Value::Kind::Int && v.i == 0) return Value::of_ptr(Ptr{});
      fail(loc, "a number is read back as a pointer from " + o.what);
    }
    if (t->isRealFloatingType()) {
      if (v.kind != Value::Kind::Float || it->second.size != size)
        fail(loc, "a value is read back as a different floating type from " + o.what);
      return t->isSpecificBuiltinType(BuiltinType::Float) ? Value::of_float(static_cast<float>(v.f)) : v;
    }
    if (t->isIntegralOrEnumerationType()) {
      if (v.kind == Value::Kind::Ptr) {
        if (v.p.base == Ptr::Base::Null) return Value::of_int(0);
        fail(loc, "a pointer is read back as an integer from " + o.what);
      }
      if (v.kind == Value::Kind::Float) fail(loc, "a floating value is read back as an integer from " + o.what);
      if (it->second.size < size) fail(loc, "a narrow integer is read back as a wider one from " + o.what);
      return keep_sym(Value::of_int(normalize(v.i, t)), v);  // a narrower read keeps the low bytes (little-endian)
    }
    fail(loc, "unsupported load of type '" + t.getAsString() + "'");
  }

  void store(const Ptr& p, QualType t, const Value& v, SourceLocation loc) {
    cur_loc_ = loc;
    if (p.base != Ptr::Base::Object) {
      if (p.base == Ptr::Base::Null) fail(loc, "store through a NULL pointer");
      fail(loc, "writes through " + object_name(p) + ", which the host code cannot see");
    }
    Object& o = objects_[p.id];
    uint64_t size = type_size(t);
    if (p.off < 0 || p.off + static_cast<int64_t>(size) > o.size)
      fail(loc, "out-of-bounds write at byte " + std::to_string(p.off) + " of " + o.what);
    // Drop cells overlapping [off, off+size).
    auto it = o.cells.lower_bound(p.off);
    if (it != o.cells.begin()) {
      auto prev = std::prev(it);
      if (prev->first + static_cast<int64_t>(prev->second.size) > p.off) it = prev;
    }
    while (it != o.cells.end() && it->first < p.off + static_cast<int64_t>(size)) {
      it = o.cells.erase(it);
      --cells_;
    }
    // Live cells, not stores: a loop that rewrites the same TVMValue stack costs nothing here.
    if (++cells_ > prog_.limits.max_memory_cells) fail(loc, "interpreter memory limit reached");
    o.cells[p.off] = Cell{v, static_cast<uint32_t>(size)};
  }

  // --- integer semantics
  int64_t normalize(int64_t v, QualType t) const {
    t = t.getCanonicalType();
    if (t->isBooleanType()) return v != 0;
    if (const auto* et = t->getAs<EnumType>()) t = et->getDecl()->getIntegerType();
    uint64_t bits = ctx_.getTypeSize(t);
    if (bits >= 64) return v;
    uint64_t mask = (uint64_t(1) << bits) - 1;
    uint64_t u = static_cast<uint64_t>(v) & mask;
    if (t->isSignedIntegerOrEnumerationType() && (u >> (bits - 1)) & 1) u |= ~mask;
    return static_cast<int64_t>(u);
  }

  bool is_unsigned(QualType t) const { return t->isUnsignedIntegerOrEnumerationType() || t->isBooleanType(); }

  Value convert(const Value& v, QualType to, SourceLocation loc) {
    to = to.getCanonicalType();
    if (to->isVoidType()) return v;
    if (to->isBooleanType()) return Value::of_int(truthy(v, loc) ? 1 : 0);
    if (to->isPointerType()) {
      if (v.kind == Value::Kind::Ptr) return v;
      if (v.kind == Value::Kind::Int && v.i == 0) return Value::of_ptr(Ptr{});
      fail(loc, "an integer other than 0 is converted to a pointer");
    }
    if (to->isRealFloatingType()) {
      double d;
      if (v.kind == Value::Kind::Float) d = v.f;
      else if (v.kind == Value::Kind::Int) d = static_cast<double>(v.i);  // signedness fixed below
      else fail(loc, "a pointer is converted to a floating type");
      if (v.kind == Value::Kind::Int && cur_unsigned_source_) d = static_cast<double>(static_cast<uint64_t>(v.i));
      if (to->isSpecificBuiltinType(BuiltinType::Float)) d = static_cast<float>(d);
      return Value::of_float(d);
    }
    if (to->isIntegralOrEnumerationType()) {
      if (v.kind == Value::Kind::Int) return keep_sym(Value::of_int(normalize(v.i, to)), v);
      if (v.kind == Value::Kind::Float) {
        double d = std::trunc(v.f);
        bool uns = is_unsigned(to);
        uint64_t bits = ctx_.getTypeSize(to);
        double lo = uns ? 0.0 : -std::ldexp(1.0, static_cast<int>(bits) - 1);
        double hi = uns ? std::ldexp(1.0, static_cast<int>(bits)) : std::ldexp(1.0, static_cast<int>(bits) - 1);
        if (!(d >= lo && d < hi))
          fail(loc, "floating value " + std::to_string(v.f) + " does not fit the integer type '" + to.getAsString() + "'");
        return Value::of_int(uns ? normalize(static_cast<int64_t>(static_cast<uint64_t>(d)), to)
                                 : static_cast<int64_t>(d));
      }
      if (v.p.base == Ptr::Base::Null) return Value::of_int(0);
      fail(loc, "a pointer is converted to an integer");
    }
    fail(loc, "unsupported conversion to '" + to.getAsString() + "'");
  }

  bool truthy(const Value& v, SourceLocation loc) const {
    switch (v.kind) {
      case Value::Kind::Int: return v.i != 0;
      case Value::Kind::Float: return v.f != 0;
      case Value::Kind::Ptr: return v.p.base != Ptr::Base::Null;
    }
    return false;
  }

  void step(SourceLocation loc) {
    if (++trace_.steps > prog_.limits.max_steps)
      fail(loc, "interpreter step limit (" + std::to_string(prog_.limits.max_steps) + ") reached");
  }

  // --- lvalues
  Ptr lvalue(const Expr* e);
  Ptr var_address(const VarDecl* vd, SourceLocation loc);
  int64_t field_offset(const FieldDecl* fd) const {
    return static_cast<int64_t>(ctx_.getFieldOffset(fd) / ctx_.getCharWidth());
  }

  // --- rvalues
  Value eval(const Expr* e);
  Value eval_cast(const CastExpr* ce);
  Value eval_binary(const BinaryOperator* bo);
  Value eval_unary(const UnaryOperator* uo);
  Value eval_call(const CallExpr* ce);
  Value arith(BinaryOperatorKind op, const Value& a, const Value& b, QualType a_type, QualType b_type,
              QualType result_type, SourceLocation loc);
  Value int_arith(BinaryOperatorKind op, int64_t a, int64_t b, QualType type, QualType rtype, SourceLocation loc);
  Value call_function(const FunctionDecl* fn, const std::vector<Value>& args, SourceLocation loc);

  // --- statements
  Flow exec(const Stmt* s);
  void init_object(const Ptr& at, QualType t, const Expr* init);

  // --- runtime API
  Value rt_get_func(const CallExpr* ce);
  Value rt_func_call(const CallExpr* ce);
  Value rt_alloc_workspace(const CallExpr* ce);
  Value rt_free_workspace(const CallExpr* ce);
  PackedArg packed_arg(const Value& v, int64_t tcode, int index, SourceLocation loc);

  // --- symbolic integers: which shape symbols a value was computed from (tvm-ffi builds
  // name them in each function's signature; TensorArg::shape_names). Bounded: past the
  // limits a value simply carries no expression.
  static constexpr size_t kMaxSyms = 4096;
  static constexpr uint16_t kMaxSymDepth = 12;
  std::vector<Sym> syms_;
  int32_t push_sym(Sym s) {
    if (syms_.size() >= kMaxSyms || s.depth > kMaxSymDepth) return -1;
    syms_.push_back(std::move(s));
    return static_cast<int32_t>(syms_.size() - 1);
  }
  int32_t sym_name(const std::string& name) {
    Sym s;
    s.kind = Sym::Kind::Name;
    s.name = name;
    return push_sym(std::move(s));
  }
  int32_t sym_operand(const Value& v) {
    if (v.sym >= 0) return v.sym;
    Sym s;
    s.value = v.i;
    return push_sym(std::move(s));
  }
  int32_t sym_binary(BinaryOperatorKind op, const Value& a, const Value& b) {
    switch (op) {
      case BO_Add: case BO_Sub: case BO_Mul: case BO_Div: case BO_Rem:
      case BO_Shl: case BO_Shr: case BO_And: case BO_Or: case BO_Xor: break;
      default: return -1;
    }
    int32_t x = sym_operand(a), y = sym_operand(b);
    if (x < 0 || y < 0) return -1;
    Sym s;
    s.kind = Sym::Kind::Binary;
    s.op = op;
    s.a = x, s.b = y;
    s.depth = static_cast<uint16_t>(1 + std::max(syms_[x].depth, syms_[y].depth));
    return push_sym(std::move(s));
  }
  int32_t sym_negate(int32_t x) {
    Sym s;
    s.kind = Sym::Kind::Negate;
    s.a = x;
    s.depth = static_cast<uint16_t>(1 + syms_[x].depth);
    return push_sym(std::move(s));
  }
  /// C syntax, every operator under another one in parentheses: "(n + 31) >> 5".
  std::string sym_text(int32_t i, bool top) const {
    const Sym& s = syms_[static_cast<size_t>(i)];
    switch (s.kind) {
      case Sym::Kind::Name: {
        // A signature may name a dimension by an expression ("n * 2"): parenthesised under an operator.
        bool plain = std::all_of(s.name.begin(), s.name.end(),
                                 [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
        return top || plain ? s.name : "(" + s.name + ")";
      }
      case Sym::Kind::Const: return std::to_string(s.value);
      case Sym::Kind::Negate: return "-" + sym_text(s.a, false);
      case Sym::Kind::Binary: {
        std::string t = sym_text(s.a, false) + " " + BinaryOperator::getOpcodeStr(s.op).str() + " " +
                        sym_text(s.b, false);
        return top ? t : "(" + t + ")";
      }
    }
    return "";
  }
  /// `r` (converted from `from`) keeps `from`'s expression when the conversion kept the value.
  static Value keep_sym(Value r, const Value& from) {
    if (from.kind == Value::Kind::Int && r.i == from.i) r.sym = from.sym;
    return r;
  }
  // --- the tvm-ffi C ABI (TVM 0.21+)
  Value rt_ffi_call(const CallExpr* ce);
  Value rt_ffi_error(const CallExpr* ce, bool parts);
  /// Slot i of a packed-call stack: the legacy type code (kTVMArgInt 0, kTVMArgFloat 2,
  /// handle 3, null 4, DLTensor* 7, string 11, object 13; tvm-ffi indices mapped to these,
  /// unknown ones to 1000 + index) and the value that code says was written.
  std::pair<int64_t, Value> stack_slot(const Value& values, const Value& codes, int64_t i, SourceLocation loc);
  bool ffi_ = false;          // the function runs under the tvm-ffi ABI (4 parameters)
  int64_t host_data_obj_ = -1;  // the object holding a host tensor argument's elements
  int64_t arg_stride_ = 8;    // sizeof(TVMValue) or sizeof(TVMFFIAny)
  int64_t tensor_dl_off_ = 0; // where an argument tensor object's DLTensor starts
  void read_tensor(const Ptr& t, PackedArg& a, const std::string& where, SourceLocation loc);

  /// Byte offsets of the stand-in DLTensor's fields (host_headers.cpp), set by run().
  struct DlLayout {
    int64_t size = 0, data = 0, device = 0, ndim = 0, dtype = 0, shape = 0, strides = 0, byte_offset = 0;
  };
  DlLayout dl_;

  const HostProgram::Impl& prog_;
  ASTContext& ctx_;
  HostTrace& trace_;
  std::vector<Object> objects_;
  uint64_t cells_ = 0;
  std::unordered_map<const VarDecl*, int64_t> globals_;
  std::vector<std::unordered_map<const VarDecl*, int64_t>> frames_;
  std::vector<Value> return_values_;
  std::vector<int64_t> loop_iters_;
  std::vector<std::string> func_names_;
  std::unordered_map<std::string, int64_t> func_ids_;
  std::vector<std::string> strings_;
  std::unordered_map<const StringLiteral*, int64_t> string_ids_;
  std::vector<int64_t> workspace_live_;
  std::string last_error_;
  mutable SourceLocation cur_loc_;
  bool cur_unsigned_source_ = false;
  unsigned depth_ = 0;
  /// Expressions and statements being evaluated within each other: a hostile host.c (an
  /// `a && a && ...` chain thousands long) must end in an error, not a stack overflow.
  unsigned nesting_ = 0;
  static constexpr unsigned kMaxNesting = 512;  // TVM's host C nests under 30
  struct Nest {
    Interpreter& in;
    Nest(Interpreter& interp, SourceLocation loc) : in(interp) {
      if (++in.nesting_ > kMaxNesting) {
        --in.nesting_;
        in.fail(loc, "expressions or statements nested more than " + std::to_string(kMaxNesting) + " deep");
      }
    }
    ~Nest() { --in.nesting_; }
  };
  // Compiled-mode Relax: VM values are opaque tokens Ptr{Vm, kind, index}.
  enum VmToken : int64_t { kVmReg = 0, kVmConst = 1, kVmCtx = 2, kVmReturn = 3, kVmRegList = 10, kVmConstList = 11,
                           kVmFuncList = 12 };
  std::vector<VmHostCall>* vm_calls_ = nullptr;
  Value rt_anylist(const CallExpr* ce, const std::string& name);
  Value rt_vm_call(const CallExpr* ce, const std::string& name, const Value& values, const Value& codes, int64_t n,
                   int64_t ret_slot);
  VmOperand vm_operand(const Value& v, int64_t tcode, int index, SourceLocation loc);
  uint64_t loop_trips_ = 0;
  SourceLocation return_loc_;
};

// --- variables --------------------------------------------------------------

Ptr Interpreter::var_address(const VarDecl* vd, SourceLocation loc) {
  if (vd->hasLocalStorage()) {
    for (auto f = frames_.rbegin(); f != frames_.rend(); ++f) {
      auto it = f->find(vd);
      if (it != f->end()) return Ptr{Ptr::Base::Object, it->second, 0};
      break;  // locals are only visible in the innermost frame
    }
    fail(loc, "use of variable '" + vd->getNameAsString() + "' before its declaration was executed");
  }
  // Static storage: created on first use, zero-filled, then its initializer runs.
  auto it = globals_.find(vd->getCanonicalDecl());
  if (it != globals_.end()) return Ptr{Ptr::Base::Object, it->second, 0};
  const VarDecl* def = vd->getDefinition();
  if (!def) def = vd->getActingDefinition();  // a tentative definition (`int x;`)
  if (!def) {
    // TVM 0.14 uses the module context without defining it; the runtime provides it.
    if (vd->getName() != "__tvm_module_ctx")
      fail(loc, "use of extern variable '" + vd->getNameAsString() + "', which the file does not define");
    int64_t id = new_object(8, "__tvm_module_ctx");
    objects_[id].cells[0] = Cell{Value::of_ptr(Ptr{Ptr::Base::ModuleCtx, 0, 0}), 8};
    globals_[vd->getCanonicalDecl()] = id;
    return Ptr{Ptr::Base::Object, id, 0};
  }
  int64_t id = new_object(static_cast<int64_t>(type_size(def->getType())), "variable '" + def->getNameAsString() + "'");
  objects_[id].zero_fill = true;
  globals_[vd->getCanonicalDecl()] = id;
  if (const Expr* init = def->getInit()) init_object(Ptr{Ptr::Base::Object, id, 0}, def->getType(), init);
  return Ptr{Ptr::Base::Object, id, 0};
}

void Interpreter::init_object(const Ptr& at, QualType t, const Expr* init) {
  init = init->IgnoreParens();
  step(init->getBeginLoc());
  if (const auto* il = dyn_cast<InitListExpr>(init)) {
    if (const auto* at_type = ctx_.getAsArrayType(t)) {
      QualType et = at_type->getElementType();
      int64_t es = static_cast<int64_t>(type_size(et));
      for (unsigned i = 0; i < il->getNumInits(); ++i)
        init_object(Ptr{at.base, at.id, at.off + es * i}, et, il->getInit(i));
      return;
    }
    if (const auto* rt = t->getAs<RecordType>()) {
      const RecordDecl* rd = rt->getDecl();
      unsigned i = 0;
      if (rd->isUnion()) {
        if (const FieldDecl* fd = il->getInitializedFieldInUnion())
          if (il->getNumInits() > 0) init_object(Ptr{at.base, at.id, at.off + field_offset(fd)}, fd->getType(), il->getInit(0));
        return;
      }
      for (const FieldDecl* fd : rd->fields()) {
        if (i >= il->getNumInits()) break;
        init_object(Ptr{at.base, at.id, at.off + field_offset(fd)}, fd->getType(), il->getInit(i++));
      }
      return;
    }
    if (il->getNumInits() == 1) return init_object(at, t, il->getInit(0));
    fail(init->getBeginLoc(), "unsupported initializer list");
  }
  if (isa<ImplicitValueInitExpr>(init)) {
    if (t->isScalarType()) store(at, t, convert(Value::of_int(0), t, init->getBeginLoc()), init->getBeginLoc());
    return;  // aggregates: objects of static storage are zero-filled; locals stay unset
  }
  if (t->isArrayType() || t->isRecordType()) fail(init->getBeginLoc(), "unsupported aggregate initializer");
  store(at, t, eval(init), init->getBeginLoc());
}

// --- lvalues ----------------------------------------------------------------

Ptr Interpreter::lvalue(const Expr* e) {
  Nest nest(*this, e->getBeginLoc());
  step(e->getBeginLoc());
  cur_loc_ = e->getBeginLoc();
  e = e->IgnoreParens();
  if (const auto* dr = dyn_cast<DeclRefExpr>(e)) {
    if (const auto* vd = dyn_cast<VarDecl>(dr->getDecl())) return var_address(vd, e->getBeginLoc());
    fail(e->getBeginLoc(), "'" + dr->getDecl()->getNameAsString() + "' is not a variable");
  }
  if (const auto* as = dyn_cast<ArraySubscriptExpr>(e)) {
    Value base = eval(as->getBase());
    Value idx = eval(as->getIdx());
    if (base.kind != Value::Kind::Ptr || idx.kind != Value::Kind::Int)
      fail(e->getBeginLoc(), "unsupported array subscript");
    Ptr p = base.p;
    int64_t es = static_cast<int64_t>(type_size(as->getType()));
    p.off += idx.i * es;
    return p;
  }
  if (const auto* me = dyn_cast<MemberExpr>(e)) {
    Ptr base;
    if (me->isArrow()) {
      Value b = eval(me->getBase());
      if (b.kind != Value::Kind::Ptr) fail(e->getBeginLoc(), "'->' on a non-pointer");
      base = b.p;
    } else {
      base = lvalue(me->getBase());
    }
    const auto* fd = dyn_cast<FieldDecl>(me->getMemberDecl());
    if (!fd) fail(e->getBeginLoc(), "unsupported member access");
    if (fd->isBitField()) fail(e->getBeginLoc(), "bit-fields are not supported");
    base.off += field_offset(fd);
    return base;
  }
  if (const auto* uo = dyn_cast<UnaryOperator>(e)) {
    if (uo->getOpcode() == UO_Deref) {
      Value v = eval(uo->getSubExpr());
      if (v.kind != Value::Kind::Ptr) fail(e->getBeginLoc(), "dereference of a non-pointer");
      return v.p;
    }
  }
  if (const auto* sl = dyn_cast<StringLiteral>(e)) {
    auto it = string_ids_.find(sl);
    int64_t id;
    if (it == string_ids_.end()) {
      id = static_cast<int64_t>(strings_.size());
      strings_.push_back(sl->getBytes().str());
      string_ids_[sl] = id;
    } else {
      id = it->second;
    }
    return Ptr{Ptr::Base::String, id, 0};
  }
  if (const auto* cl = dyn_cast<CompoundLiteralExpr>(e)) {
    int64_t id = new_object(static_cast<int64_t>(type_size(cl->getType())), "a compound literal");
    init_object(Ptr{Ptr::Base::Object, id, 0}, cl->getType(), cl->getInitializer());
    return Ptr{Ptr::Base::Object, id, 0};
  }
  fail(e->getBeginLoc(), std::string("unsupported lvalue expression (") + e->getStmtClassName() + ")");
}

// --- expressions ------------------------------------------------------------

Value Interpreter::eval(const Expr* e) {
  Nest nest(*this, e->getBeginLoc());
  step(e->getBeginLoc());
  cur_loc_ = e->getBeginLoc();
  e = e->IgnoreParens();
  switch (e->getStmtClass()) {
    case Stmt::IntegerLiteralClass:
      return Value::of_int(normalize(static_cast<int64_t>(cast<IntegerLiteral>(e)->getValue().getZExtValue()), e->getType()));
    case Stmt::CharacterLiteralClass:
      return Value::of_int(normalize(cast<CharacterLiteral>(e)->getValue(), e->getType()));
    case Stmt::FloatingLiteralClass:
      return Value::of_float(cast<FloatingLiteral>(e)->getValue().convertToDouble());
    case Stmt::StringLiteralClass:
      return Value::of_ptr(lvalue(e));
    case Stmt::ImplicitCastExprClass:
    case Stmt::CStyleCastExprClass:
      return eval_cast(cast<CastExpr>(e));
    case Stmt::BinaryOperatorClass:
    case Stmt::CompoundAssignOperatorClass:
      return eval_binary(cast<BinaryOperator>(e));
    case Stmt::UnaryOperatorClass:
      return eval_unary(cast<UnaryOperator>(e));
    case Stmt::ConditionalOperatorClass: {
      const auto* co = cast<ConditionalOperator>(e);
      return truthy(eval(co->getCond()), co->getBeginLoc()) ? eval(co->getTrueExpr()) : eval(co->getFalseExpr());
    }
    case Stmt::BinaryConditionalOperatorClass: {
      const auto* bc = cast<BinaryConditionalOperator>(e);
      Value c = eval(bc->getCommon());
      return truthy(c, bc->getBeginLoc()) ? c : eval(bc->getFalseExpr());
    }
    case Stmt::CallExprClass:
      return eval_call(cast<CallExpr>(e));
    case Stmt::DeclRefExprClass: {
      const auto* dr = cast<DeclRefExpr>(e);
      if (const auto* ec = dyn_cast<EnumConstantDecl>(dr->getDecl()))
        return Value::of_int(normalize(ec->getInitVal().getExtValue(), e->getType()));
      if (const auto* fd = dyn_cast<FunctionDecl>(dr->getDecl())) {
        std::string name = fd->getNameAsString();
        auto it = func_ids_.find("fn:" + name);
        int64_t id;
        if (it == func_ids_.end()) {
          id = static_cast<int64_t>(func_names_.size());
          func_names_.push_back(name);
          func_ids_["fn:" + name] = id;
        } else {
          id = it->second;
        }
        return Value::of_ptr(Ptr{Ptr::Base::Function, id, 0});
      }
      break;  // a variable read without LValueToRValue (arrays): handled by the cast
    }
    case Stmt::UnaryExprOrTypeTraitExprClass:
    case Stmt::OffsetOfExprClass: {
      Expr::EvalResult r;
      if (e->EvaluateAsInt(r, ctx_)) return Value::of_int(normalize(r.Val.getInt().getExtValue(), e->getType()));
      break;
    }
    case Stmt::ArraySubscriptExprClass:
    case Stmt::MemberExprClass:
      break;  // lvalues: reached through an LValueToRValue cast
    default:
      break;
  }
  fail(e->getBeginLoc(), std::string("unsupported expression (") + e->getStmtClassName() + ")");
}

Value Interpreter::eval_cast(const CastExpr* ce) {
  const Expr* sub = ce->getSubExpr();
  SourceLocation loc = ce->getBeginLoc();
  QualType to = ce->getType();
  switch (ce->getCastKind()) {
    case CK_LValueToRValue:
      return load(lvalue(sub), sub->getType(), loc);
    case CK_ArrayToPointerDecay:
    case CK_FunctionToPointerDecay:
    case CK_BuiltinFnToFnPtr: {
      if (ce->getCastKind() == CK_ArrayToPointerDecay) return Value::of_ptr(lvalue(sub));
      return eval(sub);
    }
    case CK_NoOp:
    case CK_BitCast:
    case CK_ToVoid:
      return eval(sub);
    case CK_NullToPointer:
      eval(sub);
      return Value::of_ptr(Ptr{});
    case CK_IntegralCast:
    case CK_IntegralToBoolean:
    case CK_FloatingToBoolean:
    case CK_PointerToBoolean:
    case CK_FloatingToIntegral:
    case CK_FloatingCast:
    case CK_IntegralToPointer:
    case CK_PointerToIntegral:
    case CK_BooleanToSignedIntegral: {
      Value v = eval(sub);
      return convert(v, to, loc);
    }
    case CK_IntegralToFloating: {
      Value v = eval(sub);
      cur_unsigned_source_ = is_unsigned(sub->getType());
      Value r = convert(v, to, loc);
      cur_unsigned_source_ = false;
      return r;
    }
    default:
      break;
  }
  fail(loc, std::string("unsupported cast (") + ce->getCastKindName() + ")");
}

Value Interpreter::int_arith(BinaryOperatorKind op, int64_t a, int64_t b, QualType type, QualType rtype,
                             SourceLocation loc) {
  bool uns = is_unsigned(type);
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  uint64_t bits = ctx_.getTypeSize(type.getCanonicalType());
  switch (op) {
    case BO_Add: return Value::of_int(normalize(static_cast<int64_t>(ua + ub), rtype));
    case BO_Sub: return Value::of_int(normalize(static_cast<int64_t>(ua - ub), rtype));
    case BO_Mul: return Value::of_int(normalize(static_cast<int64_t>(ua * ub), rtype));
    case BO_Div:
    case BO_Rem: {
      if (b == 0) fail(loc, "division by zero");
      if (uns) return Value::of_int(normalize(static_cast<int64_t>(op == BO_Div ? ua / ub : ua % ub), rtype));
      if (a == std::numeric_limits<int64_t>::min() && b == -1) fail(loc, "signed division overflow");
      return Value::of_int(normalize(op == BO_Div ? a / b : a % b, rtype));
    }
    case BO_Shl:
    case BO_Shr: {
      uint64_t lbits = ctx_.getTypeSize(rtype.getCanonicalType());
      if (b < 0 || static_cast<uint64_t>(b) >= lbits)
        fail(loc, "shift by " + std::to_string(b) + " is out of range for a " + std::to_string(lbits) + "-bit value");
      if (op == BO_Shl) return Value::of_int(normalize(static_cast<int64_t>(ua << b), rtype));
      if (is_unsigned(rtype)) return Value::of_int(normalize(static_cast<int64_t>(ua >> b), rtype));
      return Value::of_int(normalize(a >> b, rtype));
    }
    case BO_And: return Value::of_int(normalize(a & b, rtype));
    case BO_Or: return Value::of_int(normalize(a | b, rtype));
    case BO_Xor: return Value::of_int(normalize(a ^ b, rtype));
    case BO_LT: return Value::of_int(uns ? ua < ub : a < b);
    case BO_GT: return Value::of_int(uns ? ua > ub : a > b);
    case BO_LE: return Value::of_int(uns ? ua <= ub : a <= b);
    case BO_GE: return Value::of_int(uns ? ua >= ub : a >= b);
    case BO_EQ: return Value::of_int(a == b);
    case BO_NE: return Value::of_int(a != b);
    default: break;
  }
  (void)bits;
  fail(loc, "unsupported integer operator");
}

Value Interpreter::arith(BinaryOperatorKind op, const Value& a, const Value& b, QualType a_type, QualType b_type,
                         QualType result_type, SourceLocation loc) {
  // Pointer arithmetic and comparisons.
  if (a.kind == Value::Kind::Ptr || b.kind == Value::Kind::Ptr) {
    if (op == BO_EQ || op == BO_NE) {
      Value x = a, y = b;
      if (x.kind == Value::Kind::Int && x.i == 0) x = Value::of_ptr(Ptr{});
      if (y.kind == Value::Kind::Int && y.i == 0) y = Value::of_ptr(Ptr{});
      if (x.kind != Value::Kind::Ptr || y.kind != Value::Kind::Ptr) fail(loc, "comparison of a pointer with an integer");
      bool eq = x.p == y.p;
      return Value::of_int(op == BO_EQ ? eq : !eq);
    }
    if ((op == BO_Add || op == BO_Sub) && a.kind == Value::Kind::Ptr && b.kind == Value::Kind::Int) {
      int64_t es = static_cast<int64_t>(type_size(a_type->getPointeeType()));
      Ptr p = a.p;
      if (p.base == Ptr::Base::Null) fail(loc, "arithmetic on a NULL pointer");
      int64_t delta = b.i * es;
      p.off += op == BO_Add ? delta : -delta;
      return Value::of_ptr(p);
    }
    if (op == BO_Add && a.kind == Value::Kind::Int && b.kind == Value::Kind::Ptr) {
      return arith(op, b, a, b_type, a_type, result_type, loc);
    }
    if (a.kind == Value::Kind::Ptr && b.kind == Value::Kind::Ptr && a.p.base == b.p.base && a.p.id == b.p.id &&
        a.p.base != Ptr::Base::Null) {
      switch (op) {
        case BO_Sub: {
          int64_t es = static_cast<int64_t>(type_size(a_type->getPointeeType()));
          return Value::of_int((a.p.off - b.p.off) / (es ? es : 1));
        }
        case BO_LT: return Value::of_int(a.p.off < b.p.off);
        case BO_GT: return Value::of_int(a.p.off > b.p.off);
        case BO_LE: return Value::of_int(a.p.off <= b.p.off);
        case BO_GE: return Value::of_int(a.p.off >= b.p.off);
        default: break;
      }
    }
    fail(loc, "unsupported pointer arithmetic");
  }
  if (a.kind == Value::Kind::Float || b.kind == Value::Kind::Float) {
    double x = a.kind == Value::Kind::Float ? a.f : static_cast<double>(a.i);
    double y = b.kind == Value::Kind::Float ? b.f : static_cast<double>(b.i);
    bool single = result_type->isSpecificBuiltinType(BuiltinType::Float);
    auto fl = [&](double d) { return Value::of_float(single ? static_cast<float>(d) : d); };
    switch (op) {
      case BO_Add: return fl(x + y);
      case BO_Sub: return fl(x - y);
      case BO_Mul: return fl(x * y);
      case BO_Div: return fl(x / y);
      case BO_LT: return Value::of_int(x < y);
      case BO_GT: return Value::of_int(x > y);
      case BO_LE: return Value::of_int(x <= y);
      case BO_GE: return Value::of_int(x >= y);
      case BO_EQ: return Value::of_int(x == y);
      case BO_NE: return Value::of_int(x != y);
      default: fail(loc, "unsupported floating-point operator");
    }
  }
  // Usual arithmetic conversions already happened (clang inserted the casts), except
  // for shifts, whose result has the promoted left operand's type.
  QualType op_type = (op == BO_Shl || op == BO_Shr) ? result_type : a_type;
  if (BinaryOperator::isComparisonOp(op)) op_type = a_type;
  Value r = int_arith(op, a.i, b.i, op_type, BinaryOperator::isComparisonOp(op) ? result_type : result_type, loc);
  if ((a.sym >= 0 || b.sym >= 0) && !BinaryOperator::isComparisonOp(op)) r.sym = sym_binary(op, a, b);
  return r;
}

Value Interpreter::eval_binary(const BinaryOperator* bo) {
  SourceLocation loc = bo->getOperatorLoc();
  BinaryOperatorKind op = bo->getOpcode();
  switch (op) {
    case BO_LAnd:
      if (!truthy(eval(bo->getLHS()), loc)) return Value::of_int(0);
      return Value::of_int(truthy(eval(bo->getRHS()), loc) ? 1 : 0);
    case BO_LOr:
      if (truthy(eval(bo->getLHS()), loc)) return Value::of_int(1);
      return Value::of_int(truthy(eval(bo->getRHS()), loc) ? 1 : 0);
    case BO_Comma:
      eval(bo->getLHS());
      return eval(bo->getRHS());
    case BO_Assign: {
      Ptr p = lvalue(bo->getLHS());
      Value v = eval(bo->getRHS());
      store(p, bo->getLHS()->getType(), v, loc);
      return v;
    }
    default:
      break;
  }
  if (const auto* ca = dyn_cast<CompoundAssignOperator>(bo)) {
    Ptr p = lvalue(bo->getLHS());
    QualType lt = bo->getLHS()->getType();
    Value cur = load(p, lt, loc);
    BinaryOperatorKind base = BinaryOperator::getOpForCompoundAssignment(op);
    Value r;
    if (cur.kind == Value::Kind::Ptr) {
      r = arith(base, cur, eval(bo->getRHS()), lt, bo->getRHS()->getType(), lt, loc);
    } else {
      QualType ct = ca->getComputationLHSType();
      Value lhs = convert(cur, ct, loc);
      Value rhs = eval(bo->getRHS());
      r = arith(base, lhs, rhs, ct, bo->getRHS()->getType(), ca->getComputationResultType(), loc);
      r = convert(r, lt, loc);
    }
    store(p, lt, r, loc);
    return r;
  }
  Value a = eval(bo->getLHS());
  Value b = eval(bo->getRHS());
  return arith(op, a, b, bo->getLHS()->getType(), bo->getRHS()->getType(), bo->getType(), loc);
}

Value Interpreter::eval_unary(const UnaryOperator* uo) {
  SourceLocation loc = uo->getOperatorLoc();
  const Expr* sub = uo->getSubExpr();
  switch (uo->getOpcode()) {
    case UO_AddrOf:
      return Value::of_ptr(lvalue(sub));
    case UO_Deref:
      return load(lvalue(uo), uo->getType(), loc);
    case UO_Plus:
      return eval(sub);
    case UO_Minus: {
      Value v = eval(sub);
      if (v.kind == Value::Kind::Float) return Value::of_float(-v.f);
      if (v.kind == Value::Kind::Int) {
        Value r = Value::of_int(normalize(static_cast<int64_t>(0 - static_cast<uint64_t>(v.i)), uo->getType()));
        if (v.sym >= 0) r.sym = sym_negate(v.sym);
        return r;
      }
      break;
    }
    case UO_Not: {
      Value v = eval(sub);
      if (v.kind == Value::Kind::Int) return Value::of_int(normalize(~v.i, uo->getType()));
      break;
    }
    case UO_LNot:
      return Value::of_int(truthy(eval(sub), loc) ? 0 : 1);
    case UO_PreInc:
    case UO_PreDec:
    case UO_PostInc:
    case UO_PostDec: {
      Ptr p = lvalue(sub);
      QualType t = sub->getType();
      Value cur = load(p, t, loc);
      bool inc = uo->isIncrementOp();
      Value next;
      if (cur.kind == Value::Kind::Ptr) {
        next = arith(inc ? BO_Add : BO_Sub, cur, Value::of_int(1), t, ctx_.LongTy, t, loc);
      } else if (cur.kind == Value::Kind::Float) {
        next = Value::of_float(cur.f + (inc ? 1 : -1));
      } else {
        next = Value::of_int(normalize(static_cast<int64_t>(static_cast<uint64_t>(cur.i) + (inc ? 1 : uint64_t(-1))), t));
      }
      store(p, t, next, loc);
      return uo->isPrefix() ? next : cur;
    }
    default:
      break;
  }
  fail(loc, std::string("unsupported unary operator '") + UnaryOperator::getOpcodeStr(uo->getOpcode()).str() + "'");
}

Value Interpreter::eval_call(const CallExpr* ce) {
  SourceLocation loc = ce->getBeginLoc();
  const FunctionDecl* callee = ce->getDirectCallee();
  if (!callee) fail(loc, "call through a function pointer is not supported");
  std::string name = callee->getNameAsString();
  if (vm_calls_ && llvm::StringRef(name).startswith("TVMBackendAnyList")) return rt_anylist(ce, name);
  // Kernel lookup: TVMBackendGetFuncFromEnv up to TVM 0.25, TVMFFIEnvModLookupFromImports in 0.26.
  if (name == "TVMBackendGetFuncFromEnv" || name == "TVMFFIEnvModLookupFromImports") return rt_get_func(ce);
  if (name == "TVMFuncCall") return rt_func_call(ce);
  if (name == "TVMFFIFunctionCall") return rt_ffi_call(ce);
  if (name == "TVMFFIErrorSetRaisedFromCStrParts") return rt_ffi_error(ce, true);
  if (name == "TVMFFIErrorSetRaisedFromCStr") return rt_ffi_error(ce, false);
  if (name == "TVMBackendAllocWorkspace") return rt_alloc_workspace(ce);
  if (name == "TVMBackendFreeWorkspace") return rt_free_workspace(ce);
  if (name == "TVMAPISetLastError") {
    Value m = eval(ce->getArg(0));
    last_error_ = (m.kind == Value::Kind::Ptr && m.p.base == Ptr::Base::String) ? strings_[m.p.id] : "";
    return Value::of_int(0);
  }
  bool single = false;
  if (const detail::MathFunction* m = detail::find_math_function(name, &single)) {
    if (ce->getNumArgs() != static_cast<unsigned>(m->arity))
      fail(loc, "'" + name + "' takes " + std::to_string(m->arity) + " argument(s)");
    double a[2] = {0, 0};
    for (unsigned i = 0; i < ce->getNumArgs(); ++i) {
      Value v = eval(ce->getArg(i));
      if (v.kind != Value::Kind::Float) fail(ce->getArg(i)->getBeginLoc(), "math function argument is not a floating value");
      a[i] = v.f;
    }
    // The float variants (ceilf, ...) compute in double and round the result to float.
    double r = m->arity == 1 ? m->unary(a[0]) : m->binary(a[0], a[1]);
    return Value::of_float(single ? static_cast<float>(r) : r);
  }
  llvm::StringRef n = name;
  if (n.startswith("__builtin_")) n = n.drop_front(10);
  if (n == "inff" || n == "inf" || n == "huge_valf" || n == "huge_val")
    return Value::of_float(std::numeric_limits<double>::infinity());
  if (n == "nanf" || n == "nan") return Value::of_float(std::numeric_limits<double>::quiet_NaN());
  const FunctionDecl* def = nullptr;
  if (vm_calls_ && depth_ == 1 && callee->hasBody(def) && def && def->getNumParams() == 6) {
    // __vmtir__main calls a fused function directly (tvm_call_cpacked_lowered): the VM step,
    // not its body, is recorded; the body runs later with the VM's tensors (relax_vm.h).
    // TVM 0.20 passes num_args one short here (the lowering takes the last argument for the
    // resource handle), but the value stays in slot num_args, where the callee reads it.
    Value values = eval(ce->getArg(0)), codes = eval(ce->getArg(1)), n = eval(ce->getArg(2));
    if (n.kind != Value::Kind::Int || n.i < 0 || n.i > 4096) fail(loc, "a direct packed call with a bad argument count");
    return rt_vm_call(ce, name, values, codes, n.i + 1, -1);
  }
  if (vm_calls_ && depth_ == 1 && callee->hasBody(def) && def && def->getNumParams() == 4 && ffi_) {
    // The same under the tvm-ffi ABI: f(self, (TVMFFIAny*) stack, num_args, &result), the
    // step named as the VM's function table names it (without the __tvm_ffi_ prefix).
    Value values = eval(ce->getArg(1)), n = eval(ce->getArg(2));
    eval(ce->getArg(0));
    eval(ce->getArg(3));
    if (n.kind != Value::Kind::Int || n.i < 0 || n.i > 4096) fail(loc, "a direct packed call with a bad argument count");
    llvm::StringRef vm_name = name;
    if (vm_name.startswith("__tvm_ffi_")) vm_name = vm_name.drop_front(10);
    return rt_vm_call(ce, vm_name.str(), values, Value{}, n.i, -1);
  }
  if (callee->hasBody(def) && def) {
    std::vector<Value> args;
    for (const Expr* arg : ce->arguments()) args.push_back(eval(arg));
    return call_function(def, args, loc);
  }
  fail(loc, "call to '" + name + "', which is neither a TVM runtime function kdflow models nor defined in the file");
}

Value Interpreter::call_function(const FunctionDecl* fn, const std::vector<Value>& args, SourceLocation loc) {
  if (depth_ >= prog_.limits.max_call_depth) fail(loc, "call depth limit reached");
  if (args.size() != fn->getNumParams()) fail(loc, "call with the wrong number of arguments");
  std::unordered_map<const VarDecl*, int64_t> frame;
  for (unsigned i = 0; i < fn->getNumParams(); ++i) {
    const ParmVarDecl* p = fn->getParamDecl(i);
    int64_t id = new_object(static_cast<int64_t>(type_size(p->getType())), "parameter '" + p->getNameAsString() + "'");
    frame[p] = id;
  }
  frames_.push_back(std::move(frame));
  for (unsigned i = 0; i < fn->getNumParams(); ++i) {
    const ParmVarDecl* p = fn->getParamDecl(i);
    store(Ptr{Ptr::Base::Object, frames_.back()[p], 0}, p->getType(), convert(args[i], p->getType(), loc), loc);
  }
  ++depth_;
  return_values_.push_back(Value::of_int(0));
  Flow f = exec(fn->getBody());
  Value r = return_values_.back();
  return_values_.pop_back();
  --depth_;
  frames_.pop_back();
  if (f != Flow::Return && !fn->getReturnType()->isVoidType() && fn->getNameAsString() != "main")
    fail(fn->getEndLoc(), "function '" + fn->getNameAsString() + "' ends without returning a value");
  return r;
}

// --- the TVM runtime, as the graph executor provides it ---------------------

Value Interpreter::rt_get_func(const CallExpr* ce) {
  SourceLocation loc = ce->getBeginLoc();
  if (ce->getNumArgs() != 3) fail(loc, "TVMBackendGetFuncFromEnv takes 3 arguments");
  eval(ce->getArg(0));
  Value name = eval(ce->getArg(1));
  if (name.kind != Value::Kind::Ptr || name.p.base != Ptr::Base::String || name.p.off != 0)
    fail(ce->getArg(1)->getBeginLoc(), "the function name is not a string literal");
  Value out = eval(ce->getArg(2));
  if (out.kind != Value::Kind::Ptr) fail(ce->getArg(2)->getBeginLoc(), "the output is not a pointer");
  const std::string& s = strings_[name.p.id];
  auto it = func_ids_.find("pk:" + s);
  int64_t id;
  if (it == func_ids_.end()) {
    id = static_cast<int64_t>(func_names_.size());
    func_names_.push_back(s);
    func_ids_["pk:" + s] = id;
  } else {
    id = it->second;
  }
  store(out.p, ctx_.VoidPtrTy, Value::of_ptr(Ptr{Ptr::Base::Func, id, 0}), loc);
  return Value::of_int(0);
}

PackedArg Interpreter::packed_arg(const Value& v, int64_t tcode, int index, SourceLocation loc) {
  PackedArg a;
  a.type_code = static_cast<int>(tcode);
  auto where = [&] { return "packed argument " + std::to_string(index) + " (type code " + std::to_string(tcode) + ")"; };
  switch (tcode) {
    case 0:  // kTVMArgInt
    case 1:  // kDLUInt
      if (v.kind != Value::Kind::Int) fail(loc, where() + " does not hold an integer");
      a.kind = PackedArg::Kind::Int;
      a.int_value = v.i;
      if (v.sym >= 0) a.int_expr = sym_text(v.sym, true);
      return a;
    case 2:  // kTVMArgFloat
      if (v.kind != Value::Kind::Float) fail(loc, where() + " does not hold a floating value");
      a.kind = PackedArg::Kind::Float;
      a.float_value = v.f;
      return a;
    case 3:  // kTVMOpaqueHandle: a raw device pointer
    case 4:  // kTVMNullptr
      if (v.kind != Value::Kind::Ptr) fail(loc, where() + " does not hold a pointer");
      a.kind = PackedArg::Kind::Pointer;
      switch (v.p.base) {
        case Ptr::Base::Null: a.pointer.kind = PointerTarget::Kind::Null; break;
        case Ptr::Base::Entry: a.pointer = {PointerTarget::Kind::Entry, static_cast<int>(v.p.id), v.p.off}; break;
        case Ptr::Base::Workspace: a.pointer = {PointerTarget::Kind::Workspace, static_cast<int>(v.p.id), v.p.off}; break;
        default: fail(loc, where() + " points to " + object_name(v.p) + ", not to device memory");
      }
      return a;
    case 7:  // kTVMDLTensorHandle
      // One of the function's own arguments, or a DLTensor the host code filled in on its
      // stack (TVM's tvm_stack_make_array, for cuBLAS/cuDNN/Thrust calls): read it back.
      if (v.kind != Value::Kind::Ptr || v.p.base != Ptr::Base::Object)
        fail(loc, where() + " does not point to a DLTensor the host code can see");
      a.kind = PackedArg::Kind::Tensor;
      if (objects_[v.p.id].role == ObjRole::Tensor && v.p.off == tensor_dl_off_)
        a.tensor_arg = objects_[v.p.id].tensor_index;
      read_tensor(v.p, a, where(), loc);
      return a;
    case 11:  // kTVMStr
      if (v.kind != Value::Kind::Ptr || v.p.base != Ptr::Base::String) fail(loc, where() + " is not a string literal");
      a.kind = PackedArg::Kind::String;
      a.string_value = strings_[v.p.id];
      return a;
    default:
      fail(loc, where() + ": type code not supported");
  }
}

void Interpreter::read_tensor(const Ptr& t, PackedArg& a, const std::string& where, SourceLocation loc) {
  auto at = [&](int64_t off) { return Ptr{t.base, t.id, t.off + off}; };
  Value data = load(at(dl_.data), ctx_.VoidPtrTy, loc);
  Value ndim = load(at(dl_.ndim), ctx_.IntTy, loc);
  Value code = load(at(dl_.dtype), ctx_.UnsignedCharTy, loc);
  Value bits = load(at(dl_.dtype + 1), ctx_.UnsignedCharTy, loc);
  Value lanes = load(at(dl_.dtype + 2), ctx_.UnsignedShortTy, loc);
  Value offset = load(at(dl_.byte_offset), ctx_.UnsignedLongTy, loc);
  Value shape = load(at(dl_.shape), ctx_.VoidPtrTy, loc);
  if (ndim.i < 0 || ndim.i > 32) fail(loc, where + ": a DLTensor with ndim " + std::to_string(ndim.i));
  for (int64_t d = 0; d < ndim.i; ++d) {
    if (shape.p.base == Ptr::Base::Null) fail(loc, where + ": a DLTensor with ndim " + std::to_string(ndim.i) + " and no shape");
    Value dim = load(Ptr{shape.p.base, shape.p.id, shape.p.off + 8 * d}, ctx_.LongTy, loc);
    a.tensor_shape.push_back(dim.i);
  }
  a.tensor_dtype_code = static_cast<uint8_t>(code.i);
  a.tensor_dtype_bits = static_cast<uint8_t>(bits.i);
  a.tensor_dtype_lanes = static_cast<uint16_t>(lanes.i);
  if (offset.i < 0 || offset.i > (int64_t(1) << 48))
    fail(loc, where + ": a DLTensor with byte_offset " + std::to_string(static_cast<uint64_t>(offset.i)));
  switch (data.p.base) {
    case Ptr::Base::Null: a.pointer.kind = PointerTarget::Kind::Null; break;
    case Ptr::Base::Entry: a.pointer = {PointerTarget::Kind::Entry, static_cast<int>(data.p.id), data.p.off + offset.i}; break;
    case Ptr::Base::Workspace:
      a.pointer = {PointerTarget::Kind::Workspace, static_cast<int>(data.p.id), data.p.off + offset.i};
      break;
    default: fail(loc, where + ": the DLTensor's data points to " + object_name(data.p) + ", not to device memory");
  }
}

Value Interpreter::rt_func_call(const CallExpr* ce) {
  SourceLocation loc = ce->getBeginLoc();
  if (ce->getNumArgs() != 6) fail(loc, "TVMFuncCall takes 6 arguments");
  Value h = eval(ce->getArg(0));
  if (h.kind != Value::Kind::Ptr || h.p.base != Ptr::Base::Func)
    fail(ce->getArg(0)->getBeginLoc(), "the function handle was not obtained from TVMBackendGetFuncFromEnv");
  Value values = eval(ce->getArg(1));
  Value codes = eval(ce->getArg(2));
  Value n = eval(ce->getArg(3));
  if (values.kind != Value::Kind::Ptr || codes.kind != Value::Kind::Ptr || n.kind != Value::Kind::Int)
    fail(loc, "unsupported TVMFuncCall arguments");
  if (n.i < 0 || n.i > 4096) fail(ce->getArg(3)->getBeginLoc(), "TVMFuncCall with " + std::to_string(n.i) + " arguments");
  if (vm_calls_) {
    Value r = rt_vm_call(ce, func_names_[h.p.id], values, codes, n.i, n.i);
    Value ret = eval(ce->getArg(4));
    if (ret.kind == Value::Kind::Ptr && ret.p.base == Ptr::Base::Object)
      store(ret.p, ctx_.VoidPtrTy, Value::of_ptr(Ptr{Ptr::Base::Vm, kVmReturn, static_cast<int64_t>(vm_calls_->size()) - 1}), loc);
    return r;
  }
  if (trace_.calls.size() >= prog_.limits.max_calls) fail(loc, "packed-call limit reached");
  PackedCall call;
  call.name = func_names_[h.p.id];
  call.loc = prog_.to_loc(loc);
  call.loop_iterations = loop_iters_;
  int64_t value_size = static_cast<int64_t>(type_size(ce->getArg(1)->getType()->getPointeeType()));
  for (int64_t i = 0; i < n.i; ++i) {
    Ptr vp = values.p, cp = codes.p;
    vp.off += i * value_size;
    cp.off += i * 4;
    Value code = load(cp, ctx_.IntTy, loc);
    // The TVMValue union: read the member the type code says was written.
    QualType member = code.i == 2 ? ctx_.DoubleTy : (code.i == 0 || code.i == 1) ? ctx_.LongTy : ctx_.VoidPtrTy;
    Value v = load(vp, member, loc);
    call.args.push_back(packed_arg(v, code.i, static_cast<int>(i), loc));
  }
  trace_.calls.push_back(std::move(call));
  // A successful call: TVM's ret value is int 0 with type code 0 (kTVMArgInt... not read by TVM).
  Value ret = eval(ce->getArg(4));
  Value ret_code = eval(ce->getArg(5));
  if (ret.kind == Value::Kind::Ptr && ret.p.base == Ptr::Base::Object) store(ret.p, ctx_.LongTy, Value::of_int(0), loc);
  if (ret_code.kind == Value::Kind::Ptr && ret_code.p.base == Ptr::Base::Object)
    store(ret_code.p, ctx_.IntTy, Value::of_int(4), loc);
  return Value::of_int(0);
}

// --- the tvm-ffi C ABI (TVM 0.21+) -------------------------------------------

std::pair<int64_t, Value> Interpreter::stack_slot(const Value& values, const Value& codes, int64_t i,
                                                  SourceLocation loc) {
  if (values.kind != Value::Kind::Ptr) fail(loc, "the argument stack is not a pointer");
  if (!ffi_) {
    if (codes.kind != Value::Kind::Ptr) fail(loc, "the type-code stack is not a pointer");
    Value code = load(Ptr{codes.p.base, codes.p.id, codes.p.off + 4 * i}, ctx_.IntTy, loc);
    // The TVMValue union: read the member the type code says was written.
    QualType member = code.i == 2 ? ctx_.DoubleTy : (code.i == 0 || code.i == 1) ? ctx_.LongTy : ctx_.VoidPtrTy;
    return {code.i, load(Ptr{values.p.base, values.p.id, values.p.off + 8 * i}, member, loc)};
  }
  // TVMFFIAny: type_index at 0, the value union at 8.
  const Ptr slot{values.p.base, values.p.id, values.p.off + 16 * i};
  const int64_t ti = load(slot, ctx_.IntTy, loc).i;
  const Ptr value{slot.base, slot.id, slot.off + 8};
  switch (ti) {
    case 0: return {4, load(value, ctx_.VoidPtrTy, loc)};   // kTVMFFINone: NULL
    case 1:                                                  // kTVMFFIInt
    case 2: return {0, load(value, ctx_.LongTy, loc)};      // kTVMFFIBool
    case 3: return {2, load(value, ctx_.DoubleTy, loc)};    // kTVMFFIFloat
    case 4: return {3, load(value, ctx_.VoidPtrTy, loc)};   // kTVMFFIOpaquePtr
    case 7: return {7, load(value, ctx_.VoidPtrTy, loc)};   // kTVMFFIDLTensorPtr
    case 8: return {11, load(value, ctx_.VoidPtrTy, loc)};  // kTVMFFIRawStr
    default: break;
  }
  Value v = load(value, ctx_.VoidPtrTy, loc);
  if (v.kind == Value::Kind::Ptr && v.p.base == Ptr::Base::Vm) return {13, v};  // a VM value (an object)
  return {1000 + ti, v};
}

Value Interpreter::rt_ffi_call(const CallExpr* ce) {
  SourceLocation loc = ce->getBeginLoc();
  if (ce->getNumArgs() != 4) fail(loc, "TVMFFIFunctionCall takes 4 arguments");
  Value h = eval(ce->getArg(0));
  if (h.kind != Value::Kind::Ptr || h.p.base != Ptr::Base::Func)
    fail(ce->getArg(0)->getBeginLoc(),
         "the function handle was not obtained from TVMFFIEnvModLookupFromImports or TVMBackendGetFuncFromEnv");
  Value values = eval(ce->getArg(1));
  Value n = eval(ce->getArg(2));
  Value ret = eval(ce->getArg(3));
  if (values.kind != Value::Kind::Ptr || n.kind != Value::Kind::Int) fail(loc, "unsupported TVMFFIFunctionCall arguments");
  if (n.i < 0 || n.i > 4096)
    fail(ce->getArg(2)->getBeginLoc(), "TVMFFIFunctionCall with " + std::to_string(n.i) + " arguments");
  if (!ffi_) fail(loc, "TVMFFIFunctionCall in a function without the tvm-ffi signature (self, args, num_args, result)");
  if (vm_calls_) return rt_vm_call(ce, func_names_[h.p.id], values, Value{}, n.i, n.i);
  if (trace_.calls.size() >= prog_.limits.max_calls) fail(loc, "packed-call limit reached");
  PackedCall call;
  call.name = func_names_[h.p.id];
  call.loc = prog_.to_loc(loc);
  call.loop_iterations = loop_iters_;
  for (int64_t i = 0; i < n.i; ++i) {
    auto [code, v] = stack_slot(values, Value{}, i, loc);
    if (code >= 1000)
      fail(loc, "packed argument " + std::to_string(i) + " has tvm-ffi type index " + std::to_string(code - 1000) +
                    ", which kdflow does not model");
    call.args.push_back(packed_arg(v, code, static_cast<int>(i), loc));
  }
  trace_.calls.push_back(std::move(call));
  // A successful call returning None.
  if (ret.kind == Value::Kind::Ptr && ret.p.base == Ptr::Base::Object) {
    store(ret.p, ctx_.IntTy, Value::of_int(0), loc);
    store(Ptr{ret.p.base, ret.p.id, ret.p.off + 8}, ctx_.LongTy, Value::of_int(0), loc);
  }
  return Value::of_int(0);
}

Value Interpreter::rt_ffi_error(const CallExpr* ce, bool parts) {
  SourceLocation loc = ce->getBeginLoc();
  if (ce->getNumArgs() != (parts ? 3u : 2u)) fail(loc, parts ? "TVMFFIErrorSetRaisedFromCStrParts takes 3 arguments"
                                                             : "TVMFFIErrorSetRaisedFromCStr takes 2 arguments");
  auto text = [&](const Value& v) -> std::string {
    if (v.kind == Value::Kind::Ptr && v.p.base == Ptr::Base::String && v.p.off >= 0 &&
        static_cast<size_t>(v.p.off) <= strings_[v.p.id].size())
      return strings_[v.p.id].substr(static_cast<size_t>(v.p.off));
    return "?";
  };
  const std::string kind = text(eval(ce->getArg(0)));
  std::string msg;
  if (parts) {
    Value list = eval(ce->getArg(1)), n = eval(ce->getArg(2));
    if (list.kind != Value::Kind::Ptr || n.kind != Value::Kind::Int || n.i < 0 || n.i > 4096)
      fail(loc, "TVMFFIErrorSetRaisedFromCStrParts with unsupported arguments");
    for (int64_t i = 0; i < n.i; ++i)
      msg += text(load(Ptr{list.p.base, list.p.id, list.p.off + 8 * i}, ctx_.VoidPtrTy, loc));
  } else {
    msg = text(eval(ce->getArg(1)));
  }
  for (char& c : msg)
    if (c == '\n' || c == '\r') c = ' ';
  last_error_ = kind + ": " + msg;
  return Value::of_int(0);
}

Value Interpreter::rt_alloc_workspace(const CallExpr* ce) {
  SourceLocation loc = ce->getBeginLoc();
  if (ce->getNumArgs() != 5) fail(loc, "TVMBackendAllocWorkspace takes 5 arguments");
  Value a[5];
  for (int i = 0; i < 5; ++i) {
    a[i] = eval(ce->getArg(i));
    if (a[i].kind != Value::Kind::Int) fail(ce->getArg(i)->getBeginLoc(), "workspace argument is not an integer");
  }
  if (trace_.workspaces.size() >= 65536) fail(loc, "too many workspace allocations");
  if (a[2].i < 0 || static_cast<uint64_t>(a[2].i) > (uint64_t(1) << 40))
    fail(ce->getArg(2)->getBeginLoc(), "workspace of " + std::to_string(static_cast<uint64_t>(a[2].i)) + " bytes is absurd");
  WorkspaceAlloc w;
  w.device_type = static_cast<int>(a[0].i);
  w.bytes = static_cast<uint64_t>(a[2].i);
  w.dtype_code = static_cast<int>(a[3].i);
  w.dtype_bits = static_cast<int>(a[4].i);
  w.loc = prog_.to_loc(loc);
  trace_.workspaces.push_back(w);
  return Value::of_ptr(Ptr{Ptr::Base::Workspace, static_cast<int64_t>(trace_.workspaces.size() - 1), 0});
}

Value Interpreter::rt_free_workspace(const CallExpr* ce) {
  SourceLocation loc = ce->getBeginLoc();
  if (ce->getNumArgs() != 3) fail(loc, "TVMBackendFreeWorkspace takes 3 arguments");
  eval(ce->getArg(0));
  eval(ce->getArg(1));
  Value p = eval(ce->getArg(2));
  if (p.kind != Value::Kind::Ptr || p.p.base != Ptr::Base::Workspace || p.p.off != 0)
    fail(ce->getArg(2)->getBeginLoc(), "frees something that TVMBackendAllocWorkspace did not return");
  WorkspaceAlloc& w = trace_.workspaces[p.p.id];
  if (w.freed) fail(ce->getArg(2)->getBeginLoc(), "workspace freed twice");
  w.freed = true;
  return Value::of_int(0);
}

// --- statements -------------------------------------------------------------

Flow Interpreter::exec(const Stmt* s) {
  if (!s) return Flow::Normal;
  Nest nest(*this, s->getBeginLoc());
  step(s->getBeginLoc());
  cur_loc_ = s->getBeginLoc();
  switch (s->getStmtClass()) {
    case Stmt::CompoundStmtClass:
      for (const Stmt* c : cast<CompoundStmt>(s)->body()) {
        Flow f = exec(c);
        if (f != Flow::Normal) return f;
      }
      return Flow::Normal;
    case Stmt::DeclStmtClass:
      for (const Decl* d : cast<DeclStmt>(s)->decls()) {
        const auto* vd = dyn_cast<VarDecl>(d);
        if (!vd) continue;  // typedefs, records
        if (!vd->hasLocalStorage()) {
          var_address(vd, vd->getLocation());  // static local: initialized once
          continue;
        }
        QualType t = vd->getType();
        if (const auto* at = ctx_.getAsConstantArrayType(t)) {
          uint64_t n = at->getSize().getZExtValue();
          if (n > prog_.limits.max_array_elements)
            fail(vd->getLocation(), "local array of " + std::to_string(n) + " elements exceeds the interpreter's limit");
        } else if (t->isVariableArrayType()) {
          fail(vd->getLocation(), "variable-length arrays are not supported");
        }
        int64_t id = new_object(static_cast<int64_t>(type_size(t)), "variable '" + vd->getNameAsString() + "'");
        frames_.back()[vd] = id;
        if (const Expr* init = vd->getInit()) init_object(Ptr{Ptr::Base::Object, id, 0}, t, init);
      }
      return Flow::Normal;
    case Stmt::IfStmtClass: {
      const auto* is = cast<IfStmt>(s);
      if (truthy(eval(is->getCond()), is->getBeginLoc())) return exec(is->getThen());
      return exec(is->getElse());
    }
    case Stmt::ForStmtClass:
    case Stmt::WhileStmtClass:
    case Stmt::DoStmtClass: {
      const Stmt* init = nullptr;
      const Expr* cond = nullptr;
      const Expr* inc = nullptr;
      const Stmt* body = nullptr;
      bool test_first = true;
      if (const auto* fs = dyn_cast<ForStmt>(s)) {
        init = fs->getInit(), cond = fs->getCond(), inc = fs->getInc(), body = fs->getBody();
      } else if (const auto* ws = dyn_cast<WhileStmt>(s)) {
        cond = ws->getCond(), body = ws->getBody();
      } else {
        const auto* ds = cast<DoStmt>(s);
        cond = ds->getCond(), body = ds->getBody(), test_first = false;
      }
      if (init) exec(init);
      loop_iters_.push_back(0);
      Flow result = Flow::Normal;
      for (int64_t trip = 0;; ++trip) {
        if (test_first || trip > 0) {
          if (cond && !truthy(eval(cond), cond->getBeginLoc())) break;
        }
        if (++loop_trips_ > prog_.limits.max_loop_trips)
          fail(s->getBeginLoc(), "loop trip limit (" + std::to_string(prog_.limits.max_loop_trips) + ") reached");
        loop_iters_.back() = trip;
        Flow f = exec(body);
        if (f == Flow::Break) break;
        if (f == Flow::Return) {
          result = f;
          break;
        }
        if (inc) eval(inc);
      }
      loop_iters_.pop_back();
      return result;
    }
    case Stmt::ReturnStmtClass: {
      const auto* rs = cast<ReturnStmt>(s);
      return_loc_ = rs->getBeginLoc();
      if (const Expr* v = rs->getRetValue()) return_values_.back() = eval(v);
      return Flow::Return;
    }
    case Stmt::BreakStmtClass:
      return Flow::Break;
    case Stmt::ContinueStmtClass:
      return Flow::Continue;
    case Stmt::NullStmtClass:
      return Flow::Normal;
    case Stmt::LabelStmtClass:
      return exec(cast<LabelStmt>(s)->getSubStmt());
    case Stmt::AttributedStmtClass:
      return exec(cast<AttributedStmt>(s)->getSubStmt());
    default:
      if (const auto* e = dyn_cast<Expr>(s)) {
        eval(e);
        return Flow::Normal;
      }
      break;
  }
  fail(s->getBeginLoc(), std::string("unsupported statement (") + s->getStmtClassName() + ")");
}

// --- compiled-mode Relax VM (TVM 0.20 __vmtir__main) -----------------------

VmOperand Interpreter::vm_operand(const Value& v, int64_t tcode, int index, SourceLocation loc) {
  VmOperand o;
  const std::string where = "VM argument " + std::to_string(index) + " (type code " + std::to_string(tcode) + ")";
  if (v.kind == Value::Kind::Int && (tcode == 0 || tcode == 1)) {
    o.kind = VmOperand::Kind::Immediate;
    o.value = v.i;
    return o;
  }
  if (v.kind == Value::Kind::Ptr && v.p.base == Ptr::Base::Null) {
    o.kind = VmOperand::Kind::Register, o.value = kVmVoidRegister;
    return o;
  }
  if (v.kind == Value::Kind::Ptr && v.p.base == Ptr::Base::Vm) {
    switch (v.p.id) {
      case kVmReg: o.kind = VmOperand::Kind::Register, o.value = v.p.off; return o;
      case kVmConst: o.kind = VmOperand::Kind::Constant, o.value = v.p.off; return o;
      case kVmCtx: o.kind = VmOperand::Kind::Register, o.value = kVmVmRegister; return o;
      case kVmReturn:
        fail(loc, where + " is the return value of an earlier call that no TVMBackendAnyListMoveFromPackedReturn moved");
      default: break;
    }
  }
  fail(loc, where + " is neither a VM register, a constant, the VM context, an integer nor NULL");
}

Value Interpreter::rt_vm_call(const CallExpr* ce, const std::string& name, const Value& values, const Value& codes,
                              int64_t n, int64_t ret_slot) {
  SourceLocation loc = ce->getBeginLoc();
  if (values.kind != Value::Kind::Ptr || (!ffi_ && codes.kind != Value::Kind::Ptr))
    fail(loc, "unsupported packed call arguments");
  if (vm_calls_->size() >= prog_.limits.max_calls) fail(loc, "packed-call limit reached");
  VmHostCall call;
  call.name = name;
  call.loc = prog_.to_loc(loc);
  for (int64_t i = 0; i < n; ++i) {
    auto [code, v] = stack_slot(values, codes, i, loc);
    call.args.push_back(vm_operand(v, code, static_cast<int>(i), loc));
  }
  vm_calls_->push_back(std::move(call));
  if (ret_slot >= 0) {
    // TVM's LLVM host (codegen_cpu.cc MakeCallPackedLowered) passes &stack_value[end] and
    // &stack_tcode[end] as the return slot, where TVMBackendAnyListMoveFromPackedReturn then
    // reads it. TVM 0.20's C host passes a local instead and leaves that slot stale; kdflow
    // models the LLVM host, as the runtime's own builtins expect.
    // TVM 0.21 – 0.26's C host does the same with its TVMFFIAny result.
    const Ptr token{Ptr::Base::Vm, kVmReturn, static_cast<int64_t>(vm_calls_->size()) - 1};
    if (ffi_) {
      const Ptr slot{values.p.base, values.p.id, values.p.off + 16 * ret_slot};
      store(slot, ctx_.IntTy, Value::of_int(64), loc);  // kTVMFFIObject
      store(Ptr{slot.base, slot.id, slot.off + 8}, ctx_.VoidPtrTy, Value::of_ptr(token), loc);
    } else {
      store(Ptr{values.p.base, values.p.id, values.p.off + 8 * ret_slot}, ctx_.VoidPtrTy, Value::of_ptr(token), loc);
      store(Ptr{codes.p.base, codes.p.id, codes.p.off + 4 * ret_slot}, ctx_.IntTy, Value::of_int(13), loc);
    }
  }
  return Value::of_int(0);
}

Value Interpreter::rt_anylist(const CallExpr* ce, const std::string& name) {
  SourceLocation loc = ce->getBeginLoc();
  std::vector<Value> a;
  for (const Expr* arg : ce->arguments()) a.push_back(eval(arg));
  auto list = [&](size_t i) -> int64_t {
    if (i >= a.size() || a[i].kind != Value::Kind::Ptr || a[i].p.base != Ptr::Base::Vm ||
        (a[i].p.id != kVmRegList && a[i].p.id != kVmConstList))
      fail(loc, name + ": argument " + std::to_string(i) + " is not the VM's register or constant list");
    return a[i].p.id;
  };
  auto integer = [&](size_t i) -> int64_t {
    if (i >= a.size() || a[i].kind != Value::Kind::Int) fail(loc, name + ": argument " + std::to_string(i) + " is not an integer");
    if (a[i].i < 0 || a[i].i > (int64_t(1) << 40)) fail(loc, name + ": index " + std::to_string(a[i].i) + " is out of range");
    return a[i].i;
  };
  auto slot = [&](size_t vi, size_t ci, int64_t off, Ptr* vp, Ptr* cp) {
    if (a[vi].kind != Value::Kind::Ptr || a[ci].kind != Value::Kind::Ptr) fail(loc, name + ": the stack is not a pointer");
    *vp = Ptr{a[vi].p.base, a[vi].p.id, a[vi].p.off + 8 * off};
    *cp = Ptr{a[ci].p.base, a[ci].p.id, a[ci].p.off + 4 * off};
  };
  // TVM 0.21+: (list, index, (TVMFFIAny*) stack, offset), no type-code stack.
  auto ffi_slot = [&](int64_t off) {
    if (a[2].kind != Value::Kind::Ptr) fail(loc, name + ": the stack is not a pointer");
    return Ptr{a[2].p.base, a[2].p.id, a[2].p.off + 16 * off};
  };
  if (ffi_ && name == "TVMBackendAnyListSetPackedArg") {
    if (a.size() != 4) fail(loc, name + " takes 4 arguments under the tvm-ffi ABI");
    const int64_t l = list(0), idx = integer(1), off = integer(3);
    const Ptr at = ffi_slot(off);
    store(at, ctx_.IntTy, Value::of_int(64), loc);  // kTVMFFIObject
    store(Ptr{at.base, at.id, at.off + 8}, ctx_.VoidPtrTy,
          Value::of_ptr(Ptr{Ptr::Base::Vm, l == kVmRegList ? kVmReg : kVmConst, idx}), loc);
    return Value::of_int(0);
  }
  if (ffi_ && name == "TVMBackendAnyListMoveFromPackedReturn") {
    if (a.size() != 4) fail(loc, name + " takes 4 arguments under the tvm-ffi ABI");
    if (list(0) != kVmRegList) fail(loc, name + " moves into the constant list");
    const int64_t idx = integer(1), off = integer(3);
    const Ptr at = ffi_slot(off);
    Value v = load(Ptr{at.base, at.id, at.off + 8}, ctx_.VoidPtrTy, loc);
    if (v.kind != Value::Kind::Ptr || v.p.base != Ptr::Base::Vm || v.p.id != kVmReturn || vm_calls_->empty() ||
        v.p.off != static_cast<int64_t>(vm_calls_->size()) - 1)
      fail(loc, name + ": slot " + std::to_string(off) + " does not hold the return value of the packed call just made");
    vm_calls_->back().dst = idx;
    return Value::of_int(0);
  }
  if (name == "TVMBackendAnyListSetPackedArg") {
    if (a.size() != 5) fail(loc, name + " takes 5 arguments");
    const int64_t l = list(0), idx = integer(1), off = integer(4);
    Ptr vp, cp;
    slot(2, 3, off, &vp, &cp);
    store(vp, ctx_.VoidPtrTy, Value::of_ptr(Ptr{Ptr::Base::Vm, l == kVmRegList ? kVmReg : kVmConst, idx}), loc);
    store(cp, ctx_.IntTy, Value::of_int(13), loc);
    return Value::of_int(0);
  }
  if (name == "TVMBackendAnyListResetItem") {
    if (a.size() != 2) fail(loc, name + " takes 2 arguments");
    if (list(0) != kVmRegList) fail(loc, name + " resets an item of the constant list");
    VmHostCall call;  // the register is cleared, as vm.builtin.null_value into it would
    call.name = "vm.builtin.null_value";
    call.dst = integer(1);
    call.loc = prog_.to_loc(loc);
    vm_calls_->push_back(std::move(call));
    return Value::of_int(0);
  }
  if (name == "TVMBackendAnyListMoveFromPackedReturn") {
    if (a.size() != 5) fail(loc, name + " takes 5 arguments");
    if (list(0) != kVmRegList) fail(loc, name + " moves into the constant list");
    const int64_t idx = integer(1), off = integer(4);
    Ptr vp, cp;
    slot(2, 3, off, &vp, &cp);
    Value v = load(vp, ctx_.VoidPtrTy, loc);
    if (v.kind != Value::Kind::Ptr || v.p.base != Ptr::Base::Vm || v.p.id != kVmReturn || vm_calls_->empty() ||
        v.p.off != static_cast<int64_t>(vm_calls_->size()) - 1)
      fail(loc, name + ": slot " + std::to_string(off) + " does not hold the return value of the packed call just made");
    vm_calls_->back().dst = idx;
    return Value::of_int(0);
  }
  fail(loc, "call to '" + name + "', a TVM runtime function kdflow does not model");
}

void Interpreter::run_vm(const FunctionDecl* fn, std::vector<VmHostCall>* calls) {
  SourceLocation loc = fn->getLocation();
  vm_calls_ = calls;
  if (fn->getNumParams() == 4 && fn->getParamDecl(1)->getType()->isPointerType()) {
    // TVM 0.21+: __tvm_ffi___vmtir__main(self, (TVMFFIAny*) args, 4, result), each of
    // (ctx, r, c, f) an opaque pointer (kTVMFFIOpaquePtr).
    ffi_ = true;
    arg_stride_ = 16;
    frames_.emplace_back();
    int64_t args_obj = new_object(16 * 4, "args", ObjRole::Args);
    const int64_t tokens[4] = {kVmCtx, kVmRegList, kVmConstList, kVmFuncList};
    for (int i = 0; i < 4; ++i) {
      store(Ptr{Ptr::Base::Object, args_obj, 16 * i}, ctx_.IntTy, Value::of_int(4), loc);
      store(Ptr{Ptr::Base::Object, args_obj, 16 * i + 4}, ctx_.UnsignedIntTy, Value::of_int(0), loc);
      store(Ptr{Ptr::Base::Object, args_obj, 16 * i + 8}, ctx_.VoidPtrTy, Value::of_ptr(Ptr{Ptr::Base::Vm, tokens[i], 0}),
            loc);
    }
    int64_t ret_obj = new_object(16, "result");
    frames_.pop_back();
    Value r = call_function(fn,
                            {Value::of_ptr(Ptr{}), Value::of_ptr(Ptr{Ptr::Base::Object, args_obj, 0}), Value::of_int(4),
                             Value::of_ptr(Ptr{Ptr::Base::Object, ret_obj, 0})},
                            loc);
    if (r.kind != Value::Kind::Int || r.i != 0)
      fail(return_loc_.isValid() ? return_loc_ : loc,
           "function '" + fn->getNameAsString() + "' returns non-zero here: the TVM runtime would fail this call" +
               (last_error_.empty() ? std::string() : " (" + last_error_ + ")"));
    return;
  }
  if (fn->getNumParams() != 6 || !fn->getParamDecl(0)->getType()->isPointerType())
    fail(loc, "function '" + fn->getNameAsString() + "' does not have TVM's packed-function signature");
  frames_.emplace_back();
  const int64_t value_size = 8;
  int64_t args_obj = new_object(value_size * 4, "args", ObjRole::Args);
  int64_t codes_obj = new_object(4 * 4, "arg_type_ids", ObjRole::TypeCodes);
  const int64_t tokens[4] = {kVmCtx, kVmRegList, kVmConstList, kVmFuncList};
  for (int i = 0; i < 4; ++i) {
    store(Ptr{Ptr::Base::Object, args_obj, value_size * i}, ctx_.VoidPtrTy, Value::of_ptr(Ptr{Ptr::Base::Vm, tokens[i], 0}), loc);
    store(Ptr{Ptr::Base::Object, codes_obj, 4 * i}, ctx_.IntTy, Value::of_int(3), loc);
  }
  int64_t ret_obj = new_object(value_size, "out_ret_value");
  int64_t ret_code_obj = new_object(4, "out_ret_tcode");
  frames_.pop_back();
  std::vector<Value> args = {Value::of_ptr(Ptr{Ptr::Base::Object, args_obj, 0}),
                             Value::of_ptr(Ptr{Ptr::Base::Object, codes_obj, 0}), Value::of_int(4),
                             Value::of_ptr(Ptr{Ptr::Base::Object, ret_obj, 0}),
                             Value::of_ptr(Ptr{Ptr::Base::Object, ret_code_obj, 0}), Value::of_ptr(Ptr{})};
  Value r = call_function(fn, args, loc);
  if (r.kind != Value::Kind::Int || r.i != 0)
    fail(return_loc_.isValid() ? return_loc_ : loc,
         "function '" + fn->getNameAsString() + "' returns non-zero here: the TVM runtime would fail this call");
}

// --- entry ------------------------------------------------------------------

void Interpreter::run(const FunctionDecl* fn, const std::vector<TensorArg>& tensors) {
  SourceLocation loc = fn->getLocation();
  // TVM 0.21+ (tvm-ffi): int32_t f(void* self, void* args, int32_t num_args, void* result).
  ffi_ = fn->getNumParams() == 4 && fn->getParamDecl(1)->getType()->isPointerType() &&
         fn->getParamDecl(2)->getType()->isIntegerType() && fn->getParamDecl(3)->getType()->isPointerType();
  if (!ffi_ && (fn->getNumParams() != 6 || !fn->getParamDecl(0)->getType()->isPointerType()))
    fail(loc, "function '" + fn->getNameAsString() +
                  "' does not have TVM's packed-function signature (args, arg_type_ids, num_args, ret, ret_tcode, "
                  "resource; or TVM 0.21+'s self, args, num_args, result)");
  const RecordDecl* dl = prog_.dltensor;
  if (!dl) fail(loc, "DLTensor is not declared");
  QualType dl_type = ctx_.getRecordType(dl);
  const int64_t dl_size = static_cast<int64_t>(type_size(dl_type));
  const int64_t value_size = 8;  // sizeof(TVMValue)

  auto field = [&](const RecordDecl* rd, llvm::StringRef name) -> const FieldDecl* {
    for (const FieldDecl* f : rd->fields())
      if (f->getName() == name) return f;
    return nullptr;
  };
  // Offsets within the stand-in DLTensor (see host_headers.cpp).
  const FieldDecl* f_data = field(dl, "data");
  const FieldDecl* f_ndim = field(dl, "ndim");
  const FieldDecl* f_dtype = field(dl, "dtype");
  const FieldDecl* f_shape = field(dl, "shape");
  const FieldDecl* f_strides = field(dl, "strides");
  const FieldDecl* f_offset = field(dl, "byte_offset");
  int64_t device_off = -1;
  for (const FieldDecl* f : dl->fields())
    if (f->isAnonymousStructOrUnion()) device_off = field_offset(f);
  if (!f_data || !f_ndim || !f_dtype || !f_shape || !f_strides || !f_offset || device_off < 0)
    fail(loc, "unexpected DLTensor layout");
  int64_t dtype_off = field_offset(f_dtype);
  dl_ = DlLayout{dl_size,          field_offset(f_data),    device_off,
                 field_offset(f_ndim), dtype_off,           field_offset(f_shape),
                 field_offset(f_strides), field_offset(f_offset)};

  if (ffi_) {
    arg_stride_ = 16;
    tensor_dl_off_ = prog_.ffi_tensor_dltensor_offset;
  }
  const int64_t n_args = static_cast<int64_t>(tensors.size());
  frames_.emplace_back();
  int64_t args_obj = new_object(arg_stride_ * n_args, "args", ObjRole::Args);
  int64_t codes_obj = ffi_ ? -1 : new_object(4 * n_args, "arg_type_ids", ObjRole::TypeCodes);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorArg& t = tensors[i];
    if (t.kind != TensorArg::Kind::Tensor) {
      // A scalar: tvm-ffi's TVMFFIAny (type index 1 int, 3 float; the value at 8), or the
      // legacy TVMValue with its type code (0 int, 2 float).
      const bool is_int = t.kind == TensorArg::Kind::Int;
      const Value v = is_int ? Value::of_int(t.int_value) : Value::of_float(t.float_value);
      const QualType ty = is_int ? ctx_.LongTy : ctx_.DoubleTy;
      const int64_t slot = arg_stride_ * static_cast<int64_t>(i);
      if (ffi_) {
        store(Ptr{Ptr::Base::Object, args_obj, slot}, ctx_.IntTy, Value::of_int(is_int ? 1 : 3), loc);
        store(Ptr{Ptr::Base::Object, args_obj, slot + 4}, ctx_.UnsignedIntTy, Value::of_int(0), loc);
        store(Ptr{Ptr::Base::Object, args_obj, slot + 8}, ty, v, loc);
      } else {
        store(Ptr{Ptr::Base::Object, args_obj, slot}, ty, v, loc);
        store(Ptr{Ptr::Base::Object, codes_obj, 4 * static_cast<int64_t>(i)}, ctx_.IntTy, Value::of_int(is_int ? 0 : 2),
              loc);
      }
      continue;
    }
    std::string what = (ffi_ ? "the Tensor object of argument " : "the DLTensor of argument ") + std::to_string(i);
    // Under tvm-ffi a tensor is an object whose DLTensor follows the object header; the
    // header itself is never written, so reading it is an error, not a guess.
    int64_t tobj = new_object(tensor_dl_off_ + dl_size, what, ObjRole::Tensor);
    objects_[tobj].tensor_index = static_cast<int>(i);
    int64_t sobj = new_object(8 * static_cast<int64_t>(t.shape.size()), "the shape of argument " + std::to_string(i), ObjRole::Shape);
    objects_[sobj].tensor_index = static_cast<int>(i);
    for (size_t d = 0; d < t.shape.size(); ++d) {
      Value dim = Value::of_int(t.shape[d]);
      if (d < t.shape_names.size() && !t.shape_names[d].empty()) dim.sym = sym_name(t.shape_names[d]);
      store(Ptr{Ptr::Base::Object, sobj, static_cast<int64_t>(8 * d)}, ctx_.LongTy, dim, loc);
    }
    auto put = [&](int64_t off, QualType ty, Value v) {
      store(Ptr{Ptr::Base::Object, tobj, tensor_dl_off_ + off}, ty, v, loc);
    };
    if (t.host_int64) {
      // A host tensor (the shape heap): its elements live where the code can read and write them.
      int64_t dobj = new_object(8 * static_cast<int64_t>(t.host_int64->size()), "the elements of argument " + std::to_string(i));
      for (size_t k = 0; k < t.host_int64->size(); ++k)
        if (!t.host_known || (k < t.host_known->size() && (*t.host_known)[k]))
          store(Ptr{Ptr::Base::Object, dobj, static_cast<int64_t>(8 * k)}, ctx_.LongTy, Value::of_int((*t.host_int64)[k]), loc);
      host_data_obj_ = dobj;
      put(field_offset(f_data), ctx_.VoidPtrTy, Value::of_ptr(Ptr{Ptr::Base::Object, dobj, 0}));
    } else {
      put(field_offset(f_data), ctx_.VoidPtrTy, Value::of_ptr(Ptr{Ptr::Base::Entry, t.entry_id, 0}));
    }
    put(device_off, ctx_.IntTy, Value::of_int(t.device_type));
    put(device_off + 4, ctx_.IntTy, Value::of_int(t.device_id));
    put(field_offset(f_ndim), ctx_.IntTy, Value::of_int(static_cast<int64_t>(t.shape.size())));
    put(dtype_off, ctx_.UnsignedCharTy, Value::of_int(t.dtype_code));
    put(dtype_off + 1, ctx_.UnsignedCharTy, Value::of_int(t.dtype_bits));
    put(dtype_off + 2, ctx_.UnsignedShortTy, Value::of_int(t.dtype_lanes));
    put(field_offset(f_shape), ctx_.VoidPtrTy, Value::of_ptr(Ptr{Ptr::Base::Object, sobj, 0}));
    put(field_offset(f_strides), ctx_.VoidPtrTy, Value::of_ptr(Ptr{}));
    put(field_offset(f_offset), ctx_.UnsignedLongTy, Value::of_int(static_cast<int64_t>(t.byte_offset)));
    const int64_t slot = arg_stride_ * static_cast<int64_t>(i);
    if (ffi_) {
      store(Ptr{Ptr::Base::Object, args_obj, slot}, ctx_.IntTy, Value::of_int(prog_.ffi_tensor_type_index), loc);
      store(Ptr{Ptr::Base::Object, args_obj, slot + 4}, ctx_.UnsignedIntTy, Value::of_int(0), loc);
      store(Ptr{Ptr::Base::Object, args_obj, slot + 8}, ctx_.VoidPtrTy, Value::of_ptr(Ptr{Ptr::Base::Object, tobj, 0}),
            loc);
      continue;
    }
    store(Ptr{Ptr::Base::Object, args_obj, slot}, ctx_.VoidPtrTy, Value::of_ptr(Ptr{Ptr::Base::Object, tobj, 0}), loc);
    store(Ptr{Ptr::Base::Object, codes_obj, 4 * static_cast<int64_t>(i)}, ctx_.IntTy, Value::of_int(t.type_code), loc);
  }
  std::vector<Value> args;
  if (ffi_) {
    int64_t result_obj = new_object(16, "result");
    result_obj_ = result_obj;
    args = {Value::of_ptr(Ptr{}), Value::of_ptr(Ptr{Ptr::Base::Object, args_obj, 0}), Value::of_int(n_args),
            Value::of_ptr(Ptr{Ptr::Base::Object, result_obj, 0})};
  } else {
    int64_t ret_obj = new_object(value_size, "out_ret_value");
    int64_t ret_code_obj = new_object(4, "out_ret_tcode");
    args = {Value::of_ptr(Ptr{Ptr::Base::Object, args_obj, 0}),
            Value::of_ptr(Ptr{Ptr::Base::Object, codes_obj, 0}),
            Value::of_int(n_args),
            Value::of_ptr(Ptr{Ptr::Base::Object, ret_obj, 0}),
            Value::of_ptr(Ptr{Ptr::Base::Object, ret_code_obj, 0}),
            Value::of_ptr(Ptr{})};
  }
  frames_.pop_back();
  Value r = call_function(fn, args, loc);
  if (r.kind != Value::Kind::Int || r.i != 0) {
    std::string msg = "function '" + fn->getNameAsString() + "' returns " +
                      (r.kind == Value::Kind::Int ? std::to_string(r.i) : std::string("a non-integer")) +
                      " here: the TVM runtime would fail this call";
    if (!last_error_.empty()) msg += " (" + last_error_ + ")";
    fail(return_loc_.isValid() ? return_loc_ : loc, msg);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// HostProgram

/// An interpretation failure as one line: file:line:col of where it happened, and the function.
template <typename ProgramImpl>
static Error failure_error(const ProgramImpl& impl, const Failure& f, const std::string& function) {
  SourceLoc l = impl.to_loc(f.loc);
  std::string msg = f.msg + " [in " + function + "]";
  if (!l.valid()) return Error{file_error(impl.label, msg).message};
  return Error{source_error(l.file, l.line, l.col, msg).message};
}

HostProgram::HostProgram(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HostProgram::~HostProgram() = default;

/// Whether host.c uses `half` as a type (TVM 0.26's float16 host casts `(half*)`) without
/// declaring it: the host only passes such pointers on, so a 16-bit stand-in type is enough.
static bool host_needs_half(const std::string& source) {
  return source.find("(half*)") != std::string::npos && source.find(" half;") == std::string::npos &&
         source.find("struct half") == std::string::npos;
}

Expected<std::unique_ptr<HostProgram>> HostProgram::parse(const std::string& source, const std::string& file,
                                                          const InterpreterLimits& limits) {
  auto impl = std::make_unique<Impl>();
  impl->label = file;
  impl->limits = limits;
  impl->virtual_main = std::string(detail::kVirtualInputDir) + "/host.c";

  detail::InMemorySource src{source, file, impl->virtual_main, &detail::host_stub_headers()};
  std::vector<std::string> args = {"clang", "-fsyntax-only", "-x", "c", "-std=gnu11", "-target",
                                   "x86_64-unknown-linux-gnu", "-nostdinc", "-w", "-ferror-limit=1",
                                   std::string("-I") + detail::kStubIncludeDir};
  if (host_needs_half(source)) args.insert(args.end(), {"-include", "kdflow_host_half.h"});
  auto unit = detail::parse_in_memory(src, args);
  if (!unit) return unit.error();
  impl->unit = unit.take();

  ASTContext& ctx = impl->unit->getASTContext();
  std::vector<std::pair<std::string, const FunctionDecl*>> ffi_exports;
  for (const Decl* d : ctx.getTranslationUnitDecl()->decls()) {
    if (const auto* fd = dyn_cast<FunctionDecl>(d)) {
      if (fd->doesThisDeclarationHaveABody()) {
        std::string name = fd->getNameAsString();
        if (!impl->functions.count(name)) impl->function_order.push_back(name);
        impl->functions[name] = fd;
        // TVM 0.22+ exports `<f>` as `__tvm_ffi_<f>`; the VM and the kernels' owners name it `<f>`.
        if (name.size() > 10 && name.compare(0, 10, "__tvm_ffi_") == 0) ffi_exports.emplace_back(name.substr(10), fd);
      }
    } else if (const auto* td = dyn_cast<TypedefNameDecl>(d)) {
      if (td->getName() == "DLTensor")
        if (const auto* rt = td->getUnderlyingType()->getAs<RecordType>()) impl->dltensor = rt->getDecl();
    }
  }
  for (const auto& [name, fd] : ffi_exports) {
    if (impl->functions.count(name)) continue;  // a function of that very name wins
    impl->function_order.push_back(name);
    impl->functions[name] = fd;
  }
  // The Tensor object's type index and its DLTensor offset, from the argument unpacking TVM
  // prints: `if ((x_type_index == 70)) { condval = ((void*)((char*)(((TVMFFIAny*)args)[0].v_ptr) + 24)); }`.
  const std::string marker = ".v_ptr) + ";
  for (size_t at = source.find(marker); at != std::string::npos; at = source.find(marker, at + 1)) {
    size_t e = at + marker.size(), end = e;
    while (end < source.size() && end - e < 6 && std::isdigit(static_cast<unsigned char>(source[end]))) ++end;
    const size_t ti_at = source.rfind("_type_index == ", at);
    if (end == e || ti_at == std::string::npos || at - ti_at > 200) continue;
    size_t t = ti_at + 15, t_end = t;
    while (t_end < source.size() && t_end - t < 6 && std::isdigit(static_cast<unsigned char>(source[t_end]))) ++t_end;
    if (t_end == t) continue;
    impl->ffi_tensor_type_index = std::stoll(source.substr(t, t_end - t));
    impl->ffi_tensor_dltensor_offset = std::stoll(source.substr(e, end - e));
    break;
  }
  return std::unique_ptr<HostProgram>(new HostProgram(std::move(impl)));
}

Expected<std::vector<VmHostCall>> HostProgram::run_vm(const std::string& function) const {
  auto it = impl_->functions.find(function);
  if (it == impl_->functions.end())
    return Error{file_error(impl_->label, "no function '" + function + "' is defined in this file").message};
  HostTrace trace;
  std::vector<VmHostCall> calls;
  try {
    Interpreter interp(*impl_, trace);
    interp.run_vm(it->second, &calls);
  } catch (const Failure& f) {
    return failure_error(*impl_, f, function);
  } catch (const std::bad_alloc&) {
    return Error{file_error(impl_->label, "out of memory while interpreting '" + function + "'").message};
  }
  return calls;
}

Expected<std::vector<int64_t>> HostProgram::run_shape_function(const std::string& function,
                                                               const std::vector<int64_t>& heap,
                                                               std::vector<bool>* known) const {
  auto it = impl_->functions.find(function);
  if (it == impl_->functions.end())
    return Error{file_error(impl_->label, "no function '" + function + "' is defined in this file").message};
  HostTrace trace;
  trace.function = function;
  TensorArg h;
  h.shape = {static_cast<int64_t>(heap.size())};
  h.dtype_code = 0;  // int64
  h.dtype_bits = 64;
  h.device_type = 1;  // kDLCPU: the heap lives on the host
  h.type_code = 13;
  h.host_int64 = &heap;
  h.host_known = known;
  try {
    Interpreter interp(*impl_, trace);
    interp.run(it->second, {h});
    if (!trace.calls.empty())
      throw Failure{it->second->getLocation(), "a shape function makes a packed call (" + trace.calls.front().name + ")"};
    return interp.host_tensor_values(heap.size(), known);
  } catch (const Failure& f) {
    return failure_error(*impl_, f, function);
  } catch (const std::bad_alloc&) {
    return Error{file_error(impl_->label, "out of memory while interpreting '" + function + "'").message};
  }
}

Expected<HostScalar> HostProgram::run_scalar_function(const std::string& function) const {
  auto it = impl_->functions.find(function);
  if (it == impl_->functions.end())
    return Error{file_error(impl_->label, "no function '" + function + "' is defined in this file").message};
  HostTrace trace;
  trace.function = function;
  try {
    Interpreter interp(*impl_, trace);
    interp.run(it->second, {});
    if (!trace.calls.empty())
      throw Failure{it->second->getLocation(), "a scalar function makes a packed call (" + trace.calls.front().name + ")"};
    auto [type, v] = interp.ffi_result(it->second->getLocation());
    HostScalar out;
    if (type == 3 && v.kind == Value::Kind::Float) {
      out.is_float = true;
      out.f = v.f;
    } else if ((type == 1 || type == 2) && v.kind == Value::Kind::Int) {
      out.i = v.i;
    } else {
      throw Failure{it->second->getLocation(), "the function returns neither an integer nor a float (type index " +
                                                   std::to_string(type) + ")"};
    }
    return out;
  } catch (const Failure& f) {
    return failure_error(*impl_, f, function);
  } catch (const std::bad_alloc&) {
    return Error{file_error(impl_->label, "out of memory while interpreting '" + function + "'").message};
  }
}

bool HostProgram::has_function(const std::string& name) const { return impl_->functions.count(name) != 0; }

std::vector<std::string> HostProgram::functions() const { return impl_->function_order; }

Expected<HostTrace> HostProgram::run(const std::string& function, const std::vector<TensorArg>& tensors) const {
  HostTrace trace;
  trace.function = function;
  auto it = impl_->functions.find(function);
  if (it == impl_->functions.end())
    return Error{file_error(impl_->label, "no function '" + function + "' is defined in this file").message};
  trace.function_loc = impl_->to_loc(it->second->getLocation());
  try {
    Interpreter interp(*impl_, trace);
    interp.run(it->second, tensors);
  } catch (const Failure& f) {
    return failure_error(*impl_, f, function);
  } catch (const std::bad_alloc&) {
    return Error{file_error(impl_->label, "out of memory while interpreting '" + function + "'").message};
  }
  return trace;
}

}  // namespace kdflow
