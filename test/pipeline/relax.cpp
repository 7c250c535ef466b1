// relax.cpp — the Relax front end (TVM 0.20 builds) on the two real Relax samples:
// every launch against truth.json (the launches TVM's own host C performs, recorded by the
// sample generator), the two exec modes giving the same flow, goldens, access sets, the CLI,
// and bad executables (each a one-line error with exit 65).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"
#include "kdflow/frontend/extract.h"
#include "kdflow/frontend/relax_vm.h"
#include "kdflow/formats/vm_exec.h"
#include "kdflow/emit/emit.h"
#include "kdflow/frontend/extract.h"
#include "kdflow/frontend/relax_vm.h"
#include "kdflow/formats/vm_exec.h"
#include "relax_truth.h"
#include "test_util.h"

using namespace kdflow;
using namespace kdflow::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

Dataflow extract_dir(const std::string& dir) {
  ExtractInputs in;
  in.dir = dir;
  Expected<Dataflow> df = extract(in);
  INFO(dir);
  if (!df) FAIL(df.error().message);
  return df.take();
}

std::string read_bytes(const std::string& path) { return slurp(path); }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

/// A copy of relax_mlp's inputs in a fresh folder, with vm_exec.bin (and host.c) as given.
std::string relax_copy(const std::string& name, const std::string& vm_exec, const std::string* host = nullptr) {
  std::string dir = temp_dir() + "/" + name;
  fs::create_directories(dir);
  const std::string src = sample_dir("relax_mlp");
  for (const auto& e : fs::directory_iterator(src)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("device_", 0) == 0 && (n.size() > 3 && (n.substr(n.size() - 3) == ".cu" || n.find(".tvm_meta.json") != std::string::npos)))
      fs::copy_file(e.path(), dir + "/" + n, fs::copy_options::overwrite_existing);
  }
  write_bytes(dir + "/host.c", host ? *host : read_bytes(src + "/host.c"));
  write_bytes(dir + "/vm_exec.bin", vm_exec);
  return dir;
}

void put_i64(std::string& bytes, uint64_t at, int64_t v) {
  for (int k = 0; k < 8; ++k) bytes[at + k] = static_cast<char>((static_cast<uint64_t>(v) >> (8 * k)) & 0xff);
}

}  // namespace

TEST_CASE("Relax samples: every launch agrees with truth.json", "[samples][relax][truth]") {
  Dataflow bytecode = extract_dir(sample_dir("relax_mlp"));
  auto bad = compare_relax_truth(bytecode, sample_dir("relax_mlp"));
  INFO("relax_mlp: " << (bad.empty() ? "" : bad.front()));
  CHECK(bad.empty());
  CHECK(bytecode.kernels.size() == 5);
  CHECK(bytecode.sources.vm_exec == "vm_exec.bin");
  CHECK(bytecode.sources.vm_function == "main");

  Dataflow compiled = extract_dir(sample_dir("relax_mlp_compiled"));
  std::vector<std::string> functions;
  for (const Kernel& k : bytecode.kernels) functions.push_back(k.function);
  bad = compare_relax_truth(compiled, sample_dir("relax_mlp_compiled"), &functions);
  INFO("relax_mlp_compiled: " << (bad.empty() ? "" : bad.front()));
  CHECK(bad.empty());
  CHECK(compiled.sources.vm_function == "__vmtir__main");

  // Inputs and bound weights: one input (VM parameter 0), eight pool tensors.
  int inputs = 0, params = 0;
  for (const Buffer& b : bytecode.buffers) {
    if (b.kind == BufferKind::Input) CHECK(b.input_index == inputs++);
    if (b.kind == BufferKind::Param) {
      ++params;
      CHECK(b.constant_index >= 0);
    }
    if (b.kind != BufferKind::Input) CHECK(b.input_index == -1);
  }
  CHECK(inputs == 1);
  CHECK(params == 8);
}

TEST_CASE("Relax: bytecode and compiled mode give the same flow", "[samples][relax]") {
  Dataflow a = extract_dir(sample_dir("relax_mlp"));
  Dataflow b = extract_dir(sample_dir("relax_mlp_compiled"));
  CHECK(without_positions(a) == without_positions(b));
}

TEST_CASE("Relax: JSON and DOT equal the reviewed goldens and read back", "[samples][relax][golden]") {
  for (const std::string m : {"relax_mlp", "relax_mlp_compiled"}) {
    SECTION(m) {
      Dataflow df = extract_dir(sample_dir(m));
      const std::string gj = source_dir() + "/test/golden/" + m + ".json";
      INFO("regenerate with: cmake --build build --target update-goldens, then review git diff test/golden");
      CHECK(emit_json(df) == slurp(gj));
      CHECK(emit_dot(df) == slurp(source_dir() + "/test/golden/" + m + ".dot"));
      Expected<Dataflow> back = parse_dataflow_json(emit_json(df), gj);
      REQUIRE(back);
      CHECK(back->buffers == df.buffers);
      CHECK(back->kernels == df.kernels);
      CHECK(back->sources.vm_exec == df.sources.vm_exec);
      CHECK(back->sources.vm_function == df.sources.vm_function);
      CHECK(emit_json(*back) == emit_json(df));
    }
  }
}

TEST_CASE("Relax: every kernel argument's access is known and agrees with the VM program", "[samples][relax][access]") {
  for (const std::string m : {"relax_mlp", "relax_mlp_compiled"}) {
    Dataflow df = extract_dir(sample_dir(m));
    CHECK(df.device_functions.size() == 5);
    std::set<int64_t> written, pinned;
    for (int b : df.inputs) pinned.insert(*df.buffers[b].storage_id);
    for (int b : df.params) pinned.insert(*df.buffers[b].storage_id);
    std::vector<std::string> problems;
    for (const Kernel& k : df.kernels) {
      for (const Arg& a : k.args) {
        if (a.kind != Arg::Kind::Buffer) continue;
        const int64_t sid = *df.buffers[a.buffer].storage_id;
        if (a.access == Access::Unknown) problems.push_back(k.name + ": access unknown");
        if (a.access == Access::Read && !written.count(sid) && !pinned.count(sid))
          problems.push_back(k.name + ": reads before any write");
        if (a.access != Access::Read) {
          if (pinned.count(sid)) problems.push_back(k.name + ": writes an input or weight");
          written.insert(sid);
        }
      }
    }
    INFO(m << ": " << (problems.empty() ? "" : problems.front()));
    CHECK(problems.empty());
    CHECK(!df.dependencies.empty());
  }
}

TEST_CASE("Relax: the CLI extracts, shows and explains", "[samples][relax][cli]") {
  std::string out = temp_dir() + "/relax.json";
  auto r = run_kdflow({"extract", sample_dir("relax_mlp"), "-o", out});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  auto s = run_kdflow({"show", out});
  CHECK(s.exit_code == 0);
  CHECK(s.out.find("vm_exec.bin") != std::string::npos);
  CHECK(s.out.find("fused_matmul1_add1_relu1") != std::string::npos);
  auto e = run_kdflow({"explain", out, "k1"});
  CHECK(e.exit_code == 0);
  CHECK(e.out.find("const13") != std::string::npos);  // the weight: constant 13 of the pool
}

TEST_CASE("Relax: a bad executable is a one-line error naming what is wrong", "[samples][relax][errors]") {
  const std::string good = read_bytes(sample_dir("relax_mlp") + "/vm_exec.bin");
  Expected<VmExecutable> ex = parse_vm_executable(good, "vm_exec.bin");
  REQUIRE(ex);
  REQUIRE(ex->code.size() > 5);
  const int main_index = ex->find("main");
  REQUIRE(main_index >= 0);

  struct Case {
    std::string name, bytes, want;
  };
  std::vector<Case> cases;
  cases.push_back({"truncated", good.substr(0, good.size() / 2), "payload length"});
  std::string magic = good;
  magic[8] ^= 0x5a;
  cases.push_back({"magic", magic, "not a Relax VM executable"});
  std::string version = good;
  const size_t v = good.find("0.14");
  REQUIRE(v != std::string::npos);
  version.replace(v, 4, "0.99");
  cases.push_back({"version", version, "version \"0.99\" is not supported"});
  std::string opcode = good;
  put_i64(opcode, ex->code[0].byte, 9);
  cases.push_back({"opcode", opcode, "unknown opcode 9"});
  // Instruction 4 calls fused_matmul_add_relu(%0, ...): make its first operand register 4000.
  std::string reg = good;
  REQUIRE(ex->code[4].op == VmInstruction::Op::Call);
  put_i64(reg, ex->code[4].byte + 8 * 4, 4000);
  cases.push_back({"register", reg, "register %4000 is out of range"});
  std::string builtin = good;
  const size_t b = good.find("vm.builtin.null_value");
  REQUIRE(b != std::string::npos);
  builtin.replace(b, 21, "vm.builtin.nulx_value");
  cases.push_back({"builtin", builtin, "(vm.builtin.nulx_value): this function is neither a modelled VM builtin"});

  for (const Case& c : cases) {
    SECTION(c.name) {
      std::string dir = relax_copy("bad_" + c.name, c.bytes);
      auto r = run_kdflow({"extract", dir, "-o", dir + "/out.json"});
      INFO(r.err);
      CHECK(r.exit_code == 65);
      CHECK(r.err.find(c.want) != std::string::npos);
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      CHECK(!fs::exists(dir + "/out.json"));
    }
  }
  SECTION("tvm-ffi host with a 0.20 executable") {
    // Hand-made: relax_mlp's 0.20 executable with a host.c that has a tvm-ffi marker but the
    // 0.20 packed-call functions: still read (the host functions' signatures decide the ABI).
    std::string host = read_bytes(sample_dir("relax_mlp") + "/host.c") + "\n/* TVMFFIAny */\n";
    std::string dir = relax_copy("ffi_marker", good, &host);
    auto r = run_kdflow({"extract", dir, "-o", dir + "/out.json"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("Relax VM: the symbolic run models the builtins as TVM defines them", "[relax][unit]") {
  // A hand-built program: main(%0) checks its input, allocates a storage, views it, calls a
  // host function, reshapes the result, returns it in a tuple's item.
  VmExecutable ex;
  ex.file = "hand.bin";
  auto fn = [&](const std::string& n) {
    VmFunction f;
    f.name = n;
    ex.functions.push_back(f);
    return static_cast<int64_t>(ex.functions.size() - 1);
  };
  VmFunction main;
  main.kind = VmFunction::Kind::Bytecode;
  main.name = "main";
  main.num_args = 1;
  main.register_file_size = 8;
  main.param_names = {"x"};
  ex.functions.push_back(main);
  auto c = [&](VmConstant k) {
    ex.constants.push_back(std::move(k));
    return static_cast<int64_t>(ex.constants.size() - 1);
  };
  VmConstant f32;
  f32.kind = VmConstant::Kind::DType;
  VmConstant u8 = f32;
  u8.dtype = DType{1, 8, 1};
  VmConstant size;
  size.kind = VmConstant::Kind::Shape;
  size.shape = {64};
  VmConstant shape = size;
  shape.shape = {4, 4};
  VmConstant flat = size;
  flat.shape = {16};
  const int64_t cf32 = c(f32), cu8 = c(u8), csize = c(size), cshape = c(shape), cflat = c(flat);
  using K = VmOperand::Kind;
  auto call = [&](int64_t f, std::vector<VmOperand> args, int64_t dst) {
    VmInstruction i;
    i.op = VmInstruction::Op::Call;
    i.func = f;
    i.args = std::move(args);
    i.dst = dst;
    ex.code.push_back(i);
  };
  call(fn("vm.builtin.check_tensor_info"), {{K::Register, 0}, {K::Immediate, 2}, {K::Constant, cf32}, {K::Immediate, 0}},
       kVmVoidRegister);
  call(fn("vm.builtin.match_shape"),
       {{K::Register, 0}, {K::Register, kVmVoidRegister}, {K::Immediate, 2}, {K::Immediate, 0}, {K::Immediate, 4},
        {K::Immediate, 0}, {K::Immediate, 4}, {K::Immediate, 0}},
       kVmVoidRegister);
  call(fn("vm.builtin.alloc_storage"),
       {{K::Register, kVmVmRegister}, {K::Constant, csize}, {K::Immediate, 0}, {K::Constant, cu8}}, 1);
  call(fn("vm.builtin.alloc_tensor"), {{K::Register, 1}, {K::Immediate, 0}, {K::Constant, cshape}, {K::Constant, cf32}}, 2);
  call(fn("f"), {{K::Register, 0}, {K::Register, 2}}, kVmVoidRegister);
  call(fn("vm.builtin.reshape"), {{K::Register, 2}, {K::Constant, cflat}}, 3);
  call(fn("vm.builtin.make_tuple"), {{K::Register, 3}}, 4);
  call(fn("vm.builtin.tuple_getitem"), {{K::Register, 4}, {K::Immediate, 0}}, 5);
  VmInstruction ret;
  ret.op = VmInstruction::Op::Ret;
  ret.reg = 5;
  ex.code.push_back(ret);
  ex.functions[0].end_instr = static_cast<int64_t>(ex.code.size());

  Expected<RelaxProgram> p = run_relax_vm(ex, {"f"});
  REQUIRE(p);
  const Graph& g = p->graph;
  REQUIRE(g.nodes.size() == 3);  // x, f, __nop (the reshape)
  CHECK(g.nodes[0].name == "x");
  CHECK(p->input_index[0] == 0);
  CHECK(g.nodes[1].func_name == "f");
  CHECK(g.nodes[2].func_name == "__nop");
  CHECK(g.entries[1].storage_id == 0);  // f's output: the first storage
  CHECK(g.entries[2].storage_id == 0);  // the reshape shares it
  CHECK(g.entries[2].shape == std::vector<int64_t>{16});
  CHECK(g.entries[0].storage_id == 1);  // the input after the storages
  REQUIRE(g.heads.size() == 1);
  CHECK(g.heads[0].node == 2);
  CHECK(p->storage_bytes == std::vector<uint64_t>{64});

  // A symbolic dimension with no shape given is an error naming the parameter and the option;
  // with a shape but no shape heap to store into, one naming the match code.
  VmExecutable symbolic = ex;
  symbolic.code[1].args[3].value = 1;  // kStoreToHeap
  Expected<RelaxProgram> e = run_relax_vm(symbolic, {"f"});
  REQUIRE(!e);
  CHECK(e.error().message == "hand.bin: error: instruction 1 (vm.builtin.match_shape): VM parameter 0 (\"x\") has a "
                             "symbolic shape: give it with --input-shape x=AxB... or an input_x.npy beside the build");
  RelaxVmEnv env;
  env.input_shapes[0] = {4, 4};
  e = run_relax_vm(symbolic, {"f"}, "main", {}, env);
  REQUIRE(!e);
  CHECK(e.error().message.find("dimension 0: match code 1 without a shape heap") != std::string::npos);
  // A reshape to another size is checked.
  VmExecutable resize = ex;
  resize.constants[cflat].shape = {15};
  e = run_relax_vm(resize, {"f"});
  REQUIRE(!e);
  CHECK(e.error().message.find("instruction 5 (vm.builtin.reshape): reshapes [4, 4] to [15], another size") !=
        std::string::npos);
  // A fused call's output must be a tensor no call has written yet.
  VmExecutable no_out = ex;
  no_out.code[4].args = {{K::Register, 0}};
  e = run_relax_vm(no_out, {"f"});
  REQUIRE(!e);
  CHECK(e.error().message.find("instruction 4 (f): no argument is a freshly allocated tensor") != std::string::npos);
}

TEST_CASE("Relax: model.so's relax.VMExecutable gives the folder's flow", "[samples][relax][library]") {
  const std::string shared = shared_sample_dir("relax_mlp");
  if (shared.empty() || !fs::exists(shared + "/model.so")) {
    WARN("../shared/samples/relax_mlp/model.so not present (left out of samples/, 9.9 MB): skipped");
    return;
  }
  // model.so beside a copy of the folder's host.c and device_<i>.cu, without vm_exec.bin
  // and the function tables: those must come from the blob.
  std::string dir = temp_dir() + "/relax_so";
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(shared)) {
    const std::string n = e.path().filename().string();
    if (n == "host.c" || n == "model.so" || (n.rfind("device_", 0) == 0 && n.size() > 3 && n.substr(n.size() - 3) == ".cu"))
      fs::copy_file(e.path(), dir + "/" + n, fs::copy_options::overwrite_existing);
  }
  Dataflow from_so = extract_dir(dir + "/model.so");
  Dataflow from_dir = extract_dir(sample_dir("relax_mlp"));
  CHECK(from_so.sources.library == "model.so");
  CHECK(from_so.sources.vm_exec == "model.so:__tvm_dev_mblob");
  CHECK(from_so.sources.device == from_dir.sources.device);
  Dataflow a = from_so, b = from_dir;
  a.sources = b.sources = Sources{};
  CHECK(emit_json(a) == emit_json(b));
  CHECK(compare_relax_truth(from_so, shared).empty());
}

TEST_CASE("Relax: replay plans the flow with the weights from the constant pool", "[samples][relax][replay]") {
  auto r = run_kdflow({"replay", sample_dir("relax_mlp"), "--dry-run"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("13 allocations (9866120 bytes), 9 uploads, 5 launches, 1 outputs") != std::string::npos);
  CHECK(r.out.find("upload alloc 7: 1600000 bytes from vm_exec.bin:c[13] (buffer 3 const13, float32 [400, 1000])") !=
        std::string::npos);
  CHECK(r.out.find("alloc 0: storage 0, 8000 bytes") != std::string::npos);  // alloc_storage's 8000 bytes
}

TEST_CASE("relax: --session specs", "[relax][session]") {
  using Kind = kdflow::RelaxSessionStep::Kind;
  auto labels = [](const kdflow::RelaxSession& s) {
    std::vector<std::string> out;
    for (const auto& st : s.steps) out.push_back(st.label.empty() ? std::string("-") : st.label);
    return out;
  };
  auto s = kdflow::parse_session("prefill:7,decode:2");
  REQUIRE(s);
  REQUIRE(s->steps.size() == 4);
  CHECK(s->steps[0].kind == Kind::AddSequence);
  CHECK(s->steps[1].kind == Kind::Prefill);
  CHECK(s->steps[1].tokens == 7);
  CHECK(labels(*s) == std::vector<std::string>{"-", "prefill", "decode 0", "decode 1"});
  CHECK(s->page_size == 16);
  CHECK(s->max_total_seq_len == 0);
  auto t = kdflow::parse_session("decode:3,prefill:5,page_size:32,max_total_seq_len:4096,prefill_chunk_size:512");
  REQUIRE(t);
  CHECK(t->steps.size() == 5);
  CHECK(t->steps[1].tokens == 5);
  CHECK(t->page_size == 32);
  // A prefill longer than prefill_chunk_size runs in chunks, as MLC's engine runs it.
  auto c = kdflow::parse_session("prefill:10,decode:1,prefill_chunk_size:4");
  REQUIRE(c);
  CHECK(labels(*c) == std::vector<std::string>{"-", "prefill chunk 0", "prefill chunk 1", "prefill chunk 2", "decode 0"});
  CHECK(c->steps[3].tokens == 2);
  CHECK(t->max_total_seq_len == 4096);
  CHECK(t->prefill_chunk_size == 512);
  for (const char* bad : {"", "prefill", "prefill:", "prefill:0", "decode:2", "prefill:-1", "prefill:7,decode:x",
                          "prefill:7,beam:2", "prefill:12345678901", "prefill:7,,decode:1"}) {
    auto r = kdflow::parse_session(bad);
    INFO(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == kdflow::ExitCode::Usage);
    CHECK(r.error().message.find("--session") != std::string::npos);
  }
}

TEST_CASE("relax: session files (hand-written, labelled: the steps a driver makes)", "[relax][session]") {
  const std::string dir = temp_dir();
  auto write = [&](const std::string& text) {
    std::string p = dir + "/session.json";
    std::ofstream(p) << text;
    return p;
  };
  auto s = kdflow::parse_session(write(R"({"kv_cache": {"max_total_seq_len": 64},
      "steps": [{"op": "add_sequence", "seq": 0}, {"op": "prefill", "seq": 0, "tokens": 5},
                {"op": "add_sequence", "seq": 3}, {"op": "prefill", "seq": 3, "tokens": 2},
                {"op": "decode", "seq": [3, 0]},
                {"op": "decode", "seq": 0}, {"op": "remove_sequence", "seq": 3}, {"op": "decode", "seq": 0}]})"));
  REQUIRE(s);
  CHECK(s->max_total_seq_len == 64);
  std::vector<std::string> labels;
  for (const auto& st : s->steps) labels.push_back(st.label);
  CHECK(labels == std::vector<std::string>{"", "seq 0 prefill", "", "seq 3 prefill", "batch decode 0",
                                           "seq 0 decode 0", "", "seq 0 decode 1"});
  CHECK(s->steps[4].kind == kdflow::RelaxSessionStep::Kind::BatchDecode);
  CHECK(s->steps[4].seqs == std::vector<int64_t>{3, 0});
  // A sliding window as MLC's engine gives a sequence one (mistral).
  auto w = kdflow::parse_session(write(R"({"kv_cache": {"support_sliding_window": true},
      "steps": [{"op": "add_sequence", "seq": 0}, {"op": "enable_sliding_window", "seq": 0, "window": 64, "sink": 4},
                {"op": "prefill", "seq": 0, "tokens": 5}]})"));
  REQUIRE(w);
  CHECK(w->support_sliding_window == 1);
  CHECK(w->steps[1].kind == kdflow::RelaxSessionStep::Kind::EnableSlidingWindow);
  CHECK(w->steps[1].window == 64);
  CHECK(w->steps[1].sink == 4);
  CHECK(w->steps[1].label == "enable_sliding_window 0");
  struct Bad {
    const char* text;
    const char* pointer;
    kdflow::ExitCode code;
  };
  for (const Bad& b : {Bad{R"([])", "", kdflow::ExitCode::DataError},
                       Bad{R"({"steps": []})", "/steps", kdflow::ExitCode::DataError},
                       Bad{R"({"steps": [{"op": "beam", "seq": 0}]})", "/steps/0/op", kdflow::ExitCode::DataError},
                       Bad{R"({"steps": [{"op": "fork_sequence", "seq": 0}]})", "/steps/0/parent",
                           kdflow::ExitCode::DataError},
                       Bad{R"({"steps": [{"op": "fork_sequence", "seq": 1, "parent": 0, "pos": -2}]})",
                           "/steps/0/pos", kdflow::ExitCode::DataError},
                       Bad{R"({"steps": [{"op": "popn", "seq": 0}]})", "/steps/0/n", kdflow::ExitCode::DataError},
                       Bad{R"({"steps": [{"op": "popn", "seq": 0, "n": 1, "pos": 2}]})", "/steps/0/pos",
                           kdflow::ExitCode::DataError},
                       Bad{R"({"steps": [{"op": "prefill", "seq": 0}]})", "/steps/0/tokens", kdflow::ExitCode::DataError},
                       Bad{R"({"steps": [{"op": "decode", "seq": -1}]})", "/steps/0/seq", kdflow::ExitCode::DataError},
                       Bad{R"({"steps": [{"op": "decode", "seq": [1, 1]}]})", "/steps/0/seq/1",
                           kdflow::ExitCode::DataError},
                       Bad{R"({"steps": [{"op": "decode", "seq": []}]})", "/steps/0/seq", kdflow::ExitCode::DataError},
                       Bad{R"({"steps": [{"op": "decode", "seq": 0, "tokens": 2}]})", "/steps/0/tokens",
                           kdflow::ExitCode::DataError},
                       Bad{R"({"kv_cache": {"page": 16}, "steps": [{"op": "decode", "seq": 0}]})", "/kv_cache/page",
                           kdflow::ExitCode::DataError},
                       Bad{R"({"kv_cache": {"support_sliding_window": 2}, "steps": [{"op": "decode", "seq": 0}]})",
                           "/kv_cache/support_sliding_window", kdflow::ExitCode::DataError},
                       Bad{R"({"steps": [{"op": "enable_sliding_window", "seq": 0}]})", "/steps/0/window",
                           kdflow::ExitCode::DataError},
                       Bad{R"({"steps": [{"op": "enable_sliding_window", "seq": 0, "window": 8, "sink": 8}]})",
                           "/steps/0/sink", kdflow::ExitCode::DataError},
                       Bad{R"({"steps": [{"op": "enable_sliding_window", "seq": 0, "window": 8, "tokens": 1}]})",
                           "/steps/0/tokens", kdflow::ExitCode::DataError}}) {
    auto r = kdflow::parse_session(write(b.text));
    INFO(b.text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == b.code);
    INFO(r.error().message);
    CHECK(r.error().message.find(std::string("session.json") + (*b.pointer ? ":" : "") + b.pointer + ": error:") !=
          std::string::npos);
  }
}
