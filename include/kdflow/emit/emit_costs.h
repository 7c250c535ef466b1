// emit_costs.h — the cost dataset (`kdflow costs ... -o rows.csv|rows.jsonl`): one row per
// fused function (or per kernel), columns documented in docs/costs.md. Renders the IR and
// a CostReport; computes nothing new, reads and writes no files.
#pragma once

#include <string>
#include <vector>

#include "kdflow/analysis/costs.h"
#include "kdflow/ir/dataflow.h"

namespace kdflow {

/// One model of a dataset: its name (the input's folder name), flow and costs.
struct ModelCosts {
  std::string model;
  const Dataflow* df = nullptr;
  CostReport report;
};

/// Column names in output order (per function, or per kernel).
const std::vector<std::string>& cost_columns(bool per_kernel);

/// RFC 4180 CSV (CRLF line ends, a header row; lists and objects as compact JSON in a cell).
std::string costs_csv(const std::vector<ModelCosts>& models, bool per_kernel);
/// JSON Lines: one object per row with the same keys, lists and objects as JSON.
std::string costs_jsonl(const std::vector<ModelCosts>& models, bool per_kernel);

}  // namespace kdflow
