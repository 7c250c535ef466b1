// node_reference.h — TVM's own result for every node of a build (reference/nodes.json, written
// by the exporter python/kdflow_tvm: for Relay, the CUDA build's own fused functions run node by
// node on the CPU; for Relax, each call of the VM seen through its instrument hook), mapped onto
// a flow's nodes and buffers so
// that replay can compare each node right after it runs and name the first that differs.
// Format: docs/schema.md, "Node references".
#pragma once

#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// One buffer of one node and the array TVM computed for it.
struct NodeReferenceCheck {
  int node = -1;       ///< the flow's node id
  int buffer = -1;     ///< the node's output buffer compared
  std::string file;    ///< the .npy (a path under the references' folder)
  std::string label;   ///< "node 6 fused_matmul1_add1, output 0"
};

struct NodeReferences {
  std::string file;                          ///< the nodes.json read
  std::vector<NodeReferenceCheck> checks;    ///< in node order
  int nodes_in_file = 0;                     ///< entries the file lists
  int nodes_mapped = 0;                      ///< of those, entries matched to a flow node
  /// Flow nodes that launch kernels but have no reference, and file entries that match no
  /// node, each one line (say what was not compared, never silently).
  std::vector<std::string> not_compared;
};

/// Reads `file` (nodes.json) and maps each entry onto `df`: Relay entries by graph node index
/// (the function must agree), Relax entries by function name and occurrence (the k-th call of
/// that function is the k-th flow node with it), each tensor onto the node's output of the same
/// dtype and shape, in order. Array files must lie in the file's folder. Errors: a malformed
/// file → DataError naming the JSON pointer.
Expected<NodeReferences> read_node_references(const std::string& file, const Dataflow& df);

}  // namespace kdflow
