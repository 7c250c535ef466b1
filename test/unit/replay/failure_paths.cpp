// Replay's reports and failure paths (issue 23) against the stricter fake driver and fake
// cuBLAS: each test names the point it covers. Loaded as the real libraries would be
// (KDFLOW_CUDA_LIBRARY, KDFLOW_CUBLAS_LIBRARY).
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"
#include "kdflow/support/io.h"
#include "kdflow/analysis/launch_graph.h"
#include "kdflow/replay/replay.h"
#include "test_util.h"

using namespace kdflow;

namespace {

using test::Env;

/// Drops the fake driver's state, as the end of the process would (a sticky fault included).
void reset_fake() {
  void* h = ::dlopen(KDFLOW_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h);
  auto reset = reinterpret_cast<void (*)()>(::dlsym(h, "kdflow_fake_cuda_reset"));
  REQUIRE(reset);
  reset();
}

struct Fakes {
  std::string dir = test::temp_dir();
  std::string log_path = dir + "/fake.log";
  Env lib{"KDFLOW_CUDA_LIBRARY", KDFLOW_FAKE_CUDA};
  Env blas{"KDFLOW_CUBLAS_LIBRARY", KDFLOW_FAKE_CUBLAS};
  Env log{"KDFLOW_FAKE_CUDA_LOG", log_path};
  ~Fakes() { reset_fake(); }
  /// Lines of the fake's log that start with `name`.
  std::vector<std::string> lines(const std::string& name) const {
    std::vector<std::string> out;
    std::ifstream f(log_path);
    std::string line;
    while (std::getline(f, line))
      if (line.compare(0, name.size() + 1, name + " ") == 0) out.push_back(line);
    return out;
  }
  /// Lines of the fake's log that contain `text`.
  size_t count(const std::string& text) const {
    size_t n = 0;
    std::ifstream f(log_path);
    std::string line;
    while (std::getline(f, line)) n += line.find(text) != std::string::npos;
    return n;
  }
};

Dataflow golden(const std::string& model) {
  auto df = parse_dataflow_json(test::slurp(test::source_dir() + "/test/golden/" + model + ".json"), model + ".json");
  if (!df) FAIL(df.error().message);
  return df.take();
}

std::string params_file(const std::string& model) {
  std::string local = test::sample_dir(model) + "/params.bin";
  if (file_exists(local)) return local;
  std::string shared = test::shared_sample_dir(model);
  if (!shared.empty() && file_exists(shared + "/params.bin")) return shared + "/params.bin";
  return "";
}

ReplayOptions options(const std::string& model) {
  ReplayOptions o;
  o.inputs.label = model;
  o.inputs.params = params_file(model);
  o.inputs.input_dir = test::sample_dir(model);
  for (const char* m : {"/device.cubin", "/device.ptx"})
    if (file_exists(test::sample_dir(model) + m)) o.modules.push_back(test::sample_dir(model) + m);
  o.warmup = 1;
  o.repeat = 2;
  return o;
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

}  // namespace

// Point 4: longest chain and critical path on the step graph (kernels and library calls).
TEST_CASE("issue 23 (4): mlp_cublas in dag mode reports its chain of 10 steps, library calls weighted",
          "[replay][issue23]") {
  if (params_file("mlp_cublas").empty()) {
    WARN("SKIPPED: ../shared/samples/mlp_cublas/params.bin is absent");
    return;
  }
  Fakes fake;
  Dataflow df = golden("mlp_cublas");
  ReplayOptions o = options("mlp_cublas");
  o.mode = ReplayMode::Dag;
  std::ostringstream log;
  Expected<ReplayReport> rep = replay(df, o, log);
  INFO(log.str());
  REQUIRE(rep);
  CHECK(rep->dag_longest_chain == 10);
  REQUIRE(rep->library_call_times.size() == 4);
  // A strict chain: the critical path is every step, kernels and calls.
  double sum = rep->kernel_sum_median_us;
  for (const KernelTime& t : rep->library_call_times) sum += t.median_us;
  CHECK(rep->dag_critical_path_us == Approx(sum));
  CHECK(rep->dag_critical_path_us > rep->kernel_sum_median_us);
}

// Point 5: --time-limit bounds each wait, not the whole replay.
TEST_CASE("issue 23 (5): a replay longer than --time-limit in total but with no slow wait completes",
          "[replay][issue23]") {
  Fakes fake;
  Dataflow df = golden("sort_scan");
  ReplayOptions o = options("sort_scan");
  o.modules = {test::sample_dir("sort_scan") + "/device.ptx"};
  o.warmup = 0;
  o.repeat = 1;
  o.time_limit_s = 0.5;
  Env jit("KDFLOW_FAKE_CUDA_JIT_MS", "700");  // longer than the limit, before anything is waited on
  Env slow("KDFLOW_FAKE_CUDA_SLOW_MS", df.kernels[0].name + "=100");
  std::ostringstream log;
  Expected<ReplayReport> rep = replay(df, o, log);
  INFO(log.str());
  if (!rep) INFO(rep.error().message);
  REQUIRE(rep);
  CHECK(rep->ran);
  // A wait that is slow is still caught, naming the kernel.
  Env slower("KDFLOW_FAKE_CUDA_SLOW_MS", df.kernels[0].name + "=1500");
  Env nojit("KDFLOW_FAKE_CUDA_JIT_MS", "0");
  Expected<ReplayReport> hung = replay(df, o, log);
  REQUIRE_FALSE(hung);
  CHECK(hung.error().code == ExitCode::DataError);
  CHECK(hung.error().message.find("kernel 0 (" + df.kernels[0].name + ") did not finish within 0.5 s") !=
        std::string::npos);
}

// Point 6: library calls never share the workspace concurrently in dag mode.
TEST_CASE("issue 23 (6): dag mode keeps library calls in sequence, so no two share the cuBLAS workspace at once",
          "[replay][issue23]") {
  if (params_file("mlp_cublas").empty()) {
    WARN("SKIPPED: ../shared/samples/mlp_cublas/params.bin is absent");
    return;
  }
  Fakes fake;
  Env seed("KDFLOW_FAKE_CUDA_SEED", "7");
  Dataflow df = golden("mlp_cublas");
  df.dependencies.clear();  // every step independent: only the engine can order the calls
  ReplayOptions o = options("mlp_cublas");
  o.mode = ReplayMode::Dag;
  std::ostringstream log;
  Expected<ReplayReport> rep = replay(df, o, log);
  INFO(log.str());
  if (!rep) INFO(rep.error().message);
  REQUIRE(rep);
  CHECK(log.str().find("3 added to keep library calls in sequence") != std::string::npos);
  std::vector<std::string> inst = fake.lines("cuGraphInstantiate");
  REQUIRE_FALSE(inst.empty());
  CHECK(inst.back().find("seed=7") != std::string::npos);
}

// Point 8: a cuBLAS fault is blamed on the call, in the checked run and in a timed run.
TEST_CASE("issue 23 (8): a fault in a library call names the call, not the next kernel", "[replay][issue23]") {
  if (params_file("mlp_cublas").empty()) {
    WARN("SKIPPED: ../shared/samples/mlp_cublas/params.bin is absent");
    return;
  }
  Dataflow df = golden("mlp_cublas");
  {
    Fakes fake;
    Env fault("KDFLOW_FAKE_CUBLAS_FAULT", "2");  // call 1 of the checked run
    std::ostringstream log;
    Expected<ReplayReport> rep = replay(df, options("mlp_cublas"), log);
    REQUIRE_FALSE(rep);
    INFO(rep.error().message);
    CHECK(rep.error().code == ExitCode::Software);
    CHECK(one_line(rep.error().message));
    // The fault surfaces when the call's work is waited on or at the next call after it
    // (the fake runs the work at once): either way the call is named, not kernel 1.
    CHECK(rep.error().message.find("mlp_cublas:/library_calls/1: error: ") == 0);
    CHECK(rep.error().message.find("of library call 1 (tvm.contrib.cublas.matmul") != std::string::npos);
    CHECK(rep.error().message.find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos);
  }
  {
    Fakes fake;
    Env fault("KDFLOW_FAKE_CUBLAS_FAULT", "9");  // call 0 of run 2 (a timed run)
    std::ostringstream log;
    Expected<ReplayReport> rep = replay(df, options("mlp_cublas"), log);
    REQUIRE_FALSE(rep);
    INFO(log.str());
    INFO(rep.error().message);
    CHECK(rep.error().message.find("mlp_cublas:/library_calls/0: error: library call 0 (tvm.contrib.cublas.matmul "
                                   "of node") != std::string::npos);
    CHECK(rep.error().message.find("failed in run 2: CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos);
  }
}

// Point 9: libcublas is also looked for in the CUDA toolkit's library folder.
TEST_CASE("issue 23 (9): replay looks for libcublas in the CUDA toolkit folders after the loader path",
          "[replay][issue23]") {
  Env none("KDFLOW_CUBLAS_LIBRARY", "");
  std::vector<std::string> names = replay_cublas_candidates("");
  REQUIRE(names.size() > 4);
  CHECK(names[0] == "libcublas.so.13");
  CHECK(std::find(names.begin(), names.end(), "/usr/local/cuda/lib64/libcublas.so.13") != names.end());
  CHECK(std::find(names.begin(), names.end(), "/usr/local/cuda/lib64/libcublas.so.12") != names.end());
}

// Issue 19: hostile flows stop before allocation.
TEST_CASE("hostile flows: a buffer claiming more bytes than its shape, or more than the device has, stops first",
          "[replay][issue23]") {
  Dataflow df = golden("sort_scan");
  {
    Dataflow bad = df;
    bad.buffers[3].bytes = uint64_t{1} << 40;
    ReplayOptions o = options("sort_scan");
    o.dry_run = true;
    std::ostringstream log;
    Expected<ReplayReport> rep = replay(bad, o, log);
    REQUIRE_FALSE(rep);
    CHECK(rep.error().code == ExitCode::DataError);
    CHECK(rep.error().message ==
          "sort_scan:/buffers/3/bytes: error: buffer 3 'tvmgen_default_fused_cast' claims 1099511627776 bytes, but "
          "float32 [4, 5] is 80 bytes");
  }
  {
    Fakes fake;
    Env mem("KDFLOW_FAKE_CUDA_TOTAL_MEM", "10000");
    std::ostringstream log;
    Expected<ReplayReport> rep = replay(df, options("sort_scan"), log);
    REQUIRE_FALSE(rep);
    INFO(rep.error().message);
    CHECK(rep.error().code == ExitCode::DataError);
    CHECK(one_line(rep.error().message));
    CHECK(rep.error().message.find("the cuda back end has 10000 bytes") != std::string::npos);
    CHECK(rep.error().message.find("nothing was allocated") != std::string::npos);
    CHECK(fake.lines("cuMemAlloc").empty());
  }
  {
    // The fake returns what a driver returns for an impossible request, never throws.
    Fakes fake;
    void* h = ::dlopen(KDFLOW_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h);
    auto alloc = reinterpret_cast<int (*)(unsigned long long*, size_t)>(::dlsym(h, "cuMemAlloc_v2"));
    REQUIRE(alloc);
    REQUIRE(test::fake_cuda_context(h));
    unsigned long long p = 0;
    CHECK(alloc(&p, size_t{1} << 50) == 2);  // CUDA_ERROR_OUT_OF_MEMORY
  }
}

// Point 2: an ungated run's kernel intervals tile it: no overhead is claimed from them.
TEST_CASE("issue 23 (2): the times table claims no launch overhead it did not measure", "[replay][issue23]") {
  Fakes fake;
  Dataflow df = golden("sort_scan");
  std::ostringstream log;
  Expected<ReplayReport> rep = replay(df, options("sort_scan"), log);
  REQUIRE(rep);
  std::string text = format_times(*rep, df);
  INFO(text);
  if (rep->gated) {
    CHECK(text.find("launch overhead (ungated − gated run):") != std::string::npos);
  } else {
    CHECK(text.find("launch overhead beyond the kernel sum") == std::string::npos);
    CHECK(text.find("no launch overhead measured") != std::string::npos);
  }
}

// Point 3: timed runs are gated, so a short kernel's time is its device time, not the
// host's enqueue rate; the ungated warm-up runs give the end-to-end time, and the difference
// is the launch overhead (point 2).
TEST_CASE("issue 23 (3): gated timed runs measure device time, the enqueue rate shows as launch overhead",
          "[replay][issue23]") {
  Fakes fake;
  Env cost("KDFLOW_FAKE_CUDA_LAUNCH_US", "5");  // the host needs 5 µs per launch
  Env dur("KDFLOW_FAKE_CUDA_DURATION", "*=1");  // every kernel runs for 1 µs
  Dataflow df = golden("sort_scan");
  const size_t n = df.kernels.size();
  std::ostringstream log;
  Expected<ReplayReport> rep = replay(df, options("sort_scan"), log);
  INFO(log.str());
  REQUIRE(rep);
  CHECK(rep->gated);
  REQUIRE(rep->times.size() == n);
  for (const KernelTime& t : rep->times) CHECK(t.median_us == Approx(1.0).epsilon(1e-3));
  CHECK(rep->gated_run_median_us == Approx(1.0 * n).epsilon(1e-3));
  CHECK(rep->eager_run_median_us >= 5.0 * n);  // ungated: the host's pace
  CHECK(rep->timing_method.find("behind a gate (cuStreamWaitValue32 on a host-pinned word") != std::string::npos);
  std::string text = format_times(*rep, df);
  CHECK(text.find("launch overhead (ungated − gated run): ") != std::string::npos);
  CHECK(fake.lines("cuStreamWaitValue32").size() == 2);  // one per timed run
}

// Seen on the first real GPU (H200, 2026-11-25): under ncu, which runs each launch before
// returning, the first launch of a gated run waited for a gate that only the host, blocked
// in that launch, could open, and `ncu kdflow replay` hung. The back end opens a gate itself
// at its deadline; the run is then reported as not gated, with the reason.
TEST_CASE("a driver that runs each launch before returning (ncu) does not deadlock on the gate",
          "[replay][gpu-check]") {
  Fakes fake;
  Env serialise("KDFLOW_FAKE_CUDA_SERIALISE", "1");
  Dataflow df = golden("sort_scan");
  ReplayOptions opt = options("sort_scan");
  opt.repeat = 2;
  std::ostringstream log;
  auto start = std::chrono::steady_clock::now();
  Expected<ReplayReport> rep = replay(df, opt, log);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(log.str());
  REQUIRE(rep);
  CHECK_FALSE(rep->gated);
  CHECK(rep->timing_method.find("the gate of timed run 1 was opened by its deadline") != std::string::npos);
  CHECK(fake.count("serialised launch waited for the gate") == 1);  // run 2 is not gated
  CHECK(fake.count("never released") == 0);
  CHECK(fake.lines("cuStreamWaitValue32").size() == 1);
  CHECK(s < 15);  // one deadline (2 s), not the fake's 20 s give-up
  CHECK(rep->times.size() == df.kernels.size());
}

// Point 7: after a time-out, kdflow ends without static destructors (a library's teardown
// that synchronises the hung device would block forever).
TEST_CASE("issue 23 (7): after a hung kernel kdflow replay exits at once, whatever a library's teardown does",
          "[replay][issue23]") {
  Fakes fake;
  Dataflow df = golden("sort_scan");
  Env hang("KDFLOW_FAKE_CUDA_HANG", df.kernels[2].name);
  Env blocks("KDFLOW_FAKE_CUDA_TEARDOWN_BLOCKS", "1");
  Env hang_s("KDFLOW_FAKE_CUDA_HANG_S", "30");
  auto start = std::chrono::steady_clock::now();
  test::RunResult r = test::run_kdflow({"replay", test::sample_dir("sort_scan"), "--flow",
                                        test::source_dir() + "/test/golden/sort_scan.json", "--params",
                                        params_file("sort_scan"), "--time-limit", "0.5", "--no-expect", "-q"});
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.err);
  CHECK(r.exit_code == 65);
  CHECK(r.err.find("kernel 2 (" + df.kernels[2].name + ") did not finish within 0.5 s") != std::string::npos);
  CHECK(s < 20);  // exit() would have waited 30 s in the teardown
}

// The fake's cuGetProcAddress honours the requested version, as the driver does: replay
// (every test above) resolves each entry point at the version of the ABI it declares.
TEST_CASE("the fake cuGetProcAddress resolves a name to the ABI of the requested version", "[replay][issue23]") {
  Fakes fake;
  void* h = ::dlopen(KDFLOW_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h);
  using GetProc = int (*)(const char*, void**, int, unsigned long long, int*);
  auto get = reinterpret_cast<GetProc>(::dlsym(h, "cuGetProcAddress_v2"));
  REQUIRE(get);
  void* v2 = nullptr;
  void* v4 = nullptr;
  void* v1 = nullptr;
  int status = -1;
  CHECK(get("cuCtxCreate", &v2, 3020, 0, &status) == 0);
  CHECK(v2 == ::dlsym(h, "cuCtxCreate_v2"));
  CHECK(get("cuCtxCreate", &v4, 13000, 0, &status) == 0);
  CHECK(v4 != v2);  // cuCtxCreate_v4: another signature
  CHECK(get("cuMemAlloc", &v1, 2000, 0, &status) == 0);
  CHECK(v1 != ::dlsym(h, "cuMemAlloc_v2"));  // the 32-bit cuMemAlloc
  void* none = nullptr;
  CHECK(get("cuGraphAddKernelNode", &none, 9020, 0, &status) == 500);
  CHECK(status == 2);  // CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
  CHECK(none == nullptr);
}

// Point 9: a driver other than libcuda.so.1 together with cuBLAS, whose runtime opens the
// system's driver by its soname, would put two drivers in the process: refused.
TEST_CASE("issue 23 (9): cuBLAS loading a second CUDA driver beside KDFLOW_CUDA_LIBRARY is one line, exit 69",
          "[replay][issue23]") {
  if (params_file("mlp_cublas").empty()) {
    WARN("SKIPPED: ../shared/samples/mlp_cublas/params.bin is absent");
    return;
  }
  Fakes fake;
  std::string other = fake.dir + "/libcuda.so.1";
  {
    std::ifstream in(KDFLOW_FAKE_CUDA, std::ios::binary);
    std::ofstream out(other, std::ios::binary);
    out << in.rdbuf();
  }
  Env loads("KDFLOW_FAKE_CUBLAS_LOADS_DRIVER", other);
  Dataflow df = golden("mlp_cublas");
  std::ostringstream log;
  Expected<ReplayReport> rep = replay(df, options("mlp_cublas"), log);
  REQUIRE_FALSE(rep);
  INFO(rep.error().message);
  CHECK(rep.error().code == ExitCode::Unavailable);
  CHECK(one_line(rep.error().message));
  CHECK(rep.error().message.find("cuBLAS loaded a second CUDA driver (" + other + ")") != std::string::npos);
  // Unload it again (the fake cuBLAS's reference and ours), or later replays in this process would see it.
  if (void* o = ::dlopen(other.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
    ::dlclose(o);
    ::dlclose(o);
  }
  CHECK(::dlopen(other.c_str(), RTLD_NOW | RTLD_NOLOAD) == nullptr);
}

// The fake keeps a current context per thread, as the driver does (cuda.h: "the context is
// bound to the calling CPU thread"): work on a thread with none, or with a context that was
// destroyed, fails with CUDA_ERROR_INVALID_CONTEXT. A sharded replay relies on it: each rank
// makes its context current on its own thread.
TEST_CASE("the fake driver refuses work on a thread with no current context, and devices have their own", "[replay]") {
  Fakes fake;
  void* h = ::dlopen(KDFLOW_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h);
  auto alloc = reinterpret_cast<int (*)(unsigned long long*, size_t)>(::dlsym(h, "cuMemAlloc_v2"));
  auto set = reinterpret_cast<int (*)(void*)>(::dlsym(h, "cuCtxSetCurrent"));
  auto retain = reinterpret_cast<int (*)(void**, int)>(::dlsym(h, "cuDevicePrimaryCtxRetain"));
  auto release = reinterpret_cast<int (*)(int)>(::dlsym(h, "cuDevicePrimaryCtxRelease_v2"));
  auto count = reinterpret_cast<int (*)(int*)>(::dlsym(h, "cuDeviceGetCount"));
  REQUIRE((alloc && set && retain && release && count));
  unsigned long long p = 0;
  CHECK(alloc(&p, 256) == 201);  // no context on this thread yet
  REQUIRE(test::fake_cuda_context(h));
  CHECK(alloc(&p, 256) == 0);
  int other = -1;
  std::thread([&] { other = alloc(&p, 256); }).join();
  CHECK(other == 201);  // the other thread has none of its own
  std::thread([&] {
    void* ctx = nullptr;
    other = retain(&ctx, 0) == 0 && set(ctx) == 0 ? alloc(&p, 256) : -2;
  }).join();
  CHECK(other == 0);
  CHECK(set(reinterpret_cast<void*>(uintptr_t{0xdead})) == 201);  // not a context
  CHECK(fake.count("error=no_current_context_on_this_thread") == 2);
  CHECK(fake.count(" thread=1") > 0);  // the other threads' lines say which thread
  int n = 0;
  CHECK(count(&n) == 0);
  CHECK(n == 1);
  {
    Env devices("KDFLOW_FAKE_CUDA_DEVICES", "2");
    CHECK(count(&n) == 0);
    CHECK(n == 2);
    void* ctx = nullptr;
    CHECK(retain(&ctx, 1) == 0);
    CHECK(reinterpret_cast<uintptr_t>(ctx) == 0x1c0);
    CHECK(retain(&ctx, 2) == 101);  // CUDA_ERROR_INVALID_DEVICE
    CHECK(release(1) == 0);
    CHECK(release(1) == 201);  // released once more than retained
  }
}

// The fake refuses during stream capture what the real driver refuses there, and the
// capture is then invalidated.
TEST_CASE("the fake driver refuses allocations, synchronous copies and event queries during capture",
          "[replay][issue23]") {
  Fakes fake;
  void* h = ::dlopen(KDFLOW_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h);
  auto create = reinterpret_cast<int (*)(void**, unsigned)>(::dlsym(h, "cuStreamCreate"));
  auto begin = reinterpret_cast<int (*)(void*, int)>(::dlsym(h, "cuStreamBeginCapture_v2"));
  auto end = reinterpret_cast<int (*)(void*, void**)>(::dlsym(h, "cuStreamEndCapture"));
  auto alloc = reinterpret_cast<int (*)(unsigned long long*, size_t)>(::dlsym(h, "cuMemAlloc_v2"));
  auto sync = reinterpret_cast<int (*)()>(::dlsym(h, "cuCtxSynchronize"));
  REQUIRE((create && begin && end && alloc && sync));
  REQUIRE(test::fake_cuda_context(h));
  void* stream = nullptr;
  REQUIRE(create(&stream, 1) == 0);
  void* graph = nullptr;
  unsigned long long p = 0;
  REQUIRE(begin(stream, 0) == 0);
  CHECK(alloc(&p, 256) == 900);  // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
  CHECK(end(stream, &graph) == 901);  // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
  CHECK(graph == nullptr);
  REQUIRE(begin(stream, 0) == 0);
  CHECK(sync() == 900);
  CHECK(end(stream, &graph) == 901);
  REQUIRE(begin(stream, 0) == 0);  // a clean capture still works
  CHECK(end(stream, &graph) == 0);
  CHECK(alloc(&p, 256) == 0);  // and allocations outside capture
}
