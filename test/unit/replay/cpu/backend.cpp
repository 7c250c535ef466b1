// The CPU back end (lib/replay/cpu/cpu_backend.cpp) driven through the back-end interface
// in plan order, as the engine's eager path drives it: every sample with an input and a
// reference output replays and matches output_<i>.npy. Prints max abs/rel error and time.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "replay/backend.h"
#include "kdflow/frontend/extract.h"
#include "kdflow/formats/npy.h"
#include "kdflow/replay/replay.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace kdflow;
using namespace kdflow::replay_backend;

namespace {

struct CpuRun {
  std::vector<OutputCheck> checks;
  double seconds = 0;
};

/// Extract, plan, and run every launch and library call in order on the CPU back end.
CpuRun run_on_cpu(const std::string& dir) {
  ExtractInputs in;
  in.dir = dir;
  auto resolved = resolve_extract_inputs(in);
  REQUIRE(resolved);
  auto df = extract(*resolved);
  INFO((df ? std::string() : df.error().message));
  REQUIRE(df);
  ReplayInputs ri;
  ri.label = dir;
  for (const char* p : {"params.bin", "vm_exec.bin"})
    if (ri.params.empty() && fs::exists(fs::path(dir) / p)) ri.params = (fs::path(dir) / p).string();
  ri.input_dir = dir;
  auto plan = make_plan(*df, ri);
  INFO((plan ? std::string() : plan.error().message));
  REQUIRE(plan);

  std::ostringstream log;
  BackendOptions bo;
  bo.label = dir;
  auto be = make_cpu_backend(bo, log);
  REQUIRE(be);
  Backend& b = **be;
  REQUIRE(b.open());
  std::vector<ModuleAlternatives> modules;
  std::vector<std::string> files;
  for (int i = 0; fs::exists(fs::path(dir) / ("device_" + std::to_string(i) + ".cu")); ++i)
    files.push_back((fs::path(dir) / ("device_" + std::to_string(i) + ".cu")).string());
  if (files.empty()) files.push_back((fs::path(dir) / "device.cu").string());
  for (const std::string& f : files) {
    ModuleAlternatives alt;
    alt.files.push_back({f, test::slurp(f), ModuleFormat::CudaSource});
    modules.push_back(alt);
  }
  std::string module_names;
  ModuleFormat fmt = ModuleFormat::Unknown;
  auto t0 = std::chrono::steady_clock::now();
  Status loaded = b.load_modules(modules, &module_names, &fmt);
  INFO((loaded ? std::string() : loaded.error().message));
  REQUIRE(loaded);

  std::vector<KernelLaunch> unbound;
  for (size_t i = 0; i < plan->launches.size(); ++i) unbound.push_back({i, &plan->launches[i], {}, {}});
  std::vector<LibraryCallArgs> unbound_calls;
  for (size_t i = 0; i < plan->library_calls.size(); ++i) unbound_calls.push_back({i, &plan->library_calls[i]});
  Status prepared = b.prepare(unbound, unbound_calls);
  INFO((prepared ? std::string() : prepared.error().message));
  REQUIRE(prepared);
  std::vector<uint64_t> bases;
  for (const PlanAllocation& a : plan->allocations) {
    DevicePtr p = 0;
    REQUIRE(b.alloc(a.bytes, &p).ok());
    bases.push_back(p);
  }
  for (const PlanUpload& u : plan->uploads)
    REQUIRE(b.upload(bases[u.allocation], u.data.data(), u.data.size()).ok());
  std::vector<KernelLaunch> launches;
  for (size_t i = 0; i < plan->launches.size(); ++i) {
    KernelLaunch kl;
    kl.index = i;
    kl.launch = &plan->launches[i];
    kl.packed = pack_arguments(plan->launches[i], bases);
    launches.push_back(kl);
  }
  std::vector<LibraryCallArgs> calls;
  for (size_t i = 0; i < plan->library_calls.size(); ++i) {
    const PlanLibraryCall& c = plan->library_calls[i];
    LibraryCallArgs a;
    a.index = i;
    a.call = &c;
    a.a = bases[c.a.allocation] + c.a.offset;
    a.b = bases[c.b.allocation] + c.b.offset;
    a.c = bases[c.c.allocation] + c.c.offset;
    calls.push_back(a);
  }
  Status bound = b.bind(launches, calls);
  INFO((bound ? std::string() : bound.error().message));
  REQUIRE(bound);
  auto run_calls_after = [&](int kernel) {
    for (size_t c = 0; c < plan->library_calls.size(); ++c)
      if (plan->library_calls[c].after_kernel == kernel) {
        Fault f = b.library_call(c);
        INFO(f.text);
        REQUIRE(f.ok());
      }
  };
  run_calls_after(-1);
  for (size_t i = 0; i < plan->launches.size(); ++i) {
    Fault f = b.launch(i);
    INFO(f.text);
    REQUIRE(f.ok());
    run_calls_after(plan->launches[i].kernel);
  }
  CpuRun out;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t o = 0; o < plan->outputs.size(); ++o) {
    const Buffer& buf = df->buffers[plan->outputs[o]];
    std::string data(buffer_array_bytes(buf), '\0');
    int alloc = plan->buffer_allocation[plan->outputs[o]];
    REQUIRE(b.download(data.data(), bases[alloc], data.size()).ok());
    NpyArray got = buffer_array(buf, std::move(data));
    std::string ref = (fs::path(dir) / ("output_" + std::to_string(o) + ".npy")).string();
    auto want = parse_npy(test::slurp(ref), ref);
    REQUIRE(want);
    // float32: rtol 1e-3, atol 1e-5 (replay's defaults); float16: rtol 1e-2, atol 1e-3 (fp16
    // keeps 11 bits: one rounding is 4.9e-4 relative, and a reduction order differs).
    bool f16 = want->dtype.code == kDLFloat && want->dtype.bits == 16;
    OutputCheck c = compare_arrays(got, *want, f16 ? 1e-2 : 1e-3, f16 ? 1e-3 : 1e-5);
    c.name = "output_" + std::to_string(o) + ".npy";
    out.checks.push_back(c);
  }
  return out;
}

void report(const std::string& name, const CpuRun& r) {
  for (const OutputCheck& c : r.checks)
    std::cerr << "cpu replay " << name << " " << c.name << ": max_abs " << c.max_abs << " max_rel " << c.max_rel
              << " mismatches " << c.mismatches << "/" << c.elements << " (" << r.seconds << " s)\n";
}

std::string sample_with_params(const std::string& name) {
  if (fs::exists(fs::path(test::sample_dir(name)) / "params.bin") ||
      fs::exists(fs::path(test::sample_dir(name)) / "vm_exec.bin"))
    return test::sample_dir(name);
  return test::shared_sample_dir(name);
}

}  // namespace

TEST_CASE("CPU back end replays mlp and matches output_0.npy", "[cpu]") {
  std::string dir = sample_with_params("mlp");
  if (dir.empty()) { WARN("skipped: mlp's params.bin is only in ../shared/samples"); return; }
  CpuRun r = run_on_cpu(dir);
  report("mlp", r);
  REQUIRE(r.checks.size() == 1);
  CHECK(r.checks[0].pass);
}
