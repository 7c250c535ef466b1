// Unit tests: .npy files — every sample's inputs and outputs, round trips of every dtype,
// the three format versions, and hostile files (one-line errors).
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>

#include "kdflow/formats/npy.h"
#include "test_util.h"

using namespace kdflow;
namespace fs = std::filesystem;

namespace {

/// An .npy file from its parts: version, header text (padded as given), data.
std::string npy_file(const std::string& header, const std::string& data, int major = 1) {
  std::string out = std::string("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  uint64_t n = header.size();
  int len_bytes = major == 1 ? 2 : 4;
  for (int k = 0; k < len_bytes; ++k) out += static_cast<char>((n >> (8 * k)) & 0xff);
  return out + header + data;
}

std::string f4_header(const std::string& shape) {
  return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }\n";
}

/// `file: error: <one line>`, DataError; returns the message.
std::string bad(const std::string& bytes) {
  auto a = parse_npy(bytes, "x.npy");
  REQUIRE_FALSE(a);
  const std::string& m = a.error().message;
  CHECK(m.rfind("x.npy: error: ", 0) == 0);
  CHECK(m.find('\n') == std::string::npos);
  CHECK(a.error().code == ExitCode::DataError);
  return m;
}

}  // namespace

TEST_CASE("every sample input and output reads, and writes back byte for byte", "[npy]") {
  size_t files = 0;
  for (const std::string& model : test::sample_names()) {
    for (const auto& e : fs::directory_iterator(test::sample_dir(model))) {
      std::string name = e.path().filename().string();
      if (e.path().extension() != ".npy") continue;
      if (name.rfind("input_", 0) != 0 && name.rfind("output_", 0) != 0) continue;
      INFO(e.path().string());
      ++files;
      auto a = read_npy(e.path().string());
      REQUIRE(a);
      // float32, except mlp_fp16's output (float16: the model after ToMixedPrecision).
      const int bits = model == "mlp_fp16" && name.rfind("output_", 0) == 0 ? 16 : 32;
      CHECK(a->dtype == DType{kDLFloat, static_cast<uint8_t>(bits), 1});
      CHECK_FALSE(a->shape.empty());
      CHECK(a->data.size() == a->count() * (bits / 8));
      // NumPy's writer and ours produce the same bytes.
      auto bytes = encode_npy(*a);
      REQUIRE(bytes);
      CHECK(*bytes == test::slurp(e.path().string()));
    }
  }
  CHECK(files >= 16);
  auto in = read_npy(test::sample_dir("mlp") + "/input_input0.npy");
  REQUIRE(in);
  CHECK(in->shape == std::vector<int64_t>{1, 100});
  auto out = read_npy(test::sample_dir("sort_scan") + "/output_2.npy");
  REQUIRE(out);
  CHECK(out->shape == std::vector<int64_t>{4, 1000});
}

TEST_CASE("every dtype and shape round-trips through a file", "[npy]") {
  std::string dir = test::temp_dir();
  const DType types[] = {{kDLUInt, 1, 1},  {kDLInt, 8, 1},   {kDLInt, 16, 1},  {kDLInt, 32, 1},
                         {kDLInt, 64, 1},  {kDLUInt, 8, 1},  {kDLUInt, 16, 1}, {kDLUInt, 32, 1},
                         {kDLUInt, 64, 1}, {kDLFloat, 16, 1}, {kDLFloat, 32, 1}, {kDLFloat, 64, 1}};
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {5}, {2, 3, 4}, {1, 1, 1, 1, 7}};
  int n = 0;
  for (DType t : types) {
    for (const auto& shape : shapes) {
      NpyArray a;
      a.dtype = t;
      a.shape = shape;
      uint64_t bytes = a.count() * dtype_element_bytes(t);
      for (uint64_t i = 0; i < bytes; ++i) a.data += static_cast<char>((i * 37 + 11) & (t.bits == 1 ? 1 : 0xff));
      std::string path = dir + "/a" + std::to_string(n++) + ".npy";
      REQUIRE(write_npy(path, a));
      auto b = read_npy(path);
      INFO(dtype_to_string(t) << " ndim " << shape.size());
      REQUIRE(b);
      CHECK(*b == a);
      std::string file = test::slurp(path);
      CHECK((file.size() - a.data.size()) % 64 == 0);  // header padded as NumPy pads it
    }
  }
  CHECK(npy_descr(DType{kDLFloat, 32, 1}) == std::string("<f4"));
  CHECK(npy_descr(DType{kDLInt, 64, 1}) == std::string("<i8"));
  CHECK(npy_descr(DType{kDLUInt, 1, 1}) == std::string("|b1"));
  CHECK(npy_descr(DType{kDLInt, 32, 1}) == std::string("<i4"));
  CHECK_FALSE(npy_descr(DType{kDLBfloat, 16, 1}));
  CHECK_FALSE(npy_descr(DType{kDLFloat, 32, 4}));
  NpyArray vec;
  vec.dtype = DType{kDLBfloat, 16, 1};
  CHECK_FALSE(encode_npy(vec));
}

TEST_CASE("format versions 2.0 and 3.0, 1-d shapes and big-endian data", "[npy]") {
  std::string data("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);  // 1.0f, 2.0f little-endian
  for (int major : {2, 3}) {
    auto a = parse_npy(npy_file(f4_header("(2,)"), data, major), "v.npy");
    REQUIRE(a);
    CHECK(a->shape == std::vector<int64_t>{2});
    CHECK(a->data == data);
  }
  // Python 2 longs, double quotes, no trailing comma, spacing.
  auto b = parse_npy(npy_file("{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(1L,2L)}", data), "p2.npy");
  REQUIRE(b);
  CHECK(b->shape == std::vector<int64_t>{1, 2});
  std::string be("\x3f\x80\x00\x00\x40\x00\x00\x00", 8);
  auto c = parse_npy(npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", be), "be.npy");
  REQUIRE(c);
  CHECK(c->data == data);
  auto d = parse_npy(npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (), }", std::string("\x01", 1)),
                     "b.npy");
  REQUIRE(d);
  CHECK(d->dtype == DType{kDLUInt, 1, 1});
  CHECK(d->shape.empty());
  CHECK(d->count() == 1);
}

TEST_CASE("bad .npy files give one-line errors", "[npy]") {
  std::string four(4, '\0');
  CHECK(bad("PK\x03\x04 not numpy").find("not a .npy file") != std::string::npos);
  CHECK(bad(std::string("\x93NUMPY", 6)).find("version") != std::string::npos);
  CHECK(bad(std::string("\x93NUMPY\x01\x00\x10", 9)).find("header length") != std::string::npos);
  CHECK(bad(npy_file(f4_header("(1,)"), four, 4)).find("version 4.0") != std::string::npos);
  std::string truncated = npy_file(f4_header("(1,)"), four);
  truncated[8] = '\x7f';
  truncated[9] = '\x7f';
  CHECK(bad(truncated).find("header length 32639") != std::string::npos);
  CHECK(bad(npy_file("[1, 2]", four)).find("not a Python dict") != std::string::npos);
  CHECK(bad(npy_file("{'descr': '<f4', 'shape': (1,), }", four)).find("no 'fortran_order'") != std::string::npos);
  CHECK(bad(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", four))
            .find("unexpected key 'x'") != std::string::npos);
  CHECK(bad(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", four)).find("fortran_order True") !=
        std::string::npos);
  CHECK(bad(npy_file("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')))
            .find("dtype '<c8' is not supported") != std::string::npos);
  CHECK(bad(npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", four))
            .find("structured") != std::string::npos);
  CHECK(bad(npy_file(f4_header("(-1,)"), four)).find("non-negative integers") != std::string::npos);
  CHECK(bad(npy_file(f4_header("(1.5,)"), four)).find("expected ',' or ')'") != std::string::npos);
  CHECK(bad(npy_file(f4_header("[1]"), four)).find("'shape' is not a tuple") != std::string::npos);
  CHECK(bad(npy_file(f4_header("(2,)"), four)).find("data is 4 bytes, but shape and dtype '<f4' need 8") !=
        std::string::npos);
  CHECK(bad(npy_file(f4_header("(1,)"), four + "xx")).find("2 unexpected bytes after the data") != std::string::npos);
  CHECK(bad(npy_file(f4_header("(4294967296, 4294967296)"), four)).find("overflows") != std::string::npos);
  CHECK(bad(npy_file(f4_header("(99999999999999999999,)"), four)).find("too large") != std::string::npos);
  CHECK(bad(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\xff", four)).find("ASCII") !=
        std::string::npos);

  auto missing = read_npy(test::temp_dir() + "/none.npy");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ExitCode::NoInput);
  CHECK(missing.error().message.find('\n') == std::string::npos);
}
