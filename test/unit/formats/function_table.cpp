// Unit tests: the device module's function table (*.tvm_meta.json).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kdflow/formats/function_table.h"
#include "test_util.h"

using namespace kdflow;
using nlohmann::json;

namespace {

json small_table() {
  return json::parse(R"({
    "tvm_version": "0.1.0",
    "func_info": {
      "foo_kernel": {"name": "", "arg_types": ["handle", "handle", "int32", "float32"],
                     "launch_param_tags": ["blockIdx.x", "threadIdx.x", "tir.use_dyn_shared_memory"]},
      "bar_kernel": {"name": "", "arg_types": [], "launch_param_tags": []}
    }
  })");
}

std::string error_of(const std::string& text) {
  auto t = parse_function_table(text, "device.tvm_meta.json");
  REQUIRE_FALSE(t);
  CHECK(t.error().message.find('\n') == std::string::npos);
  CHECK(t.error().code == ExitCode::DataError);
  return t.error().message;
}
std::string error_of(const json& j) { return error_of(j.dump()); }

json with(json j, const char* pointer, json value) {
  j[json::json_pointer(pointer)] = std::move(value);
  return j;
}

}  // namespace

TEST_CASE("every sample function table parses", "[function_table]") {
  for (const auto& name : test::sample_names()) {
    INFO(name);
    std::string text = test::slurp(test::sample_dir(name) + "/device.tvm_meta.json");
    auto t = parse_function_table(text, "device.tvm_meta.json");
    INFO((t ? std::string() : t.error().message));
    REQUIRE(t);
    json j = json::parse(text);
    CHECK(t->functions.size() == j["func_info"].size());
    for (const auto& [key, fi] : t->functions) {
      CHECK(fi.name == key);
      CHECK(fi.arg_types == j["func_info"][key]["arg_types"].get<std::vector<std::string>>());
      CHECK(fi.launch_param_tags == j["func_info"][key]["launch_param_tags"].get<std::vector<std::string>>());
    }
  }
}

TEST_CASE("mlp function table contents", "[function_table]") {
  auto t = parse_function_table(test::slurp(test::sample_dir("mlp") + "/device.tvm_meta.json"), "m.json");
  REQUIRE(t);
  CHECK(t->file == "m.json");
  CHECK(t->functions.size() == 6);
  const FunctionInfo* fi = t->find("tvmgen_default_fused_nn_dense_add_nn_relu_kernel");
  REQUIRE(fi);
  CHECK(fi->arg_types == std::vector<std::string>{"handle", "handle", "handle", "handle"});
  CHECK(fi->launch_param_tags == std::vector<std::string>{"blockIdx.y", "blockIdx.x", "threadIdx.x"});
  fi = t->find("tvmgen_default_fused_nn_log_softmax_kernel_1");
  REQUIRE(fi);
  CHECK(fi->arg_types.size() == 3);
  CHECK(t->find("tvmgen_default_fused_nn_log_softmax_kernel0") == nullptr);
}

TEST_CASE("sort_scan kernels take scalar arguments", "[function_table]") {
  auto t = parse_function_table(test::slurp(test::sample_dir("sort_scan") + "/device.tvm_meta.json"), "m.json");
  REQUIRE(t);
  bool int32 = false, int64 = false;
  for (const auto& [key, fi] : t->functions)
    for (const auto& a : fi.arg_types) {
      int32 |= a == "int32";
      int64 |= a == "int64";
    }
  CHECK(int32);
  CHECK(int64);
}

TEST_CASE("older tables say thread_axis_tags", "[function_table]") {
  json j = small_table();
  j["func_info"]["foo_kernel"]["thread_axis_tags"] = j["func_info"]["foo_kernel"]["launch_param_tags"];
  j["func_info"]["foo_kernel"].erase("launch_param_tags");
  auto t = parse_function_table(j.dump(), "m.json");
  REQUIRE(t);
  CHECK(t->find("foo_kernel")->launch_param_tags ==
        std::vector<std::string>{"blockIdx.x", "threadIdx.x", "tir.use_dyn_shared_memory"});
  CHECK(t->find("bar_kernel")->launch_param_tags.empty());
}

TEST_CASE("function table errors name the JSON pointer", "[function_table][errors]") {
  CHECK(error_of(with(small_table(), "/func_info/foo_kernel/arg_types/2", "flaot32")) ==
        "device.tvm_meta.json:/func_info/foo_kernel/arg_types/2: error: unknown argument type \"flaot32\"");
  CHECK(error_of(with(small_table(), "/func_info/foo_kernel/arg_types/0", 3)) ==
        "device.tvm_meta.json:/func_info/foo_kernel/arg_types/0: error: expected a dtype string, got an integer");
  CHECK(error_of(with(small_table(), "/func_info/foo_kernel/launch_param_tags/1", "threadIdx.w")) ==
        "device.tvm_meta.json:/func_info/foo_kernel/launch_param_tags/1: error: unknown launch parameter tag "
        "\"threadIdx.w\" (expected blockIdx.x/y/z, threadIdx.x/y/z or tir.use_dyn_shared_memory)");
  // Repeated thread tags are real TVM output (virtual threads; resnet18's conv2d kernels):
  // accepted, the last value wins at launch. Only a repeated smem tag is an error.
  {
    auto t = parse_function_table(with(small_table(), "/func_info/foo_kernel/launch_param_tags/1", "blockIdx.x").dump(),
                                  "device.tvm_meta.json");
    CHECK(t);
  }
  CHECK(error_of(with(small_table(), "/func_info/foo_kernel/launch_param_tags",
                      {"tir.use_dyn_shared_memory", "blockIdx.x"})) ==
        "device.tvm_meta.json:/func_info/foo_kernel/launch_param_tags/0: error: \"tir.use_dyn_shared_memory\" must "
        "be the last launch parameter tag");
  json j = small_table();
  j["func_info"]["foo_kernel"].erase("arg_types");
  CHECK(error_of(j) == "device.tvm_meta.json:/func_info/foo_kernel: error: missing required member \"arg_types\"");
  j = small_table();
  j["func_info"]["foo_kernel"].erase("launch_param_tags");
  CHECK(error_of(j) ==
        "device.tvm_meta.json:/func_info/foo_kernel: error: missing required member \"launch_param_tags\"");
  CHECK(error_of(with(small_table(), "/func_info/foo_kernel/name", 1)) ==
        "device.tvm_meta.json:/func_info/foo_kernel/name: error: expected a string, got an integer");
  CHECK(error_of(json::parse(R"({"tvm_version": "0.1.0"})")) ==
        "device.tvm_meta.json: error: missing required member \"func_info\"");
  CHECK(error_of(json::parse(R"({"func_info": []})")) ==
        "device.tvm_meta.json:/func_info: error: expected an object, got an array");
  CHECK(error_of(std::string("[1]")) ==
        "device.tvm_meta.json: error: expected a JSON object at the top level, got an array");
  // Kernel names with JSON-pointer metacharacters are escaped (RFC 6901).
  json k = small_table();
  k["func_info"]["a/b~c"] = {{"arg_types", {"bogus"}}, {"launch_param_tags", json::array()}};
  CHECK(error_of(k) == "device.tvm_meta.json:/func_info/a~1b~0c/arg_types/0: error: unknown argument type \"bogus\"");
}

TEST_CASE("function table syntax errors carry line and column", "[function_table][errors]") {
  CHECK(error_of(std::string("{\n\"func_info\": {\n  \"k\": }\n}")).rfind("device.tvm_meta.json:3:8: error: ", 0) == 0);
  CHECK(error_of(std::string(200, '[')) == "device.tvm_meta.json:1:65: error: JSON nested more than 64 levels deep");
}

TEST_CASE("is_known_launch_tag", "[function_table]") {
  for (const char* t : {"blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
                        "tir.use_dyn_shared_memory"})
    CHECK(is_known_launch_tag(t));
  for (const char* t : {"", "blockIdx", "blockIdx.w", "vthread", "threadIdx.X", "use_dyn_shared_memory"})
    CHECK_FALSE(is_known_launch_tag(t));
}
