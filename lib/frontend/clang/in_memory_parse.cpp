// in_memory_parse.cpp — a ToolInvocation over an InMemoryFileSystem (see in_memory_parse.h).
#include "in_memory_parse.h"

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/FileManager.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/VirtualFileSystem.h>

#include "host_headers.h"
#include <clang/AST/Attr.h>
#include <clang/AST/Decl.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>

namespace kdflow::detail {

namespace {

using namespace clang;

/// Keeps the first error as `file:line:col: error: msg`, the virtual file renamed to its label.
class FirstErrorConsumer : public DiagnosticConsumer {
 public:
  FirstErrorConsumer(std::string virtual_path, std::string label)
      : virtual_path_(std::move(virtual_path)), label_(std::move(label)) {}
  void HandleDiagnostic(DiagnosticsEngine::Level level, const Diagnostic& info) override {
    DiagnosticConsumer::HandleDiagnostic(level, info);
    if (level < DiagnosticsEngine::Error) return;
    fatal_ |= level == DiagnosticsEngine::Fatal;
    if (!first_.empty() && !keep_all_) return;
    llvm::SmallString<256> text;
    info.FormatDiagnostic(text);
    SourceLoc l;
    l.file = label_;
    if (info.hasSourceManager() && info.getLocation().isValid()) {
      const SourceManager& sm = info.getSourceManager();
      PresumedLoc p = sm.getPresumedLoc(keep_all_ ? sm.getExpansionLoc(info.getLocation()) : info.getLocation());
      if (p.isValid()) {
        l.file = p.getFilename() == virtual_path_ ? label_ : std::string(p.getFilename());
        l.line = p.getLine();
        l.col = p.getColumn();
      }
    }
    std::string line = l.valid() ? source_error(l.file, l.line, l.col, text.str().str()).message
                                 : file_error(l.file, text.str().str()).message;
    if (first_.empty()) first_ = line;
    if (keep_all_) all_.push_back({l, std::move(line)});
  }
  const std::string& first() const { return first_; }
  bool fatal() const { return fatal_; }
  void keep_all() { keep_all_ = true; }
  std::vector<ParseError> take_all() { return std::move(all_); }

 private:
  std::string virtual_path_, label_, first_;
  bool keep_all_ = false, fatal_ = false;
  std::vector<ParseError> all_;
};

class AstBuilder : public tooling::ToolAction {
 public:
  std::unique_ptr<ASTUnit> unit;
  bool runInvocation(std::shared_ptr<CompilerInvocation> inv, FileManager* files,
                     std::shared_ptr<PCHContainerOperations> pch, DiagnosticConsumer* diag) override {
    unit = ASTUnit::LoadFromCompilerInvocation(
        inv, std::move(pch),
        CompilerInstance::createDiagnostics(&inv->getDiagnosticOpts(), diag, /*ShouldOwnClient=*/false), files);
    return unit != nullptr;
  }
};

/// Preprocesses the file alone and counts the tokens of its expanded stream, stopping at
/// the budget: `#define a1 a0 a0` ... `a40` expands to 2^40 tokens, which clang would
/// lex for hours. Lexing is lazy (one token per Lex), so the count bounds the work.
/// Diagnostics are ignored here: the real parse reports them, in its own order.
struct TokenBudget {
  uint64_t limit = 0;
  uint64_t tokens = 0;
  bool exceeded = false;
  SourceLoc where;  ///< the expansion that went over
};

class TokenCountAction : public PreprocessorFrontendAction {
 public:
  TokenCountAction(TokenBudget* budget, const InMemorySource* src) : budget_(budget), src_(src) {}

 protected:
  void ExecuteAction() override {
    Preprocessor& pp = getCompilerInstance().getPreprocessor();
    pp.IgnorePragmas();
    pp.EnterMainSourceFile();
    Token tok;
    do {
      pp.Lex(tok);
      if (++budget_->tokens > budget_->limit) {
        budget_->exceeded = true;
        budget_->where = presumed_loc(pp.getSourceManager(), tok.getLocation(), src_->virtual_path, src_->label);
        return;
      }
    } while (tok.isNot(tok::eof));
  }

 private:
  TokenBudget* budget_;
  const InMemorySource* src_;
};

class TokenCountFactory : public tooling::FrontendActionFactory {
 public:
  TokenCountFactory(TokenBudget* budget, const InMemorySource* src) : budget_(budget), src_(src) {}
  std::unique_ptr<FrontendAction> create() override { return std::make_unique<TokenCountAction>(budget_, src_); }

 private:
  TokenBudget* budget_;
  const InMemorySource* src_;
};

}  // namespace

namespace {

Expected<RecoveredParse> parse_impl(const InMemorySource& src, const std::vector<std::string>& clang_args,
                                    bool recover) {
  // Only in-memory files: the analyzed code cannot make clang read the real file system.
  llvm::IntrusiveRefCntPtr<llvm::vfs::InMemoryFileSystem> fs(new llvm::vfs::InMemoryFileSystem);
  fs->addFile(src.virtual_path, 0, llvm::MemoryBuffer::getMemBufferCopy(src.text, src.virtual_path));
  if (src.headers)
    for (const auto& [path, text] : *src.headers)
      fs->addFile(std::string(kStubIncludeDir) + "/" + path, 0, llvm::MemoryBuffer::getMemBufferCopy(text, path));
  fs->setCurrentWorkingDirectory(kVirtualInputDir);
  llvm::IntrusiveRefCntPtr<FileManager> files(new FileManager(FileSystemOptions(), fs));

  std::vector<std::string> args = clang_args;
  args.push_back(src.virtual_path);

  if (src.tokens_per_byte > 0) {
    TokenBudget budget;
    budget.limit = InMemorySource::kHeaderTokens + src.tokens_per_byte * static_cast<uint64_t>(src.text.size());
    TokenCountFactory counter(&budget, &src);
    IgnoringDiagConsumer quiet;
    tooling::ToolInvocation pre(args, &counter, files.get(), std::make_shared<PCHContainerOperations>());
    pre.setDiagnosticConsumer(&quiet);
    pre.run();
    if (budget.exceeded) {
      std::string msg = "macro expansion makes more than " + std::to_string(budget.limit) +
                        " tokens (100 per byte of the file), which no TVM output does (a hostile or broken file?)";
      return Error{budget.where.valid() ? source_error(budget.where.file, budget.where.line, budget.where.col, msg).message
                                        : file_error(src.label, msg).message,
                   ExitCode::DataError};
    }
  }

  AstBuilder builder;
  FirstErrorConsumer diags(src.virtual_path, src.label);
  if (recover) diags.keep_all();
  tooling::ToolInvocation invocation(args, &builder, files.get(), std::make_shared<PCHContainerOperations>());
  invocation.setDiagnosticConsumer(&diags);
  bool ok = invocation.run();
  if (!diags.first().empty() && (!recover || diags.fatal())) return Error{diags.first(), ExitCode::DataError};
  if (!builder.unit || (!ok && diags.first().empty()))
    return Error{file_error(src.label, "clang could not parse the file").message, ExitCode::DataError};
  RecoveredParse out;
  out.unit = std::move(builder.unit);
  out.errors = diags.take_all();
  return out;
}

}  // namespace

Expected<std::unique_ptr<ASTUnit>> parse_in_memory(const InMemorySource& src, const std::vector<std::string>& clang_args) {
  Expected<RecoveredParse> p = parse_impl(src, clang_args, false);
  if (!p) return p.error();
  return std::move(p->unit);
}

Expected<RecoveredParse> parse_in_memory_recovering(const InMemorySource& src,
                                                    const std::vector<std::string>& clang_args) {
  return parse_impl(src, clang_args, true);
}

SourceLoc presumed_loc(const SourceManager& sm, SourceLocation loc, const std::string& virtual_path,
                       const std::string& label) {
  SourceLoc out;
  out.file = label;
  if (loc.isInvalid()) return out;
  PresumedLoc p = sm.getPresumedLoc(sm.getExpansionLoc(loc));
  if (p.isInvalid()) return out;
  out.file = p.getFilename() == virtual_path ? label : std::string(p.getFilename());
  out.line = p.getLine();
  out.col = p.getColumn();
  return out;
}

void collect_cuda_kernels(const clang::DeclContext* dc, std::vector<const clang::FunctionDecl*>& out) {
  using namespace clang;
  for (const Decl* d : dc->decls()) {
    if (const auto* fd = dyn_cast<FunctionDecl>(d)) {
      if (fd->hasAttr<CUDAGlobalAttr>() && fd->doesThisDeclarationHaveABody()) out.push_back(fd);
    } else if (const auto* ft = dyn_cast<FunctionTemplateDecl>(d)) {
      for (const FunctionDecl* spec : ft->specializations())
        if (spec->hasAttr<CUDAGlobalAttr>() && spec->hasBody()) out.push_back(spec);
    } else if (isa<LinkageSpecDecl, NamespaceDecl, ExportDecl>(d)) {
      collect_cuda_kernels(cast<DeclContext>(d), out);
    }
  }
}

}  // namespace kdflow::detail
