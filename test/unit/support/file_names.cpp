// Tensor names as file names (kdflow/support/file_names.h; docs/schema.md, "Names in file
// names"): the encoding is the exporter's (python/tests/test_exporter.py checks the same table).
#include <catch2/catch.hpp>

#include "kdflow/support/file_names.h"

using namespace kdflow;

TEST_CASE("file names: framework input names round-trip through the encoding") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"gpu_0/data_0", "input_gpu_0%2Fdata_0.npy"}, {"input_1:0", "input_input_1%3A0.npy"},
      {"input.1", "input_input.1.npy"},             {"a b", "input_a%20b.npy"},
      {"%41", "input_%2541.npy"},                   {"", "input_.npy"},
      {"..", "input_...npy"},                       {std::string("x\0", 2), "input_x%00.npy"},
      {"\xc3\xa9t\xc3\xa9", "input_%C3%A9t%C3%A9.npy"}, {"a=b\\c", "input_a%3Db%5Cc.npy"},
  };
  for (const auto& [name, file] : cases) {
    CAPTURE(name);
    CHECK(input_file_name(name) == file);
    CHECK(file.find('/') == std::string::npos);
    REQUIRE(decode_name(encode_name(name)).has_value());
    CHECK(*decode_name(encode_name(name)) == name);
  }
  CHECK(decode_name("%2f").value() == "/");  // either case of hex
  for (const char* bad : {"%", "%4", "%G1", "a%"}) CHECK_FALSE(decode_name(bad).has_value());
}

TEST_CASE("file names: folders written before the encoding are still read") {
  CHECK(input_file_candidates("x") == std::vector<std::string>{"input_x.npy"});
  CHECK(input_file_candidates("input_1:0") ==
        std::vector<std::string>{"input_input_1%3A0.npy", "input_input_1:0.npy"});
  // A name with '/' was never a file name: only the encoded form.
  CHECK(input_file_candidates("gpu_0/data_0") == std::vector<std::string>{"input_gpu_0%2Fdata_0.npy"});
}

TEST_CASE("file names: a typed NAME=VALUE matches the name or its encoding, '=' in names included") {
  const std::vector<std::string> names = {"gpu_0/data_0", "a=b", "a", "input_ids"};
  CHECK(split_name_value("gpu_0/data_0=x.npy", names).value() == std::make_pair(names[0], std::string("x.npy")));
  CHECK(split_name_value("gpu_0%2Fdata_0=x.npy", names).value() == std::make_pair(names[0], std::string("x.npy")));
  CHECK(split_name_value("a=b=f.npy", names).value() == std::make_pair(std::string("a=b"), std::string("f.npy")));
  CHECK(split_name_value("a%3Db=f.npy", names).value() == std::make_pair(std::string("a=b"), std::string("f.npy")));
  CHECK(split_name_value("a=dir/x=y.npy", names).value() ==
        std::make_pair(std::string("a"), std::string("dir/x=y.npy")));
  // No name matches: split at the first '=', for the caller to name the unknown input.
  CHECK(split_name_value("zz=f.npy", names).value() == std::make_pair(std::string("zz"), std::string("f.npy")));
  CHECK_FALSE(split_name_value("nothing", names).has_value());
  CHECK(names_match("input.1", "input.1"));
  CHECK_FALSE(names_match("input%2E1x", "input.1"));
}
