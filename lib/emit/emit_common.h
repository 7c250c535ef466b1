// emit_common.h — small helpers shared by the emitters (private to lib/emit).
// Pure functions of the IR; no output format lives here.
#pragma once

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kdflow/ir/dataflow.h"

namespace kdflow::detail {

inline constexpr const char* kGenerator = "kdflow 0.1.0";

/// A node whose function the graph executor calls: op "tvm_op", function not __nop/__copy.
inline bool is_function_node(const Node& n) {
  return n.op == "tvm_op" && n.function != "__nop" && n.function != "__copy";
}

/// "file:line:col".
inline std::string loc_string(const SourceLoc& loc) {
  return loc.file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.col);
}

/// Shared by the JSON and cost-dataset emitters (the same value in both).
/// A Relay attribute's value: a JSON number, boolean, string, array or null by its kind;
/// a value kept as printed text is {"text": "..."}.
inline nlohmann::ordered_json relay_attr_json(const RelayAttr& a) {
  switch (a.kind) {
    case RelayAttr::Kind::Int: return a.ints.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(a.ints[0]);
    case RelayAttr::Kind::Float: return a.floats.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(a.floats[0]);
    case RelayAttr::Kind::Bool: return nlohmann::ordered_json(!a.ints.empty() && a.ints[0] != 0);
    case RelayAttr::Kind::String: return nlohmann::ordered_json(a.text);
    case RelayAttr::Kind::Ints: return nlohmann::ordered_json(a.ints);
    case RelayAttr::Kind::Floats: return nlohmann::ordered_json(a.floats);
    case RelayAttr::Kind::None: return nlohmann::ordered_json(nullptr);
    case RelayAttr::Kind::Text: return nlohmann::ordered_json{{"text", a.text}};
  }
  return nlohmann::ordered_json(nullptr);
}

inline bool valid_buffer(const Dataflow& df, int id) {
  return id >= 0 && static_cast<size_t>(id) < df.buffers.size();
}

/// Shortest round-trip text of a float scalar, always visibly a float ("1.0", "0.5",
/// "1e+30", "nan", "inf").
inline std::string float_text(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_not_of("-0123456789") == std::string::npos) s += ".0";
  return s;
}

}  // namespace kdflow::detail
