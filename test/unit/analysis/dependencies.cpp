// Access binding and kernel-to-kernel dependencies on hand-built IRs.
#include <catch2/catch.hpp>

#include "kdflow/analysis/dependencies.h"

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
  table.functions["k0"] = FunctionInfo{"k0", {"handle", "handle", "int32"}, {"threadIdx.x"}, false, false, {}};
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

TEST_CASE("library calls take part in dependencies, in their place in the launch order", "[dependencies][library]") {
  // Node 0 (kernel 0) writes b1 (sid 1); node 1 calls cuBLAS reading b1, writing b2 (sid 2),
  // after kernel 0; node 2 (kernel 1) reads b2. b0 is a model input.
  Dataflow df;
  df.buffers = {graph_buffer(0, 0, BufferKind::Input), graph_buffer(1, 1), graph_buffer(2, 2), workspace(3)};
  Node n0, n1, n2;
  n0.id = 0, n0.op = "tvm_op", n0.inputs = {0}, n0.outputs = {1}, n0.kernels = {0};
  n1.id = 1, n1.op = "tvm_op", n1.inputs = {1}, n1.outputs = {2}, n1.library_calls = {0}, n1.workspaces = {3};
  n2.id = 2, n2.op = "tvm_op", n2.inputs = {2}, n2.outputs = {0}, n2.kernels = {1};
  df.nodes = {n0, n1, n2};
  df.kernels = {kernel(0, {buf(1, Access::Write), buf(0, Access::Read)}), kernel(1, {buf(0, Access::Write), buf(2, Access::Read)})};
  df.kernels[1].node = 2;
  LibraryCall lc;
  lc.id = 0, lc.name = "tvm.contrib.cublas.matmul", lc.node = 1, lc.after_kernel = 0;
  lc.args = {buf(1, Access::Unknown), buf(2, Access::Unknown), buf(3, Access::Unknown)};
  df.library_calls = {lc};

  assume_library_access(df);
  // Only an input of the node is read; its output and its workspace may be read and written.
  CHECK(df.library_calls[0].args[0].access == Access::Read);
  CHECK(df.library_calls[0].args[1].access == Access::ReadWrite);
  CHECK(df.library_calls[0].args[2].access == Access::ReadWrite);

  compute_dependencies(df);
  auto has_dep = [&](Dependency::Kind kind, int from, bool from_call, int to, bool to_call) {
    for (const auto& d : df.dependencies)
      if (d.kind == kind && d.from == from && d.from_library_call == from_call && d.to == to &&
          d.to_library_call == to_call)
        return true;
    return false;
  };
  CHECK(has_dep(Dependency::Kind::RAW, 0, false, 0, true));   // k0 → lib0 through sid 1
  CHECK(has_dep(Dependency::Kind::RAW, 0, true, 1, false));   // lib0 → k1 through sid 2
  CHECK(has_dep(Dependency::Kind::WAR, 0, false, 1, false));  // k1 overwrites the input k0 read
  CHECK_FALSE(has_dep(Dependency::Kind::RAW, 0, false, 1, false));
  // In launch order of the later end: lib0 comes between k0 and k1.
  REQUIRE(df.dependencies.size() == 3);
  CHECK(df.dependencies[0].to_library_call);

  // A call before the first kernel (after_kernel -1) comes first.
  df.library_calls[0].after_kernel = -1;
  compute_dependencies(df);
  CHECK(has_dep(Dependency::Kind::WAR, 0, true, 0, false));  // k0 writes sid 1, which lib0 read
  CHECK_FALSE(has_dep(Dependency::Kind::RAW, 0, false, 0, true));
}
