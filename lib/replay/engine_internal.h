// engine_internal.h — the replay engine's class (engine.cpp), shared by the files that hold
// its concerns, so that a reader finds each in its own file:
//   engine.cpp          replay(): options, the plan, the back end, the locate pass, the report
//   engine_internal.h   the Engine class: its state, run() (the order of the stages), faults
//   engine_device.cpp   the device's lifecycle: modules, prepare, memory check, allocation,
//                       binding, uploads, downloads, waits against the time limit
//   engine_runs.cpp     the sequence's runs: checked, warm-up and timed eager runs, graph and
//                       dag mode, locating a fault
//   engine_checks.cpp   what a run is checked against: guards, dumps, node references, outputs
//   engine_slices.cpp   --kernel and --nodes: one kernel, or a slice of the sequence
//   locate.h            the locate pass's child process
// Internal to lib/replay.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "backend.h"
#include "collectives.h"
#include "kdflow/formats/npy.h"
#include "kdflow/replay/replay.h"

namespace kdflow::engine_detail {

using namespace replay_backend;

inline constexpr unsigned char kGuardByte = 0xCB;

/// Set once a back end was abandoned after a hang or a sticky fault (see replay_device_abandoned()).
extern std::atomic<bool> g_abandoned;

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

inline double minimum(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }

inline std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

inline bool writes(Access a) { return a == Access::Write || a == Access::ReadWrite || a == Access::Unknown; }

/// One step of a run of the sequence: a kernel (plan launch index) or a library call.
struct Step {
  bool call = false;
  size_t index = 0;
};

class Engine {
 public:
  Engine(Backend& b, const Dataflow& df, const ReplayOptions& opt, ReplayReport& rep, std::ostream& log)
      : b_(b), df_(df), opt_(opt), rep_(rep), plan_(rep.plan), log_(log) {}

  ~Engine() {
    if (abandoned_) return;
    for (DevicePtr p : bases_)
      if (p) b_.free(p);
  }

  Status run() {
    if (Status s = b_.open(); !s) return s;
    const DeviceInfo& info = b_.info();
    rep_.device = info.name;
    rep_.driver = info.library;
    if (Status s = load_modules(); !s) return s;
    if (Status s = prepare(); !s) return s;
    if (Status s = check_memory(); !s) return s;
    if (Status s = allocate(); !s) return s;
    if (Status s = bind(); !s) return s;
    if (opt_.kernel >= 0) return single_kernel();
    if (opt_.slice_first >= 0) return run_slice();
    for (const PlanUpload& u : plan_.uploads)
      if (Status s = upload(u); !s) return s;
    if (Status s = settle(); !s) return s;
    if (Status s = eager(); !s) return s;
    if (rep_.guard || opt_.locate) return outputs();
    if (opt_.mode != ReplayMode::Eager)
      if (Status s = graph_mode(); !s) return s;
    return outputs();
  }

  /// A sharded replay (engine_ranks.cpp): this engine is rank `rank`; its collectives are made
  /// with the other ranks' engines through `hub`.
  void set_rank(CollectiveHub* hub, int rank) {
    hub_ = hub;
    rank_ = rank;
  }

  /// The run in which a step failed outside a synchronised (checked) run; -1 when none.
  int failed_run() const { return failed_run_; }
  /// Set by a locate run: the launch that failed and in which run.
  int located_launch() const { return located_launch_; }
  int located_call() const { return located_call_; }
  int located_run() const { return located_run_; }
  const Fault& located_fault() const { return located_fault_; }

 private:
  std::string label() const { return plan_.label; }
  std::string library() const { return b_.info().library.empty() ? label() : b_.info().library; }

  /// After a sticky fault or a hang the back end must not be called again.
  void abandon() {
    abandoned_ = true;
    g_abandoned = true;
    b_.abandon();
  }

  Error fail(const Fault& f, const std::string& detail = "") {
    if (f.sticky) abandon();
    return fault_error(library(), f, detail);
  }
  Error kernel_fail(size_t i, const Fault& f, const std::string& what) {
    if (f.sticky) abandon();
    return kernel_fault_error(label(), plan_.launches[i], f, what);
  }
  Error step_fail(const Step& s, const Fault& f, const std::string& what) {
    if (!s.call) return kernel_fail(s.index, f, what);
    if (f.sticky) abandon();
    const PlanLibraryCall& p = plan_.library_calls[s.index];
    return json_error(label(), fmt::format("/library_calls/{}", p.call),
                      fmt::format("{} of library call {} ({} of node {}) failed: {}", what, p.call, p.name, p.node,
                                  f.text),
                      ExitCode::Software);
  }

  /// Waits for marker `m` by polling, at most the time limit for this wait. On a timeout,
  /// `hung_what` names what is being waited on; the back end is then abandoned.
  Status wait(size_t m, const std::function<Error()>& hung_what, Fault* result);

  Error hung_kernel(size_t i) const;
  Error hung_step(const Step& s) const;

  /// Uploads and memsets may land after they return (the NULL stream, for CUDA): let them
  /// land before anything is launched.
  Status settle();

  /// The module files, grouped into device modules: files named alike but for the extension
  /// (device.cubin, device.ptx) are one module's alternatives; files named otherwise
  /// (device_0.cubin, device_1.cubin: a Relax build) are separate modules, all loaded.
  Status load_modules();

  /// Every kernel that will run resolved in the modules and checked against the device.
  Status prepare();

  /// Hostile flows stop before allocation: the allocations must fit the memory the back end
  /// has (the device's total memory; the host's available memory on the CPU).
  Status check_memory();

  static bool checked_add(uint64_t a, uint64_t b, uint64_t* out) {
    if (a > UINT64_MAX - b) return false;
    *out = a + b;
    return true;
  }

  Status allocate();

  /// Arguments resolved against the allocations, handed to the back end with the library calls.
  Status bind();

  Status upload(const PlanUpload& u);

  Status download(DevicePtr src, uint64_t bytes, std::string* out);

  Fault queue(const Step& s) {
    if (s.call && plan_.library_calls[s.index].collective) return collective(s.index);
    return s.call ? b_.library_call(s.index) : b_.launch(s.index);
  }

  /// A collective (plan library call `i`): every step before it finished, what this rank sends
  /// read back, exchanged with the other ranks, what it receives written (collectives.h).
  Fault collective(size_t i);

  /// Checks every redzone; on the first changed byte records the violation (kernel i, or
  /// -1 when unknown) and returns true.
  Expected<bool> guard_fired(int launch_index);

  Status ensure_dir(const std::string& dir);

  /// The buffers launch i may write, as arg indices.
  std::vector<size_t> written_args(size_t i) const;

  Expected<NpyArray> read_buffer(int buffer);

  Status dump(size_t i);

  /// Launch i's written argument j against its dump in `dir` (an earlier --dump-dir of the same
  /// model, from either back end); a missing dump is a problem of the check, not an error.
  Expected<OutputCheck> check_against_dump(size_t i, size_t j, const std::string& dir);

  /// --compare-dumps: launch i's written buffers against the reference dumps, right after it
  /// ran in the checked run; the first launch with a buffer that differs is recorded.
  Status compare_with_dumps(size_t i);

  std::map<int, std::vector<size_t>> checks_by_node_;  ///< node references: node -> its checks

  int step_node(const Step& st) const;

  /// Node references: right after `node`'s last step in the checked run, every buffer of it that
  /// TVM's result is listed for is compared with that result; the first node that differs is
  /// recorded. The checks are grouped by node once, on first use.
  Status compare_node(int node);

  /// Records the failure of a run that was not synchronised step by step: replay() then
  /// re-runs synchronised (in a child process) to name the kernel.
  Error unlocated(int run, const Fault& f, const std::string& what);

  /// Which step of an eager run is still running: the first whose end marker is not done.
  Step first_unfinished();

  /// Queues one run of the sequence with a marker before it and after every step. Checked:
  /// waits after each step (dumps, guard). Returns the fault and the step it came from.
  Status queue_run(int run, bool checked, bool gated);
  /// The host copies due before step `s`: waits for every step before it, then uploads them.
  Status host_copies_before(int run, size_t s);

  /// The eager runs: run 0 checked (synchronised after each step), then warmup, then timed
  /// runs queued back to back. With opt_.locate every run is synchronised.
  Status eager();

  Status elapsed(size_t from, size_t to, double* us);

  /// A failure in a synchronised run names its step; in a locate run it is recorded.
  Status locate_or_fail(int run, const Step& s, const Fault& f, const std::string& what);

  /// The steps of the graph: a chain for --mode graph, the reduced dependencies for dag
  /// (library calls also ordered among themselves: they share the back end's workspace).
  std::vector<GraphStep> graph_steps(bool chain);

  /// dag statistics on the steps (kernels and library calls, each weighted by its median
  /// eager time): the longest chain of steps and the critical path.
  void dag_stats(const std::vector<GraphStep>& steps);

  /// Graph and dag modes, after the eager runs: build the graph, then `warmup` untimed and
  /// `repeat` timed launches of it (the first one checked by the guard).
  Status graph_mode();

  Status outputs();

  /// --kernel: restore the state of every allocation the kernel touches as it was just
  /// before it ran in the full run that wrote `dump_dir`, run it alone, read back what it
  /// writes and compare with what it wrote in that run.
  Status single_kernel();

  /// --nodes: load the slice's live-ins (params/inputs from their files, the rest from the
  /// dumps of a full run), run its kernels, compare every buffer they write with the dump.
  Status run_slice();

  CollectiveHub* hub_ = nullptr;
  int rank_ = 0;
  Backend& b_;
  const Dataflow& df_;
  const ReplayOptions& opt_;
  ReplayReport& rep_;
  const ReplayPlan& plan_;
  std::ostream& log_;

  bool abandoned_ = false;
  int failed_run_ = -1;
  int located_launch_ = -1, located_call_ = -1, located_run_ = -1;
  Fault located_fault_;
  size_t extra_edges_ = 0;
  std::vector<DevicePtr> bases_;
  std::vector<Step> seq_;
  std::vector<std::vector<size_t>> copies_before_;  ///< per step (and one past the last): plan host copies
};

}  // namespace kdflow::engine_detail
