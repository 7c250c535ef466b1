// show.h — `kdflow show` and `kdflow explain`: a table of the graph's nodes and kernels with
// a summary (counts, memory live along the launch order), everything about one kernel or
// node, and a profiler CSV joined to the graph. Computes, then renders text; never exits.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"
#include "kdflow/frontend/extract.h"
#include "kdflow/formats/profile_csv.h"

namespace kdflow {

// The IR is loaded with load_dataflow (extract.h): a folder or model.so is extracted, a
// kdflow JSON file read back.

/// Bytes of the buffers a launch reads and writes. Each distinct buffer counts once per
/// launch, whole (its `bytes`, whatever the offset); a `readwrite` argument counts in
/// both. Where the access is `unknown` (no device.cu), the node's graph-level roles
/// decide: its inputs are read, its outputs written, anything else both.
/// Where a kernel argument's footprint is exact (bounds.h), the bytes it touches count
/// instead of the buffer size: distinct bytes where counted, else the footprint's span.
struct Traffic {
  uint64_t read = 0;
  uint64_t written = 0;
  int counted = 0, span = 0, sized = 0;  ///< buffer figures from distinct bytes / footprint span / buffer size
  std::string measure() const;           ///< "bytes touched", "footprint span, ...", "buffer sizes", ...
};
Traffic kernel_traffic(const Dataflow& df, const Kernel& k);
Traffic library_call_traffic(const Dataflow& df, const LibraryCall& c);
/// The sum over the node's kernels and library calls.
Traffic node_traffic(const Dataflow& df, const Node& n);

/// Counts and memory of a whole graph (the summary of `kdflow show`).
///
/// Live memory is measured at each kernel launch, in launch order (library calls count at
/// the kernel launched before them, or the first). A storage id is one pool of
/// `max(bytes)` of the graph buffers sharing it; it is live from the first launch that
/// writes it (from launch 0 when it holds an input or param) to the last launch that reads
/// it (to the last launch when it holds a model output); a storage id no launch touches is
/// never live, except inputs and params (live at launch 0). A workspace is live from its
/// node's first kernel to its node's last kernel. The peak is the largest sum, at the first
/// launch that reaches it.
struct FlowSummary {
  size_t nodes = 0;
  size_t function_nodes = 0;    ///< tvm_op nodes whose function is not __nop / __copy
  size_t other_op_nodes = 0;    ///< tvm_op nodes running __nop / __copy
  size_t null_nodes = 0;
  size_t inputs = 0, params = 0, outputs = 0;
  size_t kernels = 0;
  std::vector<int> multi_kernel_nodes;  ///< nodes launching more than one kernel
  size_t loop_kernels = 0;              ///< kernels launched inside a host loop
  size_t library_calls = 0;
  std::vector<int> kernels_without_access;  ///< launches with no access set (kernels_without_access, dependencies.h)
  size_t buffers = 0, graph_buffers = 0, workspaces = 0;
  size_t storage_ids = 0;
  uint64_t storage_bytes = 0;    ///< sum over storage ids of their pool size
  uint64_t workspace_bytes = 0;  ///< sum over workspaces
  uint64_t param_bytes = 0;      ///< sum over params' pools
  std::vector<uint64_t> live_bytes;  ///< per kernel launch
  uint64_t peak_bytes = 0;
  int peak_kernel = -1;              ///< -1 when there are no kernels
  size_t peak_storage_ids = 0, peak_workspaces = 0;
  /// The same, leaving out the storage ids that hold params (activations and workspaces).
  uint64_t peak_activation_bytes = 0;
  int peak_activation_kernel = -1;
};
FlowSummary summarize(const Dataflow& df);

/// Output styling: ANSI colour or plain text. Plain output never holds an escape byte; any
/// control byte from the IR's names is printed as '?'.
struct ShowStyle {
  bool color = false;
};

/// The node table and summary of `kdflow show`.
std::string render_show(const Dataflow& df, const ShowStyle& style);

/// `kdflow explain`: `selector` is `k<ID>`, a kernel name (every launch of it), `n<ID>`, a
/// node name or a function name (every node calling it). Unknown: a Usage error naming
/// the ways to select.
Expected<std::string> render_explain(const Dataflow& df, const std::string& selector, const ShowStyle& style);

/// `kdflow show --profile`: every profiled launch with its graph kernel, node, function and
/// Relay ops and its differences from the graph; then the graph kernels the export lacks
/// and the exported kernels the graph does not know.
std::string render_profile_join(const Dataflow& df, const Profile& profile, const ProfileJoin& join,
                                const ShowStyle& style);

struct ShowCommand {
  ExtractInputs inputs;       ///< inputs.dir: DIR, model.so or FLOW.json; the rest as for extract
  std::string profile;        ///< ncu / nsys CSV export; empty: the node table
  std::string color = "auto"; ///< "auto" (stdout a terminal and NO_COLOR unset) | "always" | "never"
  bool quiet = false;         ///< no progress on stderr
};
struct ExplainCommand {
  ExtractInputs inputs;       ///< as ShowCommand's
  std::string selector;
  std::string color = "auto";
  bool quiet = false;
};

/// Results on `out`, diagnostics on `err` (one line); returns the exit code. Progress
/// (while extracting) goes to stderr only when it is a terminal and `quiet` is not set.
int run_show_command(const ShowCommand& cmd, std::ostream& out, std::ostream& err);
int run_explain_command(const ExplainCommand& cmd, std::ostream& out, std::ostream& err);

}  // namespace kdflow
