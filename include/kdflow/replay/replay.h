// replay.h — runs a model's kernels from the dataflow IR on a GPU through the CUDA driver
// API, loaded at run time (never linked): plan, launch, time, check outputs. Needs no CUDA to build.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kdflow/analysis/launch_limits.h"  // LaunchLimits
#include "kdflow/formats/node_reference.h"
#include "kdflow/ir/dataflow.h"
#include "kdflow/frontend/extract.h"
#include "kdflow/support/diag.h"
#include "kdflow/formats/npy.h"

namespace kdflow {

// ---------------------------------------------------------------------------------------
// The plan: plain data, made and validated before any driver call.

/// Where the model's data comes from.
struct ReplayInputs {
  std::string label;   ///< names the IR in diagnostics (`label:/kernels/3/block: error: ...`)
  std::string params;  ///< params file (save_param_dict); empty: none (an IR with params is then an error)
  std::vector<std::pair<std::string, std::string>> inputs;  ///< input name → .npy file
  std::string input_dir;  ///< inputs not named above: input_dir/input_<name>.npy (empty: none)
  /// Relax builds with packed params (an LLM's nn.Module functions): the params file that
  /// holds them by name (params.bin), read beside `params` when that is the VM executable.
  std::string packed_params;
  /// A session's token ids (input_ids[prefill], input_ids[decode K]): one int32 file, the
  /// steps' tokens in order (the first N for prefill, then one per decode step); empty: none.
  std::string session_tokens;
  /// --allow-oob: a launch whose static footprint leaves its buffer is planned, its verdict
  /// kept in ReplayPlan::oob, instead of refused. replay() runs such a plan only on the CPU
  /// back end under --guard, where guard pages and redzones stop the access and name it.
  bool allow_oob = false;
};

/// One device allocation: a graph storage id (sized as TVM's graph executor sizes its pool:
/// the largest entry sharing it, rounded up to 4 bytes), or one workspace buffer.
struct PlanAllocation {
  int id = 0;
  int64_t storage_id = -1;   ///< graph storage id; -1 for a workspace
  int workspace = -1;        ///< the workspace buffer; -1 for graph storage
  std::vector<int> buffers;  ///< the buffers that live in it (all at offset 0)
  uint64_t bytes = 0;
  bool operator==(const PlanAllocation& o) const {
    return id == o.id && storage_id == o.storage_id && workspace == o.workspace && buffers == o.buffers &&
           bytes == o.bytes;
  }
};

/// A host-to-device copy done once before the first launch (params and inputs).
struct PlanUpload {
  int buffer = 0;
  int allocation = 0;
  std::string source;  ///< "params.bin:p0", or the .npy file
  std::string data;    ///< the bytes (buffer.bytes of them)
};

/// One kernel parameter, narrowed to the width of its dtype as TVM's pack_args does.
struct PlanArg {
  enum class Kind { Pointer, Null, Int32, UInt32, Int64, Float16, Float32, Float64 };
  Kind kind = Kind::Pointer;
  int buffer = -1;          ///< Pointer: the buffer
  int allocation = -1;      ///< Pointer: its allocation
  uint64_t offset = 0;      ///< Pointer: byte offset into the allocation
  Access access = Access::Unknown;
  int64_t int_value = 0;    ///< Int32/UInt32/Int64
  double float_value = 0;   ///< Float16/32/64
  uint32_t position = 0;    ///< byte offset in the packed parameter buffer (natural alignment)
  uint32_t size = 0;        ///< 2, 4 or 8 bytes
};
const char* to_string(PlanArg::Kind k);  ///< "ptr", "null", "int32", ...

struct PlanLaunch {
  int kernel = 0;  ///< kernel id in the IR
  std::string name;
  int node = -1;
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t shared_memory = 0;  ///< dynamic shared memory bytes
  std::vector<PlanArg> args;
  uint32_t param_bytes = 0;    ///< size of the packed parameter buffer
  /// Kernel::programmatic_dependent_launch / cooperative_launch: launched with cuLaunchKernelEx
  /// and these attributes, as TVM 0.23+ does.
  bool programmatic_dependent_launch = false;
  bool cooperative_launch = false;
};

/// One operand of a library call: where its data starts on the device.
struct PlanOperand {
  int buffer = -1;
  int allocation = -1;
  uint64_t offset = 0;  ///< byte offset into the allocation
  uint64_t bytes = 0;   ///< bytes the view spans (dtype size × elements)
};

/// A cuBLAS call (tvm.contrib.cublas.matmul / batch_matmul, float32) with the column-major
/// arguments TVM 0.14's cublas.cc passes (row-major A·B computed as Bᵀ·Aᵀ: operands swapped):
/// cublasSgemm_v2(handle, op(transb), op(transa), m, n, k, 1, B, ldb, A, lda, 0, C, ldc),
/// batch_matmul via cublasSgemmStridedBatched with the strides below.
struct PlanLibraryCall {
  int call = 0;               ///< library call id in the IR
  std::string name;           ///< "tvm.contrib.cublas.matmul"
  int node = -1;
  int after_kernel = -1;      ///< runs after this kernel (-1: before the first)
  bool batched = false;
  bool transa = false, transb = false;  ///< as TVM passes them (row-major view)
  int64_t m = 0, n = 0, k = 0;          ///< cuBLAS m, n, k (column-major, operands swapped)
  int64_t lda = 0, ldb = 0, ldc = 0;    ///< ldb: of the first cuBLAS operand (TVM's B), lda: of TVM's A
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  ///< elements; 0 broadcasts a batch of 1
  PlanOperand a, b, c;        ///< TVM's A, B, C; a collective: a what it sends, c what it receives into
  /// A collective between ranks (a sharded build): run by the engine between the ranks' back ends
  /// (collectives.h), never by a back end; the GEMM fields are unused.
  std::optional<Collective> collective;
};

/// A host-to-device copy a runtime makes between kernels (the KV cache's auxiliary arrays,
/// Dataflow::host_copies): done when every step of nodes before `node` has finished.
struct PlanHostCopy {
  int copy = 0;         ///< index in Dataflow::host_copies
  int node = -1;
  int buffer = -1;
  int allocation = -1;
  uint64_t offset = 0;  ///< byte offset into the allocation
  std::string data;     ///< the bytes
};

struct ReplayPlan {
  std::string label;
  std::vector<PlanAllocation> allocations;  ///< storage ids ascending, then workspaces in buffer order
  std::vector<int> buffer_allocation;       ///< buffer id → allocation id (-1: none)
  std::vector<PlanUpload> uploads;          ///< params (IR order), then inputs
  std::vector<PlanLaunch> launches;         ///< in the IR's launch order
  std::vector<PlanLibraryCall> library_calls;  ///< cuBLAS calls, in IR order (each after its after_kernel)
  std::vector<PlanHostCopy> host_copies;    ///< in IR order
  std::vector<int> outputs;                 ///< buffer ids of the graph outputs
  uint64_t total_bytes = 0;
  std::vector<std::string> oob;             ///< with allow_oob: each launch proven out of bounds (one line)
};

/// Limits every launch is checked against before anything runs (CUDA's, for sm_90).

/// Builds and validates the plan: allocation sizes, params matched by name with dtype and
/// shape checked, inputs read and checked, every launch's dimensions, shared memory,
/// argument count (against the CUDA source's parameters when the IR has them) and
/// pointer arguments (inside their allocation). The first problem → one-line Error.
Expected<ReplayPlan> make_plan(const Dataflow& df, const ReplayInputs& in, const LaunchLimits& limits = {});

/// The packed parameter buffer of a launch, pointers resolved against `bases`
/// (allocation id → device address).
std::string pack_arguments(const PlanLaunch& l, const std::vector<uint64_t>& bases);

/// One line per allocation, upload and launch; deterministic (file names without directories).
std::string format_plan(const ReplayPlan& plan, const Dataflow& df);

// ---------------------------------------------------------------------------------------
// Running it.

/// Eager: one launch at a time on one stream. Graph: the sequence captured into one CUDA
/// graph (a chain, as TVM's graph executor runs it). Dag: a CUDA graph built node by node
/// with an edge per transitively reduced dependency, so independent launches may overlap.
enum class ReplayMode { Eager, Graph, Dag };
const char* to_string(ReplayMode m);  ///< "eager" | "graph" | "dag"
enum class ModuleFormat { Unknown, Ptx, Cubin, Fatbin, CudaSource };
const char* to_string(ModuleFormat f);  ///< "ptx" | "cubin" | "fatbin" | "cuda source" | "unknown"
/// By magic bytes: \x7fELF → cubin, 50 ED 55 BA → fatbin, text with ".version" and ".target"
/// → PTX, other text with "__global__" → CUDA source (what the CPU back end compiles).
ModuleFormat detect_module_format(std::string_view bytes);

/// Who runs the kernels: the CUDA driver (default) or the host CPU (lib/replay/cpu/).
enum class ReplayBackend { Cuda, Cpu };
const char* to_string(ReplayBackend b);  ///< "cuda" | "cpu"

/// Who makes a sharded flow's collectives on CUDA (--collectives).
enum class CollectiveMode { Auto, Host, Nccl };

struct ReplayOptions {
  ReplayInputs inputs;
  ReplayBackend backend = ReplayBackend::Cuda;
  /// Device code files, format by content. Files named alike but for the extension are one
  /// module's alternatives (binaries tried before PTX); others are separate modules, all
  /// loaded, each kernel run from the one module that defines it (a Relax build's device_<i>).
  std::vector<std::string> modules;
  ReplayMode mode = ReplayMode::Eager;
  int warmup = 1;                    ///< untimed runs first
  int repeat = 10;                   ///< timed runs
  int device = 0;                    ///< CUDA device ordinal
  bool dry_run = false;              ///< plan and validate only; no driver needed
  bool guard = false;                ///< redzones after each allocation, checked after each kernel (eager)
  int cpu_threads = 0;               ///< CPU back end: OS threads running blocks (0: the hardware's concurrency)
  bool cpu_cache = true;             ///< CPU back end: compiled modules kept across runs ($XDG_CACHE_HOME/kdflow; false: --no-cache)
  /// CPU back end: fresh device allocations, every kernel's locals and each block's shared and
  /// thread-private memory start as 0xFF bytes (NaN as float): a read of memory nothing wrote
  /// shows as a difference from TVM's result (--poison).
  bool poison = false;
  uint64_t guard_bytes = 256;
  std::string dump_dir;              ///< eager: after each kernel, its written buffers as .npy
  int kernel = -1;                   ///< >= 0: run this kernel alone, its buffers restored from dump_dir
  std::vector<std::string> expect;   ///< .npy per graph output, in output order ("" skips one)
  double rtol = 1e-3;                ///< float outputs: |a - e| <= atol + rtol * |e|
  double atol = 1e-5;
  std::string cuda_library;          ///< empty: $KDFLOW_CUDA_LIBRARY, else libcuda.so.1
  std::string cublas_library;        ///< empty: $KDFLOW_CUBLAS_LIBRARY, else libcublas.so.13/.12/.11/libcublas.so
  double time_limit_s = 600;         ///< give up (exit 65, naming the kernel) when the GPU work waited on
                                     ///< takes longer (CPU back end: when one launch does); 0: no limit
  bool locate = false;               ///< internal: every run synchronised after each kernel, untimed
  /// --nodes: run only kernels slice_first..slice_last (kernel ids, inclusive; -1: whole model),
  /// their live-ins loaded from the dumps in inputs_from (params and inputs from their files),
  /// every buffer they write compared with the dump.
  int slice_first = -1;
  int slice_last = -1;
  std::string inputs_from;
  /// --compare-dumps: eager; after each kernel of the checked run, every buffer it wrote is
  /// compared with its dump in this folder (an earlier --dump-dir of the same model, from
  /// either back end, rtol/atol as for outputs); the first kernel that differs is reported.
  std::string compare_dir;
  /// TVM's result for each node (reference/nodes.json, read_node_references): after the last
  /// step of a node in the checked run, each of its listed buffers is compared (rtol/atol as
  /// for outputs); the first node that differs is reported.
  std::vector<NodeReferenceCheck> node_checks;
  /// A sharded flow (Dataflow::ranks > 1): each rank's params file (params_shard<r>.bin), in
  /// rank order, replacing inputs.packed_params for that rank. Every rank runs in this process
  /// with its own back end and buffers; the collectives are made between them (collectives.h).
  std::vector<std::string> rank_params;
  /// A sharded flow on CUDA: who makes the collectives. Auto: NCCL when the machine has a GPU
  /// per rank and NCCL loads, else kdflow on the host (the report says why); Host: kdflow on
  /// the host; Nccl: NCCL or exit 69.
  CollectiveMode collectives = CollectiveMode::Auto;
  std::string nccl_library;          ///< empty: $KDFLOW_NCCL_LIBRARY, else libnccl.so.2
};

struct KernelTime {
  int kernel = 0;
  int samples = 0;
  double median_us = 0;
  double min_us = 0;
};

/// One output compared with its expected .npy.
struct OutputCheck {
  int output = 0;             ///< index in the graph outputs (or the arg index with --kernel)
  int rank = -1;              ///< a sharded replay: the rank whose output this is (-1: one rank)
  int buffer = -1;
  std::string name;           ///< the array's file name ("output_0.npy")
  std::string expect_file;
  std::string problem;        ///< set when the arrays cannot be compared (dtype or shape differ)
  bool exact = false;         ///< integer/bool: compared exactly
  uint64_t elements = 0;
  uint64_t mismatches = 0;    ///< elements outside the tolerance
  uint64_t nan_mismatches = 0;  ///< of those, NaN where the expected value is not (--poison: memory nothing wrote)
  double max_abs = 0;
  double max_rel = 0;
  bool pass = false;
  /// The expected array cannot tell a wrong result from a right one at these tolerances: a
  /// constant array (the expected values' mean) would pass too (a softmax of near-zero logits).
  bool uninformative = false;
};

struct GuardViolation {
  int kernel = -1;       ///< first kernel after which a redzone changed; -1 in graph mode (unknown)
  int allocation = 0;
  uint64_t first_byte = 0;  ///< offset past the end of the allocation of the first changed byte
  std::string message;   ///< one line
};

/// --compare-dumps: the first kernel (in run order) with a written buffer unlike its dump.
struct FirstDifference {
  int kernel = -1;
  int node = -1;
  int arg = -1;        ///< the kernel's argument index
  OutputCheck check;   ///< buffer, dump file, counts and errors
};

/// Node references: the first node (in run order) whose buffer differs from TVM's.
struct NodeDifference {
  int node = -1;
  std::string label;   ///< "node 6 fused_matmul1_add1, output 0"
  OutputCheck check;
};

struct ReplayReport {
  ReplayPlan plan;
  std::string timing_method;   ///< one line: how the times were taken
  bool ran = false;            ///< false for dry runs
  std::string driver;          ///< library loaded
  std::string device;          ///< "NVIDIA H100 80GB HBM3 (sm_90)"
  std::string module;          ///< file loaded; several modules: their files, ", "-separated
  std::string cublas;          ///< cuBLAS library loaded ("" when the model makes no library call)
  ModuleFormat module_format = ModuleFormat::Unknown;  ///< of the (first) module loaded
  ReplayMode mode = ReplayMode::Eager;
  int warmup = 0;
  int repeat = 0;
  int kernel = -1;                  ///< the --kernel run, or -1
  ReplayBackend backend = ReplayBackend::Cuda;
  std::vector<KernelTime> times;    ///< one per launch, in launch order (timed eager runs, every mode)
  /// One per library call, in call order (`kernel` holds the call id): each timed between
  /// its own markers (kernel times exclude them).
  std::vector<KernelTime> library_call_times;
  double total_median_us = 0;       ///< eager: sum of kernel medians; graph/dag: median graph launch
  double total_min_us = 0;
  double kernel_sum_median_us = 0;  ///< Σ kernel medians (eager runs)
  double kernel_sum_min_us = 0;
  double eager_run_median_us = 0;  ///< end to end, first launch to last, per eager run, not gated: what a
  double eager_run_min_us = 0;     ///< host loop achieves (launch overhead included)
  /// Gated eager runs (the back end could hold the queue until a run was queued whole): the
  /// step times then come from these, so they are device time, and eager_run − gated_run is
  /// the launch overhead. false: step times come from the ungated runs (their sum is then
  /// eager_run by construction: the intervals tile the run).
  bool gated = false;
  double gated_run_median_us = 0;
  double gated_run_min_us = 0;
  double graph_run_median_us = 0;  ///< graph/dag: per graph launch
  double graph_run_min_us = 0;
  /// dag: edges of the graph, the longest dependency chain (steps: kernels and library calls)
  /// and the critical path's time from the step medians (the floor any concurrency could reach).
  size_t dag_edges = 0;
  int dag_longest_chain = 0;
  double dag_critical_path_us = 0;
  std::vector<std::string> result_names;  ///< file names for `results`
  std::vector<NpyArray> results;    ///< graph outputs (or, with --kernel, the kernel's written buffers)
  std::vector<int> result_buffers;
  std::vector<OutputCheck> checks;
  std::optional<GuardViolation> guard;
  std::vector<std::string> dumped;  ///< files written to dump_dir
  std::vector<int> slice_kernels;   ///< --nodes: the kernels run
  std::vector<int> slice_live_ins;  ///< --nodes: the buffers loaded before (read before written)
  std::optional<FirstDifference> first_difference;  ///< --compare-dumps
  int compared_kernels = 0;         ///< --compare-dumps: kernels compared
  int differing_kernels = 0;        ///< --compare-dumps: of those, kernels with a buffer that differs
  std::optional<NodeDifference> node_difference;  ///< node references: the first node that differs
  int node_tensors_compared = 0;    ///< node references: buffers compared
  int node_tensors_differing = 0;
  int node_tensors_uninformative = 0;  ///< passed, but a constant array would have passed too
  int nodes_compared = 0;
  /// A sharded replay: the ranks run, and the collectives each made (every rank's outputs are
  /// in `checks`, each with its rank; `results` are rank 0's).
  int ranks = 1;
  uint64_t collectives = 0;
  /// Who made them: "nccl" (on each rank's stream) or "host" (kdflow, between the ranks).
  std::string collectives_by;
  /// No guard violation and every check passed.
  bool passed() const;
};

/// Runs the model. Progress and notes (module fallback, device) go to `log`, one line each.
/// Errors: no driver → ExitCode::Unavailable; bad inputs → DataError / NoInput; a failing
/// driver call → Software (launch failures name the kernel).
Expected<ReplayReport> replay(const Dataflow& df, const ReplayOptions& opt, std::ostream& log);

/// The libcublas names replay tries, in order (`override_path`, else $KDFLOW_CUBLAS_LIBRARY,
/// else the loader path's libcublas.so.13/.12/.11/.so, then the CUDA toolkit folders).
std::vector<std::string> replay_cublas_candidates(const std::string& override_path);

/// True once a replay in this process left a device hung or poisoned (a time-out or a sticky
/// fault): the process should end with _Exit() after printing, without running static
/// destructors or atexit handlers (a library's teardown may wait on the device forever).
bool replay_device_abandoned();

/// Compares an array with its expected value (rtol/atol for floats, exact for integers).
OutputCheck compare_arrays(const NpyArray& actual, const NpyArray& expected, double rtol, double atol);

/// The buffer's contents as an .npy array (vector lanes become a last dimension; types
/// NumPy lacks, such as bfloat16, become unsigned integers of the same width).
NpyArray buffer_array(const Buffer& b, std::string data);
/// Bytes buffer_array() expects for `b`.
uint64_t buffer_array_bytes(const Buffer& b);
/// "<kernel id>_<kernel name>_arg<j>.npy"
std::string dump_file_name(const Kernel& k, size_t arg);

/// Node references: one line saying all compared nodes match TVM's results, or naming the first
/// node that differs, then what was not compared.
std::string format_node_references(const ReplayReport& r, const NodeReferences& refs);

/// --compare-dumps: one line naming the first kernel and node that differ, or that none did.
std::string format_first_difference(const ReplayReport& r, const Dataflow& df);
/// Text tables for people: outputs against expectations, kernel times grouped by node.
std::string format_checks(const ReplayReport& r);
std::string format_times(const ReplayReport& r, const Dataflow& df);
/// Machine-readable times (docs/schema.md, "Replay timing JSON"): per kernel id, node,
/// function, grid/block, median/min µs; run totals; how timing was taken.
std::string timing_json(const ReplayReport& r, const Dataflow& df);
/// Chrome trace JSON: {"traceEvents": [...], "displayTimeUnit": "ns"}; one track per graph
/// node, one "X" event per kernel (median times laid end to end), flows along dependencies.
std::string chrome_trace(const ReplayReport& r, const Dataflow& df);

// ---------------------------------------------------------------------------------------
// The `kdflow replay` command.

/// --time-limit when not given: a wait for GPU work (CUDA), one launch (CPU back end; a
/// kernel of resnet18 takes at most a few seconds there, one that spins should not keep the
/// user for ten minutes).
inline constexpr double kDefaultTimeLimitCudaS = 600;
inline constexpr double kDefaultTimeLimitCpuS = 60;

struct ReplayCommand {
  std::string dir;                   ///< sample folder: extracted (unless --flow), default files from it
  std::string flow;                  ///< --flow FLOW.json: read the IR instead of extracting
  std::vector<std::string> modules;  ///< --module FILE (repeatable); default DIR/device.cubin, DIR/device.ptx,
                                     ///< else DIR/device_<i>.cubin|.ptx for i = 0, 1, ... (a Relax build)
  std::string params;                ///< --params FILE; default DIR/params.bin when present
  std::vector<std::string> inputs;   ///< --input NAME=FILE (repeatable); default DIR/input_<name>.npy
  std::vector<std::string> expect;   ///< --expect FILE (repeatable, in output order); default DIR/output_<i>.npy
  bool no_expect = false;            ///< --no-expect: compare nothing
  bool allow_unverified = false;     ///< --allow-unverified: exit 0 when no comparison could have failed
  std::string mode = "eager";        ///< --mode eager|graph|dag
  std::string backend = "cuda";      ///< --backend cuda|cpu
  std::string collectives = "auto";  ///< --collectives auto|host|nccl (a sharded flow on CUDA)
  std::string timing_json;           ///< --timing-json FILE
  double time_limit = -1;            ///< --time-limit SECONDS (0: none; unset (< 0): kDefaultTimeLimit*)
  int warmup = 1;                    ///< --warmup N
  int repeat = 10;                   ///< --repeat N (>= 1)
  int device = 0;                    ///< --gpu N (CUDA device ordinal; --device names device.cu, as for extract)
  bool dry_run = false;              ///< --dry-run: print the plan, run nothing
  bool guard = false;                ///< --guard
  int jobs = 0;                      ///< --jobs N: the CPU back end's worker threads (0: the cores)
  bool no_cache = false;             ///< --no-cache: the CPU back end neither reads nor writes its compile cache
  bool poison = false;               ///< --poison (--backend cpu)
  std::string dump_dir;              ///< --dump-dir DIR
  int kernel = -1;                   ///< --kernel ID (needs --dump-dir from an earlier full run)
  std::string nodes;                 ///< --nodes FROM..TO: graph node ids (n12) or function/node names
  std::string inputs_from;           ///< --inputs-from DUMP_DIR (with --nodes)
  std::string compare_dumps;         ///< --compare-dumps DUMP_DIR (eager: name the first node that differs)
  std::string node_reference;        ///< --node-reference FILE (default DIR/reference/nodes.json)
  bool no_node_reference = false;    ///< --no-node-reference: compare outputs only
  bool allow_oob = false;            ///< --allow-oob (CPU back end with --guard only)
  std::string trace;                 ///< --trace FILE (Chrome trace JSON)
  std::string output_dir;            ///< --output-dir DIR: outputs as output_<i>.npy
  double rtol = 1e-3;                ///< --rtol
  double atol = 1e-5;                ///< --atol
  bool quiet = false;                ///< -q: no progress lines on err
  ExtractInputs extract;             ///< the build's other inputs, as extract takes them (dir and params: above)
};

/// Exit codes: 0 ok, 1 outputs differ beyond tolerance or a guard fired, 3 the run completed
/// but verified nothing (no reference, or every comparison one a constant would pass; not with
/// --no-expect or --allow-unverified), 64 usage,
/// 65 bad data (including failed validation), 66 missing input, 69 no CUDA driver,
/// 70 a driver call failed, 73 cannot write an output.
int run_replay_command(const ReplayCommand& cmd, std::ostream& out, std::ostream& err);

}  // namespace kdflow
