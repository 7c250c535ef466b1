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

/// The checks of ../shared/tools/compare_relax_truth.py, on the IR. The compiled-mode truth
/// names no fused function (TVM's __vmtir__main calls them directly, which the recorder does
/// not see): there `function` is compared with the bytecode mode's instead (`functions`).
std::vector<std::string> compare_relax_truth(const Dataflow& df, const std::string& dir,
                                             const std::vector<std::string>* functions = nullptr) {
  json truth = json::parse(slurp(dir + "/truth.json"));
  json meta = json::parse(slurp(dir + "/device.tvm_meta.json")).at("func_info");
  std::vector<std::string> bad;
  std::string func;
  size_t i = 0;
  std::map<int64_t, int> ws;
  for (const json& ev : truth.at("events")) {
    const std::string kind = ev.at("ev").get<std::string>();
    if (kind == "call" && ev.at("func").get<std::string>().rfind("vm.builtin.", 0) != 0) func = ev.at("func");
    if (kind != "launch") continue;
    const std::string where = "launch " + std::to_string(i) + ": ";
    if (i >= df.kernels.size()) {
      bad.push_back(where + "missing");
      ++i;
      continue;
    }
    const Kernel& k = df.kernels[i];
    const std::string name = ev.at("kernel");
    if (k.name != name) bad.push_back(where + "name " + k.name + " != " + name);
    const std::string want_func = functions ? (*functions)[i] : func;
    if (k.function != want_func) bad.push_back(where + "function " + k.function + " != " + want_func);
    const json& info = meta.at(name);
    const size_t n = info.at("arg_types").size();
    const json& args = ev.at("args");
    std::array<int64_t, 3> grid{1, 1, 1}, block{1, 1, 1};
    int64_t smem = 0;
    for (size_t t = 0; t < info.at("launch_param_tags").size(); ++t) {
      const std::string tag = info["launch_param_tags"][t];
      int64_t v = args.at(n + t).value("i", int64_t(0));
      if (tag.find("use_dyn_shared_memory") != std::string::npos) smem = v;
      for (int d = 0; d < 3; ++d) {
        if (tag == std::string("blockIdx.") + "xyz"[d]) grid[d] = std::max<int64_t>(1, v);
        if (tag == std::string("threadIdx.") + "xyz"[d]) block[d] = std::max<int64_t>(1, v);
      }
    }
    if (k.grid != grid) bad.push_back(where + "grid");
    if (k.block != block) bad.push_back(where + "block");
    if (k.dynamic_shared_memory != smem) bad.push_back(where + "smem");
    if (k.args.size() != n) {
      bad.push_back(where + "argument count");
    } else {
      for (size_t j = 0; j < n; ++j) {
        const json& t = args[j];
        const Arg& a = k.args[j];
        const std::string aw = where + "arg " + std::to_string(j) + ": ";
        if (t.contains("i") || t.contains("f")) {
          double want = t.contains("i") ? t["i"].get<double>() : t["f"].get<double>();
          double got = a.kind == Arg::Kind::Int ? double(a.int_value) : a.kind == Arg::Kind::Float ? a.float_value : -1e300;
          if (got != want) bad.push_back(aw + "value");
          continue;
        }
        if (a.kind != Arg::Kind::Buffer) {
          bad.push_back(aw + "not a buffer");
          continue;
        }
        const Buffer& b = df.buffers.at(a.buffer);
        if (a.offset != t.value("offset", int64_t(0))) bad.push_back(aw + "offset");
        if (t.contains("storage")) {
          if (b.kind == BufferKind::Input || b.kind == BufferKind::Param || b.kind == BufferKind::Workspace ||
              b.storage_id != t["storage"].get<int64_t>())
            bad.push_back(aw + "storage " + std::to_string(t["storage"].get<int64_t>()));
        } else if (t.contains("input")) {
          if (b.kind != BufferKind::Input || b.input_index != t["input"].get<int>()) bad.push_back(aw + "input");
        } else if (t.contains("const")) {
          if (b.kind != BufferKind::Param || b.constant_index != t["const"].get<int>()) bad.push_back(aw + "const");
        } else if (t.contains("workspace")) {
          auto [it, fresh] = ws.emplace(t["workspace"].get<int64_t>(), b.id);
          if (b.kind != BufferKind::Workspace || it->second != b.id) bad.push_back(aw + "workspace");
        } else {
          bad.push_back(aw + "unexpected truth argument");
        }
      }
    }
    ++i;
  }
  if (i != df.kernels.size()) bad.push_back("kernel count " + std::to_string(df.kernels.size()) + " != truth " + std::to_string(i));
  return bad;
}

/// The flow without source positions and file names, which differ between the two modes'
/// folders (host.c line numbers, device_<i> numbering).
std::string without_positions(Dataflow df) {
  df.sources = Sources{};
  for (auto& b : df.buffers) b.loc = {};
  for (auto& k : df.kernels) k.loc = {};
  for (auto& c : df.library_calls) c.loc = {};
  for (auto& n : df.nodes) n.loc = {};
  for (auto& f : df.device_functions) f.loc = {};
  return emit_json(df);
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
  SECTION("tvm-ffi host") {
    std::string host = read_bytes(sample_dir("relax_mlp") + "/host.c") + "\n/* TVMFFIAny */\n";
    std::string dir = relax_copy("bad_ffi", good, &host);
    auto r = run_kdflow({"extract", dir, "-o", dir + "/out.json"});
    CHECK(r.exit_code == 65);
    CHECK(r.err.find("tvm-ffi ABI (TVMFFIAny) of TVM 0.21") != std::string::npos);
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

  // A symbolic dimension is an error naming the builtin and the instruction.
  VmExecutable symbolic = ex;
  symbolic.code[1].args[3].value = 1;  // kStoreToHeap
  Expected<RelaxProgram> e = run_relax_vm(symbolic, {"f"});
  REQUIRE(!e);
  CHECK(e.error().message == "hand.bin: error: instruction 1 (vm.builtin.match_shape): dimension 0 is symbolic (match "
                             "code 1): only static shapes are modelled");
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
