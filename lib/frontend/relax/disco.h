// disco.h — TVM's disco collectives as a Relax VM program calls them (R.ccl.allreduce,
// allgather, broadcast_from_worker0, scatter_from_worker0, ...; legalized to
// call_dps_packed("runtime.disco.<kind>", ...)), in bytecode and compiled mode alike: for each
// builtin, which operand a rank sends, which one it receives into, and what the scalars mean
// (src/runtime/extra/disco/builtin.cc and nccl/nccl.cc, TVM 0.20 - 0.27). The VM runner
// (relax_vm.cpp) makes each call a node of the flow from this description; nothing here knows
// the VM's registers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"
#include "kdflow/support/dtype.h"

namespace kdflow {

/// "runtime.disco.*": a function of disco's runtime (collectives, and the worker's identity).
bool is_disco_builtin(std::string_view name);

/// One operand of a disco call as the VM passes it.
struct DiscoOperand {
  enum class Kind { Tensor, Int, Shape, None, Other };
  Kind kind = Kind::Other;
  std::vector<int64_t> shape;  ///< Tensor: its shape; Shape: the tuple's values
  DType dtype;                 ///< Tensor
  int64_t value = 0;           ///< Int (a bool is 0 or 1)
  std::string what;            ///< Other: what it is, for messages ("a string")
};

/// What one call does on every rank. `collective.send` / `recv` hold operand indices (-1:
/// none); the caller maps them to its buffers.
struct DiscoCall {
  Collective collective;
};

/// Describes a call of a collective or point-to-point builtin. Errors are one line without the
/// instruction's prefix ("3 arguments, expected 4"); builtins that are not communications
/// (worker_id, world_size, ...) are the caller's (describe says so).
Expected<DiscoCall> describe_disco_call(std::string_view name, const std::vector<DiscoOperand>& operands);

/// A sharded flow's collectives and ranks: every library call of a disco node (its function a
/// "runtime.disco.<kind>", `attrs` its graph node's attributes as the VM runner set them:
/// collective, reduce_op, in_group, peer) gets its Collective, with `send` / `recv` the buffers
/// behind its arguments; `ranks` is stored (1 and no collective: nothing changes). Then
/// Buffer::per_rank: the packed params (each rank's shard) and, node by node in order, what a
/// node writes from a per-rank buffer, except what an allreduce, allgather or broadcast makes
/// equal on every rank. Errors: a collective in a flow whose ranks are not known (ranks 0).
Status annotate_collectives(Dataflow& df, const std::vector<std::map<std::string, std::string>>& attrs, int ranks);

/// The bytes of `elements` elements of `dtype` (sub-byte types round up per element, as NCCL
/// counts them: (bits × lanes + 7) / 8 each).
uint64_t disco_bytes(const DType& dtype, int64_t elements);

}  // namespace kdflow
