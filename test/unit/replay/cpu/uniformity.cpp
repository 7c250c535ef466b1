// Uniformity (lib/replay/cpu/uniformity.h), the analysis region fission asks which loop and if
// headers are the same for every thread of a block: hand-written C++, one construct each, parsed
// with clang in memory (a few lines stand in for the CPU prelude's threadIdx and blockIdx). Its
// effect on real TVM kernels is checked by region fission's tests and test/tvm.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include <clang/AST/ASTContext.h>
#include <clang/AST/ParentMap.h>
#include <clang/AST/Stmt.h>

#include "frontend/clang/in_memory_parse.h"
#include "replay/cpu/uniformity.h"

namespace {

using namespace clang;

const char* kPrelude = R"(
struct uint3 { unsigned x, y, z; };
struct Ctx { uint3 thread_idx, block_idx; };
const Ctx* __kdflow_ctx();
#define threadIdx (__kdflow_ctx()->thread_idx)
#define blockIdx (__kdflow_ctx()->block_idx)
)";

/// The conditions of the `for` loops of kernel `k` in `body` (in source order), each with
/// whether Uniformity finds it uniform.
std::vector<bool> loop_conditions_uniform(const std::string& body) {
  kdflow::detail::InMemorySource src{std::string(kPrelude) + body, "hand.cc", "/hand.cc", nullptr};
  auto unit = kdflow::detail::parse_in_memory(
      src, {"clang", "-fsyntax-only", "-x", "c++", "-std=c++17", "-target", "x86_64-unknown-linux-gnu", "-nostdinc", "-w"});
  INFO((unit ? std::string() : unit.error().message));
  REQUIRE(unit);
  const FunctionDecl* k = nullptr;
  for (const Decl* d : (*unit)->getASTContext().getTranslationUnitDecl()->decls())
    if (const auto* f = dyn_cast<FunctionDecl>(d); f && f->getNameAsString() == "k" && f->hasBody()) k = f;
  REQUIRE(k);
  ParentMap pm(k->getBody());
  kdflow::cpu::Uniformity u(k->getBody(), pm);
  u.find_locals();
  std::vector<bool> out;
  std::function<void(const Stmt*)> look = [&](const Stmt* s) {
    if (!s) return;
    if (const auto* f = dyn_cast<ForStmt>(s)) out.push_back(u.uniform(f->getCond()));
    for (const Stmt* c : s->children()) look(c);
  };
  look(k->getBody());
  return out;
}

}  // namespace

TEST_CASE("uniformity: a bound read through the block's index into a local is uniform, through threadIdx not",
          "[cpu][uniformity]") {
  CHECK(loop_conditions_uniform(R"(
void k(int* n, float* x) {
  int len[1];
  int a = n[blockIdx.x];
  int b = n[blockIdx.x + 1];
  int c;
  if (a != b) { c = b - a; } else { c = 0; }
  len[0] = c;
  for (int i = 0; i < len[0]; ++i) x[i] = 0.0f;
  int t[1];
  t[0] = n[threadIdx.x];
  for (int i = 0; i < t[0]; ++i) x[i] = 0.0f;
})") == std::vector<bool>{true, false});
}

TEST_CASE("uniformity: a local assigned under a thread-dependent condition, or through its address, is not",
          "[cpu][uniformity]") {
  CHECK(loop_conditions_uniform(R"(
void set(int* p);
void k(int* n, float* x) {
  int a = n[0];
  if (threadIdx.x < 4) { a = a + 1; }
  for (int i = 0; i < a; ++i) x[i] = 0.0f;
  int b = n[0];
  set(&b);
  for (int i = 0; i < b; ++i) x[i] = 0.0f;
  int c = n[0];
  int d = c * 2;
  for (int i = 0; i < d; ++i) x[i] = 0.0f;
})") == std::vector<bool>{false, false, true});
}

TEST_CASE("uniformity: a loop left by a break keeps its writes uniform only when the break's guard is",
          "[cpu][uniformity]") {
  CHECK(loop_conditions_uniform(R"(
void k(int* n, float* x) {
  int tile[1];
  tile[0] = (int)blockIdx.x;
  while (1) {
    if (!(n[0] <= tile[0])) { break; }
    tile[0] = tile[0] - n[0];
  }
  for (int i = 0; i < tile[0]; ++i) x[i] = 0.0f;
  int lane[1];
  lane[0] = 0;
  while (1) {
    if ((int)threadIdx.x < lane[0]) { break; }
    lane[0] = lane[0] + 1;
  }
  for (int i = 0; i < lane[0]; ++i) x[i] = 0.0f;
})") == std::vector<bool>{true, false});
}

TEST_CASE("uniformity: non-uniformity travels through a chain of locals", "[cpu][uniformity]") {
  // Each local is assigned from the one before: threadIdx at the far end makes every one of them
  // (and the loop bound) non-uniform; blockIdx at the far end, none.
  std::string chain_t = "  int v0 = (int)threadIdx.x;\n", chain_b = "  int v0 = (int)blockIdx.x;\n";
  for (int i = 1; i < 200; ++i) {
    chain_t += "  int v" + std::to_string(i) + " = v" + std::to_string(i - 1) + " + 1;\n";
    chain_b += "  int v" + std::to_string(i) + " = v" + std::to_string(i - 1) + " + 1;\n";
  }
  const std::string loop = "  for (int i = 0; i < v199; ++i) x[i] = 0.0f;\n";
  CHECK(loop_conditions_uniform("void k(float* x) {\n" + chain_t + loop + "}\n") == std::vector<bool>{false});
  CHECK(loop_conditions_uniform("void k(float* x) {\n" + chain_b + loop + "}\n") == std::vector<bool>{true});
}
