// dataflow_json.h — reads the JSON form of the IR (schema "kdflow/1") back into the IR, for
// the tools that consume an extracted graph. Its writer is emit_json (emit/emit.h). Never prints.
#pragma once

#include <string>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// Reads the JSON form back into the IR. Diagnostics name `file` and a JSON pointer.
Expected<Dataflow> parse_dataflow_json(const std::string& text, const std::string& file);

}  // namespace kdflow
