// dataflow.cpp — the small amount of behaviour the IR value types carry: kind names and
// equality (used by tests and by the JSON round trip). No analysis here.
#include "kdflow/ir/dataflow.h"

#include <cmath>

namespace kdflow {

const char* to_string(BufferKind k) {
  switch (k) {
    case BufferKind::Input: return "input";
    case BufferKind::Param: return "param";
    case BufferKind::Intermediate: return "intermediate";
    case BufferKind::Output: return "output";
    case BufferKind::Workspace: return "workspace";
  }
  return "intermediate";  // unreachable for valid enum values
}

const char* to_string(Access a) {
  switch (a) {
    case Access::Unknown: return "unknown";
    case Access::Read: return "read";
    case Access::Write: return "write";
    case Access::ReadWrite: return "readwrite";
  }
  return "unknown";
}

const char* to_string(Dependency::Kind k) {
  switch (k) {
    case Dependency::Kind::RAW: return "raw";
    case Dependency::Kind::WAR: return "war";
    case Dependency::Kind::WAW: return "waw";
  }
  return "raw";
}

const char* to_string(RelayAttr::Kind k) {
  switch (k) {
    case RelayAttr::Kind::Int: return "int";
    case RelayAttr::Kind::Float: return "float";
    case RelayAttr::Kind::Bool: return "bool";
    case RelayAttr::Kind::String: return "string";
    case RelayAttr::Kind::Ints: return "ints";
    case RelayAttr::Kind::Floats: return "floats";
    case RelayAttr::Kind::None: return "none";
    case RelayAttr::Kind::Text: return "text";
  }
  return "text";
}

bool Buffer::operator==(const Buffer& o) const {
  return id == o.id && kind == o.kind && storage_id == o.storage_id && name == o.name &&
         dtype == o.dtype && shape == o.shape && bytes == o.bytes && entry_id == o.entry_id &&
         node == o.node && output_index == o.output_index && loc == o.loc && input_index == o.input_index &&
         constant_index == o.constant_index && shape_expr == o.shape_expr && values_used == o.values_used && view_of == o.view_of &&
         view_offset == o.view_offset && per_rank == o.per_rank;
}

// Only the fields the kind uses take part (an Int argument's stale `buffer` field is not
// part of its value), and NaN equals NaN so that an IR equals its own JSON round trip.
bool Arg::operator==(const Arg& o) const {
  if (kind != o.kind || dtype != o.dtype) return false;
  switch (kind) {
    case Kind::Buffer:
      return buffer == o.buffer && offset == o.offset && view == o.view && access == o.access &&
             tensor_dtype == o.tensor_dtype &&
             tensor_shape == o.tensor_shape && footprint == o.footprint;
    case Kind::Int: return int_value == o.int_value && expr == o.expr;
    case Kind::Float:
      if (std::isnan(float_value) || std::isnan(o.float_value))
        return std::isnan(float_value) && std::isnan(o.float_value);
      return float_value == o.float_value && std::signbit(float_value) == std::signbit(o.float_value);
    case Kind::Null: return text == o.text;
  }
  return false;
}

bool Kernel::operator==(const Kernel& o) const {
  return id == o.id && name == o.name && node == o.node && function == o.function &&
         grid == o.grid && block == o.block && grid_expr == o.grid_expr && block_expr == o.block_expr &&
         dynamic_shared_memory == o.dynamic_shared_memory &&
         programmatic_dependent_launch == o.programmatic_dependent_launch &&
         cooperative_launch == o.cooperative_launch &&
         args == o.args && loc == o.loc && loop_iterations == o.loop_iterations &&
         device_function == o.device_function && ops == o.ops && predicted_us == o.predicted_us;
}

const char* to_string(KernelOps::Status s) {
  switch (s) {
    case KernelOps::Status::Exact: return "exact";
    case KernelOps::Status::UpperBound: return "upper bound";
    case KernelOps::Status::Unknown: return "unknown";
  }
  return "unknown";
}
const char* kind_name(int kind) {
  static const char* const names[] = {"add_sub", "mul", "fma", "div", "special", "min_max_cmp"};
  return kind >= 0 && kind < KernelOps::kKinds ? names[kind] : "?";
}
const char* precision_name(int precision) {
  static const char* const names[] = {"fp16", "bf16", "fp32", "fp64"};
  return precision >= 0 && precision < KernelOps::kPrecisions ? names[precision] : "?";
}

bool LibraryCall::operator==(const LibraryCall& o) const {
  return id == o.id && name == o.name && node == o.node && function == o.function &&
         args == o.args && loc == o.loc && after_kernel == o.after_kernel && collective == o.collective;
}

bool Node::operator==(const Node& o) const {
  return id == o.id && op == o.op && name == o.name && function == o.function &&
         inputs == o.inputs && outputs == o.outputs && kernels == o.kernels &&
         workspaces == o.workspaces && library_calls == o.library_calls && loc == o.loc &&
         relay_ops == o.relay_ops && relay_source == o.relay_source && cuda_graph == o.cuda_graph &&
         session_step == o.session_step && runtime_call == o.runtime_call && runtime_role == o.runtime_role &&
         layer == o.layer && runtime_args == o.runtime_args;
}

}  // namespace kdflow
