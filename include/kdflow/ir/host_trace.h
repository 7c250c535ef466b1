// host_trace.h — what the host-C interpreter observed while running one fused function:
// workspace allocations and packed calls with their evaluated arguments, in order.
// Plain data shared by the clang analyzer (producer) and the dataflow builder (consumer).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kdflow {

struct SourceLoc {
  std::string file;
  unsigned line = 0;
  unsigned col = 0;
  bool valid() const { return line != 0; }
  bool operator==(const SourceLoc& o) const { return file == o.file && line == o.line && col == o.col; }
};

/// The DLTensor a fused function receives as its i-th argument (the graph executor's view).
struct TensorArg {
  /// What the caller passes in this slot: a tensor (every field below), or a scalar (a
  /// runtime that calls host functions itself — TVM's KV cache — passes int64 and double
  /// arguments beside its tensors: `int_value` / `float_value`).
  enum class Kind { Tensor, Int, Float };
  Kind kind = Kind::Tensor;
  int64_t int_value = 0;
  double float_value = 0;
  /// The DLTensor's byte_offset: a view into its entry (the KV cache's auxiliary arrays are
  /// views into one merged device buffer); 0 for whole entries.
  uint64_t byte_offset = 0;
  int entry_id = 0;            ///< graph entry id
  std::vector<int64_t> shape;
  uint8_t dtype_code = 2;
  uint8_t dtype_bits = 32;
  uint16_t dtype_lanes = 1;
  int device_type = 2;         ///< kDLCUDA
  int device_id = 0;
  int type_code = 7;           ///< in arg_type_ids: 7 kTVMDLTensorHandle (graph executor), 13 kTVMNDArrayHandle (Relax VM)
  /// A host tensor the code may read and write (the Relax VM's shape heap, int64): its
  /// elements, `host_known[i]` telling which hold a value. Null for device tensors.
  const std::vector<int64_t>* host_int64 = nullptr;
  const std::vector<bool>* host_known = nullptr;
  /// Per dimension, the shape symbol the callee's signature names there ("n"; tvm-ffi builds),
  /// "" for a literal dimension; empty when unknown. Integers the host code computes from a
  /// named dimension carry their expression (PackedArg::int_expr).
  std::vector<std::string> shape_names;
};

/// Where a pointer argument of a packed call points.
struct PointerTarget {
  enum class Kind { Null, Entry, Workspace };
  Kind kind = Kind::Null;
  int index = 0;       ///< graph entry id (Entry) or workspace index within the call (Workspace)
  int64_t offset = 0;  ///< byte offset from the start of the buffer
  bool operator==(const PointerTarget& o) const { return kind == o.kind && index == o.index && offset == o.offset; }
};

/// One TVMValue passed to a packed call, with its type code.
struct PackedArg {
  enum class Kind { Int, Float, Pointer, Tensor, String };
  Kind kind = Kind::Int;
  int type_code = 0;        ///< TVM type code as stored in the tcode array (0 int, 2 float, 3 handle, 4 null, 7 DLTensor*, 11 str)
  int64_t int_value = 0;    ///< Int
  /// Int: the expression over shape symbols the host computed it from ("(n + 31) >> 5"), ""
  /// when it came from constants only (TensorArg::shape_names)
  std::string int_expr;
  double float_value = 0;   ///< Float
  PointerTarget pointer;    ///< Pointer: the raw data pointer; Tensor: its data + byte_offset
  int tensor_arg = -1;      ///< Tensor: index of the function argument passed on, -1 for one built on the stack
  std::vector<int64_t> tensor_shape;  ///< Tensor: the DLTensor's shape as the call sees it
  uint8_t tensor_dtype_code = 0;      ///< Tensor: its dtype
  uint8_t tensor_dtype_bits = 0;
  uint16_t tensor_dtype_lanes = 0;
  std::string string_value; ///< String
};

/// A packed call `TVMFuncCall(h, values, codes, n, ...)` where h came from
/// `TVMBackendGetFuncFromEnv(ctx, "<name>", &h)`.
struct PackedCall {
  std::string name;
  std::vector<PackedArg> args;
  SourceLoc loc;                       ///< the TVMFuncCall
  std::vector<int64_t> loop_iterations;  ///< iteration of each enclosing host loop, outermost first
};

struct WorkspaceAlloc {
  uint64_t bytes = 0;
  int device_type = 2;
  int dtype_code = 2;
  int dtype_bits = 32;
  SourceLoc loc;
  bool freed = false;
};

/// Everything one call of a fused function did, in order.
struct HostTrace {
  std::string function;
  SourceLoc function_loc;   ///< where the function is defined
  std::vector<WorkspaceAlloc> workspaces;
  std::vector<PackedCall> calls;   ///< in execution order (set_device, kernels, libraries)
  int args_used = 0;               ///< 1 + the highest `args[i]` index the function read
  uint64_t steps = 0;              ///< interpreter work spent
};

}  // namespace kdflow
