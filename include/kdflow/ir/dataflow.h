// dataflow.h — the kernel-level dataflow IR: the one contract between the analyzers,
// the emitters and the replay engine. Plain value structs with stable integer ids;
// no AST, file or driver types. docs/schema.md documents its JSON form ("kdflow/1").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kdflow/ir/host_trace.h"

namespace kdflow {

inline constexpr const char* kSchemaVersion = "kdflow/1";

enum class BufferKind { Input, Param, Intermediate, Output, Workspace };
const char* to_string(BufferKind k);

/// A buffer: one per graph entry (entries sharing a storage id are distinct buffers
/// with the same storage_id), and one per workspace allocation.
struct Buffer {
  int id = 0;                         ///< index in Dataflow::buffers
  BufferKind kind = BufferKind::Intermediate;
  std::optional<int64_t> storage_id;  ///< graph storage id; nullopt for workspaces
  std::string name;                   ///< graph: node name (":i" appended for output i > 0 of multi-output nodes); workspace: "<function>.ws<k>"
  std::string dtype;                  ///< element type
  std::vector<int64_t> shape;         ///< workspace: {bytes / element size}
  uint64_t bytes = 0;                 ///< graph: entry bytes; workspace: requested bytes
  int entry_id = -1;                  ///< graph entry id; -1 for workspaces
  int node = -1;                      ///< producing graph node, or the node that allocates the workspace
  int output_index = 0;               ///< output index within `node` (graph buffers)
  SourceLoc loc;                      ///< workspaces: the TVMBackendAllocWorkspace call
  int input_index = -1;               ///< Relax builds: inputs: the VM function's parameter index (-1: none)
  int constant_index = -1;            ///< Relax builds: params: the index in the executable's constant pool (-1: none)
  /// A view: the output of a node that launches nothing and only renames memory (`__nop`:
  /// vm.builtin.reshape, Relay's reshape) is the buffer it views — resolved to one that is not
  /// itself a view — at `view_offset` bytes, with its own dtype and shape. -1: not a view.
  /// Kernel and library-call arguments passed through a view name the viewed buffer (Arg::view).
  int view_of = -1;
  int64_t view_offset = 0;
  /// Builds with symbolic shapes (tvm-ffi): each dimension as TVM's own function signature
  /// states it ("n", "400"), where one is symbolic; empty otherwise. `shape` holds the values.
  std::vector<std::string> shape_expr;
  /// Relax builds: an input whose *values* shaped the flow (vm.builtin.tensor_to_shape: an ONNX
  /// Expand's target shape; vm.builtin.read_if_cond: a branch taken): the values extract used,
  /// in order. The flow holds for inputs with these values only; replay checks them. Empty: none.
  std::vector<int64_t> values_used;
  /// Sharded builds (Dataflow::ranks > 1): the buffer may hold different bytes on different
  /// ranks — a param shard, or what a launch computes from one before a collective makes the
  /// ranks agree. False on one rank, and for inputs every rank is given.
  bool per_rank = false;
  bool operator==(const Buffer& o) const;
};

/// How a kernel uses a buffer argument (from the device-side analysis of its CUDA source).
enum class Access { Unknown, Read, Write, ReadWrite };
const char* to_string(Access a);  ///< "unknown" | "read" | "write" | "readwrite"

/// What a kernel launch touches through one pointer argument (static footprint, from
/// device.cu; docs/schema.md "footprint"). Byte ranges are half-open [lo, hi), relative to
/// the pointer the kernel receives (add Arg::offset for the buffer).
struct Footprint {
  std::string unknown;  ///< non-empty: not proven, and why (the other fields are then empty)
  std::optional<std::array<int64_t, 2>> read;   ///< bytes it may read; nullopt: none
  std::optional<std::array<int64_t, 2>> write;  ///< bytes it may write; nullopt: none
  std::optional<int64_t> elements;     ///< distinct elements touched (read or written), when counted
  std::optional<int64_t> read_bytes;   ///< distinct bytes read, when counted
  std::optional<int64_t> write_bytes;  ///< distinct bytes written, when counted
  bool exact = true;  ///< false: a guard could not be modelled; ranges are a superset (proves bounds, not OOB)
  /// Where a range's end comes from, for diagnostics (an out-of-bounds report a user can take
  /// upstream): the device-source line of the access reaching that byte and, where its domain is
  /// a box, the thread and block that reach it, threadIdx x, y, z then blockIdx x, y, z. Made at
  /// extract only: not in the JSON, not compared.
  struct End {
    unsigned line = 0;  ///< 0: unknown
    std::optional<std::array<int64_t, 6>> at;
  };
  std::array<End, 2> read_ends{}, write_ends{};  ///< [0]: the lowest byte's, [1]: the highest's
  bool operator==(const Footprint& o) const {
    return unknown == o.unknown && read == o.read && write == o.write && elements == o.elements &&
           read_bytes == o.read_bytes && write_bytes == o.write_bytes && exact == o.exact;
  }
};

/// The floating-point operations one kernel launch executes, counted from its code
/// (kernel_ops.h; docs/costs.md "Counting from the code"). Counts are over the whole
/// launch (every thread of the grid), per kind and precision.
struct KernelOps {
  enum Kind { AddSub, Mul, Fma, Div, Special, MinMaxCmp, kKinds };
  enum Precision { F16, BF16, F32, F64, kPrecisions };
  enum class Status { Exact, UpperBound, Unknown };
  /// counts[kind][precision]: executions over the launch (a half2 operation counts 2)
  std::array<std::array<uint64_t, kPrecisions>, kKinds> counts{};
  /// add/sub + mul + 2·fma + div + special; compare/min/max count 0. With Unknown: what could be counted.
  uint64_t flops = 0;
  /// Of `flops`, the adds of cross-thread reduction trees: an add/sub one of whose operands
  /// came from another lane (a warp shuffle's result) or whose two operands are slots of the
  /// same __shared__ array (TVM's shared-memory tree). Every lane of the tree executes them;
  /// the op's formula has none of them (docs/costs.md).
  uint64_t reduction_flops = 0;
  Status status = Status::Exact;
  std::vector<std::string> reasons;  ///< why not exact: typed reasons, each once, sorted
  /// Global memory accesses through the pointer arguments, executions × bytes (not distinct:
  /// a cached re-read counts again); nullopt when some argument's accesses are not modelled.
  std::optional<uint64_t> load_bytes, store_bytes;
  bool bytes_exact = true;   ///< false: a guard that reads data was counted as taken (an upper bound)
  /// Block barriers (__syncthreads()) executed over the launch, by every thread (per thread x
  /// threads); 0 also where a barrier's domain could not be counted (the time model's only use).
  uint64_t barriers = 0;
  std::string bytes_reason;  ///< why load/store bytes are nullopt (a footprint reject reason)
  bool operator==(const KernelOps& o) const {
    return counts == o.counts && flops == o.flops && reduction_flops == o.reduction_flops && status == o.status &&
           reasons == o.reasons &&
           load_bytes == o.load_bytes && store_bytes == o.store_bytes && bytes_exact == o.bytes_exact &&
           bytes_reason == o.bytes_reason && barriers == o.barriers;
  }
};
const char* to_string(KernelOps::Status s);     ///< "exact" | "upper bound" | "unknown"
const char* kind_name(int kind);                ///< "add_sub" | "mul" | "fma" | "div" | "special" | "min_max_cmp"
const char* precision_name(int precision);      ///< "fp16" | "bf16" | "fp32" | "fp64"

/// One argument of a kernel launch or library call.
struct Arg {
  enum class Kind { Buffer, Int, Float, Null };
  Kind kind = Kind::Int;
  int buffer = -1;          ///< Buffer: the buffer live at that point
  int64_t offset = 0;       ///< Buffer: byte offset into it
  int view = -1;            ///< Buffer: the view (Buffer::view_of == buffer) the host passed, with its shape; -1: none
  int64_t int_value = 0;    ///< Int
  /// Int arguments of kernels in builds with symbolic shapes: the expression over shape
  /// symbols the host computed the value from ("n", "n * 400"); "" when it is a constant.
  std::string expr;
  double float_value = 0;   ///< Float
  std::string dtype;        ///< the parameter's dtype: arg_types[i] for kernels ("handle", "int32", ...)
  Access access = Access::Unknown;  ///< Buffer args of kernels: read/write/readwrite (library calls: see schema.md)
  /// Library calls' DLTensor* arguments (dtype "DLTensor*"): the tensor the callee sees —
  /// its dtype ("float32") and shape. Empty tensor_dtype for every other argument.
  std::string tensor_dtype;
  std::vector<int64_t> tensor_shape;
  std::string text;         ///< Null from a library call's string argument (dtype "str"): the string
  std::optional<Footprint> footprint;  ///< kernels' pointer arguments, when device.cu was analyzed
  bool operator==(const Arg& o) const;
};

struct Kernel {
  int id = 0;                       ///< launch order, 0-based, across the whole model
  std::string name;                 ///< kernel symbol (function table key)
  int node = -1;                    ///< graph node that launches it
  std::string function;             ///< the fused function (graph func_name)
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  /// Builds with symbolic shapes: each grid / block dimension as the expression over shape
  /// symbols the host computed it from ("(n + 31) >> 5"), the value as text where it is a
  /// constant ("1"); all empty when no dimension is symbolic.
  std::array<std::string, 3> grid_expr, block_expr;
  int64_t dynamic_shared_memory = 0;
  /// TVM 0.23+ launch attributes (the function table's `tir(x).use_programtic_dependent_launch`
  /// and `tir(x).use_cooperative_launch` tags): TVM launches such a kernel with cuLaunchKernelEx,
  /// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION / CU_LAUNCH_ATTRIBUTE_COOPERATIVE.
  bool programmatic_dependent_launch = false;
  bool cooperative_launch = false;
  std::vector<Arg> args;            ///< kernel parameters in order (len(arg_types))
  SourceLoc loc;                    ///< the TVMFuncCall in host.c
  std::vector<int64_t> loop_iterations;  ///< enclosing host loops' iteration indices (empty: not in a loop)
  int device_function = -1;         ///< index in Dataflow::device_functions (-1: no device source read)
  std::optional<KernelOps> ops;     ///< floating-point operations counted from device.cu (kernel_ops.h), when analyzed
  /// The time predicted from its code on Dataflow::predicted_on (analysis/time_model.h), when
  /// extract was asked for it (--time-model with JSON output); µs.
  std::optional<double> predicted_us;
  bool operator==(const Kernel& o) const;
};

/// A communication between the ranks (disco workers) of a sharded build: TVM's
/// `runtime.disco.<kind>` (R.ccl.allreduce, allgather, broadcast_from_worker0, ...), which every
/// rank calls at the same point of the program (docs/schema.md "Collectives").
struct Collective {
  /// "allreduce" | "allgather" | "broadcast_from_worker0" | "scatter_from_worker0" |
  /// "gather_to_worker0" | "recv_from_worker0" | "send_to_worker" | "recv_from_worker" |
  /// "send_to_next_group" | "recv_from_prev_group"
  std::string kind;
  std::string reduce_op;   ///< allreduce: "sum" | "prod" | "min" | "max" | "avg"; "" otherwise
  bool in_group = true;    ///< among the ranks of this rank's group (false: every rank)
  std::string dtype;       ///< element type of what is sent
  int64_t elements = 0;    ///< elements each rank sends (allreduce / allgather: its whole input)
  uint64_t bytes = 0;      ///< bytes each rank sends: elements × element size (the ASTRA-sim comm_size)
  int send = -1;           ///< the buffer sent (-1: this rank sends nothing, e.g. a receiver)
  int recv = -1;           ///< the buffer written (-1: this rank receives nothing)
  bool in_place = false;   ///< send and recv are the same memory
  int peer = -1;           ///< send_to_worker / recv_from_worker: the other rank (-1: none)
  bool operator==(const Collective& o) const {
    return kind == o.kind && reduce_op == o.reduce_op && in_group == o.in_group && dtype == o.dtype &&
           elements == o.elements && bytes == o.bytes && send == o.send && recv == o.recv &&
           in_place == o.in_place && peer == o.peer;
  }
};

/// A packed call to something that is not a kernel of the module (cuBLAS, cuDNN, ...).
struct LibraryCall {
  int id = 0;
  std::string name;
  int node = -1;
  std::string function;
  std::vector<Arg> args;
  SourceLoc loc;
  int after_kernel = -1;  ///< id of the last kernel launched before it (-1: none)
  /// A collective between ranks (`name` is "runtime.disco.<kind>"); nullopt for library calls.
  std::optional<Collective> collective;
  bool operator==(const LibraryCall& o) const;
};

/// One attribute of a Relay operator call, as relay.txt prints it (`strides=[2, 2]`).
struct RelayAttr {
  /// Int: one integer; Float: one number; Bool: True/False; String: a quoted string;
  /// Ints / Floats: a list of numbers; None: `None`; Text: anything else, kept as printed.
  enum class Kind { Int, Float, Bool, String, Ints, Floats, None, Text };
  std::string key;
  Kind kind = Kind::Text;
  std::vector<int64_t> ints;    ///< Int (one), Bool (one: 0/1), Ints
  std::vector<double> floats;   ///< Float (one), Floats
  std::string text;             ///< String: the unquoted string; Text: the value as printed
  bool operator==(const RelayAttr& o) const {
    return key == o.key && kind == o.kind && ints == o.ints && floats == o.floats && text == o.text;
  }
};
const char* to_string(RelayAttr::Kind k);  ///< "int" | "float" | "bool" | "string" | "ints" | "floats" | "none" | "text"

/// One Relay operator of a fused function ("nn.conv2d").
struct RelayOp {
  RelayOp() = default;
  RelayOp(std::string op_name, std::string result_type = "")
      : name(std::move(op_name)), type(std::move(result_type)) {}
  std::string name;             ///< Relay operator name
  std::string type;             ///< result type as relay.txt prints it ("Tensor[(1, 400), float32]"); "" when decoded from a name
  std::vector<RelayAttr> attrs;            ///< the call's attributes, by key (relay.txt only)
  std::vector<std::string> input_types;    ///< each positional argument's type as printed ("" when unknown; relay.txt only)
  bool operator==(const RelayOp& o) const {
    return name == o.name && type == o.type && attrs == o.attrs && input_types == o.input_types;
  }
};

/// A graph node (every node of graph.json, "null" ones too).
struct Node {
  int id = 0;
  std::string op;            ///< "null" | "tvm_op"
  std::string name;
  std::string function;      ///< func_name ("" for null nodes; "__nop", "__copy" kept as is)
  std::vector<int> inputs;   ///< buffer ids the node reads (its graph inputs)
  std::vector<int> outputs;  ///< buffer ids the node writes (its graph outputs)
  std::vector<int> kernels;  ///< kernel ids in launch order
  std::vector<int> workspaces;     ///< workspace buffer ids in allocation order
  std::vector<int> library_calls;  ///< library call ids
  SourceLoc loc;             ///< the function's definition in host.c
  std::vector<RelayOp> relay_ops;  ///< the Relay operators fused into `function`, in order
  std::string relay_source;  ///< "relay.txt" (exact) | "name" (decoded from the function name) | "" (none)
  /// The CUDA graph this call is captured into (Relax `relax.backend.use_cuda_graph`):
  /// "<capture function>#<entry>[@[<shape>]]"; "" outside every capture.
  std::string cuda_graph;
  /// The step of a session (--session) this call belongs to: "create", "prefill", "decode K";
  /// "" outside a session.
  std::string session_step;
  /// A call TVM's runtime made by itself inside a VM builtin (the KV cache's kernels inside
  /// "vm.builtin.attention_kv_cache_attention_with_fused_qkv"): that builtin, what the call
  /// is to the runtime ("split rotary", "prefill ragged", "decode", "transpose append",
  /// "merge", "aux copy") and the model layer; "", "", -1 for the host program's own calls.
  std::string runtime_call;
  std::string runtime_role;
  int64_t layer = -1;
  /// What that runtime passed to `function`: tensors (Buffer args with dtype "DLTensor*", the
  /// view's offset, dtype and shape), int64 and float64 scalars, in the callee's order.
  std::vector<Arg> runtime_args;
  bool operator==(const Node& o) const;
};

/// A copy from host to device a runtime makes (the KV cache's auxiliary arrays, packed into
/// one buffer and sent before a forward's first attention): node `node` writes `values`
/// (of `dtype`) into `buffer` at `offset` bytes; `arrays` name the parts.
struct HostCopy {
  struct Array {
    std::string name;
    int64_t first = 0;  ///< element index in `values`
    int64_t count = 0;
    bool operator==(const Array& o) const { return name == o.name && first == o.first && count == o.count; }
  };
  int node = -1;
  int buffer = -1;
  int64_t offset = 0;
  std::string dtype = "int32";
  std::vector<int64_t> values;
  std::vector<Array> arrays;
  bool operator==(const HostCopy& o) const {
    return node == o.node && buffer == o.buffer && offset == o.offset && dtype == o.dtype && values == o.values &&
           arrays == o.arrays;
  }
};

/// Graph-level roles: a node reads its input buffers and writes its output buffers.
struct Edge {
  enum class Kind { Read, Write };
  Kind kind = Kind::Read;
  int buffer = 0;
  int node = 0;
  bool operator==(const Edge& o) const { return kind == o.kind && buffer == o.buffer && node == o.node; }
};

/// A true dependency between two kernel launches on the same memory (same storage id,
/// or the same workspace): read-after-write, write-after-read or write-after-write.
struct Dependency {
  enum class Kind { RAW, WAR, WAW };
  Kind kind = Kind::RAW;
  int from = 0;         ///< the earlier kernel (a library call's id when from_library_call)
  int to = 0;           ///< the later kernel (a library call's id when to_library_call)
  int from_buffer = 0;  ///< the buffer the earlier launch accessed
  int to_buffer = 0;    ///< the buffer the later launch accessed (same memory; may be another entry of the storage id)
  bool from_library_call = false;  ///< `from` is an id in Dataflow::library_calls
  bool to_library_call = false;    ///< `to` is an id in Dataflow::library_calls
  bool operator==(const Dependency& o) const {
    return kind == o.kind && from == o.from && to == o.to && from_buffer == o.from_buffer &&
           to_buffer == o.to_buffer && from_library_call == o.from_library_call &&
           to_library_call == o.to_library_call;
  }
};
const char* to_string(Dependency::Kind k);  ///< "raw" | "war" | "waw"

/// A `__global__` kernel as the CUDA source declares it.
struct DeviceParam {
  std::string name;
  std::string type;                 ///< as written ("float* __restrict__", "int")
  bool pointer = false;
  Access access = Access::Unknown;  ///< pointers: what the body does through it
  bool operator==(const DeviceParam& o) const {
    return name == o.name && type == o.type && pointer == o.pointer && access == o.access;
  }
};
struct DeviceFunction {
  std::string name;
  std::vector<DeviceParam> params;
  int64_t launch_bounds = 0;        ///< __launch_bounds__(N); 0 when absent
  SourceLoc loc;                    ///< in device.cu
  /// Why the body was not analyzed: the first clang error in it (or in a function it calls),
  /// "device.cu:449:37: error: no viable overloaded '='". Empty when analyzed; when set,
  /// every pointer parameter's access is Unknown.
  std::string access_error;
  bool operator==(const DeviceFunction& o) const {
    return name == o.name && params == o.params && launch_bounds == o.launch_bounds && loc == o.loc &&
           access_error == o.access_error;
  }
};

struct Sources {
  std::string graph;   ///< file names (no directories, so output does not depend on where inputs live)
  std::string host;
  std::string meta;
  std::string params;  ///< empty when no params file was read
  std::string device;  ///< device source (device.cu) read for access sets; empty when none
  std::string relay;   ///< relay.txt read for the Relay view; empty when none
  std::string library; ///< exported library (model.so) the graph, table and params came from; empty when none
  std::string vm_exec;      ///< Relax builds: the VM executable read (vm_exec.bin, or "model.so:__tvm_dev_mblob"); empty for Relay
  std::string vm_function;  ///< Relax builds: the VM function run ("main", or "__vmtir__main" in compiled mode)
  /// Relax builds: the TVM release(s) whose output the files are, as detected from the files
  /// themselves ("0.20", "0.26", "0.23-0.25", ...); empty when not detected (Relay builds).
  std::string tvm_version;
  /// Relax builds: what the detection saw ("vm_exec.bin: magic 0xd225de2f4214151e", ...).
  std::vector<std::string> tvm_version_evidence;
};

struct Dataflow {
  std::string schema = kSchemaVersion;
  Sources sources;
  /// The ranks (disco workers, one GPU each) that run this program, each with its own params
  /// (params_shard<r>.bin) and buffers: 1 for a build that is not sharded.
  int ranks = 1;
  /// The device of the kernels' predicted_us ("h200"); "" when none was asked for.
  std::string predicted_on;
  std::vector<Buffer> buffers;
  std::vector<Node> nodes;
  std::vector<Kernel> kernels;
  std::vector<LibraryCall> library_calls;
  std::vector<HostCopy> host_copies;  ///< in node order
  std::vector<Edge> edges;
  std::vector<Dependency> dependencies;  ///< kernel → kernel, in order of `to`, then `from`
  std::vector<DeviceFunction> device_functions;  ///< kernels of device.cu, in source order
  /// clang errors in device.cu that no kernel's access_error names (outside every kernel and
  /// every function a kernel calls): they change no access set; kept so they are reported.
  std::vector<std::string> device_errors;
  std::vector<int> inputs;   ///< buffer ids of graph inputs (not params), in arg_nodes order
  std::vector<int> params;   ///< buffer ids of params, in arg_nodes order
  std::vector<int> outputs;  ///< buffer ids of graph outputs, in heads order
};

}  // namespace kdflow
