// The packed params' shapes read from the annotation TVM writes into check_tuple_info's error
// context (lib/frontend/relax/packed_shapes.h). Labelled unit tests of that one text form:
// the strings below are the form TVM 0.27 prints (an MLC-LLM gpt2's, shortened); the real
// builds are test/tvm's (check_models.py: a session extracted without the params file gives
// the same kernels as with it).
#include <catch2/catch.hpp>

#include "frontend/relax/packed_shapes.h"

using namespace kdflow;

TEST_CASE("packed params' shapes: TVM's annotation of a tuple of tensors, symbolic dims given", "[packed_shapes]") {
  const std::string text =
      "T.Tuple(R.Tensor((vocab_size, T.int64(64)), dtype=\"float32\"), R.Tensor((T.int64(128), T.int64(64)), "
      "dtype=\"float16\"), R.Tensor((T.int64(64),), dtype=\"float32\"), R.Tensor((), dtype=\"int8\"))) ";
  Expected<ParamsFile> pf = parse_packed_annotation(text, {{"vocab_size", 151936}}, "vm_exec.bin");
  REQUIRE(pf);
  REQUIRE(pf->arrays.size() == 4);
  CHECK(pf->arrays[0].name == "packed_params[0]");
  CHECK(pf->arrays[0].shape == std::vector<int64_t>{151936, 64});
  CHECK(pf->arrays[0].nbytes == 151936ull * 64 * 4);
  CHECK(pf->arrays[1].shape == std::vector<int64_t>{128, 64});
  CHECK(pf->arrays[1].dtype.bits == 16);
  CHECK(pf->arrays[2].shape == std::vector<int64_t>{64});
  CHECK(pf->arrays[3].shape.empty());
  CHECK(pf->arrays[3].nbytes == 1);
}

TEST_CASE("packed params' shapes: TVM 0.25's form, R.Tuple of plain numbers", "[packed_shapes]") {
  // As test/tvm's llm model built with TVM 0.25 writes it.
  const std::string text =
      "R.Tuple(R.Tensor((256, 64), dtype=\"float32\"), R.Tensor((64,), dtype=\"float32\"), R.Tensor((128, 64), "
      "dtype=\"float32\"))) ";
  Expected<ParamsFile> pf = parse_packed_annotation(text, {}, "vm_exec.bin");
  REQUIRE(pf);
  REQUIRE(pf->arrays.size() == 3);
  CHECK(pf->arrays[0].shape == std::vector<int64_t>{256, 64});
  CHECK(pf->arrays[1].shape == std::vector<int64_t>{64});
}

TEST_CASE("packed params' shapes: what the annotation cannot give is refused in one line", "[packed_shapes]") {
  const std::string sym = "T.Tuple(R.Tensor((vocab_size, T.int64(64)), dtype=\"float32\"))";
  Expected<ParamsFile> pf = parse_packed_annotation(sym, {}, "vm_exec.bin");
  REQUIRE(!pf);
  CHECK(pf.error().code == ExitCode::Usage);
  CHECK(pf.error().message.find("--param-dim vocab_size=N") != std::string::npos);
  for (const char* bad : {"T.Tuple(R.Tensor((n * 2, 4), dtype=\"float32\"))",      // an expression
                          "T.Tuple(T.Tuple(R.Tensor((4,), dtype=\"float32\")))",    // nested
                          "T.Tuple(R.Tensor((4,), dtype=\"quux\"))",               // no such dtype
                          "T.Tuple(R.Tensor((4,), dtype=\"float32\")",             // cut short
                          "R.Tensor((4,), dtype=\"float32\")",                     // not a tuple
                          "T.Tuple(R.Tensor((99999999999999999999,), dtype=\"float32\"))",
                          "T.Tuple(R.Tensor((4294967296, 4294967296), dtype=\"float32\"))"}) {
    Expected<ParamsFile> r = parse_packed_annotation(bad, {{"n", 3}}, "vm_exec.bin");
    INFO(bad);
    REQUIRE(!r);
    CHECK(r.error().message.rfind("vm_exec.bin", 0) == 0);
    CHECK(r.error().message.find('\n') == std::string::npos);
  }
}

TEST_CASE("packed params' shapes: --param-dim NAME=N", "[packed_shapes]") {
  std::map<std::string, int64_t> dims;
  CHECK(parse_param_dim("vocab_size=151936", &dims));
  CHECK(dims.at("vocab_size") == 151936);
  for (const char* bad : {"vocab_size", "=3", "v=", "v=-1", "v=3x"}) CHECK(!parse_param_dim(bad, &dims));
}
