// dataflow.h — the kernel-level dataflow IR: the one contract between the analyzers,
// the emitters and the replay engine. Plain value structs with stable integer ids;
// no AST, file or driver types. docs/schema.md documents its JSON form ("kdflow/1").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kdflow/host_trace.h"

namespace kdflow {

inline constexpr const char* kSchemaVersion = "kdflow/1";

enum class BufferKind { Input, Param, Intermediate, Output, Workspace };
const char* to_string(BufferKind k);

/// A buffer: one per graph entry (entries sharing a storage id are distinct buffers
/// with the same storage_id), and one per workspace allocation.
struct Buffer {
  int id = 0;                         ///< index in Dataflow::buffers
  BufferKind kind = BufferKind::Intermediate;
  std::optional<int64_t> storage_id;  ///< graph storage id; nullopt for workspaces
  std::string name;                   ///< graph: node name (":i" appended for output i > 0 of multi-output nodes); workspace: "<function>.ws<k>"
  std::string dtype;                  ///< element type
  std::vector<int64_t> shape;         ///< workspace: {bytes / element size}
  uint64_t bytes = 0;                 ///< graph: entry bytes; workspace: requested bytes
  int entry_id = -1;                  ///< graph entry id; -1 for workspaces
  int node = -1;                      ///< producing graph node, or the node that allocates the workspace
  int output_index = 0;               ///< output index within `node` (graph buffers)
  SourceLoc loc;                      ///< workspaces: the TVMBackendAllocWorkspace call
  bool operator==(const Buffer& o) const;
};

/// One argument of a kernel launch or library call.
struct Arg {
  enum class Kind { Buffer, Int, Float, Null };
  Kind kind = Kind::Int;
  int buffer = -1;          ///< Buffer: the buffer live at that point
  int64_t offset = 0;       ///< Buffer: byte offset into it
  int64_t int_value = 0;    ///< Int
  double float_value = 0;   ///< Float
  std::string dtype;        ///< the parameter's dtype: arg_types[i] for kernels ("handle", "int32", ...)
  bool operator==(const Arg& o) const;
};

struct Kernel {
  int id = 0;                       ///< launch order, 0-based, across the whole model
  std::string name;                 ///< kernel symbol (function table key)
  int node = -1;                    ///< graph node that launches it
  std::string function;             ///< the fused function (graph func_name)
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t dynamic_shared_memory = 0;
  std::vector<Arg> args;            ///< kernel parameters in order (len(arg_types))
  SourceLoc loc;                    ///< the TVMFuncCall in host.c
  std::vector<int64_t> loop_iterations;  ///< enclosing host loops' iteration indices (empty: not in a loop)
  bool operator==(const Kernel& o) const;
};

/// A packed call to something that is not a kernel of the module (cuBLAS, cuDNN, ...).
struct LibraryCall {
  int id = 0;
  std::string name;
  int node = -1;
  std::string function;
  std::vector<Arg> args;
  SourceLoc loc;
  int after_kernel = -1;  ///< id of the last kernel launched before it (-1: none)
  bool operator==(const LibraryCall& o) const;
};

/// A graph node (every node of graph.json, "null" ones too).
struct Node {
  int id = 0;
  std::string op;            ///< "null" | "tvm_op"
  std::string name;
  std::string function;      ///< func_name ("" for null nodes; "__nop", "__copy" kept as is)
  std::vector<int> inputs;   ///< buffer ids the node reads (its graph inputs)
  std::vector<int> outputs;  ///< buffer ids the node writes (its graph outputs)
  std::vector<int> kernels;  ///< kernel ids in launch order
  std::vector<int> workspaces;     ///< workspace buffer ids in allocation order
  std::vector<int> library_calls;  ///< library call ids
  SourceLoc loc;             ///< the function's definition in host.c
  bool operator==(const Node& o) const;
};

/// Graph-level roles: a node reads its input buffers and writes its output buffers.
struct Edge {
  enum class Kind { Read, Write };
  Kind kind = Kind::Read;
  int buffer = 0;
  int node = 0;
  bool operator==(const Edge& o) const { return kind == o.kind && buffer == o.buffer && node == o.node; }
};

struct Sources {
  std::string graph;   ///< file names (no directories, so output does not depend on where inputs live)
  std::string host;
  std::string meta;
  std::string params;  ///< empty when no params file was read
};

struct Dataflow {
  std::string schema = kSchemaVersion;
  Sources sources;
  std::vector<Buffer> buffers;
  std::vector<Node> nodes;
  std::vector<Kernel> kernels;
  std::vector<LibraryCall> library_calls;
  std::vector<Edge> edges;
  std::vector<int> inputs;   ///< buffer ids of graph inputs (not params), in arg_nodes order
  std::vector<int> params;   ///< buffer ids of params, in arg_nodes order
  std::vector<int> outputs;  ///< buffer ids of graph outputs, in heads order
};

}  // namespace kdflow
