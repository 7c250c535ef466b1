// cublas.cpp — replay of cuBLAS library calls against the fake CUDA driver and the fake
// cuBLAS (test/fake_cublas), on the real sample samples/mlp_cublas (TVM 0.14, -libs=cublas:
// four tvm.contrib.cublas.matmul calls, each followed by a fused kernel reading the workspace
// the call wrote). Every logged cuBLAS call is checked against the IR's tensor views, and the
// product the fake computed against a CPU reference from the input and params.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"
#include "kdflow/support/io.h"
#include "kdflow/analysis/launch_graph.h"
#include "kdflow/formats/npy.h"
#include "kdflow/formats/params.h"
#include "kdflow/replay/replay.h"
#include "test_util.h"

using namespace kdflow;

namespace {

using test::Env;

struct Line {
  std::string name;
  std::map<std::string, std::string> kv;
  int result = -1;
  std::string text;
  std::string at(const std::string& k) const {
    auto it = kv.find(k);
    if (it == kv.end()) FAIL("no " << k << " in: " << text);
    return it->second;
  }
  uint64_t num(const std::string& k) const { return std::stoull(at(k), nullptr, 0); }
};

struct Fakes {
  std::string dir = test::temp_dir();
  std::string log_path = dir + "/fake.log";
  Env lib{"KDFLOW_CUDA_LIBRARY", KDFLOW_FAKE_CUDA};
  Env blas{"KDFLOW_CUBLAS_LIBRARY", KDFLOW_FAKE_CUBLAS};
  Env log{"KDFLOW_FAKE_CUDA_LOG", log_path};

  std::vector<Line> lines() const {
    std::vector<Line> out;
    std::ifstream f(log_path);
    std::string text;
    while (std::getline(f, text)) {
      Line l;
      l.text = text;
      std::istringstream ss(text);
      std::string tok;
      ss >> l.name;
      while (ss >> tok) {
        if (tok == "->") {
          ss >> l.result;
          continue;
        }
        size_t eq = tok.find('=');
        if (eq != std::string::npos) l.kv[tok.substr(0, eq)] = tok.substr(eq + 1);
      }
      out.push_back(std::move(l));
    }
    return out;
  }
  std::vector<Line> lines(const std::string& name) const {
    std::vector<Line> out;
    for (Line& l : lines())
      if (l.name == name) out.push_back(std::move(l));
    return out;
  }
};

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

Dataflow golden() {
  auto df = parse_dataflow_json(test::slurp(test::source_dir() + "/test/golden/mlp_cublas.json"), "mlp_cublas.json");
  if (!df) FAIL(df.error().message);
  return df.take();
}

/// ../shared/samples/mlp_cublas/params.bin (over 5 MB, not in the repository), or "".
std::string params() {
  std::string shared = test::shared_sample_dir("mlp_cublas");
  if (!shared.empty() && file_exists(shared + "/params.bin")) return shared + "/params.bin";
  return "";
}

ReplayOptions options(const std::string& p) {
  ReplayOptions o;
  o.inputs.label = "mlp_cublas";
  o.inputs.params = p;
  o.inputs.input_dir = test::sample_dir("mlp_cublas");
  o.modules.push_back(test::sample_dir("mlp_cublas") + "/device.ptx");
  o.warmup = 1;
  o.repeat = 2;
  return o;
}

/// Row-major C = A·Bᵀ of call 0 (nn.dense: input [1, 100] × p0 [400, 100]ᵀ) computed here.
std::vector<double> reference_first_call(const std::string& params_path) {
  Expected<NpyArray> x = read_npy(test::sample_dir("mlp_cublas") + "/input_input0.npy");
  REQUIRE(x);
  std::string bytes = test::slurp(params_path);
  Expected<ParamsFile> pf = parse_params(bytes, params_path);
  REQUIRE(pf);
  const ParamArray* p0 = nullptr;
  for (const ParamArray& a : pf->arrays)
    if (a.name == "p0") p0 = &a;
  REQUIRE(p0);
  REQUIRE(p0->shape == std::vector<int64_t>{400, 100});
  REQUIRE(x->shape == std::vector<int64_t>{1, 100});
  const float* xv = reinterpret_cast<const float*>(x->data.data());
  std::vector<float> w(400 * 100);
  std::memcpy(w.data(), bytes.data() + p0->data_offset, w.size() * 4);
  std::vector<double> c(400, 0.0);
  for (int j = 0; j < 400; ++j)
    for (int l = 0; l < 100; ++l) c[j] += static_cast<double>(xv[l]) * w[j * 100 + l];
  return c;
}

/// Checks every cuBLAS call of the log against the IR's tensor views: TVM's row-major
/// C = op(A)·op(B) as cublasSgemm(op(transb), op(transa), m, n, k, B, ldb, A, lda, C, ldc).
void check_calls(const Fakes& fake, const Dataflow& df, size_t expected_calls) {
  std::vector<Line> allocs = fake.lines("cuMemAlloc");
  std::vector<Line> creates = fake.lines("cublasCreate");
  std::vector<Line> streams = fake.lines("cuStreamCreate");
  std::vector<Line> sets = fake.lines("cublasSetStream");
  REQUIRE(creates.size() == 1);
  REQUIRE(streams.size() == 1);
  REQUIRE(sets.size() == 1);
  CHECK(sets[0].result == 0);
  CHECK(sets[0].at("handle") == creates[0].at("handle"));
  CHECK(sets[0].num("stream") == streams[0].num("stream"));
  // Allocation base address of each buffer: plan order (storage ids ascending, then workspaces).
  Expected<ReplayPlan> plan = make_plan(df, options(params()).inputs);
  REQUIRE(plan);
  // The plan's allocations, then the cuBLAS workspace set on the handle.
  REQUIRE(allocs.size() == plan->allocations.size() + 1);
  std::vector<Line> ws = fake.lines("cublasSetWorkspace");
  REQUIRE(ws.size() == 1);
  CHECK(ws[0].result == 0);
  CHECK(ws[0].num("workspace") == allocs.back().num("ptr"));
  CHECK(ws[0].num("bytes") == (32u << 20));
  std::vector<Line> gemms = fake.lines("cublasSgemm");
  REQUIRE(gemms.size() == expected_calls);
  for (size_t i = 0; i < gemms.size(); ++i) {
    const Line& g = gemms[i];
    const LibraryCall& c = df.library_calls[i % df.library_calls.size()];
    INFO(g.text);
    CHECK(g.result == 0);
    CHECK(g.at("handle") == creates[0].at("handle"));
    CHECK(g.num("stream") == streams[0].num("stream"));
    CHECK(g.num("workspace") == ws[0].num("workspace"));
    const auto& A = c.args[0].tensor_shape;
    const auto& B = c.args[1].tensor_shape;
    const auto& C = c.args[2].tensor_shape;
    bool ta = c.args[3].int_value != 0, tb = c.args[4].int_value != 0;
    CHECK(g.at("transa") == (tb ? "T" : "N"));  // operands swapped: cuBLAS's first is TVM's B
    CHECK(g.at("transb") == (ta ? "T" : "N"));
    CHECK(g.num("m") == static_cast<uint64_t>(tb ? B[0] : B[1]));
    CHECK(g.num("n") == static_cast<uint64_t>(ta ? A[1] : A[0]));
    CHECK(g.num("k") == static_cast<uint64_t>(ta ? A[0] : A[1]));
    CHECK(g.num("lda") == static_cast<uint64_t>(B[1]));
    CHECK(g.num("ldb") == static_cast<uint64_t>(A[1]));
    CHECK(g.num("ldc") == static_cast<uint64_t>(C[1]));
    CHECK(static_cast<int64_t>(g.num("n")) == C[0]);
    CHECK(static_cast<int64_t>(g.num("m")) == C[1]);
    auto base = [&](const Arg& a) {
      return allocs[plan->buffer_allocation[a.buffer]].num("ptr") + static_cast<uint64_t>(a.offset);
    };
    CHECK(g.num("A") == base(c.args[1]));
    CHECK(g.num("B") == base(c.args[0]));
    CHECK(g.num("C") == base(c.args[2]));
    CHECK(g.at("alpha") == "1");
    CHECK(g.at("beta") == "0");
  }
}

}  // namespace

TEST_CASE("mlp_cublas replays with the fake cuBLAS in eager, graph and dag modes, calls checked against the IR",
          "[replay][cublas]") {
  const std::string p = params();
  if (p.empty()) {
    WARN("SKIPPED: ../shared/samples/mlp_cublas/params.bin is absent (over 5 MB, not in the repository)");
    return;
  }
  Dataflow df = golden();
  REQUIRE(df.library_calls.size() == 4);
  REQUIRE(df.kernels.size() == 6);
  const std::vector<double> ref = reference_first_call(p);
  double ref_sum = 0;
  for (double v : ref) ref_sum += v;
  for (ReplayMode mode : {ReplayMode::Eager, ReplayMode::Graph, ReplayMode::Dag}) {
    INFO(to_string(mode));
    Fakes fake;
    ReplayOptions o = options(p);
    o.mode = mode;
    std::ostringstream log;
    Expected<ReplayReport> rep = replay(df, o, log);
    INFO(log.str());
    REQUIRE(rep);
    CHECK(rep->cublas == KDFLOW_FAKE_CUBLAS);
    CHECK(rep->plan.library_calls.size() == 4);
    // Eager runs: 1 checked + 1 warm-up + 2 timed, 4 calls each; graph/dag: 4 more, recorded once.
    const size_t eager_calls = 4 * (1 + o.warmup + o.repeat);
    check_calls(fake, df, eager_calls + (mode == ReplayMode::Eager ? 0 : 4));
    CHECK(fake.lines("cublasDestroy").size() == 1);

    // Stream order: each call between the kernel recorded as after_kernel and the next one.
    std::vector<Line> all = fake.lines();
    std::vector<std::string> first_run;
    for (const Line& l : all) {
      if (l.name == "cuLaunchKernel") first_run.push_back(l.at("name"));
      if (l.name == "cublasSgemm") first_run.push_back("gemm");
      if (first_run.size() == 10) break;
    }
    CHECK(first_run == std::vector<std::string>{"gemm", df.kernels[0].name, "gemm", df.kernels[1].name, "gemm",
                                                 df.kernels[2].name, "gemm", df.kernels[3].name, df.kernels[4].name,
                                                 df.kernels[5].name});

    // The product the fake computed for call 0, in every run, equals the CPU reference.
    std::vector<Line> work = fake.lines("gemm-work");
    size_t runs = (1 + o.warmup + o.repeat) + (mode == ReplayMode::Eager ? 0 : 1 + o.warmup + o.repeat);
    REQUIRE(work.size() == 4 * runs);
    for (const Line& w : work) {
      if (w.num("m") != 400) continue;
      INFO(w.text);
      CHECK(std::stod(w.at("c0")) == Approx(ref[0]).epsilon(1e-5));
      CHECK(std::stod(w.at("sum")) == Approx(ref_sum).epsilon(1e-4));
    }

    if (mode == ReplayMode::Graph) {
      // Captured: each call's work recorded into the graph with the kernels, in order.
      std::vector<Line> enq = fake.lines("enqueue");
      size_t captured = 0;
      for (const Line& e : enq) captured += e.at("captured") == "1";
      CHECK(captured == 4);
    }
    if (mode == ReplayMode::Dag) {
      // One child-graph node per call, after the nodes its IR dependencies name.
      std::vector<Line> child = fake.lines("cuGraphAddChildGraphNode");
      REQUIRE(child.size() == 4);
      for (const Line& c : child) CHECK(c.result == 0);
      CHECK(child[0].at("deps") == "-");        // call 0 reads the input and a param only
      CHECK(child[1].at("node_index") == "2");  // after kernel 0 (node 1)
      CHECK(child[1].at("deps") == "1");        // RAW: call 1 reads kernel 0's output
      std::vector<Line> kernels = fake.lines("cuGraphAddKernelNode");
      REQUIRE(kernels.size() == 6);
      CHECK(kernels[0].at("deps") == "0");      // kernel 0 reads the workspace call 0 wrote
      // Kernel 2 overwrites storage 3 (WAW with kernel 0, WAR with call 1) and reads call 2's
      // workspace: reduced over kernels and calls, only call 2 (node 4) remains.
      CHECK(kernels[2].at("deps") == "4");
      StepGraph sg = step_graph(df);
      CHECK(rep->dag_edges == sg.edges);
      CHECK(sg.edges == 9);  // a chain of the 10 steps: each waits for the one before
    }
  }
}

TEST_CASE("mlp_cublas: a missing libcublas exits 69 in one line naming what was tried", "[replay][cublas]") {
  const std::string p = params();
  if (p.empty()) {
    WARN("SKIPPED: ../shared/samples/mlp_cublas/params.bin is absent (over 5 MB, not in the repository)");
    return;
  }
  Fakes fake;
  std::string missing = test::temp_dir() + "/no-such-libcublas.so";
  Env blas("KDFLOW_CUBLAS_LIBRARY", missing);
  ReplayCommand cmd;
  cmd.dir = test::sample_dir("mlp_cublas");
  cmd.params = p;
  cmd.quiet = true;
  std::ostringstream out, err;
  CHECK(run_replay_command(cmd, out, err) == 69);
  INFO(err.str());
  CHECK(one_line(err.str()));
  CHECK(err.str().rfind(missing + ": error: cannot load cuBLAS (tried " + missing + ";", 0) == 0);
  CHECK(out.str().empty());
  CHECK(fake.lines("cuLaunchKernel").empty());
}

TEST_CASE("cuBLAS library names: the override, then $KDFLOW_CUBLAS_LIBRARY, then libcublas.so.13/.12/.11/.so",
          "[replay][cublas]") {
  // A model whose calls need cuBLAS, run where neither the override nor the names load.
  Env blas("KDFLOW_CUBLAS_LIBRARY", "/nonexistent/libcublas-a.so");
  Dataflow df = golden();
  ReplayOptions o = options(params());
  o.cublas_library = "/nonexistent/libcublas-b.so";
  if (o.inputs.params.empty()) {
    WARN("SKIPPED: ../shared/samples/mlp_cublas/params.bin is absent (over 5 MB, not in the repository)");
    return;
  }
  Fakes fake;
  std::ostringstream log;
  Expected<ReplayReport> rep = replay(df, o, log);
  REQUIRE(!rep);
  CHECK(rep.error().code == ExitCode::Unavailable);
  CHECK(rep.error().message.find("tried /nonexistent/libcublas-b.so;") != std::string::npos);
}

TEST_CASE("replay refuses library calls it cannot run (69, naming the call) and views that do not fit (65)",
          "[replay][cublas]") {
  const Dataflow df0 = golden();
  ReplayInputs in;
  in.label = "mlp_cublas";
  in.params = params();
  in.input_dir = test::sample_dir("mlp_cublas");
  if (in.params.empty()) {
    WARN("SKIPPED: ../shared/samples/mlp_cublas/params.bin is absent (over 5 MB, not in the repository)");
    return;
  }
  REQUIRE(make_plan(df0, in));
  struct Case {
    const char* what;
    std::function<void(Dataflow&)> edit;
    ExitCode code;
    const char* message;
  } cases[] = {
      {"unknown call", [](Dataflow& d) { d.library_calls[1].name = "tvm.contrib.cudnn.conv2d.forward"; },
       ExitCode::Unavailable,
       "mlp_cublas:/library_calls/1: error: replay cannot run library call 'tvm.contrib.cudnn.conv2d.forward' of "
       "node 6"},
      {"thrust", [](Dataflow& d) { d.library_calls[0].name = "tvm.contrib.thrust.sort"; }, ExitCode::Unavailable,
       "replay cannot run library call 'tvm.contrib.thrust.sort'"},
      {"float16", [](Dataflow& d) { for (int j = 0; j < 3; ++j) d.library_calls[0].args[j].tensor_dtype = "float16"; },
       ExitCode::Unavailable, "/library_calls/0/args/0/tensor/dtype: error: tvm.contrib.cublas.matmul on float16"},
      {"alpha/beta", [](Dataflow& d) { d.library_calls[0].args.push_back(d.library_calls[0].args[3]); },
       ExitCode::Unavailable, "has 6 arguments"},
      {"k mismatch", [](Dataflow& d) { d.library_calls[0].args[1].tensor_shape = {400, 99}; }, ExitCode::DataError,
       "/library_calls/0/args/1/tensor/shape: error: tvm.contrib.cublas.matmul: A [1, 100] (transa=0) has 100 columns "
       "but B [400, 99] (transb=1) has 99 rows"},
      {"C shape", [](Dataflow& d) { d.library_calls[2].args[2].tensor_shape = {1, 1999}; }, ExitCode::DataError,
       "/library_calls/2/args/2/tensor/shape: error: tvm.contrib.cublas.matmul: C is [1, 1999] but A·B is 1 × 2000"},
      {"view outside", [](Dataflow& d) { d.library_calls[0].args[2].offset = 4; }, ExitCode::DataError,
       "/library_calls/0/args/2: error: the float32 view [1, 400] at byte offset 4 (1600 bytes) does not fit in "
       "buffer 14"},
      {"2-d batch", [](Dataflow& d) { d.library_calls[0].name = "tvm.contrib.cublas.batch_matmul"; },
       ExitCode::DataError, "tvm.contrib.cublas.batch_matmul needs 3-d tensors"},
      {"trans flag", [](Dataflow& d) { d.library_calls[0].args[3].int_value = 2; }, ExitCode::DataError,
       "(transa) must be 0 or 1"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    Dataflow df = df0;
    c.edit(df);
    Expected<ReplayPlan> plan = make_plan(df, in);
    REQUIRE(!plan);
    INFO(plan.error().message);
    CHECK(plan.error().code == c.code);
    CHECK(plan.error().message.find(c.message) != std::string::npos);
    CHECK(plan.error().message.find('\n') == std::string::npos);
  }
  // Through the command: the refusal comes before the driver is touched.
  Fakes fake;
  Dataflow df = df0;
  df.library_calls[3].name = "tvm.contrib.cudnn.conv2d.forward";
  std::string flow = fake.dir + "/flow.json";
  REQUIRE(write_file_atomic(flow, emit_json(df)));
  ReplayCommand cmd;
  cmd.dir = test::sample_dir("mlp_cublas");
  cmd.flow = flow;
  cmd.params = in.params;
  cmd.quiet = true;
  std::ostringstream out, err;
  CHECK(run_replay_command(cmd, out, err) == 69);
  CHECK(one_line(err.str()));
  CHECK(err.str().find("replay cannot run library call 'tvm.contrib.cudnn.conv2d.forward' of node 12") !=
        std::string::npos);
  CHECK(fake.lines("cuInit").empty());
}

TEST_CASE("a batch_matmul plan follows TVM's CallBatchGemm: strides, broadcast batch of 1", "[replay][cublas]") {
  // The smallest labelled unit: the mlp_cublas IR with call 0 turned into a batch_matmul of
  // [1, 1, 100] × [1, 400, 100]ᵀ views of the same buffers (no real sample has one).
  Dataflow df = golden();
  ReplayInputs in;
  in.label = "mlp_cublas";
  in.params = params();
  in.input_dir = test::sample_dir("mlp_cublas");
  if (in.params.empty()) {
    WARN("SKIPPED: ../shared/samples/mlp_cublas/params.bin is absent (over 5 MB, not in the repository)");
    return;
  }
  LibraryCall& c = df.library_calls[0];
  c.name = "tvm.contrib.cublas.batch_matmul";
  c.args[0].tensor_shape = {1, 1, 100};
  c.args[1].tensor_shape = {4, 100, 100};  // 4 batches of B: 160000 bytes, all of p0
  c.args[2].tensor_shape = {4, 1, 100};    // 1600 bytes: the workspace
  Expected<ReplayPlan> plan = make_plan(df, in);
  INFO((plan ? "" : plan.error().message));
  REQUIRE(plan);
  const PlanLibraryCall& p = plan->library_calls[0];
  CHECK(p.batched);
  CHECK(p.batch == 4);
  CHECK(p.m == 100);  // ColumnCount3D(B, transb=1) = B.shape[1]
  CHECK(p.n == 1);
  CHECK(p.k == 100);
  CHECK(p.stride_a == 0);  // A's batch of 1 is broadcast
  CHECK(p.stride_b == 100 * 100);
  CHECK(p.stride_c == 100);
  CHECK(p.lda == 100);
  CHECK(p.ldb == 100);
  CHECK(p.ldc == 100);
  c.args[0].tensor_shape = {2, 1, 100};  // neither 1 nor C's 4
  Expected<ReplayPlan> bad = make_plan(df, in);
  REQUIRE(!bad);
  CHECK(bad.error().code == ExitCode::DataError);
}

TEST_CASE("the fake cuBLAS is as strict as the real one on handles, leading dimensions and pointers",
          "[replay][cublas]") {
  Fakes fake;
  void* drv = ::dlopen(KDFLOW_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(drv);
  void* blas = ::dlopen(KDFLOW_FAKE_CUBLAS, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(blas);
  using Create = int (*)(void**);
  using SetStream = int (*)(void*, void*);
  using Sgemm = int (*)(void*, int, int, int, int, int, const float*, const float*, int, const float*, int,
                        const float*, float*, int);
  using MemAlloc = int (*)(unsigned long long*, size_t);
  using StreamCreate = int (*)(void**, unsigned);
  auto create = reinterpret_cast<Create>(::dlsym(blas, "cublasCreate_v2"));
  auto set_stream = reinterpret_cast<SetStream>(::dlsym(blas, "cublasSetStream_v2"));
  auto sgemm = reinterpret_cast<Sgemm>(::dlsym(blas, "cublasSgemm_v2"));
  auto mem_alloc = reinterpret_cast<MemAlloc>(::dlsym(drv, "cuMemAlloc_v2"));
  auto stream_create = reinterpret_cast<StreamCreate>(::dlsym(drv, "cuStreamCreate"));
  REQUIRE((create && set_stream && sgemm && mem_alloc && stream_create));
  REQUIRE(test::fake_cuda_context(drv));
  unsigned long long a = 0, b = 0, cbuf = 0;
  REQUIRE(mem_alloc(&a, 4 * 6) == 0);     // 2 × 3
  REQUIRE(mem_alloc(&b, 4 * 12) == 0);    // 3 × 4
  REQUIRE(mem_alloc(&cbuf, 4 * 8) == 0);  // 2 × 4
  void* stream = nullptr;
  REQUIRE(stream_create(&stream, 1) == 0);
  auto f = [](unsigned long long p) { return reinterpret_cast<float*>(static_cast<uintptr_t>(p)); };
  const float one = 1, zero = 0;
  void* bogus = reinterpret_cast<void*>(0x1234);
  CHECK(sgemm(bogus, 0, 0, 2, 4, 3, &one, f(a), 2, f(b), 3, &zero, f(cbuf), 2) == 1);  // no handle
  void* h = nullptr;
  REQUIRE(create(&h) == 0);
  CHECK(sgemm(h, 0, 0, 2, 4, 3, &one, f(a), 2, f(b), 3, &zero, f(cbuf), 2) == 13);  // no cublasSetStream
  REQUIRE(set_stream(h, stream) == 0);
  CHECK(sgemm(h, 0, 0, 2, 4, 3, &one, f(a), 2, f(b), 3, &zero, f(cbuf), 2) == 0);
  CHECK(sgemm(h, 0, 0, 2, 4, 3, &one, f(a), 1, f(b), 3, &zero, f(cbuf), 2) == 7);  // lda < m
  CHECK(sgemm(h, 1, 0, 2, 4, 3, &one, f(a), 2, f(b), 3, &zero, f(cbuf), 2) == 7);  // T: lda < k
  CHECK(sgemm(h, 0, 0, 2, 4, 3, &one, f(a), 2, f(b), 2, &zero, f(cbuf), 2) == 7);  // ldb < k
  CHECK(sgemm(h, 0, 0, 2, 4, 3, &one, f(a), 2, f(b), 3, &zero, f(cbuf), 1) == 7);  // ldc < m
  CHECK(sgemm(h, 0, 0, -1, 4, 3, &one, f(a), 2, f(b), 3, &zero, f(cbuf), 2) == 7);
  CHECK(sgemm(h, 0, 0, 2, 4, 3, &one, f(a), 2, f(b), 4, &zero, f(cbuf), 2) == 13);  // B runs past its allocation
  CHECK(sgemm(h, 0, 0, 2, 4, 3, &one, f(a + 8), 2, f(b), 3, &zero, f(cbuf), 2) == 13);
  std::vector<Line> g = fake.lines("cublasSgemm");
  REQUIRE(g.size() == 10);
  CHECK(g[3].text.find("error=lda_too_small") != std::string::npos);
  CHECK(g[8].text.find("error=A_or_B_outside_every_allocation") != std::string::npos);
  using Destroy = int (*)(void*);
  auto destroy = reinterpret_cast<Destroy>(::dlsym(blas, "cublasDestroy_v2"));
  REQUIRE(destroy);
  CHECK(destroy(h) == 0);
  CHECK(destroy(h) == 1);  // destroyed twice: not initialized, as cuBLAS answers
  ::dlclose(blas);
  ::dlclose(drv);
}

TEST_CASE("replay refuses --kernel and --nodes for a model with library calls (69, one line)", "[replay][cublas]") {
  const std::string p = params();
  if (p.empty()) {
    WARN("SKIPPED: ../shared/samples/mlp_cublas/params.bin is absent (over 5 MB, not in the repository)");
    return;
  }
  Fakes fake;
  Dataflow df = golden();
  ReplayOptions o = options(p);
  o.kernel = 1;
  o.dump_dir = fake.dir;
  std::ostringstream log;
  Expected<ReplayReport> rep = replay(df, o, log);
  REQUIRE(!rep);
  CHECK(rep.error().code == ExitCode::Unavailable);
  CHECK(rep.error().message.find("--kernel restores buffers from kernel dumps, which do not cover what library "
                                 "calls write; this model makes 4 library calls") != std::string::npos);
  ReplayOptions s = options(p);
  s.slice_first = 1;
  s.slice_last = 2;
  s.inputs_from = fake.dir;
  Expected<ReplayReport> rep2 = replay(df, s, log);
  REQUIRE(!rep2);
  CHECK(rep2.error().code == ExitCode::Unavailable);
  CHECK(rep2.error().message.find("--nodes restores buffers") != std::string::npos);
  CHECK(fake.lines("cuInit").empty());
}

TEST_CASE("step_graph: kernels and library calls in run order, reduced over both", "[replay][cublas]") {
  // Hand-made IR (a labelled unit case): call 0 before kernel 0, kernel 0, call 1 after
  // kernel 0, kernel 1, call 2 after the last kernel. Dependencies: call0→k0 (RAW),
  // k0→call1 (RAW), call1→k1 (RAW), k0→k1 (WAW, implied through call 1), k1→call2 (RAW),
  // call0→call2 (WAR, implied), and one edge against run order (k1→call1), which is dropped.
  Dataflow df;
  df.kernels.resize(2);
  df.kernels[0].id = 0;
  df.kernels[1].id = 1;
  df.library_calls.resize(3);
  for (int i = 0; i < 3; ++i) df.library_calls[i].id = i;
  df.library_calls[0].after_kernel = -1;
  df.library_calls[1].after_kernel = 0;
  df.library_calls[2].after_kernel = 1;
  auto dep = [&](int from, bool fc, int to, bool tc) {
    Dependency d;
    d.from = from, d.to = to, d.from_library_call = fc, d.to_library_call = tc;
    df.dependencies.push_back(d);
  };
  dep(0, true, 0, false);
  dep(0, false, 1, true);
  dep(1, true, 1, false);
  dep(0, false, 1, false);
  dep(1, false, 2, true);
  dep(0, true, 2, true);
  dep(1, false, 1, true);
  StepGraph g = step_graph(df);
  REQUIRE(g.steps.size() == 5);
  CHECK((g.steps[0].library_call && g.steps[0].id == 0));
  CHECK((!g.steps[1].library_call && g.steps[1].id == 0));
  CHECK((g.steps[2].library_call && g.steps[2].id == 1));
  CHECK((!g.steps[3].library_call && g.steps[3].id == 1));
  CHECK((g.steps[4].library_call && g.steps[4].id == 2));
  CHECK(g.dependency_pairs == 6);
  CHECK(g.edges == 4);
  CHECK(g.preds[1] == std::vector<int>{0});
  CHECK(g.preds[2] == std::vector<int>{1});
  CHECK(g.preds[3] == std::vector<int>{2});  // k0→k1 dropped: implied through call 1
  CHECK(g.preds[4] == std::vector<int>{3});  // call0→call2 dropped
  // The kernel-only graph keeps k0→k1: it ignores library calls.
  LaunchGraph lg = launch_graph(df);
  CHECK(lg.preds[1] == std::vector<int>{0});
}
