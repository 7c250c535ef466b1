// Unit tests: the CPU back end's kernel safety check (lib/replay/cpu/kernel_safety.h).
// Every real sample's device source passes; hand-written hostile kernels (labelled as such,
// one construct each) are refused with the exact line.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "kdflow/frontend/device_analyzer.h"
#include "replay/cpu/kernel_safety.h"
#include "test_util.h"

using namespace kdflow;
namespace fs = std::filesystem;

namespace {

/// Every real device source: samples/*/device*.cu and ../shared/samples/*/device*.cu.
std::vector<std::string> real_device_sources() {
  std::vector<std::string> out;
  std::vector<std::string> roots = {test::source_dir() + "/samples"};
  std::string shared = test::shared_sample_dir("mlp");
  if (!shared.empty()) roots.push_back(fs::path(shared).parent_path().string());
  for (const std::string& root : roots)
    for (const auto& dir : fs::directory_iterator(root)) {
      if (!dir.is_directory()) continue;
      for (const auto& f : fs::directory_iterator(dir.path())) {
        std::string name = f.path().filename().string();
        if (name.rfind("device", 0) == 0 && f.path().extension() == ".cu") out.push_back(f.path().string());
      }
    }
  std::sort(out.begin(), out.end());
  return out;
}

/// The first refusal's line for a hand-written source.
std::string first_refusal(const std::string& source) {
  auto r = cpu::check_kernel_safety(source, "hostile.cu");
  REQUIRE(r);
  REQUIRE_FALSE(r->safe());
  Status s = r->status();
  REQUIRE_FALSE(s);
  CHECK(s.error().code == ExitCode::Unavailable);
  return s.error().message;
}

}  // namespace

TEST_CASE("every real sample's device source passes the CPU safety check", "[cpu][safety]") {
  std::vector<std::string> files = real_device_sources();
  REQUIRE(files.size() >= 11);  // the bundled samples alone
  if (test::shared_sample_dir("mlp").empty())
    WARN("SKIPPED: ../shared/samples is absent; only the bundled samples were checked");
  std::set<std::string> used;
  size_t kernels = 0;
  for (const std::string& path : files) {
    INFO(path);
    std::string text = test::slurp(path);
    auto r = cpu::check_kernel_safety(text, path);
    REQUIRE(r);
    for (const cpu::SafetyRefusal& x : r->refusals) UNSCOPED_INFO(x.line);
    CHECK(r->safe());
    // The same kernels the device analyzer finds (extract's view of the file).
    // (Where extract can read the file: TVM 0.21+ sources include <type_traits> and <cuda.h>,
    // which this check stands in for itself.)
    auto dev = analyze_device_source(text, path);
    if (dev) {
      REQUIRE(r->kernels.size() == dev->functions.size());
      for (size_t i = 0; i < r->kernels.size(); ++i) CHECK(r->kernels[i] == dev->functions[i].name);
    } else {
      CHECK(!r->kernels.empty());
    }
    kernels += r->kernels.size();
    used.insert(r->builtins_used.begin(), r->builtins_used.end());
  }
  CHECK(kernels > 100);
  // What TVM's kernels call, as the samples show it: the prelude must provide these.
  for (const char* name : {"threadIdx", "blockIdx", "__syncthreads", "__shfl_down_sync", "__activemask", "__expf",
                           "max", "min", "make_float2", "make_longlong2", "__float2half_rn", "__half"})
    CHECK(used.count(name));
  for (const std::string& n : used) {
    bool in_table = false;
    for (const cpu::CpuBuiltinGroup& g : cpu::cpu_prelude_builtins())
      in_table |= std::find(g.names.begin(), g.names.end(), n) != g.names.end();
    CHECK(in_table);
  }
  std::string list;
  for (const std::string& n : used) list += n + " ";
  WARN("prelude built-ins the real samples use: " << list);
}

// Hand-written kernels below: one hostile construct each.

TEST_CASE("hand-written: a kernel calling system() is refused", "[cpu][safety]") {
  const char* src =
      "extern \"C\" int system(const char* cmd);\n"
      "extern \"C\" __global__ void evil(float* out) {\n"
      "  out[threadIdx.x] = 1.0f;\n"
      "  system(\"touch /tmp/pwned\");\n"
      "}\n";
  CHECK(first_refusal(src) ==
        "hostile.cu:4:3: error: kernel 'evil' cannot run on the CPU: it calls 'system', which is neither a CUDA "
        "built-in of the CPU back end nor a __device__ function the module defines (a host or library function)");
}

TEST_CASE("hand-written: system() declared __device__ to get past clang is refused too", "[cpu][safety]") {
  const char* src =
      "extern \"C\" __device__ int system(const char* cmd);\n"
      "__device__ void helper() { system(\"id\"); }\n"
      "extern \"C\" __global__ void evil(float* out) { helper(); out[0] = 0.0f; }\n";
  CHECK(first_refusal(src) ==
        "hostile.cu:2:28: error: kernel 'evil' (in 'helper', which it calls) cannot run on the CPU: it calls 'system', "
        "which is neither a CUDA built-in of the CPU back end nor a __device__ function the module defines (a host or "
        "library function)");
}

TEST_CASE("hand-written: inline assembly is refused", "[cpu][safety]") {
  const char* src =
      "extern \"C\" __global__ void evil(int* out) {\n"
      "  int r;\n"
      "  asm volatile(\"mov.u32 %0, %%laneid;\" : \"=r\"(r));\n"
      "  out[threadIdx.x] = r;\n"
      "}\n";
  CHECK(first_refusal(src) == "hostile.cu:3:3: error: kernel 'evil' cannot run on the CPU: it uses inline assembly");
}

TEST_CASE("hand-written: writing a host global is refused", "[cpu][safety]") {
  const char* src =
      "int host_counter;\n"
      "extern \"C\" __global__ void evil(float* out) {\n"
      "  host_counter = 1;\n"
      "  out[0] = 0.0f;\n"
      "}\n";
  CHECK(first_refusal(src) ==
        "hostile.cu:3:3: error: kernel 'evil' cannot run on the CPU: it uses host global variable 'host_counter' (only "
        "__shared__ and __constant__ data of the module, and constants, may be used)");
}

TEST_CASE("hand-written: a __device__ global is refused, __shared__/__constant__/const data are not", "[cpu][safety]") {
  const char* bad =
      "__device__ int counter;\n"
      "extern \"C\" __global__ void evil(int* out) { out[0] = atomicAdd(&counter, 1); }\n";
  CHECK(first_refusal(bad) ==
        "hostile.cu:2:65: error: kernel 'evil' cannot run on the CPU: it uses __device__ global variable 'counter' "
        "(only __shared__ and __constant__ data of the module, and constants, may be used)");
  const char* good =
      "__constant__ float scale[4] = {1, 2, 3, 4};\n"
      "static const int kTable[3] = {7, 8, 9};\n"
      "struct S { static const int k = 3; };\n"
      "extern \"C\" __global__ void fine(float* out) {\n"
      "  __shared__ float tile[32];\n"
      "  tile[threadIdx.x] = scale[threadIdx.x % 4] * kTable[S::k - 3];\n"
      "  __syncthreads();\n"
      "  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, tile[31 - threadIdx.x], 1, 32) + expf(1.0f);\n"
      "}\n";
  auto r = cpu::check_kernel_safety(good, "fine.cu");
  REQUIRE(r);
  for (const auto& x : r->refusals) UNSCOPED_INFO(x.line);
  CHECK(r->safe());
  CHECK(r->kernels == std::vector<std::string>{"fine"});
}

TEST_CASE("hand-written: a call through a function pointer is refused", "[cpu][safety]") {
  const char* src =
      "__device__ float twice(float x) { return 2 * x; }\n"
      "extern \"C\" __global__ void evil(float* out, float (*f)(float)) {\n"
      "  out[0] = f(out[1]);\n"
      "}\n";
  CHECK(first_refusal(src) ==
        "hostile.cu:3:12: error: kernel 'evil' cannot run on the CPU: it calls through a function pointer (an "
        "indirect call)");
  const char* taken =
      "__device__ float twice(float x) { return 2 * x; }\n"
      "extern \"C\" __global__ void evil(float* out) {\n"
      "  float (*f)(float) = twice;\n"
      "  out[0] = f(out[1]);\n"
      "}\n";
  CHECK(first_refusal(taken) ==
        "hostile.cu:3:23: error: kernel 'evil' cannot run on the CPU: it takes the address of function 'twice'");
}

TEST_CASE("hand-written: printf and malloc are refused", "[cpu][safety]") {
  const char* p =
      "extern \"C\" __global__ void chatty(float* out) {\n"
      "  printf(\"%f\\n\", out[0]);\n"
      "}\n";
  CHECK(first_refusal(p) ==
        "hostile.cu:2:3: error: kernel 'chatty' cannot run on the CPU: it calls 'printf', a CUDA device function the "
        "CPU back end does not provide");
  const char* m =
      "extern \"C\" __global__ void greedy(float** out) {\n"
      "  out[0] = (float*)malloc(1 << 20);\n"
      "}\n";
  CHECK(first_refusal(m) ==
        "hostile.cu:2:20: error: kernel 'greedy' cannot run on the CPU: it calls 'malloc', a CUDA device function the "
        "CPU back end does not provide");
}

TEST_CASE("hand-written: module-level code that would run at load is refused", "[cpu][safety]") {
  const char* ctor =
      "extern \"C\" int system(const char*);\n"
      "__attribute__((constructor)) static void at_load() { system(\"id\"); }\n"
      "extern \"C\" __global__ void k(float* out) { out[0] = 1.0f; }\n";
  std::string line = first_refusal(ctor);
  CHECK(line.rfind("hostile.cu:2:16: error: the module cannot run on the CPU: it declares 'at_load' with attribute "
                   "'constructor'",
                   0) == 0);
  const char* dyn =
      "extern \"C\" int system(const char*);\n"
      "int ran = system(\"id\");\n"
      "extern \"C\" __global__ void k(float* out) { out[0] = 1.0f; }\n";
  CHECK(first_refusal(dyn) ==
        "hostile.cu:2:5: error: the module cannot run on the CPU: it defines global variable 'ran' with a dynamic "
        "initializer (it would run when loaded)");
  const char* fasm = "asm(\".globl pwn\");\nextern \"C\" __global__ void k(float* out) { out[0] = 1.0f; }\n";
  CHECK(first_refusal(fasm) ==
        "hostile.cu:1:1: error: the module cannot run on the CPU: it has file-scope inline assembly");
}

TEST_CASE("hand-written: a pointer made from an integer, new, and host functions are refused", "[cpu][safety]") {
  const char* cast =
      "extern \"C\" __global__ void evil(unsigned long long addr) {\n"
      "  *(int*)addr = 0;\n"
      "}\n";
  CHECK(
      first_refusal(cast) ==
      "hostile.cu:2:4: error: kernel 'evil' cannot run on the CPU: it makes a pointer from an integer (it could point "
      "anywhere in the host)");
  const char* host_fn =
      "void host_only(float* p) { p[0] = 1; }\n"
      "extern \"C\" __global__ void evil(float* out) { host_only(out); }\n";
  std::string l = first_refusal(host_fn);
  CHECK(l ==
        "hostile.cu:2:47: error: kernel 'evil' cannot run on the CPU: it calls host function 'host_only' (not "
        "__device__)");
  const char* nw = "extern \"C\" __global__ void evil(float** out) { out[0] = new float[4]; }\n";
  CHECK(first_refusal(nw) ==
        "hostile.cu:1:57: error: kernel 'evil' cannot run on the CPU: it uses 'new' (allocates host memory)");
}

TEST_CASE("hand-written: only the kernels that reach a construct are named, safe kernels pass", "[cpu][safety]") {
  const char* src =
      "__device__ float helper(float x) { return __expf(x) + fmaxf(x, 0.0f); }\n"
      "extern \"C\" __global__ void good(float* out) { out[threadIdx.x] = helper(out[threadIdx.x]); }\n"
      "extern \"C\" __global__ void bad(float* out) { printf(\"x\"); out[0] = helper(1.0f); }\n";
  auto r = cpu::check_kernel_safety(src, "two.cu");
  REQUIRE(r);
  CHECK(r->kernels == std::vector<std::string>{"good", "bad"});
  REQUIRE(r->refusals.size() == 1);
  CHECK(r->refusals[0].kernel == "bad");
  CHECK(r->refusals[0].loc.line == 3);
  CHECK(r->builtins_used == std::vector<std::string>{"__expf", "fmaxf", "threadIdx"});
}

TEST_CASE("a device source clang cannot read at all is a data error", "[cpu][safety]") {
  auto r = cpu::check_kernel_safety("#include <no_such_header.h>\n", "broken.cu");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::DataError);
  CHECK(r.error().message.rfind("broken.cu:1:10: error: ", 0) == 0);
}

TEST_CASE("hand-written: renaming a built-in to a host symbol, and hidden calls, are refused", "[cpu][safety]") {
  // An asm label on a redeclaration of a table function would make `expf` call `system`.
  const char* label =
      "extern \"C\" __device__ float expf(float) __asm__(\"system\");\n"
      "extern \"C\" __global__ void evil(float* out) { out[0] = expf(1.0f); }\n";
  CHECK(
      first_refusal(label) ==
      "hostile.cu:1:49: error: the module cannot run on the CPU: it declares 'expf' with attribute 'asm' (code or data "
      "the loader would run, place or rename)");
  auto r = cpu::check_kernel_safety(label, "hostile.cu");
  REQUIRE(r);
  REQUIRE(r->refusals.size() == 2);
  CHECK(r->refusals[1].line ==
        "hostile.cu:2:56: error: kernel 'evil' cannot run on the CPU: it calls 'expf', which a declaration renames or "
        "aliases (asm label, alias)");
  // A cleanup attribute calls its function at scope exit, with no call in the source.
  const char* cleanup =
      "extern \"C\" int system(const char*);\n"
      "static void run(int*) { system(\"id\"); }\n"
      "extern \"C\" __global__ void evil(float* out) {\n"
      "  int guard __attribute__((cleanup(run))) = 0;\n"
      "  out[0] = guard;\n"
      "}\n";
  CHECK(first_refusal(cleanup) ==
        "hostile.cu:4:7: error: kernel 'evil' cannot run on the CPU: it calls host function 'run' (not __device__)");
  // A module destructor runs at scope exit too: its body is checked.
  const char* dtor =
      "struct Evil { __device__ ~Evil() { printf(\"bye\"); } };\n"
      "extern \"C\" __global__ void evil(float* out) { Evil e; out[0] = 1.0f; }\n";
  CHECK(first_refusal(dtor) ==
        "hostile.cu:1:36: error: kernel 'evil' (in 'Evil::~Evil', which it calls) cannot run on the CPU: it calls "
        "'printf', a CUDA device function the CPU back end does not provide");
}

TEST_CASE("hand-written: the check sees the preprocessor branches the CPU prelude selects", "[cpu][safety]") {
  const char* src =
      "extern \"C\" __global__ void k(float* out) {\n"
      "#if __CUDA_ARCH__ >= 890\n"
      "  asm volatile(\"fp8 only\");\n"
      "#endif\n"
      "#if __CUDACC_VER_MAJOR__ >= 12\n"
      "  asm volatile(\"prefetch.global.L2\");\n"
      "#endif\n"
      "  out[0] = 1.0f;\n"
      "}\n";
  auto cpu_view = cpu::check_kernel_safety(src, "arch.cu");  // the CPU prelude's 800 / 11.0
  REQUIRE(cpu_view);
  CHECK(cpu_view->safe());
  cpu::SafetyOptions sm90;
  sm90.macros = {{"__CUDA_ARCH__", "900"}, {"__CUDACC_VER_MAJOR__", "12"}};
  auto r = cpu::check_kernel_safety(src, "arch.cu", sm90);
  REQUIRE(r);
  REQUIRE(r->refusals.size() == 2);
  CHECK(r->refusals[0].loc.line == 3);
  CHECK(r->refusals[1].loc.line == 6);
  cpu::SafetyOptions bad;
  bad.macros = {{"X\n#include </etc/passwd>", "1"}};
  auto b = cpu::check_kernel_safety(src, "arch.cu", bad);
  REQUIRE_FALSE(b);
  CHECK(b.error().code == ExitCode::Usage);
}

TEST_CASE("hand-written: load-time initializers hidden in classes and templates are refused", "[cpu][safety]") {
  const char* member =
      "extern \"C\" int system(const char*);\n"
      "struct S { static inline int ran = system(\"id\"); };\n"
      "extern \"C\" __global__ void k(float* out) { out[0] = 1.0f; }\n";
  CHECK(first_refusal(member) ==
        "hostile.cu:2:30: error: the module cannot run on the CPU: it defines global variable 'S::ran' with a dynamic "
        "initializer (it would run when loaded)");
  const char* var_template =
      "extern \"C\" int system(const char*);\n"
      "template <int N> int ran = system(\"id\");\n"
      "int* p = &ran<1>;\n"
      "extern \"C\" __global__ void k(float* out) { out[0] = 1.0f; }\n";
  CHECK(first_refusal(var_template) ==
        "hostile.cu:2:22: error: the module cannot run on the CPU: it defines global variable 'ran' with a dynamic "
        "initializer (it would run when loaded)");
}

TEST_CASE("a store every lane of a row shares, after they read it, gets a warp barrier before it", "[cpu][safety]") {
  // Hand-written, in the form of TVM's tir_attention_merge_state: every lane of a row reads
  // S[row]; the store at the end names no threadIdx.x. A GPU's warp reads before it stores;
  // lane by lane, the second lane would read the first one's result.
  const std::string merge = R"(
extern "C" __global__ void merge(float* __restrict__ S, float* __restrict__ V, int H) {
  float s = S[blockIdx.x * H + threadIdx.y];
  V[(blockIdx.x * H + threadIdx.y) * 4 + threadIdx.x] *= s;
  S[((int)blockIdx.x * H) + (int)threadIdx.y] = s + 1.0f;
}
extern "C" __global__ void own(float* __restrict__ S, int H) {
  float s = S[blockIdx.x * H + threadIdx.x];
  S[blockIdx.x * H + threadIdx.x] = s + 1.0f;
}
extern "C" __global__ void guarded(float* __restrict__ S, int H) {
  float s = S[blockIdx.x];
  if (threadIdx.x == 0) S[blockIdx.x] = s + 1.0f;
}
)";
  auto r = cpu::check_kernel_safety(merge, "merge.cu");
  REQUIRE(r);
  REQUIRE(r->safe());
  // Only the store of S in merge: V's index names threadIdx.x, own's lanes each have their
  // element, guarded's store is under a branch (lanes that never reach a barrier there).
  REQUIRE(r->warp_sync_points.size() == 1);
  CHECK(merge.compare(r->warp_sync_points[0], 4, "  S[") != 0);
  CHECK(merge.compare(r->warp_sync_points[0], 3, "S[(") == 0);
}
