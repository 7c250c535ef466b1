// engine.cpp — runs a replay plan through the CUDA driver API.
//
// Eager mode launches the kernels one at a time on one stream, each between two events,
// `warmup` untimed and `repeat` timed runs of the whole sequence; the first run is a
// checked run (synchronized after every kernel, so a fault names its kernel, redzones
// checked, written buffers dumped). Graph mode captures the sequence once with stream
// capture, instantiates it and times whole-graph launches, as TVM's CUDA graph executor
// would run it. Parameters are passed packed, through cuLaunchKernel's `extra`
// (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE), in the layout plan.cpp computed.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <ostream>
#include <set>

#include "cuda_driver.h"
#include "kdflow/io.h"
#include "kdflow/replay.h"

namespace kdflow {
namespace {

using namespace cuda;

constexpr unsigned char kGuardByte = 0xCB;
constexpr int64_t kDefaultSharedMemory = 48 * 1024;  // above this TVM raises the kernel's limit
constexpr size_t kJitLogBytes = 16384;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool writes(Access a) { return a == Access::Write || a == Access::ReadWrite || a == Access::Unknown; }

/// A JIT log as one line: lines joined with "; ", at most 300 characters.
std::string one_line_log(const char* log) {
  std::string s;
  for (const char* p = log; *p; ++p) {
    if (*p == '\n' || *p == '\r') {
      if (!s.empty() && s.back() != ' ') s += "; ";
    } else {
      s += *p;
    }
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == ';')) s.pop_back();
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}

class Engine {
 public:
  Engine(const Driver& d, const Dataflow& df, const ReplayOptions& opt, ReplayReport& rep, std::ostream& log)
      : d_(d), df_(df), opt_(opt), rep_(rep), plan_(rep.plan), log_(log) {}

  ~Engine() {
    // Best effort, in reverse order of creation; errors here change nothing for the user.
    if (exec_) d_.cuGraphExecDestroy(exec_);
    if (graph_) d_.cuGraphDestroy(graph_);
    for (CUevent e : events_)
      if (e) d_.cuEventDestroy(e);
    if (stream_ && d_.cuStreamDestroy) d_.cuStreamDestroy(stream_);
    for (CUdeviceptr p : bases_)
      if (p) d_.cuMemFree(p);
    if (module_) d_.cuModuleUnload(module_);
    if (ctx_) {
      if (primary_ && d_.cuDevicePrimaryCtxRelease) d_.cuDevicePrimaryCtxRelease(device_);
      else if (!primary_ && d_.cuCtxDestroy) d_.cuCtxDestroy(ctx_);
    }
  }

  Status run() {
    if (Status s = init_device(); !s) return s;
    if (Status s = load_module(); !s) return s;
    if (Status s = functions(); !s) return s;
    if (Status s = allocate(); !s) return s;
    if (opt_.kernel >= 0) return single_kernel();
    for (const PlanUpload& u : plan_.uploads)
      if (Status s = upload(u); !s) return s;
    Status s = opt_.mode == ReplayMode::Graph ? graph_mode() : eager();
    if (!s) return s;
    return outputs();
  }

 private:
  std::string label() const { return plan_.label; }
  std::string kptr(size_t i) const { return fmt::format("/kernels/{}", plan_.launches[i].kernel); }

  Error fail(CUresult r, const std::string& what, ExitCode code = ExitCode::Software) const {
    return file_error(d_.library, fmt::format("{} failed: {}", what, d_.describe(r)), code);
  }
  Error kernel_fail(size_t i, CUresult r, const std::string& what) const {
    const PlanLaunch& l = plan_.launches[i];
    return json_error(label(), kptr(i), fmt::format("{} of kernel {} ({}) failed: {}", what, l.kernel, l.name,
                                                    d_.describe(r)),
                      ExitCode::Software);
  }

  Status init_device() {
    if (CUresult r = d_.cuInit(0); r != CUDA_SUCCESS) return fail(r, "cuInit", ExitCode::Unavailable);
    if (CUresult r = d_.cuDeviceGet(&device_, opt_.device); r != CUDA_SUCCESS)
      return fail(r, fmt::format("cuDeviceGet({})", opt_.device), ExitCode::Unavailable);
    char name[256] = {0};
    if (d_.cuDeviceGetName(name, sizeof(name) - 1, device_) != CUDA_SUCCESS) std::strcpy(name, "unknown device");
    int major = 0, minor = 0;
    d_.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_);
    d_.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_);
    if (d_.cuDeviceGetAttribute(&optin_smem_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device_) !=
        CUDA_SUCCESS)
      optin_smem_ = 0;
    rep_.device = fmt::format("{} (sm_{}{})", name, major, minor);
    rep_.driver = d_.library;
    if (d_.cuDevicePrimaryCtxRetain) {
      if (CUresult r = d_.cuDevicePrimaryCtxRetain(&ctx_, device_); r != CUDA_SUCCESS)
        return fail(r, "cuDevicePrimaryCtxRetain", ExitCode::Unavailable);
      primary_ = true;
    } else if (CUresult r = d_.cuCtxCreate(&ctx_, 0, device_); r != CUDA_SUCCESS) {
      return fail(r, "cuCtxCreate", ExitCode::Unavailable);
    }
    if (CUresult r = d_.cuCtxSetCurrent(ctx_); r != CUDA_SUCCESS) return fail(r, "cuCtxSetCurrent");
    if (CUresult r = d_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS)
      return fail(r, "cuStreamCreate");
    log_ << fmt::format("replay: device {}: {}, driver {}\n", opt_.device, rep_.device, d_.library);
    return Status::ok();
  }

  Status load_module() {
    struct Candidate {
      std::string path, bytes;
      ModuleFormat format;
    };
    std::vector<Candidate> cands;
    for (const std::string& path : opt_.modules) {
      Expected<std::string> bytes = read_file(path);
      if (!bytes) return bytes.error();
      ModuleFormat f = detect_module_format(*bytes);
      if (f == ModuleFormat::Unknown)
        return file_error(path, "not a cubin (ELF), fatbin or PTX file");
      cands.push_back({path, bytes.take(), f});
    }
    if (cands.empty())
      return file_error(label(), "no device module: pass --module FILE (a cubin, fatbin or PTX)", ExitCode::NoInput);
    // Binaries first (they need no JIT), PTX as the portable fallback.
    std::stable_partition(cands.begin(), cands.end(), [](const Candidate& c) { return c.format != ModuleFormat::Ptx; });
    for (size_t i = 0; i < cands.size(); ++i) {
      const Candidate& c = cands[i];
      std::vector<char> info(kJitLogBytes, '\0'), error(kJitLogBytes, '\0');
      int options[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                       CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
      void* values[] = {info.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes - 1)), error.data(),
                        reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes - 1))};
      // std::string's buffer is NUL-terminated, as PTX text must be.
      CUresult r = d_.cuModuleLoadDataEx(&module_, c.bytes.c_str(), 4, options, values);
      if (r == CUDA_SUCCESS) {
        rep_.module = c.path;
        rep_.module_format = c.format;
        log_ << fmt::format("replay: module {} ({})\n", c.path, to_string(c.format));
        return Status::ok();
      }
      module_ = nullptr;
      error.back() = info.back() = '\0';
      for (const char* text : {error.data(), info.data()}) {
        std::string s(text);
        size_t start = 0;
        while (start < s.size()) {
          size_t end = s.find('\n', start);
          if (end == std::string::npos) end = s.size();
          if (end > start) log_ << "replay: jit: " << s.substr(start, end - start) << "\n";
          start = end + 1;
        }
      }
      std::string why = d_.describe(r);
      if (error[0]) why += "; JIT log: " + one_line_log(error.data());
      if (i + 1 < cands.size()) {
        log_ << fmt::format("replay: note: {} ({}) did not load: {}; falling back to {} ({})\n", c.path,
                            to_string(c.format), why, cands[i + 1].path, to_string(cands[i + 1].format));
        continue;
      }
      ExitCode code = r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION
                          ? ExitCode::Unavailable
                      : r == CUDA_ERROR_INVALID_PTX || r == CUDA_ERROR_INVALID_IMAGE ? ExitCode::DataError
                                                                                     : ExitCode::Software;
      return file_error(c.path, "cuModuleLoadDataEx failed: " + why, code);
    }
    return Status::ok();
  }

  Status functions() {
    std::map<std::string, uint32_t> max_smem;
    for (const PlanLaunch& l : plan_.launches) max_smem[l.name] = std::max(max_smem[l.name], l.shared_memory);
    for (size_t i = 0; i < plan_.launches.size(); ++i) {
      const PlanLaunch& l = plan_.launches[i];
      if (opt_.kernel >= 0 && l.kernel != opt_.kernel) continue;
      if (!funcs_.count(l.name)) {
        CUfunction f = nullptr;
        if (CUresult r = d_.cuModuleGetFunction(&f, module_, l.name.c_str()); r != CUDA_SUCCESS)
          return json_error(label(), kptr(i), fmt::format("kernel {} is not in {}: {}", l.name, rep_.module,
                                                          d_.describe(r)));
        funcs_[l.name] = f;
        if (max_smem[l.name] >= kDefaultSharedMemory) {
          if (CUresult r = d_.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                 static_cast<int>(max_smem[l.name]));
              r != CUDA_SUCCESS)
            return kernel_fail(i, r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
        }
      }
      CUfunction f = funcs_[l.name];
      int max_threads = 0, static_smem = 0;
      if (d_.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) == CUDA_SUCCESS &&
          max_threads > 0) {
        int64_t threads = int64_t{l.block[0]} * l.block[1] * l.block[2];
        if (threads > max_threads)
          return json_error(label(), kptr(i) + "/block",
                            fmt::format("kernel {} ({}) can run at most {} threads per block on this device, the "
                                        "launch asks for {}",
                                        l.kernel, l.name, max_threads, threads));
      }
      if (d_.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f) == CUDA_SUCCESS &&
          optin_smem_ > 0 && int64_t{static_smem} + l.shared_memory > optin_smem_)
        return json_error(label(), kptr(i) + "/dynamic_shared_memory",
                          fmt::format("kernel {} ({}) needs {} bytes of static and {} of dynamic shared memory; the "
                                      "device allows {} per block",
                                      l.kernel, l.name, static_smem, l.shared_memory, optin_smem_));
    }
    return Status::ok();
  }

  Status allocate() {
    bases_.assign(plan_.allocations.size(), 0);
    uint64_t guard = opt_.guard ? opt_.guard_bytes : 0;
    for (const PlanAllocation& a : plan_.allocations) {
      uint64_t bytes = a.bytes ? a.bytes : 4;
      CUdeviceptr p = 0;
      if (CUresult r = d_.cuMemAlloc(&p, bytes + guard); r != CUDA_SUCCESS)
        return json_error(label(), fmt::format("/buffers/{}", a.buffers.empty() ? 0 : a.buffers[0]),
                          fmt::format("cuMemAlloc of {} bytes for allocation {} failed: {}", bytes + guard, a.id,
                                      d_.describe(r)),
                          ExitCode::Software);
      bases_[a.id] = p;
      if (guard) {
        if (CUresult r = d_.cuMemsetD8(p + a.bytes, kGuardByte, guard); r != CUDA_SUCCESS)
          return fail(r, "cuMemsetD8 (redzone)");
      }
    }
    std::vector<uint64_t> bases(bases_.begin(), bases_.end());
    for (const PlanLaunch& l : plan_.launches) params_.push_back(pack_arguments(l, bases));
    return Status::ok();
  }

  Status upload(const PlanUpload& u) {
    if (CUresult r = d_.cuMemcpyHtoD(bases_[u.allocation], u.data.data(), u.data.size()); r != CUDA_SUCCESS)
      return fail(r, fmt::format("cuMemcpyHtoD of {} ({} bytes)", u.source, u.data.size()));
    return Status::ok();
  }

  Status download(CUdeviceptr src, uint64_t bytes, std::string* out) {
    out->assign(bytes, '\0');
    if (bytes == 0) return Status::ok();
    if (CUresult r = d_.cuMemcpyDtoH(out->data(), src, bytes); r != CUDA_SUCCESS)
      return fail(r, fmt::format("cuMemcpyDtoH ({} bytes)", bytes));
    return Status::ok();
  }

  CUresult launch(size_t i) {
    const PlanLaunch& l = plan_.launches[i];
    std::string& p = params_[i];
    size_t size = p.size();
    void* extra[] = {reinterpret_cast<void*>(CU_LAUNCH_PARAM_BUFFER_POINTER), p.data(),
                     reinterpret_cast<void*>(CU_LAUNCH_PARAM_BUFFER_SIZE), &size,
                     reinterpret_cast<void*>(CU_LAUNCH_PARAM_END)};
    return d_.cuLaunchKernel(funcs_.at(l.name), l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                             l.shared_memory, stream_, nullptr, size ? extra : nullptr);
  }

  Status make_events(size_t n) {
    events_.assign(n, nullptr);
    for (CUevent& e : events_)
      if (CUresult r = d_.cuEventCreate(&e, CU_EVENT_DEFAULT); r != CUDA_SUCCESS) return fail(r, "cuEventCreate");
    return Status::ok();
  }

  Status elapsed_us(CUevent a, CUevent b, double* us) {
    float ms = 0;
    if (CUresult r = d_.cuEventElapsedTime(&ms, a, b); r != CUDA_SUCCESS) return fail(r, "cuEventElapsedTime");
    *us = static_cast<double>(ms) * 1000.0;
    return Status::ok();
  }

  /// Checks every redzone; on the first changed byte records the violation (kernel i, or
  /// -1 when unknown) and returns true.
  Expected<bool> guard_fired(int launch_index) {
    if (!opt_.guard) return false;
    std::string zone;
    for (const PlanAllocation& a : plan_.allocations) {
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
        v.message = json_error(label(), kptr(launch_index),
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

  /// The buffers launch i may write, as (arg index, PlanArg).
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

  Status eager() {
    size_t n = plan_.launches.size();
    if (Status s = make_events(2 * n); !s) return s;
    if (!opt_.dump_dir.empty())
      if (Status s = ensure_dir(opt_.dump_dir); !s) return s;
    std::vector<std::vector<double>> samples(n);
    int runs = opt_.warmup + opt_.repeat;
    for (int run = 0; run < runs; ++run) {
      bool checked = run == 0;
      for (size_t i = 0; i < n; ++i) {
        if (CUresult r = d_.cuEventRecord(events_[2 * i], stream_); r != CUDA_SUCCESS) return fail(r, "cuEventRecord");
        if (CUresult r = launch(i); r != CUDA_SUCCESS) return kernel_fail(i, r, "cuLaunchKernel");
        if (CUresult r = d_.cuEventRecord(events_[2 * i + 1], stream_); r != CUDA_SUCCESS)
          return fail(r, "cuEventRecord");
        if (!checked) continue;
        if (CUresult r = d_.cuCtxSynchronize(); r != CUDA_SUCCESS) return kernel_fail(i, r, "running");
        Expected<bool> fired = guard_fired(static_cast<int>(i));
        if (!fired) return fired.error();
        if (*fired) return Status::ok();  // memory is corrupt: report and stop
        if (!opt_.dump_dir.empty())
          if (Status s = dump(i); !s) return s;
      }
      if (n && d_.cuEventSynchronize(events_[2 * n - 1]) != CUDA_SUCCESS) {
        CUresult r = d_.cuCtxSynchronize();
        return fail(r, fmt::format("run {} (a kernel failed; the first, checked run passed)", run));
      }
      if (run < opt_.warmup) continue;
      for (size_t i = 0; i < n; ++i) {
        double us = 0;
        if (Status s = elapsed_us(events_[2 * i], events_[2 * i + 1], &us); !s) return s;
        samples[i].push_back(us);
      }
    }
    if (runs > 1) {
      Expected<bool> fired = guard_fired(-1);
      if (!fired) return fired.error();
    }
    rep_.total_median_us = rep_.total_min_us = 0;
    for (size_t i = 0; i < n; ++i) {
      KernelTime t;
      t.kernel = plan_.launches[i].kernel;
      t.samples = static_cast<int>(samples[i].size());
      t.median_us = median(samples[i]);
      t.min_us = samples[i].empty() ? 0 : *std::min_element(samples[i].begin(), samples[i].end());
      rep_.total_median_us += t.median_us;
      rep_.total_min_us += t.min_us;
      rep_.times.push_back(t);
    }
    return Status::ok();
  }

  Status graph_mode() {
    size_t n = plan_.launches.size();
    if (Status s = make_events(2); !s) return s;
    if (CUresult r = d_.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL); r != CUDA_SUCCESS)
      return fail(r, "cuStreamBeginCapture");
    for (size_t i = 0; i < n; ++i) {
      if (CUresult r = launch(i); r != CUDA_SUCCESS) {
        d_.cuStreamEndCapture(stream_, &graph_);
        return kernel_fail(i, r, "cuLaunchKernel (stream capture)");
      }
    }
    if (CUresult r = d_.cuStreamEndCapture(stream_, &graph_); r != CUDA_SUCCESS) return fail(r, "cuStreamEndCapture");
    if (CUresult r = d_.cuGraphInstantiate(&exec_, graph_, 0); r != CUDA_SUCCESS) return fail(r, "cuGraphInstantiate");
    std::vector<double> samples;
    for (int run = 0; run < opt_.warmup + opt_.repeat; ++run) {
      if (CUresult r = d_.cuEventRecord(events_[0], stream_); r != CUDA_SUCCESS) return fail(r, "cuEventRecord");
      if (CUresult r = d_.cuGraphLaunch(exec_, stream_); r != CUDA_SUCCESS) return fail(r, "cuGraphLaunch");
      if (CUresult r = d_.cuEventRecord(events_[1], stream_); r != CUDA_SUCCESS) return fail(r, "cuEventRecord");
      if (CUresult r = d_.cuEventSynchronize(events_[1]); r != CUDA_SUCCESS)
        return fail(r, fmt::format("graph launch {} (replay with --mode eager to find the failing kernel)", run));
      if (run == 0) {
        Expected<bool> fired = guard_fired(-1);
        if (!fired) return fired.error();
        if (*fired) return Status::ok();
      }
      if (run < opt_.warmup) continue;
      double us = 0;
      if (Status s = elapsed_us(events_[0], events_[1], &us); !s) return s;
      samples.push_back(us);
    }
    rep_.total_median_us = median(samples);
    rep_.total_min_us = samples.empty() ? 0 : *std::min_element(samples.begin(), samples.end());
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
      if (CUresult r = d_.cuMemsetD8(bases_[al], 0, plan_.allocations[al].bytes); r != CUDA_SUCCESS)
        return fail(r, "cuMemsetD8");
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
        if (CUresult r = d_.cuMemcpyHtoD(bases_[a.allocation], arr->data.data(), arr->data.size()); r != CUDA_SUCCESS)
          return fail(r, "cuMemcpyHtoD of " + file);
        ++restored;
      }
    }
    log_ << fmt::format("replay: kernel {} ({}) alone: {} allocations restored from {} dumps and {} uploads\n",
                        target.kernel, target.name, touched.size(), restored,
                        std::count_if(plan_.uploads.begin(), plan_.uploads.end(),
                                      [&](const PlanUpload& u) { return touched.count(u.allocation) > 0; }));
    if (Status s = make_events(2); !s) return s;
    std::vector<double> samples;
    for (int run = 0; run < 1 + opt_.warmup + opt_.repeat; ++run) {
      if (CUresult r = d_.cuEventRecord(events_[0], stream_); r != CUDA_SUCCESS) return fail(r, "cuEventRecord");
      if (CUresult r = launch(k); r != CUDA_SUCCESS) return kernel_fail(k, r, "cuLaunchKernel");
      if (CUresult r = d_.cuEventRecord(events_[1], stream_); r != CUDA_SUCCESS) return fail(r, "cuEventRecord");
      if (CUresult r = d_.cuEventSynchronize(events_[1]); r != CUDA_SUCCESS) return kernel_fail(k, r, "running");
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
      if (Status s = elapsed_us(events_[0], events_[1], &us); !s) return s;
      samples.push_back(us);
    }
    KernelTime t;
    t.kernel = target.kernel;
    t.samples = static_cast<int>(samples.size());
    t.median_us = median(samples);
    t.min_us = samples.empty() ? 0 : *std::min_element(samples.begin(), samples.end());
    rep_.times.push_back(t);
    rep_.total_median_us = t.median_us;
    rep_.total_min_us = t.min_us;
    return Status::ok();
  }

  const Driver& d_;
  const Dataflow& df_;
  const ReplayOptions& opt_;
  ReplayReport& rep_;
  const ReplayPlan& plan_;
  std::ostream& log_;

  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  bool primary_ = false;
  int optin_smem_ = 0;
  CUmodule module_ = nullptr;
  std::map<std::string, CUfunction> funcs_;
  std::vector<CUdeviceptr> bases_;
  std::vector<std::string> params_;
  CUstream stream_ = nullptr;
  std::vector<CUevent> events_;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

Status check_options(const Dataflow& df, const ReplayOptions& opt) {
  auto usage = [](const std::string& msg) { return Error{"kdflow replay: error: " + msg, ExitCode::Usage}; };
  if (opt.warmup < 0) return usage("--warmup must be 0 or more");
  if (opt.repeat < 1) return usage("--repeat must be 1 or more");
  if (opt.guard && opt.guard_bytes == 0) return usage("the guard needs at least one redzone byte");
  if (opt.mode == ReplayMode::Graph && !opt.dump_dir.empty() && opt.kernel < 0)
    return usage("--dump-dir dumps after each kernel, which needs --mode eager");
  if (opt.kernel >= 0) {
    if (static_cast<size_t>(opt.kernel) >= df.kernels.size())
      return usage(fmt::format("--kernel {}: the model has {} kernels (0..{})", opt.kernel, df.kernels.size(),
                               df.kernels.empty() ? 0 : df.kernels.size() - 1));
    if (opt.dump_dir.empty()) return usage("--kernel needs --dump-dir (the dumps of a full eager run)");
    if (opt.mode == ReplayMode::Graph) return usage("--kernel runs one kernel eagerly; drop --mode graph");
  }
  if (opt.expect.size() > df.outputs.size())
    return usage(fmt::format("{} --expect files for {} outputs", opt.expect.size(), df.outputs.size()));
  return Status::ok();
}

}  // namespace

Expected<ReplayReport> replay(const Dataflow& df, const ReplayOptions& opt, std::ostream& log) {
  if (Status s = check_options(df, opt); !s) return s.error();
  Expected<ReplayPlan> plan = make_plan(df, opt.inputs);
  if (!plan) return plan.error();
  ReplayReport rep;
  rep.plan = plan.take();
  rep.mode = opt.mode;
  rep.warmup = opt.warmup;
  rep.repeat = opt.repeat;
  rep.kernel = opt.kernel;
  if (opt.dry_run) return rep;

  // Expected outputs are read before the GPU is touched: a typo fails fast.
  std::vector<std::optional<NpyArray>> expected(opt.expect.size());
  if (opt.kernel < 0)
    for (size_t i = 0; i < opt.expect.size(); ++i) {
      if (opt.expect[i].empty()) continue;
      Expected<NpyArray> a = read_npy(opt.expect[i]);
      if (!a) return a.error();
      expected[i] = a.take();
    }

  Expected<cuda::Driver> driver = cuda::load_driver(opt.cuda_library);
  if (!driver) return driver.error();
  {
    Engine engine(*driver, df, opt, rep, log);
    if (Status s = engine.run(); !s) return s.error();
  }  // everything released before the report is returned
  rep.ran = true;

  if (rep.guard) return rep;
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
