// emit.h — the output formats of the dataflow IR: one emitter per format (emit_json.cpp,
// emit_dot.cpp, emit_text.cpp). Emitters only print; they never analyze or fail on a valid IR.
#pragma once

#include <string>

#include "kdflow/dataflow.h"
#include "kdflow/diag.h"

namespace kdflow {

/// JSON, schema "kdflow/1" (docs/schema.md). Deterministic: same IR → same bytes.
std::string emit_json(const Dataflow& df);

/// Graphviz DOT: one cluster per graph node holding its kernels, buffers as nodes.
std::string emit_dot(const Dataflow& df);

/// A short per-node text summary for people.
std::string emit_text(const Dataflow& df);

/// Reads the JSON form back into the IR (for tools that consume an extracted graph).
/// Diagnostics name `file` and a JSON pointer.
Expected<Dataflow> parse_dataflow_json(const std::string& text, const std::string& file);

enum class Format { Json, Dot, Text };
/// "json" | "dot" | "text" → Format; or from an output file's extension (.json/.dot/.gv/.txt).
Expected<Format> format_from_name(const std::string& name);
Expected<Format> format_from_path(const std::string& path);

}  // namespace kdflow
