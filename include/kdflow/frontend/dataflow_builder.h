// dataflow_builder.h — turns a validated graph, the function table and the host traces
// into the dataflow IR: classifies packed calls (kernel, set-device, library), maps
// launch tags to grid/block/smem, binds pointers to buffers. No parsing, no clang.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"
#include "kdflow/formats/function_table.h"
#include "kdflow/formats/graph_json.h"
#include "kdflow/ir/host_trace.h"

namespace kdflow {

/// The DLTensor arguments the graph executor passes to node `nid`: its inputs, then its outputs.
std::vector<TensorArg> node_tensor_args(const Graph& g, int nid);

/// True for nodes whose function the executor calls (tvm_op, not __nop / __copy).
bool node_calls_function(const GraphNode& n);

struct BuildOptions {
  /// Names of graph arg nodes that are params (from the params file). When empty and
  /// `params_known` is false, a name of the form p<digits> marks a param, as Relay names bound params.
  std::set<std::string> param_names;
  bool params_known = false;
  Sources sources;
};

/// Runs `trace_node(nid)` for every node that calls a function, in node order, and
/// assembles the IR. Kernel arguments are checked against the function table
/// (count, handle vs scalar, launch tags); failures name host.c positions or the meta file.
Expected<Dataflow> build_dataflow(const Graph& g, const FunctionTable& table,
                                  const std::function<Expected<HostTrace>(int nid)>& trace_node,
                                  const BuildOptions& options);

/// Views (called by build_dataflow): each `__nop` node's output that shares its input's storage
/// gets Buffer::view_of / view_offset (chains resolved to the first non-view), and every kernel
/// and library-call argument passed through such a view names the viewed buffer, at the view's
/// offset, with Arg::view set to the view.
void resolve_views(Dataflow& df);

}  // namespace kdflow
