// Access binding and kernel-to-kernel dependencies on hand-built IRs.
#include <catch2/catch.hpp>

#include "kdflow/dependencies.h"

using namespace kdflow;

namespace {

Buffer graph_buffer(int id, int64_t sid, BufferKind kind = BufferKind::Intermediate) {
  Buffer b;
  b.id = id;
  b.kind = kind;
  b.storage_id = sid;
  b.name = "b" + std::to_string(id);
  b.bytes = 16;
  return b;
}

Buffer workspace(int id) {
  Buffer b;
  b.id = id;
  b.kind = BufferKind::Workspace;
  b.name = "ws" + std::to_string(id);
  b.bytes = 4;
  return b;
}

Arg buf(int b, Access a) {
  Arg x;
  x.kind = Arg::Kind::Buffer;
  x.buffer = b;
  x.access = a;
  x.dtype = "handle";
  return x;
}

Kernel kernel(int id, std::vector<Arg> args) {
  Kernel k;
  k.id = id;
  k.name = "k" + std::to_string(id);
  k.node = id;
  k.args = std::move(args);
  return k;
}

bool has(const Dataflow& df, Dependency::Kind kind, int from, int to) {
  for (const auto& d : df.dependencies)
    if (d.kind == kind && d.from == from && d.to == to) return true;
  return false;
}

}  // namespace

TEST_CASE("RAW through a workspace, WAR and WAW through a reused storage id", "[dependencies]") {
  Dataflow df;
  // b0: sid 0 (input); b1: sid 1; b2: another entry of sid 1 (storage reuse); b3: a workspace.
  df.buffers = {graph_buffer(0, 0, BufferKind::Input), graph_buffer(1, 1), graph_buffer(2, 1), workspace(3)};
  df.kernels = {
      kernel(0, {buf(1, Access::Write), buf(0, Access::Read)}),  // writes sid1 (b1)
      kernel(1, {buf(3, Access::Write), buf(1, Access::Read)}),  // reads b1, writes ws
      kernel(2, {buf(3, Access::Read), buf(2, Access::Write)}),  // reads ws, overwrites sid1 via b2
  };
  compute_dependencies(df);
  CHECK(has(df, Dependency::Kind::RAW, 0, 1));  // b1 produced by k0, read by k1
  CHECK(has(df, Dependency::Kind::RAW, 1, 2));  // workspace
  CHECK(has(df, Dependency::Kind::WAR, 1, 2));  // k2 overwrites sid1 that k1 read
  CHECK(has(df, Dependency::Kind::WAW, 0, 2));  // and that k0 wrote
  CHECK_FALSE(has(df, Dependency::Kind::RAW, 0, 2));
  CHECK(df.dependencies.size() == 4);
  // The dependency names both buffers of the shared storage.
  for (const auto& d : df.dependencies)
    if (d.kind == Dependency::Kind::WAR) {
      CHECK(d.from_buffer == 1);
      CHECK(d.to_buffer == 2);
    }
  // Ordered by `to`, then `from`.
  for (size_t i = 1; i < df.dependencies.size(); ++i)
    CHECK(std::make_pair(df.dependencies[i - 1].to, df.dependencies[i - 1].from) <=
          std::make_pair(df.dependencies[i].to, df.dependencies[i].from));
}

TEST_CASE("read-write launches in a loop chain by WAW and RAW, never to themselves", "[dependencies]") {
  Dataflow df;
  df.buffers = {workspace(0)};
  df.kernels = {kernel(0, {buf(0, Access::Write)}), kernel(1, {buf(0, Access::ReadWrite)}),
                kernel(2, {buf(0, Access::ReadWrite)}), kernel(3, {buf(0, Access::Read)})};
  compute_dependencies(df);
  CHECK(has(df, Dependency::Kind::RAW, 0, 1));
  CHECK(has(df, Dependency::Kind::WAW, 0, 1));
  CHECK(has(df, Dependency::Kind::RAW, 1, 2));
  CHECK(has(df, Dependency::Kind::RAW, 2, 3));
  CHECK_FALSE(has(df, Dependency::Kind::RAW, 1, 3));
  for (const auto& d : df.dependencies) CHECK(d.from != d.to);
}

TEST_CASE("unknown access counts as read and write", "[dependencies]") {
  Dataflow df;
  df.buffers = {graph_buffer(0, 0)};
  df.kernels = {kernel(0, {buf(0, Access::Write)}), kernel(1, {buf(0, Access::Unknown)}),
                kernel(2, {buf(0, Access::Read)})};
  compute_dependencies(df);
  CHECK(has(df, Dependency::Kind::RAW, 0, 1));
  CHECK(has(df, Dependency::Kind::WAW, 0, 1));
  CHECK(has(df, Dependency::Kind::RAW, 1, 2));
}

TEST_CASE("device functions bind accesses and are checked against table and launch", "[dependencies]") {
  Dataflow df;
  df.buffers = {graph_buffer(0, 0), graph_buffer(1, 1)};
  Kernel k = kernel(0, {buf(0, Access::Unknown), buf(1, Access::Unknown)});
  Arg n;
  n.kind = Arg::Kind::Int;
  n.int_value = 7;
  n.dtype = "int32";
  k.args.push_back(n);
  k.block = {64, 1, 1};
  k.loc = SourceLoc{"host.c", 10, 3};
  df.kernels = {k};
  FunctionTable table;
  table.file = "device.tvm_meta.json";
  table.functions["k0"] = FunctionInfo{"k0", {"handle", "handle", "int32"}, {"threadIdx.x"}};
  DeviceFunction fn;
  fn.name = "k0";
  fn.launch_bounds = 64;
  fn.loc = SourceLoc{"device.cu", 5, 1};
  fn.params = {DeviceParam{"out", "float *__restrict", true, Access::Write},
               DeviceParam{"in", "float *__restrict", true, Access::Read}, DeviceParam{"n", "int", false, Access::Unknown}};

  Dataflow ok = df;
  REQUIRE(apply_device_functions(ok, {fn}, table, "device.cu"));
  CHECK(ok.kernels[0].args[0].access == Access::Write);
  CHECK(ok.kernels[0].args[1].access == Access::Read);
  CHECK(ok.kernels[0].device_function == 0);

  auto error = [&](const DeviceFunction& f) {
    Dataflow d = df;
    Status s = apply_device_functions(d, {f}, table, "device.cu");
    REQUIRE_FALSE(s);
    CHECK(s.error().message.find('\n') == std::string::npos);
    return s.error().message;
  };
  DeviceFunction bounds = fn;
  bounds.launch_bounds = 128;
  CHECK(error(bounds) ==
        "device.cu:5:1: error: kernel 'k0' declares __launch_bounds__(128) but host.c:10:3 launches it with block (64,1,1)");
  DeviceFunction fewer = fn;
  fewer.params.pop_back();
  CHECK(error(fewer).find("has 2 parameters, but device.tvm_meta.json lists 3 argument types") != std::string::npos);
  DeviceFunction kind = fn;
  kind.params[2].pointer = true;
  CHECK(error(kind).find("is a pointer, but device.tvm_meta.json says int32") != std::string::npos);
  DeviceFunction type = fn;
  type.params[2].type = "float";
  CHECK(error(type).find("has type 'float', but device.tvm_meta.json says int32") != std::string::npos);
  DeviceFunction other = fn;
  other.name = "other";
  CHECK(error(other).rfind("host.c:10:3: error: kernel 'k0' is launched here but device.cu defines no", 0) == 0);
}
