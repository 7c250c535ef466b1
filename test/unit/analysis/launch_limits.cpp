// Launches CUDA would refuse (lib/analysis/launch_limits.cpp, issue 51): each limit on a
// hand-made kernel launch of the IR, and the line extract prints for a user to file upstream.
// The real case (TVM's batch_decode_paged_kv_kernel launched with block (4, 1, 128) for head_dim
// 16) is the first check.
#include <catch2/catch.hpp>

#include "kdflow/analysis/launch_limits.h"

using kdflow::Kernel;
using kdflow::launch_limit_violation;

namespace {

Kernel launch(std::array<int64_t, 3> grid, std::array<int64_t, 3> block, int64_t shared = 0) {
  Kernel k;
  k.id = 12;
  k.name = "batch_decode_paged_kv_kernel";
  k.node = 3;
  k.function = "decode";
  k.grid = grid;
  k.block = block;
  k.dynamic_shared_memory = shared;
  k.loc.file = "host.c";
  k.loc.line = 120;
  return k;
}

}  // namespace

TEST_CASE("launch limits: every limit CUDA puts on a launch, and launches inside them", "[launch-limits]") {
  auto v = launch_limit_violation(launch({1, 1, 1}, {4, 1, 128}));
  REQUIRE(v);
  CHECK(v->field == "block");
  CHECK(v->message == "block (4, 1, 128) of batch_decode_paged_kv_kernel: dimension z must be 1..64");
  v = launch_limit_violation(launch({1, 1, 1}, {32, 33, 1}));
  REQUIRE(v);
  CHECK(v->message.find("has 1056 threads, more than 1024") != std::string::npos);
  v = launch_limit_violation(launch({1, 70000, 1}, {32, 1, 1}));
  REQUIRE(v);
  CHECK(v->field == "grid");
  CHECK(v->message.find("dimension y must be 1..65535") != std::string::npos);
  v = launch_limit_violation(launch({0, 1, 1}, {32, 1, 1}));
  REQUIRE(v);
  CHECK(v->message.find("dimension x must be 1..2147483647") != std::string::npos);
  v = launch_limit_violation(launch({1, 1, 1}, {2048, 1, 1}));
  REQUIRE(v);
  CHECK(v->message.find("dimension x must be 1..1024") != std::string::npos);
  v = launch_limit_violation(launch({1, 1, 1}, {32, 1, 1}, 300 * 1024));
  REQUIRE(v);
  CHECK(v->field == "dynamic_shared_memory");
  // At the limits: launched.
  CHECK_FALSE(launch_limit_violation(launch({2147483647, 65535, 65535}, {1024, 1, 1}, 227 * 1024)));
  CHECK_FALSE(launch_limit_violation(launch({1, 1, 1}, {16, 1, 64})));
  CHECK_FALSE(launch_limit_violation(launch({1, 1, 1}, {1, 1024, 1})));
}

TEST_CASE("launch limits: the report names the kernel, its node, the host line and the limit", "[launch-limits]") {
  kdflow::Dataflow df;
  Kernel k = launch({1, 1, 1}, {4, 1, 128});
  auto v = launch_limit_violation(k);
  REQUIRE(v);
  CHECK(kdflow::launch_limit_report(df, k, *v) ==
        "kernel 12 (batch_decode_paged_kv_kernel) of node 3 (decode), launched from host.c:120: block (4, 1, 128) of "
        "batch_decode_paged_kv_kernel: dimension z must be 1..64: CUDA refuses this launch");
}
