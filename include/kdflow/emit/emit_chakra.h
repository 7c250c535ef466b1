// emit_chakra.h — the flow as an MLCommons Chakra execution trace (for ASTRA-sim and other
// simulators): length-delimited protobuf messages, GlobalMetadata then one compute node per
// kernel launch and library call. Renders the IR and a CostReport; reads and writes no files.
#pragma once

#include <string>

#include "kdflow/analysis/costs.h"
#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// True when this build can write Chakra traces (protobuf was found at build time).
bool chakra_available();

/// The trace bytes. Each node's duration is the measured time when `costs` has one, else
/// the roofline bound on its device, else 0 — the node's `duration_source` attribute says
/// which. Data dependencies are the RAW edges, control dependencies the WAR/WAW edges.
/// Unavailable (exit 69) in a build without protobuf.
Expected<std::string> emit_chakra(const Dataflow& df, const CostReport& costs, const std::string& model);

}  // namespace kdflow
