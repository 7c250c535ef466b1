// device.cu in two halves on two threads (lib/frontend/clang/device_split.cpp and
// analyze_device_source's jobs): on real device sources the halves give the same kernels,
// locations, access sets and models as one parse; a file that cannot be cut safely is not
// cut; an error anywhere gives exactly the one-parse result. The small sources below are
// hand-written for one construct each (labelled), not TVM output.
#include <catch2/catch.hpp>

#include <string>

#include "frontend/clang/device_split.h"
#include "kdflow/frontend/device_analyzer.h"
#include "test_util.h"

using namespace kdflow;

namespace {

std::string kernel(const std::string& name) {
  return "extern \"C\" __global__ void " + name + "(float* __restrict__ p) {\n  p[threadIdx.x] = 1.0f;\n}\n\n";
}

/// The facts one parse gives, as text, to compare two analyses whole.
std::string facts(const DeviceSource& d) {
  std::string out;
  for (const DeviceFunction& f : d.functions) {
    out += f.name + "@" + f.loc.file + ":" + std::to_string(f.loc.line) + ":" + std::to_string(f.loc.col) +
           " lb=" + std::to_string(f.launch_bounds) + " err=" + f.access_error + "\n";
    for (const DeviceParam& p : f.params) out += "  " + p.name + " " + p.type + " " + std::to_string(static_cast<int>(p.access)) + "\n";
  }
  for (const KernelModel& m : d.footprint_models) out += m.name + " vars=" + std::to_string(m.vars.size()) + "\n";
  for (const KernelOpModel& m : d.op_models)
    out += m.name + " groups=" + std::to_string(m.groups.size()) + " accesses=" + std::to_string(m.accesses.size()) + "\n";
  for (const std::string& e : d.other_errors) out += "error " + e + "\n";
  return out;
}

}  // namespace

TEST_CASE("device split: two halves of a real device.cu give what one parse gives", "[device][split]") {
  for (const std::string m : {"resnet18_tuned", "sort_scan_v08"}) {
    SECTION(m) {
      const std::string src = test::slurp(test::sample_dir(m) + "/device.cu");
      auto halves = detail::split_device_source(src);
      REQUIRE(halves);
      CHECK(halves->first_kernels > 0);
      CHECK(halves->second_kernels > 0);
      CHECK(halves->second.rfind("#line 1\n", 0) == 0);  // the preamble, at its own lines
      auto one = analyze_device_source(src, "device.cu", false, true, nullptr, 1);
      auto two = analyze_device_source(src, "device.cu", false, true, nullptr, 2);
      REQUIRE(one);
      REQUIRE(two);
      CHECK(one->functions.size() == halves->first_kernels + halves->second_kernels);
      CHECK(facts(*one) == facts(*two));
    }
  }
}

TEST_CASE("device split: what is not cut (hand-written sources)", "[device][split]") {
  const std::string two = kernel("a") + kernel("b");
  auto ok = detail::split_device_source(two);
  REQUIRE(ok);
  CHECK(ok->first == kernel("a"));
  CHECK(ok->second == "#line 4\n\n#line 5\n" + kernel("b"));  // the blank line after a, then b at its line
  // A helper and a macro between kernels go to both halves; the second half keeps lines.
  auto helper = detail::split_device_source(kernel("a") + "#define TWO 2\n__device__ float h(float x) { return x * TWO; }\n" +
                                            kernel("b"));
  REQUIRE(helper);
  CHECK(helper->second ==
        "#line 4\n\n#define TWO 2\n__device__ float h(float x) { return x * TWO; }\n#line 7\n" + kernel("b"));
  CHECK_FALSE(detail::split_device_source(kernel("a")));                                      // one kernel
  CHECK_FALSE(detail::split_device_source("#if 1\n" + two + "#endif\n"));                     // kernels in a conditional
  CHECK_FALSE(detail::split_device_source(kernel("a") +
                                          "extern \"C\" __global__ void b(float* p) {\n#define X 1\n  p[0] = X;\n}\n"));
  CHECK_FALSE(detail::split_device_source("#line 10\n" + two));                               // positions already remapped
  CHECK_FALSE(detail::split_device_source(two + "const char* s = R\"(})\";\n"));                // raw string
  CHECK_FALSE(detail::split_device_source(two + "}\n"));                                       // unbalanced
  CHECK_FALSE(detail::split_device_source("extern \"C\" __global__ void a(float* p) {\n  p[0] = 1;\n} int x;\n" +
                                          kernel("b")));                                       // text after a kernel's brace
  // Braces in comments, strings and macro bodies are not the file's.
  auto tricky = detail::split_device_source("// {\n/* { */\n#define OPEN {\n" + kernel("a") + "const char* s = \"{\";\n" +
                                            kernel("b"));
  REQUIRE(tricky);
  CHECK(tricky->first_kernels == 1);
  // #pragma inside a kernel (TVM's unroll) does not stop the cut.
  CHECK(detail::split_device_source(
      "extern \"C\" __global__ void a(float* p) {\n#pragma unroll\n  for (int i = 0; i < 4; ++i) p[i] = 0;\n}\n" + kernel("b")));
}

TEST_CASE("device split: an error in either half gives the one-parse result", "[device][split]") {
  // resnet18_tuned's device.cu with one broken kernel appended (hand-made): the halves are
  // discarded and the file is analyzed whole, so the error and its position are the same.
  std::string src = test::slurp(test::sample_dir("resnet18_tuned") + "/device.cu");
  src += "extern \"C\" __global__ void broken(float* p) {\n  p[0] = undeclared_thing;\n}\n";
  auto one = analyze_device_source(src, "device.cu", false, true, nullptr, 1);
  auto two = analyze_device_source(src, "device.cu", false, true, nullptr, 2);
  REQUIRE(one);
  REQUIRE(two);
  CHECK(facts(*one) == facts(*two));
  CHECK(one->functions.back().access_error.find("undeclared_thing") != std::string::npos);
  auto strict_one = analyze_device_source(src, "device.cu", true, true, nullptr, 1);
  auto strict_two = analyze_device_source(src, "device.cu", true, true, nullptr, 2);
  REQUIRE_FALSE(strict_one);
  REQUIRE_FALSE(strict_two);
  CHECK(strict_one.error().message == strict_two.error().message);
}
