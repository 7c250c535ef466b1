// jit.cpp — device source → LLVM IR (clang CodeGen, in-process) → ORC LLJIT; the CpuDevice
// of kdflow/replay/cpu_kernels.h.
//
// Why in-process rather than running clang++ and dlopen'ing a shared object: kdflow already
// links the clang and LLVM 15 libraries; in-process there is no compiler to find on the
// user's machine (or a different one per machine), no temporary files, and — the point for
// untrusted builds — the compiled code resolves symbols only against the table of
// runtime.cpp (no dynamic loader search, no process symbols: LLJIT with no generator, no
// platform), and the source is compiled over an in-memory file system, so it cannot
// include a real file either.
//
// Steps per module: the source is compiled as host C++17 with the CPU prelude
// force-included (prelude.h), with LLVM's passes disabled; before CodeGen sees a function,
// every local variable annotated `kdflow.shared` (the prelude's __shared__) becomes a
// static one without initialiser. On the IR, each such variable — and each extern
// __shared__ array (dynamic shared memory) — is replaced by an offset from the current
// block's shared memory (`__kdflow_ctx()->shared`): static ones laid out one after the
// other, the dynamic area after them, 16-byte aligned. Then every kernel gets a wrapper
// `__kdflow_entry_<name>(void** args)` that loads each parameter from args[i] (as
// cuLaunchKernel's kernelParams), the module is optimised at -O2 for the host CPU, and a
// kernel needs fibers when its wrapper reaches a barrier or warp collective of the runtime.
#include "kdflow/replay/cpu_kernels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include <clang/AST/ASTConsumer.h>
#include <clang/AST/Attr.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/Basic/FileManager.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Basic/Version.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/MultiplexConsumer.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/ReplaceConstant.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Target/TargetMachine.h>

#include <fmt/format.h>

#include "compile_cache.h"
#include "parallel_codegen.h"
#include "prelude.h"
#include "region_fission.h"
#include "runtime.h"

namespace kdflow::cpu {

namespace {

constexpr const char* kIncludeDir = "/kdflow-cpu/include";
constexpr const char* kSourceDir = "/kdflow-cpu/src";
constexpr const char* kSharedAnnotation = "kdflow.shared";
constexpr uint64_t kDynamicSharedAlign = 16;

std::string llvm_message(llvm::Error e) {
  std::string s = llvm::toString(std::move(e));
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

/// Keeps clang's first error as `label:line:col: error: message`.
class FirstError : public clang::DiagnosticConsumer {
 public:
  FirstError(std::string path, std::string label) : path_(std::move(path)), label_(std::move(label)) {}
  void HandleDiagnostic(clang::DiagnosticsEngine::Level level, const clang::Diagnostic& info) override {
    DiagnosticConsumer::HandleDiagnostic(level, info);
    if (level < clang::DiagnosticsEngine::Error || !first_.empty()) return;
    llvm::SmallString<256> text;
    info.FormatDiagnostic(text);
    if (info.hasSourceManager() && info.getLocation().isValid()) {
      const clang::SourceManager& sm = info.getSourceManager();
      clang::PresumedLoc p = sm.getPresumedLoc(sm.getExpansionLoc(info.getLocation()));
      if (p.isValid()) {
        std::string file = p.getFilename() == path_ ? label_ : std::string(p.getFilename());
        first_ = source_error(file, p.getLine(), p.getColumn(), text.str().str()).message;
        return;
      }
    }
    first_ = file_error(label_, text.str().str()).message;
  }
  const std::string& first() const { return first_; }

 private:
  std::string path_, label_, first_;
};

bool is_shared(const clang::Decl* d) {
  for (const auto* a : d->specific_attrs<clang::AnnotateAttr>())
    if (a->getAnnotation() == kSharedAnnotation) return true;
  return false;
}

/// Turns __shared__ locals into statics (per-block storage after the IR rewrite) and notes
/// the names of extern __shared__ arrays, before CodeGen sees the function.
class SharedToStatic : public clang::ASTConsumer, public clang::RecursiveASTVisitor<SharedToStatic> {
 public:
  explicit SharedToStatic(std::set<std::string>* dynamic) : dynamic_(dynamic) {}
  bool HandleTopLevelDecl(clang::DeclGroupRef group) override {
    for (clang::Decl* d : group) TraverseDecl(d);
    return true;
  }
  bool VisitVarDecl(clang::VarDecl* v) {
    if (!is_shared(v)) return true;
    if (v->hasExternalStorage()) {
      dynamic_->insert(v->getName().str());
    } else if (v->isLocalVarDecl() && !v->isStaticLocal()) {
      v->setStorageClass(clang::SC_Static);
      // CUDA allows no initialiser on __shared__ (only empty constructors): none, so no guard.
      v->setInit(nullptr);
    }
    return true;
  }

 private:
  std::set<std::string>* dynamic_;
};

class CompileAction : public clang::EmitLLVMOnlyAction {
 public:
  CompileAction(llvm::LLVMContext* ctx, std::set<std::string>* dynamic)
      : EmitLLVMOnlyAction(ctx), dynamic_(dynamic) {}

 protected:
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance& ci, llvm::StringRef file) override {
    std::vector<std::unique_ptr<clang::ASTConsumer>> consumers;
    consumers.push_back(std::make_unique<SharedToStatic>(dynamic_));
    consumers.push_back(EmitLLVMOnlyAction::CreateASTConsumer(ci, file));
    return std::make_unique<clang::MultiplexConsumer>(std::move(consumers));
  }

 private:
  std::set<std::string>* dynamic_;
};

/// A parse of the module whose only consumer is region fission's (region_fission.h).
class FissionAction : public clang::ASTFrontendAction {
 public:
  FissionAction(const std::set<std::string>& one_thread, const std::map<std::string, BlockTile>& tiles,
                const std::map<std::string, BlockShape>& blocks, unsigned vector_lanes, FissionOutcome* out)
      : one_thread_(one_thread), tiles_(tiles), blocks_(blocks), vector_lanes_(vector_lanes), out_(out) {}

 protected:
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance& ci, llvm::StringRef) override {
    return make_fission_consumer(ci, one_thread_, tiles_, blocks_, vector_lanes_, out_);
  }

 private:
  const std::set<std::string>& one_thread_;
  const std::map<std::string, BlockTile>& tiles_;
  const std::map<std::string, BlockShape>& blocks_;
  unsigned vector_lanes_;
  FissionOutcome* out_;
};

/// The globals annotated `kdflow.shared`; removes llvm.global.annotations (it only holds them
/// and clang's other annotations, which nothing reads).
std::vector<llvm::GlobalVariable*> take_shared_annotations(llvm::Module& m) {
  std::vector<llvm::GlobalVariable*> out;
  llvm::GlobalVariable* ann = m.getNamedGlobal("llvm.global.annotations");
  if (!ann) return out;
  if (auto* arr = llvm::dyn_cast<llvm::ConstantArray>(ann->getInitializer())) {
    for (llvm::Value* op : arr->operands()) {
      auto* entry = llvm::dyn_cast<llvm::ConstantStruct>(op);
      if (!entry || entry->getNumOperands() < 2) continue;
      auto* gv = llvm::dyn_cast<llvm::GlobalVariable>(entry->getOperand(0)->stripPointerCasts());
      auto* str = llvm::dyn_cast<llvm::GlobalVariable>(entry->getOperand(1)->stripPointerCasts());
      if (!gv || !str || !str->hasInitializer()) continue;
      auto* data = llvm::dyn_cast<llvm::ConstantDataArray>(str->getInitializer());
      if (data && data->isCString() && data->getAsCString() == kSharedAnnotation) out.push_back(gv);
    }
  }
  ann->eraseFromParent();
  return out;
}

/// Replaces every use of `gv` by `shared + offset`, the shared pointer read from the
/// thread's context at the use. Constant expressions over gv become instructions first.
Status replace_with_shared(llvm::Module& m, llvm::GlobalVariable* gv, uint64_t offset, llvm::Function* ctx_fn,
                           const std::string& label) {
  // Constant expressions (a constant GEP into the array) → instructions at each use.
  std::vector<llvm::ConstantExpr*> exprs;
  for (llvm::User* u : gv->users())
    if (auto* ce = llvm::dyn_cast<llvm::ConstantExpr>(u)) exprs.push_back(ce);
  for (llvm::ConstantExpr* ce : exprs) {
    std::vector<llvm::User*> users(ce->user_begin(), ce->user_end());
    for (llvm::User* u : users) {
      if (auto* inst = llvm::dyn_cast<llvm::Instruction>(u)) {
        llvm::convertConstantExprsToInstructions(inst, ce);
      }
    }
    ce->removeDeadConstantUsers();
  }
  gv->removeDeadConstantUsers();
  std::vector<llvm::Use*> uses;
  for (llvm::Use& u : gv->uses()) uses.push_back(&u);
  for (llvm::Use* u : uses) {
    auto* inst = llvm::dyn_cast<llvm::Instruction>(u->getUser());
    if (!inst)
      return Error{file_error(label, fmt::format("__shared__ variable '{}' is used outside a function (in a constant "
                                                 "initialiser), which the CPU back end does not support",
                                                 gv->getName().str())).message,
                   ExitCode::Unavailable};
    llvm::Instruction* at = inst;
    if (auto* phi = llvm::dyn_cast<llvm::PHINode>(inst)) at = phi->getIncomingBlock(*u)->getTerminator();
    llvm::IRBuilder<> b(at);
    llvm::Type* i8p = llvm::PointerType::getUnqual(m.getContext());
    llvm::Value* ctx = b.CreateCall(ctx_fn);
    // ThreadContext: four uint3 (48 bytes), then `char* shared`.
    llvm::Value* field = b.CreateConstGEP1_64(b.getInt8Ty(), ctx, 48);
    llvm::Value* base = b.CreateLoad(i8p, field);
    llvm::Value* addr = b.CreateConstGEP1_64(b.getInt8Ty(), base, offset);
    u->set(addr);
  }
  gv->eraseFromParent();
  return Status::ok();
}

/// `but_steps`: a volatile access's warp step (__kdflow_warp_step) does not count (a kernel
/// rewritten into thread loops reaches them through shared helpers such as half's volatile
/// operator=, and runs them as nothing: runtime.cpp).
bool reaches_collective(llvm::Function* f, std::set<llvm::Function*>& seen, bool but_steps = false) {
  if (!seen.insert(f).second) return false;
  if (f->isDeclaration())
    return is_collective_function(f->getName().str()) && !(but_steps && f->getName() == "__kdflow_warp_step");
  for (llvm::BasicBlock& bb : *f)
    for (llvm::Instruction& i : bb)
      if (auto* call = llvm::dyn_cast<llvm::CallBase>(&i)) {
        llvm::Function* callee = call->getCalledFunction();
        if (!callee) return true;  // an indirect call: assume the worst
        if (reaches_collective(callee, seen, but_steps)) return true;
      }
  return false;
}

/// Whether `ptr` points into the block's shared memory: replace_with_shared turned every
/// __shared__ variable into `load(ctx() + 48) + offset`, so the pointer's underlying object is
/// that load.
bool is_shared_pointer(const llvm::Value* ptr, const llvm::Function* ctx_fn) {
  const auto* base = llvm::dyn_cast<llvm::LoadInst>(llvm::getUnderlyingObject(ptr, 16));
  if (!base) return false;
  const auto* field = llvm::dyn_cast<llvm::GetElementPtrInst>(base->getPointerOperand());
  const auto* call = llvm::dyn_cast<llvm::CallInst>(field ? field->getPointerOperand() : base->getPointerOperand());
  return call && call->getCalledFunction() == ctx_fn;
}

/// Warp-synchronous shared memory: code that exchanges values through shared memory between
/// a warp's lanes with no barrier, relying on the lanes running in step (TVM 0.26+'s
/// gpu_2d_continuous_cumsum: in each scan step every lane of a warp reads its neighbour's
/// element, then writes its own). Run one lane after another, a lane would read what its
/// neighbour already wrote. In a function that already runs as fibers (it reaches a barrier
/// or collective), inside each basic block with no call between: a shared store that follows
/// a shared load waits for the warp first (every lane has loaded), and a shared load that
/// follows a shared store waits for the warp first (every lane has stored), as lanes in step
/// would. Other code is left alone: no cost where no such exchange can be.
void insert_warp_steps_for_shared(llvm::Module& m, const llvm::Function* ctx_fn, llvm::FunctionCallee step,
                                  const std::vector<std::string>& thread_loops) {
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    if (std::find(thread_loops.begin(), thread_loops.end(), f.getName().str()) != thread_loops.end()) continue;
    std::set<llvm::Function*> seen;
    if (!reaches_collective(&f, seen)) continue;
    std::vector<llvm::Instruction*> at;
    for (llvm::BasicBlock& bb : f) {
      bool loaded = false, stored = false;
      for (llvm::Instruction& i : bb) {
        bool reads = false, writes = false;  // of shared memory
        if (auto* mt = llvm::dyn_cast<llvm::MemTransferInst>(&i)) {
          // A struct copy (float4 = float4) is a memcpy: a load from its source, a store to its destination.
          reads = is_shared_pointer(mt->getRawSource(), ctx_fn);
          writes = is_shared_pointer(mt->getRawDest(), ctx_fn);
        } else if (auto* ms = llvm::dyn_cast<llvm::MemSetInst>(&i)) {
          writes = is_shared_pointer(ms->getRawDest(), ctx_fn);
        } else if (auto* call = llvm::dyn_cast<llvm::CallBase>(&i)) {
          // A barrier or collective (or what may reach one) starts the turn again; the shared
          // base's own calls (ctx_fn) and other runtime helpers do not.
          llvm::Function* callee = call->getCalledFunction();
          std::set<llvm::Function*> visited;
          if (!callee || (callee != ctx_fn && reaches_collective(callee, visited))) loaded = stored = false;
          continue;
        } else if (auto* ld = llvm::dyn_cast<llvm::LoadInst>(&i)) {
          reads = !ld->isVolatile() && is_shared_pointer(ld->getPointerOperand(), ctx_fn);
        } else if (auto* st = llvm::dyn_cast<llvm::StoreInst>(&i)) {
          writes = !st->isVolatile() && is_shared_pointer(st->getPointerOperand(), ctx_fn);
        }
        if (!reads && !writes) continue;
        if ((reads && stored) || (writes && loaded)) {
          at.push_back(&i);
          loaded = stored = false;
        }
        loaded |= reads;
        stored |= writes;
      }
    }
    for (llvm::Instruction* i : at) llvm::CallInst::Create(step, "", i);
  }
}

}  // namespace

struct CpuDevice::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::string triple, cpu;
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> jtmb;  ///< a copy: the partitions' code generators
  std::vector<std::string> features;  ///< the host's ("+avx512f", ...), as the JIT's code generator has them
  unsigned vector_lanes = 4;          ///< float lanes of the widest vector the features give
  std::unique_ptr<WorkerPool> pool;
  std::optional<CompileCache> cache;  ///< compile_cache.h; none without CpuDeviceOptions::cache_dir
  bool poison = false;                ///< CpuDeviceOptions::poison
  struct ModuleInfo {
    llvm::orc::JITDylib* dylib = nullptr;
    std::map<std::string, CpuKernel> kernels;
    CpuModuleOrigin origin;
  };
  std::vector<ModuleInfo> modules;
};

namespace {

/// What a module compiles to: the object files and its kernels (not yet linked).
struct CompiledModule {
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> objects;
  std::map<std::string, CpuKernel> kernels;
};

constexpr uint64_t kPayloadFormat = 2;

/// A cache entry's payload (compile_cache.h stores and verifies the bytes): the kernels as
/// compile_module found them, then the object files.
/// replay --poison: a memset of 0xFF bytes over each fixed-size alloca of every defined function,
/// after the entry block's allocas (so before the parameters are stored into theirs), and again
/// wherever a local's scope begins (clang's llvm.lifetime.start at -O2): a local declared in a
/// loop's body, as in region fission's loops over a block's threads, is fresh in each iteration.
void poison_locals(llvm::Module& m) {
  const llvm::DataLayout& dl = m.getDataLayout();
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    std::vector<llvm::IntrinsicInst*> starts;
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb)
        if (auto* ii = llvm::dyn_cast<llvm::IntrinsicInst>(&i);
            ii && ii->getIntrinsicID() == llvm::Intrinsic::lifetime_start)
          starts.push_back(ii);
    for (llvm::IntrinsicInst* s : starts) {
      auto* size = llvm::dyn_cast<llvm::ConstantInt>(s->getArgOperand(0));
      if (!size || size->isMinusOne() || size->isZero()) continue;
      llvm::IRBuilder<> b(s->getNextNode());
      b.CreateMemSet(s->getArgOperand(1), b.getInt8(0xFF), size->getZExtValue(), llvm::MaybeAlign());
    }
    llvm::BasicBlock& entry = f.getEntryBlock();
    std::vector<llvm::AllocaInst*> allocas;
    llvm::Instruction* after = nullptr;
    for (llvm::Instruction& i : entry) {
      auto* a = llvm::dyn_cast<llvm::AllocaInst>(&i);
      if (!a) break;
      after = a;
      if (a->isStaticAlloca()) allocas.push_back(a);
    }
    if (allocas.empty()) continue;
    llvm::IRBuilder<> b(after->getNextNode());
    for (llvm::AllocaInst* a : allocas) {
      auto size = a->getAllocationSizeInBits(dl);
      if (!size || size->isScalable() || size->getFixedSize() == 0) continue;
      b.CreateMemSet(a, b.getInt8(0xFF), size->getFixedSize() / 8, a->getAlign());
    }
  }
}

std::string encode_module(const CompiledModule& c) {
  PayloadWriter w;
  w.u64(kPayloadFormat);
  w.u64(c.kernels.size());
  for (const auto& [name, k] : c.kernels) {
    w.bytes(name);
    w.u64(k.params);
    w.u64(k.static_shared);
    w.u64(uint64_t{k.fibers} | uint64_t{k.block_loop} << 1 | uint64_t{k.one_thread} << 2 | uint64_t{k.plain_loop} << 3);
    w.u64(k.tile.w);
    w.u64(k.tile.h);
    w.bytes(k.unbatched_why);
    w.bytes(k.fibers_why);
  }
  w.u64(c.objects.size());
  for (const auto& o : c.objects) w.bytes(o->getBuffer());
  return w.take();
}

/// The payload back; "" and the module, or the reason it is not one (every read bounds-checked,
/// every object parsed as an object file for this host before the JIT sees it).
std::string decode_module(std::string_view payload, int id, CompiledModule* out) {
  PayloadReader r(payload);
  uint64_t format = 0, n = 0;
  if (!r.u64(&format) || format != kPayloadFormat) return "its payload is of another format";
  if (!r.u64(&n) || n > payload.size()) return "its payload is malformed";
  for (uint64_t i = 0; i < n; ++i) {
    CpuKernel k;
    uint64_t params = 0, shared = 0, flags = 0, w = 0, h = 0;
    if (!r.bytes(&k.name) || !r.u64(&params) || !r.u64(&shared) || !r.u64(&flags) || !r.u64(&w) || !r.u64(&h) ||
        !r.bytes(&k.unbatched_why) || !r.bytes(&k.fibers_why))
      return "its payload is malformed";
    if (k.name.empty() || params > 4096 || flags > 15 || w > 4096 || h > 4096 || out->kernels.count(k.name))
      return "its payload is malformed";
    k.module = id;
    k.params = static_cast<unsigned>(params);
    k.static_shared = shared;
    k.fibers = flags & 1;
    k.block_loop = flags & 2;
    k.one_thread = flags & 4;
    k.plain_loop = flags & 8;
    k.tile.w = static_cast<unsigned>(w);
    k.tile.h = static_cast<unsigned>(h);
    out->kernels[k.name] = k;
  }
  if (!r.u64(&n) || n == 0 || n > 1024) return "its payload is malformed";
  for (uint64_t i = 0; i < n; ++i) {
    std::string_view bytes;
    if (!r.bytes(&bytes)) return "its payload is malformed";
    auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(bytes.data(), bytes.size()),
                                                       "cached-module" + std::to_string(id));
    auto object = llvm::object::ObjectFile::createObjectFile(buffer->getMemBufferRef());
    if (!object) return "an object file in it does not parse: " + llvm_message(object.takeError());
    out->objects.push_back(std::move(buffer));
  }
  if (!r.at_end()) return "its payload is malformed";
  return "";
}

/// Everything that determines a module's machine code (compile_cache.h's key).
/// The triple, CPU and features clang and the code generator are given.
struct HostTarget {
  const std::string& triple;
  const std::string& cpu;
  const std::vector<std::string>& features;
  unsigned vector_lanes;
};

CacheKey module_key(const HostTarget& d, const std::string& source, const std::string& path,
                    const std::set<std::string>& one_thread, const std::map<std::string, BlockTile>& tiles,
                    const std::map<std::string, BlockShape>& blocks, bool rewrite, unsigned partitions,
                    bool poison) {
  CacheKey key;
  std::string features, threads, tiled, shaped, prelude;
  for (const std::string& f : d.features) features += f + ",";
  for (const std::string& k : one_thread) threads += k + ",";
  for (const auto& [k, t] : tiles) tiled += fmt::format("{}:{}x{},", k, t.w, t.h);
  for (const auto& [k, b] : blocks) shaped += fmt::format("{}:{}x{}x{},", k, b[0], b[1], b[2]);
  for (const auto& [name, text] : prelude_headers()) prelude += name + "\n" + text + "\n";
  const char* batch = std::getenv("KDFLOW_CPU_BATCH");
  key.add("format", "kdflow CPU compile cache 1")
      .add("kdflow", kdflow_build_id())
      .add("llvm", LLVM_VERSION_STRING)
      .add("clang", clang::getClangFullVersion())
      .add("triple", d.triple)
      .add("cpu", d.cpu)
      .add("features", features)
      .add("vector_lanes", std::to_string(d.vector_lanes))
      .add("partitions", std::to_string(partitions))
      .add("KDFLOW_CPU_FIBERS", rewrite ? "auto" : "all")
      .add("KDFLOW_CPU_BATCH", batch ? batch : "")
      .add("poison", poison ? "locals" : "")
      .add("one_thread", threads)
      .add("tiles", tiled)
      .add("blocks", shaped)
      .add("path", path)
      .add("prelude", prelude)
      .add("source", source);
  return key;
}

}  // namespace

/// The module's in-memory files: its source at `path` and the prelude's headers.
llvm::IntrusiveRefCntPtr<llvm::vfs::InMemoryFileSystem> module_files(const std::string& source,
                                                                      const std::string& path) {
  llvm::IntrusiveRefCntPtr<llvm::vfs::InMemoryFileSystem> fs(new llvm::vfs::InMemoryFileSystem);
  fs->addFile(path, 0, llvm::MemoryBuffer::getMemBufferCopy(source, path));
  for (const auto& [name, text] : prelude_headers())
    fs->addFile(std::string(kIncludeDir) + "/" + name, 0, llvm::MemoryBuffer::getMemBufferCopy(text, name));
  return fs;
}

/// Runs `action` on `source` as the CPU back end compiles it (host C++17, the prelude
/// force-included, over in-memory files only). False: clang failed (`diag` has the first
/// error; a private one when none is given).
Expected<bool> run_clang(const std::string& source, const std::string& path, const std::string& label,
                         const std::string& triple, const std::string& cpu, const std::vector<std::string>& features,
                         clang::FrontendAction& action, FirstError* diag = nullptr) {
  std::vector<std::string> args = {"-triple", triple, "-target-cpu", cpu, "-x", "c++", "-std=c++17", "-O2",
                                   "-disable-llvm-passes", "-fstack-clash-protection", "-ffp-contract=off", "-fno-threadsafe-statics",
                                   "-fno-rtti", "-nostdsysteminc", "-nobuiltininc", "-I", kIncludeDir, "-include",
                                   kPreludeName, "-ferror-limit", "1", "-w", "-mrelocation-model", "pic",
                                   "-pic-level", "2", "-fgnuc-version=4.2.1", path};
  // The host's own features: a CPU name LLVM 15 reads as an older one (Zen 4 as znver3) would
  // leave out its widest vectors.
  for (const std::string& f : features) args.insert(args.end() - 1, {"-target-feature", f});
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  FirstError own(path, label);
  FirstError& first = diag ? *diag : own;
  auto inv = std::make_shared<clang::CompilerInvocation>();
  {
    llvm::IntrusiveRefCntPtr<clang::DiagnosticIDs> ids(new clang::DiagnosticIDs);
    llvm::IntrusiveRefCntPtr<clang::DiagnosticOptions> opts(new clang::DiagnosticOptions);
    clang::DiagnosticsEngine engine(ids, opts, &first, /*ShouldOwnClient=*/false);
    if (!clang::CompilerInvocation::CreateFromArgs(*inv, argv, engine))
      return Error{file_error(label, "the CPU compiler's command line was refused: " + first.first()).message,
                   ExitCode::Software};
  }
  inv->getDiagnosticOpts().ShowCarets = false;  // no "N errors generated." on stderr
  clang::CompilerInstance ci;
  ci.setInvocation(inv);
  ci.createDiagnostics(&first, /*ShouldOwnClient=*/false);
  ci.createFileManager(module_files(source, path));
  return ci.ExecuteAction(action);
}

CpuDevice::CpuDevice() : impl_(std::make_unique<Impl>()) {}
CpuDevice::~CpuDevice() = default;

unsigned CpuDevice::threads() const { return impl_->pool->size(); }
std::string CpuDevice::running_blocks() const { return impl_->pool->running(); }

Expected<std::unique_ptr<CpuDevice>> CpuDevice::create(const CpuDeviceOptions& options) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  std::unique_ptr<CpuDevice> dev(new CpuDevice);
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    return Error{"error: cannot set up the CPU back end's JIT: " + llvm_message(jtmb.takeError()),
                 ExitCode::Unavailable};
  jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Default);
  // The host's CPU for both clang (function attributes) and the JIT's code generator; an
  // unknown one ("generic") as the architecture's baseline.
  std::string cpu = llvm::sys::getHostCPUName().str();
  if (cpu.empty() || cpu == "generic") cpu = jtmb->getTargetTriple().isX86() ? "x86-64" : "generic";
  jtmb->setCPU(cpu);
  dev->impl_->triple = jtmb->getTargetTriple().str();
  dev->impl_->cpu = cpu;
  for (const std::string& f : jtmb->getFeatures().getFeatures()) {
    if (f.size() < 2 || (f[0] != '+' && f[0] != '-')) continue;
    dev->impl_->features.push_back(f);
    if (f == "+avx512f") dev->impl_->vector_lanes = std::max(dev->impl_->vector_lanes, 16u);
    if (f == "+avx" || f == "+avx2") dev->impl_->vector_lanes = std::max(dev->impl_->vector_lanes, 8u);
  }
  dev->impl_->jtmb = std::make_unique<llvm::orc::JITTargetMachineBuilder>(*jtmb);
  auto tm = jtmb->createTargetMachine();
  if (!tm)
    return Error{"error: cannot set up the CPU back end's JIT: " + llvm_message(tm.takeError()),
                 ExitCode::Unavailable};
  dev->impl_->tm = std::move(*tm);
  // No platform (no initialisers, no atexit, no runtime of its own) and no generator: a
  // symbol resolves only if a module defines it or runtime_symbols() lists it.
  auto jit = llvm::orc::LLJITBuilder()
                 .setJITTargetMachineBuilder(std::move(*jtmb))
                 .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
                 .create();
  if (!jit)
    return Error{"error: cannot set up the CPU back end's JIT: " + llvm_message(jit.takeError()),
                 ExitCode::Unavailable};
  dev->impl_->jit = std::move(*jit);
  unsigned threads = options.threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  dev->impl_->poison = options.poison;
  dev->impl_->pool = std::make_unique<WorkerPool>(threads, options.poison);
  if (!options.cache_dir.empty()) dev->impl_->cache.emplace(options.cache_dir, options.cache_max_bytes);
  return dev;
}

/// Adds a module's objects to the JIT as a new dylib `name`, against the runtime's symbols
/// only, and links every kernel now (errors then belong to loading the module, not to the first
/// launch). On an error the dylib is removed again.
static Expected<llvm::orc::JITDylib*> link_module(llvm::orc::LLJIT& jit, const std::string& name,
                                                  std::vector<std::unique_ptr<llvm::MemoryBuffer>> objects,
                                                  std::map<std::string, CpuKernel>& infos, const std::string& label) {
  auto dylib = jit.getExecutionSession().createJITDylib(name);
  if (!dylib) return Error{file_error(label, "JIT: " + llvm_message(dylib.takeError())).message, ExitCode::Software};
  auto fail = [&](Error e) -> Expected<llvm::orc::JITDylib*> {
    llvm::consumeError(jit.getExecutionSession().removeJITDylib(*dylib));
    return e;
  };
  llvm::orc::SymbolMap symbols;
  for (const auto& [sym, addr] : runtime_symbols())
    symbols[jit.mangleAndIntern(sym)] =
        llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(addr), llvm::JITSymbolFlags::Exported);
  if (llvm::Error e = dylib->define(llvm::orc::absoluteSymbols(std::move(symbols))))
    return fail(Error{file_error(label, "JIT: " + llvm_message(std::move(e))).message, ExitCode::Software});
  for (auto& object : objects)
    if (llvm::Error e = jit.addObjectFile(*dylib, std::move(object)))
      return fail(Error{file_error(label, "JIT: " + llvm_message(std::move(e))).message, ExitCode::Software});
  for (auto& [kname, k] : infos) {
    auto sym = jit.lookup(*dylib, "__kdflow_entry_" + kname);
    if (!sym)
      return fail(Error{file_error(label, fmt::format("kernel '{}': the JIT could not link it: {}", kname,
                                                      llvm_message(sym.takeError())))
                            .message,
                        ExitCode::Unavailable});
    k.entry = sym->toPtr<void (*)(void**)>();
  }
  return &*dylib;
}

Expected<std::string> CpuDevice::rewritten_source(const std::string& source, const std::string& label,
                                                  const std::set<std::string>& one_thread,
                                                  const std::map<std::string, BlockTile>& tiles,
                                                  const std::map<std::string, BlockShape>& blocks) const {
  const Impl& d = *impl_;
  const std::string path = std::string(kSourceDir) + "/module" + std::to_string(d.modules.size()) + ".cc";
  FissionOutcome fission;
  FissionAction fa(one_thread, tiles, blocks, d.vector_lanes, &fission);
  Expected<bool> ran = run_clang(source, path, label, d.triple, d.cpu, d.features, fa);
  if (!ran) return ran.error();
  return fission.source;
}

Expected<int> CpuDevice::compile_module(const std::string& source, const std::string& label,
                                        const std::set<std::string>& one_thread,
                                        const std::map<std::string, BlockTile>& tiles,
                                        const std::map<std::string, BlockShape>& blocks) {
  Impl& d = *impl_;
  const int id = static_cast<int>(d.modules.size());
  const std::string path = std::string(kSourceDir) + "/module" + std::to_string(id) + ".cc";

  const char* fibers_knob = std::getenv("KDFLOW_CPU_FIBERS");
  const bool rewrite = !(fibers_knob && std::string(fibers_knob) == "all");
  const unsigned partitions = std::min(d.pool->size(), 8u);  // each partition parses the whole module again

  // The compile cache (compile_cache.h): a verified entry for this key is the module, nothing
  // parsed or compiled; an entry that fails verification or loading is removed and replaced.
  Impl::ModuleInfo info;
  std::optional<CacheKey> key;
  if (d.cache) {
    key = module_key(HostTarget{d.triple, d.cpu, d.features, d.vector_lanes}, source, path, one_thread, tiles,
                     blocks, rewrite, partitions, d.poison);
    info.origin.key = key->hex();
    std::string why;
    if (!d.cache->usable()) {
      info.origin.note = "the compile cache is not used: " + d.cache->why();
    } else if (std::optional<std::string> payload = d.cache->get(*key, &why)) {
      CompiledModule cached;
      why = decode_module(*payload, id, &cached);
      if (why.empty()) {
        auto dylib = link_module(*d.jit, "module" + std::to_string(id) + ".cached", std::move(cached.objects),
                                 cached.kernels, label);
        if (dylib) {
          info.dylib = *dylib;
          info.kernels = std::move(cached.kernels);
          info.origin.from_cache = true;
          d.modules.push_back(std::move(info));
          return id;
        }
        why = dylib.error().message;
      }
      why = d.cache->path(*key) + ": " + why;  // get()'s own reasons name the file already
    }
    if (!why.empty()) {
      info.origin.note = "cache entry ignored, compiled again and replaced: " + why;
      d.cache->remove(*key);
    }
  }

  // Region fission first (region_fission.h): a parse of the source whose consumer rewrites the
  // kernels that qualify; the rewritten source is what is compiled. KDFLOW_CPU_FIBERS=all (a
  // benchmark knob) keeps every kernel as it is.
  FissionOutcome fission;
  auto run_fission = [&](const std::map<std::string, BlockTile>& with_tiles) {
    fission = FissionOutcome{};
    FissionAction fa(one_thread, with_tiles, blocks, d.vector_lanes, &fission);
    run_clang(source, path, label, d.triple, d.cpu, d.features, fa);  // errors: the compile below reports them
    if (fission.source.empty()) fission.kernels.clear(), fission.plain.clear();
  };
  if (rewrite) run_fission(tiles);

  auto context = make_quiet_context();
  std::set<std::string> dynamic_names;
  std::unique_ptr<llvm::Module> m;
  bool ok = false;
  // The rewritten source first; should it not compile (a construct the rewrite got wrong), the
  // source as written, every kernel as before, the reason kept.
  for (int attempt = fission.kernels.empty() ? 1 : 0; attempt < 2; ++attempt) {
    const std::string& compiled = attempt == 0 ? fission.source : source;
    dynamic_names.clear();
    CompileAction action(context.get(), &dynamic_names);
    FirstError diag(path, label);
    Expected<bool> ran = run_clang(compiled, path, label, d.triple, d.cpu, d.features, action, &diag);
    if (!ran) return ran.error();
    if (attempt == 0 && (!*ran || !diag.first().empty()) && !fission.batched.empty()) {
      // Batches of blocks first to go: the rewrite again without them.
      const std::string why = "its rewrite into batches of blocks did not compile (" + diag.first() + ")";
      const std::map<std::string, BlockTile> batched = fission.batched;
      run_fission({});
      for (const auto& [k, tile] : batched) fission.unbatched[k] = why;
      attempt = fission.kernels.empty() ? 0 : -1;
      continue;
    }
    if (attempt == 0 && (!*ran || !diag.first().empty())) {
      for (const std::string& k : fission.kernels)
        fission.kept[k] = "its rewrite into thread loops did not compile (" + diag.first() + ")";
      fission.kernels.clear();
      fission.plain.clear();
      fission.one_thread.clear();
      fission.batched.clear();
      continue;
    }
    if (!diag.first().empty()) return Error{diag.first(), ExitCode::DataError};
    ok = *ran;
    m = action.takeModule();
    break;
  }
  if (!ok || !m) return Error{file_error(label, "clang could not compile the module for the CPU").message};

  // --poison: every local of fixed size starts as 0xFF bytes at each call (allocas are at the
  // function's entry), before the optimiser, which drops the fill wherever the code overwrites
  // it before reading: only a read of a local nothing wrote sees NaN (issue 52).
  if (d.poison) poison_locals(*m);

  // __shared__ → offsets into the block's shared memory.
  llvm::Function* ctx_fn = llvm::cast<llvm::Function>(
      m->getOrInsertFunction("__kdflow_ctx", llvm::FunctionType::get(llvm::PointerType::getUnqual(m->getContext()),
                                                                   false))
          .getCallee());
  ctx_fn->setDoesNotAccessMemory();
  ctx_fn->setDoesNotThrow();
  std::vector<llvm::GlobalVariable*> statics = take_shared_annotations(*m);
  uint64_t offset = 0;
  const llvm::DataLayout& dl = m->getDataLayout();
  std::vector<std::pair<llvm::GlobalVariable*, uint64_t>> placed;
  for (llvm::GlobalVariable* gv : statics) {
    uint64_t align = std::max<uint64_t>(gv->getAlign() ? gv->getAlign()->value() : 1,
                                        dl.getABITypeAlign(gv->getValueType()).value());
    offset = (offset + align - 1) / align * align;
    placed.emplace_back(gv, offset);
    offset += dl.getTypeAllocSize(gv->getValueType());
  }
  const uint64_t static_bytes = offset;
  const uint64_t dynamic_offset = (offset + kDynamicSharedAlign - 1) / kDynamicSharedAlign * kDynamicSharedAlign;
  for (const std::string& name : dynamic_names)
    if (llvm::GlobalVariable* gv = m->getNamedGlobal(name)) placed.emplace_back(gv, dynamic_offset);
  for (auto& [gv, off] : placed)
    if (Status s = replace_with_shared(*m, gv, off, ctx_fn, label); !s) return s.error();

  // Volatile accesses take turns across the warp's lanes (runtime.cpp, kdflow_warp_step):
  // pre-Volta TVM (0.8) reduces in shared memory through volatile pointers without barriers,
  // relying on a warp's lanes running in step.
  llvm::FunctionCallee step = m->getOrInsertFunction("__kdflow_warp_step", llvm::Type::getVoidTy(m->getContext()));
  // Kernels rewritten into thread loops (region fission) run no lanes in step: their volatile
  // accesses are casts of shared arrays that the rewrite checked need none.
  for (llvm::Function& f : *m) {
    if (f.isDeclaration()) continue;
    if (std::find(fission.kernels.begin(), fission.kernels.end(), f.getName().str()) != fission.kernels.end()) continue;
    std::vector<llvm::Instruction*> volatiles;
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb) {
        auto* ld = llvm::dyn_cast<llvm::LoadInst>(&i);
        auto* st = llvm::dyn_cast<llvm::StoreInst>(&i);
        if ((ld && ld->isVolatile()) || (st && st->isVolatile())) volatiles.push_back(&i);
      }
    for (llvm::Instruction* i : volatiles) llvm::CallInst::Create(step, "", i);
  }
  insert_warp_steps_for_shared(*m, ctx_fn, step, fission.kernels);

  // A wrapper per kernel: every defined function with C linkage outside the prelude.
  std::vector<llvm::Function*> kernels;
  for (llvm::Function& f : *m)
    if (!f.isDeclaration() && f.hasExternalLinkage() && !f.getName().startswith("_Z") &&
        !f.getName().startswith("__"))
      kernels.push_back(&f);
  std::map<std::string, CpuKernel> infos;
  llvm::LLVMContext& lc = m->getContext();
  for (llvm::Function* f : kernels) {
    if (!f->getReturnType()->isVoidTy()) continue;  // a __device__ helper with C linkage
    bool simple = true;
    for (llvm::Argument& a : f->args())
      if (a.hasByValAttr() || a.hasStructRetAttr() || a.hasInAllocaAttr()) simple = false;
    if (!simple) continue;
    llvm::Type* ptr = llvm::PointerType::getUnqual(lc);
    auto* wrapper = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(lc), {ptr}, false),
                                           llvm::GlobalValue::ExternalLinkage,
                                           "__kdflow_entry_" + f->getName().str(), *m);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(lc, "entry", wrapper));
    std::vector<llvm::Value*> values;
    for (llvm::Argument& a : f->args()) {
      llvm::Value* slot = b.CreateConstGEP1_64(ptr, wrapper->getArg(0), a.getArgNo());
      llvm::Value* p = b.CreateLoad(ptr, slot);
      values.push_back(b.CreateAlignedLoad(a.getType(), p, llvm::Align(1)));
    }
    b.CreateCall(f, values);
    b.CreateRetVoid();
    CpuKernel k;
    k.name = f->getName().str();
    k.module = id;
    k.params = static_cast<unsigned>(f->arg_size());
    k.static_shared = static_bytes;
    infos[k.name] = k;
  }
  if (llvm::verifyModule(*m, &llvm::nulls()))
    return Error{file_error(label, "the module's IR for the CPU does not verify (a kdflow bug)").message,
                 ExitCode::Software};

  // -O2 and machine code for the host CPU, the kernels spread over the worker threads.
  m->setDataLayout(d.tm->createDataLayout());
  m->setTargetTriple(d.triple);
  CodegenJob job;
  for (const auto& [name, addr] : runtime_symbols()) job.allowed.insert(name);
  for (const auto& [name, k] : infos) job.entries.push_back("__kdflow_entry_" + name);
  job.threads = partitions;
  job.label = label;
  std::mutex inspected;
  job.inspect = [&](llvm::Function& w) {
    const std::string name = w.getName().str().substr(std::strlen("__kdflow_entry_"));
    const bool block_loop = std::find(fission.kernels.begin(), fission.kernels.end(), name) != fission.kernels.end();
    std::set<llvm::Function*> seen;
    const bool fibers = reaches_collective(&w, seen, block_loop);
    std::lock_guard<std::mutex> lock(inspected);
    infos[name].fibers = fibers;
  };
  auto objects = optimise_and_compile(std::move(m), std::move(context), *d.jtmb, job);
  if (!objects) return objects.error();
  for (auto& [name, k] : infos) {
    k.block_loop = std::find(fission.kernels.begin(), fission.kernels.end(), name) != fission.kernels.end();
    if (auto kept = fission.kept.find(name); kept != fission.kept.end()) k.fibers_why = kept->second;
    k.one_thread = std::find(fission.one_thread.begin(), fission.one_thread.end(), name) != fission.one_thread.end();
    k.plain_loop = std::find(fission.plain.begin(), fission.plain.end(), name) != fission.plain.end();
    if (auto b = fission.batched.find(name); b != fission.batched.end()) k.tile = b->second;
    if (auto u = fission.unbatched.find(name); u != fission.unbatched.end()) k.unbatched_why = u->second;
    if (k.block_loop && k.fibers)
      return Error{file_error(label, fmt::format("kernel '{}': rewritten as thread loops, it still synchronises (a "
                                                 "kdflow bug)",
                                                 name)).message,
                   ExitCode::Software};
  }

  // The entry's bytes are taken before linking (the JIT takes the objects, and the kernels'
  // entries are still unset); it is stored once the module has linked.
  std::string payload;
  if (key && d.cache->usable()) {
    CompiledModule compiled;
    compiled.objects = std::move(*objects);
    compiled.kernels = infos;
    payload = encode_module(compiled);
    *objects = std::move(compiled.objects);
  }
  auto dylib = link_module(*d.jit, "module" + std::to_string(id), std::move(*objects), infos, label);
  if (!dylib) return dylib.error();
  if (!payload.empty()) {
    std::string failed = d.cache->put(*key, payload);
    if (failed.empty()) {
      info.origin.stored = true;
    } else {
      if (!info.origin.note.empty()) info.origin.note += "; ";
      info.origin.note += "not stored in the compile cache: " + failed;
    }
  }
  info.dylib = *dylib;
  info.kernels = std::move(infos);
  d.modules.push_back(std::move(info));
  return id;
}

CpuModuleOrigin CpuDevice::origin(int module) const {
  if (module < 0 || static_cast<size_t>(module) >= impl_->modules.size()) return {};
  return impl_->modules[module].origin;
}

unsigned CpuDevice::vector_lanes() const { return impl_->vector_lanes; }

std::vector<CpuKernel> CpuDevice::kernels(int module) const {
  std::vector<CpuKernel> out;
  if (module < 0 || static_cast<size_t>(module) >= impl_->modules.size()) return out;
  for (const auto& [name, k] : impl_->modules[module].kernels) out.push_back(k);
  return out;
}

bool CpuDevice::has_kernel(int module, const std::string& name) const {
  if (module < 0 || static_cast<size_t>(module) >= impl_->modules.size()) return false;
  return impl_->modules[module].kernels.count(name) > 0;
}

Expected<CpuKernel> CpuDevice::kernel(int module, const std::string& name) {
  Impl& d = *impl_;
  if (module < 0 || static_cast<size_t>(module) >= d.modules.size())
    return Error{fmt::format("error: no CPU module {} (a kdflow bug)", module), ExitCode::Software};
  Impl::ModuleInfo& info = d.modules[module];
  auto it = info.kernels.find(name);
  if (it == info.kernels.end())
    return Error{fmt::format("error: kernel '{}' is not a function of the compiled device module", name)};
  if (!it->second.entry) {
    auto sym = d.jit->lookup(*info.dylib, "__kdflow_entry_" + name);
    if (!sym)
      return Error{fmt::format("error: kernel '{}': the JIT could not link it: {}", name,
                               llvm_message(sym.takeError())),
                   ExitCode::Unavailable};
    it->second.entry = sym->toPtr<void (*)(void**)>();
  }
  return it->second;
}

Status CpuDevice::launch(const CpuKernel& k, const std::array<uint32_t, 3>& grid,
                         const std::array<uint32_t, 3>& block, uint64_t dynamic_shared, void** args) {
  LaunchShape shape;
  shape.grid = Uint3{grid[0], grid[1], grid[2]};
  shape.block = Uint3{block[0], block[1], block[2]};
  if (!k.entry) return Error{"error: kernel '" + k.name + "' was not linked (a kdflow bug)", ExitCode::Software};
  for (uint32_t v : grid)
    if (v == 0) return Error{"error: kernel '" + k.name + "': a grid dimension is 0"};
  for (uint32_t v : block)
    if (v == 0) return Error{"error: kernel '" + k.name + "': a block dimension is 0"};
  uint64_t static_end = (k.static_shared + kDynamicSharedAlign - 1) / kDynamicSharedAlign * kDynamicSharedAlign;
  shape.shared_bytes = static_end + dynamic_shared;
  shape.fibers = k.fibers;
  shape.block_loop = k.block_loop;
  if (k.tile.w) {
    if (grid[0] % k.tile.w || grid[1] % k.tile.h || uint64_t{block[0]} * block[1] * block[2] != 1)
      return Error{fmt::format("error: kernel '{}': compiled for batches of {}x{} one-thread blocks, launched with "
                               "grid ({},{},{}) and block ({},{},{}) (a kdflow bug)",
                               k.name, k.tile.w, k.tile.h, grid[0], grid[1], grid[2], block[0], block[1], block[2]),
                   ExitCode::Software};
    shape.tile_w = k.tile.w;
    shape.tile_h = k.tile.h;
  }
  std::string why = impl_->pool->run(k.entry, args, shape);
  if (!why.empty()) return Error{"error: kernel '" + k.name + "' stopped on the CPU: " + why, ExitCode::DataError};
  return Status::ok();
}

}  // namespace kdflow::cpu
