// The fake NCCL (test/fake_nccl) is the stand-in the sharded CUDA replay's tests trust, so it is
// checked here to be as strict as NCCL: communicators on distinct devices, buffers inside one
// allocation of the communicator's device, a stream of that device, every rank's k-th call
// matching the others', sends and receives of a group pairing up; and to move the data as NCCL
// does.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using kdflow::test::Env;

template <typename F>
F sym(void* h, const char* name) {
  void* p = ::dlsym(h, name);
  REQUIRE(p);
  return reinterpret_cast<F>(p);
}

}  // namespace

TEST_CASE("the fake NCCL is as strict as NCCL and moves the data as NCCL does", "[sharded]") {
  Env lib("KDFLOW_CUDA_LIBRARY", KDFLOW_FAKE_CUDA);
  Env devices("KDFLOW_FAKE_CUDA_DEVICES", "2");
  Env log("KDFLOW_FAKE_CUDA_LOG", kdflow::test::temp_dir() + "/fake.log");
  void* drv = ::dlopen(KDFLOW_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(drv);
  void* nc = ::dlopen(KDFLOW_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(nc);
  using Comm = void*;
  auto retain = sym<int (*)(void**, int)>(drv, "cuDevicePrimaryCtxRetain");
  auto set = sym<int (*)(void*)>(drv, "cuCtxSetCurrent");
  auto alloc = sym<int (*)(unsigned long long*, size_t)>(drv, "cuMemAlloc_v2");
  auto stream_create = sym<int (*)(void**, unsigned)>(drv, "cuStreamCreate");
  auto htod = sym<int (*)(unsigned long long, const void*, size_t)>(drv, "cuMemcpyHtoD_v2");
  auto dtoh = sym<int (*)(void*, unsigned long long, size_t)>(drv, "cuMemcpyDtoH_v2");
  auto sync = sym<int (*)()>(drv, "cuCtxSynchronize");
  auto reset = sym<void (*)()>(drv, "kdflow_fake_cuda_reset");
  auto init_all = sym<int (*)(Comm*, int, const int*)>(nc, "ncclCommInitAll");
  auto destroy = sym<int (*)(Comm)>(nc, "ncclCommDestroy");
  auto allreduce = sym<int (*)(const void*, void*, size_t, int, int, Comm, void*)>(nc, "ncclAllReduce");
  auto send = sym<int (*)(const void*, size_t, int, int, Comm, void*)>(nc, "ncclSend");
  auto recv = sym<int (*)(void*, size_t, int, int, Comm, void*)>(nc, "ncclRecv");
  auto group_start = sym<int (*)()>(nc, "ncclGroupStart");
  auto group_end = sym<int (*)()>(nc, "ncclGroupEnd");
  auto last_error = sym<const char* (*)(Comm)>(nc, "ncclGetLastError");
  constexpr int kFloat32 = 7, kSum = 0, kInvalidArgument = 4, kInvalidUsage = 5;

  // Two ranks, one per device: a context, a stream and two 4-float buffers each.
  void* ctx[2] = {nullptr, nullptr};
  void* stream[2] = {nullptr, nullptr};
  unsigned long long in[2] = {0, 0}, out[2] = {0, 0};
  for (int d = 0; d < 2; ++d) {
    REQUIRE(retain(&ctx[d], d) == 0);
    REQUIRE(set(ctx[d]) == 0);
    REQUIRE(stream_create(&stream[d], 1) == 0);
    REQUIRE(alloc(&in[d], 16) == 0);
    REQUIRE(alloc(&out[d], 16) == 0);
    float v[4] = {1.0f * (d + 1), 2.0f * (d + 1), 3.0f * (d + 1), 4.0f * (d + 1)};
    REQUIRE(htod(in[d], v, sizeof(v)) == 0);
    REQUIRE(sync() == 0);
  }
  auto p = [](unsigned long long x) { return reinterpret_cast<void*>(static_cast<uintptr_t>(x)); };
  auto on = [&](int d) { REQUIRE(set(ctx[d]) == 0); };

  Comm comms[2] = {nullptr, nullptr};
  const int twice[2] = {0, 0}, missing[2] = {0, 3}, both[2] = {0, 1};
  CHECK(init_all(comms, 2, twice) == kInvalidUsage);  // NCCL: "Duplicate GPU detected"
  CHECK(std::string(last_error(nullptr)).find("Duplicate GPU") != std::string::npos);
  CHECK(init_all(comms, 2, missing) == kInvalidArgument);
  REQUIRE(init_all(comms, 2, both) == 0);

  SECTION("an allreduce of both ranks sums into both receive buffers") {
    on(0);
    CHECK(allreduce(p(in[0]), p(out[0]), 4, kFloat32, kSum, comms[0], stream[0]) == 0);
    on(1);
    CHECK(allreduce(p(in[1]), p(out[1]), 4, kFloat32, kSum, comms[1], stream[1]) == 0);
    for (int d = 0; d < 2; ++d) {
      float got[4] = {0, 0, 0, 0};
      REQUIRE(dtoh(got, out[d], sizeof(got)) == 0);
      CHECK(got[0] == 3.0f);
      CHECK(got[3] == 12.0f);
    }
  }
  SECTION("buffers, streams and devices are checked before anything is queued") {
    on(0);
    CHECK(allreduce(p(in[0]), p(out[0]), 1000, kFloat32, kSum, comms[0], stream[0]) == kInvalidArgument);
    CHECK(std::string(last_error(comms[0])).find("not inside one device allocation") != std::string::npos);
    CHECK(allreduce(p(in[1]), p(out[0]), 4, kFloat32, kSum, comms[0], stream[0]) == kInvalidArgument);
    CHECK(std::string(last_error(comms[0])).find("on device 1, the communicator on device 0") != std::string::npos);
    CHECK(allreduce(p(in[0]), p(out[0]), 4, kFloat32, kSum, comms[0], stream[1]) == kInvalidUsage);
    CHECK(allreduce(p(in[0]), p(out[0]), 4, 42, kSum, comms[0], stream[0]) == kInvalidArgument);
    CHECK(allreduce(p(in[0]), p(out[0]), 4, kFloat32, 9, comms[0], stream[0]) == kInvalidArgument);
    // None of these counted as rank 0's first operation: a matching pair still works.
    CHECK(allreduce(p(in[0]), p(out[0]), 4, kFloat32, kSum, comms[0], stream[0]) == 0);
    on(1);
    CHECK(allreduce(p(in[1]), p(out[1]), 4, kFloat32, kSum, comms[1], stream[1]) == 0);
  }
  SECTION("ranks whose k-th calls differ fail, and every later call of the clique too") {
    on(0);
    CHECK(allreduce(p(in[0]), p(out[0]), 4, kFloat32, kSum, comms[0], stream[0]) == 0);
    on(1);
    CHECK(allreduce(p(in[1]), p(out[1]), 2, kFloat32, kSum, comms[1], stream[1]) == kInvalidUsage);
    CHECK(std::string(last_error(comms[1])).find("rank 0 made allreduce count=4") != std::string::npos);
    on(0);
    CHECK(allreduce(p(in[0]), p(out[0]), 4, kFloat32, kSum, comms[0], stream[0]) == kInvalidUsage);
  }
  SECTION("a scatter from rank 0 as a group of sends and receives: pairs checked, data moved") {
    // Rank 0 sends two floats to each rank (itself included); rank 1 receives `count` of them.
    // Returns rank 1's ncclGroupEnd.
    auto scatter = [&](size_t count) {
      on(0);
      CHECK(group_start() == 0);
      CHECK(send(p(in[0]), 2, kFloat32, 0, comms[0], stream[0]) == 0);
      CHECK(send(p(in[0] + 8), 2, kFloat32, 1, comms[0], stream[0]) == 0);
      CHECK(recv(p(out[0]), 2, kFloat32, 0, comms[0], stream[0]) == 0);
      CHECK(group_end() == 0);
      on(1);
      CHECK(group_start() == 0);
      CHECK(recv(p(out[1]), count, kFloat32, 0, comms[1], stream[1]) == 0);
      return group_end();
    };
    CHECK(scatter(2) == 0);
    float got[2] = {0, 0};
    REQUIRE(dtoh(got, out[1], sizeof(got)) == 0);
    CHECK(got[0] == 3.0f);  // rank 0's third and fourth values
    CHECK(got[1] == 4.0f);
    // The next scatter: rank 1 expects 1 element where rank 0 sends 2.
    CHECK(scatter(1) == kInvalidUsage);
    CHECK(std::string(last_error(comms[1])).find("sends 2 elements to rank 1, which receives 1") != std::string::npos);
  }
  CHECK(destroy(comms[0]) == 0);
  CHECK(destroy(comms[1]) == 0);
  CHECK(destroy(comms[1]) == kInvalidArgument);  // already destroyed
  reset();
}
