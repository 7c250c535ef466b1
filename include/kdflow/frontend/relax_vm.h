// relax_vm.h — runs a Relax VM bytecode function (TVM 0.20, `main`) symbolically: registers,
// the memory builtins (alloc_storage / alloc_tensor / null_value / reshape), tuples and the
// shape checks, and records every call of a fused host function with the tensors it gets.
// The result is the graph the graph executor would have run — one "null" node per VM
// parameter and per pool tensor used, one tvm_op node per fused call, one __nop per
// reshape — so build_dataflow and everything after it work unchanged. No clang, no host C.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "kdflow/support/diag.h"
#include "kdflow/formats/graph_json.h"
#include "kdflow/formats/params.h"
#include "kdflow/formats/vm_exec.h"

namespace kdflow {

/// One argument a runtime passes to a host function: an entry seen as a tensor of `shape` at
/// `byte_offset` (a view), or a scalar.
struct RelaxCallArg {
  enum class Kind { Tensor, Int, Float };
  Kind kind = Kind::Tensor;
  int entry = -1;
  std::vector<int64_t> shape;
  DType dtype;
  uint64_t byte_offset = 0;
  int64_t i = 0;
  double f = 0;
};

/// A host-to-device copy of int32 values into `entry` at `byte_offset`, by graph node `node`;
/// `arrays` name its parts (name, first element, count).
struct RelaxHostCopy {
  int node = -1;
  int entry = -1;
  uint64_t byte_offset = 0;
  std::vector<int64_t> values;
  std::string dtype = "int32";  ///< of the values: int32 (the KV cache's arrays) or int64
  std::vector<std::tuple<std::string, int64_t, int64_t>> arrays;
};

/// What the VM program did, as a graph.
struct RelaxProgram {
  std::string function;            ///< the VM function run ("main")
  Graph graph;                     ///< synthesized; storage ids: alloc_storage k → k, then inputs, then constants
  std::vector<int> input_index;    ///< per graph node: the VM parameter it is, or -1
  std::vector<int> constant_index; ///< per graph node: the constant-pool index it is, or -1
  std::vector<int> packed_index;   ///< per graph node: its position in the packed params (RelaxVmEnv::packed), or -1
  std::vector<uint64_t> call_instr;  ///< per graph node: the instruction that called it (-1 for arg nodes)
  int64_t num_storages = 0;        ///< vm.builtin.alloc_storage calls executed
  std::vector<uint64_t> storage_bytes;  ///< per storage id < num_storages: the bytes allocated
  /// The shape heap at the end of the run (vm.builtin.alloc_shape_heap; empty if none) and,
  /// per VM parameter with a symbolic shape, the shape it was run with.
  std::vector<int64_t> shape_heap;
  std::map<int, std::vector<int64_t>> symbolic_inputs;
  /// Per graph node: the arguments in the callee's order, where the caller is TVM's runtime
  /// (the KV cache calling its kernels' host functions with views and scalars); empty: the
  /// node's inputs, then its outputs, as the VM passes them.
  std::vector<std::vector<RelaxCallArg>> call_args;
  /// Names of entries that are no node's own output name (the KV cache's buffers).
  std::map<int, std::string> entry_names;
  /// Host-to-device copies the runtime makes (the KV cache's auxiliary arrays), by node.
  std::vector<RelaxHostCopy> host_copies;
  /// Per VM parameter whose values the program read (vm.builtin.tensor_to_shape,
  /// read_if_cond): the values, as the flow depends on them (Buffer::values_used).
  std::map<int, std::vector<int64_t>> values_used;
};

/// One step of a session: the driver's calls of the KV cache (add or remove a sequence), or
/// one forward of one sequence — kv_state_begin_forward, embed its tokens, prefill or decode,
/// kv_state_end_forward — labelled for the flow ("prefill", "decode 0"; with several
/// sequences "seq 1 prefill", "seq 1 decode 0"; a prefill split into chunks "prefill chunk 1").
struct RelaxSessionStep {
  /// BatchDecode: one forward decoding one token of each of `seqs` through the build's
  /// `batch_decode` (MLC's batched decode: x of shape (batch, 1, hidden)).
  /// ForkSequence: `seq` forked from `parent` at `pos` (-1: its end), as
  /// vm.builtin.kv_state_fork_sequence; PopN: `tokens` dropped from the end of `seq`
  /// (vm.builtin.kv_state_popn). EnableSlidingWindow: `seq` keeps its first `sink` tokens and
  /// its last `window` - `sink` (vm.builtin.attention_kv_cache_enable_sliding_window_for_seq,
  /// which MLC's engine calls for models with a sliding_window_size).
  enum class Kind { AddSequence, RemoveSequence, Prefill, Decode, BatchDecode, ForkSequence, PopN, EnableSlidingWindow };
  Kind kind = Kind::Prefill;
  int64_t seq = 0;
  std::vector<int64_t> seqs;  ///< BatchDecode: the sequences, in the batch's order
  int64_t tokens = 1;  ///< Prefill: tokens of this forward (a chunk's); PopN: tokens dropped
  std::string label;   ///< the step's name (Node::session_step; a forward's input_ids[label])
  int64_t parent = 0;  ///< ForkSequence
  int64_t pos = -1;    ///< ForkSequence
  int64_t window = 0, sink = 0;  ///< EnableSlidingWindow
};

/// A stated run of a language model's host program, as TVM's LLM tutorial and MLC's chat
/// loop drive the VM functions: --session prefill:N,decode:M (one sequence: N tokens
/// prefilled, then M decode steps), or a session file (docs/schema.md "Session files").
struct RelaxSession {
  int64_t max_batch_size = 1;      ///< create_tir_paged_kv_cache's arguments
  int64_t max_total_seq_len = 0;   ///< 0: every token of the session
  int64_t prefill_chunk_size = 0;  ///< 0: the largest forward; a longer prefill is split into chunks of this size
  int64_t page_size = 16;
  int64_t support_sliding_window = 0;  ///< create's fifth value (MLC's models): 1 lets sequences slide
  std::vector<RelaxSessionStep> steps;
};

/// "prefill:N,decode:M[,page_size:P][,max_total_seq_len:T][,prefill_chunk_size:C]", or the
/// path of a session file (JSON, docs/schema.md).
Expected<RelaxSession> parse_session(const std::string& spec);

struct RelaxVmLimits {
  uint64_t max_steps = 10'000'000;  ///< instructions executed
};

/// Symbolic shapes: what the VM program cannot know by itself.
struct RelaxVmEnv {
  /// The packed params (an nn.Module build's `param_mode="packed"`: one VM parameter that is a
  /// tuple of tensors), in the tuple's order: the params file beside the build. Null: none.
  const ParamsFile* packed = nullptr;
  /// Shapes of the VM function's parameters (by index) whose match_shape stores a dimension
  /// into the shape heap (a symbolic dimension such as `n`): from the input files or
  /// `--input-shape`. Parameters with static shapes need none.
  std::map<int, std::vector<int64_t>> input_shapes;
  /// Runs a host-only shape function (host.c) on the shape heap: `(*known)[i]` tells which
  /// slots hold a value, before the call and after it; returns the heap after the call (same size).
  std::function<Expected<std::vector<int64_t>>(const std::string& function, const std::vector<int64_t>& heap,
                                               std::vector<bool>* known)>
      shape_function;
  /// Runs a host function that takes no argument and returns a scalar (compute_symbolic_expr):
  /// false when it cannot; `*is_float` tells which of `*i`, `*f` holds the value.
  std::function<Status(const std::string& function, bool* is_float, int64_t* i, double* f)> scalar_function;
  /// The values of an integer VM parameter (by index), for the builtins that read data on the
  /// host (vm.builtin.tensor_to_shape, read_if_cond): from input_<name>.npy. Null: none given.
  std::function<Expected<std::vector<int64_t>>(int param)> input_values;
  /// The bytes the executable was parsed from: the constant pool's tensors' data
  /// (VmConstant::data_offset), read by the same builtins. Empty: not available.
  std::string_view constant_bytes;
  /// The ranks a sharded build runs on (runtime.disco.world_size); 0: not known.
  int ranks = 0;
};

/// Runs a session (RelaxSession) of an LLM build: create_tir_paged_kv_cache, then embed and
/// prefill, then embed and decode per step, as one graph; nodes carry attrs["session_step"].
Expected<RelaxProgram> run_relax_session(const VmExecutable& ex, const std::vector<std::string>& host_functions,
                                         const RelaxSession& session, const RelaxVmLimits& limits = {},
                                         const RelaxVmEnv& env = {});

/// Runs `function` of `ex`. Errors name the executable, the instruction index and the
/// builtin (`vm_exec.bin: instruction 7 (vm.builtin.foo): error: ...`).
/// `host_functions` are the functions the host module defines (calls to anything else that
/// is not a modelled builtin are errors).
Expected<RelaxProgram> run_relax_vm(const VmExecutable& ex, const std::vector<std::string>& host_functions,
                                    const std::string& function = "main", const RelaxVmLimits& limits = {},
                                    const RelaxVmEnv& env = {});

}  // namespace kdflow
