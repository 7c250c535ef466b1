// engine_checks.cpp — what a run is checked against (engine_internal.h): the guard's redzones,
// --dump-dir and --compare-dumps, node references (TVM's result for every node), the outputs.
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

/// Checks every redzone; on the first changed byte records the violation (kernel i, or
/// -1 when unknown) and returns true.
Expected<bool> Engine::guard_fired(int launch_index) {
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

Status Engine::ensure_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !is_directory(dir)) return file_error(dir, "cannot create directory: " + ec.message(), ExitCode::CantCreate);
  return Status::ok();
}

/// The buffers launch i may write, as arg indices.
std::vector<size_t> Engine::written_args(size_t i) const {
  std::vector<size_t> out;
  const PlanLaunch& l = plan_.launches[i];
  for (size_t j = 0; j < l.args.size(); ++j)
    if (l.args[j].kind == PlanArg::Kind::Pointer && writes(l.args[j].access)) out.push_back(j);
  return out;
}

Expected<NpyArray> Engine::read_buffer(int buffer) {
  const Buffer& b = df_.buffers[buffer];
  std::string data;
  if (Status s = download(bases_[plan_.buffer_allocation[buffer]], buffer_array_bytes(b), &data); !s)
    return s.error();
  return buffer_array(b, std::move(data));
}

Status Engine::dump(size_t i) {
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
Expected<OutputCheck> Engine::check_against_dump(size_t i, size_t j, const std::string& dir) {
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
Status Engine::compare_with_dumps(size_t i) {
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

int Engine::step_node(const Step& st) const {
  if (st.call) return plan_.library_calls[st.index].node;
  return df_.kernels[plan_.launches[st.index].kernel].node;
}

/// Node references: right after `node`'s last step in the checked run, every buffer of it that
/// TVM's result is listed for is compared with that result; the first node that differs is
/// recorded. The checks are grouped by node once, on first use.
Status Engine::compare_node(int node) {
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

Status Engine::outputs() {
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

}  // namespace kdflow::engine_detail
