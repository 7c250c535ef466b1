// backend.h — what a replay back end is: the one interface between the shared replay engine
// (engine.cpp: plan order, uploads, checked/warm-up/timed runs, dumps, slices, --kernel,
// --expect, --output-dir, reports) and the thing that owns memory and runs kernels (the CUDA
// driver in cuda/, the host CPU in cpu/). Modelled on alpaka's accelerator interface: one
// interface, the back ends beside each other, each holding only what is its own.
//
// Private to kdflow_replay (moves to include/kdflow/replay/backend.h with the layout move).
//
// Contract, in the order the engine calls it:
//   1. make_*_backend(options, log) → a back end; nothing on the device yet.
//   2. open() → the device (or host) is ready; info() is filled (name, memory, limits).
//   3. load_modules(modules) once: every device module of the build (a Relax build has
//      several), each as its alternative files (device.cubin, device.ptx; or device.cu for
//      the CPU back end, which compiles the CUDA source text). module_formats() says which
//      formats a back end accepts; the engine passes only those.
//   4. prepare() once with every launch and library call it will run: the back end resolves
//      each kernel in the modules (exactly one module must define it) and checks its block
//      and shared memory against the device, before anything is allocated.
//   5. alloc()/memset() for every allocation of the plan (the engine has already checked each
//      size against info().memory_bytes: one line, exit 65, before the first alloc), then
//      bind() with the launches' device addresses and packed parameters, then upload().
//   6. launch(i) / library_call(c) in plan order; record()/poll()/elapsed_us() around them when
//      caps().timing; synchronize() where the engine needs everything finished.
//   7. build_graph()/launch_graph() when the mode asks and the capability exists.
//   8. Destruction releases everything, except after a fault marked sticky or a hang, when
//      the back end must not call into the device again (abandon()).
//
// Work is queued in order on one work queue (a CUDA stream; the CPU back end may run it at
// once): launch, library_call and record are ordered against each other; upload, download
// and memset complete before they return and wait for nothing queued (the engine calls
// synchronize() first where it matters).
//
// Since the first cut (bab3f12): memory calls return a Fault (the engine names the buffer);
// prepare() (checks, before any allocation) and bind() (addresses, after) are two calls;
// DeviceInfo::library_calls names what runs library calls; kernel_fault_error() and friends
// format faults alike for every back end.
//
// Errors: set-up calls return Status with a finished one-line message. Calls on the run path
// return a Fault, which the engine turns into a message naming the kernel or library call
// ("<api> of kernel 3 (fused_add) failed: <text>"), so every back end's failures read alike.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kdflow/support/diag.h"
#include "kdflow/replay/replay.h"

namespace kdflow::nccl {
class Communicators;  // cuda/nccl.h
}

namespace kdflow::replay_backend {

/// A device address: CUdeviceptr for CUDA, a host address for the CPU back end. 0 is none.
using DevicePtr = uint64_t;

/// What went wrong on the run path. code 0 (ok()) is success.
struct Fault {
  int code = 0;            ///< the back end's own code (CUresult, cublasStatus_t, ...); 0: none
  std::string api;         ///< the call that failed: "cuLaunchKernel", "cublasSgemm_v2", "cpu kernel"
  std::string text;        ///< "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"
  /// The device is unusable until the process ends (CUDA_ERROR_ILLEGAL_ADDRESS, _LAUNCH_FAILED,
  /// ...: cuda.h "the process must be terminated and relaunched"). The engine then makes no
  /// further call into this back end and locates the fault in a child process.
  bool sticky = false;
  bool ok() const { return code == 0 && api.empty(); }
  static Fault none() { return {}; }
};

/// A back end's optional abilities; the engine asks before it uses one and says in the
/// report's timing method what it did instead.
struct Capabilities {
  bool asynchronous = true;  ///< launch() queues and returns; false: it has run when it returns
  bool timing = true;        ///< record()/elapsed_us() measure device time (CUDA events)
  bool gate = false;         ///< hold_queue()/release_queue(): a queued run starts only when released
  bool graphs = true;        ///< build_graph(chain = true): --mode graph as the device's own graph
  bool dag = true;           ///< build_graph(chain = false): independent steps may run concurrently
  bool library_calls = true; ///< library_call() (cuBLAS matmul / batch_matmul or a CPU reference GEMM)
  bool guard_pages = false;  ///< alloc() can place a buffer against an inaccessible page (CPU --guard)
  /// collective(): the back end queues a sharded flow's collectives itself (CUDA: NCCL), in
  /// stream order; false: the engine makes them on the host between the ranks.
  bool device_collectives = false;
  /// Most launches queued without a wait before launch() itself blocks (CUDA: the launch
  /// queue, about 1000 on current drivers); 0: no limit known. The engine waits in between.
  int queue_depth = 0;
};

/// The device, as the report prints it.
struct DeviceInfo {
  std::string name;         ///< "NVIDIA H100 80GB HBM3 (sm_90)", "host CPU (x86_64, 16 threads)"
  std::string library;      ///< what was loaded ("libcuda.so.1"; "" for the CPU)
  std::string driver;       ///< "13.0 (CUDA driver API 13000)", or "" when unknown
  std::string library_calls;  ///< what runs library calls ("libcublas.so.13", "reference GEMM"); "" none
  uint64_t memory_bytes = 0;       ///< what allocations may use: device total / host available; 0 unknown
  int64_t max_shared_memory = 0;   ///< per block, opt-in maximum; 0: unknown (not checked)
  int max_threads_per_block = 1024;
  int ordinal = -1;                ///< CUDA: the device opened; -1 for the CPU
  int device_count = 0;            ///< CUDA: the devices the driver has (0: not asked)
};

/// One file of a device module.
struct ModuleFile {
  std::string path;
  std::string bytes;       ///< the file's contents (PTX text, cubin, fatbin, or CUDA source text)
  ModuleFormat format = ModuleFormat::Unknown;
};
/// One device module: its alternative files (device.cubin and device.ptx are one module),
/// binaries first. A Relax build has several modules (device_0, device_1, ...).
struct ModuleAlternatives {
  std::vector<ModuleFile> files;
  /// Per kernel name, the threads per block of the plan's launches of it (every group gets the
  /// whole plan's): a back end that compiles source may specialise on them (the CPU back end
  /// compiles a kernel launched only with one-thread blocks as one thread); a kernel not
  /// named here has no launch in the plan.
  std::map<std::string, std::set<uint64_t>> block_threads;
  /// Per kernel name, the grids of the plan's launches of it (the CPU back end batches the
  /// blocks of a one-thread kernel by them).
  std::map<std::string, std::set<std::array<uint32_t, 3>>> grids;
  /// Per kernel name, the block shapes of the plan's launches of it (the CPU back end compiles
  /// a kernel launched with one shape for that shape).
  std::map<std::string, std::set<std::array<uint32_t, 3>>> blocks;
};

/// Everything launch(i) needs for plan launch i.
struct KernelLaunch {
  size_t index = 0;                     ///< launch index in the plan
  const PlanLaunch* launch = nullptr;   ///< kernel name, grid, block, dynamic shared memory, args
  /// Per argument of `launch->args`: the device address for Pointer args (allocation base +
  /// offset), 0 for Null and scalars (their values are in the PlanArg).
  std::vector<DevicePtr> pointers;
  std::string packed;                   ///< pack_arguments(): the parameter buffer as the kernel takes it
};

/// Everything library_call(c) needs for plan library call c.
struct LibraryCallArgs {
  size_t index = 0;                          ///< library call index in the plan
  const PlanLibraryCall* call = nullptr;     ///< m, n, k, lda..., strides, batch, transposes
  DevicePtr a = 0, b = 0, c = 0;             ///< TVM's A, B, C on the device
};

/// One host copy of the plan (an LLM session's KV-cache auxiliary arrays): `bytes` to the
/// device address `dst` (allocation base + offset).
struct HostCopyArgs {
  size_t index = 0;                   ///< host copy index in the plan
  DevicePtr dst = 0;
  const std::string* bytes = nullptr; ///< PlanHostCopy::data (outlives the back end's use)
};

/// One step of a graph: a kernel (plan launch index), a library call (plan call index) or a
/// host copy (plan host copy index), with the steps that must finish before it (indices into
/// the step list; all smaller).
struct GraphStep {
  bool library_call = false;
  bool host_copy = false;
  size_t index = 0;
  std::vector<size_t> preds;
};

/// A poll of a recorded marker.
enum class Poll { Done, NotReady, Failed };

struct BackendOptions {
  int device = 0;                 ///< device ordinal (CUDA); ignored by the CPU back end
  std::string cuda_library;       ///< CUDA: empty → $KDFLOW_CUDA_LIBRARY, else libcuda.so.1
  std::string cublas_library;     ///< CUDA: empty → $KDFLOW_CUBLAS_LIBRARY, else the usual names
  bool library_calls = false;     ///< the plan makes library calls (load cuBLAS or the CPU GEMM)
  std::string label;              ///< names the IR in diagnostics
  int threads = 0;                ///< CPU: worker threads (0: hardware concurrency)
  bool guard = false;             ///< --guard. CPU: buffers against guard pages, faults reported at once
  double launch_time_limit_s = 0; ///< CPU: a launch running longer ends the process (exit 65, naming it); 0: none
  bool compile_cache = true;      ///< CPU: the compile cache (cpu/compile_cache.h) in default_cache_dir(); false: --no-cache
  bool poison = false;            ///< CPU: --poison (fresh allocations, locals and shared memory as 0xFF bytes)
  /// A sharded replay: this back end is rank `rank` of `ranks` (-1: a flow of one rank). CUDA:
  /// with at least device + ranks devices rank r opens device + r, else every rank `device`.
  int rank = -1;
  int ranks = 1;
  /// CUDA, a sharded replay with one GPU per rank: the replay's NCCL communicators (rank
  /// `rank`'s is this back end's); null: the engine makes the collectives on the host.
  std::shared_ptr<nccl::Communicators> nccl;
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  /// "cuda" | "cpu"
  virtual const char* name() const = 0;
  virtual Capabilities caps() const = 0;
  /// Initialises the device; info() is valid afterwards. No device → ExitCode::Unavailable.
  virtual Status open() = 0;
  virtual const DeviceInfo& info() const = 0;
  /// The module formats load_modules() accepts (CUDA: cubin, fatbin, PTX; CPU: CUDA source).
  virtual std::vector<ModuleFormat> module_formats() const = 0;
  /// Loads every module; report_module is set to the file(s) loaded (", "-separated) and
  /// report_format to the first module's format.
  virtual Status load_modules(std::vector<ModuleAlternatives>& modules, std::string* report_module,
                              ModuleFormat* report_format) = 0;

  // Memory. Sizes were checked by the engine; alloc still fails cleanly (a Fault, never a
  // throw) when the device refuses. The engine names the buffer or file in the message.
  virtual Fault alloc(uint64_t bytes, DevicePtr* out) = 0;
  virtual void free(DevicePtr p) = 0;
  virtual Fault upload(DevicePtr dst, const void* src, uint64_t bytes) = 0;
  /// An upload between steps (a session's host copy, a collective's receive on the host):
  /// queued on the work queue after what is queued there, so the steps queued after it see the
  /// bytes; `src` may be reused as soon as it returns. Default: upload() (a back end whose
  /// queue runs in order on the host).
  virtual Fault upload_ordered(DevicePtr dst, const void* src, uint64_t bytes) { return upload(dst, src, bytes); }
  virtual Fault download(void* dst, DevicePtr src, uint64_t bytes) = 0;
  virtual Fault memset(DevicePtr dst, unsigned char value, uint64_t bytes) = 0;

  /// Before any allocation: resolves and checks every kernel and library call that will run
  /// (KernelLaunch::pointers and packed are still empty; LibraryCallArgs' a, b, c are 0).
  virtual Status prepare(const std::vector<KernelLaunch>& launches, const std::vector<LibraryCallArgs>& calls) = 0;
  /// After the allocations: the same launches and calls with their device addresses; the
  /// back end keeps copies (launch(i) and library_call(c) use them) and sets up what library
  /// calls need (CUDA: the cuBLAS handle and its workspace).
  virtual Status bind(const std::vector<KernelLaunch>& launches, const std::vector<LibraryCallArgs>& calls) = 0;

  // The run path: queued in order on the work queue.
  virtual Fault launch(size_t launch_index) = 0;
  virtual Fault library_call(size_t call_index) = 0;
  /// Everything queued has finished (or the first fault).
  virtual Fault synchronize() = 0;
  /// caps().device_collectives: queues collective `call` (a sharded flow's; `send`/`recv`
  /// the device addresses of its operands, 0 where this rank has none) in stream order. The
  /// engine has made sure every rank reached the same call. Default: none.
  virtual Fault collective(const PlanLibraryCall& call, DevicePtr send, DevicePtr recv) {
    (void)call, (void)send, (void)recv;
    Fault f;
    f.code = -1;
    f.api = "collective";
    f.text = std::string("the ") + name() + " back end makes no collectives itself";
    return f;
  }

  // Markers (caps().timing; the CPU back end may take host time stamps). make_markers(n)
  // replaces the pool; record(m) queues marker m; poll(m) says whether the work before it
  // has finished (Failed: *fault says why); elapsed_us between two finished markers.
  virtual Status make_markers(size_t n) = 0;
  virtual Fault record(size_t marker) = 0;
  virtual Poll poll(size_t marker, Fault* fault) = 0;
  virtual Expected<double> elapsed_us(size_t from, size_t to) = 0;

  /// caps().gate: the work queued after hold_queue() starts only after release_queue(), so
  /// a timed run is queued whole before its first kernel starts (kernel intervals are then
  /// device time, not the host's enqueue rate). Defaults: no gate.
  virtual Fault hold_queue() { return Fault::none(); }
  virtual void release_queue() {}
  /// Whether the gate of the last hold_queue() was opened by the back end itself, at its
  /// deadline, before release_queue(): the driver did not return from a launch while the gate
  /// was closed (a profiler such as ncu runs each launch before returning), so that run was
  /// not gated. Reading it clears it.
  virtual bool gate_opened_by_deadline() { return false; }

  /// The plan's host copies, for graphs that hold them (a copy node per copy, from host
  /// memory the back end keeps for as long as the graph can run). Eager runs upload them
  /// with upload(). Default: nothing to keep (a back end without graphs).
  virtual Status bind_host_copies(const std::vector<HostCopyArgs>&) { return Status::ok(); }

  /// caps().graphs / caps().dag: builds the device graph of `steps` (chain: a captured
  /// sequence, as TVM's CUDA graph executor; else one node per step, an edge per pred).
  /// Defaults: no graphs (the engine never calls them when caps() says so).
  virtual Status build_graph(const std::vector<GraphStep>&, bool) {
    return Error{fmt_no_graphs(), ExitCode::Unavailable};
  }
  /// Queues one run of the built graph.
  virtual Fault launch_graph() {
    Fault f;
    f.code = -1;
    f.api = "launch_graph";
    f.text = fmt_no_graphs();
    return f;
  }

  /// After a sticky fault or a hang: make no further device call, not even to release
  /// (process exit tears the context down).
  virtual void abandon() = 0;

 private:
  std::string fmt_no_graphs() const { return std::string("the ") + name() + " back end has no graphs"; }
};

/// The messages every back end's failures share (engine.cpp), so they read alike:
/// "<what> of kernel 3 (fused_add) failed: <text>" at label:/kernels/3 (what: fault.api when empty);
Error kernel_fault_error(const std::string& label, const PlanLaunch& l, const Fault& f, const std::string& what = "");
/// "<api> for library call 0 (tvm.contrib.cublas.matmul of node 4) failed: <text>" at label:/library_calls/0;
Error library_call_fault_error(const std::string& label, const PlanLibraryCall& c, const Fault& f);
/// "<library>: error: <api><detail> failed: <text>" (exit 70) for other calls.
Error fault_error(const std::string& library, const Fault& f, const std::string& detail = "",
                  ExitCode code = ExitCode::Software);

/// The CUDA driver back end (lib/replay/cuda/). Loads libcuda (and libcublas when
/// opt.library_calls); no driver → ExitCode::Unavailable.
Expected<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions& opt, std::ostream& log);
/// The devices the CUDA driver has (cuDeviceGetCount), for placing a sharded replay's ranks
/// before any back end opens. No driver → ExitCode::Unavailable.
Expected<int> cuda_device_count(const BackendOptions& opt);
/// The CPU back end (lib/replay/cpu/); until it is built, ExitCode::Unavailable
/// ("the CPU back end is not built into this kdflow").
Expected<std::unique_ptr<Backend>> make_cpu_backend(const BackendOptions& opt, std::ostream& log);

}  // namespace kdflow::replay_backend
