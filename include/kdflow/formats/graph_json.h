// graph_json.h — reads and validates TVM's graph executor JSON (graph.json).
// Pure parsing and validation into plain structs; no knowledge of host code or kernels.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kdflow/support/diag.h"
#include "kdflow/support/dtype.h"

namespace kdflow {

/// A reference to one output of an earlier node: `[node_id, output_index(, version)]`.
struct NodeEntryRef {
  int node = 0;
  int index = 0;
  int version = 0;
  bool operator==(const NodeEntryRef& o) const { return node == o.node && index == o.index && version == o.version; }
};

struct GraphNode {
  std::string op;         ///< "null" (graph input or param) or "tvm_op"
  std::string name;
  std::string func_name;  ///< attrs.func_name; "__nop" / "__copy" are special; empty for "null"
  int num_inputs = 0;     ///< = inputs.size() (validated against attrs.num_inputs)
  int num_outputs = 1;    ///< attrs.num_outputs (1 for "null" nodes)
  std::vector<NodeEntryRef> inputs;
  std::map<std::string, std::string> attrs;  ///< every attr, as strings
};

/// One graph entry (an output of a node), indexed by entry id = node_row_ptr[nid] + index.
struct GraphEntry {
  int node = 0;           ///< producing node
  int index = 0;          ///< output index within that node
  std::vector<int64_t> shape;
  std::string dtype;      ///< as written ("float32")
  DType type;             ///< parsed dtype
  int64_t storage_id = 0;
  int device_type = 2;    ///< attrs.device_index when present (a DLDeviceType; 2 = CUDA), else 2
  std::string storage_scope;  ///< attrs.storage_scope when present
  uint64_t bytes = 0;     ///< ceil(bits*lanes/8) * prod(shape), overflow-checked
};

struct Graph {
  std::string file;                  ///< label used in diagnostics
  std::vector<GraphNode> nodes;
  std::vector<int> arg_nodes;        ///< node ids of graph inputs and params
  std::vector<NodeEntryRef> heads;   ///< graph outputs
  std::vector<int> node_row_ptr;     ///< size nodes.size()+1
  std::vector<GraphEntry> entries;   ///< size node_row_ptr.back()

  int entry_id(int node, int index) const { return node_row_ptr[node] + index; }
  int entry_id(const NodeEntryRef& r) const { return entry_id(r.node, r.index); }
  /// Bytes of the pool the graph executor allocates for a storage id: the largest
  /// entry sharing it, rounded up to 4 bytes.
  uint64_t storage_bytes(int64_t storage_id) const;
};

/// Limits on what a graph may declare (hostile input must not exhaust memory).
struct GraphLimits {
  size_t max_nodes = 1u << 20;
  size_t max_ndim = 32;
  uint64_t max_entry_bytes = 1ull << 40;  ///< 1 TiB: anything above is absurd for a GPU buffer
};

/// Parses graph.json text. `file` labels diagnostics (`file:/nodes/3/inputs/0: error: ...`,
/// or `file:line:col: error: ...` for JSON syntax errors).
Expected<Graph> parse_graph_json(std::string_view text, const std::string& file,
                                 const GraphLimits& limits = {});

}  // namespace kdflow
