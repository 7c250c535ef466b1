// cpu_test_util.h — helpers of the CPU back end's unit tests: a device and one compiled kernel.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "kdflow/replay/cpu_kernels.h"

namespace kdflow::cpu::test {

inline std::unique_ptr<CpuDevice> device(unsigned threads = 2) {
  auto d = CpuDevice::create({threads});
  REQUIRE(d);
  return d.take();
}

/// Compiles `src` (labelled hand.cu) and returns kernel `name`; fails the test otherwise.
inline CpuKernel compile_one(CpuDevice& d, const std::string& src, const std::string& name) {
  auto m = d.compile_module(src, "hand.cu");
  INFO((m ? std::string() : m.error().message));
  REQUIRE(m);
  auto k = d.kernel(*m, name);
  INFO((k ? std::string() : k.error().message));
  REQUIRE(k);
  return *k;
}

}  // namespace kdflow::cpu::test
