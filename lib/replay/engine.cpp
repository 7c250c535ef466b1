// engine.cpp — the shared replay engine: runs a replay plan on a back end (backend.h; the
// CUDA driver in cuda/, the CPU in cpu/). What every back end shares lives here: the order
// of work, uploads of params and inputs, the checked run and its dumps, --kernel, --nodes
// slices, guards, outputs, timing and the report. What is a back end's own (contexts,
// streams, events, modules, graphs, cuBLAS handles) lives behind the interface.
//
// Every mode first runs the sequence eagerly: one checked run (the back end synchronised
// after every kernel and every library call, so a fault names its kernel or call, redzones
// checked, written buffers dumped; never timed), `warmup` untimed runs, then `repeat` timed
// runs in which every step (kernel or library call) is queued back to back with a marker
// (a CUDA event) after each and one wait at the end: step s's time is marker s → s + 1.
// Where the back end has a gate (caps().gate), each timed run is queued whole behind it and
// then released, so a step's interval is device time rather than the host's enqueue rate;
// the end-to-end eager time comes from ungated runs (what a host loop achieves), so the
// difference between the two is the launch overhead. Graph mode then has the back end build
// the sequence as one graph (a chain, as TVM's CUDA graph executor runs it); dag mode one
// node per step with an edge per transitively reduced dependency (launch_graph.h), library
// calls kept in sequence (they share one workspace). Both time whole-graph launches.
//
// Waits poll markers against the time limit, which bounds each wait (not the whole replay),
// so a hung kernel is named instead of hanging replay. A fault outside a checked run is
// located by re-running synchronised in a child process forked before the back end was
// opened, so a sticky fault (cuda.h: "the process must be terminated and relaunched") never
// poisons the re-run; the original message survives if the re-run cannot name the kernel.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <thread>

#include "backend.h"
#include "kdflow/analysis/launch_graph.h"
#include "kdflow/replay/replay.h"
#include "kdflow/support/io.h"

namespace kdflow {

namespace replay_backend {

Error kernel_fault_error(const std::string& label, const PlanLaunch& l, const Fault& f, const std::string& what) {
  return json_error(label, fmt::format("/kernels/{}", l.kernel),
                    fmt::format("{} of kernel {} ({}) failed: {}", what.empty() ? f.api : what, l.kernel, l.name,
                                f.text),
                    ExitCode::Software);
}

Error library_call_fault_error(const std::string& label, const PlanLibraryCall& p, const Fault& f) {
  return json_error(label, fmt::format("/library_calls/{}", p.call),
                    fmt::format("{} for library call {} ({} of node {}) failed: {}", f.api, p.call, p.name, p.node,
                                f.text),
                    ExitCode::Software);
}

Error fault_error(const std::string& library, const Fault& f, const std::string& detail, ExitCode code) {
  return file_error(library, fmt::format("{}{} failed: {}", f.api, detail, f.text), code);
}

}  // namespace replay_backend

namespace {

using namespace replay_backend;

constexpr unsigned char kGuardByte = 0xCB;

/// Set once a back end was abandoned after a hang or a sticky fault (see replay_device_abandoned()).
std::atomic<bool> g_abandoned{false};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double minimum(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool writes(Access a) { return a == Access::Write || a == Access::ReadWrite || a == Access::Unknown; }

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
  Status wait(size_t m, const std::function<Error()>& hung_what, Fault* result) {
    *result = Fault::none();
    auto start = std::chrono::steady_clock::now();
    for (int spins = 0;; ++spins) {
      Fault f;
      Poll p = b_.poll(m, &f);
      if (p == Poll::Done) return Status::ok();
      if (p == Poll::Failed) {
        *result = f;
        return Status::ok();
      }
      if (opt_.time_limit_s > 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > opt_.time_limit_s) {
        abandon();
        return hung_what();
      }
      if (spins > 100) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  Error hung_kernel(size_t i) const {
    const PlanLaunch& l = plan_.launches[i];
    return json_error(label(), fmt::format("/kernels/{}", l.kernel),
                      fmt::format("kernel {} ({}) did not finish within {:g} s (--time-limit); it may be hung "
                                  "(wrong scalars?); nothing was written",
                                  l.kernel, l.name, opt_.time_limit_s),
                      ExitCode::DataError);
  }
  Error hung_step(const Step& s) const {
    if (!s.call) return hung_kernel(s.index);
    const PlanLibraryCall& p = plan_.library_calls[s.index];
    return json_error(label(), fmt::format("/library_calls/{}", p.call),
                      fmt::format("library call {} ({} of node {}) did not finish within {:g} s (--time-limit); it "
                                  "may be hung; nothing was written",
                                  p.call, p.name, p.node, opt_.time_limit_s),
                      ExitCode::DataError);
  }

  /// Uploads and memsets may land after they return (the NULL stream, for CUDA): let them
  /// land before anything is launched.
  Status settle() {
    if (Fault f = b_.synchronize(); !f.ok()) return fail(f, " (after the uploads)");
    return Status::ok();
  }

  /// The module files, grouped into device modules: files named alike but for the extension
  /// (device.cubin, device.ptx) are one module's alternatives; files named otherwise
  /// (device_0.cubin, device_1.cubin: a Relax build) are separate modules, all loaded.
  Status load_modules() {
    std::vector<std::string> stems;
    std::vector<ModuleAlternatives> groups;
    std::vector<ModuleFormat> accepted = b_.module_formats();
    for (const std::string& path : opt_.modules) {
      Expected<std::string> bytes = read_file(path);
      if (!bytes) return bytes.error();
      ModuleFormat f = detect_module_format(*bytes);
      if (std::find(accepted.begin(), accepted.end(), f) == accepted.end()) {
        if (std::find(accepted.begin(), accepted.end(), ModuleFormat::CudaSource) != accepted.end())
          return file_error(path, fmt::format("not CUDA source (the {} back end compiles device.cu)", b_.name()));
        return file_error(path, "not a cubin (ELF), fatbin or PTX file");
      }
      std::string stem = std::filesystem::path(path).replace_extension().string();
      size_t g = std::find(stems.begin(), stems.end(), stem) - stems.begin();
      if (g == stems.size()) {
        stems.push_back(stem);
        groups.emplace_back();
      }
      groups[g].files.push_back({path, bytes.take(), f});
    }
    if (groups.empty())
      return file_error(label(), "no device module: pass --module FILE (a cubin, fatbin or PTX)", ExitCode::NoInput);
    return b_.load_modules(groups, &rep_.module, &rep_.module_format);
  }

  /// Every kernel that will run resolved in the modules and checked against the device.
  Status prepare() {
    std::vector<KernelLaunch> ls;
    for (size_t i = 0; i < plan_.launches.size(); ++i) {
      if (opt_.kernel >= 0 && plan_.launches[i].kernel != opt_.kernel) continue;
      KernelLaunch k;
      k.index = i;
      k.launch = &plan_.launches[i];
      ls.push_back(std::move(k));
    }
    std::vector<LibraryCallArgs> calls;
    for (size_t c = 0; c < plan_.library_calls.size(); ++c) {
      LibraryCallArgs a;
      a.index = c;
      a.call = &plan_.library_calls[c];
      calls.push_back(a);
    }
    return b_.prepare(ls, calls);
  }

  /// Hostile flows stop before allocation: the allocations must fit the memory the back end
  /// has (the device's total memory; the host's available memory on the CPU).
  Status check_memory() {
    uint64_t have = b_.info().memory_bytes;
    if (have == 0) return Status::ok();
    uint64_t guard = opt_.guard ? opt_.guard_bytes : 0, total = 0;
    for (const PlanAllocation& a : plan_.allocations) {
      uint64_t bytes = (a.bytes ? a.bytes : 4) + guard;
      if (bytes > have || !checked_add(total, bytes, &total) || total > have) {
        int buffer = a.buffers.empty() ? 0 : a.buffers[0];
        return json_error(label(), fmt::format("/buffers/{}/bytes", buffer),
                          bytes > have
                              ? fmt::format("allocation {} (buffer {} '{}') needs {} bytes; the {} back end has {} "
                                            "bytes ({}); nothing was allocated",
                                            a.id, buffer, df_.buffers[buffer].name, bytes, b_.name(), have,
                                            b_.info().name)
                              : fmt::format("the model's allocations need more than the {} bytes the {} back end has "
                                            "({}), passed at allocation {} (buffer {} '{}'); nothing was allocated",
                                            have, b_.name(), b_.info().name, a.id, buffer, df_.buffers[buffer].name),
                          ExitCode::DataError);
      }
    }
    return Status::ok();
  }

  static bool checked_add(uint64_t a, uint64_t b, uint64_t* out) {
    if (a > UINT64_MAX - b) return false;
    *out = a + b;
    return true;
  }

  Status allocate() {
    bases_.assign(plan_.allocations.size(), 0);
    uint64_t guard = opt_.guard ? opt_.guard_bytes : 0;
    std::set<int> touched;  // --nodes allocates only what the slice touches
    if (opt_.slice_first >= 0)
      for (const PlanLaunch& l : plan_.launches)
        if (l.kernel >= opt_.slice_first && l.kernel <= opt_.slice_last)
          for (const PlanArg& a : l.args)
            if (a.kind == PlanArg::Kind::Pointer) touched.insert(a.allocation);
    for (const PlanAllocation& a : plan_.allocations) {
      if (opt_.slice_first >= 0 && !touched.count(a.id)) continue;
      uint64_t bytes = a.bytes ? a.bytes : 4;
      DevicePtr p = 0;
      if (Fault f = b_.alloc(bytes + guard, &p); !f.ok())
        return json_error(label(), fmt::format("/buffers/{}", a.buffers.empty() ? 0 : a.buffers[0]),
                          fmt::format("{} of {} bytes for allocation {} failed: {}", f.api, bytes + guard, a.id,
                                      f.text),
                          ExitCode::Software);
      bases_[a.id] = p;
      if (guard) {
        if (Fault f = b_.memset(p + a.bytes, kGuardByte, guard); !f.ok()) return fail(f, " (redzone)");
      }
    }
    return Status::ok();
  }

  /// Arguments resolved against the allocations, handed to the back end with the library calls.
  Status bind() {
    std::vector<uint64_t> bases(bases_.begin(), bases_.end());
    std::vector<KernelLaunch> ls;
    for (size_t i = 0; i < plan_.launches.size(); ++i) {
      if (opt_.kernel >= 0 && plan_.launches[i].kernel != opt_.kernel) continue;
      const PlanLaunch& l = plan_.launches[i];
      KernelLaunch k;
      k.index = i;
      k.launch = &l;
      for (const PlanArg& a : l.args)
        k.pointers.push_back(a.kind == PlanArg::Kind::Pointer && a.allocation >= 0 ? bases_[a.allocation] + a.offset
                                                                                   : 0);
      k.packed = pack_arguments(l, bases);
      ls.push_back(std::move(k));
    }
    std::vector<LibraryCallArgs> calls;
    for (size_t c = 0; c < plan_.library_calls.size(); ++c) {
      const PlanLibraryCall& p = plan_.library_calls[c];
      LibraryCallArgs a;
      a.index = c;
      a.call = &p;
      auto dev = [&](const PlanOperand& o) { return o.allocation >= 0 ? bases_[o.allocation] + o.offset : 0; };
      a.a = dev(p.a);
      a.b = dev(p.b);
      a.c = dev(p.c);
      calls.push_back(a);
    }
    if (!calls.empty()) {
      if (!b_.caps().library_calls)
        return file_error(label(), fmt::format("the {} back end cannot run library call {} ('{}')", b_.name(),
                                               plan_.library_calls[0].call, plan_.library_calls[0].name),
                          ExitCode::Unavailable);
      rep_.cublas = b_.info().library_calls;
    }
    if (Status s = b_.bind(ls, calls); !s) return s;
    // The sequence of one run: library calls before the first kernel, then each kernel and
    // the calls that follow it.
    std::vector<std::vector<size_t>> after(df_.kernels.size() + 1);
    for (size_t c = 0; c < plan_.library_calls.size(); ++c)
      after[static_cast<size_t>(plan_.library_calls[c].after_kernel + 1)].push_back(c);
    for (size_t c : after[0]) seq_.push_back({true, c});
    for (size_t i = 0; i < plan_.launches.size(); ++i) {
      seq_.push_back({false, i});
      for (size_t c : after[static_cast<size_t>(plan_.launches[i].kernel + 1)]) seq_.push_back({true, c});
    }
    return Status::ok();
  }

  Status upload(const PlanUpload& u) {
    if (Fault f = b_.upload(bases_[u.allocation], u.data.data(), u.data.size()); !f.ok())
      return fail(f, fmt::format(" of {} ({} bytes)", u.source, u.data.size()));
    return Status::ok();
  }

  Status download(DevicePtr src, uint64_t bytes, std::string* out) {
    out->assign(bytes, '\0');
    if (bytes == 0) return Status::ok();
    if (Fault f = b_.download(out->data(), src, bytes); !f.ok()) return fail(f, fmt::format(" ({} bytes)", bytes));
    return Status::ok();
  }

  Fault queue(const Step& s) { return s.call ? b_.library_call(s.index) : b_.launch(s.index); }

  /// Checks every redzone; on the first changed byte records the violation (kernel i, or
  /// -1 when unknown) and returns true.
  Expected<bool> guard_fired(int launch_index) {
    if (!opt_.guard) return false;
    std::string zone;
    for (const PlanAllocation& a : plan_.allocations) {
      if (!bases_[a.id]) continue;
      if (Status s = download(bases_[a.id] + a.bytes, opt_.guard_bytes, &zone); !s) return s.error();
      size_t k = 0;
      while (k < zone.size() && static_cast<unsigned char>(zone[k]) == kGuardByte) ++k;
      if (k == zone.size()) continue;
      GuardViolation v;
      v.allocation = a.id;
      v.first_byte = k;
      std::string what = a.storage_id >= 0 ? fmt::format("storage {}", a.storage_id)
                                           : fmt::format("workspace '{}'", df_.buffers[a.workspace].name);
      if (launch_index >= 0) {
        const PlanLaunch& l = plan_.launches[launch_index];
        v.kernel = l.kernel;
        std::string arg;
        for (size_t j = 0; j < l.args.size(); ++j)
          if (l.args[j].kind == PlanArg::Kind::Pointer && l.args[j].allocation == a.id) {
            arg = fmt::format(" (its argument {}, buffer {} '{}')", j, l.args[j].buffer,
                              df_.buffers[l.args[j].buffer].name);
            break;
          }
        v.message = json_error(label(), fmt::format("/kernels/{}", l.kernel),
                               fmt::format("guard: kernel {} ({}) wrote past the end of allocation {}, {} of {} bytes{}: "
                                           "byte {} after its end changed",
                                           l.kernel, l.name, a.id, what, a.bytes, arg, k))
                        .message;
      } else {
        v.message = file_error(label(), fmt::format("guard: a kernel of the graph wrote past the end of allocation {}, "
                                                    "{} of {} bytes: byte {} after its end changed (replay with "
                                                    "--mode eager --guard to find which)",
                                                    a.id, what, a.bytes, k))
                        .message;
      }
      rep_.guard = v;
      return true;
    }
    return false;
  }

  Status ensure_dir(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !is_directory(dir)) return file_error(dir, "cannot create directory: " + ec.message(), ExitCode::CantCreate);
    return Status::ok();
  }

  /// The buffers launch i may write, as arg indices.
  std::vector<size_t> written_args(size_t i) const {
    std::vector<size_t> out;
    const PlanLaunch& l = plan_.launches[i];
    for (size_t j = 0; j < l.args.size(); ++j)
      if (l.args[j].kind == PlanArg::Kind::Pointer && writes(l.args[j].access)) out.push_back(j);
    return out;
  }

  Expected<NpyArray> read_buffer(int buffer) {
    const Buffer& b = df_.buffers[buffer];
    std::string data;
    if (Status s = download(bases_[plan_.buffer_allocation[buffer]], buffer_array_bytes(b), &data); !s)
      return s.error();
    return buffer_array(b, std::move(data));
  }

  Status dump(size_t i) {
    const PlanLaunch& l = plan_.launches[i];
    for (size_t j : written_args(i)) {
      Expected<NpyArray> a = read_buffer(l.args[j].buffer);
      if (!a) return a.error();
      std::string name = dump_file_name(df_.kernels[l.kernel], j);
      if (Status s = write_npy(opt_.dump_dir + "/" + name, *a); !s) return s;
      rep_.dumped.push_back(name);
    }
    return Status::ok();
  }

  /// Launch i's written argument j against its dump in `dir` (an earlier --dump-dir of the same
  /// model, from either back end); a missing dump is a problem of the check, not an error.
  Expected<OutputCheck> check_against_dump(size_t i, size_t j, const std::string& dir) {
    const PlanLaunch& l = plan_.launches[i];
    Expected<NpyArray> a = read_buffer(l.args[j].buffer);
    if (!a) return a.error();
    std::string name = dump_file_name(df_.kernels[l.kernel], j);
    std::string file = dir + "/" + name;
    OutputCheck c;
    if (file_exists(file)) {
      Expected<NpyArray> want = read_npy(file);
      if (!want) return want.error();
      c = compare_arrays(*a, *want, opt_.rtol, opt_.atol);
    } else {
      c.problem = "no dump of it in " + dir;
    }
    c.buffer = l.args[j].buffer;
    c.name = name;
    c.expect_file = file;
    return c;
  }

  /// --compare-dumps: launch i's written buffers against the reference dumps, right after it
  /// ran in the checked run; the first launch with a buffer that differs is recorded.
  Status compare_with_dumps(size_t i) {
    const PlanLaunch& l = plan_.launches[i];
    bool differs = false;
    for (size_t j : written_args(i)) {
      Expected<OutputCheck> c = check_against_dump(i, j, opt_.compare_dir);
      if (!c) return c.error();
      if (c->pass) continue;
      if (!differs && !rep_.first_difference) {
        FirstDifference d;
        d.kernel = l.kernel;
        d.node = df_.kernels[l.kernel].node;
        d.arg = static_cast<int>(j);
        d.check = *c;
        rep_.first_difference = d;
      }
      differs = true;
    }
    ++rep_.compared_kernels;
    if (differs) ++rep_.differing_kernels;
    return Status::ok();
  }

  std::map<int, std::vector<size_t>> checks_by_node_;  ///< node references: node -> its checks

  int step_node(const Step& st) const {
    if (st.call) return plan_.library_calls[st.index].node;
    return df_.kernels[plan_.launches[st.index].kernel].node;
  }

  /// Node references: right after `node`'s last step in the checked run, every buffer of it that
  /// TVM's result is listed for is compared with that result; the first node that differs is
  /// recorded. The checks are grouped by node once, on first use.
  Status compare_node(int node) {
    if (checks_by_node_.empty())
      for (size_t i = 0; i < opt_.node_checks.size(); ++i) checks_by_node_[opt_.node_checks[i].node].push_back(i);
    auto it = checks_by_node_.find(node);
    if (it == checks_by_node_.end()) return Status::ok();
    bool differs = false;
    for (size_t i : it->second) {
      const NodeReferenceCheck& c = opt_.node_checks[i];
      Expected<NpyArray> a = read_buffer(c.buffer);
      if (!a) return a.error();
      Expected<NpyArray> want = read_npy(c.file);
      if (!want) return want.error();
      OutputCheck oc = compare_arrays(*a, *want, opt_.rtol, opt_.atol);
      oc.buffer = c.buffer;
      oc.expect_file = c.file;
      ++rep_.node_tensors_compared;
      if (oc.pass && oc.uninformative) ++rep_.node_tensors_uninformative;
      if (oc.pass) continue;
      ++rep_.node_tensors_differing;
      if (!differs && !rep_.node_difference) rep_.node_difference = NodeDifference{node, c.label, oc};
      differs = true;
    }
    ++rep_.nodes_compared;
    return Status::ok();
  }

  /// Records the failure of a run that was not synchronised step by step: replay() then
  /// re-runs synchronised (in a child process) to name the kernel.
  Error unlocated(int run, const Fault& f, const std::string& what) {
    failed_run_ = run;
    if (f.sticky) abandon();
    return file_error(label(), fmt::format("{} failed in run {} of the sequence: {}", what, run, f.text),
                      ExitCode::Software);
  }

  /// Which step of an eager run is still running: the first whose end marker is not done.
  Step first_unfinished() {
    for (size_t s = 0; s < seq_.size(); ++s) {
      Fault f;
      if (b_.poll(s + 1, &f) == Poll::NotReady) return seq_[s];
    }
    return seq_.empty() ? Step{} : seq_.back();
  }

  /// Queues one run of the sequence with a marker before it and after every step. Checked:
  /// waits after each step (dumps, guard). Returns the fault and the step it came from.
  Status queue_run(int run, bool checked, bool gated) {
    if (gated)
      if (Fault f = b_.hold_queue(); !f.ok()) return checked ? fail(f) : unlocated(run, f, f.api);
    if (Fault f = b_.record(0); !f.ok()) {
      if (gated) b_.release_queue();
      if (checked) return fail(f);
      return unlocated(run, f, f.api + " before the first kernel");
    }
    int depth = b_.caps().queue_depth;
    int queued = 0;
    for (size_t s = 0; s < seq_.size(); ++s) {
      const Step& st = seq_[s];
      Fault f = queue(st);
      if (f.ok()) f = b_.record(s + 1);
      if (!f.ok()) {
        if (gated) b_.release_queue();
        // The entry point that refused it (cuLaunchKernelEx for TVM 0.23+'s attributed launches).
        if (checked)
          return locate_or_fail(run, st, f,
                                st.call || f.api.rfind("cuLaunchKernel", 0) == 0 ? f.api : std::string("cuLaunchKernel"));
        return unlocated(run, f,
                         st.call ? fmt::format("queueing library call {} ({})", plan_.library_calls[st.index].call,
                                               plan_.library_calls[st.index].name)
                                 : fmt::format("queueing kernel {} ({})", plan_.launches[st.index].kernel,
                                               plan_.launches[st.index].name));
      }
      if (checked) {
        Fault done;
        if (Status w = wait(s + 1, [&] { return hung_step(st); }, &done); !w) return w;
        if (!done.ok()) return locate_or_fail(run, st, done, "running");
        if (!opt_.locate && !st.call) {
          Expected<bool> fired = guard_fired(static_cast<int>(st.index));
          if (!fired) return fired.error();
          if (*fired) return Status::ok();  // memory is corrupt: report and stop
          if (!opt_.dump_dir.empty())
            if (Status d = dump(st.index); !d) return d;
          if (!opt_.compare_dir.empty() && run == 0)
            if (Status d = compare_with_dumps(st.index); !d) return d;
        }
        if (!opt_.locate && run == 0 && !opt_.node_checks.empty() && !rep_.guard) {
          int node = step_node(st);
          if (s + 1 == seq_.size() || step_node(seq_[s + 1]) != node)
            if (Status d = compare_node(node); !d) return d;
        }
        continue;
      }
      // An unchecked run longer than the launch queue would block inside a launch, where no
      // wait (and no time limit) runs: wait for the first half before queueing more.
      if (depth > 0 && !gated && ++queued >= depth / 2) {
        queued = 0;
        Fault done;
        if (Status w = wait(s + 1, [&] { return hung_step(first_unfinished()); }, &done); !w) return w;
        if (!done.ok()) return unlocated(run, done, "a kernel");
      }
    }
    if (gated) b_.release_queue();
    Fault done;
    size_t last = seq_.size();
    if (Status w = wait(last, [&] { return hung_step(first_unfinished()); }, &done); !w) return w;
    if (!done.ok()) {
      if (checked) return fail(done);
      return unlocated(run, done, "a kernel");
    }
    return Status::ok();
  }

  /// The eager runs: run 0 checked (synchronised after each step), then warmup, then timed
  /// runs queued back to back. With opt_.locate every run is synchronised.
  Status eager() {
    size_t n = seq_.size();
    if (Status s = b_.make_markers(n + 1); !s) return s;
    if (!opt_.dump_dir.empty())
      if (Status s = ensure_dir(opt_.dump_dir); !s) return s;
    Capabilities caps = b_.caps();
    // Gate the timed runs when the back end can and a whole run fits in its launch queue (a
    // launch and a marker per step): else the host, blocked in a launch, could never release it.
    bool fits = caps.queue_depth <= 0 || 2 * n + 2 <= static_cast<size_t>(caps.queue_depth);
    bool gate = caps.gate && caps.asynchronous && !opt_.locate && fits;
    std::vector<std::vector<double>> samples(n);
    std::vector<double> runs_us, gated_runs_us;
    int runs = 1 + opt_.warmup + opt_.repeat;
    int forced_run = 0;  // the timed run (1-based) whose gate the back end opened at its deadline
    for (int run = 0; run < runs; ++run) {
      bool checked = run == 0 || opt_.locate;
      bool timed = run >= 1 + opt_.warmup && !opt_.locate;
      if (Status s = queue_run(run, checked, gate && timed); !s || rep_.guard) return s;
      if (gate && timed && b_.gate_opened_by_deadline()) {
        // Nothing was gated after all: every timed run counts as ungated, this one and the rest.
        forced_run = run - opt_.warmup;
        gate = false;
        runs_us.clear();
        gated_runs_us.clear();
      }
      double us = 0;
      if (!timed) {
        // Gated: the warm-up runs (ungated) give the end-to-end time a host loop achieves.
        if (gate && !checked) {
          if (Status s = elapsed(0, n, &us); !s) return s;
          runs_us.push_back(us);
        }
        continue;
      }
      if (Status s = elapsed(0, n, &us); !s) return s;
      (gate ? gated_runs_us : runs_us).push_back(us);
      for (size_t s = 0; s < n; ++s) {
        if (Status st = elapsed(s, s + 1, &us); !st) return st;
        samples[s].push_back(us);
      }
    }
    if (opt_.locate) return Status::ok();
    Expected<bool> fired = guard_fired(-1);
    if (!fired) return fired.error();
    rep_.times.clear();
    rep_.library_call_times.clear();
    rep_.kernel_sum_median_us = rep_.kernel_sum_min_us = 0;
    for (size_t s = 0; s < n; ++s) {
      KernelTime t;
      t.kernel = seq_[s].call ? plan_.library_calls[seq_[s].index].call : plan_.launches[seq_[s].index].kernel;
      t.samples = static_cast<int>(samples[s].size());
      t.median_us = median(samples[s]);
      t.min_us = minimum(samples[s]);
      if (seq_[s].call) {
        rep_.library_call_times.push_back(t);
        continue;
      }
      rep_.kernel_sum_median_us += t.median_us;
      rep_.kernel_sum_min_us += t.min_us;
      rep_.times.push_back(t);
    }
    rep_.eager_run_median_us = median(runs_us);
    rep_.eager_run_min_us = minimum(runs_us);
    rep_.gated = gate;
    rep_.gated_run_median_us = median(gated_runs_us);
    rep_.gated_run_min_us = minimum(gated_runs_us);
    rep_.total_median_us = rep_.kernel_sum_median_us;
    rep_.total_min_us = rep_.kernel_sum_min_us;
    std::string how = caps.timing ? "CUDA events" : fmt::format("host clock stamps ({} back end)", b_.name());
    if (gate)
      rep_.timing_method = fmt::format(
          "{} between steps queued back to back on one stream; each of the {} timed runs queued whole behind a gate "
          "(cuStreamWaitValue32 on a host-pinned word, released once the run is queued), so a step's time is its "
          "device time from the end of the step before it, not the host's enqueue rate; the eager end-to-end time "
          "is from the {} warm-up runs, not gated (launch overhead included){}; after 1 checked (synchronised, "
          "untimed) run",
          how, opt_.repeat, opt_.warmup, opt_.warmup ? "" : ": none, so it is not measured");
    else
      rep_.timing_method = fmt::format(
          "{} between launches queued back to back on one stream, one wait per run; {} timed runs after 1 "
          "checked (synchronised, untimed) and {} warm-up runs; not gated ({}), so a kernel's time includes any gap "
          "before it starts: on a GPU, short kernels measure the host's enqueue rate",
          how, opt_.repeat, opt_.warmup,
          forced_run ? fmt::format("the gate of timed run {} was opened by its deadline before the run was queued "
                                   "whole: the driver ran each launch before returning, as under a profiler such "
                                   "as ncu, so no run was gated",
                                   forced_run)
          : !caps.gate ? fmt::format("the {} back end has no gate", b_.name())
                     : fmt::format("a run of {} steps does not fit in the launch queue", n));
    if (!caps.asynchronous)
      rep_.timing_method += fmt::format("; the {} back end runs each step when it is queued, so the times are of "
                                        "the host, not of a GPU",
                                        b_.name());
    if (!plan_.library_calls.empty())
      rep_.timing_method += fmt::format("; the {} library calls are timed between their own markers (kernel times "
                                        "exclude them; the run's total includes them)",
                                        plan_.library_calls.size());
    return Status::ok();
  }

  Status elapsed(size_t from, size_t to, double* us) {
    Expected<double> e = b_.elapsed_us(from, to);
    if (!e) return e.error();
    *us = *e;
    return Status::ok();
  }

  /// A failure in a synchronised run names its step; in a locate run it is recorded.
  Status locate_or_fail(int run, const Step& s, const Fault& f, const std::string& what) {
    if (opt_.locate) {
      (s.call ? located_call_ : located_launch_) = static_cast<int>(s.index);
      located_run_ = run;
      located_fault_ = f;
    }
    return step_fail(s, f, what);
  }

  /// The steps of the graph: a chain for --mode graph, the reduced dependencies for dag
  /// (library calls also ordered among themselves: they share the back end's workspace).
  std::vector<GraphStep> graph_steps(bool chain) {
    std::vector<GraphStep> out;
    if (chain) {
      for (size_t s = 0; s < seq_.size(); ++s) {
        GraphStep g;
        g.library_call = seq_[s].call;
        g.index = seq_[s].index;
        if (s > 0) g.preds.push_back(s - 1);
        out.push_back(g);
      }
      return out;
    }
    StepGraph sg = step_graph(df_);
    std::map<int, size_t> launch_of, call_of;
    for (size_t i = 0; i < plan_.launches.size(); ++i) launch_of[plan_.launches[i].kernel] = i;
    for (size_t c = 0; c < plan_.library_calls.size(); ++c) call_of[plan_.library_calls[c].call] = c;
    // Reachability, to add only the call → call edges no path already gives.
    std::vector<std::set<size_t>> reach(sg.steps.size());
    int last_call = -1;
    extra_edges_ = 0;
    for (size_t s = 0; s < sg.steps.size(); ++s) {
      GraphStep g;
      g.library_call = sg.steps[s].library_call;
      g.index = g.library_call ? call_of.at(sg.steps[s].id) : launch_of.at(sg.steps[s].id);
      for (int u : sg.preds[s]) g.preds.push_back(static_cast<size_t>(u));
      if (g.library_call && last_call >= 0) {
        bool reached = false;
        for (size_t p : g.preds) reached |= p == static_cast<size_t>(last_call) || reach[p].count(last_call);
        if (!reached) {
          g.preds.push_back(static_cast<size_t>(last_call));
          ++extra_edges_;
        }
      }
      for (size_t p : g.preds) {
        reach[s].insert(p);
        reach[s].insert(reach[p].begin(), reach[p].end());
      }
      if (g.library_call) last_call = static_cast<int>(s);
      out.push_back(std::move(g));
    }
    return out;
  }

  /// dag statistics on the steps (kernels and library calls, each weighted by its median
  /// eager time): the longest chain of steps and the critical path.
  void dag_stats(const std::vector<GraphStep>& steps) {
    std::map<int, double> kernel_us, call_us;
    for (const KernelTime& t : rep_.times) kernel_us[t.kernel] = t.median_us;
    for (const KernelTime& t : rep_.library_call_times) call_us[t.kernel] = t.median_us;
    std::vector<double> dist(steps.size(), 0);
    std::vector<int> chain(steps.size(), 0);
    size_t edges = 0;
    double best = 0;
    int longest = 0;
    for (size_t s = 0; s < steps.size(); ++s) {
      double w = steps[s].library_call ? call_us[plan_.library_calls[steps[s].index].call]
                                       : kernel_us[plan_.launches[steps[s].index].kernel];
      double d = 0;
      int c = 0;
      for (size_t p : steps[s].preds) {
        d = std::max(d, dist[p]);
        c = std::max(c, chain[p]);
      }
      edges += steps[s].preds.size();
      dist[s] = d + w;
      chain[s] = c + 1;
      best = std::max(best, dist[s]);
      longest = std::max(longest, chain[s]);
    }
    rep_.dag_edges = edges;
    rep_.dag_longest_chain = longest;
    rep_.dag_critical_path_us = best;
  }

  /// Graph and dag modes, after the eager runs: build the graph, then `warmup` untimed and
  /// `repeat` timed launches of it (the first one checked by the guard).
  Status graph_mode() {
    Capabilities caps = b_.caps();
    bool dag = opt_.mode == ReplayMode::Dag;
    if ((dag && !caps.dag) || (!dag && !caps.graphs)) {
      log_ << fmt::format("replay: the {} back end has no {}; the eager runs above are what ran\n", b_.name(),
                          dag ? "concurrent dag" : "graph capture");
      rep_.timing_method += fmt::format("; --mode {}: the {} back end cannot, so only the eager runs were made",
                                        to_string(opt_.mode), b_.name());
      if (dag) dag_stats(graph_steps(false));
      return Status::ok();
    }
    std::vector<GraphStep> steps = graph_steps(!dag);
    if (Status s = b_.build_graph(steps, !dag); !s) return s;
    if (dag) {
      dag_stats(steps);
      StepGraph sg = step_graph(df_);
      log_ << fmt::format("replay: dag: {} launches, {} library calls, {} edges ({} dependent pairs before "
                          "reduction{}), longest chain {} steps\n",
                          plan_.launches.size(), plan_.library_calls.size(), rep_.dag_edges, sg.dependency_pairs,
                          extra_edges_ ? fmt::format("; {} added to keep library calls in sequence", extra_edges_)
                                       : std::string(),
                          rep_.dag_longest_chain);
    }
    if (Status s = b_.make_markers(2); !s) return s;
    std::vector<double> samples;
    auto hung = [&] {
      return file_error(label(), fmt::format("a graph launch did not finish within {:g} s (--time-limit); a kernel "
                                             "may be hung (replay with --mode eager to name it); nothing was written",
                                             opt_.time_limit_s),
                        ExitCode::DataError);
    };
    for (int run = 0; run < 1 + opt_.warmup + opt_.repeat; ++run) {
      Fault f = b_.record(0);
      if (f.ok()) f = b_.launch_graph();
      if (f.ok()) f = b_.record(1);
      Fault done;
      if (f.ok())
        if (Status s = wait(1, hung, &done); !s) return s;
      if (!f.ok() || !done.ok())
        return unlocated(1 + opt_.warmup + opt_.repeat + run, !f.ok() ? f : done,
                         fmt::format("{} launch", to_string(opt_.mode)));
      if (run == 0) {
        Expected<bool> fired = guard_fired(-1);
        if (!fired) return fired.error();
        if (*fired) return Status::ok();
        continue;
      }
      if (run < 1 + opt_.warmup) continue;
      double us = 0;
      if (Status s = elapsed(0, 1, &us); !s) return s;
      samples.push_back(us);
    }
    rep_.graph_run_median_us = median(samples);
    rep_.graph_run_min_us = minimum(samples);
    rep_.total_median_us = rep_.graph_run_median_us;
    rep_.total_min_us = rep_.graph_run_min_us;
    rep_.timing_method += fmt::format("; then the {} as one {} graph: {} timed launches after 1 checked and {} "
                                      "warm-up, each between two markers",
                                      dag ? "dependency DAG" : "captured sequence", b_.name(), opt_.repeat,
                                      opt_.warmup);
    return Status::ok();
  }

  Status outputs() {
    if (rep_.guard) return Status::ok();
    for (size_t i = 0; i < plan_.outputs.size(); ++i) {
      Expected<NpyArray> a = read_buffer(plan_.outputs[i]);
      if (!a) return a.error();
      rep_.results.push_back(a.take());
      rep_.result_names.push_back(fmt::format("output_{}.npy", i));
      rep_.result_buffers.push_back(plan_.outputs[i]);
    }
    return Status::ok();
  }

  /// --kernel: restore the state of every allocation the kernel touches as it was just
  /// before it ran in the full run that wrote `dump_dir`, run it alone, read back what it
  /// writes and compare with what it wrote in that run.
  Status single_kernel() {
    size_t k = 0;
    while (k < plan_.launches.size() && plan_.launches[k].kernel != opt_.kernel) ++k;
    const PlanLaunch& target = plan_.launches[k];
    std::set<int> touched;
    for (const PlanArg& a : target.args)
      if (a.kind == PlanArg::Kind::Pointer) touched.insert(a.allocation);
    for (int al : touched)
      if (Fault f = b_.memset(bases_[al], 0, plan_.allocations[al].bytes); !f.ok()) return fail(f);
    for (const PlanUpload& u : plan_.uploads)
      if (touched.count(u.allocation))
        if (Status s = upload(u); !s) return s;
    size_t restored = 0;
    for (size_t i = 0; i < k; ++i) {
      const PlanLaunch& l = plan_.launches[i];
      for (size_t j : written_args(i)) {
        const PlanArg& a = l.args[j];
        if (!touched.count(a.allocation)) continue;
        std::string file = opt_.dump_dir + "/" + dump_file_name(df_.kernels[l.kernel], j);
        Expected<NpyArray> arr = read_npy(file);
        if (!arr) {
          Error e = arr.error();
          if (e.code == ExitCode::NoInput)
            e.message += " (--kernel restores buffers from the dumps of a full run: replay with --dump-dir first)";
          return e;
        }
        NpyArray want = buffer_array(df_.buffers[a.buffer], "");
        if (arr->dtype != want.dtype || arr->shape != want.shape)
          return file_error(file, fmt::format("dump does not match buffer {} '{}' ({} {} expected)", a.buffer,
                                              df_.buffers[a.buffer].name, dtype_to_string(want.dtype),
                                              shape_text(want.shape)));
        if (Fault f = b_.upload(bases_[a.allocation], arr->data.data(), arr->data.size()); !f.ok())
          return fail(f, " of " + file);
        ++restored;
      }
    }
    log_ << fmt::format("replay: kernel {} ({}) alone: {} allocations restored from {} dumps and {} uploads\n",
                        target.kernel, target.name, touched.size(), restored,
                        std::count_if(plan_.uploads.begin(), plan_.uploads.end(),
                                      [&](const PlanUpload& u) { return touched.count(u.allocation) > 0; }));
    if (Status s = settle(); !s) return s;
    if (Status s = b_.make_markers(2); !s) return s;
    std::vector<double> samples;
    for (int run = 0; run < 1 + opt_.warmup + opt_.repeat; ++run) {
      Fault f = b_.record(0);
      if (f.ok()) f = b_.launch(k);
      if (f.ok()) f = b_.record(1);
      if (!f.ok()) return kernel_fail(k, f, fmt::format("queueing (run {})", run));
      Fault done;
      if (Status s = wait(1, [&] { return hung_kernel(k); }, &done); !s) return s;
      if (!done.ok()) return kernel_fail(k, done, fmt::format("running (run {})", run));
      if (run == 0) {
        Expected<bool> fired = guard_fired(static_cast<int>(k));
        if (!fired) return fired.error();
        if (*fired) return Status::ok();
        for (size_t j : written_args(k)) {
          Expected<NpyArray> a = read_buffer(target.args[j].buffer);
          if (!a) return a.error();
          rep_.results.push_back(a.take());
          rep_.result_names.push_back(dump_file_name(df_.kernels[target.kernel], j));
          rep_.result_buffers.push_back(target.args[j].buffer);
        }
        continue;
      }
      if (run <= opt_.warmup) continue;
      double us = 0;
      if (Status s = elapsed(0, 1, &us); !s) return s;
      samples.push_back(us);
    }
    KernelTime t;
    t.kernel = target.kernel;
    t.samples = static_cast<int>(samples.size());
    t.median_us = median(samples);
    t.min_us = minimum(samples);
    rep_.times.push_back(t);
    rep_.total_median_us = rep_.kernel_sum_median_us = t.median_us;
    rep_.total_min_us = rep_.kernel_sum_min_us = t.min_us;
    rep_.timing_method = fmt::format("{} around the kernel alone; {} timed runs after 1 checked and {} warm-up",
                                     b_.caps().timing ? "CUDA events" : "host clock stamps", opt_.repeat,
                                     opt_.warmup);
    return Status::ok();
  }

  /// --nodes: load the slice's live-ins (params/inputs from their files, the rest from the
  /// dumps of a full run), run its kernels, compare every buffer they write with the dump.
  Status run_slice() {
    LaunchSlice sl = slice_launches(df_, opt_.slice_first, opt_.slice_last);
    rep_.slice_kernels = sl.kernels;
    rep_.slice_live_ins = sl.live_ins;
    std::vector<size_t> launches;
    for (size_t i = 0; i < plan_.launches.size(); ++i)
      if (plan_.launches[i].kernel >= opt_.slice_first && plan_.launches[i].kernel <= opt_.slice_last)
        launches.push_back(i);
    size_t from_files = 0, from_dumps = 0, undefined = 0;
    for (size_t li = 0; li < sl.live_ins.size(); ++li) {
      int b = sl.live_ins[li], w = sl.live_in_writer[li];
      int al = plan_.buffer_allocation[b];
      if (w < 0) {
        bool found = false;
        for (const PlanUpload& u : plan_.uploads)
          if (u.buffer == b) {
            if (Status s = upload(u); !s) return s;
            found = true;
          }
        if (found) ++from_files;
        else ++undefined;  // never written before the slice: its contents are undefined in TVM too
        continue;
      }
      const Kernel& wk = df_.kernels[w];
      size_t j = 0;
      while (j < wk.args.size() && !(wk.args[j].kind == Arg::Kind::Buffer && wk.args[j].buffer == b &&
                                     wk.args[j].access != Access::Read))
        ++j;
      std::string file = opt_.inputs_from + "/" + dump_file_name(wk, j);
      if (!file_exists(file))
        return file_error(file, fmt::format("missing live-in: buffer {} '{}' is read by the slice before it writes "
                                            "it, and kernel {} ({}) wrote it last; replay the whole model with "
                                            "--dump-dir {} first",
                                            b, df_.buffers[b].name, w, wk.name, opt_.inputs_from),
                          ExitCode::NoInput);
      Expected<NpyArray> arr = read_npy(file);
      if (!arr) return arr.error();
      NpyArray want = buffer_array(df_.buffers[b], "");
      if (arr->dtype != want.dtype || arr->shape != want.shape)
        return file_error(file, fmt::format("dump does not match buffer {} '{}' ({} {} expected): a dump of another "
                                            "model?",
                                            b, df_.buffers[b].name, dtype_to_string(want.dtype),
                                            shape_text(want.shape)));
      if (Fault f = b_.upload(bases_[al], arr->data.data(), arr->data.size()); !f.ok()) return fail(f, " of " + file);
      ++from_dumps;
    }
    log_ << fmt::format("replay: kernels {}..{} ({} launches): {} live-in buffers, {} from params/inputs, {} from "
                        "dumps, {} never written before the slice\n",
                        opt_.slice_first, opt_.slice_last, launches.size(), sl.live_ins.size(), from_files, from_dumps,
                        undefined);
    if (Status s = settle(); !s) return s;
    size_t n = launches.size();
    if (Status s = b_.make_markers(n + 1); !s) return s;
    std::vector<std::vector<double>> samples(n);
    for (int run = 0; run < 1 + opt_.warmup + opt_.repeat; ++run) {
      bool checked = run == 0;
      if (Fault f = b_.record(0); !f.ok()) return fail(f);
      for (size_t x = 0; x < n; ++x) {
        size_t i = launches[x];
        Fault f = b_.launch(i);
        if (f.ok()) f = b_.record(x + 1);
        if (!f.ok()) return kernel_fail(i, f, fmt::format("queueing (run {})", run));
        if (!checked) continue;
        Fault done;
        if (Status s = wait(x + 1, [&] { return hung_kernel(i); }, &done); !s) return s;
        if (!done.ok()) return kernel_fail(i, done, "running");
        for (size_t j : written_args(i)) {
          Expected<OutputCheck> c = check_against_dump(i, j, opt_.inputs_from);
          if (!c) return c.error();
          c->output = static_cast<int>(rep_.checks.size());
          rep_.checks.push_back(std::move(*c));
        }
      }
      if (!checked) {
        Fault done;
        if (Status s = wait(n, [&] { return hung_kernel(launches[n - 1]); }, &done); !s) return s;
        if (!done.ok()) return fail(done, fmt::format(" (run {} of the slice)", run));
      }
      if (run < 1 + opt_.warmup) continue;
      for (size_t x = 0; x < n; ++x) {
        double us = 0;
        if (Status s = elapsed(x, x + 1, &us); !s) return s;
        samples[x].push_back(us);
      }
    }
    for (size_t x = 0; x < n; ++x) {
      KernelTime t;
      t.kernel = plan_.launches[launches[x]].kernel;
      t.samples = static_cast<int>(samples[x].size());
      t.median_us = median(samples[x]);
      t.min_us = minimum(samples[x]);
      rep_.kernel_sum_median_us += t.median_us;
      rep_.kernel_sum_min_us += t.min_us;
      rep_.times.push_back(t);
    }
    rep_.total_median_us = rep_.kernel_sum_median_us;
    rep_.total_min_us = rep_.kernel_sum_min_us;
    rep_.timing_method = fmt::format("the slice's launches queued back to back, {} between them; {} timed "
                                     "runs after 1 checked and {} warm-up",
                                     b_.caps().timing ? "CUDA events" : "host clock stamps", opt_.repeat, opt_.warmup);
    return Status::ok();
  }

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
};

/// The locate pass's process: forked before the parent's back end is opened (so it never
/// inherits a device context, which a forked child may not use), it waits for the parent's
/// word. -1 or a closed pipe: nothing to locate, exit. Otherwise it re-runs the model in its
/// own back end, synchronised after every step, and writes what it found back.
class LocateHelper {
 public:
  /// What the child found (read by the parent).
  struct Found {
    bool answered = false;       ///< the child wrote an answer
    int launch = -1, call = -1, run = -1;
    std::string fault;           ///< the located fault's text
    std::string error;           ///< the re-run failed otherwise: its message
    int error_code = 0;
    std::string log;             ///< the child's progress lines
    std::string how_it_ended;    ///< "exit 0", "signal 11"
  };

  using Body = std::function<void(int failed_run, std::ostream& log, Found* out)>;

  bool start(const Body& body) {
    int down[2], up[2];
    if (::pipe(down) != 0) return false;
    if (::pipe(up) != 0) {
      ::close(down[0]), ::close(down[1]);
      return false;
    }
    pid_ = ::fork();
    if (pid_ < 0) {
      for (int fd : {down[0], down[1], up[0], up[1]}) ::close(fd);
      return false;
    }
    if (pid_ == 0) {
      ::close(down[1]);
      ::close(up[0]);
      int failed_run = -1;
      if (!read_all(down[0], &failed_run, sizeof failed_run) || failed_run < 0) ::_exit(0);
      std::ostringstream log;
      Found f;
      body(failed_run, log, &f);
      f.log = log.str();
      std::string msg = encode(f);
      write_all(up[1], msg.data(), msg.size());
      // No destructors, no atexit handlers: this process may hold a poisoned context.
      ::_exit(0);
    }
    ::close(down[0]);
    ::close(up[1]);
    down_ = down[1];
    up_ = up[0];
    return true;
  }

  /// Asks the child to locate a failure of run `failed_run` and waits for its answer.
  Found locate(int failed_run) {
    Found f;
    if (pid_ <= 0) return f;
    write_all(down_, &failed_run, sizeof failed_run);
    ::close(down_);
    down_ = -1;
    std::string data;
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(up_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      data.append(buf, static_cast<size_t>(n));
    }
    ::close(up_);
    up_ = -1;
    f.how_it_ended = reap();
    if (!data.empty()) decode(data, &f);
    return f;
  }

  ~LocateHelper() {
    if (pid_ <= 0) return;
    int none = -1;
    if (down_ >= 0) {
      write_all(down_, &none, sizeof none);
      ::close(down_);
    }
    if (up_ >= 0) ::close(up_);
    reap();
  }

 private:
  static bool read_all(int fd, void* p, size_t n) {
    char* c = static_cast<char*>(p);
    while (n > 0) {
      ssize_t r = ::read(fd, c, n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      c += r, n -= static_cast<size_t>(r);
    }
    return true;
  }
  static void write_all(int fd, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t r = ::write(fd, c, n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return;
      c += r, n -= static_cast<size_t>(r);
    }
  }
  std::string reap() {
    int status = 0;
    pid_t r;
    do r = ::waitpid(pid_, &status, 0);
    while (r < 0 && errno == EINTR);
    pid_ = -1;
    if (r < 0) return "unknown";
    if (WIFSIGNALED(status)) return fmt::format("signal {}", WTERMSIG(status));
    return fmt::format("exit {}", WEXITSTATUS(status));
  }
  static void put(std::string& out, const std::string& s) {
    uint64_t n = s.size();
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    out += s;
  }
  static bool get(const std::string& in, size_t* pos, std::string* s) {
    uint64_t n = 0;
    if (*pos + sizeof n > in.size()) return false;
    std::memcpy(&n, in.data() + *pos, sizeof n);
    *pos += sizeof n;
    if (n > in.size() - *pos) return false;
    *s = in.substr(*pos, n);
    *pos += n;
    return true;
  }
  static std::string encode(const Found& f) {
    std::string out;
    for (const std::string& s : {std::to_string(f.launch), std::to_string(f.call), std::to_string(f.run), f.fault,
                                 f.error, std::to_string(f.error_code), f.log})
      put(out, s);
    return out;
  }
  static void decode(const std::string& in, Found* f) {
    std::string v[7];
    size_t pos = 0;
    for (std::string& s : v)
      if (!get(in, &pos, &s)) return;
    f->launch = std::stoi(v[0]);
    f->call = std::stoi(v[1]);
    f->run = std::stoi(v[2]);
    f->fault = v[3];
    f->error = v[4];
    f->error_code = std::stoi(v[5]);
    f->log = v[6];
    f->answered = true;
  }

  pid_t pid_ = -1;
  int down_ = -1, up_ = -1;
};

Expected<std::unique_ptr<Backend>> make_backend(const ReplayOptions& opt, const ReplayPlan& plan, std::ostream& log) {
  BackendOptions bo;
  bo.device = opt.device;
  bo.cuda_library = opt.cuda_library;
  bo.cublas_library = opt.cublas_library;
  bo.library_calls = !plan.library_calls.empty();
  bo.label = plan.label;
  bo.guard = opt.guard;
  bo.launch_time_limit_s = opt.time_limit_s;
  if (opt.backend == ReplayBackend::Cpu) return make_cpu_backend(bo, log);
  return make_cuda_backend(bo, log);
}

/// Dump files are "<kernel id>_<kernel name>_arg<j>.npy": one that names a kernel id this
/// model does not have, or another name for it, comes from another model.
Status check_dump_dir(const Dataflow& df_, const std::string& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  if (ec) return file_error(dir, "cannot read the dump folder: " + ec.message(), ExitCode::NoInput);
  std::vector<std::string> names;
  for (; it != end; it.increment(ec)) names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    size_t us = n.find('_'), arg = n.rfind("_arg");
    if (n.size() < 4 || n.substr(n.size() - 4) != ".npy" || us == std::string::npos || arg == std::string::npos ||
        arg <= us)
      continue;
    std::string id = n.substr(0, us), name = n.substr(us + 1, arg - us - 1);
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos || id.size() > 9) continue;
    size_t k = std::stoul(id);
    if (k >= df_.kernels.size() || df_.kernels[k].name != name)
      return file_error(dir + "/" + n,
                        k >= df_.kernels.size()
                            ? fmt::format("a dump of another model: this model has {} kernels, no kernel {}",
                                          df_.kernels.size(), k)
                            : fmt::format("a dump of another model: kernel {} of this model is {}, not {}", k,
                                          df_.kernels[k].name, name));
  }
  return Status::ok();
}

Status check_options(const Dataflow& df, const ReplayOptions& opt) {
  auto usage = [](const std::string& msg) { return Error{"kdflow replay: error: " + msg, ExitCode::Usage}; };
  if (opt.warmup < 0) return usage("--warmup must be 0 or more");
  if (opt.repeat < 1) return usage("--repeat must be 1 or more");
  if (opt.guard && opt.guard_bytes == 0) return usage("the guard needs at least one redzone byte");
  if (opt.inputs.allow_oob && !(opt.backend == ReplayBackend::Cpu && opt.guard))
    return usage("--allow-oob runs launches proven out of bounds, which only the CPU back end under --guard stops "
                 "safely: add --backend cpu --guard");
  if (opt.mode != ReplayMode::Eager && !opt.dump_dir.empty() && opt.kernel < 0)
    return usage("--dump-dir dumps after each kernel, which needs --mode eager");
  if (!(opt.time_limit_s >= 0)) return usage("--time-limit must be 0 or more");
  if (!df.library_calls.empty() && (opt.kernel >= 0 || opt.slice_first >= 0))
    return file_error(opt.inputs.label.empty() ? std::string("flow") : opt.inputs.label,
                      fmt::format("{} restores buffers from kernel dumps, which do not cover what library calls "
                                  "write; this model makes {} library calls ('{}'): replay it whole",
                                  opt.kernel >= 0 ? "--kernel" : "--nodes", df.library_calls.size(),
                                  df.library_calls[0].name),
                      ExitCode::Unavailable);
  if (opt.kernel >= 0) {
    if (static_cast<size_t>(opt.kernel) >= df.kernels.size())
      return usage(fmt::format("--kernel {}: the model has {} kernels (0..{})", opt.kernel, df.kernels.size(),
                               df.kernels.empty() ? 0 : df.kernels.size() - 1));
    if (opt.dump_dir.empty()) return usage("--kernel needs --dump-dir (the dumps of a full eager run)");
    if (opt.mode != ReplayMode::Eager)
      return usage(fmt::format("--kernel runs one kernel eagerly; drop --mode {}", to_string(opt.mode)));
  }
  if (opt.slice_first >= 0) {
    if (opt.slice_last < opt.slice_first || static_cast<size_t>(opt.slice_last) >= df.kernels.size())
      return usage("--nodes: the range runs no kernel");
    if (opt.inputs_from.empty()) return usage("--nodes needs --inputs-from DUMP_DIR (the dumps of a full eager run)");
    if (opt.kernel >= 0 || !opt.dump_dir.empty() || opt.guard || opt.mode != ReplayMode::Eager)
      return usage("--nodes runs a slice eagerly: drop --kernel, --dump-dir, --guard and --mode graph/dag");
  }
  if (opt.slice_first >= 0 && !opt.dry_run)
    if (Status s = check_dump_dir(df, opt.inputs_from); !s) return s;
  if (!opt.compare_dir.empty()) {
    if (opt.kernel >= 0 || opt.slice_first >= 0)
      return usage("--compare-dumps checks a whole eager run: drop --kernel and --nodes (a slice compares with "
                   "--inputs-from already)");
    if (!df.library_calls.empty())
      return file_error(opt.inputs.label.empty() ? std::string("flow") : opt.inputs.label,
                        fmt::format("--compare-dumps compares kernel dumps, which do not cover what library calls "
                                    "write; this model makes {} library calls ('{}')",
                                    df.library_calls.size(), df.library_calls[0].name),
                        ExitCode::Unavailable);
    if (!opt.dry_run)
      if (Status s = check_dump_dir(df, opt.compare_dir); !s) return s;
  }
  if (opt.expect.size() > df.outputs.size())
    return usage(fmt::format("{} --expect files for {} outputs", opt.expect.size(), df.outputs.size()));
  return Status::ok();
}

}  // namespace

bool replay_device_abandoned() { return g_abandoned.load(); }

Expected<ReplayReport> replay(const Dataflow& df, const ReplayOptions& opt, std::ostream& log) {
  if (Status s = check_options(df, opt); !s) return s.error();
  Expected<ReplayPlan> plan = make_plan(df, opt.inputs);
  if (!plan) return plan.error();
  ReplayReport rep;
  rep.plan = plan.take();
  for (const std::string& why : rep.plan.oob)
    log << why.substr(0, why.find(": error: ")) << ": warning: "
        << why.substr(why.find(": error: ") == std::string::npos ? 0 : why.find(": error: ") + 9)
        << " (--allow-oob: left to the guard)\n";
  rep.mode = opt.mode;
  rep.warmup = opt.warmup;
  rep.repeat = opt.repeat;
  rep.kernel = opt.kernel;
  rep.backend = opt.backend;
  if (opt.dry_run) return rep;

  // Expected outputs are read before the device is touched: a typo fails fast.
  std::vector<std::optional<NpyArray>> expected(opt.expect.size());
  if (opt.kernel < 0)
    for (size_t i = 0; i < opt.expect.size(); ++i) {
      if (opt.expect[i].empty()) continue;
      Expected<NpyArray> a = read_npy(opt.expect[i]);
      if (!a) return a.error();
      expected[i] = a.take();
    }

  int failed_run = -1;
  Error failure;
  LocateHelper helper;
  bool helper_started = false;
  {
    Expected<std::unique_ptr<Backend>> backend = make_backend(opt, rep.plan, log);
    if (!backend) return backend.error();
    // The locate pass's process is forked now, before this process opens the device.
    if ((*backend)->caps().asynchronous && !opt.locate && opt.kernel < 0 && opt.slice_first < 0)
      helper_started = helper.start([&](int run, std::ostream& child_log, LocateHelper::Found* out) {
        ReplayOptions again = opt;
        again.locate = true;
        again.mode = ReplayMode::Eager;
        again.dump_dir.clear();
        again.guard = false;
        again.warmup = 0;
        again.repeat = run;  // as many runs of the sequence as had started when it failed
        ReplayReport scratch;
        scratch.plan = rep.plan;
        Expected<std::unique_ptr<Backend>> b = make_backend(again, scratch.plan, child_log);
        if (!b) {
          out->error = b.error().message;
          out->error_code = static_cast<int>(b.error().code);
          return;
        }
        Engine engine(**b, df, again, scratch, child_log);
        Status s = engine.run();
        out->launch = engine.located_launch();
        out->call = engine.located_call();
        out->run = engine.located_run();
        out->fault = engine.located_fault().text;
        if (!s) {
          out->error = s.error().message;
          out->error_code = static_cast<int>(s.error().code);
        }
      });
    Engine engine(**backend, df, opt, rep, log);
    if (Status s = engine.run(); !s) {
      if (engine.failed_run() < 0 || opt.locate) return s.error();
      failed_run = engine.failed_run();
      failure = s.error();
    }
  }  // everything released (the context too, unless a sticky fault or a hang forbids it)
  if (failed_run >= 0) {
    // A run queued without a synchronise per step failed; the error surfaced at a later
    // call. Re-run in the child process, synchronised after every step, to name the kernel.
    log << fmt::format("replay: run {} failed ({}); re-running with a synchronise after each kernel to find which "
                       "kernel (in a separate process)\n",
                       failed_run, failure.message);
    if (!helper_started) {
      failure.message += "; the re-run to find the kernel could not be started (fork failed)";
      return failure;
    }
    LocateHelper::Found f = helper.locate(failed_run);
    log << f.log;
    if (f.launch >= 0 && static_cast<size_t>(f.launch) < rep.plan.launches.size()) {
      const PlanLaunch& l = rep.plan.launches[f.launch];
      return json_error(rep.plan.label, fmt::format("/kernels/{}", l.kernel),
                        fmt::format("kernel {} ({}) failed in run {}: {} (found by re-running with a synchronise "
                                    "after each kernel)",
                                    l.kernel, l.name, f.run, f.fault),
                        ExitCode::Software);
    }
    if (f.call >= 0 && static_cast<size_t>(f.call) < rep.plan.library_calls.size()) {
      const PlanLibraryCall& p = rep.plan.library_calls[f.call];
      return json_error(rep.plan.label, fmt::format("/library_calls/{}", p.call),
                        fmt::format("library call {} ({} of node {}) failed in run {}: {} (found by re-running with a "
                                    "synchronise after each step)",
                                    p.call, p.name, p.node, f.run, f.fault),
                        ExitCode::Software);
    }
    if (!f.answered) {
      failure.message += fmt::format("; the re-run to find the kernel ended without an answer ({})", f.how_it_ended);
      return failure;
    }
    if (!f.error.empty()) {
      failure.message += "; re-running with a synchronise after each kernel failed otherwise: " + f.error;
      return failure;
    }
    failure.message += "; re-running with a synchronise after each kernel did not fail, so the failing kernel is "
                       "unknown (timing-dependent?)";
    return failure;
  }
  rep.ran = true;

  if (rep.guard) return rep;
  if (opt.slice_first >= 0) return rep;  // the slice's checks were made as it ran
  if (opt.kernel >= 0) {
    for (size_t i = 0; i < rep.results.size(); ++i) {
      std::string file = opt.dump_dir + "/" + rep.result_names[i];
      if (!file_exists(file)) continue;
      Expected<NpyArray> want = read_npy(file);
      if (!want) return want.error();
      OutputCheck c = compare_arrays(rep.results[i], *want, opt.rtol, opt.atol);
      c.output = static_cast<int>(i);
      c.buffer = rep.result_buffers[i];
      c.name = rep.result_names[i];
      c.expect_file = file;
      rep.checks.push_back(std::move(c));
    }
    return rep;
  }
  for (size_t i = 0; i < expected.size() && i < rep.results.size(); ++i) {
    if (!expected[i]) continue;
    OutputCheck c = compare_arrays(rep.results[i], *expected[i], opt.rtol, opt.atol);
    c.output = static_cast<int>(i);
    c.buffer = rep.result_buffers[i];
    c.name = rep.result_names[i];
    c.expect_file = opt.expect[i];
    rep.checks.push_back(std::move(c));
  }
  return rep;
}

}  // namespace kdflow
