// engine_device.cpp — the device's lifecycle for the engine (engine_internal.h): modules, prepare,
// the memory check, allocation, binding, uploads and downloads, waits against the time limit.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "engine_internal.h"
#include "kdflow/analysis/launch_graph.h"
#include "kdflow/support/io.h"

namespace kdflow::engine_detail {

/// Waits for marker `m` by polling, at most the time limit for this wait. On a timeout,
/// `hung_what` names what is being waited on; the back end is then abandoned.
Status Engine::wait(size_t m, const std::function<Error()>& hung_what, Fault* result) {
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

Error Engine::hung_kernel(size_t i) const {
  const PlanLaunch& l = plan_.launches[i];
  return json_error(label(), fmt::format("/kernels/{}", l.kernel),
                    fmt::format("kernel {} ({}) did not finish within {:g} s (--time-limit); it may be hung "
                                "(wrong scalars?); nothing was written",
                                l.kernel, l.name, opt_.time_limit_s),
                    ExitCode::DataError);
}

Error Engine::hung_step(const Step& s) const {
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
Status Engine::settle() {
  if (Fault f = b_.synchronize(); !f.ok()) return fail(f, " (after the uploads)");
  return Status::ok();
}

/// The module files, grouped into device modules: files named alike but for the extension
/// (device.cubin, device.ptx) are one module's alternatives; files named otherwise
/// (device_0.cubin, device_1.cubin: a Relax build) are separate modules, all loaded.
Status Engine::load_modules() {
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
  // A flow with no kernel (every operation a VM builtin) needs no module: nothing is loaded.
  if (groups.empty() && plan_.launches.empty()) return Status::ok();
  if (groups.empty())
    return file_error(label(), "no device module: pass --module FILE (a cubin, fatbin or PTX)", ExitCode::NoInput);
  std::map<std::string, std::set<uint64_t>> threads;
  std::map<std::string, std::set<std::array<uint32_t, 3>>> grids, blocks;
  for (const PlanLaunch& l : plan_.launches) {
    threads[l.name].insert(uint64_t{l.block[0]} * l.block[1] * l.block[2]);
    grids[l.name].insert({l.grid[0], l.grid[1], l.grid[2]});
    blocks[l.name].insert({l.block[0], l.block[1], l.block[2]});
  }
  for (ModuleAlternatives& g : groups) g.block_threads = threads, g.grids = grids, g.blocks = blocks;
  return b_.load_modules(groups, &rep_.module, &rep_.module_format);
}

/// Every kernel that will run resolved in the modules and checked against the device.
Status Engine::prepare() {
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
    if (plan_.library_calls[c].collective) continue;  // the engine's, between the ranks
    LibraryCallArgs a;
    a.index = c;
    a.call = &plan_.library_calls[c];
    calls.push_back(a);
  }
  return b_.prepare(ls, calls);
}

/// Hostile flows stop before allocation: the allocations must fit the memory the back end
/// has (the device's total memory; the host's available memory on the CPU).
Status Engine::check_memory() {
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

Status Engine::allocate() {
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
Status Engine::bind() {
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
    if (p.collective) {
      if (!hub_)
        return json_error(label(), fmt::format("/library_calls/{}", p.call),
                          fmt::format("library call {} is a collective ({}), which only a replay of every rank runs "
                                      "(the flow states no ranks)",
                                      p.call, p.name),
                          ExitCode::DataError);
      continue;
    }
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
                                             calls[0].call->call, calls[0].call->name),
                        ExitCode::Unavailable);
    rep_.cublas = b_.info().library_calls;
  }
  if (Status s = b_.bind(ls, calls); !s) return s;
  if (opt_.mode != ReplayMode::Eager && !plan_.host_copies.empty()) {
    std::vector<HostCopyArgs> copies;
    for (size_t c = 0; c < plan_.host_copies.size(); ++c) {
      const PlanHostCopy& h = plan_.host_copies[c];
      copies.push_back({c, bases_[h.allocation] + h.offset, &h.data});
    }
    if (Status s = b_.bind_host_copies(copies); !s) return s;
  }
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
  // Host copies: before the first step of a later node (or after the last step).
  copies_before_.assign(seq_.size() + 1, {});
  for (size_t c = 0; c < plan_.host_copies.size(); ++c) {
    size_t s = 0;
    while (s < seq_.size() && step_node(seq_[s]) <= plan_.host_copies[c].node) ++s;
    copies_before_[s].push_back(c);
  }
  return Status::ok();
}

Status Engine::upload(const PlanUpload& u) {
  if (Fault f = b_.upload(bases_[u.allocation], u.data.data(), u.data.size()); !f.ok())
    return fail(f, fmt::format(" of {} ({} bytes)", u.source, u.data.size()));
  return Status::ok();
}

Status Engine::download(DevicePtr src, uint64_t bytes, std::string* out) {
  out->assign(bytes, '\0');
  if (bytes == 0) return Status::ok();
  if (Fault f = b_.download(out->data(), src, bytes); !f.ok()) return fail(f, fmt::format(" ({} bytes)", bytes));
  return Status::ok();
}

}  // namespace kdflow::engine_detail

namespace kdflow::engine_detail {

Fault Engine::collective(size_t i) {
  const PlanLibraryCall& p = plan_.library_calls[i];
  auto fault = [&](const std::string& text) {
    Fault f;
    f.code = 1;
    f.api = "collective";
    f.text = text;
    return f;
  };
  if (!hub_) return fault("a collective outside a replay of every rank");
  CollectiveTurn turn;
  turn.call = p.call;
  turn.what = &*p.collective;
  // NCCL on the devices: every rank first meets the others on the host (the same call, sizes
  // that agree: a rank that stopped or went elsewhere stops every rank here, not in a kernel
  // waiting on the GPU for ever), then queues the collective in its stream's order.
  if (b_.caps().device_collectives) {
    turn.on_device = true;
    turn.send_bytes = p.a.buffer >= 0 ? p.a.bytes : 0;
    turn.recv_bytes = p.c.buffer >= 0 ? p.c.bytes : 0;
    std::string none;
    if (Status s = hub_->exchange(rank_, std::move(turn), &none); !s) return fault(s.error().message);
    return b_.collective(p, p.a.buffer >= 0 ? bases_[p.a.allocation] + p.a.offset : 0,
                         p.c.buffer >= 0 ? bases_[p.c.allocation] + p.c.offset : 0);
  }
  if (Fault f = b_.synchronize(); !f.ok()) return f;
  if (p.a.buffer >= 0) {
    turn.send.assign(p.a.bytes, '\0');
    if (p.a.bytes)
      if (Fault f = b_.download(turn.send.data(), bases_[p.a.allocation] + p.a.offset, p.a.bytes); !f.ok()) return f;
  }
  turn.recv_bytes = p.c.buffer >= 0 ? p.c.bytes : 0;
  std::string recv;
  if (Status s = hub_->exchange(rank_, std::move(turn), &recv); !s) return fault(s.error().message);
  if (p.c.buffer >= 0 && !recv.empty())
    if (Fault f = b_.upload_ordered(bases_[p.c.allocation] + p.c.offset, recv.data(), recv.size()); !f.ok())
      return f;
  return Fault::none();
}

}  // namespace kdflow::engine_detail
