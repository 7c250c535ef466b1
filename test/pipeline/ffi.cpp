// ffi.cpp — tvm-ffi builds (TVM 0.21 – 0.26) on the three real TVM 0.26.0 samples
// (ffi_mlp bytecode, ffi_mlp_compiled, ffi_batch_mlp with a symbolic batch): every launch
// against truth.json, both exec modes and model.so giving the same launches, complete access
// sets, version detection, goldens, symbolic shapes from the input file or --input-shape, the
// CLI (show, costs), and one-line errors for what kdflow does not know.
#include <algorithm>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"
#include "kdflow/frontend/extract.h"
#include "kdflow/formats/function_table.h"
#include "kdflow/formats/vm_exec.h"
#include "relax_truth.h"
#include "test_util.h"

using namespace kdflow;
using namespace kdflow::test;
namespace fs = std::filesystem;

namespace {

const char* const kFfiSamples[] = {"ffi_mlp", "ffi_mlp_compiled", "ffi_batch_mlp"};

Dataflow extract_path(const std::string& dir, std::vector<std::string> input_shapes = {}) {
  ExtractInputs in;
  in.dir = dir;
  in.input_shapes = std::move(input_shapes);
  Expected<Dataflow> df = extract(in);
  INFO(dir);
  if (!df) FAIL(df.error().message);
  return df.take();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

/// A copy of a sample folder (no model.so), with `file` replaced by `bytes` when given.
std::string copy_sample(const std::string& name, const std::string& as, const std::string& file = "",
                        const std::string& bytes = "") {
  std::string dir = temp_dir() + "/" + as;
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(sample_dir(name)))
    fs::copy_file(e.path(), dir + "/" + e.path().filename().string(), fs::copy_options::overwrite_existing);
  if (!file.empty()) write_bytes(dir + "/" + file, bytes);
  return dir;
}

std::vector<int64_t> ints_of(const Kernel& k) {
  std::vector<int64_t> out;
  for (const Arg& a : k.args)
    if (a.kind == Arg::Kind::Int) out.push_back(a.int_value);
  return out;
}

}  // namespace

TEST_CASE("tvm-ffi samples: every launch agrees with truth.json", "[samples][ffi][truth]") {
  for (const char* m : kFfiSamples) {
    Dataflow df = extract_path(sample_dir(m));
    auto bad = compare_relax_truth(df, sample_dir(m));
    INFO(m << ": " << (bad.empty() ? "" : bad.front()));
    CHECK(bad.empty());
    CHECK(df.kernels.size() == 5);
    CHECK(df.sources.vm_function == (std::string(m) == "ffi_mlp_compiled" ? "__vmtir__main" : "main"));
    // Written by TVM 0.26: the 0.23+ magic, TVMFFIEnvModLookupFromImports, __tvm_ffi_ exports.
    CHECK(df.sources.tvm_version == "0.26");
    CHECK(df.sources.tvm_version_evidence.size() >= 3);
  }
}

TEST_CASE("tvm-ffi: bytecode and compiled mode give the same flow", "[samples][ffi]") {
  Dataflow a = extract_path(sample_dir("ffi_mlp"));
  Dataflow b = extract_path(sample_dir("ffi_mlp_compiled"));
  CHECK(without_positions(a) == without_positions(b));
  // ...and the 0.20 build of the same model launches the same kernels with the same launch shapes
  // where TVM 0.26 kept the schedules: at least the kernel names agree.
  Dataflow r = extract_path(sample_dir("relax_mlp"));
  REQUIRE(r.kernels.size() == a.kernels.size());
  for (size_t i = 0; i < a.kernels.size(); ++i) CHECK(r.kernels[i].name == a.kernels[i].name);
}

TEST_CASE("tvm-ffi: model.so's __tvm_ffi__library_bin gives the folder's flow", "[samples][ffi][library]") {
  const std::string shared = shared_sample_dir("ffi_mlp");
  if (shared.empty() || !fs::exists(shared + "/model.so")) {
    WARN("skipped: ../shared/samples/ffi_mlp/model.so is not beside the repository");
    return;
  }
  Dataflow lib = extract_path(shared + "/model.so");
  Dataflow dir = extract_path(sample_dir("ffi_mlp"));
  CHECK(lib.sources.vm_exec == "model.so:__tvm_ffi__library_bin");
  CHECK(lib.sources.tvm_version == "0.26");
  CHECK(compare_relax_truth(lib, sample_dir("ffi_mlp")).empty());
  CHECK(without_positions(lib) == without_positions(dir));
}

TEST_CASE("tvm-ffi: every kernel argument's access is known, with an in-bounds footprint", "[samples][ffi][access]") {
  for (const char* m : kFfiSamples) {
    Dataflow df = extract_path(sample_dir(m));  // a proven out-of-bounds argument would fail extract
    CHECK(df.device_functions.size() == 5);
    std::vector<std::string> problems;
    for (const Kernel& k : df.kernels)
      for (const Arg& a : k.args) {
        if (a.kind != Arg::Kind::Buffer) continue;
        if (a.access == Access::Unknown) problems.push_back(k.name + ": access unknown");
        if (!a.footprint) problems.push_back(k.name + ": no footprint");
      }
    INFO(m << ": " << (problems.empty() ? "" : problems.front()));
    CHECK(problems.empty());
    CHECK(!df.dependencies.empty());
  }
}

TEST_CASE("tvm-ffi: JSON and DOT equal the reviewed goldens and read back", "[samples][ffi][golden]") {
  for (const char* m : kFfiSamples) {
    SECTION(m) {
      Dataflow df = extract_path(sample_dir(m));
      const std::string gj = source_dir() + "/test/golden/" + m + ".json";
      INFO("regenerate with: scripts/update-goldens.sh, then review git diff test/golden");
      CHECK(emit_json(df) == slurp(gj));
      CHECK(emit_dot(df) == slurp(source_dir() + "/test/golden/" + m + ".dot"));
      Expected<Dataflow> back = parse_dataflow_json(emit_json(df), gj);
      REQUIRE(back);
      CHECK(back->kernels == df.kernels);
      CHECK(back->buffers == df.buffers);  // shape_expr included
      CHECK(back->sources.tvm_version == df.sources.tvm_version);
      CHECK(back->sources.tvm_version_evidence == df.sources.tvm_version_evidence);
      CHECK(emit_json(*back) == emit_json(df));
    }
  }
}

TEST_CASE("tvm-ffi: a symbolic batch takes its size from the input file or --input-shape", "[samples][ffi][symbolic]") {
  // From input_input0.npy (8 x 100): every kernel gets n = 8 and the storages are sized for it.
  Dataflow df = extract_path(sample_dir("ffi_batch_mlp"));
  for (const Kernel& k : df.kernels) CHECK(ints_of(k) == std::vector<int64_t>{8});
  for (int b : df.inputs) CHECK(df.buffers[b].shape == std::vector<int64_t>{8, 100});

  // --input-shape wins over the file: n = 3.
  Dataflow three = extract_path(sample_dir("ffi_batch_mlp"), {"input0=3x100"});
  for (const Kernel& k : three.kernels) CHECK(ints_of(k) == std::vector<int64_t>{3});
  for (int b : three.outputs) CHECK(three.buffers[b].shape == std::vector<int64_t>{3, 10});
  CHECK(three.kernels.back().grid[0] == 3);  // log_softmax: one block per row

  // The expressions the values came from, as TVM's own signatures in host.c state them: the
  // same for any n; constant tensors (the weights) carry none.
  for (const Dataflow* d : {&df, &three}) {
    for (int b : d->inputs) CHECK(d->buffers[b].shape_expr == std::vector<std::string>{"n", "100"});
    for (int b : d->outputs) CHECK(d->buffers[b].shape_expr == std::vector<std::string>{"n", "10"});
    int symbolic = 0;
    for (const Buffer& b : d->buffers) {
      if (b.constant_index >= 0) CHECK(b.shape_expr.empty());
      if (b.shape_expr.empty()) continue;
      ++symbolic;
      REQUIRE(b.shape_expr.size() == b.shape.size());
      CHECK(b.shape[0] == (d == &df ? 8 : 3));  // "n"
      CHECK(b.shape_expr[1] == std::to_string(b.shape[1]));
    }
    CHECK(symbolic == 6);  // the input, the four hidden activations, the output
  }
  // kdflow/1 readers check it: one expression per dimension.
  std::string text = emit_json(df);
  size_t at = text.find("\"shape_expr\": [\"n\", \"100\"]");
  REQUIRE(at != std::string::npos);
  text.replace(at, 26, "\"shape_expr\": [\"n\"]");
  Expected<Dataflow> bad = parse_dataflow_json(text, "flow.json");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("/shape_expr: error: 1 dimensions, but the shape has 2") != std::string::npos);
  // Without symbolic shapes nothing is recorded.
  Dataflow fixed = extract_path(sample_dir("ffi_mlp"));
  for (const Buffer& b : fixed.buffers) CHECK(b.shape_expr.empty());
  for (const Kernel& k : fixed.kernels) {
    CHECK(k.grid_expr[0].empty());
    CHECK(k.block_expr[0].empty());
    for (const Arg& a : k.args) CHECK(a.expr.empty());
  }
}

TEST_CASE("tvm-ffi: kernel scalars and grids carry the expressions the host computed them from",
          "[samples][ffi][symbolic]") {
  // host.c reads n from an argument's shape (`((int64_t*)lv3_shape)[0]`), passes it to every
  // kernel and computes the grid from it: `((n + (int64_t)31) >> (int64_t)5)`.
  for (auto [shape, n] : {std::pair<std::string, int64_t>{"", 8}, {"input0=3x100", 3}, {"input0=100x100", 100}}) {
    Dataflow df = extract_path(sample_dir("ffi_batch_mlp"), shape.empty() ? std::vector<std::string>{}
                                                                           : std::vector<std::string>{shape});
    INFO("n = " << n);
    REQUIRE(df.kernels.size() == 5);
    for (const Kernel& k : df.kernels) {
      INFO(k.name);
      for (const Arg& a : k.args)
        if (a.kind == Arg::Kind::Int) CHECK(a.expr == "n");
      CHECK(k.block_expr[0].empty());  // blocks are constants
    }
    // The four matmuls: grid.x is ceil(n / 32), y the output's columns over the tile.
    const int64_t tiles[] = {7, 16, 32, 1};
    for (size_t i = 0; i < 4; ++i) {
      const Kernel& k = df.kernels[i];
      CHECK(k.grid_expr == std::array<std::string, 3>{"(n + 31) >> 5", std::to_string(tiles[i]), "1"});
      CHECK(k.grid[0] == (n + 31) >> 5);
    }
    // log_softmax: one block per row.
    CHECK(df.kernels[4].grid_expr == std::array<std::string, 3>{"n", "1", "1"});
    CHECK(df.kernels[4].grid[0] == n);
  }
  // kdflow/1 round trip, and the readers' checks.
  Dataflow df = extract_path(sample_dir("ffi_batch_mlp"));
  std::string text = emit_json(df);
  CHECK(text.find("\"grid_expr\": [\"(n + 31) >> 5\", \"7\", \"1\"]") != std::string::npos);
  CHECK(text.find("\"value\": 8, \"expr\": \"n\"") != std::string::npos);
  Expected<Dataflow> back = parse_dataflow_json(text, "flow.json");
  REQUIRE(back);
  CHECK(back->kernels == df.kernels);
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    size_t at = t.find(from);
    REQUIRE(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
  Expected<Dataflow> two = parse_dataflow_json(
      replaced("\"grid_expr\": [\"(n + 31) >> 5\", \"7\", \"1\"]", "\"grid_expr\": [\"n\", \"7\"]"), "flow.json");
  REQUIRE_FALSE(two);
  CHECK(two.error().message.find("/grid_expr: error: expected an array of 3 expressions") != std::string::npos);
  Expected<Dataflow> empty = parse_dataflow_json(replaced("\"expr\": \"n\"", "\"expr\": \"\""), "flow.json");
  REQUIRE_FALSE(empty);
  CHECK(empty.error().message.find("/expr: error: expected an expression") != std::string::npos);
  // The text format and explain print them beside the values.
  std::string txt = emit_text(df);
  CHECK(txt.find("grid (1,7,1)=((n + 31) >> 5, 7, 1) block (8,16,1) smem 0") != std::string::npos);
  CHECK(txt.find(", 8=n") != std::string::npos);
  auto r = run_kdflow({"explain", sample_dir("ffi_batch_mlp"), "k0", "--color", "never"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("grid (1,7,1) = ((n + 31) >> 5, 7, 1)") != std::string::npos);
  CHECK(r.out.find("scalar 8 = n") != std::string::npos);
  CHECK(r.out.find("float32 [8, 100] = [n, 100]") != std::string::npos);
}

TEST_CASE("tvm-ffi: a symbolic batch needs a shape from the input file or --input-shape", "[samples][ffi][symbolic]") {

  // Without either: one line naming the parameter and the option, exit 65.
  std::string dir = copy_sample("ffi_batch_mlp", "ffi_batch_no_input");
  fs::remove(dir + "/input_input0.npy");
  auto r = run_kdflow({"extract", dir, "-o", dir + "/out.json"});
  INFO(r.err);
  CHECK(r.exit_code == 65);
  CHECK(r.err.find("symbolic shape") != std::string::npos);
  CHECK(r.err.find("--input-shape input0=") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  // A shape the program's own checks refuse (the second dimension is 100) and a malformed option.
  r = run_kdflow({"extract", dir, "--input-shape", "input0=8x99", "-o", dir + "/out.json"});
  CHECK(r.exit_code == 65);
  CHECK(r.err.find("dimension 1 is 99, the match states 100") != std::string::npos);
  r = run_kdflow({"extract", dir, "--input-shape", "input0=8by100", "-o", dir + "/out.json"});
  CHECK(r.exit_code == 64);
  r = run_kdflow({"extract", dir, "--input-shape", "nosuch=8x100", "-o", dir + "/out.json"});
  CHECK(r.exit_code == 64);
  CHECK(r.err.find("no parameter nosuch") != std::string::npos);
}

TEST_CASE("tvm-ffi: the CLI extracts, shows and costs", "[samples][ffi][cli]") {
  for (const char* m : kFfiSamples) {
    std::string out = temp_dir() + "/" + m + ".json";
    auto r = run_kdflow({"extract", sample_dir(m), "-q", "-o", out});
    REQUIRE(r.exit_code == 0);
    auto s = run_kdflow({"show", out});
    CHECK(s.exit_code == 0);
    CHECK(s.out.find("fused_matmul1_add1_relu1") != std::string::npos);
    CHECK(s.out.find("kernels without access      0") != std::string::npos);
    CHECK(s.out.find(", 0 out of bounds") != std::string::npos);
    // The batch build's four matmul kernels index their weights through the scalar n: footprints
    // unknown there ("data-dependent index"), proven everywhere else.
    if (std::string(m) != "ffi_batch_mlp") CHECK(s.out.find(" 0 unknown, 0 out of bounds") != std::string::npos);
    auto c = run_kdflow({"costs", out});
    INFO(c.err);
    CHECK(c.exit_code == 0);
    CHECK(c.out.find("log_softmax") != std::string::npos);
  }
}

TEST_CASE("tvm-ffi: the VM executable reader tells the layouts apart", "[samples][ffi][vm_exec]") {
  const std::string ffi = slurp(sample_dir("ffi_mlp") + "/vm_exec.bin");
  Expected<VmExecutable> ex = parse_vm_executable(ffi, "vm_exec.bin");
  REQUIRE(ex);
  CHECK(!ex->length_prefixed);
  CHECK(ex->tvm_versions == "0.23+");
  CHECK(ex->memory_scopes.empty());
  CHECK(ex->constants.size() == 19);  // vm_exec.json: the deduplicated pool
  CHECK(ex->constants[0].kind == VmConstant::Kind::DType);
  CHECK(ex->constants[6].kind == VmConstant::Kind::Tensor);
  CHECK(ex->constants[6].shape == std::vector<int64_t>{100, 400});

  const std::string old = slurp(sample_dir("relax_mlp") + "/vm_exec.bin");
  Expected<VmExecutable> ex20 = parse_vm_executable(old, "vm_exec.bin");
  REQUIRE(ex20);
  CHECK(ex20->length_prefixed);
  CHECK(ex20->tvm_versions == "0.20");

  // A magic no TVM wrote, a constant tag of no known numbering: one line each.
  std::string magic = ffi;
  magic[0] = '\x1f';
  Expected<VmExecutable> m = parse_vm_executable(magic, "vm_exec.bin");
  REQUIRE(!m);
  CHECK(m.error().message.find("neither a Relax VM executable's magic") != std::string::npos);
  std::string tag = ffi;
  const size_t pool = tag.find(std::string("\x05\x00\x00\x00\x02\x20\x01\x00", 8));
  REQUIRE(pool != std::string::npos);
  tag[pool] = 99;
  Expected<VmExecutable> t = parse_vm_executable(tag, "vm_exec.bin");
  REQUIRE(!t);
  CHECK(t.error().message.find("unknown constant type index 99") != std::string::npos);
}

TEST_CASE("tvm-ffi: launch tags of TVM 0.23 - 0.26 (hand-written function tables)", "[ffi][unit]") {
  // Hand-written: the tags TVM 0.24+ writes (src/runtime/metadata.h launch_param).
  const std::string text = R"({"tvm_version": "0.1.0", "func_info": {"k": {"name": "k",
      "arg_types": ["handle", "int64"], "launch_param_tags": ["blockIdx.x", "tirx.use_programtic_dependent_launch",
      "threadIdx.x", "tirx.use_cooperative_launch", "tirx.use_dyn_shared_memory"], "arg_extra_tags": [0, 0]}}})";
  Expected<FunctionTable> t = parse_function_table(text, "meta.json");
  REQUIRE(t);
  const FunctionInfo& k = t->functions.at("k");
  // PDL and cooperative take no launch value: only the three others stay, the last as "tir.".
  CHECK(k.launch_param_tags == std::vector<std::string>{"blockIdx.x", "threadIdx.x", "tir.use_dyn_shared_memory"});
  CHECK(k.programmatic_dependent_launch);
  CHECK(k.cooperative_launch);
  CHECK(k.arg_extra_tags == std::vector<int>{0, 0});
  Expected<FunctionTable> bad = parse_function_table(
      R"({"func_info": {"k": {"arg_types": [], "launch_param_tags": ["tirx.use_something_new"]}}})", "meta.json");
  REQUIRE(!bad);
  CHECK(bad.error().message.find("unknown launch parameter tag \"tirx.use_something_new\"") != std::string::npos);
}

TEST_CASE("tvm-ffi: PDL and cooperative launch tags reach the IR and kdflow/1 (hand-edited function table)",
          "[ffi][samples]") {
  // Hand-edited copy of ffi_mlp (no real 0.23+ build with these tags is at hand): the second
  // kernel's table entry gains TVM 0.24's PDL tag, log_softmax's the cooperative one. They
  // take no launch value, so the host's calls are unchanged.
  std::string meta = slurp(sample_dir("ffi_mlp") + "/device_0.tvm_meta.json");
  nlohmann::json j = nlohmann::json::parse(meta);
  auto& pdl = j["func_info"]["fused_matmul1_add1_relu1_kernel"]["launch_param_tags"];
  pdl.insert(pdl.begin() + 1, "tirx.use_programtic_dependent_launch");
  j["func_info"]["log_softmax_kernel"]["launch_param_tags"].push_back("tirx.use_cooperative_launch");
  std::string dir = copy_sample("ffi_mlp", "ffi_launch_attributes", "device_0.tvm_meta.json", j.dump(1));
  write_bytes(dir + "/device.tvm_meta.json", j.dump(1));
  ExtractInputs in;
  in.dir = dir;
  Expected<Dataflow> df = extract(in);
  REQUIRE(df);
  size_t with = 0;
  for (const Kernel& k : df->kernels) {
    INFO(k.name);
    CHECK(k.programmatic_dependent_launch == (k.name == "fused_matmul1_add1_relu1_kernel"));
    CHECK(k.cooperative_launch == (k.name == "log_softmax_kernel"));
    with += k.programmatic_dependent_launch || k.cooperative_launch;
  }
  CHECK(with == 2);
  // Everything else is as the unedited sample's.
  ExtractInputs plain;
  plain.dir = sample_dir("ffi_mlp");
  Expected<Dataflow> orig = extract(plain);
  REQUIRE(orig);
  REQUIRE(orig->kernels.size() == df->kernels.size());
  for (size_t i = 0; i < df->kernels.size(); ++i) {
    Kernel a = df->kernels[i];
    a.programmatic_dependent_launch = a.cooperative_launch = false;
    CHECK(a.grid == orig->kernels[i].grid);
    CHECK(a.block == orig->kernels[i].block);
    CHECK(a.args == orig->kernels[i].args);
  }
  // kdflow/1: the optional key, and the round trip.
  std::string text = emit_json(*df);
  nlohmann::json out = nlohmann::json::parse(text);
  for (const auto& k : out["kernels"]) {
    if (k["name"] == "fused_matmul1_add1_relu1_kernel")
      CHECK(k["launch_attributes"] == nlohmann::json::array({"programmatic_dependent_launch"}));
    else if (k["name"] == "log_softmax_kernel")
      CHECK(k["launch_attributes"] == nlohmann::json::array({"cooperative"}));
    else
      CHECK(!k.contains("launch_attributes"));
  }
  Expected<Dataflow> back = parse_dataflow_json(text, "flow.json");
  REQUIRE(back);
  CHECK(back->kernels == df->kernels);
  CHECK(emit_json(*back) == text);
  // A value kdflow does not know is one line naming where.
  std::string bad = text;
  bad.replace(bad.find("\"cooperative\""), 13, "\"clustered\"");
  Expected<Dataflow> nope = parse_dataflow_json(bad, "flow.json");
  REQUIRE(!nope);
  CHECK(nope.error().message.find("/launch_attributes/0: error: expected \"programmatic_dependent_launch\" or "
                                  "\"cooperative\"") != std::string::npos);
}

TEST_CASE("tvm-ffi: a host construct kdflow does not know is one line, exit 65 (hand-made host.c)",
          "[samples][ffi][errors]") {
  // Hand-made from ffi_mlp's host.c: the first kernel call goes through an entry point no TVM
  // release prints (TVMFFIFunctionCallWithStream), declared by no stand-in header.
  std::string host = slurp(sample_dir("ffi_mlp") + "/host.c");
  const size_t at = host.find("TVMFFIFunctionCall(fused_matmul1_add1_relu1_kernel_packed");
  REQUIRE(at != std::string::npos);
  host.replace(at, std::string("TVMFFIFunctionCall").size(), "TVMFFIFunctionCallWithStream");
  std::string dir = copy_sample("ffi_mlp", "ffi_unknown_call", "host.c", host);
  auto r = run_kdflow({"extract", dir, "-o", dir + "/out.json"});
  INFO(r.err);
  CHECK(r.exit_code == 65);
  CHECK(r.err.find("/host.c:389:7: error: call to 'TVMFFIFunctionCallWithStream'") != std::string::npos);
  CHECK(r.err.find("TVMFFIFunctionCallWithStream") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(!fs::exists(dir + "/out.json"));

  // A tensor arriving with a type index the host C does not expect: TVM's own check fails,
  // and kdflow says so with the host's message.
  std::string host2 = slurp(sample_dir("ffi_mlp") + "/host.c");
  for (size_t p = host2.find("(input0_type_index >= 64)"); p != std::string::npos;
       p = host2.find("(input0_type_index >= 64)", p + 1))
    host2.replace(p, 25, "(input0_type_index >= 99)");
  dir = copy_sample("ffi_mlp", "ffi_type_check", "host.c", host2);
  r = run_kdflow({"extract", dir, "-o", dir + "/out.json"});
  INFO(r.err);
  CHECK(r.exit_code == 65);
  CHECK(r.err.find("Mismatched type on argument #0") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("ffi: --function picks the VM function, and a missing one is one line listing them (exit 64)", "[ffi]") {
  using kdflow::test::run_kdflow;
  std::string dir = kdflow::test::sample_dir("ffi_mlp");
  auto missing = run_kdflow({"extract", dir, "--function", "forward", "-q", "-o", kdflow::test::temp_dir() + "/f.json"});
  CHECK(missing.exit_code == 64);
  CHECK(missing.err.find("vm_exec.bin: error: the executable has no VM function \"forward\"; its VM functions: "
                         "main(input0) (choose one with --function NAME)") != std::string::npos);
  CHECK(std::count(missing.err.begin(), missing.err.end(), '\n') == 1);
  // Naming main explicitly gives the same flow as the default.
  std::string a = kdflow::test::temp_dir() + "/a.json", b = kdflow::test::temp_dir() + "/b.json";
  REQUIRE(run_kdflow({"extract", dir, "-q", "-o", a}).exit_code == 0);
  REQUIRE(run_kdflow({"extract", dir, "--function", "main", "-q", "-o", b}).exit_code == 0);
  CHECK(kdflow::test::slurp(a) == kdflow::test::slurp(b));
  // Compiled mode: main is __vmtir__main of host.c.
  auto compiled = run_kdflow({"show", kdflow::test::sample_dir("ffi_mlp_compiled"), "--function", "nope"});
  CHECK(compiled.exit_code == 64);
  CHECK(compiled.err.find("its VM functions: main(input0)") != std::string::npos);
  // A Relay build has no VM functions.
  auto relay = run_kdflow({"show", kdflow::test::sample_dir("mlp"), "--function", "main"});
  CHECK(relay.exit_code == 64);
  CHECK(relay.err.find("Relay build") != std::string::npos);
}

TEST_CASE("views: a __nop node's output is a view of its input, and arguments through it name the viewed buffer",
          "[samples][views]") {
  // squeezenet (TVM 0.14): node 91 reshapes node 90's output (same storage); kernel 39 reads it.
  Dataflow df = extract_path(sample_dir("squeezenet"));
  const Buffer& view = df.buffers[91];
  CHECK(df.nodes[91].function == "__nop");
  CHECK(view.view_of == 90);
  CHECK(view.view_offset == 0);
  const Arg& a = df.kernels[39].args[1];
  CHECK(a.buffer == 90);
  CHECK(a.view == 91);
  CHECK(a.offset == 0);
  // The read depends on the kernel that wrote the viewed buffer, buffer to buffer.
  bool raw = std::any_of(df.dependencies.begin(), df.dependencies.end(), [](const Dependency& d) {
    return d.kind == Dependency::Kind::RAW && d.from == 38 && d.to == 39 && d.to_buffer == 90;
  });
  CHECK(raw);
  // No other buffer is a view, and no argument names a view's own buffer.
  for (const Buffer& b : df.buffers) CHECK((b.view_of < 0 || b.id == 91));
  for (const Kernel& k : df.kernels)
    for (const Arg& x : k.args) CHECK(x.buffer != 91);
  // kdflow/1: view_of / view_offset on the buffer, view on the argument; the reader checks them.
  std::string text = emit_json(df);
  Expected<Dataflow> back = parse_dataflow_json(text, "flow.json");
  REQUIRE(back);
  CHECK(back->buffers == df.buffers);
  CHECK(back->kernels == df.kernels);
  auto bad = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    size_t at = t.find(from);
    REQUIRE(at != std::string::npos);
    Expected<Dataflow> r = parse_dataflow_json(t.replace(at, from.size(), to), "flow.json");
    REQUIRE_FALSE(r);
    return r.error().message;
  };
  CHECK(bad("\"view_of\": 90", "\"view_of\": 91").find("/buffers/91/view_of: error: a buffer cannot view itself") !=
        std::string::npos);
  CHECK(bad("\"view_offset\": 0", "\"view_offset\": -4").find("/view_offset: error: expected 0 or more") !=
        std::string::npos);
  CHECK(bad("\"view\": 91", "\"view\": 100000").find("/view: error: buffer 100000 does not exist") !=
        std::string::npos);
}
