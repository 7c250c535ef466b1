// emit.h — the output formats of the dataflow IR: one emitter per format (emit_json.cpp,
// emit_dot.cpp, emit_text.cpp). Emitters only print; they never analyze or fail on a valid IR.
#pragma once

#include <string>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// JSON, schema "kdflow/1" (docs/schema.md). Deterministic: same IR → same bytes.
std::string emit_json(const Dataflow& df);

/// How the DOT emitter draws the graph. The defaults give emit_dot(df)'s output exactly.
struct DotOptions {
  enum class Cluster { Node, None };
  /// Node: one cluster per graph node holding its kernels and workspaces. None: no
  /// clusters; each kernel's label names its node instead.
  Cluster cluster = Cluster::Node;
  /// One box per graph node (its function, Relay ops, kernel and workspace counts) and
  /// the graph buffers between nodes; kernels are not drawn (`cluster` then has no effect).
  bool collapse = false;
  /// Fill kernels (collapsed: node boxes) by the operator family of their node's Relay
  /// ops (relay_family below), with a legend of the families drawn.
  bool op_colors = false;
  /// No buffer nodes: kernel → kernel edges from the RAW dependencies, labelled with the
  /// memory they pass through (collapsed: node → node edges through graph buffers). Nodes
  /// that launch nothing (__nop) are then not drawn.
  bool buffers = true;
};

/// Graphviz DOT: one cluster per graph node holding its kernels, buffers as nodes.
std::string emit_dot(const Dataflow& df);
std::string emit_dot(const Dataflow& df, const DotOptions& options);

/// The operator family of a node from its Relay ops: the first of conv, dense/matmul,
/// sort/scan, reduction (softmax, norms), pooling, data movement, elementwise that one of
/// its ops belongs to; "other" when none (or no Relay ops). Names as returned:
/// "conv" | "dense" | "sort" | "reduction" | "pooling" | "data movement" | "elementwise" | "other".
const char* relay_family(const Node& n);

/// A short per-node text summary for people.
std::string emit_text(const Dataflow& df);

/// The JSON form's reader is parse_dataflow_json (ir/dataflow_json.h); emitters only render.

enum class Format { Json, Dot, Text, Chakra, Html };
/// "json" | "dot" | "text" | "chakra" | "html" → Format; or from an output file's extension
/// (.json/.dot/.gv/.txt/.et/.html; the Chakra trace itself is written by emit_chakra.h, the
/// page by emit_view.h).
Expected<Format> format_from_name(const std::string& name);
Expected<Format> format_from_path(const std::string& path);

}  // namespace kdflow
