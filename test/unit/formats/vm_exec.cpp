// vm_exec.cpp — the Relax VM executable reader (vm_exec.h) on a hand-built executable:
// every field, every truncation, and each kind of malformed header, plus the device blob's
// relax.VMExecutable entry. The real executables are tested in samples_relax.cpp.
#include <catch2/catch.hpp>

#include <cstring>

#include "kdflow/formats/device_module.h"
#include "kdflow/formats/vm_exec.h"

using namespace kdflow;

namespace {

struct Bytes {
  std::string b;
  Bytes& u64(uint64_t v) {
    for (int k = 0; k < 8; ++k) b += static_cast<char>((v >> (8 * k)) & 0xff);
    return *this;
  }
  Bytes& i64(int64_t v) { return u64(static_cast<uint64_t>(v)); }
  Bytes& i32(int32_t v) {
    for (int k = 0; k < 4; ++k) b += static_cast<char>((static_cast<uint32_t>(v) >> (8 * k)) & 0xff);
    return *this;
  }
  Bytes& str(const std::string& s) {
    u64(s.size());
    b += s;
    return *this;
  }
};

int64_t arg(int kind, int64_t value) {
  return static_cast<int64_t>((static_cast<uint64_t>(kind) << 56) | (static_cast<uint64_t>(value) & ((1ull << 56) - 1)));
}

/// main: %0 = null_value(); %1 = f(c[0], i-3, %0); ret %1 — and one constant of each type.
std::string payload(const std::string& version = "0.14", int32_t const_type = 2, int64_t opcode = 1) {
  Bytes p;
  p.u64(kVmExecMagic).str(version);
  p.u64(2);
  p.i32(1).str("main").i64(0).i64(3).i64(0).i64(2).u64(1).str("x");
  p.i32(0).str("vm.builtin.null_value").i64(0).i64(0).i64(-1).i64(0).u64(0);
  p.u64(6);
  p.i32(const_type).u64(2).i64(1).i64(4);                         // shape (1, 4)
  p.i32(3).str("global");                                         // string
  p.i32(4).i64(-7);                                               // int
  double f = 1.5;
  uint64_t fb;
  std::memcpy(&fb, &f, 8);
  p.i32(5).u64(fb);                                               // float
  p.i32(1).i32(2 | (32 << 8) | (1 << 16));                        // dtype float32
  p.i32(0).u64(0xDD5E40F096B4A13Full).u64(0).i32(1).i32(0).i32(1).i32(2 | (32 << 8) | (1 << 16)).i64(2).i64(8);
  p.b += std::string(8, '\x01');                                  // tensor float32[2]
  // code: offsets then words
  std::vector<int64_t> words = {opcode, 0, 1, 0,                                  // call null_value → %0
                                1,      1, 1, 3, arg(2, 0), arg(1, -3), arg(0, 0),  // call f(c[0], i-3, %0) → %1
                                2,      1};                                         // ret %1
  p.u64(3).i64(0).i64(4).i64(11);
  p.u64(words.size());
  for (int64_t w : words) p.i64(w);
  return p.b;
}

std::string with_length(const std::string& p) {
  Bytes b;
  b.u64(p.size());
  return b.b + p;
}

}  // namespace

TEST_CASE("vm_exec: a hand-built executable reads back field by field", "[vm_exec]") {
  std::string bytes = with_length(payload());
  Expected<VmExecutable> ex = parse_vm_executable(bytes, "x.bin");
  REQUIRE(ex);
  CHECK(ex->version == "0.14");
  REQUIRE(ex->functions.size() == 2);
  CHECK(ex->functions[0].kind == VmFunction::Kind::Bytecode);
  CHECK(ex->functions[0].end_instr == 3);
  CHECK(ex->functions[0].param_names == std::vector<std::string>{"x"});
  CHECK(ex->find("vm.builtin.null_value") == 1);
  REQUIRE(ex->constants.size() == 6);
  CHECK(ex->constants[0].shape == std::vector<int64_t>{1, 4});
  CHECK(ex->constants[1].text == "global");
  CHECK(ex->constants[2].int_value == -7);
  CHECK(ex->constants[3].float_value == 1.5);
  CHECK(ex->constants[4].dtype == DType{2, 32, 1});
  CHECK(ex->constants[5].kind == VmConstant::Kind::Tensor);
  CHECK(ex->constants[5].nbytes == 8);
  CHECK(bytes.substr(ex->constants[5].data_offset, 8) == std::string(8, '\x01'));
  REQUIRE(ex->code.size() == 3);
  CHECK(ex->code[1].op == VmInstruction::Op::Call);
  CHECK(ex->code[1].dst == 1);
  REQUIRE(ex->code[1].args.size() == 3);
  CHECK(ex->code[1].args[0].kind == VmOperand::Kind::Constant);
  CHECK(ex->code[1].args[1].kind == VmOperand::Kind::Immediate);
  CHECK(ex->code[1].args[1].value == -3);  // 56-bit values are sign-extended
  CHECK(ex->code[2].op == VmInstruction::Op::Ret);
  CHECK(ex->code[2].reg == 1);
}

TEST_CASE("vm_exec: every truncation is an error, never a crash", "[vm_exec]") {
  const std::string p = payload();
  for (size_t n = 0; n < p.size(); ++n) {
    INFO("payload cut to " << n << " bytes");
    CHECK(!parse_vm_executable(with_length(p.substr(0, n)), "x.bin"));  // a consistent length, a short payload
    CHECK(!parse_vm_executable(with_length(p).substr(0, 8 + n), "x.bin"));  // the file cut
  }
}

TEST_CASE("vm_exec: unknown magic, version, constant type and opcode are named", "[vm_exec]") {
  std::string bad_magic = with_length(payload());
  bad_magic[8] = 0;
  auto e = parse_vm_executable(bad_magic, "x.bin");
  REQUIRE(!e);
  CHECK(e.error().message.find("x.bin: byte 8: error: not a Relax VM executable (magic 0xd225de2f42141500") == 0);
  e = parse_vm_executable(with_length(payload("0.13")), "x.bin");
  REQUIRE(!e);
  CHECK(e.error().message.find("Relax VM executable version \"0.13\" is not supported") != std::string::npos);
  e = parse_vm_executable(with_length(payload("0.14", 9)), "x.bin");
  REQUIRE(!e);
  CHECK(e.error().message.find("constant 0: unknown constant type 9") != std::string::npos);
  e = parse_vm_executable(with_length(payload("0.14", 2, 7)), "x.bin");
  REQUIRE(!e);
  CHECK(e.error().message.find("instruction 0 has unknown opcode 7") != std::string::npos);
  CHECK(e.error().code == ExitCode::DataError);
}

TEST_CASE("device blob: a relax.VMExecutable entry is kept as vm_exec.bin holds it", "[vm_exec][device_blob]") {
  const std::string exec = with_length(payload());
  Bytes body;
  body.u64(1).str("relax.VMExecutable");
  body.b += exec;
  Bytes blob;
  blob.u64(body.b.size());
  blob.b += body.b;
  Expected<DeviceBlob> b = parse_device_blob(blob.b, "blob");
  REQUIRE(b);
  REQUIRE(b->vm_executables.size() == 1);
  CHECK(b->vm_executables[0] == exec);
  CHECK(parse_vm_executable(b->vm_executables[0], "blob"));
  // An entry longer than the blob is an error.
  Bytes cut;
  cut.u64(body.b.size() - 4);
  cut.b += body.b.substr(0, body.b.size() - 4);
  CHECK(!parse_device_blob(cut.b, "blob"));
}
