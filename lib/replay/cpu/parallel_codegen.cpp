// parallel_codegen.cpp — see parallel_codegen.h.
#include "parallel_codegen.h"

#include <algorithm>
#include <thread>

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/IR/DiagnosticHandler.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/Instructions.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <fmt/format.h>

namespace kdflow::cpu {

namespace {

/// LLVM's diagnostics other than errors unsaid: a loop region fission asks to vectorise that
/// the vectoriser cannot (a call in it) is no news to the user.
struct QuietDiagnostics : llvm::DiagnosticHandler {
  bool handleDiagnostics(const llvm::DiagnosticInfo& d) override { return d.getSeverity() != llvm::DS_Error; }
};

std::string message(llvm::Error e) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << e;
  return os.str();
}

void optimise(llvm::Module& m, llvm::TargetMachine& tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  // No loop unrolling: on the samples it tripled the compile (resnet18 0.45 -> 1.53 s, mlp
  // 0.39 -> 1.37 s) for 0-15% of kernel time (squeezenet ran faster without), and a replay
  // compiles once for a few runs.
  pto.LoopUnrolling = false;
  pto.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
  mpm.run(m, mam);
}

/// What the optimised code still refers to must be an allowed function: "" or the error line.
std::string check_externals(llvm::Module& m, const CodegenJob& job) {
  for (llvm::Function& f : m)
    if (f.isDeclaration() && !f.isIntrinsic() && !f.use_empty() && !job.allowed.count(f.getName().str()))
      return file_error(job.label, fmt::format("the module calls '{}', which the CPU back end does not provide",
                                               f.getName().str()))
          .message;
  for (llvm::GlobalVariable& g : m.globals())
    if (g.isDeclaration() && !g.use_empty())
      return file_error(job.label, fmt::format("the module refers to the external variable '{}', which the CPU back "
                                               "end does not provide",
                                               g.getName().str()))
          .message;
  return "";
}

/// Instructions of an entry and of the functions it calls directly (its kernel): the weight
/// by which entries are spread over partitions.
size_t weight(llvm::Function& entry) {
  size_t n = 0;
  for (llvm::BasicBlock& bb : entry)
    for (llvm::Instruction& i : bb) {
      ++n;
      if (auto* c = llvm::dyn_cast<llvm::CallBase>(&i))
        if (llvm::Function* f = c->getCalledFunction(); f && !f->isDeclaration())
          for (llvm::BasicBlock& b2 : *f) n += b2.size();
    }
  return n;
}

struct Part {
  std::unique_ptr<llvm::LLVMContext> context;  // first: outlives the module
  std::unique_ptr<llvm::Module> module;
  std::set<std::string> entries;  ///< empty: the whole module (every entry of the job stays visible)
  std::unique_ptr<llvm::MemoryBuffer> object;
  std::string error;
  ExitCode code = ExitCode::Software;
};

void run_part(Part& p, llvm::StringRef bitcode, const llvm::orc::JITTargetMachineBuilder& jtmb, const CodegenJob& job) {
  if (!p.module) {
    p.context = make_quiet_context();
    auto m = llvm::parseBitcodeFile(llvm::MemoryBufferRef(bitcode, "module"), *p.context);
    if (!m) {
      p.error = file_error(job.label, "JIT: a partition of the module: " + message(m.takeError())).message;
      return;
    }
    p.module = std::move(*m);
  }
  llvm::orc::JITTargetMachineBuilder builder = jtmb;  // its own target machine per thread
  auto tm = builder.createTargetMachine();
  if (!tm) {
    p.error = file_error(job.label, "JIT: " + message(tm.takeError())).message;
    return;
  }
  // Only the entries stay visible, in a partition and in a module compiled whole alike: a
  // kernel inlined into its entry is then not also compiled on its own (resnet18 whole, one
  // thread: code generation 0.58 -> 0.38 s of CPU time, the same outputs).
  const std::set<std::string> all(job.entries.begin(), job.entries.end());
  const std::set<std::string>& visible = p.entries.empty() ? all : p.entries;
  for (llvm::Function& f : *p.module)
    if (!f.isDeclaration() && !visible.count(f.getName().str())) f.setLinkage(llvm::GlobalValue::InternalLinkage);
  for (llvm::GlobalVariable& g : p.module->globals())
    if (!g.isDeclaration()) g.setLinkage(llvm::GlobalValue::InternalLinkage);
  optimise(*p.module, **tm);
  if (p.error = check_externals(*p.module, job); !p.error.empty()) {
    p.code = ExitCode::Unavailable;
    return;
  }
  if (job.inspect)
    for (const std::string& e : job.entries)
      if (llvm::Function* f = p.module->getFunction(e); f && !f->isDeclaration()) job.inspect(*f);
  llvm::orc::SimpleCompiler compile(**tm);
  auto object = compile(*p.module);
  if (!object) {
    p.error = file_error(job.label, "JIT: " + message(object.takeError())).message;
    return;
  }
  p.object = std::move(*object);
}

}  // namespace

std::unique_ptr<llvm::LLVMContext> make_quiet_context() {
  auto c = std::make_unique<llvm::LLVMContext>();
  c->setDiagnosticHandler(std::make_unique<QuietDiagnostics>());
  return c;
}

Expected<std::vector<std::unique_ptr<llvm::MemoryBuffer>>> optimise_and_compile(
    std::unique_ptr<llvm::Module> m, std::unique_ptr<llvm::LLVMContext> context,
    const llvm::orc::JITTargetMachineBuilder& jtmb, const CodegenJob& job) {
  size_t n = std::min<size_t>(std::max(job.threads, 1u), job.entries.size());
  // A mutable global is one instance every kernel shares: not to be copied per partition.
  for (llvm::GlobalVariable& g : m->globals())
    if (!g.isDeclaration() && !g.isConstant()) n = 1;
  std::vector<Part> parts(std::max<size_t>(n, 1));
  llvm::SmallVector<char, 0> bitcode;
  if (parts.size() == 1) {
    parts[0].context = std::move(context);
    parts[0].module = std::move(m);
  } else {
    // The heaviest entries first, each to the lightest partition.
    std::vector<std::pair<size_t, std::string>> sized;
    for (const std::string& e : job.entries)
      if (llvm::Function* f = m->getFunction(e); f && !f->isDeclaration()) sized.emplace_back(weight(*f), e);
    std::sort(sized.begin(), sized.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    std::vector<size_t> load(parts.size(), 0);
    for (const auto& [w, e] : sized) {
      const size_t p = std::min_element(load.begin(), load.end()) - load.begin();
      parts[p].entries.insert(e);
      load[p] += w + 1;
    }
    llvm::raw_svector_ostream os(bitcode);
    llvm::WriteBitcodeToFile(*m, os);
    m.reset();
    context.reset();
  }
  const llvm::StringRef text(bitcode.data(), bitcode.size());
  std::vector<std::thread> threads;
  for (size_t p = 1; p < parts.size(); ++p)
    threads.emplace_back([&, p] { run_part(parts[p], text, jtmb, job); });
  run_part(parts[0], text, jtmb, job);
  for (std::thread& t : threads) t.join();
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> objects;
  for (Part& p : parts) {
    if (!p.error.empty()) return Error{p.error, p.code};
    objects.push_back(std::move(p.object));
  }
  return objects;
}

}  // namespace kdflow::cpu
