// emit_view.h — `kdflow view`: the dataflow as one self-contained HTML page (laid out at write
// time by Graphviz, rendered and made interactive in the page by d3), and the same graph as
// Google Model Explorer's JSON graph. Renders the IR and facts computed elsewhere (costs.h, the
// `show` summary); never reads files, never analyzes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kdflow/analysis/costs.h"
#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// What the page shows beside the IR, computed by the caller (driver/view.cpp).
struct ViewFacts {
  std::string title;  ///< the model's name (the input's base name)
  /// `kdflow show`'s summary as label/value lines ("launches", "peak memory", ...).
  std::vector<std::pair<std::string, std::string>> summary;
  const CostReport* costs = nullptr;  ///< FLOPs, bytes, bounds and measured times (nullptr: none)
  std::string measured_source;        ///< where measured times come from ("" when none)
};

/// Whether this build can lay out pages (linked with Graphviz's libgvc).
bool view_available();

/// The page: one HTML file holding its scripts, styles and data, no network request.
/// Deterministic: the same IR and facts give the same bytes. Unavailable (no Graphviz in
/// this build) or a layout failure: an error (exit 69 / 70), never a crash.
Expected<std::string> emit_view_html(const Dataflow& df, const ViewFacts& facts);

/// Model Explorer's graph JSON (ai-edge-model-explorer's JSON adapter: one graph collection,
/// one graph; namespaces fold by VM function or graph node, then by kernel), with per-node
/// attributes (grid, block, FLOPs, bytes, measured time). Deterministic.
std::string emit_model_explorer(const Dataflow& df, const ViewFacts& facts);

}  // namespace kdflow
