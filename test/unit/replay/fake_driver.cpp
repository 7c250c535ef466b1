// Replay tests against the fake CUDA driver (test/fake_cuda), loaded through
// KDFLOW_CUDA_LIBRARY exactly as libcuda.so.1 would be: the call sequence, allocation
// sizes, uploads and argument packing, checked against the IR (golden JSON of the samples).
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"
#include <fmt/format.h>

#include "kdflow/support/io.h"
#include "kdflow/analysis/launch_graph.h"
#include "kdflow/formats/params.h"
#include "kdflow/replay/replay.h"
#include "kdflow/formats/vm_exec.h"
#include "test_util.h"

using namespace kdflow;

namespace {

using test::Env;

/// One line of the fake's log: `name k=v ... -> result k=v ...`.
struct Call {
  std::string name;
  std::map<std::string, std::string> kv;
  int result = -1;
  std::string line;
  const std::string& at(const std::string& k) const {
    auto it = kv.find(k);
    if (it == kv.end()) FAIL("no " << k << " in: " << line);
    return it->second;
  }
  uint64_t num(const std::string& k) const { return std::stoull(at(k), nullptr, 0); }
};

/// Forgets everything the fake holds (a hung context is never released by the engine,
/// as a real process would exit): the fake's own test entry point, found with dlsym.
void reset_fake() {
  void* h = ::dlopen(KDFLOW_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h);
  auto reset = reinterpret_cast<void (*)()>(::dlsym(h, "kdflow_fake_cuda_reset"));
  REQUIRE(reset);
  reset();
}

struct FakeDriver {
  std::string dir = test::temp_dir();
  std::string log_path = dir + "/fake.log";
  Env lib{"KDFLOW_CUDA_LIBRARY", KDFLOW_FAKE_CUDA};
  Env log{"KDFLOW_FAKE_CUDA_LOG", log_path};

  std::vector<Call> calls() const {
    std::vector<Call> out;
    std::ifstream f(log_path);
    std::string line;
    while (std::getline(f, line)) {
      Call c;
      c.line = line;
      std::istringstream ss(line);
      std::string tok;
      ss >> c.name;
      bool after = false;
      while (ss >> tok) {
        if (tok == "->") {
          after = true;
          ss >> c.result;
          continue;
        }
        size_t eq = tok.find('=');
        if (eq != std::string::npos) c.kv[tok.substr(0, eq)] = tok.substr(eq + 1);
      }
      (void)after;
      out.push_back(std::move(c));
    }
    return out;
  }
  std::vector<Call> calls(const std::string& name) const {
    std::vector<Call> out;
    for (Call& c : calls())
      if (c.name == name) out.push_back(std::move(c));
    return out;
  }
};

Dataflow golden(const std::string& model) {
  std::string path = test::source_dir() + "/test/golden/" + model + ".json";
  auto df = parse_dataflow_json(test::slurp(path), model + ".json");
  if (!df) FAIL(df.error().message);
  return df.take();
}

/// The params file of a model: samples/<m>/params.bin, else ../shared/samples/<m>/params.bin.
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

/// Allocation sizes computed here, independently of plan.cpp: TVM's pool per storage id
/// (max entry bytes rounded up to 4), then one per workspace, in buffer order.
std::vector<uint64_t> expected_allocations(const Dataflow& df, std::map<int, size_t>* of_buffer) {
  std::map<int64_t, uint64_t> pools;
  for (const Buffer& b : df.buffers)
    if (b.storage_id) pools[*b.storage_id] = std::max(pools[*b.storage_id], b.bytes);
  std::vector<uint64_t> out;
  std::map<int64_t, size_t> index;
  for (auto& [sid, bytes] : pools) {
    index[sid] = out.size();
    out.push_back((bytes + 3) / 4 * 4);
  }
  for (const Buffer& b : df.buffers) {
    if (b.storage_id) {
      (*of_buffer)[b.id] = index[*b.storage_id];
    } else {
      (*of_buffer)[b.id] = out.size();
      out.push_back(b.bytes);
    }
  }
  return out;
}

std::string hex_le(uint64_t v, int bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (int k = 0; k < bytes; ++k) {
    unsigned char c = static_cast<unsigned char>(v >> (8 * k));
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

/// The packed parameter bytes the launch of `k` must carry, built here from the IR and the
/// addresses the fake handed out: pointers 8 bytes, int32 4, int64 8, natural alignment.
std::string expected_params(const Kernel& k, const std::map<int, size_t>& alloc_of, const std::vector<uint64_t>& base) {
  std::string hex;
  size_t pos = 0;
  for (const Arg& a : k.args) {
    int size = a.dtype == "int32" || a.dtype == "uint32" || a.dtype == "float32" ? 4 : 8;
    while (pos % size) {
      hex += "00";
      ++pos;
    }
    uint64_t v = 0;
    if (a.kind == Arg::Kind::Buffer) v = base[alloc_of.at(a.buffer)] + static_cast<uint64_t>(a.offset);
    else if (a.kind == Arg::Kind::Int) v = static_cast<uint64_t>(a.int_value);
    hex += hex_le(v, size);
    pos += size;
  }
  return hex.empty() ? "-" : hex;
}

/// How the fake decodes the same launch against the PTX signature: aN+off, u32:V, u64:V.
std::string expected_decoded(const Kernel& k, const std::map<int, size_t>& alloc_of) {
  std::string out;
  for (const Arg& a : k.args) {
    std::string item;
    if (a.kind == Arg::Kind::Buffer) item = "a" + std::to_string(alloc_of.at(a.buffer)) + "+" + std::to_string(a.offset);
    else if (a.dtype == "int32") item = "u32:" + std::to_string(static_cast<uint32_t>(a.int_value));
    else item = "u64:" + std::to_string(static_cast<uint64_t>(a.int_value));
    out += (out.empty() ? "" : ",") + item;
  }
  return out.empty() ? "-" : out;
}

std::string fmt_dims(const std::array<int64_t, 3>& d) {
  return std::to_string(d[0]) + "," + std::to_string(d[1]) + "," + std::to_string(d[2]);
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

/// Checks allocations, uploads and the first run's launches of a replay against the IR.
void check_run(const FakeDriver& fake, const Dataflow& df, const ReplayReport& rep, bool decoded) {
  std::map<int, size_t> alloc_of;
  std::vector<uint64_t> sizes = expected_allocations(df, &alloc_of);

  // One cuMemAlloc per storage id and per workspace, with TVM's sizes, in plan order.
  std::vector<Call> allocs = fake.calls("cuMemAlloc");
  REQUIRE(allocs.size() == sizes.size());
  std::vector<uint64_t> base;
  for (size_t i = 0; i < allocs.size(); ++i) {
    CHECK(allocs[i].result == 0);
    CHECK(allocs[i].num("bytes") == sizes[i]);
    CHECK(allocs[i].num("index") == i);
    base.push_back(allocs[i].num("ptr"));
  }
  CHECK(fake.calls("cuMemFree").size() == allocs.size());

  // Uploads: every param and input, whole, to offset 0 of its allocation.
  std::vector<Call> up = fake.calls("cuMemcpyHtoD");
  REQUIRE(up.size() == df.params.size() + df.inputs.size());
  size_t u = 0;
  for (const std::vector<int>* list : {&df.params, &df.inputs})
    for (int b : *list) {
      INFO("upload of buffer " << b << " " << df.buffers[b].name);
      CHECK(up[u].result == 0);
      CHECK(up[u].num("bytes") == df.buffers[b].bytes);
      CHECK(up[u].num("index") == alloc_of.at(b));
      CHECK(up[u].num("offset") == 0);
      ++u;
    }

  // Launches in the IR's order with its dimensions and packed arguments.
  std::vector<Call> launches = fake.calls("cuLaunchKernel");
  REQUIRE(launches.size() >= df.kernels.size());
  for (size_t i = 0; i < df.kernels.size(); ++i) {
    const Kernel& k = df.kernels[i];
    const Call& c = launches[i];
    INFO("kernel " << i << ": " << c.line);
    CHECK(c.result == 0);
    CHECK(c.at("name") == k.name);
    CHECK(c.at("grid") == fmt_dims(k.grid));
    CHECK(c.at("block") == fmt_dims(k.block));
    CHECK(c.num("smem") == static_cast<uint64_t>(k.dynamic_shared_memory));
    CHECK(c.at("params") == expected_params(k, alloc_of, base));
    if (decoded) CHECK(c.at("args") == expected_decoded(k, alloc_of));
  }
  // Every upload and memset landed before any kernel ran: the fake defers NULL-stream work
  // until something orders it, and counts what a launch on the work stream races with.
  for (const Call& c : launches) {
    INFO(c.line);
    CHECK(c.num("racing") == 0);
  }
  CHECK(rep.ran);
}

}  // namespace

TEST_CASE("mlp replays eagerly: allocations, uploads, launches and timing", "[replay]") {
  Dataflow df = golden("mlp");
  ReplayOptions opt = options("mlp");
  if (opt.inputs.params.empty()) {
    WARN("no params.bin for mlp (looked in samples/mlp and ../shared/samples/mlp): skipped");
    return;
  }
  FakeDriver fake;
  std::ostringstream log;
  auto rep = replay(df, opt, log);
  INFO(log.str());
  REQUIRE(rep);
  check_run(fake, df, *rep, false);

  // TVM facts about this model, not recomputed: 13 storage ids + 1 workspace; storage 3
  // holds the 1600-byte first layer output and later the 8000-byte third.
  std::vector<Call> allocs = fake.calls("cuMemAlloc");
  REQUIRE(allocs.size() == 14);
  CHECK(allocs[3].num("bytes") == 8000);
  CHECK(allocs[13].num("bytes") == 4);
  CHECK(fake.calls("cuMemcpyHtoD").size() == 9);
  std::vector<Call> launches = fake.calls("cuLaunchKernel");
  CHECK(launches.size() == 6 * 4);  // 1 checked + 1 warmup + 2 timed runs
  CHECK(launches[0].at("grid") == "400,1,1");
  CHECK(launches[0].at("block") == "64,1,1");
  CHECK(launches[0].num("param_bytes") == 32);
  CHECK(launches[4].num("param_bytes") == 16);  // log_softmax: workspace and input

  CHECK(rep->module_format == ModuleFormat::Fatbin);
  CHECK(rep->device == "kdflow fake CUDA device (sm_90)");
  CHECK(fake.calls("cuFuncSetAttribute").empty());  // no kernel needs 48 KiB of shared memory
  CHECK(fake.calls("cuModuleUnload").size() == 1);
  CHECK(fake.calls("cuEventCreate").size() == fake.calls("cuEventDestroy").size());
  CHECK(fake.calls("cuDevicePrimaryCtxRetain").size() == 1);
  CHECK(fake.calls("cuDevicePrimaryCtxRelease").size() == 1);

  // The fake's clock advances 10 µs per launch.
  REQUIRE(rep->times.size() == 6);
  for (const KernelTime& t : rep->times) {
    CHECK(t.samples == 2);
    CHECK(t.median_us == Approx(10.0).epsilon(1e-4));
  }
  CHECK(rep->total_median_us == Approx(60.0).epsilon(1e-4));
  REQUIRE(rep->results.size() == 1);
  CHECK(rep->results[0].shape == std::vector<int64_t>{1, 10});
  CHECK(rep->result_names[0] == "output_0.npy");
  CHECK(rep->checks.empty());
  std::string times = format_times(*rep, df);
  CHECK(times.find("node 13 tvmgen_default_fused_nn_log_softmax") != std::string::npos);
  CHECK(times.find("total: 60.00") != std::string::npos);
}

TEST_CASE("sort_scan falls back to PTX, int32 scalars are packed as 4 bytes", "[replay]") {
  Dataflow df = golden("sort_scan");
  ReplayOptions opt = options("sort_scan");
  FakeDriver fake;
  Env reject("KDFLOW_FAKE_CUDA_REJECT_BINARY", "1");
  std::ostringstream log;
  auto rep = replay(df, opt, log);
  INFO(log.str());
  REQUIRE(rep);
  CHECK(log.str().find("device.cubin (fatbin) did not load: CUDA_ERROR_NO_BINARY_FOR_GPU") != std::string::npos);
  CHECK(log.str().find("falling back to " + test::sample_dir("sort_scan") + "/device.ptx (ptx)") != std::string::npos);
  CHECK(log.str().find("replay: jit: fake: no kernel image") != std::string::npos);
  CHECK(rep->module_format == ModuleFormat::Ptx);
  std::vector<Call> loads = fake.calls("cuModuleLoadDataEx");
  REQUIRE(loads.size() == 2);
  CHECK(loads[0].result == 209);
  CHECK(loads[1].at("kind") == "ptx");
  // The fake decodes each parameter buffer with the PTX's own parameter list and
  // rejects a buffer of the wrong size, so this checks every width and alignment.
  check_run(fake, df, *rep, true);
  std::vector<Call> launches = fake.calls("cuLaunchKernel");
  const Call& topk4 = launches[6];
  CHECK(topk4.at("name") == "tvmgen_default_fused_topk_kernel_4");
  CHECK(topk4.num("param_bytes") == 20);
  CHECK(topk4.at("args").substr(topk4.at("args").size() - 6) == ",u32:5");
  CHECK(launches[2].at("args").find(",u64:7,u64:0") != std::string::npos);
  REQUIRE(rep->results.size() == 3);
  CHECK(rep->results[2].shape == std::vector<int64_t>{4, 1000});
}

TEST_CASE("graph mode runs eagerly first, then captures the sequence once and times graph launches", "[replay]") {
  Dataflow df = golden("sort_scan");
  ReplayOptions opt = options("sort_scan");
  opt.mode = ReplayMode::Graph;
  opt.warmup = 1;
  opt.repeat = 3;
  FakeDriver fake;
  std::ostringstream log;
  auto rep = replay(df, opt, log);
  INFO(log.str());
  REQUIRE(rep);
  check_run(fake, df, *rep, false);
  // 1 checked + 1 warm-up + 3 timed eager runs (per-kernel times), then one capture.
  std::vector<Call> launches = fake.calls("cuLaunchKernel");
  size_t n = df.kernels.size();
  REQUIRE(launches.size() == 6 * n);
  for (size_t i = 0; i < launches.size(); ++i) CHECK(launches[i].at("captured") == (i < 5 * n ? "0" : "1"));
  for (size_t i = 0; i < n; ++i) CHECK(launches[5 * n + i].at("params") == launches[i].at("params"));
  REQUIRE(fake.calls("cuStreamBeginCapture").size() == 1);
  REQUIRE(fake.calls("cuStreamEndCapture").size() == 1);
  CHECK(fake.calls("cuStreamEndCapture")[0].num("kernels") == df.kernels.size());
  CHECK(fake.calls("cuGraphInstantiate").size() == 1);
  CHECK(fake.calls("cuGraphLaunch").size() == 5);  // 1 checked + 1 warm-up + 3 timed
  CHECK(fake.calls("cuGraphExecDestroy").size() == 1);
  CHECK(fake.calls("cuGraphDestroy").size() == 1);
  CHECK(rep->total_median_us == Approx(10.0 * df.kernels.size()).epsilon(1e-4));
  CHECK(rep->graph_run_median_us == Approx(10.0 * df.kernels.size()).epsilon(1e-4));
  CHECK(rep->times.size() == n);
  CHECK(format_times(*rep, df).find("graph: median 400.00 us") != std::string::npos);
}

TEST_CASE("dry-run works on every sample without a driver, a run without one exits 69", "[replay]") {
  std::string lib_path = test::temp_dir() + "/no-such-libcuda.so.1";
  Env lib("KDFLOW_CUDA_LIBRARY", lib_path);
  size_t models = 0;
  for (const std::string& m : test::sample_names()) {
    INFO(m);
    Dataflow df = golden(m);
    ReplayCommand cmd;
    cmd.dir = test::sample_dir(m);
    cmd.flow = test::source_dir() + "/test/golden/" + m + ".json";
    if (!df.params.empty()) {
      cmd.params = params_file(m);
      if (cmd.params.empty()) {
        WARN("no params.bin for " << m << ": skipped");
        continue;
      }
    }
    ++models;
    cmd.dry_run = true;
    std::ostringstream out, err;
    int rc = run_replay_command(cmd, out, err);
    INFO(err.str());
    REQUIRE(rc == 0);
    CHECK(err.str().empty());
    std::istringstream lines(out.str());
    std::string line;
    size_t launches = 0, uploads = 0, outputs = 0, calls = 0;
    while (std::getline(lines, line)) {
      launches += line.rfind("launch ", 0) == 0;
      calls += line.rfind("call ", 0) == 0;
      uploads += line.rfind("upload ", 0) == 0;
      outputs += line.rfind("output ", 0) == 0;
    }
    CHECK(launches == df.kernels.size());
    CHECK(calls == df.library_calls.size());
    CHECK(uploads == df.params.size() + df.inputs.size());
    CHECK(outputs == df.outputs.size());
    // Deterministic: the same plan twice.
    std::ostringstream out2, err2;
    CHECK(run_replay_command(cmd, out2, err2) == 0);
    CHECK(out2.str() == out.str());

    cmd.dry_run = false;
    std::ostringstream out3, err3;
    CHECK(run_replay_command(cmd, out3, err3) == 69);
    CHECK(one_line(err3.str()));
    CHECK(err3.str().rfind(lib_path + ": error: cannot load the CUDA driver (", 0) == 0);
    CHECK(out3.str().empty());
  }
  CHECK(models >= 3);
}

#ifdef KDFLOW_HAVE_CLANG
TEST_CASE("replay extracts a sample folder itself", "[replay]") {
  Env lib("KDFLOW_CUDA_LIBRARY", test::temp_dir() + "/no-such-libcuda.so.1");
  ReplayCommand cmd;
  cmd.dir = test::sample_dir("sort_scan");
  cmd.dry_run = true;
  cmd.quiet = true;
  std::ostringstream out, err;
  int rc = run_replay_command(cmd, out, err);
  INFO(err.str());
  REQUIRE(rc == 0);
  CHECK(out.str().rfind("plan " + cmd.dir + ": 14 allocations", 0) == 0);
  CHECK(out.str().find("launch 39: tvmgen_default_fused_cast_add_kernel node 6") != std::string::npos);
}
#endif

TEST_CASE("validation rejects impossible launches before running, one line each", "[replay]") {
  Dataflow base = golden("sort_scan");
  ReplayInputs in = options("sort_scan").inputs;
  auto error_of = [&](const Dataflow& df) {
    auto plan = make_plan(df, in);
    REQUIRE_FALSE(plan);
    CHECK(plan.error().message.find('\n') == std::string::npos);
    return plan.error();
  };
  REQUIRE(make_plan(base, in));

  Dataflow df = base;
  df.kernels[0].block = {2048, 1, 1};
  Error e = error_of(df);
  CHECK(e.code == ExitCode::DataError);
  CHECK(e.message.rfind("sort_scan:/kernels/0/block: error: block (2048, 1, 1) of tvmgen_default_fused_topk_kernel", 0) ==
        0);
  df = base;
  df.kernels[38].block = {32, 64, 1};
  CHECK(error_of(df).message.find("has 2048 threads, more than 1024") != std::string::npos);
  df = base;
  df.kernels[1].args[0].offset = 1 << 20;
  e = error_of(df);
  CHECK(e.message.rfind("sort_scan:/kernels/1/args/0/offset: error: argument 0 of tvmgen_default_fused_topk_kernel_1 "
                        "points 1048576 bytes into buffer 8",
                        0) == 0);
  df = base;
  df.kernels[1].args[0].offset = -4;
  CHECK(error_of(df).message.find("/kernels/1/args/0/offset") != std::string::npos);
  df = base;
  df.kernels[2].grid = {1, 70000, 1};
  CHECK(error_of(df).message.find("/kernels/2/grid: error: grid (1, 70000, 1)") != std::string::npos);
  df = base;
  df.kernels[2].dynamic_shared_memory = 300000;
  CHECK(error_of(df).message.find("/kernels/2/dynamic_shared_memory") != std::string::npos);
  df = base;
  df.kernels[6].args[2].int_value = int64_t{1} << 40;
  CHECK(error_of(df).message.find("is int32 but its value 1099511627776 does not fit") != std::string::npos);
  df = base;
  df.kernels[6].args[2].dtype = "int8";
  CHECK(error_of(df).message.find("/kernels/6/args/2/dtype") != std::string::npos);
  df = base;
  DeviceFunction fn;
  fn.name = df.kernels[0].name;
  fn.params = {{"a", "float*", true, Access::Read}, {"b", "float*", true, Access::Write}};
  df.device_functions.push_back(fn);
  df.kernels[0].device_function = static_cast<int>(df.device_functions.size()) - 1;
  CHECK(error_of(df).message.find("/kernels/0/args: error: 3 arguments, but the CUDA source declares") !=
        std::string::npos);
  DeviceFunction& mine = df.device_functions.back();
  mine.params.push_back({"c", "int", false, Access::Unknown});
  CHECK(error_of(df).message.find("the CUDA source's parameter 'c' is int") != std::string::npos);
  mine.params[2] = {"c", "float*", true, Access::Read};
  mine.launch_bounds = 512;
  CHECK(error_of(df).message.find("compiled with __launch_bounds__(512)") != std::string::npos);

  // The same through the command and a hand-edited JSON file: exit 65, one line.
  Dataflow bad = base;
  bad.kernels[0].block = {2048, 1, 1};
  std::string flow = test::temp_dir() + "/bad.json";
  REQUIRE(write_file_atomic(flow, emit_json(bad)));
  ReplayCommand cmd;
  cmd.dir = test::sample_dir("sort_scan");
  cmd.flow = flow;
  cmd.dry_run = true;
  std::ostringstream out, err;
  CHECK(run_replay_command(cmd, out, err) == 65);
  CHECK(one_line(err.str()));
  CHECK(err.str().rfind(flow + ":/kernels/0/block: error:", 0) == 0);
  bad = base;
  bad.kernels[5].args[1].offset = 16004;
  REQUIRE(write_file_atomic(flow, emit_json(bad)));
  std::ostringstream out2, err2;
  CHECK(run_replay_command(cmd, out2, err2) == 65);
  CHECK(one_line(err2.str()));
  CHECK(err2.str().find(":/kernels/5/args/1/offset: error:") != std::string::npos);
}

TEST_CASE("params are matched by name with dtype and shape checked, inputs likewise", "[replay]") {
  Dataflow df = golden("mlp");
  ReplayInputs in = options("mlp").inputs;
  if (in.params.empty()) {
    WARN("no params.bin for mlp: skipped");
    return;
  }
  auto plan = make_plan(df, in);
  REQUIRE(plan);
  REQUIRE(plan->uploads.size() == 9);
  CHECK(plan->uploads[0].source == "params.bin:p0");
  CHECK(plan->uploads[0].data.size() == 160000);
  CHECK(plan->uploads[8].source == "input_input0.npy");

  // Another model's params: p0 exists with another shape.
  ReplayInputs wrong = in;
  wrong.params = test::sample_dir("squeezenet") + "/params.bin";
  auto e = make_plan(df, wrong);
  REQUIRE_FALSE(e);
  CHECK(e.error().message.find("params.bin: error: param 'p0' is float32 [") != std::string::npos);
  CHECK(e.error().message.find("but the model's buffer 1 is float32 [400, 100]") != std::string::npos);
  // A params file without the model's params.
  wrong.params = test::sample_dir("sort_scan") + "/params.bin";
  e = make_plan(df, wrong);
  REQUIRE_FALSE(e);
  CHECK(e.error().message.find("param 'p0' (buffer 1, float32 [400, 100]) is not in this file") != std::string::npos);
  wrong.params = "";
  e = make_plan(df, wrong);
  REQUIRE_FALSE(e);
  CHECK(e.error().code == ExitCode::NoInput);
  CHECK(e.error().message.find("has 8 params (p0, p1, p2, ...) but no params file") != std::string::npos);

  ReplayInputs inputs = in;
  inputs.input_dir.clear();
  e = make_plan(df, inputs);
  REQUIRE_FALSE(e);
  CHECK(e.error().code == ExitCode::NoInput);
  CHECK(e.error().message.find("pass --input input0=FILE.npy") != std::string::npos);
  inputs.inputs = {{"nope", "x.npy"}};
  e = make_plan(df, inputs);
  REQUIRE_FALSE(e);
  CHECK(e.error().code == ExitCode::Usage);
  CHECK(e.error().message.find("has no input 'nope' (its inputs: input0)") != std::string::npos);
  inputs.inputs = {{"input0", test::sample_dir("mlp") + "/output_0.npy"}};
  e = make_plan(df, inputs);
  REQUIRE_FALSE(e);
  CHECK(e.error().message.find("output_0.npy: error: input 'input0' is float32 [1, 10] (40 bytes), but the model's "
                               "buffer 0 is float32 [1, 100]") != std::string::npos);
}

TEST_CASE("guard names the first kernel that writes past its buffer", "[replay]") {
  Dataflow df = golden("sort_scan");
  // Kernel 8 (cast) writes buffer 3, 80 bytes in its own 80-byte storage.
  REQUIRE(df.kernels[8].name == "tvmgen_default_fused_cast_kernel");
  FakeDriver fake;
  {
    Env scribble("KDFLOW_FAKE_CUDA_SCRIBBLE", "tvmgen_default_fused_cast_kernel@80");
    ReplayOptions opt = options("sort_scan");
    opt.guard = true;
    std::ostringstream log;
    auto rep = replay(df, opt, log);
    REQUIRE(rep);
    REQUIRE(rep->guard);
    CHECK(rep->guard->kernel == 8);
    CHECK(rep->guard->first_byte == 0);
    CHECK(one_line(rep->guard->message + "\n"));
    CHECK(rep->guard->message.rfind("sort_scan:/kernels/8: error: guard: kernel 8 (tvmgen_default_fused_cast_kernel) "
                                    "wrote past the end of allocation 3, storage 3 of 80 bytes (its argument 0, "
                                    "buffer 3",
                                    0) == 0);
    CHECK_FALSE(rep->passed());
    // Redzones: allocations are guard_bytes larger and filled with the pattern.
    std::vector<Call> allocs = fake.calls("cuMemAlloc");
    CHECK(allocs[3].num("bytes") == 80 + 256);
    CHECK(fake.calls("cuMemsetD8").size() == allocs.size());
    // The run stopped at the faulty kernel.
    CHECK(fake.calls("cuLaunchKernel").size() == 9);

    ReplayCommand cmd;
    cmd.dir = test::sample_dir("sort_scan");
    cmd.flow = test::source_dir() + "/test/golden/sort_scan.json";
    cmd.guard = true;
    cmd.quiet = true;
    std::ostringstream out, err;
    CHECK(run_replay_command(cmd, out, err) == 1);
    CHECK(one_line(err.str()));
  }
  {
    Env scribble("KDFLOW_FAKE_CUDA_SCRIBBLE", "tvmgen_default_fused_cast_kernel@76");  // inside: fine
    ReplayOptions opt = options("sort_scan");
    opt.guard = true;
    std::ostringstream log;
    auto rep = replay(df, opt, log);
    REQUIRE(rep);
    CHECK_FALSE(rep->guard);
  }
}

TEST_CASE("dump-dir writes each kernel's buffers, --kernel reruns one from them", "[replay]") {
  Dataflow df = golden("sort_scan");
  std::string dumps = test::temp_dir() + "/dumps";
  {
    FakeDriver fake;
    ReplayOptions opt = options("sort_scan");
    opt.dump_dir = dumps;
    std::ostringstream log;
    auto rep = replay(df, opt, log);
    REQUIRE(rep);
    size_t expected = 0;
    for (const Kernel& k : df.kernels)
      for (size_t j = 0; j < k.args.size(); ++j)
        if (k.args[j].kind == Arg::Kind::Buffer && k.args[j].access != Access::Read) {
          ++expected;
          INFO(dump_file_name(k, j));
          CHECK(file_exists(dumps + "/" + dump_file_name(k, j)));
        }
    CHECK(rep->dumped.size() == expected);
  }
  // Kernels do not run in the fake, so a dump of the input (kernel 0's argument 0, when
  // the IR does not know it is only read) holds the uploaded input.
  std::string arg0 = dumps + "/0_tvmgen_default_fused_topk_kernel_arg0.npy";
  if (df.kernels[0].args[0].access == Access::Read) {
    CHECK_FALSE(file_exists(arg0));
  } else {
    auto in = read_npy(test::sample_dir("sort_scan") + "/input_scores.npy");
    auto dumped = read_npy(arg0);
    REQUIRE(in);
    REQUIRE(dumped);
    CHECK(*dumped == *in);
  }
  auto ws = read_npy(dumps + "/1_tvmgen_default_fused_topk_kernel_1_arg1.npy");
  REQUIRE(ws);
  CHECK(ws->dtype == DType{kDLInt, 32, 1});
  CHECK(ws->shape == std::vector<int64_t>{4000});

  FakeDriver fake;
  ReplayOptions opt = options("sort_scan");
  opt.dump_dir = dumps;
  opt.kernel = 37;  // cumsum_kernel_4: buffer 5, workspace 15, input 0
  opt.warmup = 0;
  opt.repeat = 1;
  std::ostringstream log;
  auto rep = replay(df, opt, log);
  INFO(log.str());
  REQUIRE(rep);
  std::vector<Call> launches = fake.calls("cuLaunchKernel");
  REQUIRE(launches.size() == 2);  // the checked run and one timed run
  CHECK(launches[0].at("name") == "tvmgen_default_fused_cumsum_kernel_4");
  CHECK(log.str().find("kernel 37 (tvmgen_default_fused_cumsum_kernel_4) alone: 3 allocations restored") !=
        std::string::npos);
  size_t written = 0;
  for (const Arg& a : df.kernels[37].args) written += a.kind == Arg::Kind::Buffer && a.access != Access::Read;
  REQUIRE(written >= 1);
  REQUIRE(rep->results.size() == written);
  CHECK(rep->result_names[0] == "37_tvmgen_default_fused_cumsum_kernel_4_arg0.npy");
  REQUIRE(rep->checks.size() == written);
  for (const OutputCheck& c : rep->checks) CHECK(c.pass);
  REQUIRE(rep->times.size() == 1);
  CHECK(rep->times[0].kernel == 37);

  ReplayOptions nodumps = options("sort_scan");
  nodumps.dump_dir = test::temp_dir();
  nodumps.kernel = 37;
  auto e = replay(df, nodumps, log);
  REQUIRE_FALSE(e);
  CHECK(e.error().code == ExitCode::NoInput);
  CHECK(e.error().message.find("replay with --dump-dir first") != std::string::npos);
  nodumps.dump_dir.clear();
  e = replay(df, nodumps, log);
  REQUIRE_FALSE(e);
  CHECK(e.error().code == ExitCode::Usage);
}

TEST_CASE("the Chrome trace has a track per node, kernels end to end, flows along dependencies", "[replay]") {
  Dataflow df = golden("sort_scan");
  if (df.dependencies.empty()) {  // older goldens: add two by hand
    df.dependencies.push_back({Dependency::Kind::RAW, 0, 1, 8, 8});
    df.dependencies.push_back({Dependency::Kind::RAW, 7, 8, 2, 2});
  }
  FakeDriver fake;
  ReplayOptions opt = options("sort_scan");
  std::ostringstream log;
  auto rep = replay(df, opt, log);
  REQUIRE(rep);
  auto j = nlohmann::json::parse(chrome_trace(*rep, df));
  CHECK(j["displayTimeUnit"] == "ns");
  std::set<int> tracks, named;
  std::vector<nlohmann::json> xs;
  size_t starts = 0, finishes = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      xs.push_back(e);
      tracks.insert(e["tid"].get<int>());
    } else if (e["ph"] == "M" && e["name"] == "thread_name") {
      named.insert(e["tid"].get<int>());
    } else if (e["ph"] == "s") {
      ++starts;
      CHECK(e["tid"] == df.kernels[df.dependencies[e["id"].get<size_t>()].from].node);
    } else if (e["ph"] == "f") {
      ++finishes;
      CHECK(e["bp"] == "e");
      CHECK(e["tid"] == df.kernels[df.dependencies[e["id"].get<size_t>()].to].node);
    }
  }
  REQUIRE(xs.size() == df.kernels.size());
  CHECK(tracks == named);
  CHECK(tracks == std::set<int>{1, 2, 3, 4, 5, 6});
  for (size_t i = 0; i < xs.size(); ++i) {
    CHECK(xs[i]["name"] == df.kernels[i].name);
    CHECK(xs[i]["dur"].get<double>() == Approx(10.0).epsilon(1e-4));
    if (i) CHECK(xs[i]["ts"].get<double>() == Approx(xs[i - 1]["ts"].get<double>() + xs[i - 1]["dur"].get<double>()));
  }
  CHECK(starts == df.dependencies.size());
  CHECK(finishes == df.dependencies.size());

  std::string trace = test::temp_dir() + "/trace.json";
  ReplayCommand cmd;
  cmd.dir = test::sample_dir("sort_scan");
  cmd.flow = test::source_dir() + "/test/golden/sort_scan.json";
  cmd.trace = trace;
  cmd.no_expect = true;
  std::ostringstream out, err;
  CHECK(run_replay_command(cmd, out, err) == 0);
  CHECK(nlohmann::json::parse(test::slurp(trace))["traceEvents"].size() > df.kernels.size());
  cmd.mode = "graph";  // graph mode times the kernels eagerly too
  std::ostringstream out2, err2;
  CHECK(run_replay_command(cmd, out2, err2) == 0);
  CHECK(nlohmann::json::parse(test::slurp(trace))["traceEvents"].size() > df.kernels.size());
  cmd.dry_run = true;
  std::ostringstream out3, err3;
  CHECK(run_replay_command(cmd, out3, err3) == 64);
}

TEST_CASE("outputs are compared with their expected .npy and written out", "[replay]") {
  FakeDriver fake;
  ReplayCommand cmd;
  cmd.dir = test::sample_dir("sort_scan");
  cmd.flow = test::source_dir() + "/test/golden/sort_scan.json";
  cmd.output_dir = test::temp_dir() + "/out";
  cmd.repeat = 1;
  std::ostringstream out, err;
  // The fake runs no kernel: the outputs stay zero and differ from TVM's.
  CHECK(run_replay_command(cmd, out, err) == 1);
  CHECK(out.str().find("MISMATCH") != std::string::npos);
  CHECK(one_line(err.str().substr(err.str().rfind("kdflow replay: error:"))));
  CHECK(err.str().find("kdflow replay: error: 3 of 3 compared outputs differ") != std::string::npos);
  for (int i = 0; i < 3; ++i) {
    auto a = read_npy(cmd.output_dir + "/output_" + std::to_string(i) + ".npy");
    REQUIRE(a);
    auto e = read_npy(cmd.dir + "/output_" + std::to_string(i) + ".npy");
    REQUIRE(e);
    CHECK(a->shape == e->shape);
    cmd.expect.push_back(cmd.output_dir + "/output_" + std::to_string(i) + ".npy");
  }
  // Against what it produced: all equal (not written again over the files it compares with).
  cmd.output_dir.clear();
  std::ostringstream out2, err2;
  // All zeros against all zeros: equal, but a constant would pass too, so not called ok, and
  // the run verified nothing: exit 3 with that said on the last line.
  CHECK(run_replay_command(cmd, out2, err2) == 3);
  CHECK(out2.str().find("MISMATCH") == std::string::npos);
  CHECK(out2.str().find("UNINFORMATIVE") != std::string::npos);
  CHECK(out2.str().find(" ok\n") == std::string::npos);
  CHECK(err2.str().find("kdflow replay: nothing verified: each of the 3 comparisons would pass with a constant") !=
        std::string::npos);
  // --allow-unverified keeps the old status; --no-expect (nothing compared on purpose) exits 0.
  cmd.allow_unverified = true;
  std::ostringstream out3, err3;
  CHECK(run_replay_command(cmd, out3, err3) == 0);
  CHECK(err3.str().find("nothing verified") == std::string::npos);
}

TEST_CASE("no device, missing entry points resolved with dlsym", "[replay]") {
  Dataflow df = golden("sort_scan");
  {
    FakeDriver fake;
    Env nodev("KDFLOW_FAKE_CUDA_NO_DEVICE", "1");
    std::ostringstream log;
    auto rep = replay(df, options("sort_scan"), log);
    REQUIRE_FALSE(rep);
    CHECK(rep.error().code == ExitCode::Unavailable);
    CHECK(rep.error().message.find("cuInit failed: CUDA_ERROR_NO_DEVICE") != std::string::npos);
  }
  {
    FakeDriver fake;
    Env noproc("KDFLOW_FAKE_CUDA_NO_PROC_ADDRESS", "1");
    std::ostringstream log;
    auto rep = replay(df, options("sort_scan"), log);
    REQUIRE(rep);
    CHECK(fake.calls("cuGetProcAddress").front().result == 500);
    check_run(fake, df, *rep, false);
  }
  {
    FakeDriver fake;
    std::ostringstream log;
    auto rep = replay(df, options("sort_scan"), log);
    REQUIRE(rep);
    // Entry points are asked for at the version whose ABI kdflow declares.
    std::map<std::string, std::string> version;
    for (const Call& c : fake.calls("cuGetProcAddress")) version[c.at("symbol")] = c.at("version");
    CHECK(version["cuMemAlloc"] == "3020");
    CHECK(version["cuCtxCreate"] == "3020");
    CHECK(version["cuStreamBeginCapture"] == "10010");
    CHECK(version["cuGraphInstantiateWithFlags"] == "11040");
  }
}

TEST_CASE("a kernel missing from the module, and files that are no module", "[replay]") {
  Dataflow df = golden("sort_scan");
  df.kernels[3].name = "no_such_kernel";
  FakeDriver fake;
  std::ostringstream log;
  auto rep = replay(df, options("sort_scan"), log);
  REQUIRE_FALSE(rep);
  CHECK(rep.error().message.find("sort_scan:/kernels/3: error: kernel no_such_kernel is not in") != std::string::npos);

  ReplayOptions opt = options("sort_scan");
  opt.modules = {test::sample_dir("sort_scan") + "/graph.json"};
  rep = replay(golden("sort_scan"), opt, log);
  REQUIRE_FALSE(rep);
  CHECK(rep.error().message.find("graph.json: error: not a cubin (ELF), fatbin or PTX file") != std::string::npos);
  opt.modules.clear();
  rep = replay(golden("sort_scan"), opt, log);
  REQUIRE_FALSE(rep);
  CHECK(rep.error().code == ExitCode::NoInput);

  CHECK(detect_module_format(test::slurp(test::sample_dir("mlp") + "/device.cubin")) == ModuleFormat::Fatbin);
  CHECK(detect_module_format(test::slurp(test::sample_dir("mlp") + "/device.ptx")) == ModuleFormat::Ptx);
  CHECK(detect_module_format(std::string("\x7f" "ELF\x02\x01\x01", 7)) == ModuleFormat::Cubin);
  CHECK(detect_module_format("hello") == ModuleFormat::Unknown);
}

TEST_CASE("scalar packing: widths, alignment, float16", "[replay]") {
  Dataflow df;
  Buffer b;
  b.id = 0;
  b.kind = BufferKind::Workspace;
  b.name = "f.ws0";
  b.dtype = "float32";
  b.shape = {4};
  b.bytes = 16;
  df.buffers.push_back(b);
  Kernel k;
  k.name = "k";
  auto arg = [](Arg::Kind kind, const char* dtype) {
    Arg a;
    a.kind = kind;
    a.dtype = dtype;
    return a;
  };
  Arg p = arg(Arg::Kind::Buffer, "handle");
  p.buffer = 0;
  p.offset = 4;
  Arg i32 = arg(Arg::Kind::Int, "int32");
  i32.int_value = -7;
  Arg f16 = arg(Arg::Kind::Float, "float16");
  f16.float_value = 1.5;
  Arg i64 = arg(Arg::Kind::Int, "int64");
  i64.int_value = int64_t{1} << 40;
  Arg f32 = arg(Arg::Kind::Int, "float32");
  f32.int_value = 2;  // an integer literal for a float parameter
  Arg f64 = arg(Arg::Kind::Float, "float64");
  f64.float_value = -2.0;
  Arg null = arg(Arg::Kind::Null, "handle");
  Arg u32 = arg(Arg::Kind::Int, "uint32");
  u32.int_value = 4000000000;
  k.args = {p, i32, f16, i64, f32, f64, null, u32};
  df.kernels.push_back(k);
  auto plan = make_plan(df, ReplayInputs{});
  REQUIRE(plan);
  const PlanLaunch& l = plan->launches[0];
  std::vector<uint32_t> pos;
  for (const PlanArg& a : l.args) pos.push_back(a.position);
  CHECK(pos == std::vector<uint32_t>{0, 8, 12, 16, 24, 32, 40, 48});
  CHECK(l.param_bytes == 52);
  std::string bytes = pack_arguments(l, {0x1000});
  auto at = [&](size_t off, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<unsigned char>(bytes[off + i])} << (8 * i);
    return v;
  };
  CHECK(at(0, 8) == 0x1004);
  CHECK(at(8, 4) == 0xfffffff9u);
  CHECK(at(12, 2) == 0x3e00);
  CHECK(at(14, 2) == 0);  // padding
  CHECK(at(16, 8) == uint64_t{1} << 40);
  CHECK(at(24, 4) == 0x40000000u);  // 2.0f
  CHECK(at(32, 8) == 0xc000000000000000ull);
  CHECK(at(40, 8) == 0);
  CHECK(at(48, 4) == 4000000000u);

  auto half = [&](double v) {
    df.kernels[0].args = {f16};
    df.kernels[0].args[0].float_value = v;
    auto pl = make_plan(df, ReplayInputs{});
    REQUIRE(pl);
    std::string b2 = pack_arguments(pl->launches[0], {0x1000});
    return static_cast<unsigned>(static_cast<unsigned char>(b2[0]) | static_cast<unsigned char>(b2[1]) << 8);
  };
  CHECK(half(65504) == 0x7bffu);
  CHECK(half(65520) == 0x7c00u);
  CHECK(half(-0.0) == 0x8000u);
  CHECK(half(1e-7) == 0x0002u);
  CHECK(half(1.0 + 1.0 / 2048) == 0x3c00u);  // a tie rounds to even
  CHECK(half(1.0 + 3.0 / 2048) == 0x3c02u);
}

TEST_CASE("compare_arrays: tolerance for floats, exact for integers", "[replay]") {
  auto f32 = [](std::vector<float> v) {
    NpyArray a;
    a.dtype = DType{kDLFloat, 32, 1};
    a.shape = {static_cast<int64_t>(v.size())};
    a.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    return a;
  };
  auto c = compare_arrays(f32({1.0f, -2.0f, 0.0f}), f32({1.0005f, -2.0f, 0.0f}), 1e-3, 1e-5);
  CHECK(c.pass);
  CHECK(c.max_abs == Approx(0.0005).epsilon(1e-2));
  c = compare_arrays(f32({1.0f, 2.0f}), f32({1.01f, 2.0f}), 1e-3, 1e-5);
  CHECK_FALSE(c.pass);
  CHECK(c.mismatches == 1);
  c = compare_arrays(f32({NAN}), f32({NAN}), 1e-3, 1e-5);
  CHECK(c.pass);
  c = compare_arrays(f32({NAN}), f32({1.0f}), 1e-3, 1e-5);
  CHECK_FALSE(c.pass);
  c = compare_arrays(f32({1.0f, 2.0f}), f32({1.0f}), 1e-3, 1e-5);
  CHECK_FALSE(c.pass);
  CHECK(c.problem.find("shape [2] differs from the expected [1]") == 0);
  NpyArray i1, i2;
  i1.dtype = i2.dtype = DType{kDLInt, 32, 1};
  i1.shape = i2.shape = {1};
  int32_t x = 1000, y = 1001;
  i1.data.assign(reinterpret_cast<const char*>(&x), 4);
  i2.data.assign(reinterpret_cast<const char*>(&y), 4);
  c = compare_arrays(i1, i2, 1e-2, 1e-5);  // within rtol, but integers compare exactly
  CHECK(c.exact);
  CHECK_FALSE(c.pass);
}

TEST_CASE("kernels with 48 KiB or more of dynamic shared memory get their limit raised", "[replay]") {
  Dataflow df = golden("sort_scan");
  df.kernels[38].dynamic_shared_memory = 64 * 1024;  // tvmgen_default_fused_sum_kernel
  df.kernels[39].dynamic_shared_memory = 48 * 1024 - 1;
  FakeDriver fake;
  std::ostringstream log;
  auto rep = replay(df, options("sort_scan"), log);
  REQUIRE(rep);
  std::vector<Call> set = fake.calls("cuFuncSetAttribute");
  REQUIRE(set.size() == 1);
  CHECK(set[0].at("name") == df.kernels[38].name);
  CHECK(set[0].at("attrib") == "8");  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  CHECK(set[0].at("value") == "65536");
  CHECK(fake.calls("cuLaunchKernel")[38].at("smem") == "65536");
}

// ---------------------------------------------------------------------------------------
// What a real driver would expose (issue 11): each case failed on the engine before the
// fix, against this (stricter) fake.

namespace {

const std::vector<std::string> kModels = {"attention", "mlp",      "mlp_v08",       "mobilenet",
                                          "resnet18",  "sort_scan", "sort_scan_v08", "squeezenet"};

/// The reduced dependency DAG computed here by brute force: u→v is kept iff v depends on u
/// and no w with u <w< v has u ⇝ w ⇝ v.
std::set<std::pair<int, int>> brute_reduction(const Dataflow& df) {
  size_t n = df.kernels.size();
  std::vector<std::vector<char>> dep(n, std::vector<char>(n, 0)), reach(n, std::vector<char>(n, 0));
  for (const Dependency& d : df.dependencies)
    if (!d.from_library_call && !d.to_library_call) dep[d.from][d.to] = reach[d.from][d.to] = 1;
  for (size_t k = 0; k < n; ++k)
    for (size_t i = 0; i < n; ++i)
      if (reach[i][k])
        for (size_t j = 0; j < n; ++j)
          if (reach[k][j]) reach[i][j] = 1;
  std::set<std::pair<int, int>> out;
  for (size_t u = 0; u < n; ++u)
    for (size_t v = 0; v < n; ++v) {
      if (!dep[u][v]) continue;
      bool redundant = false;
      for (size_t w = u + 1; w < v && !redundant; ++w) redundant = reach[u][w] && reach[w][v];
      if (!redundant) out.insert({static_cast<int>(u), static_cast<int>(v)});
    }
  return out;
}

}  // namespace

TEST_CASE("uploads and memsets land before the first launch (NULL stream vs non-blocking stream)", "[replay]") {
  // check_run() asserts racing=0 for every launch of every sample test above; here the
  // --kernel path, whose restores are memsets and copies.
  Dataflow df = golden("sort_scan");
  std::string dumps = test::temp_dir() + "/dumps";
  {
    FakeDriver fake;
    ReplayOptions opt = options("sort_scan");
    opt.dump_dir = dumps;
    std::ostringstream log;
    REQUIRE(replay(df, opt, log));
  }
  FakeDriver fake;
  ReplayOptions opt = options("sort_scan");
  opt.dump_dir = dumps;
  opt.kernel = 37;
  std::ostringstream log;
  auto rep = replay(df, opt, log);
  INFO(log.str());
  REQUIRE(rep);
  std::vector<Call> launches = fake.calls("cuLaunchKernel");
  REQUIRE_FALSE(launches.empty());
  for (const Call& c : launches) {
    INFO(c.line);
    CHECK(c.num("racing") == 0);
  }
  CHECK_FALSE(fake.calls("cuMemsetD8").empty());
}

TEST_CASE("dynamic shared memory: the limit counts static shared memory, impossible launches exit 65", "[replay]") {
  Dataflow df = golden("sort_scan");
  const std::string name = df.kernels[38].name;
  df.kernels[38].dynamic_shared_memory = 40 * 1024;  // below 48 KiB alone, above it with 16 KiB static
  {
    FakeDriver fake;
    Env smem("KDFLOW_FAKE_CUDA_STATIC_SMEM", name + "=16384");
    std::ostringstream log;
    auto rep = replay(df, options("sort_scan"), log);
    INFO(log.str());
    REQUIRE(rep);
    std::vector<Call> set = fake.calls("cuFuncSetAttribute");
    REQUIRE(set.size() == 1);
    CHECK(set[0].at("name") == name);
    CHECK(set[0].at("attrib") == "8");
    CHECK(set[0].at("value") == "40960");
    CHECK(set[0].result == 0);
  }
  {
    FakeDriver fake;  // without static shared memory 40 KiB needs no opt-in
    std::ostringstream log;
    REQUIRE(replay(df, options("sort_scan"), log));
    CHECK(fake.calls("cuFuncSetAttribute").empty());
  }
  {
    FakeDriver fake;
    // 180000 static + 64 KiB dynamic > 227 KiB: checked before cuFuncSetAttribute, which
    // would fail (the old engine exited 70 naming the driver error).
    df.kernels[38].dynamic_shared_memory = 64 * 1024;
    Env smem("KDFLOW_FAKE_CUDA_STATIC_SMEM", name + "=180000");
    std::ostringstream log;
    auto rep = replay(df, options("sort_scan"), log);
    REQUIRE_FALSE(rep);
    CHECK(rep.error().code == ExitCode::DataError);
    CHECK(one_line(rep.error().message + "\n"));
    CHECK(rep.error().message.find("sort_scan:/kernels/38/dynamic_shared_memory: error: kernel 38 (" + name +
                                   ") needs 180000 bytes of static and 65536 of dynamic shared memory; the device "
                                   "allows 232448 per block") == 0);
    CHECK(fake.calls("cuFuncSetAttribute").empty());
    CHECK(fake.calls("cuLaunchKernel").empty());
  }
}

TEST_CASE("a hung kernel: --time-limit ends replay, naming the kernel, writing nothing", "[replay]") {
  Dataflow df = golden("sort_scan");
  const std::string name = df.kernels[5].name;
  FakeDriver fake;
  Env hang("KDFLOW_FAKE_CUDA_HANG", name);
  Env give_up("KDFLOW_FAKE_CUDA_HANG_S", "3");  // the old engine blocked in cuCtxSynchronize
  ReplayOptions opt = options("sort_scan");
  opt.time_limit_s = 0.5;
  std::ostringstream log;
  auto rep = replay(df, opt, log);
  REQUIRE_FALSE(rep);
  CHECK(rep.error().code == ExitCode::DataError);
  CHECK(one_line(rep.error().message + "\n"));
  CHECK(rep.error().message.find("sort_scan:/kernels/5: error: kernel 5 (" + name +
                                 ") did not finish within 0.5 s (--time-limit)") == 0);
  for (const Call& c : fake.calls())
    CHECK(c.line.find("blocks on a hung kernel") == std::string::npos);
  reset_fake();

  // The command: exit 65, no output files.
  std::string out_dir = test::temp_dir() + "/out";
  ReplayCommand cmd;
  cmd.dir = test::sample_dir("sort_scan");
  cmd.flow = test::source_dir() + "/test/golden/sort_scan.json";
  cmd.time_limit = 0.5;
  cmd.output_dir = out_dir;
  cmd.timing_json = out_dir + "/t.json";
  cmd.trace = test::temp_dir() + "/trace.json";
  std::ostringstream out, err;
  CHECK(run_replay_command(cmd, out, err) == 65);
  CHECK(one_line(err.str().substr(err.str().rfind('\n', err.str().size() - 2) + 1)));
  CHECK_FALSE(file_exists(out_dir + "/output_0.npy"));
  CHECK_FALSE(file_exists(cmd.timing_json));
  CHECK_FALSE(file_exists(cmd.trace));
  reset_fake();
}

TEST_CASE("a fault in a timed run is re-run synchronised to name its kernel", "[replay]") {
  Dataflow df = golden("sort_scan");
  const std::string name = df.kernels[7].name;
  for (const char* mode : {"eager", "graph", "dag"}) {
    DYNAMIC_SECTION(mode) {
      FakeDriver fake;
      ReplayOptions opt = options("sort_scan");
      opt.mode = std::string(mode) == "eager" ? ReplayMode::Eager
                 : std::string(mode) == "graph" ? ReplayMode::Graph
                                                : ReplayMode::Dag;
      opt.warmup = 1;
      opt.repeat = 2;
      // eager: the 3rd execution is in timed run 2; graph/dag: the 5th is the first graph launch.
      int nth = opt.mode == ReplayMode::Eager ? 3 : 5;
      Env fault("KDFLOW_FAKE_CUDA_FAULT", name + "@" + std::to_string(nth));
      std::ostringstream log;
      auto rep = replay(df, opt, log);
      INFO(log.str());
      REQUIRE_FALSE(rep);
      CHECK(rep.error().code == ExitCode::Software);
      CHECK(one_line(rep.error().message + "\n"));
      CHECK(rep.error().message ==
            fmt::format("sort_scan:/kernels/7: error: kernel 7 ({}) failed in run {}: CUDA_ERROR_ILLEGAL_ADDRESS (fake "
                        "driver error) (found by re-running with a synchronise after each kernel)",
                        name, nth - 1));
      CHECK(rep.error().message.find("CUDA_SUCCESS") == std::string::npos);
      // Two contexts: the run that failed, and the one that found the kernel.
      CHECK(fake.calls("cuDevicePrimaryCtxRetain").size() == 2);
      reset_fake();  // the fault is sticky until the process ends: start afresh, as a new process would
    }
  }
}

TEST_CASE("a module this GPU cannot run exits 69 naming its architectures and the device", "[replay]") {
  Dataflow df = golden("sort_scan");
  {
    FakeDriver fake;
    Env reject("KDFLOW_FAKE_CUDA_REJECT_BINARY", "1");
    ReplayOptions opt = options("sort_scan");
    opt.modules = {test::sample_dir("sort_scan") + "/device.cubin"};
    std::ostringstream log;
    auto rep = replay(df, opt, log);
    REQUIRE_FALSE(rep);
    CHECK(rep.error().code == ExitCode::Unavailable);
    CHECK(one_line(rep.error().message + "\n"));
    const std::string& m = rep.error().message;
    INFO(m);
    CHECK(m.find("CUDA_ERROR_NO_BINARY_FOR_GPU") != std::string::npos);
    CHECK(m.find("this GPU cannot run the device code: device.cubin holds sm_") != std::string::npos);
    CHECK(m.find("the device is kdflow fake CUDA device (sm_90) with driver 13.0 (CUDA driver API 13000)") !=
          std::string::npos);
  }
  for (const char* code : {"218", "222"}) {
    FakeDriver fake;
    Env reject("KDFLOW_FAKE_CUDA_REJECT_PTX", code);
    ReplayOptions opt = options("sort_scan");
    opt.modules = {test::sample_dir("sort_scan") + "/device.ptx"};
    std::ostringstream log;
    auto rep = replay(df, opt, log);
    REQUIRE_FALSE(rep);
    CHECK(rep.error().code == ExitCode::Unavailable);
    const std::string& m = rep.error().message;
    INFO(m);
    CHECK(one_line(m + "\n"));
    CHECK(m.find(std::string(code) == "218" ? "CUDA_ERROR_INVALID_PTX" : "CUDA_ERROR_UNSUPPORTED_PTX_VERSION") !=
          std::string::npos);
    CHECK(m.find("device.ptx holds sm_") != std::string::npos);
    CHECK(m.find("(PTX ISA ") != std::string::npos);
    CHECK(m.find("JIT log: ptxas fatal") != std::string::npos);
  }
}

TEST_CASE("timing: checked run untimed, launches back to back, end to end and Σ kernel time, JSON", "[replay]") {
  Dataflow df = golden("sort_scan");
  size_t n = df.kernels.size();
  for (ReplayMode mode : {ReplayMode::Eager, ReplayMode::Graph, ReplayMode::Dag}) {
    FakeDriver fake;
    ReplayOptions opt = options("sort_scan");
    opt.mode = mode;
    opt.warmup = 1;
    opt.repeat = 3;
    std::ostringstream log;
    auto rep = replay(df, opt, log);
    INFO(log.str());
    REQUIRE(rep);
    // Eager: 1 checked + 1 warm-up + 3 timed runs of every kernel.
    std::vector<Call> launches = fake.calls("cuLaunchKernel");
    size_t eager_launches = 0;
    for (const Call& c : launches) eager_launches += c.at("captured") == "0";
    CHECK(eager_launches == 5 * n);
    // The timed runs wait once each (the last event), the checked run after every kernel.
    std::vector<Call> calls = fake.calls();
    size_t queries_in_timed = 0, launches_seen = 0, syncs_after_launch = 0;
    bool graph_phase = false;
    for (const Call& c : calls) {
      graph_phase |= c.name == "cuStreamBeginCapture" || c.name == "cuGraphCreate";
      if (c.name == "cuLaunchKernel" && c.at("captured") == "0") ++launches_seen;
      if (c.name == "cuEventQuery" && launches_seen > 2 * n && !graph_phase) ++queries_in_timed;
      if (c.name == "cuCtxSynchronize" && launches_seen > 0) ++syncs_after_launch;
    }
    CHECK(queries_in_timed == 3);  // the fake finishes work at once: one query per timed run
    CHECK(syncs_after_launch == 0);  // the one context synchronise orders the uploads
    REQUIRE(rep->times.size() == n);
    for (const KernelTime& t : rep->times) {
      CHECK(t.samples == 3);
      CHECK(t.median_us == Approx(10.0).epsilon(1e-4));
    }
    CHECK(rep->kernel_sum_median_us == Approx(10.0 * n).epsilon(1e-4));
    CHECK(rep->eager_run_median_us == Approx(10.0 * n).epsilon(1e-4));
    CHECK(rep->timing_method.find("queued back to back") != std::string::npos);
    if (mode != ReplayMode::Eager) {
      CHECK(rep->graph_run_median_us == Approx(10.0 * n).epsilon(1e-4));
      CHECK(fake.calls("cuGraphLaunch").size() == 5);
    }
    auto j = nlohmann::json::parse(timing_json(*rep, df));
    CHECK(j["schema"] == "kdflow-replay-timing/1");
    CHECK(j["mode"] == to_string(mode));
    REQUIRE(j["kernels"].size() == n);
    CHECK(j["kernels"][5]["kernel"] == 5);
    CHECK(j["kernels"][5]["name"] == df.kernels[5].name);
    CHECK(j["kernels"][5]["node"] == df.kernels[5].node);
    CHECK(j["kernels"][5]["function"] == df.nodes[df.kernels[5].node].function);
    CHECK(j["kernels"][5]["grid"][0] == df.kernels[5].grid[0]);
    CHECK(j["kernels"][5]["median_us"].get<double>() == Approx(10.0).epsilon(1e-4));
    CHECK(j["eager_run_median_us"].get<double>() == Approx(10.0 * n).epsilon(1e-4));
    CHECK(j.contains("graph_run_median_us") == (mode != ReplayMode::Eager));
    CHECK(j.contains("dag_critical_path_us") == (mode == ReplayMode::Dag));
    std::string text = format_times(*rep, df);
    CHECK(text.find("eager end to end: ") != std::string::npos);
    CHECK(text.find("timing: CUDA events") != std::string::npos);
    // The dag's bound is over eager step times, which a graph launch can beat (seen on an H200).
    if (mode == ReplayMode::Dag)
      CHECK(text.find("from concurrency, over the eager runs' step times") != std::string::npos);
  }
}

// Seen on an H200: one ungated warm-up run came out below the median of ten gated runs, and the
// table printed a negative launch overhead (-4.43 us). It is run-to-run variation, said as such.
TEST_CASE("the times table never prints a negative launch overhead", "[replay][report]") {
  Dataflow df;
  df.kernels.emplace_back();  // one kernel of no node
  ReplayReport r;
  r.gated = true;
  r.warmup = 1;
  r.eager_run_median_us = r.eager_run_min_us = 178.53;
  r.gated_run_median_us = 182.96;
  r.gated_run_min_us = 182.08;
  KernelTime t;  // its time: the table has something to print
  t.samples = 10;
  t.median_us = t.min_us = 182.0;
  r.times.push_back(t);
  std::string text = format_times(r, df);
  INFO(text);
  CHECK(text.find("launch overhead (ungated − gated run): none measurable (the ungated median is 4.43 us below "
                  "the gated one: run-to-run variation over 1 warm-up run)") != std::string::npos);
  CHECK(text.find("-4.43") == std::string::npos);
  r.eager_run_median_us = 185.0;
  text = format_times(r, df);
  CHECK(text.find("launch overhead (ungated − gated run): 2.04 us") != std::string::npos);
}

TEST_CASE("launch_graph: transitive reduction, longest chain, critical path", "[replay]") {
  Dataflow df;
  df.kernels.resize(5);
  auto dep = [&](int a, int b) {
    Dependency d;
    d.from = a;
    d.to = b;
    df.dependencies.push_back(d);
  };
  dep(0, 1), dep(0, 2), dep(1, 3), dep(2, 3), dep(0, 3), dep(0, 3), dep(3, 4), dep(1, 4);
  LaunchGraph g = launch_graph(df);
  CHECK(g.dependency_pairs == 7);
  CHECK(g.edges == 5);
  CHECK(g.preds[3] == std::vector<int>{1, 2});
  CHECK(g.preds[4] == std::vector<int>{3});
  CHECK(g.longest_chain == 4);
  CHECK(g.longest_path == std::vector<int>{0, 1, 3, 4});
  CriticalPath cp = critical_path(g, {1, 1, 5, 1, 1});
  CHECK(cp.time_us == Approx(8));
  CHECK(cp.kernels == std::vector<int>{0, 2, 3, 4});
}

TEST_CASE("dag mode: graph edges are the transitively reduced dependencies, on every sample", "[replay]") {
  for (const std::string& model : kModels) {
    INFO(model);
    Dataflow df = golden(model);
    ReplayOptions opt = options(model);
    if (!df.params.empty() && opt.inputs.params.empty()) {
      WARN("no params.bin for " << model << ": skipped");
      continue;
    }
    std::set<std::pair<int, int>> want = brute_reduction(df);
    LaunchGraph g = launch_graph(df);
    std::set<std::pair<int, int>> core;
    for (size_t v = 0; v < g.preds.size(); ++v)
      for (int u : g.preds[v]) core.insert({u, static_cast<int>(v)});
    CHECK(core == want);

    FakeDriver fake;
    opt.mode = ReplayMode::Dag;
    opt.warmup = 0;
    opt.repeat = 1;
    std::ostringstream log;
    auto rep = replay(df, opt, log);
    INFO(log.str());
    REQUIRE(rep);
    std::vector<Call> nodes = fake.calls("cuGraphAddKernelNode");
    REQUIRE(nodes.size() == df.kernels.size());
    std::set<std::pair<int, int>> got;
    for (size_t i = 0; i < nodes.size(); ++i) {
      CHECK(nodes[i].result == 0);
      CHECK(nodes[i].num("node_index") == i);
      CHECK(nodes[i].at("name") == df.kernels[i].name);
      std::string deps = nodes[i].at("deps");
      if (deps == "-") continue;
      std::istringstream ss(deps);
      std::string item;
      while (std::getline(ss, item, ',')) got.insert({std::stoi(item), static_cast<int>(i)});
    }
    CHECK(got == want);
    CHECK(rep->dag_edges == want.size());
    CHECK(rep->dag_longest_chain == g.longest_chain);
    CHECK(rep->dag_longest_chain >= 1);
    CHECK(rep->dag_critical_path_us <= rep->kernel_sum_median_us + 1e-9);
    // The packed parameters of every node are those of the eager launches.
    std::vector<Call> launches = fake.calls("cuLaunchKernel");
    for (size_t i = 0; i < nodes.size(); ++i) CHECK(nodes[i].at("params") == launches[i].at("params"));
  }
}

TEST_CASE("node slices: live-ins are the buffers read before written, on every sample", "[replay]") {
  for (const std::string& model : kModels) {
    INFO(model);
    Dataflow df = golden(model);
    ReplayOptions base = options(model);
    if (!df.params.empty() && base.inputs.params.empty()) {
      WARN("no params.bin for " << model << ": skipped");
      continue;
    }
    std::string dumps = test::temp_dir() + "/dumps-" + model;
    {
      FakeDriver fake;
      ReplayOptions opt = base;
      opt.dump_dir = dumps;
      std::ostringstream log;
      REQUIRE(replay(df, opt, log));
    }
    // The middle third of the nodes that launch kernels.
    std::vector<int> with_kernels;
    for (const Node& n : df.nodes)
      if (!n.kernels.empty()) with_kernels.push_back(n.id);
    REQUIRE(with_kernels.size() >= 1);
    int from = with_kernels[with_kernels.size() / 3], to = with_kernels[std::max(with_kernels.size() / 3,
                                                                                   2 * with_kernels.size() / 3)];
    ReplayCommand cmd;
    cmd.dir = test::sample_dir(model);
    cmd.flow = test::source_dir() + "/test/golden/" + model + ".json";
    cmd.params = base.inputs.params;
    cmd.nodes = "n" + std::to_string(from) + "..n" + std::to_string(to);
    cmd.inputs_from = dumps;
    cmd.repeat = 1;
    cmd.warmup = 0;
    cmd.timing_json = test::temp_dir() + "/slice-" + model + ".json";
    FakeDriver fake;
    std::ostringstream out, err;
    int rc = run_replay_command(cmd, out, err);
    INFO(err.str());
    // The fake runs no kernels: a slice may differ from the dump (1) or, zeros against zeros,
    // verify nothing (3).
    CHECK((rc == 0 || rc == 1 || rc == 3));

    // Independently: walk the slice's kernels; a buffer read before any of them writes it is a live-in.
    int first = df.nodes[from].kernels.front(), last = df.nodes[to].kernels.back();
    std::set<int> written, live;
    size_t written_args = 0;
    std::set<int> touched_alloc;
    auto plan = make_plan(df, base.inputs);
    REQUIRE(plan);
    for (int k = first; k <= last; ++k) {
      for (const Arg& a : df.kernels[k].args)
        if (a.kind == Arg::Kind::Buffer) {
          touched_alloc.insert(plan->buffer_allocation[a.buffer]);
          if (a.access != Access::Write && !written.count(a.buffer)) live.insert(a.buffer);
        }
      for (const Arg& a : df.kernels[k].args)
        if (a.kind == Arg::Kind::Buffer && a.access != Access::Read) {
          written.insert(a.buffer);
          ++written_args;
        }
    }
    LaunchSlice sl = slice_launches(df, first, last);
    CHECK(std::set<int>(sl.live_ins.begin(), sl.live_ins.end()) == live);
    // Only what the slice touches is allocated; exactly the live-ins that have a value are loaded.
    CHECK(fake.calls("cuMemAlloc").size() == touched_alloc.size());
    std::multiset<uint64_t> loaded, want;
    for (const Call& c : fake.calls("cuMemcpyHtoD")) loaded.insert(c.num("bytes"));
    for (size_t i = 0; i < sl.live_ins.size(); ++i) {
      int b = sl.live_ins[i];
      bool is_file = std::count(df.params.begin(), df.params.end(), b) + std::count(df.inputs.begin(), df.inputs.end(), b);
      if (sl.live_in_writer[i] >= 0) want.insert(buffer_array_bytes(df.buffers[b]));
      else if (is_file) want.insert(df.buffers[b].bytes);
    }
    CHECK(loaded == want);
    // Every launch of the slice, and nothing else; every written argument compared.
    std::vector<Call> launches = fake.calls("cuLaunchKernel");
    REQUIRE(launches.size() == static_cast<size_t>(2 * (last - first + 1)));
    for (int k = first; k <= last; ++k) CHECK(launches[k - first].at("name") == df.kernels[k].name);
    auto j = nlohmann::json::parse(test::slurp(cmd.timing_json));
    CHECK(j["kernels"].size() == static_cast<size_t>(last - first + 1));
    CHECK(j["slice_kernels"][0] == first);
    size_t rows = 0;
    std::istringstream lines(out.str());
    std::string line;
    bool in_checks = false;
    while (std::getline(lines, line)) {
      if (line.rfind("output ", 0) == 0) in_checks = true;
      else if (in_checks) ++rows;
    }
    CHECK(rows == written_args);
  }
}

TEST_CASE("node slice errors: empty range, a dump of another model, a missing live-in", "[replay]") {
  std::string dumps = test::temp_dir() + "/dumps";
  Dataflow df = golden("sort_scan");
  {
    FakeDriver fake;
    ReplayOptions opt = options("sort_scan");
    opt.dump_dir = dumps;
    std::ostringstream log;
    REQUIRE(replay(df, opt, log));
  }
  auto run = [&](const std::string& nodes, const std::string& from, std::string* err_text) {
    FakeDriver fake;
    ReplayCommand cmd;
    cmd.dir = test::sample_dir("sort_scan");
    cmd.flow = test::source_dir() + "/test/golden/sort_scan.json";
    cmd.nodes = nodes;
    cmd.inputs_from = from;
    cmd.quiet = true;
    std::ostringstream out, err;
    int rc = run_replay_command(cmd, out, err);
    *err_text = err.str();
    return rc;
  };
  std::string e;
  CHECK(run("n0..n0", dumps, &e) == 64);
  CHECK(e == "kdflow replay: error: --nodes n0..n0: nodes 0..0 launch no kernel\n");
  CHECK(run("n4..n2", dumps, &e) == 64);
  CHECK(e == "kdflow replay: error: --nodes n4..n2: node 4 comes after node 2\n");
  CHECK(run("n2..n99", dumps, &e) == 64);
  CHECK(e == "kdflow replay: error: --nodes: no node n99 (the graph has 7)\n");
  // The fake's dumps are zeros: the slice matches them, and a constant would too (exit 3).
  CHECK(run("tvmgen_default_fused_cast..tvmgen_default_fused_argsort", dumps, &e) == 3);
  CHECK(e.find("kdflow replay: nothing verified") != std::string::npos);

  // A dump of another model: a file named after a kernel this model has under another name.
  std::string other = test::temp_dir() + "/other";
  std::filesystem::create_directories(other);
  for (const auto& f : std::filesystem::directory_iterator(dumps)) std::filesystem::copy(f.path(), other);
  std::filesystem::copy(dumps + "/0_tvmgen_default_fused_topk_kernel_arg1.npy",
                        other + "/0_tvmgen_default_fused_nn_dense_kernel_arg0.npy");
  CHECK(run("n2..n4", other, &e) == 65);
  CHECK(e == other + "/0_tvmgen_default_fused_nn_dense_kernel_arg0.npy: error: a dump of another model: kernel 0 of "
                     "this model is tvmgen_default_fused_topk_kernel, not tvmgen_default_fused_nn_dense_kernel\n");

  // A missing live-in: the slice n2 (kernel 8, cast) reads what kernel 7 wrote.
  std::string partial = test::temp_dir() + "/partial";
  std::filesystem::create_directories(partial);
  for (const auto& f : std::filesystem::directory_iterator(dumps))
    if (f.path().filename().string().rfind("7_", 0) != 0) std::filesystem::copy(f.path(), partial);
  CHECK(run("n2", partial, &e) == 66);
  CHECK(one_line(e));
  CHECK(e.find("error: missing live-in: buffer ") != std::string::npos);
  CHECK(e.find("kernel 7 (tvmgen_default_fused_topk_kernel_5) wrote it last; replay the whole model with --dump-dir") !=
        std::string::npos);
  CHECK(run("n2", test::temp_dir() + "/nowhere", &e) == 66);
}

// ---------------------------------------------------------------------------------------
// Relax builds (TVM 0.20): one CUDA module per device function, weights from the VM
// executable's constant pool.

namespace {

uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// device_<i>.cubin of a Relax sample, in index order.
std::vector<std::string> relax_modules(const std::string& model) {
  std::vector<std::string> out;
  for (int i = 0; file_exists(fmt::format("{}/device_{}.cubin", test::sample_dir(model), i)); ++i)
    out.push_back(fmt::format("{}/device_{}.cubin", test::sample_dir(model), i));
  return out;
}

/// Kernel name → index of the module whose TVM metadata lists it (device_<i>.tvm_meta.json).
std::map<std::string, size_t> relax_kernel_module(const std::string& model, size_t modules) {
  std::map<std::string, size_t> out;
  for (size_t i = 0; i < modules; ++i) {
    std::string file = fmt::format("{}/device_{}.tvm_meta.json", test::sample_dir(model), i);
    auto meta = nlohmann::json::parse(test::slurp(file));
    for (auto it = meta.at("func_info").begin(); it != meta.at("func_info").end(); ++it) {
      INFO(it.key() << " in two modules' metadata");
      CHECK(out.emplace(it.key(), i).second);
    }
  }
  return out;
}

/// Every kernel was looked up in every module; it was found in exactly the module TVM put
/// it in, and nowhere else (the fake answers CUDA_ERROR_NOT_FOUND, as the driver does).
void check_relax_lookups(const FakeDriver& fake, const Dataflow& df, const std::string& model, size_t modules) {
  std::vector<Call> loads = fake.calls("cuModuleLoadDataEx");
  REQUIRE(loads.size() == modules);
  std::map<uint64_t, size_t> index_of;
  for (size_t i = 0; i < loads.size(); ++i) {
    CHECK(loads[i].result == 0);
    CHECK(loads[i].at("kind") == "fatbin");  // TVM 0.20 saves fatbins as device_<i>.cubin
    CHECK(loads[i].at("symbols") == "1");     // the fake read the one kernel from its ELF image
    index_of[loads[i].num("module")] = i;
  }
  std::map<std::string, size_t> expected = relax_kernel_module(model, modules);
  std::map<std::string, std::vector<size_t>> found, missed;
  for (const Call& c : fake.calls("cuModuleGetFunction")) {
    INFO(c.line);
    REQUIRE(index_of.count(c.num("module")));
    if (c.result == 0) {
      found[c.at("name")].push_back(index_of[c.num("module")]);
    } else {
      CHECK(c.result == 500);  // CUDA_ERROR_NOT_FOUND
      missed[c.at("name")].push_back(index_of[c.num("module")]);
    }
  }
  std::set<std::string> names;
  for (const Kernel& k : df.kernels) names.insert(k.name);
  CHECK(found.size() == names.size());
  for (const std::string& n : names) {
    INFO("kernel " << n);
    REQUIRE(expected.count(n));
    CHECK(found[n] == std::vector<size_t>{expected[n]});
    CHECK(missed[n].size() == modules - 1);
  }
  CHECK(fake.calls("cuModuleUnload").size() == modules);
}

/// Each constant uploaded is the pool's tensor, byte for byte (by the fake's hash of the copy).
void check_pool_uploads(const FakeDriver& fake, const Dataflow& df, const std::string& vm_exec) {
  std::string bytes = test::slurp(vm_exec);
  auto ex = parse_vm_executable(bytes, vm_exec);
  REQUIRE(ex);
  std::vector<Call> up = fake.calls("cuMemcpyHtoD");
  REQUIRE(up.size() >= df.params.size());
  REQUIRE(!df.params.empty());
  for (size_t i = 0; i < df.params.size(); ++i) {
    const Buffer& b = df.buffers[df.params[i]];
    INFO("param " << b.name << " constant " << b.constant_index);
    REQUIRE(b.constant_index >= 0);
    REQUIRE(static_cast<size_t>(b.constant_index) < ex->constants.size());
    const VmConstant& c = ex->constants[b.constant_index];
    CHECK(up[i].num("bytes") == c.nbytes);
    CHECK(up[i].num("fnv") == fnv1a(std::string_view(bytes).substr(c.data_offset, c.nbytes)));
  }
}

}  // namespace

TEST_CASE("Relax builds replay: every device module loaded, each kernel from its own, pool constants uploaded",
          "[replay][relax]") {
  for (const std::string model : {"relax_mlp", "relax_mlp_compiled"})
    for (ReplayMode mode : {ReplayMode::Eager, ReplayMode::Graph, ReplayMode::Dag}) {
      INFO(model << " " << to_string(mode));
      Dataflow df = golden(model);
      ReplayOptions opt = options(model);
      REQUIRE(opt.modules.empty());  // no device.cubin / device.ptx: a Relax build
      opt.modules = relax_modules(model);
      REQUIRE(opt.modules.size() == 5);
      opt.inputs.params = test::sample_dir(model) + "/vm_exec.bin";
      opt.mode = mode;
      FakeDriver fake;
      std::ostringstream log;
      auto rep = replay(df, opt, log);
      INFO(log.str());
      REQUIRE(rep);
      check_run(fake, df, *rep, false);
      check_relax_lookups(fake, df, model, opt.modules.size());
      check_pool_uploads(fake, df, opt.inputs.params);
      CHECK(rep->module_format == ModuleFormat::Fatbin);
      CHECK(rep->module.find("device_4.cubin") != std::string::npos);
      for (const auto& [name, m] : relax_kernel_module(model, opt.modules.size()))
        CHECK(log.str().find(fmt::format("replay: kernel {} from {}/device_{}.cubin\n", name, test::sample_dir(model),
                                         m)) != std::string::npos);
      // 1 checked + 1 warm-up + 2 timed eager runs; graph mode captures one more sequence.
      std::vector<Call> launches = fake.calls("cuLaunchKernel");
      CHECK(launches.size() == df.kernels.size() * (mode == ReplayMode::Graph ? 5 : 4));
      if (mode == ReplayMode::Graph) CHECK(fake.calls("cuStreamBeginCapture").size() == 1);
      if (mode == ReplayMode::Dag) CHECK(!fake.calls("cuGraphAddKernelNode").empty());
      REQUIRE(rep->results.size() == 1);
      CHECK(rep->results[0].shape == std::vector<int64_t>{1, 10});
    }
}

TEST_CASE("tvm-ffi builds (TVM 0.26) replay: the one device module, pool constants of the 0.21+ executable uploaded",
          "[replay][relax][ffi]") {
  // TVM 0.21+ writes vm_exec.bin without the payload length before the magic: replay must
  // still take it for the constant pool, not for a params file.
  for (const std::string model : {"ffi_mlp", "ffi_mlp_compiled", "ffi_batch_mlp"})
    for (ReplayMode mode : {ReplayMode::Eager, ReplayMode::Graph, ReplayMode::Dag}) {
      INFO(model << " " << to_string(mode));
      Dataflow df = golden(model);
      ReplayOptions opt = options(model);
      opt.modules = relax_modules(model);
      REQUIRE(opt.modules.size() == 1);
      opt.inputs.params = test::sample_dir(model) + "/vm_exec.bin";
      opt.mode = mode;
      FakeDriver fake;
      std::ostringstream log;
      auto rep = replay(df, opt, log);
      INFO(log.str());
      if (!rep) INFO(rep.error().message);
      REQUIRE(rep);
      check_run(fake, df, *rep, false);
      check_pool_uploads(fake, df, opt.inputs.params);
      CHECK(fake.calls("cuModuleLoadDataEx").size() == 1);
      CHECK(fake.calls("cuModuleGetFunction").size() == std::set<std::string>([&] {
              std::set<std::string> n;
              for (const Kernel& k : df.kernels) n.insert(k.name);
              return n;
            }()).size());
      std::vector<Call> launches = fake.calls("cuLaunchKernel");
      CHECK(launches.size() == df.kernels.size() * (mode == ReplayMode::Graph ? 5 : 4));
      REQUIRE(rep->results.size() == 1);
      CHECK(rep->results[0].shape == std::vector<int64_t>{model == "ffi_batch_mlp" ? 8 : 1, 10});
    }
}

TEST_CASE("launches with PDL or cooperative attributes go through cuLaunchKernelEx, as TVM 0.23+ launches them",
          "[replay][ffi]") {
  // ffi_mlp's flow with the attributes set on two kernels (the IR as a table with TVM 0.24's
  // tags gives it; test/pipeline/ffi.cpp): the rest launch with cuLaunchKernel as before.
  Dataflow base = golden("ffi_mlp");
  base.kernels[1].programmatic_dependent_launch = true;
  base.kernels[4].cooperative_launch = true;
  for (ReplayMode mode : {ReplayMode::Eager, ReplayMode::Graph, ReplayMode::Dag}) {
    INFO(to_string(mode));
    ReplayOptions opt = options("ffi_mlp");
    opt.modules = relax_modules("ffi_mlp");
    opt.inputs.params = test::sample_dir("ffi_mlp") + "/vm_exec.bin";
    opt.mode = mode;
    FakeDriver fake;
    std::ostringstream log;
    auto rep = replay(base, opt, log);
    INFO(log.str());
    if (!rep) INFO(rep.error().message);
    REQUIRE(rep);
    std::vector<Call> ex = fake.calls("cuLaunchKernelEx"), plain = fake.calls("cuLaunchKernel");
    // 1 checked + 1 warm-up + 2 timed runs eagerly; graph mode captures one more sequence.
    const size_t runs = mode == ReplayMode::Graph ? 5 : 4;
    CHECK(ex.size() == 2 * runs);
    CHECK(plain.size() == 3 * runs);
    for (const Call& c : ex) {
      CHECK(c.result == 0);
      CHECK(c.at("attrs") == (c.at("name") == base.kernels[1].name ? "pdl" : "cooperative"));
    }
    for (const Call& c : plain) CHECK(c.at("attrs") == "-");
    if (mode == ReplayMode::Dag) {
      std::vector<Call> set = fake.calls("cuGraphKernelNodeSetAttribute");
      REQUIRE(set.size() == 1);
      CHECK(set[0].at("attr") == "2");
      CHECK(set[0].result == 0);
      CHECK(log.str().find("replay: note: --mode dag runs kernel 1 (" + base.kernels[1].name) != std::string::npos);
    }
  }
  // The plan says so.
  ReplayOptions dry = options("ffi_mlp");
  dry.inputs.params = test::sample_dir("ffi_mlp") + "/vm_exec.bin";
  dry.dry_run = true;
  auto plan = replay(base, dry, std::cerr);
  REQUIRE(plan);
  std::string text = format_plan(plan->plan, base);
  CHECK(text.find("launch 1: " + base.kernels[1].name) != std::string::npos);
  CHECK(text.find(" smem 0 pdl params") != std::string::npos);
  CHECK(text.find(" smem 0 cooperative params") != std::string::npos);
  // A cooperative grid the device cannot hold at once fails as the real driver fails it,
  // named as the kernel's launch.
  Dataflow big = base;
  big.kernels[4].grid = {100000, 1, 1};
  ReplayOptions opt = options("ffi_mlp");
  opt.modules = relax_modules("ffi_mlp");
  opt.inputs.params = test::sample_dir("ffi_mlp") + "/vm_exec.bin";
  FakeDriver fake;
  std::ostringstream log;
  auto rep = replay(big, opt, log);
  REQUIRE_FALSE(rep);
  INFO(rep.error().message);
  CHECK(rep.error().message.find("/kernels/4: error: cuLaunchKernelEx of kernel 4 (" + base.kernels[4].name) !=
        std::string::npos);
  reset_fake();
}

TEST_CASE("Relax builds: a kernel in none of the modules, or in two, is one line before any launch",
          "[replay][relax]") {
  Dataflow df = golden("relax_mlp");
  ReplayOptions opt = options("relax_mlp");
  opt.inputs.params = test::sample_dir("relax_mlp") + "/vm_exec.bin";
  opt.modules = relax_modules("relax_mlp");
  REQUIRE(opt.modules.size() == 5);
  {
    // device_3 holds log_softmax_kernel.
    ReplayOptions o = opt;
    o.modules.erase(o.modules.begin() + 3);
    FakeDriver fake;
    std::ostringstream log;
    auto rep = replay(df, o, log);
    REQUIRE_FALSE(rep);
    CHECK(rep.error().message.find(":/kernels/") != std::string::npos);
    CHECK(rep.error().message.find("error: kernel log_softmax_kernel is in none of the 4 device modules (") !=
          std::string::npos);
    CHECK(rep.error().message.find('\n') == std::string::npos);
    CHECK(fake.calls("cuLaunchKernel").empty());
    CHECK(fake.calls("cuMemAlloc").empty());
  }
  {
    // A second copy of device_0 under another name: its kernel is defined twice.
    std::string copy = test::temp_dir() + "/other.cubin";
    REQUIRE(write_file_atomic(copy, test::slurp(opt.modules[0])));
    ReplayOptions o = opt;
    o.modules.push_back(copy);
    FakeDriver fake;
    std::ostringstream log;
    auto rep = replay(df, o, log);
    REQUIRE_FALSE(rep);
    CHECK(rep.error().message.find("error: kernel fused_matmul1_add1_relu1_kernel is defined by 2 device modules (" +
                                   opt.modules[0] + " and " + copy + "); replay cannot tell which to run") !=
          std::string::npos);
    CHECK(rep.error().message.find('\n') == std::string::npos);
    CHECK(fake.calls("cuLaunchKernel").empty());
  }
  {
    // Files named alike but for the extension are one module's alternatives (as Relay's
    // device.cubin and device.ptx): the binary is loaded, the PTX given first never is.
    std::string dir = test::temp_dir();
    ReplayOptions o = opt;
    o.modules.clear();
    REQUIRE(write_file_atomic(dir + "/device_0.ptx", ".version 8.8\n.target sm_90\n"));
    o.modules.push_back(dir + "/device_0.ptx");
    for (int i = 0; i < 5; ++i) {
      std::string f = fmt::format("{}/device_{}.cubin", dir, i);
      REQUIRE(write_file_atomic(f, test::slurp(opt.modules[i])));
      o.modules.push_back(f);
    }
    FakeDriver fake;
    std::ostringstream log;
    auto rep = replay(df, o, log);
    INFO(log.str());
    REQUIRE(rep);
    std::vector<Call> loads = fake.calls("cuModuleLoadDataEx");
    CHECK(loads.size() == 5);
    for (const Call& c : loads) CHECK(c.at("kind") == "fatbin");
    CHECK(rep->module.rfind(dir + "/device_0.cubin, ", 0) == 0);
  }
}

TEST_CASE("the fake driver finds a kernel only in the cubin that defines it", "[replay][relax]") {
  // Each Relax cubin defines one kernel: another module's kernel is CUDA_ERROR_NOT_FOUND,
  // even where its name ends another symbol or string of the image.
  FakeDriver fake;
  std::string dir = test::sample_dir("relax_mlp");
  std::string device0 = test::slurp(dir + "/device_0.cubin");
  Dataflow df = golden("relax_mlp");
  ReplayOptions opt = options("relax_mlp");
  opt.inputs.params = dir + "/vm_exec.bin";
  opt.modules = {dir + "/device_0.cubin"};
  std::ostringstream log;
  auto rep = replay(df, opt, log);
  REQUIRE_FALSE(rep);  // one module: Relay's message, naming it
  CHECK(rep.error().message.find("is not in " + dir + "/device_0.cubin: CUDA_ERROR_NOT_FOUND") != std::string::npos);
  std::vector<Call> gets = fake.calls("cuModuleGetFunction");
  REQUIRE(!gets.empty());
  CHECK(gets.back().result == 500);
  // The kernel's name with a prefix cut off is in the image, but is no symbol.
  const std::string whole = "fused_matmul1_add1_relu1_kernel";
  REQUIRE(device0.find(whole + '\0') != std::string::npos);
  Dataflow cut = df;
  for (Kernel& k : cut.kernels) k.name = "relu1_kernel";
  FakeDriver fake2;
  rep = replay(cut, opt, log);
  REQUIRE_FALSE(rep);
  CHECK(fake2.calls("cuModuleGetFunction").back().result == 500);
}

#ifdef KDFLOW_HAVE_CLANG
TEST_CASE("kdflow replay DIR on the Relax samples: extracted, every device_<i>.cubin, outputs compared",
          "[replay][relax]") {
  for (const std::string model : {"relax_mlp", "relax_mlp_compiled"})
    for (const char* mode : {"eager", "graph", "dag"}) {
      INFO(model << " " << mode);
      FakeDriver fake;
      ReplayCommand cmd;
      cmd.dir = test::sample_dir(model);
      cmd.mode = mode;
      cmd.repeat = 1;
      cmd.output_dir = test::temp_dir() + "/out";
      std::ostringstream out, err;
      // The fake runs no kernel: the output stays zero and differs from TVM's output_0.npy.
      CHECK(run_replay_command(cmd, out, err) == 1);
      INFO(err.str());
      CHECK(err.str().find("kdflow replay: error: 1 of 1 compared outputs differs") != std::string::npos);
      CHECK(out.str().find("MISMATCH") != std::string::npos);
      CHECK(fake.calls("cuModuleLoadDataEx").size() == 5);
      // Checked, warm-up and one timed run; graph mode captures one more sequence.
      CHECK(fake.calls("cuLaunchKernel").size() == 5 * (std::string(mode) == "graph" ? 4 : 3));
      auto a = read_npy(cmd.output_dir + "/output_0.npy");
      auto e = read_npy(cmd.dir + "/output_0.npy");
      REQUIRE(a);
      REQUIRE(e);
      CHECK(a->shape == e->shape);
      CHECK(a->dtype == e->dtype);
      // Against what it produced (zeros, the fake runs no kernel): equal, and a constant would
      // be too, so the run verified nothing (exit 3).
      cmd.expect = {cmd.output_dir + "/output_0.npy"};
      cmd.output_dir.clear();
      std::ostringstream out2, err2;
      CHECK(run_replay_command(cmd, out2, err2) == 3);
      CHECK(err2.str().find("kdflow replay: nothing verified") != std::string::npos);
    }
}
#endif

// A labelled unit test of one construct: host copies (an LLM session's KV-cache auxiliary
// arrays, Dataflow::host_copies) on the mlp_fp16 sample's flow (its params are in the
// repository), one before kernel 4 into the buffer it reads (written by kernel 3) and one
// after the last kernel into the output. Real
// session flows are replayed in graph and dag mode by test/tvm and scripts/gpu-check.sh.
TEST_CASE("host copies: eager uploads between steps, graph and dag copy nodes from pinned memory", "[replay]") {
  // mlp_fp16: its params are in the repository, so the test runs in a clean clone too.
  Dataflow df = golden("mlp_fp16");
  REQUIRE(df.kernels.size() == 7);
  const size_t a = 3, n = df.kernels.size();  // the first copy goes between kernels a and a + 1
  HostCopy mid;
  mid.node = df.kernels[a].node;
  mid.buffer = df.kernels[a + 1].args[1].buffer;  // kernel a + 1's input, kernel a's output
  REQUIRE(df.kernels[a].args[0].buffer == mid.buffer);
  mid.values = {1, 2, 3, 4};
  HostCopy last;
  last.node = df.kernels[n - 1].node;
  last.buffer = df.kernels[n - 1].args[1].buffer;  // the output
  REQUIRE(df.kernels[n - 1].args[1].access == Access::Write);
  last.offset = 8;
  last.values = {7, 8};
  df.host_copies = {mid, last};
  auto fnv = [](const std::vector<int64_t>& v) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t x : v)
      for (int b = 0; b < 4; ++b) h = (h ^ ((static_cast<uint32_t>(x) >> (8 * b)) & 0xff)) * 1099511628211ull;
    return fmt::format("0x{:016x}", h);
  };
  const std::string f_mid = fnv(mid.values), f_last = fnv(last.values);
  for (ReplayMode mode : {ReplayMode::Eager, ReplayMode::Graph, ReplayMode::Dag}) {
    INFO(to_string(mode));
    FakeDriver fake;
    ReplayOptions opt = options("mlp_fp16");
    REQUIRE_FALSE(opt.inputs.params.empty());
    opt.mode = mode;
    opt.warmup = 1;
    opt.repeat = 2;
    std::ostringstream log;
    auto rep = replay(df, opt, log);
    INFO(log.str());
    REQUIRE(rep);
    // Eager runs (1 checked + 1 warm-up + 2 timed): each copy queued once per run on the work
    // stream (not the NULL stream, which the work stream does not wait for) and landing in its
    // order: the first between kernel 2 and kernel 3, the second after the last kernel. No
    // launch may run before a copy lands (racing=0).
    std::vector<Call> all = fake.calls();
    int runs = 0;
    std::string order;
    for (const Call& c : all) {
      if (c.name == "cuStreamBeginCapture" || c.name == "cuGraphCreate") break;  // graphs: checked below
      if (c.name == "cuLaunchKernel" && c.at("captured") == "0")
        order += c.at("name") == df.kernels[a].name ? "A" : c.at("name") == df.kernels[a + 1].name ? "B" : "k";
      if (c.name == "memcpy-lands" && c.at("fnv") == f_mid) order += "M";
      if (c.name == "memcpy-lands" && c.at("fnv") == f_last) {
        order += "L";
        ++runs;
      }
    }
    CHECK(runs == 4);
    const std::string one_run = std::string(a, 'k') + "AMB" + std::string(n - a - 2, 'k') + "L";
    CHECK(order == one_run + one_run + one_run + one_run);
    for (const Call& c : fake.calls("cuLaunchKernel")) CHECK(c.num("racing") == 0);
    std::vector<Call> async, lands, eager_async;
    bool graphs = false;
    for (const Call& c : all) {
      graphs = graphs || c.name == "cuStreamBeginCapture" || c.name == "cuGraphCreate";
      if (c.name == "cuMemcpyHtoDAsync") (c.at("captured") == "1" ? async : eager_async).push_back(c);
      if (c.name == "memcpy-lands" && graphs) lands.push_back(c);
    }
    REQUIRE(eager_async.size() == 8);
    for (const Call& c : eager_async) CHECK((c.result == 0 && c.at("pinned") == "0"));
    if (mode == ReplayMode::Eager) {
      CHECK(async.empty());
      CHECK(lands.empty());
      continue;
    }
    // One copy node per host copy, from pinned memory, captured; each lands at every graph
    // launch (1 checked + 1 warm-up + 2 timed) with the copy's bytes.
    REQUIRE(async.size() == 2);
    for (const Call& c : async) {
      CHECK(c.result == 0);
      CHECK(c.at("captured") == "1");
      CHECK(c.at("pinned") == "1");
    }
    CHECK(async[0].num("bytes") == 16);
    CHECK(async[1].num("bytes") == 8);
    CHECK(async[1].num("offset") == 8);
    REQUIRE(lands.size() == 8);
    for (size_t i = 0; i < lands.size(); ++i) CHECK(lands[i].at("fnv") == (i % 2 == 0 ? f_mid : f_last));
    CHECK(fake.calls("cuGraphLaunch").size() == 4);
    if (mode == ReplayMode::Graph) {
      // In the captured sequence: after kernel 2, before kernel 3; the other after kernel 5.
      std::string seq;
      for (const Call& c : all)
        if ((c.name == "cuLaunchKernel" || c.name == "cuMemcpyHtoDAsync") && c.at("captured") == "1")
          seq += c.name == "cuMemcpyHtoDAsync" ? "C" : "k";
      CHECK(seq == std::string(a + 1, 'k') + "C" + std::string(n - a - 1, 'k') + "C");
    } else {
      // Child-graph nodes ordered by the memory they write: the first after kernel 2 (which
      // writes that buffer) and before kernel 3 (which reads it); the second after kernel 5.
      std::vector<Call> children = fake.calls("cuGraphAddChildGraphNode");
      std::vector<Call> kernels = fake.calls("cuGraphAddKernelNode");
      REQUIRE(children.size() == 2);
      REQUIRE(kernels.size() == n);
      auto deps = [](const Call& c) {
        std::set<uint64_t> out;
        std::istringstream ss(c.at("deps"));
        std::string item;
        while (std::getline(ss, item, ','))
          if (item != "-") out.insert(std::stoull(item));
        return out;
      };
      const uint64_t copy0 = children[0].num("node_index"), copy1 = children[1].num("node_index");
      CHECK(deps(children[0]).count(kernels[a].num("node_index")) == 1);
      CHECK(deps(kernels[a + 1]).count(copy0) == 1);
      CHECK(deps(kernels[a + 1]).count(kernels[a].num("node_index")) == 0);  // implied through the copy
      CHECK(deps(children[1]).count(kernels[n - 1].num("node_index")) == 1);
      (void)copy1;
      CHECK(log.str().find("2 host copies") != std::string::npos);
    }
  }
}

// A sharded flow (test/fixtures/tp_mlp, TVM 0.27, 2 ranks) on the CUDA back end: every rank on
// a thread of its own, in the one device's primary context or (two devices) each on its own,
// the allreduce made on the host between them. The fake runs no kernel, so both ranks' outputs
// differ from the references (exit 1): what is checked is what each rank asked of the driver.
TEST_CASE("replay: a sharded flow on CUDA runs every rank, on one device or one each", "[sharded]") {
  Env lib("KDFLOW_CUDA_LIBRARY", KDFLOW_FAKE_CUDA);
  const std::string dir = test::source_dir() + "/test/fixtures/tp_mlp";
  const std::string log_path = test::temp_dir() + "/fake.log";
  Env log("KDFLOW_FAKE_CUDA_LOG", log_path);
  auto lines = [&](const std::string& start) {
    std::vector<std::string> out;
    std::ifstream f(log_path);
    for (std::string line; std::getline(f, line);)
      if (line.rfind(start, 0) == 0) out.push_back(line);
    return out;
  };
  auto on_thread = [](const std::vector<std::string>& v, const std::string& tag) {
    return std::count_if(v.begin(), v.end(), [&](const std::string& l) {
      return tag.empty() ? l.find(" thread=") == std::string::npos : l.find(" thread=" + tag) != std::string::npos;
    });
  };
  SECTION("one device: both ranks on GPU 0") {
    test::RunResult r = test::run_kdflow({"replay", dir, "--warmup", "1", "--repeat", "2"});
    CHECK(r.exit_code == 1);  // the fake computes nothing: both ranks' outputs differ
    CHECK(r.out.find("every rank on GPU 0: 1 GPU found for 2 ranks") != std::string::npos);
    CHECK(r.out.find("the collectives made by kdflow on the host between them (4 in all runs") != std::string::npos);
    CHECK(r.out.find("r0:0") != std::string::npos);
    CHECK(r.out.find("r1:0") != std::string::npos);
    CHECK(r.out.find("not gated (the ranks meet at every collective)") != std::string::npos);
    // Each rank's back end logs under its name, never interleaved with the other's.
    CHECK(r.err.find("rank 0: replay: device 0: kdflow fake CUDA device") != std::string::npos);
    CHECK(r.err.find("rank 1: replay: device 0: kdflow fake CUDA device") != std::string::npos);
    // Two threads, each with the primary context current, its own stream, its 7 allocations
    // and 5 launches per run (4: checked, warm-up, 2 timed), the 4 collectives' receives written back.
    std::vector<std::string> allocs = lines("cuMemAlloc bytes="), launches = lines("cuLaunchKernel");
    CHECK(lines("cuDevicePrimaryCtxRetain device=0 -> 0").size() == 2);
    CHECK(lines("cuStreamCreate").size() == 2);
    CHECK(allocs.size() == 14);
    CHECK(launches.size() == 40);
    CHECK(lines("cuCtxSetCurrent ctx=0xc0 -> 0").size() >= 2);
    size_t tagged = on_thread(allocs, "1") + on_thread(allocs, "2");
    CHECK(tagged >= 7);  // at least one rank is not the first thread to call the fake
    for (const std::string& l : lines("")) CHECK(l.find("error=no_current_context") == std::string::npos);
    // The allreduce's result is written on each rank's stream, before the kernel that reads it.
    for (const std::string& l : launches) CHECK(l.find(" racing=0 ") != std::string::npos);
  }
  SECTION("two devices: rank r on GPU r, each in its own context and memory") {
    Env devices("KDFLOW_FAKE_CUDA_DEVICES", "2");
    test::RunResult r = test::run_kdflow({"replay", dir, "--warmup", "0", "--repeat", "1"});
    CHECK(r.exit_code == 1);
    CHECK(r.out.find("rank r on GPU r: GPUs 0, 1") != std::string::npos);
    CHECK(r.err.find("rank 1: replay: device 1: kdflow fake CUDA device") != std::string::npos);
    CHECK(lines("cuDevicePrimaryCtxRetain device=0 -> 0").size() == 1);
    CHECK(lines("cuDevicePrimaryCtxRetain device=1 -> 0").size() == 1);
    CHECK(lines("cuCtxSetCurrent ctx=0x1c0 -> 0").size() >= 1);
    CHECK(lines("cuLaunchKernel").size() == 20);
    CHECK(lines("cuDevicePrimaryCtxRelease device=1 -> 0").size() == 1);
  }
  SECTION("two devices and NCCL: the collectives on each rank's stream, through one communicator per rank") {
    Env devices("KDFLOW_FAKE_CUDA_DEVICES", "2");
    Env nccl("KDFLOW_NCCL_LIBRARY", KDFLOW_FAKE_NCCL);
    const std::string timing = test::temp_dir() + "/timing.json";
    test::RunResult r = test::run_kdflow({"replay", dir, "--warmup", "1", "--repeat", "2", "--timing-json", timing});
    CHECK(r.exit_code == 1);
    CHECK(r.out.find("the collectives made by NCCL 2.23.4") != std::string::npos);
    nlohmann::json t = nlohmann::json::parse(test::slurp(timing));
    CHECK(t["ranks"] == 2);
    CHECK(t["collectives"] == 4);
    CHECK(t["collectives_by"] == "nccl");
    CHECK(t["checks"].size() == 2);
    CHECK(r.out.find("rank r on GPU r: GPUs 0, 1") != std::string::npos);
    CHECK(lines("ncclCommInitAll ranks=2 -> 0").size() == 1);
    // One allreduce per run (4 runs) on each rank, each matched once both ranks made it.
    std::vector<std::string> calls = lines("ncclAllReduce");
    CHECK(calls.size() == 8);
    for (const std::string& l : calls) CHECK(l.find("count=256 dtype=7 op=0") != std::string::npos);
    CHECK(lines("nccl-matched seq=").size() == 4);
    CHECK(lines("nccl-mismatch").empty());
    CHECK(lines("ncclCommDestroy rank=").size() == 2);
    // No collective went through the host: each rank uploads its params and input (3 copies)
    // and reads back its output once; the host's collectives add a read and a write per rank
    // and run (below).
    CHECK(lines("cuMemcpyHtoD ").size() == 6);
    CHECK(lines("cuMemcpyHtoDAsync ").empty());
    CHECK(lines("cuMemcpyDtoH ").size() == 2);
    // --collectives host keeps them on the host even with NCCL at hand.
    std::remove(log_path.c_str());
    test::RunResult h = test::run_kdflow({"replay", dir, "--warmup", "1", "--repeat", "2", "--collectives", "host"});
    CHECK(h.exit_code == 1);
    CHECK(h.out.find("no NCCL: --collectives host") != std::string::npos);
    CHECK(lines("ncclCommInitAll").empty());
    CHECK(lines("cuMemcpyHtoD ").size() == 6);
    CHECK(lines("cuMemcpyHtoDAsync ").size() == 8);  // each rank's receive, on its stream, each run
    CHECK(lines("cuMemcpyDtoH ").size() == 10);
  }
  SECTION("--collectives nccl needs a GPU per rank and NCCL, else exit 69 in one line") {
    Env nccl("KDFLOW_NCCL_LIBRARY", KDFLOW_FAKE_NCCL);
    test::RunResult r = test::run_kdflow({"replay", dir, "--collectives", "nccl", "-q"});
    CHECK(r.exit_code == 69);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find("needs a GPU per rank: 2 ranks from GPU 0, and the machine has 1 GPU") != std::string::npos);
    Env devices("KDFLOW_FAKE_CUDA_DEVICES", "2");
    Env none("KDFLOW_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
    test::RunResult n = test::run_kdflow({"replay", dir, "--collectives", "nccl", "-q"});
    CHECK(n.exit_code == 69);
    CHECK(n.err.find("cannot load NCCL") != std::string::npos);
    // auto falls back to the host, and says why.
    test::RunResult a = test::run_kdflow({"replay", dir, "--warmup", "0", "--repeat", "1"});
    CHECK(a.exit_code == 1);
    CHECK(a.out.find("no NCCL: NCCL is not available: ") != std::string::npos);
  }
  SECTION("with NCCL, a rank that faults aborts every communicator and stops every rank") {
    Env devices("KDFLOW_FAKE_CUDA_DEVICES", "2");
    Env nccl("KDFLOW_NCCL_LIBRARY", KDFLOW_FAKE_NCCL);
    // add_kernel runs after the allreduce: both ranks have opened their device by then (a
    // fault while the other still retains its context would fail that retain, exit 69).
    Env fault("KDFLOW_FAKE_CUDA_FAULT", "add_kernel@1");
    test::RunResult r = test::run_kdflow({"replay", dir, "--warmup", "0", "--repeat", "1", "-q"});
    CHECK(r.exit_code == 70);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(lines("ncclCommAbort rank=").size() == 2);
    CHECK(lines("ncclCommDestroy").empty());
  }
  SECTION("a rank that faults stops every rank, in one line") {
    // add_kernel runs after the allreduce: both ranks have opened their device by then (a
    // fault while the other still retains its context would fail that retain, exit 69).
    Env fault("KDFLOW_FAKE_CUDA_FAULT", "add_kernel@1");
    test::RunResult r = test::run_kdflow({"replay", dir, "--warmup", "0", "--repeat", "1", "-q"});
    CHECK(r.exit_code == 70);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find("rank ") != std::string::npos);
    CHECK(r.err.find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos);
  }
  test::RunResult d = test::run_kdflow({"replay", dir, "--dry-run"});
  CHECK(d.exit_code == 0);
  CHECK(d.out.find("runtime.disco.allreduce node 7 after kernel 3: allreduce sum 256 float32 (1024 bytes)") !=
        std::string::npos);
}
