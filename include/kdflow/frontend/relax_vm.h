// relax_vm.h — runs a Relax VM bytecode function (TVM 0.20, `main`) symbolically: registers,
// the memory builtins (alloc_storage / alloc_tensor / null_value / reshape), tuples and the
// shape checks, and records every call of a fused host function with the tensors it gets.
// The result is the graph the graph executor would have run — one "null" node per VM
// parameter and per pool tensor used, one tvm_op node per fused call, one __nop per
// reshape — so build_dataflow and everything after it work unchanged. No clang, no host C.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kdflow/support/diag.h"
#include "kdflow/formats/graph_json.h"
#include "kdflow/formats/vm_exec.h"

namespace kdflow {

/// What the VM program did, as a graph.
struct RelaxProgram {
  std::string function;            ///< the VM function run ("main")
  Graph graph;                     ///< synthesized; storage ids: alloc_storage k → k, then inputs, then constants
  std::vector<int> input_index;    ///< per graph node: the VM parameter it is, or -1
  std::vector<int> constant_index; ///< per graph node: the constant-pool index it is, or -1
  std::vector<uint64_t> call_instr;  ///< per graph node: the instruction that called it (-1 for arg nodes)
  int64_t num_storages = 0;        ///< vm.builtin.alloc_storage calls executed
  std::vector<uint64_t> storage_bytes;  ///< per storage id < num_storages: the bytes allocated
};

struct RelaxVmLimits {
  uint64_t max_steps = 10'000'000;  ///< instructions executed
};

/// Runs `function` of `ex`. Errors name the executable, the instruction index and the
/// builtin (`vm_exec.bin: instruction 7 (vm.builtin.foo): error: ...`).
/// `host_functions` are the functions the host module defines (calls to anything else that
/// is not a modelled builtin are errors).
Expected<RelaxProgram> run_relax_vm(const VmExecutable& ex, const std::vector<std::string>& host_functions,
                                    const std::string& function = "main", const RelaxVmLimits& limits = {});

}  // namespace kdflow
