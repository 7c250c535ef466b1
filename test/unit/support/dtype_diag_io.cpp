// Unit tests: dtype parsing/printing, diagnostic builders, checked arithmetic, file I/O.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "kdflow/support/diag.h"
#include "kdflow/support/dtype.h"
#include "kdflow/support/io.h"
#include "test_util.h"

using namespace kdflow;
namespace fs = std::filesystem;

TEST_CASE("parse_dtype accepts TVM's type strings", "[dtype]") {
  CHECK(parse_dtype("float32") == DType{kDLFloat, 32, 1});
  CHECK(parse_dtype("float16") == DType{kDLFloat, 16, 1});
  CHECK(parse_dtype("int64") == DType{kDLInt, 64, 1});
  CHECK(parse_dtype("uint8") == DType{kDLUInt, 8, 1});
  CHECK(parse_dtype("bool") == DType{kDLUInt, 1, 1});
  CHECK(parse_dtype("int8x4") == DType{kDLInt, 8, 4});
  CHECK(parse_dtype("float16x4") == DType{kDLFloat, 16, 4});
  CHECK(parse_dtype("handle") == DType{kDLOpaqueHandle, 64, 1});
  CHECK(parse_dtype("bfloat16") == DType{kDLBfloat, 16, 1});
}

TEST_CASE("parse_dtype rejects malformed type strings", "[dtype]") {
  for (const char* bad : {"",         "float",    "floaty32", "float32x", "float32x0", "int0",       "int256",
                          "uint1024", "float-32", "float+32", "float32 ", " float32",  "int8x65536", "bfloat32",
                          "bool8",    "handle64", "int08",    "x4",       "Float32",   "float32x4x4"}) {
    INFO("dtype: '" << bad << "'");
    CHECK_FALSE(parse_dtype(bad).has_value());
  }
}

TEST_CASE("dtype_to_string inverts parse_dtype", "[dtype]") {
  for (const char* s :
       {"float32", "float64", "int32", "int64", "uint8", "bool", "int8x4", "handle", "bfloat16", "float16x2"}) {
    auto t = parse_dtype(s);
    REQUIRE(t);
    CHECK(dtype_to_string(*t) == s);
  }
  CHECK(dtype_to_string(DType{kDLUInt, 1, 1}) == "bool");
  CHECK(dtype_to_string(DType{kDLUInt, 1, 4}) == "uint1x4");
}

TEST_CASE("dtype_element_bytes rounds bits up to bytes", "[dtype]") {
  CHECK(dtype_element_bytes(*parse_dtype("float32")) == 4);
  CHECK(dtype_element_bytes(*parse_dtype("bool")) == 1);
  CHECK(dtype_element_bytes(*parse_dtype("int8x4")) == 4);
  CHECK(dtype_element_bytes(*parse_dtype("float16x3")) == 6);
  CHECK(dtype_element_bytes(DType{kDLInt, 4, 1}) == 1);
  CHECK(dtype_element_bytes(DType{kDLInt, 4, 3}) == 2);
  CHECK(dtype_element_bytes(DType{kDLInt, 255, 65535}) == (255ull * 65535 + 7) / 8);
}

TEST_CASE("diagnostic builders produce the documented one-line shapes", "[diag]") {
  Error e = source_error("host.c", 12, 5, "unexpected call");
  CHECK(e.message == "host.c:12:5: error: unexpected call");
  CHECK(e.code == ExitCode::DataError);

  e = json_error("graph.json", "/nodes/12/inputs/0", "bad input", ExitCode::Software);
  CHECK(e.message == "graph.json:/nodes/12/inputs/0: error: bad input");
  CHECK(e.code == ExitCode::Software);

  CHECK(json_error("graph.json", "", "not an object").message == "graph.json: error: not an object");
  CHECK(file_error("params.bin", "truncated", ExitCode::IoError).message == "params.bin: error: truncated");
  CHECK(file_error("params.bin", "truncated", ExitCode::IoError).code == ExitCode::IoError);
  // A message never spans lines, even when input text with newlines slips in.
  CHECK(file_error("f", "a\nb\r\nc").message.find('\n') == std::string::npos);
}

TEST_CASE("json_pointer_token escapes ~ and /", "[diag]") {
  CHECK(json_pointer_token("plain") == "plain");
  CHECK(json_pointer_token("a/b") == "a~1b");
  CHECK(json_pointer_token("m~n") == "m~0n");
  CHECK(json_pointer_token("~/") == "~0~1");
  CHECK(json_pointer_token("") == "");
}

TEST_CASE("checked_mul and checked_add detect overflow", "[diag]") {
  uint64_t r = 7;
  CHECK(checked_mul(1ull << 32, 1ull << 31, &r));
  CHECK(r == 1ull << 63);
  r = 7;
  CHECK_FALSE(checked_mul(1ull << 32, 1ull << 32, &r));
  CHECK(r == 7);  // untouched on overflow
  CHECK(checked_mul(0, UINT64_MAX, &r));
  CHECK(r == 0);
  CHECK(checked_add(UINT64_MAX - 1, 1, &r));
  CHECK(r == UINT64_MAX);
  CHECK_FALSE(checked_add(UINT64_MAX, 1, &r));
}

TEST_CASE("Expected and Status carry values and errors", "[diag]") {
  Expected<int> ok = 3;
  REQUIRE(ok);
  CHECK(*ok == 3);
  Expected<int> bad = file_error("f", "x");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "f: error: x");
  CHECK(Status::ok());
  CHECK_FALSE(Status(file_error("f", "x")));
}

TEST_CASE("read_file reads whole files and reports missing ones", "[io]") {
  std::string dir = test::temp_dir();
  std::string path = dir + "/data.bin";
  std::string content("a\0b\nc", 5);
  { std::ofstream(path, std::ios::binary) << content; }

  auto r = read_file(path);
  REQUIRE(r);
  CHECK(*r == content);

  auto missing = read_file(dir + "/nope.json");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ExitCode::NoInput);
  CHECK(missing.error().message == dir + "/nope.json: error: cannot read: No such file or directory");

  auto capped = read_file(path, 4);
  REQUIRE_FALSE(capped);
  CHECK(capped.error().code == ExitCode::DataError);
  CHECK(capped.error().message.rfind(path + ": error: ", 0) == 0);
  CHECK(read_file(path, 5));

  auto d = read_file(dir);
  REQUIRE_FALSE(d);
  CHECK(d.error().code == ExitCode::NoInput);
  CHECK(d.error().message == dir + ": error: cannot read: Is a directory");
}

TEST_CASE("read_file reads the real samples", "[io]") {
  auto r = read_file(test::sample_dir("mlp") + "/graph.json");
  REQUIRE(r);
  CHECK(*r == test::slurp(test::sample_dir("mlp") + "/graph.json"));
}

TEST_CASE("map_file maps regular files, reads empty ones, errors like read_file", "[io]") {
  std::string dir = test::temp_dir();
  std::string path = dir + "/data.bin";
  std::string content("a\0b\nc", 5);
  { std::ofstream(path, std::ios::binary) << content; }

  auto m = map_file(path);
  REQUIRE(m);
  CHECK(m->bytes() == content);
  // Moving keeps the view valid and leaves the source empty.
  MappedFile moved = m.take();
  CHECK(moved.bytes() == content);
  MappedFile other;
  other = std::move(moved);
  CHECK(other.bytes() == content);

  std::string empty = dir + "/empty.bin";
  { std::ofstream(empty, std::ios::binary); }
  auto e = map_file(empty);
  REQUIRE(e);
  CHECK(e->bytes().empty());

  auto capped = map_file(path, 4);
  REQUIRE_FALSE(capped);
  CHECK(capped.error().message == path + ": error: file is 5 bytes, more than the limit of 4 bytes");
  auto missing = map_file(dir + "/nope.bin");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ExitCode::NoInput);
  auto d = map_file(dir);
  REQUIRE_FALSE(d);
  CHECK(d.error().message == dir + ": error: cannot read: Is a directory");

  auto params = map_file(test::sample_dir("squeezenet") + "/params.bin");
  REQUIRE(params);
  CHECK(params->bytes() == test::slurp(test::sample_dir("squeezenet") + "/params.bin"));
}

TEST_CASE("write_file_atomic replaces the file and leaves no temp file", "[io]") {
  std::string dir = test::temp_dir();
  std::string path = dir + "/out.json";
  REQUIRE(write_file_atomic(path, "first"));
  CHECK(test::slurp(path) == "first");
  REQUIRE(write_file_atomic(path, "second, longer"));
  CHECK(test::slurp(path) == "second, longer");
  REQUIRE(write_file_atomic(path, ""));
  CHECK(test::slurp(path).empty());
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  CHECK(n == 1);
  // Written with ordinary permissions, not mkstemp's 0600.
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  mode_t mask = ::umask(0);
  ::umask(mask);
  CHECK((st.st_mode & 0777) == (0666 & ~mask));
}

TEST_CASE("write_file_atomic fails cleanly", "[io]") {
  std::string dir = test::temp_dir();
  auto s = write_file_atomic(dir + "/no/such/dir/out.json", "x");
  REQUIRE_FALSE(s);
  CHECK(s.error().code == ExitCode::CantCreate);
  CHECK(s.error().message.rfind(dir + "/no/such/dir/out.json: error: cannot write: ", 0) == 0);

  // Renaming onto a directory fails after the temp file exists: it must be removed.
  fs::create_directory(dir + "/target");
  fs::create_directory(dir + "/target/sub");
  s = write_file_atomic(dir + "/target", "x");
  REQUIRE_FALSE(s);
  CHECK(s.error().code == ExitCode::CantCreate);
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    INFO(e.path().string());
    CHECK(e.path().filename() == "target");
    ++n;
  }
  CHECK(n == 1);
}

TEST_CASE("write_file_atomic writes '-' to stdout", "[io]") { CHECK(write_file_atomic("-", "")); }

TEST_CASE("path helpers", "[io]") {
  CHECK(base_name("a/b/graph.json") == "graph.json");
  CHECK(base_name("graph.json") == "graph.json");
  CHECK(base_name("/abs/x") == "x");
  CHECK(base_name("a/b/") == "b");
  CHECK(base_name("/") == "/");
  CHECK(base_name("") == "");

  std::string mlp = test::sample_dir("mlp");
  CHECK(file_exists(mlp + "/graph.json"));
  CHECK_FALSE(file_exists(mlp + "/nothing.json"));
  CHECK(is_directory(mlp));
  CHECK_FALSE(is_directory(mlp + "/graph.json"));
  CHECK(same_file(mlp + "/graph.json", mlp + "/../mlp/./graph.json"));
  CHECK_FALSE(same_file(mlp + "/graph.json", mlp + "/host.c"));
  CHECK_FALSE(same_file(mlp + "/graph.json", mlp + "/missing"));
}
